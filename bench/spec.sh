#!/bin/sh
# bench/spec.sh — drafting with the MTP head, run by `make bench` (tools/bench_spec.c).
#
# On a synthetic glm-dsa model (random MTP head; written by $BUILD/mkmodel into build/bench/
# when missing, raw random experts, ~1.4 GiB) with the routed experts streamed through
# SPEC_SLOTS cache slots per layer (O_DIRECT reads: the SSD, not the page cache): the ceiling
# (a replayed greedy run as the draft source, draft lengths 1-4) and the cost of failure (the
# random head, default settings); then the demo model's real head, resident and streamed
# through 4 slots, at greedy and at temperature 0.7.
#
# Environment: SPEC_MODEL (path), SPEC_SLOTS (16), SPEC_GEN (64), BENCH_THREADS (nproc).
set -eu

BUILD=${BUILD:-build}
MODEL=${SPEC_MODEL:-build/bench/glm-dsa-spec.gguf}
SLOTS=${SPEC_SLOTS:-16}
N_GEN=${SPEC_GEN:-64}
THREADS=${BENCH_THREADS:-$(nproc)}

if [ ! -f "$MODEL" ]; then
    mkdir -p "$(dirname "$MODEL")"
    echo "bench/spec.sh: generating $MODEL" >&2
    "$BUILD/mkmodel" -o "$MODEL" -t "$THREADS" --raw-experts
fi
echo "== drafting: synthetic glm-dsa, streamed through $SLOTS slots/layer, $N_GEN tokens (load: $(cut -d' ' -f1-3 /proc/loadavg))"
"$BUILD/bench_spec" "$MODEL" "$SLOTS" "$N_GEN" "$THREADS"
echo "== drafting: demo model, resident"
"$BUILD/bench_spec" models/petrel-demo-glm.gguf 0 256 "$THREADS"
echo "== drafting: demo model, streamed through 4 slots/layer"
"$BUILD/bench_spec" models/petrel-demo-glm.gguf 4 256 "$THREADS"
