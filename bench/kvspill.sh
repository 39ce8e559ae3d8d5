#!/bin/sh
# bench/kvspill.sh — KV beyond RAM (issue 16, point 3), run by `make bench BENCH_KVSPILL=1`:
# decode speed after a long context with most of the KV cache on the SSD (--kv-ram-mb small:
# half the share holds the newest positions, half is the buffer each layer step reads its
# selected spilled rows into with O_DIRECT, so each step reads from disk what its selection
# picks; without O_DIRECT, half caches the spilled pages recent steps selected) vs the same run with
# the KV all in RAM. One run of each, alternated, KVSPILL_RUNS times, the page cache dropped
# before each (root: /proc/sys/vm/drop_caches; else not dropped, said so); reported: each
# run's decode tok/s with the load average beside it and its KV line (bytes in RAM and on
# disk after the run, the rows, reads and bytes of a layer step's direct reads), the medians and their ratio
# (spilled / in RAM), and whether both runs decoded the same token ids (they must: the rows
# are the same bytes wherever they live).
#
# The prompt's KV is computed once and kept (`petrel generate --session FILE`, in
# build/bench/): every run restores it from that file instead of evaluating the prompt again,
# so a 32k-token context costs its prefill once, not once a run (the file is checked against
# the model, the KV types and the ids; a stale one is evaluated again and rewritten).
#
# KVSPILL_MODEL picks the model (made in build/bench/ when missing):
#   stream  (default) glm-dsa-kvstream.gguf, 1.3 GiB: 4 trunk layers (1 dense), 128 experts of
#           2.65 MB (Q4_K, width 1536), top-8, streamed from the GGUF with O_DIRECT through
#           KVSPILL_SLOTS (16) cache slots a layer, so every decode step reads ~60-100 MB of
#           experts from the SSD, as a model larger than RAM does; 32768-token context.
#   inmem   glm-dsa-kvspill.gguf, 0.05 GiB, in RAM (16 experts of width 256): the KV reads
#           against a small compute; 8192-token context.
# Both have GLM-5's MLA cache rows (kv_lora 512 + rope 64: 1152 bytes a position a layer at
# f16) and its DSA indexer (top-k 2048 of 8 x 128 keys): each step reads 2048 selected latent
# rows a layer.
#
#   sudo BUILD=build sh bench/kvspill.sh        (make bench passes BUILD)
# Environment: KVSPILL_MODEL (stream), KVSPILL_CTX (prompt tokens: 32768 / 8192), KVSPILL_GEN
# (tokens decoded, 64), KVSPILL_RUNS (3), KVSPILL_KV_RAM_MB (the spilled run's RAM share, 32),
# KVSPILL_SLOTS (16), KVSPILL_THREADS (nproc), KVSPILL_DIR (where the spill file's folder is
# made, /var/tmp).
set -eu

BUILD=${BUILD:-build}
PETREL=$BUILD/petrel
KIND=${KVSPILL_MODEL:-stream}
GEN=${KVSPILL_GEN:-64}
RUNS=${KVSPILL_RUNS:-3}
KVRAM=${KVSPILL_KV_RAM_MB:-32}
THREADS=${KVSPILL_THREADS:-$(nproc)}
die() { echo "bench/kvspill.sh: $*" >&2; exit 1; }
[ -x "$PETREL" ] || die "$PETREL is missing (run make bench)"
MLA="--heads 4 --q-lora 256 --kv-lora 512 --qk-rope 64 --qk-nope 64 --v-head 64 --ff 1024
     --vocab 4096 --idx-top-k 2048 --idx-heads 8 --idx-dim 128"
case "$KIND" in
stream)
    MODEL=build/bench/glm-dsa-kvstream.gguf
    N=${KVSPILL_CTX:-32768}
    MK="--layers 4 --dense 1 --embd 1024 --experts 128 --used 8 --ff-exp 1536 --expert-type q4_k --raw-experts"
    FLAGS="--expert-slots ${KVSPILL_SLOTS:-16} --no-pin"
    ;;
inmem)
    MODEL=build/bench/glm-dsa-kvspill.gguf
    N=${KVSPILL_CTX:-8192}
    MK="--layers 4 --dense 1 --embd 1024 --experts 16 --used 4 --ff-exp 256"
    FLAGS=""
    ;;
