#!/bin/sh
# bench/gemm.sh — petrel's matmul beside llama.cpp's at the same shapes (`make bench`).
#
# The shapes are those of llama.cpp's `test-backend-ops perf -o MUL_MAT` cases: a weight
# matrix of m = 4096 rows by k = 14336 (Q4_0, Q5_0, Q8_0, Q2_K, Q4_K, Q6_K) times n = 1, 4,
# 8 and 512 activation rows, on half the processors of the machine, at least one (the thread
# count that tool gives its CPU backend).
# petrel: `bench_petrel gemm` (mm_run: the kernels a decode step and a prompt use, activation
# quantisation included). llama.cpp: `test-backend-ops perf -o MUL_MAT -b CPU`, which times
# ggml's mul_mat graph on weights in ggml's own layout (its load-time repacking for some
# types is not applied there; llama-bench's figures in bench/inmem.sh include it). Both print
# GFLOP/s (2 m k n per second); the ratio is petrel / llama.cpp. Runs alternate,
# GEMM_RUNS rounds (2), best of each side; the load average is printed beside each round.
#
# Environment: LLAMA_CPP_DIR (a llama.cpp build dir with bin/test-backend-ops, built with
# -DLLAMA_BUILD_TESTS=ON; unset or missing: petrel only), GEMM_RUNS.
set -eu

BUILD=${BUILD:-build}
RUNS=${GEMM_RUNS:-2}
[ -x "$BUILD/bench_petrel" ] || { echo "bench/gemm.sh: $BUILD/bench_petrel is missing (run make bench)" >&2; exit 1; }
TBO=""
if [ -n "${LLAMA_CPP_DIR:-}" ] && [ -x "$LLAMA_CPP_DIR/bin/test-backend-ops" ]; then
    TBO="$LLAMA_CPP_DIR/bin/test-backend-ops"
    export LD_LIBRARY_PATH="$LLAMA_CPP_DIR/bin:$LLAMA_CPP_DIR/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
else
    echo "bench/gemm.sh: no \$LLAMA_CPP_DIR/bin/test-backend-ops: petrel only" >&2
fi

TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
load1() { cut -d' ' -f1 /proc/loadavg; }

i=0
while [ $i -lt "$RUNS" ]; do
    echo "round $((i + 1)): petrel load $(load1)" >>"$TMP/loads"
    # "Q4_K         178.65    230.10    258.45    274.85" -> "Q4_K 1 178.65" ...
    "$BUILD/bench_petrel" gemm | awk '$1 ~ /^Q[0-9]/ && NF == 5 {
        print $1, 1, $2; print $1, 4, $3; print $1, 8, $4; print $1, 512, $5 }' >>"$TMP/p"
    if [ -n "$TBO" ]; then
        echo "round $((i + 1)): llama.cpp load $(load1)" >>"$TMP/loads"
        # "MUL_MAT(type_a=q4_K,type_b=f32,m=4096,n=1,k=14336,...): ... - 71.56 GFLOPS"
        "$TBO" perf -o MUL_MAT -b CPU \
            -p "type_a=(q4_0|q5_0|q8_0|q2_K|q4_K|q6_K),type_b=f32,m=4096,n=(1|4|8|512),k=14336," 2>&1 |
            sed 's/\x1b\[[0-9;]*m//g' |
            sed -n 's/.*MUL_MAT(type_a=\([a-zA-Z0-9_]*\),type_b=f32,m=4096,n=\([0-9]*\),k=14336,.* \([0-9.]*\) [GT]FLOPS.*/\1 \2 \3/p' |
            awk '{ t = toupper($1); sub(/_K$/, "_K", t); print t, $2, $3 }' >>"$TMP/l" || true
    fi
    i=$((i + 1))
done

# best of the rounds per (type, n)
best() { awk '{ k = $1 " " $2; if (!(k in b) || $3 > b[k]) b[k] = $3 } END { for (k in b) print k, b[k] }' "$1"; }
best "$TMP/p" >"$TMP/pb"
[ -s "$TMP/l" ] && best "$TMP/l" >"$TMP/lb" || : >"$TMP/lb"

echo
NT=$(( $(nproc) / 2 )); [ "$NT" -ge 1 ] || NT=1
echo "== matmul at llama.cpp's MUL_MAT perf shape (m=4096, k=14336), $NT thread(s), GFLOP/s, best of $RUNS"
echo "   $(date -u '+%Y-%m-%d %H:%M UTC'); load average now $(cut -d' ' -f1-3 /proc/loadavg)"
sed 's/^/   /' "$TMP/loads"
printf "   %-6s %6s %10s %10s %7s\n" type n petrel llama.cpp ratio
for t in Q4_0 Q5_0 Q8_0 Q2_K Q4_K Q6_K; do
    for n in 1 4 8 512; do
        p=$(awk -v t="$t" -v n="$n" '$1 == t && $2 == n { print $3 }' "$TMP/pb")
        l=$(awk -v t="$t" -v n="$n" '$1 == t && $2 == n { print $3 }' "$TMP/lb")
        r=$(awk -v a="${p:-0}" -v b="${l:-0}" 'BEGIN { if (a > 0 && b > 0) printf "%.2fx", a / b; else printf "-" }')
        printf "   %-6s %6s %10s %10s %7s\n" "$t" "$n" "${p:--}" "${l:--}" "$r"
    done
done
exit 0
