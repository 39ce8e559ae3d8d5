#!/bin/sh
# bench/inmem.sh — in-memory speed against llama.cpp at its best (`make bench`).
#
# Both engines hold every weight in RAM: petrel `-lm ram`, llama.cpp `llama-bench -lm none`
# (weights read into anonymous memory, CPU repacking on). Both are timed the same way:
# `petrel bench` times as llama-bench does (a warmup run, then the timed run; for a decode
# test at a depth, the depth evaluated untimed first). Measured, same thread count,
# alternated petrel / llama.cpp test by test:
#   pp512, pp4096   prompt tokens/s of a 512- and a 4096-token prompt
#   tg@16, tg@4096  decode tokens/s of INMEM_GEN tokens after 16 / 4096 positions
# and, petrel only, "pp512 cold": `petrel bench --no-warmup`, the 512-token prompt as the
# first evaluation of its process (what a one-shot `petrel generate` sees: its scratch and KV
# pages written for the first time), beside llama.cpp's warm pp512.
# Models: the synthetic glm-dsa bench model (bench/run.sh makes it) and a gemma4-shaped one
# of ~1.3 GB (made here with mkmodel when missing, ~1 minute). Each figure is the median of
# INMEM_RUNS rounds with the load average (1 minute) at the start of each run beside it; the
# ratio is petrel / llama.cpp of the medians. The prompt ids are pseudo-random ids of the
# vocabulary in both tools; the speed of a dense pass does not depend on them, the routing of
# a MoE pass does, a little.
#
# Environment: LLAMA_CPP_DIR (a llama.cpp build dir with bin/llama-bench; unset:
# petrel only), BENCH_THREADS (2), INMEM_RUNS (3), INMEM_LONG (1: also the
# 4096-token figures, several minutes per round; 0: skip them), INMEM_GEN (32),
# INMEM_MODELS ("glm gemma4").
set -eu

BUILD=${BUILD:-build}
THREADS=${BENCH_THREADS:-2}
RUNS=${INMEM_RUNS:-3}
LONG=${INMEM_LONG:-1}
GEN=${INMEM_GEN:-32}
MODELS=${INMEM_MODELS:-glm gemma4}

for b in petrel mkmodel; do
    [ -x "$BUILD/$b" ] || { echo "bench/inmem.sh: $BUILD/$b is missing (run make bench)" >&2; exit 1; }
done
LB=""
if [ -n "${LLAMA_CPP_DIR:-}" ]; then
    if [ -x "$LLAMA_CPP_DIR/bin/llama-bench" ]; then
        LB="$LLAMA_CPP_DIR/bin/llama-bench"
        export LD_LIBRARY_PATH="$LLAMA_CPP_DIR/bin:$LLAMA_CPP_DIR/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    else
        echo "bench/inmem.sh: $LLAMA_CPP_DIR/bin/llama-bench is missing: petrel only" >&2
    fi
else
    echo "bench/inmem.sh: LLAMA_CPP_DIR is not set: petrel only" >&2
fi

TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
load1() { cut -d' ' -f1 /proc/loadavg; }
# median of the numbers on stdin (one per line)
median() { sort -g | awk '{ v[n++] = $1 } END { if (n) printf "%.2f\n", n % 2 ? v[(n - 1) / 2] : (v[n / 2 - 1] + v[n / 2]) / 2 }'; }

# petrel NAME MODEL ARGS...: `petrel bench` (llama-bench's timing); appends "tok/s load" to
# $TMP/p_NAME
petrel_run() {
    name=$1 model=$2
    shift 2
    l=$(load1)
    v=$("$BUILD/petrel" bench -m "$model" -t "$THREADS" -lm ram -r 1 -o jsonl "$@" 2>"$TMP/err" |
        sed -n 's/.*"avg_ts": *\([0-9.e+]*\).*/\1/p' | head -1) || true
    [ -n "$v" ] || { echo "bench/inmem.sh: no figure from petrel bench:" >&2; cat "$TMP/err" >&2; exit 1; }
    echo "$v $l" >>"$TMP/p_$name"
}

# llama NAME MODEL ARGS...: appends "tok/s load" to $TMP/l_NAME
llama_run() {
    name=$1 model=$2
    shift 2
    l=$(load1)
    v=$("$LB" -m "$model" -t "$THREADS" -lm none -r 1 -o jsonl "$@" 2>"$TMP/lerr" |
        sed -n 's/.*"avg_ts": *\([0-9.e+]*\).*/\1/p' | head -1) || true
    if [ -n "$v" ]; then echo "$v $l" >>"$TMP/l_$name"; else tail -3 "$TMP/lerr" >&2; fi
}

