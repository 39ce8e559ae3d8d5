#!/bin/sh
# mkref_exact.sh — makes tests/data/exact (long-prompt llama.cpp references for
# tests/test_exact.c; what is there and the file format: tests/data/exact/README.md).
#
#   LLAMA_CPP_BIN=/path/to/llama.cpp/build/bin tools/mkref_exact.sh [WHAT]
#
# WHAT: glm, gemma4, deepseek2, qwen3moe, fixtures, kv or all [all].
# LLAMA_CPP_BIN: an existing llama.cpp build's bin folder (libllama.so, llama-quantize,
# llama-imatrix); LLAMA_CPP_SRC: its source tree for llama.h (default: $LLAMA_CPP_BIN/../..).
# tools/llama_ref.c, a small client of llama.h, is compiled against it into a temporary
# folder. Nothing of llama.cpp is built or kept. Without LLAMA_CPP_BIN: says so, exits 0.
# Needs build/mkmodel (make build/mkmodel) and, for the fixtures part, ../shared/fixtures.
set -eu
BIN=${LLAMA_CPP_BIN:-}
if [ -z "$BIN" ] || [ ! -f "$BIN/libllama.so" ]; then
    echo "mkref_exact: SKIPPED — set LLAMA_CPP_BIN to a llama.cpp build's bin folder" >&2
    exit 0
fi
SRC=${LLAMA_CPP_SRC:-$BIN/../..}
WHAT=${1:-all}
OUT=tests/data/exact
FX=${PETREL_FIXTURES:-../shared/fixtures}
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
mkdir -p "$OUT"
cc -O2 -o "$W/llama_ref" tools/llama_ref.c -I"$SRC/include" -I"$SRC/ggml/include" \
    -L"$BIN" -lllama -lggml -lggml-base -Wl,-rpath,"$BIN"

# ref NAME MODEL N_PROMPT STRIDE F16 SEED: N_PROMPT byte tokens from SEED in one batch,
# 24 greedy tokens one by one; every STRIDE-th row in full (f16 or f32), all rows' top 5
# KV: the cache type (empty: F32)
KV=""
ref() {
    LLAMA_REF_KV=$KV "$W/llama_ref" "$2" "$OUT/$1" "$3" 24 "$4" "$5" "$6" > "$W/log" 2>&1 ||
        { tail -20 "$W/log"; exit 1; }
    echo "made $OUT/$1 ($(wc -c < "$OUT/$1") bytes)"
}

# f32_and_q3 NAME F32_STRIDE SEED MKMODEL_ARGS: the F32 model NAME (the test writes it again from
# the same arguments) and llama-quantize's Q3_K_M mix of it (kept: the test reads it), each
# with a 2,000-token reference (prompt seeds SEED and SEED + 1)
f32_and_q3() {
    name=$1 stride=$2 seed=$3
    shift 3
    build/mkmodel -o "$W/$name-f32.gguf" -t 1 "$@" > /dev/null
    ref "$name-f32.p2k.ref" "$W/$name-f32.gguf" 2000 "$stride" 0 "$seed"
    "$BIN/llama-quantize" "$W/$name-f32.gguf" "$OUT/$name-q3_k_m.gguf" Q3_K_M 2 > "$W/log" 2>&1 ||
        { tail -20 "$W/log"; exit 1; }
    ref "$name-q3_k_m.p2k.ref" "$OUT/$name-q3_k_m.gguf" 2000 16 1 $((seed + 1))
}

# The glm-dsa model: build/mkmodel, seed 7 (the fixtures use other seeds), F32; the test
# writes it again from the same arguments. Quantised by llama-quantize to the named mixes.
GLM="--embd 256 --layers 3 --dense 1 --ff 512 --experts 4 --used 2 --ff-exp 256 --heads 4"
GLM="$GLM --q-lora 128 --kv-lora 128 --qk-nope 64 --qk-rope 32 --v-head 64 --idx-heads 4"
GLM="$GLM --idx-dim 64 --idx-top-k 16 --vocab 512 --attn-type f32 --expert-type f32"
GLM="$GLM --embd-type f32 --seed 7"

QUANTS=${QUANTS:-Q3_K_M Q5_K_M Q4_0 IQ4_XS Q2_K_S}
if [ "$WHAT" = glm ] || [ "$WHAT" = all ]; then
    build/mkmodel -o "$W/glm-f32.gguf" -t 1 $GLM > /dev/null
    if [ -z "${SKIP_F32:-}" ]; then
        ref glm-f32.p2k.ref "$W/glm-f32.gguf" 2000 8 0 21
        ref glm-f32.p8k.ref "$W/glm-f32.gguf" 8000 32 0 22
    fi
    # importance matrix for Q2_K_S (llama-quantize refuses it without one): this README
    # and ARCHITECTURE.md as calibration text
    cat README.md ARCHITECTURE.md > "$W/calib.txt"
    "$BIN/llama-imatrix" -m "$W/glm-f32.gguf" -f "$W/calib.txt" -o "$W/imatrix.gguf" -c 256 --chunks 16 \
        -t 2 --no-ppl > "$W/log" 2>&1 || { tail -20 "$W/log"; exit 1; }
    for q in $QUANTS; do
        lq=$(echo $q | tr 'A-Z' 'a-z')
        im=""
        # the MTP block (blk.3) is not run by llama-imatrix, so it has no importance data:
        # Q4_K there, as llama-quantize refuses Q2_K without it
        [ $q = Q2_K_S ] && im="--imatrix $W/imatrix.gguf --tensor-type blk\.3\.=q4_k"
        "$BIN/llama-quantize" $im "$W/glm-f32.gguf" "$OUT/glm-$lq.gguf" $q 2 > "$W/log" 2>&1 ||
            { tail -20 "$W/log"; exit 1; }
        ref glm-$lq.p2k.ref "$OUT/glm-$lq.gguf" 2000 16 1 23
        ref glm-$lq.p8k.ref "$OUT/glm-$lq.gguf" 8000 32 1 24
    done
