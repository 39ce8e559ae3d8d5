#!/bin/sh
# arm64_icount.sh — instructions each arm64 dot-product kernel executes per block, counted
# under qemu-user (not timed: an emulator's speed says nothing about a real core's, but the
# instruction count is the program's own).
#
# tools/kernel_icount.c is linked statically (fixed addresses) and run under
# `qemu-aarch64 -singlestep -d exec,nochain -dfilter RANGE`, which logs one line per executed
# instruction inside RANGE: the kernel objects' .text (dot_dotprod.o, dot_i8mm.o, dot_neon.o; for the
# scalar level dispatch.o .. quant_iq.o), read from the link map. Two runs per kernel, 4 and
# 12 blocks; everything outside the kernel call is the same in both, so the difference / 8
# is the cost of one block (F32/F16/BF16: of 256 weights).
# Columns: dot = the single-row order (qt_dot_upto), mm = the engine's matmul kernel
# (qt_mm_dot_upto: the panel order for the IQ types and F32), mm4 = its four-row form per
# block of all four rows, and per row; an i8mm row (only for the types with a tile kernel;
# "=": the level runs the dotprod level's one- and four-row kernels), tile = the 4 x 4 kernel
# (qt_mm_tile_upto, dot_i8mm.c: smmla) per block of all sixteen (weight row, activation row)
# pairs, and per pair, the figure to set beside mm4/row. Needs the arm64 cross toolchain and qemu-user
# (tools/deps-arm64.sh); `make arm64-icount`. Usage: sh bench/arm64_icount.sh [TYPE...]
set -eu
CC=${CROSS_CC:-aarch64-linux-gnu-gcc}
QEMU=${QEMU_ARM64:-qemu-aarch64-static}
for tool in "$CC" "$QEMU"; do
    if ! command -v "${tool%% *}" >/dev/null 2>&1; then
        echo "arm64_icount: skipped: $tool not installed (tools/deps-arm64.sh)"
        exit 0
    fi
done
make --no-print-directory CROSS=aarch64 build/arm64/libpetrel.a build/arm64/tools/kernel_icount.o >/dev/null
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
$CC -O2 -static -Wl,-Map="$tmp/map" -o "$tmp/icount" build/arm64/tools/kernel_icount.o \
    build/arm64/libpetrel.a -lm -pthread
# "lo..hi" of the .text of the objects named (in link order, contiguous)
range() {
    set -- $(awk -v first="$1" -v last="$2" '
        $1 == ".text" && $4 ~ "\\(" first "\\)" { lo = $2 }
        $1 == ".text" && $4 ~ "\\(" last "\\)" { hi = $2; size = $3 }
        END { if (lo && hi) print lo, hi, size }' "$tmp/map")
    [ $# -eq 3 ] && printf '%s..0x%x\n' "$1" $(($2 + $3 - 1))
}
simd=$(range dot_dotprod.o dot_neon.o)
scalar=$(range dispatch.o quant_iq.o)
[ -n "$simd" ] && [ -n "$scalar" ] || { echo "arm64_icount: kernel objects not found in the link map" >&2; exit 1; }
count() { # TYPE LEVEL SHAPE NBLOCKS -> executed instructions in the kernel range
    r=$simd
    [ "$2" = scalar ] && r=$scalar
    QEMU_LD_PREFIX=/ $QEMU -cpu max -singlestep -dfilter "$r" -d exec,nochain -D "$tmp/log" \
        "$tmp/icount" "$@" >/dev/null 2>&1 || { echo -; return; }
    grep -c '^Trace' "$tmp/log"
}
per_block() {
    a=$(count "$1" "$2" "$3" 4)
    b=$(count "$1" "$2" "$3" 12)
    if [ "$a" = - ] || [ "$b" = - ]; then echo -; else echo $(((b - a) / 8)); fi
}
types=${*:-"F16 BF16 F32 Q8_0 Q4_0 Q4_1 Q5_0 Q5_1 MXFP4 Q2_K Q3_K Q4_K Q5_K Q6_K IQ4_NL IQ4_XS IQ1_S IQ1_M IQ2_XXS IQ2_XS IQ2_S IQ3_XXS IQ3_S"}
printf '%-8s %-8s %8s %8s %8s %8s %8s %9s\n' type level dot mm mm4 mm4/row tile tile/pair
for t in $types; do
    for level in scalar neon dotprod i8mm; do
        if [ $level = i8mm ]; then
            tile=$(per_block "$t" i8mm tile)
            [ "$tile" = - ] || printf '%-8s %-8s %8s %8s %8s %8s %8s %9s\n' "$t" i8mm = = = = \
                "$tile" $((tile / 16))
            continue
        fi
        d=$(per_block "$t" "$level" dot)
        m=$(per_block "$t" "$level" mm)
        m4=-
        row=-
        if [ $level != scalar ]; then
            m4=$(per_block "$t" "$level" mm4)
            [ "$m4" != - ] && row=$((m4 / 4))
        fi
        printf '%-8s %-8s %8s %8s %8s %8s %8s %9s\n' "$t" "$level" "$d" "$m" "$m4" "$row" - -
    done
done
