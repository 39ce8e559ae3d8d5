/* glm_dsa.h — the GLM-5.x (`glm-dsa`) and DeepSeek-V3 (`deepseek2`) family:
 * hyper-parameters from GGUF metadata and every tensor bound by name with the
 * shape the hyper-parameters imply.
 *
 * Both archs share MLA attention (low-rank q, compressed kv latent + shared
 * rope key, per-head k_b / v_b for weight absorption) and the sigmoid-routed
 * MoE with selection bias, shared experts and leading dense layers. glm-dsa
 * adds the DSA lightning indexer (on "full" layers; "shared" layers reuse the
 * previous full layer's key selection) and trailing NextN/MTP blocks;
 * deepseek2 adds YaRN rope and group-limited routing.
 *
 * Nothing here reads tensor data: binding records pointers into the mapping.
 */
#ifndef PT_MODEL_GLM_DSA_H
#define PT_MODEL_GLM_DSA_H

#include <stdint.h>

#include "format/gguf.h"
#include "nn/matmul.h"
#include "nn/mla.h"
#include "nn/ops.h"


enum { GLM_ARCH_GLM_DSA = 1, GLM_ARCH_DEEPSEEK2 = 2 };

typedef struct glm_hparams {
    int arch;             /* GLM_ARCH_* */
    int n_embd;           /* hidden size */
    int n_layer;          /* trunk layers (block_count - n_nextn) */
    int n_nextn;          /* trailing MTP blocks */
    int n_vocab;
    int n_head;
    int q_lora;           /* q LoRA rank; 0 = direct attn_q */
    int kv_lora;          /* compressed latent width */
    int qk_nope, qk_rope; /* per-head query/key split */
    int v_head;           /* per-head value width */
    int n_ff;             /* dense FFN width */
    int n_ff_exp;         /* routed / shared expert width */
    int n_expert, n_expert_used, n_expert_shared;
    int n_dense_lead;     /* leading dense layers */
    int n_group, n_group_used; /* group-limited routing (1/1: none) */
    int gating;           /* NN_GATING_* */
    int weights_norm;     /* normalise the chosen experts' weights */
    float weights_scale;
    float rms_eps;
    float kq_scale;       /* attention logit scale (includes YaRN mscale^2) */
    nn_rope rope;         /* MLA rope (qk_rope dims) */
    int n_ctx_train;
    /* DSA indexer (glm-dsa); idx_n_head = 0: none */
    int idx_n_head, idx_head_dim, idx_top_k;
    uint8_t *idx_full;    /* [n_layer] 1 = computes its own top-k, 0 = reuses */
} glm_hparams;

/* One decoder block. Pointers to F32 vectors are NULL when absent. */
typedef struct glm_layer {
    const float *attn_norm;   /* [n_embd] */
    nn_mla_w attn;            /* MLA attention and, on full layers, the DSA indexer */
    const float *ffn_norm;    /* [n_embd] */
    /* dense FFN (leading layers) */
    mm_weight ffn_gate, ffn_up, ffn_down;
    /* MoE */
    mm_weight gate_inp;       /* n_embd -> n_expert (router) */
    const float *exp_bias;    /* [n_expert] selection-only bias */
    const gguf_tensor *gate_exps, *up_exps, *down_exps; /* stacked [n_expert] */
    mm_weight gate_sh, up_sh, down_sh; /* shared expert(s), width n_ff_exp*n_shared */
    /* NextN / MTP block extras */
    mm_weight eh_proj;        /* 2*n_embd -> n_embd */
    const float *enorm, *hnorm, *shared_head_norm; /* [n_embd] */
    mm_weight embed_tokens;   /* n_vocab rows of n_embd */
    mm_weight shared_head;    /* n_embd -> n_vocab */
    int is_moe, is_nextn;
} glm_layer;


typedef struct glm_model {
    glm_hparams hp;
    mm_weight tok_embd;       /* n_vocab rows of n_embd */
    const float *output_norm; /* [n_embd] */
    mm_weight output;         /* n_embd -> n_vocab */
    glm_layer *layers;        /* [n_layer + n_nextn] */
} glm_model;

/* Read hyper-parameters and bind all tensors. 0, or -1 with err naming the key
 * or tensor and the problem. */
int glm_model_load(const gguf_ctx *g, glm_model *m, pt_err *err);
void glm_model_free(glm_model *m);

#endif