fi

# The gemma4 model: build/mkmodel, seed 11, 2 layers (sliding window 64, then full attention),
# F32; the test writes it again from the same arguments. llama-quantize's Q3_K_M mix of it
# (Q3_K, Q4_K, Q5_K, Q6_K, and Q5_0 on the 128-wide expert down matrices). 2,000 tokens only.
G4="--arch gemma4 --embd 256 --layers 2 --ff 256 --experts 4 --used 2 --ff-exp 128 --heads 4"
G4="$G4 --kv-heads 2 --head-dim 64 --kv-heads-full 1 --head-dim-full 128 --window 64"
G4="$G4 --swa-period 2 --vocab 512 --attn-type f32 --expert-type f32 --embd-type f32 --seed 11"
if [ "$WHAT" = gemma4 ] || [ "$WHAT" = all ]; then
    # shellcheck disable=SC2086 # the options are meant to split
    f32_and_q3 gemma4 8 41 $G4
fi

# The deepseek2 model: build/mkmodel --arch deepseek2, seed 13, 2 layers (dense, then MoE with
# 8 experts in 4 groups, 2 groups used), LoRA ranks 256 (K-quantisable rows), YaRN rope, F32;
# the test writes it again from the same arguments. llama-quantize's Q3_K_M mix of it (Q3_K,
# Q4_K, Q5_K, Q6_K, and Q4_0 on the 64-wide attn_k_b). 2,000 tokens only.
DS="--arch deepseek2 --embd 256 --layers 2 --dense 1 --ff 512 --experts 8 --used 2 --ff-exp 256"
DS="$DS --heads 4 --q-lora 256 --kv-lora 256 --qk-nope 64 --qk-rope 32 --v-head 64 --groups 4"
DS="$DS --groups-used 2 --vocab 512 --attn-type f32 --expert-type f32 --embd-type f32 --seed 13"
if [ "$WHAT" = deepseek2 ] || [ "$WHAT" = all ]; then
    # shellcheck disable=SC2086
    f32_and_q3 deepseek2 16 51 $DS
fi

# The qwen3moe model: build/mkmodel --arch qwen3moe, seed 17, 2 MoE layers (4 experts, 2 used,
# softmax router), GQA 4 / 2 heads of 64 with q/k norms, F32; the test writes it again from the
# same arguments. llama-quantize's Q3_K_M mix of it (Q3_K, Q4_K, Q5_K, Q6_K). 2,000 tokens only.
QW="--arch qwen3moe --embd 256 --layers 2 --ff 512 --experts 4 --used 2 --ff-exp 256 --heads 4"
QW="$QW --kv-heads 2 --head-dim 64 --vocab 512 --attn-type f32 --expert-type f32"
QW="$QW --embd-type f32 --seed 17"
if [ "$WHAT" = qwen3moe ] || [ "$WHAT" = all ]; then
    # shellcheck disable=SC2086
    f32_and_q3 qwen3moe 16 61 $QW
fi

# Every KV cache type on every family (issue 16's long-context matrix): each family's F32
# model above (deepseek2 with YaRN's original context at 1024, so the prompt runs past it)
# with a 2,000-token prompt, llama.cpp's K and V cache in the type (LLAMA_REF_KV; q8_0 and
# q4_0 with flash attention, which llama.cpp needs for a quantised V). Every 64th row in full.
if [ "$WHAT" = kv ] || [ "$WHAT" = all ]; then
    DSY="$DS --yarn-orig 1024"
    seed=71
    for fam in glm gemma4 deepseek2 qwen3moe; do
        case $fam in
        glm) args=$GLM ;;
        gemma4) args=$G4 ;;
        deepseek2) args=$DSY ;;
        qwen3moe) args=$QW ;;
        esac
        # shellcheck disable=SC2086
        build/mkmodel -o "$W/$fam-kv.gguf" -t 1 $args > /dev/null
        for KV in f16 bf16 q8_0 q4_0; do
            ref "$fam-f32.kv-$KV.p2k.ref" "$W/$fam-kv.gguf" 2000 64 0 $seed
            seed=$((seed + 1))
        done
        KV=""
    done
fi

if [ "$WHAT" = fixtures ] || [ "$WHAT" = all ]; then
    # the shipped fixtures at long prompts (the models are in tests/fixtures or ../shared)
    ref fx-glm-dsa-f32.p8k.ref "$FX/glm-dsa-f32.gguf" 8000 32 0 31
    ref fx-gemma4-f32.p8k.ref "$FX/gemma4-f32.gguf" 8000 16 0 32
    for m in glm-dsa-rq2k glm-dsa-iq2 glm-dsa-iq3 deepseek2-q8_0 deepseek2-q4_k_m deepseek2-rq2k \
        gemma4-q4_k_m gemma4-rq2k qwen3moe-q4_k_m qwen3moe-rq2k qwen3moe-mxfp4; do
        ref fx-$m.p2k.ref "$FX/$m.gguf" 2000 16 1 33
    done
fi
