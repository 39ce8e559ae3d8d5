#!/bin/sh
# bench/stream.sh — the streaming benchmark of `make bench BENCH_STREAM=1`: a
# synthetic MoE GGUF several times larger than a cgroup memory limit, run side
# by side under that limit by petrel streaming (expert pack / GGUF, LRU / LFU,
# prefetch on/off), petrel with experts through plain mmap, llama.cpp in its
# best larger-than-memory setting (--no-repack --load-mode mmap) and in its
# default setting. Reports decode tok/s, time to first token, expert-cache hit
# rate, bytes read per token, read throughput against the disk bandwidth that
# tools/ioprobe.c measures (with reads the size of one expert record), I/O
# stall time, peak memory (cgroup and petrel's own) and the Belady bound of
# each petrel run's routing trace.
#
#   sudo BUILD=build LLAMA_CPP_DIR=/path/to/llama.cpp/build [STREAM_ARCH=gemma4] sh bench/stream.sh
#   make bench BENCH_STREAM=1 [LLAMA_CPP_DIR=...]   (after the other benchmarks, once per
#                                                    architecture in BENCH_STREAM_ARCHS)
#
# STREAM_ARCH picks the model (made with tools/mkmodel --raw-experts: random
# valid expert blocks, written at disk speed):
#   glm-dsa  16.8 GiB: GLM-5 structure scaled down, 20 layers, 256 experts of
#            3.375 MiB (Q4_K), top-8 (about 2 min to write);
#   gemma4   14.3 GiB: Gemma 4 26B-A4B's real shape, 30 layers, 128 experts of
#            3.43 MiB (fused gate_up Q4_K, down Q5_0), top-8, a 1.6 GB dense part
#            (Q4_K, embeddings Q6_K; about 3 min to write: the dense part is quantised).
# The model and its expert pack (petrel pack: as large again) are made in
# build/bench/ when missing. Needs root and a cgroup v1 memory controller at
# /sys/fs/cgroup/memory (the page cache is charged to the cgroup, so an mmap-ed
# model cannot hide in it); every run starts with a dropped page cache. A run
# takes 10-15 minutes on 2 cores, most of it llama.cpp's mmap run and petrel's
# mmap run; results: bench/RESULTS.md, "streaming" entries.
#
# Environment: BUILD (build), STREAM_ARCH (glm-dsa), LLAMA_CPP_DIR (a llama.cpp
# build dir with bin/llama-completion; unset: llama.cpp is skipped),
# STREAM_MODEL (build/bench/<arch>-stream.gguf), STREAM_LIMIT (cgroup limit, 4G),
# STREAM_THREADS (nproc), STREAM_GEN (tokens generated, 24), STREAM_REPS (runs of
# each petrel streaming setting, 1; llama.cpp and mmap run once), STREAM_OUT
# (folder for logs and traces, build/bench/stream-<arch>-<date>), STREAM_SKIP
# (space-separated run names to skip, e.g. "mmap llama-default").
set -eu

BUILD=${BUILD:-build}
ARCH=${STREAM_ARCH:-glm-dsa}
case "$ARCH" in
glm | glm-dsa)
    ARCH=glm-dsa
    # GLM-5 structure scaled down: 20 trunk layers (2 dense) + MTP, 256 experts top-8,
    # n_embd 2048, expert width 1024 in Q4_K = 3.375 MiB (3.54 MB) per expert
    MKMODEL_ARGS="--layers 20 --dense 2 --experts 256 --used 8 --ff-exp 1024 --expert-type q4_k"
    ;;
gemma4)
    # mkmodel's gemma4 defaults are Gemma 4 26B-A4B's shape (shared/REFERENCE.md section 3)
    MKMODEL_ARGS="--arch gemma4"
    ;;
*)
    echo "bench/stream.sh: STREAM_ARCH '$ARCH': expected glm-dsa or gemma4" >&2
    exit 1
    ;;
esac
MODEL=${STREAM_MODEL:-build/bench/$ARCH-stream.gguf}
LIMIT=${STREAM_LIMIT:-4G}
THREADS=${STREAM_THREADS:-$(nproc)}
N_GEN=${STREAM_GEN:-24}
REPS=${STREAM_REPS:-1}
OUT=${STREAM_OUT:-build/bench/stream-$ARCH-$(date -u +%Y%m%d-%H%M)}
SKIP=" ${STREAM_SKIP:-} "
CG=/sys/fs/cgroup/memory/petrel_bench

