#!/bin/sh
# bench/prompt.sh — the long-prompt benchmark under a memory limit (`make bench
# BENCH_PROMPT=1`): the synthetic models of bench/stream.sh (16.8 GiB glm-dsa,
# 14.3 GiB Gemma-4-shaped), prompts of 2k and 8k tokens, each engine in a cgroup
# v1 memory limit (4 GiB for 2k, 8 GiB for 8k) with the page cache dropped first.
# Reports, side by side in one run with the load average beside each figure:
#   - petrel's prompt tok/s with its default prompt block (the plan's: as many
#     rows as its activation share allows, up to the context: every routed
#     expert read at most once per layer per block), the expert bytes it read
#     and the bytes of the distinct experts the prompt routed to (--stats);
#   - petrel with 256-row blocks (-b 256, the default before layer-major
#     blocks), same figures (PROMPT_BASELINE=0 skips it);
#   - llama.cpp's prompt tok/s with `llama-completion --no-repack --load-mode
#     mmap` (what survives the limit), bounded by PROMPT_LLAMA_TIMEOUT seconds:
#     a run cut there is reported as "< N/timeout tok/s", a bound, not a figure;
#   - beside each, the wall time of the whole command (and petrel's model load):
#     work done at load (petrel backs its expert arena with pages there) shows.
#
#   sudo BUILD=build LLAMA_CPP_DIR=/path/to/llama.cpp/build sh bench/prompt.sh
#
# Environment: BUILD (build), PROMPT_ARCHS ("glm-dsa gemma4"), PROMPT_CASES
# ("2048:4G 8192:8G": tokens:limit), PROMPT_THREADS (nproc), LLAMA_CPP_DIR (a
# llama.cpp build dir with bin/llama-completion; unset: llama.cpp is skipped),
# PROMPT_LLAMA_CASES (prompt lengths llama.cpp runs for, "2048"),
# PROMPT_LLAMA_TIMEOUT (600), PROMPT_BASELINE (1), PROMPT_REPEAT (1: runs of
# each case, petrel and llama.cpp alternated; more than one adds a line with
# the medians and the median of the pairs' ratios), PROMPT_OUT (folder for logs,
# build/bench/prompt-<date>). Models are made in build/bench/ when missing (as
# bench/stream.sh makes them, without an expert pack: petrel reads the GGUF
# with O_DIRECT). Needs root and /sys/fs/cgroup/memory.
set -eu

BUILD=${BUILD:-build}
ARCHS=${PROMPT_ARCHS:-glm-dsa gemma4}
CASES=${PROMPT_CASES:-2048:4G 8192:8G}
THREADS=${PROMPT_THREADS:-$(nproc)}
LCASES=" ${PROMPT_LLAMA_CASES:-2048} "
LTIMEOUT=${PROMPT_LLAMA_TIMEOUT:-600}
BASELINE=${PROMPT_BASELINE:-1}
REPEAT=${PROMPT_REPEAT:-1}
OUT=${PROMPT_OUT:-build/bench/prompt-$(date -u +%Y%m%d-%H%M)}
CG=/sys/fs/cgroup/memory/petrel_bench

die() { echo "bench/prompt.sh: $*" >&2; exit 1; }
for b in petrel mkmodel; do
    [ -x "$BUILD/$b" ] || die "$BUILD/$b is missing (make BUILD=$BUILD $BUILD/$b)"
done
[ "$(id -u)" = 0 ] || die "needs root (cgroup memory limit, dropping the page cache)"
[ -d /sys/fs/cgroup/memory ] || die "no cgroup v1 memory controller at /sys/fs/cgroup/memory"
mkdir -p "$OUT"
[ -d $CG ] || mkdir $CG
LLAMA=""
if [ -z "${LLAMA_CPP_DIR:-}" ]; then
    echo "bench/prompt.sh: LLAMA_CPP_DIR is not set: skipping llama.cpp" >&2
elif [ ! -x "$LLAMA_CPP_DIR/bin/llama-completion" ]; then
    echo "bench/prompt.sh: $LLAMA_CPP_DIR/bin/llama-completion is missing: skipping llama.cpp" >&2
else
    LLAMA="$LLAMA_CPP_DIR/bin/llama-completion"
    export LD_LIBRARY_PATH="$LLAMA_CPP_DIR/bin:$LLAMA_CPP_DIR/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
fi

