/* gemma4.h — the Gemma 4 MoE family (GGUF arch `gemma4`, e.g. 26B-A4B):
 * hyper-parameters from GGUF metadata and every tensor bound by name with the
 * shape the hyper-parameters imply.
 *
 * Layers alternate between sliding-window attention (small head dim, more KV
 * heads, plain NEOX rope) and full attention (large head dim, fewer KV heads,
 * no v projection: V is the raw K projection, "proportional" rope through
 * rope_freqs), as `attention.sliding_window_pattern` says. Head dims, KV-head
 * counts, rope dims and bases are therefore per layer. Every layer has a dense
 * GeGLU MLP next to the routed experts; the experts' gate and up matrices are
 * fused into one `ffn_gate_up_exps` tensor (gate rows first) and each expert's
 * output has its own scale.
 *
 * Refused: the dense Gemma 4 variants (no experts), per-layer input
 * embeddings (`embedding_length_per_layer_input` > 0) and KV sharing between
 * layers (`attention.shared_kv_layers` > 0) — the small on-device models.
 * Nothing here reads tensor data: binding records pointers into the mapping.
 */
#ifndef PT_MODEL_GEMMA4_H
#define PT_MODEL_GEMMA4_H

#include <stdint.h>

#include "format/gguf.h"
#include "nn/matmul.h"
#include "nn/ops.h"

#define GEMMA4_MAX_LAYERS 4096 /* block_count above this is refused as implausible */

typedef struct gemma4_hparams {
    int n_embd; /* hidden size */
    int n_layer;
    int n_vocab;
    int n_head;   /* query heads (every layer) */
    int n_ff;     /* dense GeGLU MLP width */
    int n_ff_exp; /* routed expert width */
    int n_expert, n_expert_used;
    int window; /* sliding window: a query at t sees keys s with t - s < window */
    float rms_eps;
    float embd_scale; /* input embeddings are multiplied by sqrt(n_embd) */
    float softcap;    /* final logits: softcap * tanh(logits / softcap); 0 = none */
    int n_ctx_train;
    int max_head_dim; /* largest head dim over layers */
    int max_kv_dim;   /* largest n_kv * head_dim over layers */
} gemma4_hparams;

/* One decoder block. Pointers to F32 vectors are NULL when absent. */
typedef struct gemma4_layer {
    int swa;                     /* 1: sliding-window layer, 0: full attention */
    int head_dim;                /* per-head q/k/v width */
    int n_kv;                    /* KV heads */
    nn_rope rope;                /* NEOX over rope dims; full layers with freq_factors */
    const float *attn_norm;      /* [n_embd] */
    mm_weight wq;                /* n_embd -> n_head*head_dim */
    mm_weight wk;                /* n_embd -> n_kv*head_dim */
    mm_weight wv;                /* n_embd -> n_kv*head_dim; data NULL: V = raw K projection */
    const float *q_norm;         /* [head_dim] per-head RMS norm gain */
    const float *k_norm;         /* [head_dim] */
    mm_weight wo;                /* n_head*head_dim -> n_embd */
    const float *post_attn_norm; /* [n_embd] */
    /* dense GeGLU MLP */
    const float *ffn_norm;        /* [n_embd] */
    mm_weight ffn_gate, ffn_up;   /* n_embd -> n_ff */
    mm_weight ffn_down;           /* n_ff -> n_embd */
    const float *post_ffw_norm_1; /* [n_embd] */
    /* routed experts */
    const float *pre_ffw_norm_2; /* [n_embd] expert input norm */
    mm_weight gate_inp; /* n_embd -> n_expert (router, on the scaled unit-normed residual) */
    const float *gate_inp_scale;     /* [n_embd] router input gain */
    const gguf_tensor *gate_up_exps; /* [n_expert] n_embd -> 2*n_ff_exp (gate rows, then up rows) */
    const gguf_tensor *down_exps;    /* [n_expert] n_ff_exp -> n_embd */
    const float *down_exps_scale;    /* [n_expert] per-expert output scale, or NULL */
    const float *post_ffw_norm_2;    /* [n_embd] */
    const float *post_ffw_norm;      /* [n_embd] norm of MLP + experts */
    float out_scale;                 /* layer_output_scale (1 when absent) */
} gemma4_layer;

typedef struct gemma4_model {
    gemma4_hparams hp;
    mm_weight tok_embd;       /* n_vocab rows of n_embd */
    const float *output_norm; /* [n_embd] */
    mm_weight output;         /* n_embd -> n_vocab (token_embd when tied) */
    gemma4_layer *layers;     /* [n_layer] */
} gemma4_model;

/* One routed expert's weights, as the forward pass consumes them. */
typedef struct gemma4_expert_w {
    mm_weight gate_up; /* n_embd -> 2*n_ff_exp: gate rows, then up rows */
    mm_weight down;    /* n_ff_exp -> n_embd */
    float scale;       /* multiplies the expert's output */
} gemma4_expert_w;

/* Read hyper-parameters and bind all tensors. 0, or -1 with err naming the key
 * or tensor and the problem. */
int gemma4_model_load(const gguf_ctx *g, gemma4_model *m, pt_err *err);
void gemma4_model_free(gemma4_model *m);

/* Expert e of `layer` with its gate_up and down slices at mats[0], mats[1]
 * (from the expert store: the mapping or a cache slot). */
gemma4_expert_w gemma4_expert(const gemma4_model *m, int layer, int e, const uint8_t *const mats[2]);

#endif