die() { echo "bench/stream.sh: $*" >&2; exit 1; }
for b in petrel mkmodel belady ioprobe; do
    [ -x "$BUILD/$b" ] || die "$BUILD/$b is missing (make BUILD=$BUILD $BUILD/$b)"
done
[ "$(id -u)" = 0 ] || die "needs root (cgroup memory limit, dropping the page cache)"
[ -d /sys/fs/cgroup/memory ] || die "no cgroup v1 memory controller at /sys/fs/cgroup/memory"
mkdir -p "$OUT"

# ---- the model and its expert pack ----
if [ ! -f "$MODEL" ]; then
    mkdir -p "$(dirname "$MODEL")"
    echo "bench/stream.sh: generating $MODEL" >&2
    # shellcheck disable=SC2086 # MKMODEL_ARGS splits into its words
    "$BUILD/mkmodel" -o "$MODEL" --raw-experts $MKMODEL_ARGS -t "$THREADS"
fi
if [ ! -f "$MODEL.xpack" ]; then
    echo "bench/stream.sh: writing the expert pack $MODEL.xpack" >&2
    "$BUILD/petrel" pack "$MODEL" >&2
fi

# ---- the cgroup ----
[ -d $CG ] || mkdir $CG
echo "$LIMIT" >$CG/memory.limit_in_bytes
LIMIT_B=$(cat $CG/memory.limit_in_bytes)

# the block device holding the model: its /sys stat gives sectors read and busy time (io_ticks)
DEV=$(basename "$(df --output=source "$MODEL" | tail -1)")
DSTAT=/sys/class/block/$DEV/stat
[ -r "$DSTAT" ] || DSTAT=""
dstat() { if [ -n "$DSTAT" ]; then awk '{ print $3, $10 }' "$DSTAT"; else echo "0 0"; fi; } # sectors read, io_ticks ms

dropcaches() { sync; echo 3 >/proc/sys/vm/drop_caches; }
# run NAME CMD...: inside the cgroup, page cache dropped first; stderr+stdout to $OUT/NAME.log,
# wall time, exit status and the cgroup's peak usage to $OUT/NAME.cg
run() {
    name=$1
    shift
    dropcaches
    echo 0 >$CG/memory.max_usage_in_bytes 2>/dev/null || true
    echo 0 >$CG/memory.failcnt 2>/dev/null || true
    oom0=$(sed -n 's/^oom_kill \([0-9]*\)/\1/p' $CG/memory.oom_control 2>/dev/null)
    d0=$(dstat)
    t0=$(date +%s.%N)
    rc=0
    sh -c 'echo $$ > '$CG'/cgroup.procs; exec "$@"' sh "$@" >"$OUT/$name.log" 2>&1 || rc=$?
    t1=$(date +%s.%N)
    d1=$(dstat)
    oom=$(sed -n 's/^oom_kill \([0-9]*\)/\1/p' $CG/memory.oom_control 2>/dev/null)
    oom=$((${oom:-0} - ${oom0:-0})) # OOM kills during this run (the counter is cumulative)
    echo "rc $rc wall $(echo "$t0 $t1" | awk '{ printf "%.1f", $2 - $1 }') max_usage $(cat $CG/memory.max_usage_in_bytes) oom_kill ${oom:-?} load $(cut -d' ' -f1-3 /proc/loadavg) disk $(echo "$d0 $d1" | awk '{ printf "%.0f %.0f", ($3 - $1) * 512, $4 - $2 }')" >"$OUT/$name.cg"
    echo "bench/stream.sh: $name: $(cat "$OUT/$name.cg")" >&2
}

