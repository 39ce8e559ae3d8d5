#!/bin/sh
# bench/serve.sh — load test of `petrel serve`, run by `make bench`:
#   1. requests/s for tiny generations (max_tokens 1), sequential and 4 clients at once;
#   2. the server's added latency per token: a greedy 64-token completion through the
#      server (streamed, time from first to last content chunk) against
#      `petrel generate` decoding the same prompt on the same model in the same run.
# Target: added latency per token < 5%.
#
#   BUILD=build sh bench/serve.sh            (make bench passes BUILD)
# Environment: BENCH_SERVE_MODEL (default: the bench model if generated, else a fixture),
# BENCH_THREADS (default: nproc), BENCH_SERVE_PORT (default 18573).
set -eu

BUILD=${BUILD:-build}
PETREL=$BUILD/petrel
THREADS=${BENCH_THREADS:-$(nproc)}
PORT=${BENCH_SERVE_PORT:-18573}
MODEL=${BENCH_SERVE_MODEL:-}
if [ -z "$MODEL" ]; then
    if [ -f build/bench/glm-dsa-bench.gguf ]; then MODEL=build/bench/glm-dsa-bench.gguf
    else MODEL=../shared/fixtures/glm-dsa-rq2k.gguf; fi
fi
command -v curl >/dev/null || { echo "bench/serve.sh: curl is needed" >&2; exit 1; }
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

PROMPT="In the beginning God created the heaven and the earth."
tiny='{"messages":[{"role":"user","content":"Hi"}],"max_tokens":1,"temperature":0}'

# 1. requests/s
N=40
t0=$(date +%s.%N)
for i in $(seq 1 $N); do curl -s -o /dev/null "$URL/v1/chat/completions" -d "$tiny"; done
t1=$(date +%s.%N)
seq_rps=$(echo "$N / ($t1 - $t0)" | bc -l)
t0=$(date +%s.%N)
for c in 1 2 3 4; do
    (for i in $(seq 1 $((N / 4))); do curl -s -o /dev/null "$URL/v1/chat/completions" -d "$tiny"; done) &
done
for c in 1 2 3 4; do wait %$((c + 1)) 2>/dev/null || true; done
t1=$(date +%s.%N)
par_rps=$(echo "$N / ($t1 - $t0)" | bc -l)

# 2. per-token latency: server (stream, first to last chunk) vs petrel generate (decode tok/s)
body=$(printf '{"prompt":"%s","max_tokens":64,"temperature":0,"stream":true}' "$PROMPT")
server_tps() {
    curl -sN "$URL/v1/completions" -d "$body" | while IFS= read -r line; do
        case $line in "data: {"*) date +%s.%N;; esac
    done > "$TMP/chunks"
    awk 'NR == 1 { a = $1 } { b = $1; n++ } END { if (n > 1) printf "%.3f\n", (n - 1) / (b - a); else print 0 }' "$TMP/chunks"
}
gen_tps() {
    "$PETREL" generate -m "$MODEL" -p "$PROMPT" -n 64 --temp 0 -t "$THREADS" --quiet --json 2>&1 >/dev/null |
        sed -n 's/.*"decode_tok_s": \([0-9.]*\).*/\1/p' | tail -1
}
s_best=0; g_best=0
for r in 1 2 3; do
    s=$(server_tps); g=$(gen_tps)
    s_best=$(echo "if ($s > $s_best) $s else $s_best" | bc -l)
    g_best=$(echo "if ($g > $g_best) $g else $g_best" | bc -l)
done
added=$(echo "100 * ($g_best / $s_best - 1)" | bc -l)

echo "petrel serve on $MODEL ($THREADS threads), $(date -u '+%Y-%m-%d %H:%M UTC'), load $(cut -d' ' -f1-3 /proc/loadavg)"
printf '  tiny requests (max_tokens 1): %.1f req/s sequential, %.1f req/s with 4 clients\n' "$seq_rps" "$par_rps"
printf '  decode: server %.2f tok/s, petrel generate %.2f tok/s (best of 3): added latency per token %.1f%%\n' \
    "$s_best" "$g_best" "$added"
cleanup
