/* qwen3moe.h — the Qwen3-MoE family (GGUF arch `qwen3moe`: Qwen3-30B-A3B,
 * 235B-A22B): hyper-parameters from GGUF metadata and every tensor bound by
 * name with the shape the hyper-parameters imply.
 *
 * Every layer: GQA attention with per-head q/k RMS norms before NEOX rope,
 * then a softmax-routed SwiGLU MoE (top-k, weights renormalised; no shared
 * expert, no dense layers). Nothing here reads tensor data: binding records
 * pointers into the mapping.
 */
#ifndef PT_MODEL_QWEN3MOE_H
#define PT_MODEL_QWEN3MOE_H

#include <stdint.h>

#include "format/gguf.h"
#include "nn/matmul.h"
#include "nn/ops.h"

#define QWEN3MOE_MAX_LAYERS 4096 /* block_count above this is refused as implausible */

typedef struct qwen3moe_hparams {
    int n_embd; /* hidden size */
    int n_layer;
    int n_vocab;
    int n_head, n_kv; /* query / KV heads */
    int head_dim;     /* per-head q/k/v width */
    int n_ff_exp;     /* routed expert width */
    int n_expert, n_expert_used;
    int weights_norm;    /* renormalise the chosen experts' weights (llama.cpp: always) */
    float weights_scale; /* multiplies the expert weights; 0 or 1: none */
    float rms_eps;
    float kq_scale; /* 1/sqrt(head_dim) */
    nn_rope rope;   /* NEOX */
    int n_ctx_train;
} qwen3moe_hparams;

typedef struct qwen3moe_layer {
    const float *attn_norm;                 /* [n_embd] */
    mm_weight wq;                           /* n_embd -> n_head*head_dim */
    mm_weight wk, wv;                       /* n_embd -> n_kv*head_dim */
    const float *q_norm, *k_norm;           /* [head_dim] per-head RMS norm gains */
    mm_weight wo;                           /* n_head*head_dim -> n_embd */
    const float *ffn_norm;                  /* [n_embd] */
    mm_weight gate_inp;                     /* n_embd -> n_expert (router) */
    const gguf_tensor *gate_exps, *up_exps; /* [n_expert] n_embd -> n_ff_exp */
    const gguf_tensor *down_exps;           /* [n_expert] n_ff_exp -> n_embd */
} qwen3moe_layer;

typedef struct qwen3moe_model {
    qwen3moe_hparams hp;
    mm_weight tok_embd;       /* n_vocab rows of n_embd */
    const float *output_norm; /* [n_embd] */
    mm_weight output;         /* n_embd -> n_vocab (token_embd when tied) */
    qwen3moe_layer *layers;   /* [n_layer] */
} qwen3moe_model;

/* One routed expert's weights, as the forward pass consumes them. */
typedef struct qwen3moe_expert_w {
    mm_weight gate, up; /* n_embd -> n_ff_exp */
    mm_weight down;     /* n_ff_exp -> n_embd */
} qwen3moe_expert_w;

/* Read hyper-parameters and bind all tensors. 0, or -1 with err naming the key
 * or tensor and the problem. */
int qwen3moe_model_load(const gguf_ctx *g, qwen3moe_model *m, pt_err *err);
void qwen3moe_model_free(qwen3moe_model *m);

/* Expert e of `layer`: the only place the forward pass gets routed weights
 * from (the resident mapping today; an expert cache when streaming). */
qwen3moe_expert_w qwen3moe_expert(const qwen3moe_model *m, int layer, const uint8_t *const mats[3]);

#endif
