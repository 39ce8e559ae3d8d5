#!/bin/sh
# check_llamacpp.sh — `make check-llamacpp`: petrel's greedy output on the demo model (or MODEL)
# against llama.cpp's on three prompts. Not part of `make test`: llama.cpp is not a dependency.
#
# llama.cpp comes from (first found):
#   LLAMA_CPP_DIR   a llama.cpp build with bin/llama-completion (or build/bin/llama-completion);
#                   the generated text is compared;
#   node-llama-cpp  `npm i -E node-llama-cpp@3.22.1` (prebuilt CPU binaries) in NODE_LLAMA_CPP_DIR,
#                   ./build/llamacpp or . (the folder that holds node_modules); petrel's prompt
#                   ids are fed and the generated ids are compared.
# Neither: prints how to get one and exits 0 (skipped). Exit 1 when an output differs.
# Greedy decoding on a Q8_0 model: both engines convert activations to Q8_0 the same way, so
# with llama.cpp run as the fixtures' oracle was (F32 KV cache, flash attention off) the
# continuations are expected to be identical. (With llama.cpp's defaults, F16 cache and flash
# attention, a near tie can flip: "In the beginning" has a top-2 margin of 0.08.)
set -u
PETREL=${PETREL:-build/petrel}
MODEL=${MODEL:-models/petrel-demo-glm.gguf}
N=${N_PREDICT:-24}

[ -x "$PETREL" ] || { echo "check-llamacpp: $PETREL not built (run make)" >&2; exit 1; }
[ -f "$MODEL" ] || { echo "check-llamacpp: $MODEL not found" >&2; exit 1; }

BIN=""
if [ -n "${LLAMA_CPP_DIR:-}" ]; then
    for c in "$LLAMA_CPP_DIR/bin/llama-completion" "$LLAMA_CPP_DIR/build/bin/llama-completion"; do
        [ -x "$c" ] && BIN=$c && break
    done
    [ -n "$BIN" ] || { echo "check-llamacpp: no llama-completion under LLAMA_CPP_DIR=$LLAMA_CPP_DIR" >&2; exit 1; }
fi
NODE_DIR=""
if [ -z "$BIN" ] && command -v node >/dev/null 2>&1; then
    for d in "${NODE_LLAMA_CPP_DIR:-}" build/llamacpp .; do
        [ -n "$d" ] && [ -f "$d/node_modules/node-llama-cpp/dist/index.js" ] && NODE_DIR="$d/node_modules" && break
    done
fi
if [ -z "$BIN" ] && [ -z "$NODE_DIR" ]; then
    echo "check-llamacpp: SKIPPED — no llama.cpp found. Either set LLAMA_CPP_DIR to a llama.cpp build" \
         "(bin/llama-completion), or: mkdir -p build/llamacpp && (cd build/llamacpp && npm i -E node-llama-cpp@3.22.1)"
    exit 0
fi

fail=0
i=0
for prompt in "In the beginning" "And Jesus said unto them," "The LORD is my shepherd;"; do
    i=$((i + 1))
    ids=$("$PETREL" tokenize -m "$MODEL" -p "$prompt" 2>/dev/null) || { echo "check-llamacpp: petrel tokenize failed" >&2; exit 1; }
    csv=$(echo "$ids" | tr ' ' ',')
    ours=$("$PETREL" generate -m "$MODEL" --tokens "$csv" -n "$N" --greedy -t 2 2>/dev/null) ||
        { echo "check-llamacpp: petrel generate failed" >&2; exit 1; }
    if [ -n "$BIN" ]; then
        what="text"
        mine=$(echo "$ours" | "$PETREL" detokenize -m "$MODEL" 2>/dev/null)
        # llama-completion echoes the prompt, then the continuation; -n N greedy tokens, no BOS (glm4)
        theirs=$("$BIN" -m "$MODEL" -p "$prompt" -n "$N" --temp 0 -no-cnv -t 2 -c 256 --no-warmup \
                 -ctk f32 -ctv f32 -fa off 2>/dev/null)
        theirs=${theirs#"$prompt"}
        # the last token may be a partial UTF-8 character or trailing newline: compare trimmed text
        mine=$(printf '%s' "$mine" | sed -e 's/[[:space:]]*$//')
        theirs=$(printf '%s' "$theirs" | sed -e 's/[[:space:]]*$//')
    else
        what="ids"
        mine=$ours
        theirs=$(node tools/check_llamacpp.mjs "$NODE_DIR" "$MODEL" "$N" "$csv" 2>/dev/null | tail -n 1)
    fi
    if [ "$mine" = "$theirs" ]; then
        echo "check-llamacpp: prompt $i \"$prompt\": identical $what ($N tokens)"
        printf '  %s%s\n' "$prompt" "$(echo "$ours" | "$PETREL" detokenize -m "$MODEL" 2>/dev/null | tr '\n' ' ')"
    else
        echo "check-llamacpp: prompt $i \"$prompt\": DIFFERENT $what"
        echo "  petrel:    $mine"
        echo "  llama.cpp: $theirs"
        fail=1
    fi
done
[ $fail -eq 0 ] && echo "check-llamacpp: petrel and llama.cpp ($([ -n "$BIN" ] && echo "$BIN" || echo node-llama-cpp)) agree on 3 prompts"
exit $fail