dropcaches() { sync; echo 3 >/proc/sys/vm/drop_caches; }
# run NAME LIMIT CMD...: inside the cgroup at LIMIT, page cache dropped first;
# output to $OUT/NAME.log; wall time, exit status, peak usage and load to $OUT/NAME.cg
run() {
    name=$1
    echo "$2" >$CG/memory.limit_in_bytes
    shift 2
    dropcaches
    echo 0 >$CG/memory.max_usage_in_bytes 2>/dev/null || true
    t0=$(date +%s.%N)
    rc=0
    sh -c 'echo $$ > '$CG'/cgroup.procs; exec "$@"' sh "$@" >"$OUT/$name.log" 2>&1 || rc=$?
    t1=$(date +%s.%N)
    echo "rc $rc wall $(echo "$t0 $t1" | awk '{ printf "%.1f", $2 - $1 }') max_usage_mib $(($(cat $CG/memory.max_usage_in_bytes) / 1048576)) load $(cut -d' ' -f1-3 /proc/loadavg)" >"$OUT/$name.cg"
    echo "bench/prompt.sh: $name: $(cat "$OUT/$name.cg")" >&2
}
cgf() { awk -v k="$2" '{ for (i = 1; i < NF; i++) if ($i == k) print $(i + 1) }' "$OUT/$1.cg"; } # NAME FIELD
load() { sed -n 's/.* load \(.*\)/\1/p' "$OUT/$1.cg"; }

# petrel's figures from its --stats log: tok/s, GB read, GB routed, read/routed
pfig() {
    tps=$(sed -n 's/.*prompt [0-9]* tokens in [0-9.]* s (\([0-9.]*\) tok\/s).*/\1/p' "$OUT/$1.log")
    sed -n 's/.*in blocks of \([0-9]*\): [0-9]* experts read (\([0-9.]*\) GB), [0-9]* routed to (\([0-9.]*\) GB), bytes read\/routed \([0-9.]*\).*/\1 \2 \3 \4/p' "$OUT/$1.log" |
        awk -v t="${tps:-?}" '{ printf "%s tok/s, blocks of %s, read %s GB, routed %s GB (x%s)", t, $1, $2, $3, $4 }'
}

# the tok/s of petrel's run NAME, and of llama.cpp's (empty when it was cut)
ptps() { sed -n 's/.*prompt [0-9]* tokens in [0-9.]* s (\([0-9.]*\) tok\/s).*/\1/p' "$OUT/$1.log"; }
ltps() { sed -n 's/.*prompt eval time = .* \([0-9.]*\) tokens per second.*/\1/p' "$OUT/$1.log" | head -1; }
# the median of the numbers on stdin
median() { sort -g | awk '{ v[NR] = $1 } END { if (NR) printf "%.2f", NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

# "model load X s, whole run Y s" of petrel's run NAME (X from its --stats line), and "whole
# run Y s" of llama.cpp's (its "load time" runs to the first token, prompt included): Y is
# the wall time of the whole command (load, prompt and the rest), what a prompt's tok/s
# leaves out
run_times() {
    case "$1" in *-petrel*)
        lt=$(sed -n 's/.*; load \([0-9.]*\) s; prompt.*/\1/p' "$OUT/$1.log" | head -1)
        printf 'model load %s s, ' "${lt:-?}" ;;
    esac
    echo "whole run $(cgf "$1" wall) s"
}

# pseudo-words of 2-7 letters from a fixed seed: varied tokens, varied routing
words() { awk -v n="$1" 'BEGIN { srand(7); for (i = 0; i < n; i++) { w = ""; l = 2 + int(rand() * 6);
    for (j = 0; j < l; j++) w = w sprintf("%c", 97 + int(rand() * 26)); printf "%s%s", w, (i % 17 == 16) ? ".\n" : " " } }'; }