# row LABEL PETREL_FILE LLAMA_FILE: median (loads), llama.cpp's, ratio
row() {
    pm=$( [ -s "$TMP/$2" ] && cut -d' ' -f1 "$TMP/$2" | median)
    pl=$( [ -s "$TMP/$2" ] && cut -d' ' -f2 "$TMP/$2" | tr '\n' ' ')
    lm=$( [ -s "$TMP/$3" ] && cut -d' ' -f1 "$TMP/$3" | median)
    ll=$( [ -s "$TMP/$3" ] && cut -d' ' -f2 "$TMP/$3" | tr '\n' ' ')
    ratio=$(awk -v a="${pm:-0}" -v b="${lm:-0}" 'BEGIN { if (a > 0 && b > 0) printf "%.2fx", a / b; else printf "-" }')
    printf "   %-10s petrel %8s (load %s)  llama.cpp %8s (load %s)  ratio %s\n" "$1" "${pm:--}" "${pl:--}" "${lm:--}" "${ll:--}" "$ratio"
}

for m in $MODELS; do
    case $m in
    glm)
        MODEL=${BENCH_MODEL:-build/bench/glm-dsa-bench.gguf}
        MK="" ;;
    gemma4)
        MODEL=build/bench/gemma4-bench.gguf
        MK="--arch gemma4 --embd 2048 --layers 12 --experts 32 --vocab 32768 --raw-experts" ;;
    *) echo "bench/inmem.sh: unknown model $m (glm, gemma4)" >&2; exit 1 ;;
    esac
    if [ ! -f "$MODEL" ]; then
        mkdir -p "$(dirname "$MODEL")"
        echo "bench/inmem.sh: generating $MODEL" >&2
        # shellcheck disable=SC2086 # the options are meant to split
        "$BUILD/mkmodel" -o "$MODEL" -t "$THREADS" $MK
    fi
    i=0
    while [ $i -lt "$RUNS" ]; do
        petrel_run "$m.tg16" "$MODEL" -p 0 -n "$GEN" -d 16
        [ -n "$LB" ] && llama_run "$m.tg16" "$MODEL" -p 0 -n "$GEN" -d 16
        petrel_run "$m.pp512" "$MODEL" -p 512 -n 0
        [ -n "$LB" ] && llama_run "$m.pp512" "$MODEL" -p 512 -n 0
        petrel_run "$m.cold512" "$MODEL" -p 512 -n 0 --no-warmup
        if [ "$LONG" = 1 ]; then
            petrel_run "$m.pp4096" "$MODEL" -p 4096 -n 0
            [ -n "$LB" ] && llama_run "$m.pp4096" "$MODEL" -p 4096 -n 0
            petrel_run "$m.tg4096" "$MODEL" -p 0 -n "$GEN" -d 4096
            [ -n "$LB" ] && llama_run "$m.tg4096" "$MODEL" -p 0 -n "$GEN" -d 4096
        fi
        i=$((i + 1))
    done
    SIZE=$(awk -v b="$(wc -c <"$MODEL")" 'BEGIN { printf "%.2f GiB", b / 1073741824 }')
    echo
    echo "== in memory: $MODEL ($SIZE), $THREADS threads, median of $RUNS alternated rounds"
    echo "   $(date -u '+%Y-%m-%d %H:%M UTC'); nproc $(nproc); load average now $(cut -d' ' -f1-3 /proc/loadavg)"
    echo "   petrel: $BUILD/petrel bench -m MODEL -t $THREADS -lm ram -r 1 {-p N -n 0 | -p 0 -n $GEN -d D}"
    echo "   (pp512 cold: the same with -p 512 -n 0 --no-warmup: the first prompt of the process)"
    [ -n "$LB" ] && echo "   llama.cpp: llama-bench -m MODEL -t $THREADS -lm none -r 1 {-p N -n 0 | -p 0 -n $GEN -d D}"
    row pp512 "p_$m.pp512" "l_$m.pp512"
    row "pp512 cold" "p_$m.cold512" "l_$m.pp512"
    [ "$LONG" = 1 ] && row pp4096 "p_$m.pp4096" "l_$m.pp4096"
    row tg@16 "p_$m.tg16" "l_$m.tg16"
    [ "$LONG" = 1 ] && row tg@4096 "p_$m.tg4096" "l_$m.tg4096"
done
exit 0
