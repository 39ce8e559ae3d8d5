#!/bin/sh
# bitcheck.sh — the decoder's bits on every shipped model, to compare two builds.
#
#   sh tools/bitcheck.sh BUILD/petrel OUTDIR
#
# For each fixture model of tests/fixtures (every family and weight type) and the demo model,
# writes into OUTDIR: the logits of a 300-token prompt (`generate --tokens ... --dump-logits`)
# with the model's experts in memory and streamed through 2 slots per layer, the 32 greedy ids
# after it, a sampled chat answer and its reasoning (`generate --chat`, seed fixed, drafting as
# by default, so the MTP head's drafts run on glm-dsa) and a reply constrained by a JSON Schema. Then prints one line per file, its SHA-256. Run it
# with the old build and the new one and diff the two listings: a refactoring that changes no
# arithmetic leaves every line the same. Takes a few minutes on two cores.
set -eu
BIN=${1:?usage: sh tools/bitcheck.sh PETREL_BINARY OUTDIR}
OUT=${2:?usage: sh tools/bitcheck.sh PETREL_BINARY OUTDIR}
mkdir -p "$OUT"
export XDG_CACHE_HOME="$OUT/cache"
# 300 token ids below every fixture's vocabulary (512), varied so that routing spreads
ids=$(awk 'BEGIN { x = 7; for (i = 0; i < 300; i++) { x = (x * 1103515245 + 12345) % 2147483648;
      printf "%s%d", (i ? "," : ""), 3 + int(x / 65536) % 490 } }')
for m in tests/fixtures/*.gguf models/petrel-demo-glm.gguf; do
    n=$(basename "$m" .gguf)
    "$BIN" generate -m "$m" --tokens "$ids" -n 32 -t 2 --dump-logits "$OUT/$n.logits" \
        --quiet >"$OUT/$n.ids" 2>"$OUT/$n.err"
    "$BIN" generate -m "$m" --tokens "$ids" -n 32 -t 2 --expert-slots 2 -b 64 \
        --dump-logits "$OUT/$n.stream.logits" --quiet >"$OUT/$n.stream.ids" 2>>"$OUT/$n.err"
    "$BIN" generate -m "$m" --chat -p "Tell me about the sea and the birds over it." -n 48 \
        --temp 0.8 --seed 7 -t 2 --quiet --show-reasoning >"$OUT/$n.chat" \
        2>"$OUT/$n.chat.reasoning" </dev/null
    "$BIN" generate -m "$m" --chat -p "Name a bird." -n 40 --temp 0.8 --seed 3 -t 2 --quiet \
        -j '{"type":"object","properties":{"name":{"type":"string","maxLength":12}},"required":["name"]}' \
        >"$OUT/$n.json" 2>>"$OUT/$n.err" </dev/null
done
cd "$OUT" && sha256sum *.logits *.ids *.chat *.reasoning *.json
