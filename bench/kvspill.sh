#!/bin/sh
# bench/kvspill.sh — KV beyond RAM (issue 16, point 3), run by `make bench BENCH_KVSPILL=1`:
# decode speed after a long context with most of the KV cache on the SSD (--kv-ram-mb small:
# the newest positions in RAM, the rest in the spill file, written back and dropped from the
# page cache after every step, so each step reads what its attention selects from disk) vs
# the same run with the KV all in RAM. One run of each, alternated, KVSPILL_RUNS times, the
# page cache dropped before each (root: /proc/sys/vm/drop_caches; else not dropped, said so);
# reported: each run's decode tok/s with the load average beside it and its KV line (bytes
# in RAM and on disk after the run), the medians and their ratio (spilled / in RAM).
#
# The model (made in build/bench/ when missing): a synthetic glm-dsa small enough that an
# 8k-token prefill is practical on two shared cores (4 trunk layers, 4 heads, 16 small
# experts), with GLM-5's real MLA cache rows: kv_lora 512 + rope 64 (1152 bytes a position a
# layer at f16) and the DSA indexer's top-k 2048 of 8 x 128 keys, so each decode step reads
# 2048 selected latent rows per layer out of the 8192 on disk.
#
#   sudo BUILD=build sh bench/kvspill.sh        (make bench passes BUILD)
# Environment: KVSPILL_CTX (prompt tokens, 8192), KVSPILL_GEN (tokens decoded, 32),
# KVSPILL_RUNS (3), KVSPILL_KV_RAM_MB (the spilled run's RAM share, 4), KVSPILL_THREADS
# (nproc), KVSPILL_DIR (where the spill file's folder is made, /var/tmp).
set -eu

BUILD=${BUILD:-build}
PETREL=$BUILD/petrel
N=${KVSPILL_CTX:-8192}
GEN=${KVSPILL_GEN:-32}
RUNS=${KVSPILL_RUNS:-3}
KVRAM=${KVSPILL_KV_RAM_MB:-4}
THREADS=${KVSPILL_THREADS:-$(nproc)}
MODEL=build/bench/glm-dsa-kvspill.gguf
die() { echo "bench/kvspill.sh: $*" >&2; exit 1; }
[ -x "$PETREL" ] || die "$PETREL is missing (run make bench)"
if [ ! -f "$MODEL" ]; then
    mkdir -p build/bench
    echo "bench/kvspill.sh: generating $MODEL" >&2
    "$BUILD/mkmodel" -o "$MODEL" --layers 4 --dense 1 --embd 1024 --heads 4 --q-lora 256 \
        --kv-lora 512 --qk-rope 64 --qk-nope 64 --v-head 64 --experts 16 --used 4 --ff-exp 256 \
        --ff 1024 --vocab 4096 --idx-top-k 2048 --idx-heads 8 --idx-dim 128 -t "$THREADS" >&2
fi
TMP=$(mktemp -d -p "${KVSPILL_DIR:-/var/tmp}" petrel-kvspill.XXXXXX)
trap 'rm -rf "$TMP"' EXIT INT TERM
# N pseudo-random token ids (the same every run)
IDS=$(awk -v n="$N" 'BEGIN { srand(7); for (i = 0; i < n; i++) printf "%s%d", (i ? "," : ""), 3 + int(rand() * 4000) }')
DROP=no
if [ -w /proc/sys/vm/drop_caches ]; then DROP=yes; fi

run() { # $1 name, then extra flags
    name=$1
    shift
    sync
    [ "$DROP" = yes ] && echo 3 >/proc/sys/vm/drop_caches
    load=$(cut -d' ' -f1 /proc/loadavg)
    XDG_CACHE_HOME=$TMP "$PETREL" generate -m "$MODEL" --tokens "$IDS" -n "$GEN" -t "$THREADS" \
        -c $((N + GEN + 16)) --stats "$@" >"$TMP/$name.out" 2>"$TMP/$name.err" ||
        { cat "$TMP/$name.err" >&2; die "$name failed"; }
    # "prompt 8192 tokens in 162.585 s (50.4 tok/s); generated 32 in 1.014 s (30.56 tok/s)"
    tps=$(sed -n 's/.*generated [0-9]* in [0-9.]* s (\([0-9.]*\) tok\/s).*/\1/p' "$TMP/$name.err")
    pre=$(sed -n 's/.*prompt [0-9]* tokens in \([0-9.]*\) s.*/\1/p' "$TMP/$name.err")
    [ -n "$tps" ] || { cat "$TMP/$name.err" >&2; die "$name: no decode figure"; }
    echo "$tps $load" >"$TMP/$name.fig"
    echo "  $name: decode $tps tok/s (prefill $pre s) [load $load]; $(sed -n 's/^petrel: \(KV .*\)/\1/p' "$TMP/$name.err")"
}
median() { sort -n | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }'; }

echo "bench/kvspill.sh: $N-token context, $GEN tokens decoded, $THREADS threads, page cache dropped: $DROP"
i=1
while [ "$i" -le "$RUNS" ]; do
    run "ram-$i"
    run "ssd-$i" --kv-ram-mb "$KVRAM"
    i=$((i + 1))
done
R=$(cat "$TMP"/ram-*.fig | cut -d' ' -f1 | median)
S=$(cat "$TMP"/ssd-*.fig | cut -d' ' -f1 | median)
grep -o 'spill: [^)]*' "$TMP/ssd-1.err" | head -1 | sed 's/^/  spilled plan: /'
awk -v r="$R" -v s="$S" 'BEGIN { printf "kvspill: decode median %.2f tok/s in RAM, %.2f tok/s spilled: ratio %.3f (target >= 0.8)\n", r, s, s / r }'
