#!/bin/sh
# bench/serve.sh — load test of `petrel serve`, run by `make bench`:
#   1. requests/s for tiny generations (max_tokens 1), sequential and 4 clients at once;
#   2. the server's added latency per token: a greedy 64-token completion through the
#      server (streamed, time from first to last text chunk, timed by the client in
#      bench/serve_load.mjs) against `petrel generate` decoding the same prompt on the
#      same model, alternated BENCH_SERVE_ROUNDS times in the same run; medians compared.
# Target: added latency per token < 5%.
#
#   BUILD=build sh bench/serve.sh            (make bench passes BUILD)
# Environment: BENCH_SERVE_MODEL (default: the bench model if generated, else a fixture),
# BENCH_THREADS (default: nproc), BENCH_SERVE_PORT (default 18573), BENCH_SERVE_ROUNDS (7),
# BENCH_SERVE_PROMPT (a prompt the model continues for 64 tokens without reaching end-of-text).
set -eu

BUILD=${BUILD:-build}
PETREL=$BUILD/petrel
THREADS=${BENCH_THREADS:-$(nproc)}
PORT=${BENCH_SERVE_PORT:-18573}
MODEL=${BENCH_SERVE_MODEL:-}
if [ -z "$MODEL" ]; then
    if [ -f build/bench/glm-dsa-bench.gguf ]; then MODEL=build/bench/glm-dsa-bench.gguf
    else MODEL=tests/fixtures/glm-dsa-rq2k.gguf; fi
fi
command -v curl >/dev/null || { echo "bench/serve.sh: curl is needed" >&2; exit 1; }
command -v node >/dev/null || { echo "bench/serve.sh: node (20 or later) is needed; skipped" >&2; exit 0; }
[ -x "$PETREL" ] || { echo "bench/serve.sh: $PETREL is missing (run make bench)" >&2; exit 1; }

TMP=$(mktemp -d)
"$PETREL" serve -m "$MODEL" --port "$PORT" -t "$THREADS" --queue 64 2>"$TMP/serve.log" &
PID=$!
cleanup() { kill $PID 2>/dev/null; wait $PID 2>/dev/null; rm -rf "$TMP"; }
# no EXIT trap: dash runs it when subshells exit, which would stop the server mid-run
trap 'cleanup; exit 1' INT TERM
URL=http://127.0.0.1:$PORT
for i in $(seq 1 600); do
    [ "$(curl -s -o /dev/null -w '%{http_code}' "$URL/health" || true)" = 200 ] && break
    sleep 0.2
done

PROMPT=${BENCH_SERVE_PROMPT:-"In the beginning God created the heaven and the earth. And the earth was"}
LOAD="node bench/serve_load.mjs $URL"

# 1. requests/s
set -- $($LOAD rps 40)
seq_rps=$2 par_rps=$3

# 2. per-token latency: server (stream, first to last text chunk, timed in the client) against
#    `petrel generate` (decode tok/s), alternated ROUNDS times; the medians are compared
ROUNDS=${BENCH_SERVE_ROUNDS:-7}
gen_tps() {
    "$PETREL" generate -m "$MODEL" -p "$PROMPT" -n 64 --temp 0 -t "$THREADS" --quiet --json 2>&1 >/dev/null |
        sed -n 's/.*"decode_tok_s": \([0-9.]*\).*/\1/p' | tail -1
}
: >"$TMP/s" && : >"$TMP/w" && : >"$TMP/g"
for r in $(seq 1 "$ROUNDS"); do
    $LOAD stream "$PROMPT" 64 | awk '{ print $3 }' >>"$TMP/s"
    # the server's own line for that request: the decode rate inside the worker
    sed -n 's/.*POST .*generated, \([0-9.]*\) tok\/s.*/\1/p' "$TMP/serve.log" | tail -1 >>"$TMP/w"
    gen_tps >>"$TMP/g"
done
median() { sort -g "$1" | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
s_med=$(median "$TMP/s") w_med=$(median "$TMP/w") g_med=$(median "$TMP/g")
added=$(echo "100 * ($g_med / $s_med - 1)" | bc -l)

echo "petrel serve on $MODEL ($THREADS threads), $(date -u '+%Y-%m-%d %H:%M UTC'), load $(cut -d' ' -f1-3 /proc/loadavg)"
printf '  tiny requests (max_tokens 1): %.1f req/s sequential, %.1f req/s with 4 clients\n' "$seq_rps" "$par_rps"
echo "  decode tok/s, server as the client sees it: $(tr '\n' ' ' <"$TMP/s")"
echo "  decode tok/s, server's worker (its log):   $(tr '\n' ' ' <"$TMP/w")"
echo "  decode tok/s, petrel generate:             $(tr '\n' ' ' <"$TMP/g")"
printf '  medians: server %.2f tok/s (worker %.2f), petrel generate %.2f tok/s: added latency per token %.1f%%\n' \
    "$s_med" "$w_med" "$g_med" "$added"
[ "$(echo "$s_med > 500" | bc)" = 1 ] &&
    echo "  (above ~500 tok/s one token takes less than the client's wake-ups resolve: read the worker's rate)"
cleanup