REPORT="$OUT/report.txt"
: >"$REPORT"
for ARCH in $ARCHS; do
    case "$ARCH" in
    glm-dsa) MKMODEL_ARGS="--layers 20 --dense 2 --experts 256 --used 8 --ff-exp 1024 --expert-type q4_k" ;;
    gemma4) MKMODEL_ARGS="--arch gemma4" ;;
    *) die "PROMPT_ARCHS: '$ARCH': expected glm-dsa or gemma4" ;;
    esac
    MODEL=build/bench/$ARCH-stream.gguf
    if [ ! -f "$MODEL" ]; then
        mkdir -p build/bench
        echo "bench/prompt.sh: generating $MODEL" >&2
        # shellcheck disable=SC2086 # MKMODEL_ARGS splits into its words
        "$BUILD/mkmodel" -o "$MODEL" --raw-experts $MKMODEL_ARGS -t "$THREADS"
    fi
    for c in $CASES; do
        N=${c%%:*}
        LIMIT=${c#*:}
        # a text of about N tokens with this model's tokenizer (llama.cpp reads the text,
        # petrel its first N token ids, BOS where the vocabulary asks for it)
        TXT="$OUT/$ARCH-$N.txt"
        words "$N" >"$TXT"
        T1=$("$BUILD/petrel" tokenize -m "$MODEL" -f "$TXT" --add-special | wc -w)
        words $((N * N / T1 + N / 50)) >"$TXT"
        "$BUILD/petrel" tokenize -m "$MODEL" -f "$TXT" --add-special | tr ' ' '\n' | head -n "$N" |
            paste -sd, >"$OUT/$ARCH-$N.ids"
        NT=$(tr ',' '\n' <"$OUT/$ARCH-$N.ids" | wc -l)
        [ "$NT" = "$N" ] || die "$TXT makes $NT tokens, fewer than $N"
        P="$BUILD/petrel generate -m $MODEL --tokens $(cat "$OUT/$ARCH-$N.ids") -n 1 -t $THREADS --stats --no-pin -c $((N + 16))"
        : >"$OUT/$ARCH-$N.pairs"
        r=1
        while [ "$r" -le "$REPEAT" ]; do
            sfx=""
            [ "$REPEAT" = 1 ] || sfx="-r$r"
            # shellcheck disable=SC2086 # P splits into its words
            run "$ARCH-$N-petrel$sfx" "$LIMIT" $P
            line="$ARCH, $N tokens, limit $LIMIT${sfx:+ (run $r of $REPEAT)}: petrel $(pfig "$ARCH-$N-petrel$sfx") [$(run_times "$ARCH-$N-petrel$sfx"), peak $(cgf "$ARCH-$N-petrel$sfx" max_usage_mib) MiB, load $(load "$ARCH-$N-petrel$sfx")]"
            if [ "$BASELINE" = 1 ] && [ "$r" = 1 ]; then
                # shellcheck disable=SC2086
                run "$ARCH-$N-petrel-b256" "$LIMIT" $P -b 256
                line="$line; petrel -b 256 $(pfig "$ARCH-$N-petrel-b256") [load $(load "$ARCH-$N-petrel-b256")]"
            fi
            lt=""
            case "$LCASES" in *" $N "*) if [ -n "$LLAMA" ]; then
                L="$ARCH-$N-llama$sfx"
                run "$L" "$LIMIT" timeout "$LTIMEOUT" "$LLAMA" -m "$MODEL" -t "$THREADS" -n 1 --temp 0 \
                    -no-cnv -c $((N + N / 8 + 64)) --no-repack --load-mode mmap --no-warmup -f "$TXT"
                lt=$(ltps "$L")
                ln=$(sed -n 's/.*prompt eval time = *[0-9.]* ms \/ *\([0-9]*\) tokens.*/\1/p' "$OUT/$L.log" | head -1)
                if [ -n "$lt" ]; then
                    line="$line; llama.cpp mmap $lt tok/s ($ln tokens)"
                else
                    line="$line; llama.cpp mmap < $(awk -v n="$N" -v t="$LTIMEOUT" 'BEGIN { printf "%.2f", n / t }') tok/s (cut at ${LTIMEOUT} s, rc $(cgf "$L" rc))"
                fi
                line="$line [$(run_times "$L"), load $(load "$L")]"
            fi ;; esac
            pt=$(ptps "$ARCH-$N-petrel$sfx")
            [ -z "$pt" ] || echo "$pt ${lt:--}" >>"$OUT/$ARCH-$N.pairs"
            echo "$line" | tee -a "$REPORT"
            r=$((r + 1))
        done
        if [ "$REPEAT" -gt 1 ]; then
            line="$ARCH, $N tokens, limit $LIMIT: median of $REPEAT alternated runs: petrel $(awk '{ print $1 }' "$OUT/$ARCH-$N.pairs" | median) tok/s"
            if awk '$2 != "-"' "$OUT/$ARCH-$N.pairs" | grep -q .; then
                ratios=$(awk '$2 != "-" { printf "%.2f\n", $1 / $2 }' "$OUT/$ARCH-$N.pairs")
                line="$line, llama.cpp $(awk '$2 != "-" { print $2 }' "$OUT/$ARCH-$N.pairs" | median) tok/s; each pair's ratio $(echo "$ratios" | paste -sd' ' -), median $(echo "$ratios" | median)x"
            fi
            echo "$line" | tee -a "$REPORT"
        fi
    done
done
echo "bench/prompt.sh: $THREADS threads, $(date -u '+%Y-%m-%d %H:%M UTC'); logs in $OUT" | tee -a "$REPORT"
