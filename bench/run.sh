#!/bin/sh
# bench/run.sh — end-to-end benchmark run by `make bench`: petrel vs llama.cpp,
# prefill and decode tokens/s on the same synthetic glm-dsa GGUF, same threads.
#
#   BUILD=build sh bench/run.sh          (make bench passes BUILD)
#
# The model is written by $BUILD/mkmodel into build/bench/ when missing (about
# 1.4 GiB, about 2 minutes on 2 cores; delete it to regenerate after changing
# BENCH_MKMODEL_ARGS). petrel runs `generate` on a fixed 64-id prompt and
# decodes 32 tokens; llama.cpp runs llama-bench on the same file: pp64 from an
# empty context, and tg32 after 64 tokens of context (-d 64), which is the
# position range of petrel's decode. Both are run BENCH_RUNS times after one
# warm-up; the table gives the median and, in brackets, the best run (the
# machine may be shared: the best run is the least disturbed one). The ratio
# is of the medians. llama.cpp runs with its default settings (mmap, CPU
# weight repacking, flash attention auto). When LLAMA_CPP_DIR is unset (it
# must be a llama.cpp build dir with bin/llama-bench, or bin/llama-completion),
# only petrel is measured.
#
# Environment: LLAMA_CPP_DIR, BENCH_THREADS (default: nproc), BENCH_RUNS (5),
# BENCH_MODEL (path), BENCH_MKMODEL_ARGS (extra mkmodel options).
set -eu

BUILD=${BUILD:-build}
MODEL=${BENCH_MODEL:-build/bench/glm-dsa-bench.gguf}
THREADS=${BENCH_THREADS:-$(nproc)}
RUNS=${BENCH_RUNS:-5}
N_PROMPT=64
N_GEN=32

for b in petrel mkmodel; do
    [ -x "$BUILD/$b" ] || { echo "bench/run.sh: $BUILD/$b is missing (run make bench)" >&2; exit 1; }
done

if [ ! -f "$MODEL" ]; then
    mkdir -p "$(dirname "$MODEL")"
    echo "bench/run.sh: generating $MODEL" >&2
    # shellcheck disable=SC2086 # the extra options are meant to split
    "$BUILD/mkmodel" -o "$MODEL" -t "$THREADS" ${BENCH_MKMODEL_ARGS:-}
fi

# A fixed prompt of N_PROMPT ids spread over the vocabulary (below the control tokens).
TOKENS=$(awk -v n=$N_PROMPT 'BEGIN { for (i = 0; i < n; i++) printf "%s%d", i ? "," : "", (1000 + 7919 * i) % 30000 }')

# median and maximum of the numbers on stdin (one per line): "MEDIAN BEST"
stats() { sort -g | awk '{ v[n++] = $1 } END { if (n) printf "%.2f %.2f\n", n % 2 ? v[(n - 1) / 2] : (v[n / 2 - 1] + v[n / 2]) / 2, v[n - 1] }'; }

# ---- petrel ----
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
"$BUILD/petrel" generate -m "$MODEL" --tokens "$TOKENS" -n 2 --greedy -t "$THREADS" >/dev/null 2>&1 # warm-up
: >"$TMP/pp"
: >"$TMP/tg"
i=0
while [ $i -lt "$RUNS" ]; do
    "$BUILD/petrel" generate -m "$MODEL" --tokens "$TOKENS" -n $N_GEN --greedy -t "$THREADS" >/dev/null 2>"$TMP/err" ||
        { cat "$TMP/err" >&2; exit 1; }
    # "... prompt 64 tokens in 1.410 s (45.4 tok/s); generated 32 in 1.063 s (29.17 tok/s)"
    sed -n 's/.*prompt [0-9]* tokens in [0-9.]* s (\([0-9.]*\) tok\/s).*/\1/p' "$TMP/err" >>"$TMP/pp"
    sed -n 's/.*generated [0-9]* in [0-9.]* s (\([0-9.]*\) tok\/s).*/\1/p' "$TMP/err" >>"$TMP/tg"
    i=$((i + 1))
done
P_PP=$(stats <"$TMP/pp")
P_TG=$(stats <"$TMP/tg")
if [ -z "$P_PP" ] || [ -z "$P_TG" ]; then
    echo "bench/run.sh: no timing line found in petrel's output:" >&2
    cat "$TMP/err" >&2
    exit 1
fi

# ---- llama.cpp ----
L_PP=""
L_TG=""
L_HOW=""
if [ -z "${LLAMA_CPP_DIR:-}" ]; then
    echo "bench/run.sh: LLAMA_CPP_DIR is not set: skipping the llama.cpp comparison" >&2
