#!/bin/sh
# bench/pcache.sh — prefixes that survive a restart (issue 16, point 4), run by `make bench`:
# a ~12,000-token agent-shaped request (long instructions, three tool definitions, a short
# user turn) sent to `petrel serve --cache-gb 0` (no prefix cache: the baseline), then to
# `petrel serve --cache-dir DIR` (cold: it stores the prefix), then that server is stopped, a
# new one started on the same folder and the same request sent again. Reported: the time to
# the first token (a max_tokens 1 request, timed by curl) without the cache, cold and
# restored, the restored/cold ratio, the positions the second server reused (cached_tokens),
# and the bytes written for the stored prefix (the folder's size after the cold request) per
# prompt token.
#
#   BUILD=build sh bench/pcache.sh            (make bench passes BUILD)
# Environment: BENCH_PCACHE_MODEL (default: the demo model), BENCH_THREADS (default: nproc),
# BENCH_PCACHE_PORT (default 18591), BENCH_PCACHE_CHARS (instructions' length, default 30000).
set -eu

BUILD=${BUILD:-build}
PETREL=$BUILD/petrel
THREADS=${BENCH_THREADS:-$(nproc)}
PORT=${BENCH_PCACHE_PORT:-18591}
MODEL=${BENCH_PCACHE_MODEL:-models/petrel-demo-glm.gguf}
CHARS=${BENCH_PCACHE_CHARS:-30000}
command -v curl >/dev/null || { echo "bench/pcache.sh: curl is needed" >&2; exit 1; }
[ -x "$PETREL" ] || { echo "bench/pcache.sh: $PETREL is missing (run make bench)" >&2; exit 1; }
[ -f "$MODEL" ] || { echo "bench/pcache.sh: $MODEL is missing; skipped" >&2; exit 0; }

TMP=$(mktemp -d)
URL=http://127.0.0.1:$PORT
PID=
stop() { [ -n "$PID" ] && kill "$PID" 2>/dev/null && wait "$PID" 2>/dev/null; PID=; }
trap 'stop; rm -rf "$TMP"; exit 1' INT TERM

start() { # extra flags: $@
    "$PETREL" serve -m "$MODEL" --port "$PORT" -t "$THREADS" --cache-dir "$TMP/kv" "$@" \
        2>>"$TMP/serve.log" &
    PID=$!
    for _ in $(seq 1 600); do
        [ "$(curl -s -o /dev/null -w '%{http_code}' "$URL/health" || true)" = 200 ] && return 0
        sleep 0.2
    done
    echo "bench/pcache.sh: the server did not start:" >&2
    cat "$TMP/serve.log" >&2
    exit 1
}

# the request: rules repeated to CHARS characters (no quotes or backslashes: plain JSON text)
i=0
: >"$TMP/sys"
while [ "$(wc -c <"$TMP/sys")" -lt "$CHARS" ]; do
    i=$((i + 1))
    printf '%d. Read files before you change them, and keep every change small and reviewable. When a command fails, read its output and explain the cause. Prefer the apply_patch tool for edits. ' "$i" >>"$TMP/sys"
done
{
    printf '{"messages":[{"role":"system","content":"'
    cat "$TMP/sys"
    printf '"},{"role":"user","content":"List the files in this repository and summarise the README."}],'
    printf '"tools":[{"type":"function","function":{"name":"shell","description":"Runs a shell command.","parameters":{"type":"object","properties":{"command":{"type":"array","items":{"type":"string"}}},"required":["command"]}}},'
    printf '{"type":"function","function":{"name":"apply_patch","description":"Applies a patch.","parameters":{"type":"object","properties":{"input":{"type":"string"}},"required":["input"]}}},'
    printf '{"type":"function","function":{"name":"update_plan","description":"Updates the plan.","parameters":{"type":"object","properties":{"plan":{"type":"string"}},"required":["plan"]}}}],'
    printf '"max_tokens":1,"temperature":0}'
} >"$TMP/req.json"

ask() { # prints: seconds prompt_tokens cached_tokens
    curl -s -o "$TMP/resp.json" -w '%{time_total}' -H 'Content-Type: application/json' \
        --max-time 3600 --data-binary @"$TMP/req.json" "$URL/v1/chat/completions" >"$TMP/t"
    p=$(sed -n 's/.*"prompt_tokens":\([0-9]*\).*/\1/p' "$TMP/resp.json")
    c=$(sed -n 's/.*"cached_tokens":\([0-9]*\).*/\1/p' "$TMP/resp.json")
    echo "$(cat "$TMP/t") ${p:-0} ${c:-0}"
}

load0=$(cut -d' ' -f1 /proc/loadavg)
start --cache-gb 0
set -- $(ask)
nocache=$1
stop
start
set -- $(ask)
cold=$1 n_prompt=$2 cached_cold=$3
stop
bytes=$(du -sb "$TMP/kv" | cut -f1)
blocks=$(ls "$TMP/kv" | grep -c '\.kv$' || true)
start
set -- $(ask)
warm=$1 cached_warm=$3
stop
load1=$(cut -d' ' -f1 /proc/loadavg)

echo "prefix cache ($(basename "$MODEL"), $THREADS threads, load $load0 -> $load1):"
echo "  prompt $n_prompt tokens; no prefix cache: TTFT $nocache s"
echo "  cold, storing the prefix: TTFT $cold s (cached $cached_cold)"
echo "  restarted server, same --cache-dir: TTFT $warm s (cached $cached_warm)"
awk -v c="$cold" -v w="$warm" 'BEGIN { printf "  restored/cold TTFT ratio: %.3f (%.1fx faster)\n", w / c, c / w }'
awk -v b="$bytes" -v n="$n_prompt" -v k="$blocks" \
    'BEGIN { printf "  stored: %d blocks, %.1f MB for the prefix, %.0f bytes per prompt token\n", k, b / 1e6, b / n }'
grep -i "warning" "$TMP/serve.log" || true
rm -rf "$TMP"