# ---- disk bandwidth (O_DIRECT, page cache bypassed) ----
# one expert record: the largest expert of the model, 4 KiB-aligned as in the pack
# (glm-dsa 3456 KiB, gemma4 3512 KiB)
EXP_B=$("$BUILD/petrel" inspect -m "$MODEL" --json | sed -n 's/.*"expert_bytes_max": *\([0-9]*\).*/\1/p')
[ -n "$EXP_B" ] || die "petrel inspect did not report the expert size of $MODEL"
# shellcheck disable=SC2017 # rounds up to whole 4 KiB pages on purpose
EXP_KIB=$(((EXP_B + 4095) / 4096 * 4))
dropcaches
{
    "$BUILD/ioprobe" "$MODEL" -t 1 -b 4096 -s 8
    "$BUILD/ioprobe" "$MODEL" -t 1 -b $EXP_KIB -s 8 --random
    "$BUILD/ioprobe" "$MODEL" -t 4 -b $EXP_KIB -s 8 --random
    "$BUILD/ioprobe" "$MODEL" -t 8 -b $EXP_KIB -s 8 --random
    "$BUILD/ioprobe" "$MODEL" -t 16 -b $EXP_KIB -s 8 --random
} | tee "$OUT/ioprobe.txt" >&2
# the disk bandwidth: the best of the parallel random expert-sized reads
BW=$(sed -n 's/.*random, .*: \([0-9.]*\) GB\/s.*/\1/p' "$OUT/ioprobe.txt" | sort -g | tail -1)

# ---- the prompt: the same text for both engines ----
TEXT="Hello there, my old friend"
# with BOS where the vocabulary asks for it (gemma4), as llama-completion adds it
IDS=$("$BUILD/petrel" tokenize -m "$MODEL" -p "$TEXT" --add-special | tr ' ' ',')
N_PROMPT=$(echo "$IDS" | tr ',' '\n' | wc -l)

# ---- petrel ----
# the default run pins hot experts from the usage history of this invocation's runs only
rm -f "$MODEL.usage"
P="$BUILD/petrel generate -m $MODEL --tokens $IDS -n $N_GEN -t $THREADS --stats"
prun() { # NAME FLAGS...: STREAM_REPS runs, named NAME, NAME.2, NAME.3 ...
    name=$1
    shift
    case "$SKIP" in *" $name "*) return 0 ;; esac
    r=1
    while [ $r -le "$REPS" ]; do
        n=$name
        [ $r -gt 1 ] && n=$name.$r
        # shellcheck disable=SC2086 # P splits into its words
        run "$n" $P --trace "$OUT/$n.trace" "$@"
        r=$((r + 1))
    done
}
prun pack-lru --no-pin --expert-policy lru
prun pack-lfu --no-pin --expert-policy lfu
prun pack-lru-prefetch --no-pin --expert-policy lru --prefetch
prun pack-lfu-prefetch --no-pin --expert-policy lfu --prefetch
prun gguf-lru --no-pin --no-pack --expert-policy lru
prun gguf-lfu --no-pin --no-pack --expert-policy lfu
prun default # engine defaults: pack, LRU, hot experts pinned from the usage history of the runs above
REPS=1 prun mmap --mmap-experts

# ---- llama.cpp ----
LRUNS=""
if [ -z "${LLAMA_CPP_DIR:-}" ]; then
    echo "bench/stream.sh: LLAMA_CPP_DIR is not set: skipping llama.cpp" >&2
elif [ ! -x "$LLAMA_CPP_DIR/bin/llama-completion" ]; then
    echo "bench/stream.sh: $LLAMA_CPP_DIR/bin/llama-completion is missing: skipping llama.cpp" >&2
else
    export LD_LIBRARY_PATH="$LLAMA_CPP_DIR/bin:$LLAMA_CPP_DIR/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    L="$LLAMA_CPP_DIR/bin/llama-completion -m $MODEL -t $THREADS -n $N_GEN --temp 0 --ignore-eos -no-cnv -c 512"
    case "$SKIP" in *" llama-mmap "*) ;; *)
        # shellcheck disable=SC2086
        run llama-mmap $L --no-repack --load-mode mmap --no-warmup -p "$TEXT"
        LRUNS="$LRUNS llama-mmap" ;;
    esac
    case "$SKIP" in *" llama-default "*) ;; *)
        # shellcheck disable=SC2086
        run llama-default $L -p "$TEXT"
        LRUNS="$LRUNS llama-default" ;;
    esac
fi