else
    export LD_LIBRARY_PATH="$LLAMA_CPP_DIR/bin:$LLAMA_CPP_DIR/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    if [ -x "$LLAMA_CPP_DIR/bin/llama-bench" ]; then
        # JSONL: one line per test with "samples_ts": [ t1, t2, ... ] (tokens/s of each repetition)
        lb() { "$LLAMA_CPP_DIR/bin/llama-bench" -m "$MODEL" -t "$THREADS" -r "$RUNS" -o jsonl "$@" 2>"$TMP/lerr" |
            sed -n 's/.*"samples_ts": *\[\([^]]*\)\].*/\1/p' | tr ',' '\n' | stats; }
        L_PP=$(lb -p $N_PROMPT -n 0) || true
        L_TG=$(lb -p 0 -n $N_GEN -d $N_PROMPT) || true
        L_HOW="llama-bench -m $MODEL -t $THREADS -r $RUNS {-p $N_PROMPT -n 0 | -p 0 -n $N_GEN -d $N_PROMPT}"
    elif [ -x "$LLAMA_CPP_DIR/bin/llama-completion" ]; then
        # Fallback: a text prompt (its token count is what llama.cpp reports), timings from its perf print.
        # (about 62 tokens with mkmodel's vocabulary)
        PROMPT=$(awk 'BEGIN { for (i = 0; i < 4; i++) printf "the quick brown fox %d ", i }')
        : >"$TMP/lpp"
        : >"$TMP/ltg"
        i=0
        while [ $i -lt "$RUNS" ]; do
            "$LLAMA_CPP_DIR/bin/llama-completion" -m "$MODEL" -t "$THREADS" -p "$PROMPT" -n $N_GEN --temp 0 \
                --ignore-eos -no-cnv >/dev/null 2>"$TMP/lerr" || true
            sed -n 's/.*prompt eval time = .*, *\([0-9.]*\) tokens per second).*/\1/p' "$TMP/lerr" >>"$TMP/lpp"
            sed -n 's/.* eval time = .* runs .*, *\([0-9.]*\) tokens per second).*/\1/p' "$TMP/lerr" >>"$TMP/ltg"
            i=$((i + 1))
        done
        [ -s "$TMP/lpp" ] && L_PP=$(stats <"$TMP/lpp")
        [ -s "$TMP/ltg" ] && L_TG=$(stats <"$TMP/ltg")
        L_HOW="llama-completion -m $MODEL -t $THREADS -n $N_GEN --temp 0 --ignore-eos (text prompt)"
    else
        echo "bench/run.sh: $LLAMA_CPP_DIR has neither bin/llama-bench nor bin/llama-completion" >&2
    fi
    if [ -z "$L_PP" ] || [ -z "$L_TG" ]; then
        echo "bench/run.sh: llama.cpp failed; its last messages:" >&2
        tail -5 "$TMP/lerr" >&2
    fi
fi

# ---- report ----
SIZE=$(awk -v b="$(wc -c <"$MODEL")" 'BEGIN { printf "%.2f GiB", b / 1073741824 }')
CPU=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo 2>/dev/null | head -1)
echo
echo "== glm-dsa synthetic model: $MODEL ($SIZE)"
echo "   $(date -u '+%Y-%m-%d %H:%M UTC'); nproc $(nproc); CPU ${CPU:-?}; load average $(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null)"
echo "   $THREADS threads, prompt $N_PROMPT ids, generate $N_GEN; median (best) of $RUNS runs"
echo "   petrel: $BUILD/petrel generate -m $MODEL --tokens <$N_PROMPT ids> -n $N_GEN --greedy -t $THREADS"
[ -n "$L_HOW" ] && echo "   llama.cpp: $L_HOW"
echo
printf '| %-18s | %17s | %17s |\n' "" "prefill tok/s" "decode tok/s"
printf '|%s|%s|%s|\n' "--------------------" "------------------:" "------------------:"
# shellcheck disable=SC2086 # "MEDIAN BEST" splits into two arguments
row() { printf '| %-18s | %8.2f (%6.2f) | %8.2f (%6.2f) |\n' "$1" $2 $3; }
row petrel "$P_PP" "$P_TG"
if [ -n "$L_PP" ] && [ -n "$L_TG" ]; then
    row llama.cpp "$L_PP" "$L_TG"
    printf '| %-18s | %16.2fx | %16.2fx |\n' "petrel / llama.cpp" \
        "$(echo "$P_PP $L_PP" | awk '{ print $1 / $3 }')" "$(echo "$P_TG $L_TG" | awk '{ print $1 / $3 }')"
fi