*) die "KVSPILL_MODEL '$KIND': expected stream or inmem" ;;
esac
if [ ! -f "$MODEL" ]; then
    mkdir -p build/bench
    echo "bench/kvspill.sh: generating $MODEL" >&2
    # shellcheck disable=SC2086
    "$BUILD/mkmodel" -o "$MODEL" $MK $MLA -t "$THREADS" >&2
fi
SESSION=build/bench/kvspill-$KIND-$N.session
TMP=$(mktemp -d -p "${KVSPILL_DIR:-/var/tmp}" petrel-kvspill.XXXXXX)
trap 'rm -rf "$TMP"' EXIT INT TERM
# N pseudo-random token ids (the same every run), in a file: 32k ids exceed an argument's size
awk -v n="$N" 'BEGIN { srand(7); for (i = 0; i < n; i++) printf "%s%d", (i ? "," : ""), 3 + int(rand() * 4000) }' >"$TMP/ids"
DROP=no
if [ -w /proc/sys/vm/drop_caches ]; then DROP=yes; fi

gen() { # $1 name, $2 tokens decoded, then extra flags
    name=$1
    n=$2
    shift 2
    sync
    [ "$DROP" = yes ] && echo 3 >/proc/sys/vm/drop_caches
    load=$(cut -d' ' -f1 /proc/loadavg)
    # shellcheck disable=SC2086
    XDG_CACHE_HOME=$TMP "$PETREL" generate -m "$MODEL" --tokens "@$TMP/ids" -n "$n" -t "$THREADS" \
        -c $((N + GEN + 16)) --session "$SESSION" --stats $FLAGS "$@" >"$TMP/$name.out" \
        2>"$TMP/$name.err" || { cat "$TMP/$name.err" >&2; die "$name failed"; }
}
run() { # $1 name, then extra flags
    name=$1
    shift
    gen "$name" "$GEN" "$@"
    # "prompt 8192 tokens in 162.585 s (50.4 tok/s); generated 32 in 1.014 s (30.56 tok/s)"
    tps=$(sed -n 's/.*generated [0-9]* in [0-9.]* s (\([0-9.]*\) tok\/s).*/\1/p' "$TMP/$name.err")
    [ -n "$tps" ] || { cat "$TMP/$name.err" >&2; die "$name: no decode figure"; }
    grep -q "positions of KV restored" "$TMP/$name.err" || die "$name: the prompt's KV was not restored"
    echo "$tps $load" >"$TMP/$name.fig"
    gb=$(sed -n 's/.*experts streamed.* \([0-9.]*\) GB read.*/\1/p' "$TMP/$name.err")
    echo "  $name: decode $tps tok/s [load $load]${gb:+; experts read $gb GB}; $(sed -n 's/^petrel: \(KV .*\)/\1/p' "$TMP/$name.err")"
}
median() { sort -n | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }'; }

echo "bench/kvspill.sh: $KIND model $MODEL, $N-token context, $GEN tokens decoded, $THREADS threads${FLAGS:+, $FLAGS}, page cache dropped: $DROP"
# the prompt's KV, once (kept for later invocations; a stale file is rewritten)
load=$(cut -d' ' -f1 /proc/loadavg)
gen prep 1
sed -n 's/.*\(prompt [0-9]* tokens in [0-9.]* s ([0-9.]* tok\/s)\).*/  prompt KV: \1/p; s/^petrel: \(session .*\)/  prompt KV: \1/p' "$TMP/prep.err" | sed "s/\$/ [load $load]/"
i=1
same=yes
while [ "$i" -le "$RUNS" ]; do
    run "ram-$i"
    run "ssd-$i" --kv-ram-mb "$KVRAM"
    cmp -s "$TMP/ram-$i.out" "$TMP/ssd-$i.out" || same=NO
    i=$((i + 1))
done
R=$(cut -d' ' -f1 "$TMP"/ram-*.fig | median)
S=$(cut -d' ' -f1 "$TMP"/ssd-*.fig | median)
grep -o 'spill: [^)]*' "$TMP/ssd-1.err" | head -1 | sed "s/^/  spilled plan (--kv-ram-mb $KVRAM): /"
echo "  same token ids spilled and in RAM: $same"
awk -v r="$R" -v s="$S" -v k="$KIND" -v n="$N" 'BEGIN { printf "kvspill (%s, %d context): decode median %.2f tok/s in RAM, %.2f tok/s spilled: ratio %.3f (target >= 0.8)\n", k, n, r, s, s / r }'
[ "$same" = yes ] || die "the spilled runs decoded other token ids than the runs in RAM"