# ---- report ----
SIZE=$(awk -v b="$(wc -c <"$MODEL")" 'BEGIN { printf "%.2f GiB", b / 1073741824 }')
CPU=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo 2>/dev/null | head -1)
{
echo
echo "== streaming: $MODEL ($SIZE), cgroup v1 memory limit $LIMIT_B bytes ($LIMIT)"
echo "   $(date -u '+%Y-%m-%d %H:%M UTC'); nproc $(nproc); CPU ${CPU:-?}; RAM $(awk '/MemTotal/ { printf "%.1f GiB", $2 / 1048576 }' /proc/meminfo); kernel $(uname -r)"
echo "   $THREADS threads; prompt $N_PROMPT tokens, $N_GEN generated; page cache dropped before each run; logs in $OUT"
echo "   disk (ioprobe, O_DIRECT): $(sed -n 's/^ioprobe: //p' "$OUT/ioprobe.txt" | sed 's/ (.*//' | paste -sd';' -)"
echo "   bandwidth used as the yardstick: $BW GB/s"
echo "   petrel: $P --trace T [flags]"
[ -n "$LRUNS" ] && echo "   llama.cpp: $L [--no-repack --load-mode mmap --no-warmup] -p '<text>'"
echo
printf '| %-18s | %7s | %7s | %6s | %7s | %8s | %8s | %6s | %8s | %8s | %9s | %9s | %-16s |\n' \
    run "decode" "TTFT" "hit" "MB/tok" "disk" "disk avg" "stall" "RSS pk" "cg peak" "Belady" "vs Belady" load
printf '| %-18s | %7s | %7s | %6s | %7s | %8s | %8s | %6s | %8s | %8s | %9s | %9s | %-16s |\n' \
    "" "tok/s" "s" "%" "" "GB" "GB/s" "s" "MB" "MB" "tok/s" "" ""
printf '|%s|%s|%s|%s|%s|%s|%s|%s|%s|%s|%s|%s|%s|\n' -------------------- ---------: ---------: --------: \
    ---------: ----------: ----------: --------: ----------: ----------: -----------: -----------: ------------------
for f in "$OUT"/*.cg; do
    name=$(basename "$f" .cg)
    log="$OUT/$name.log"
    cg=$(cat "$f")
    rc=$(echo "$cg" | awk '{ print $2 }')
    cgpk=$(echo "$cg" | awk '{ printf "%.0f", $6 / 1048576 }')
    load=$(echo "$cg" | awk '{ print $10, $11, $12 }')
    # device view of the whole run: GB read from the model's device, and that over the wall time
    dgb=$(echo "$cg" | awk '{ printf "%.2f", $14 / 1e9 }')
    dbusy=$(echo "$cg" | awk '{ if ($4 > 0) printf "%.2f", $14 / 1e9 / $4; else print "-" }')
    case "$name" in
    llama-*)
        # llama.cpp perf print: "prompt eval time = X ms / N tokens (...)", "eval time = X ms / N runs (... Y tokens per second)"
        tg=$(sed -n 's/.* eval time = .* runs .*, *\([0-9.]*\) tokens per second).*/\1/p' "$log" | tail -1)
        ttft=$(sed -n 's/.*prompt eval time = *\([0-9.]*\) ms.*/\1/p' "$log" | awk '{ printf "%.2f", $1 / 1000 }')
        if [ -z "$tg" ]; then
            why="exit $rc"
            [ "$rc" = 137 ] && why="OOM-killed (exit 137)"
            grep -q "oom_kill [1-9]" "$f" && why="OOM-killed"
            printf '| %-18s | %7s | %7s | %6s | %7s | %8s | %8s | %6s | %8s | %8s | %9s | %9s | %-16s |\n' \
                "$name" "$why" "" "" "" "$dgb" "$dbusy" "" "" "$cgpk" "" "" "$load"
        else
            printf '| %-18s | %7.3f | %7s | %6s | %7s | %8s | %8s | %6s | %8s | %8s | %9s | %9s | %-16s |\n' \
                "$name" "$tg" "$ttft" "-" "-" "$dgb" "$dbusy" "-" "-" "$cgpk" "-" "-" "$load"
        fi
        continue
        ;;
    esac
    # petrel: "... prompt N tokens in X s (..); generated N in Y s (Z tok/s)" and the --stats line
    line=$(grep 'generated' "$log" | tail -1)
    if [ -z "$line" ]; then
        printf '| %-18s | %7s | %7s | %6s | %7s | %8s | %8s | %6s | %8s | %8s | %9s | %9s | %-16s |\n' \
            "$name" "exit $rc" "" "" "" "$dgb" "$dbusy" "" "" "$cgpk" "" "" "$load"
        continue
    fi
    tg=$(echo "$line" | sed -n 's/.*generated [0-9]* in [0-9.]* s (\([0-9.]*\) tok\/s).*/\1/p')
    ttft=$(echo "$line" | sed -n 's/.*prompt [0-9]* tokens in \([0-9.]*\) s.*/\1/p')
    gen_s=$(echo "$line" | sed -n 's/.*generated [0-9]* in \([0-9.]*\) s.*/\1/p')
    st=$(grep 'hit rate' "$log" | tail -1)
    hit=$(echo "$st" | sed -n 's/.*hit rate \([0-9.]*\)%.*/\1/p')
    gb=$(echo "$st" | sed -n 's/.* \([0-9.]*\) GB read.*/\1/p')
    mbt=$(echo "$st" | sed -n 's/.* \([0-9.]*\) MB\/token.*/\1/p')
    wait=$(echo "$st" | sed -n 's/.*I\/O wait \([0-9.]*\) s.*/\1/p')
    rsspk=$(echo "$st" | sed -n 's/.*(peak \([0-9]*\) MB).*/\1/p')
    slots=$(echo "$st" | sed -n 's/.*(\([0-9]*\) slots\/layer.*/\1/p')
    bel="-"
    vs="-"
    if [ "${slots:-0}" -gt 0 ] && [ -s "$OUT/$name.trace" ]; then
        flags="--direct"
        grep -q ', pack' "$log" && flags="$flags --pack"
        # Belady for decode only: the whole trace minus its first request row per layer (the
        # prompt, which an empty cache must read in full whatever the policy)
        awk '!seen[$1]++' "$OUT/$name.trace" >"$OUT/$name.trace0"
        # shellcheck disable=SC2086
        "$BUILD/belady" "$OUT/$name.trace" "$MODEL" "$slots" --bw "$BW" $flags >"$OUT/$name.belady" 2>&1 || true
        # shellcheck disable=SC2086
        "$BUILD/belady" "$OUT/$name.trace0" "$MODEL" "$slots" --bw "$BW" $flags >"$OUT/$name.belady0" 2>&1 || true
        tb=$(sed -n 's/.* that is \([0-9.]*\) s.*/\1/p' "$OUT/$name.belady")
        tb0=$(sed -n 's/.* that is \([0-9.]*\) s.*/\1/p' "$OUT/$name.belady0")
        if [ -n "$tb" ] && [ -n "$tb0" ]; then
            bel=$(echo "$tb $tb0 $N_GEN" | awk '{ d = $1 - $2; if (d > 0) printf "%.2f", ($3 - 1) / d; else print "inf" }')
            vs=$(echo "$tg $bel" | awk '{ if ($2 == "inf") print "-"; else printf "%.0f%%", 100 * $1 / $2 }')
        fi
    fi
    printf '| %-18s | %7.3f | %7.2f | %6s | %7s | %8s | %8s | %6s | %8s | %8s | %9s | %9s | %-16s |\n' \
        "$name" "$tg" "$ttft" "${hit:--}" "${mbt:--}" "$dgb" "$dbusy" "${wait:--}" "${rsspk:--}" "$cgpk" "$bel" "$vs" "$load"
    : "$gen_s"
done
echo
echo "decode: generated tokens after the first / their time. TTFT: prompt evaluation (model load not included;"
echo "petrel's load time is in each log). hit, MB/tok, stall (time the forward pass waited for reads): petrel's"
echo "--stats, over prompt + generation. disk GB: read from $DEV during the run (the whole device: model load"
echo "and other processes' reads included); disk avg: that / the run's wall time (compare with the bandwidth above)."
echo "RSS pk: petrel's own peak RSS; cg peak: the cgroup's memory.max_usage_in_bytes (page cache included)."
echo "Belady: decode tok/s if a token cost only the reads an optimal (clairvoyant) cache of the same slots/layer"
echo "would make, at the disk bandwidth, compute not counted (tools/belady.c on the run's --trace, the prompt's"
echo "row excluded); vs Belady: decode / that."
} | tee "$OUT/report.md"
