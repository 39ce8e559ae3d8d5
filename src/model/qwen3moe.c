/* qwen3moe.c — the Qwen3-MoE family (GGUF arch `qwen3moe`: Qwen3-30B-A3B,
 * 235B-A22B): hyper-parameters from GGUF metadata, every tensor bound by name
 * with the shape the hyper-parameters imply, and the family's decoder block.
 *
 * Every layer: GQA attention with per-head q/k RMS norms before NEOX rope,
 * then a softmax-routed SwiGLU MoE (top-k, weights renormalised; no shared
 * expert, no dense layers). Binding reads no tensor data, it records pointers
 * into the mapping; every tensor is checked against the shape the metadata
 * implies and its type against what petrel can compute with, so a
 * contradictory file is refused at load with the key or tensor named.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "format/gguf.h"
#include "model/fam_common.h"
#include "model/family.h"
#include "model/loader.h"
#include "nn/attn.h"
#include "nn/ffn.h"
#include "nn/matmul.h"
#include "nn/ops.h"
#include "nn/router.h"

typedef struct qwen3moe_hparams {
    int n_embd; /* hidden size */
    int n_layer;
    int n_head, n_kv; /* query / KV heads */
    int head_dim;     /* per-head q/k/v width */
    int n_ff_exp;     /* routed expert width */
    int n_expert, n_expert_used;
    int weights_norm;    /* renormalise the chosen experts' weights (llama.cpp: always) */
    float weights_scale; /* multiplies the expert weights; 0 or 1: none */
    float rms_eps;
    float kq_scale; /* 1/sqrt(head_dim) */
    nn_rope rope;   /* NEOX */
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
    qwen3moe_layer *layers; /* [n_layer] */
    fam_kv_layer *kvl;      /* [n_layer] K/V rows of n_kv * head_dim, every position */
} qwen3moe_model;

/* One routed expert's weights, as the forward pass consumes them. */
typedef struct qwen3moe_expert_w {
    mm_weight gate, up; /* n_embd -> n_ff_exp */
    mm_weight down;     /* n_ff_exp -> n_embd */
} qwen3moe_expert_w;

static int load_hparams(ld_ctx *L, qwen3moe_hparams *hp) {
    int vl, n_rot;
    if (fam_block_count(L, &hp->n_layer) || ld_u32(L, "embedding_length", &hp->n_embd, 1, 0) ||
        ld_u32(L, "attention.head_count", &hp->n_head, 1, 0) ||
        ld_u32(L, "attention.head_count_kv", &hp->n_kv, 0, hp->n_head) ||
        ld_u32(L, "expert_count", &hp->n_expert, 1, 0) ||
        ld_u32(L, "expert_used_count", &hp->n_expert_used, 1, 0) ||
        ld_u32(L, "expert_feed_forward_length", &hp->n_ff_exp, 1, 0) ||
        ld_f32(L, "attention.layer_norm_rms_epsilon", &hp->rms_eps, 1, 0) ||
        ld_f32(L, "expert_weights_scale", &hp->weights_scale, 0, 0.0f) ||
        ld_bool(L, "expert_weights_norm", &hp->weights_norm, 1))
        return -1;
    if (hp->n_embd < 1 || hp->n_head < 1)
        return L->rc = pt_errf(L->err, "%s: embedding_length %d / head_count %d must be positive",
                               L->path, hp->n_embd, hp->n_head);
    if (ld_u32(L, "attention.key_length", &hp->head_dim, 0, hp->n_embd / hp->n_head) ||
        ld_u32(L, "attention.value_length", &vl, 0, hp->head_dim) ||
        ld_u32(L, "rope.dimension_count", &n_rot, 0, hp->head_dim))
        return -1;
    if (hp->n_kv < 1 || hp->n_head % hp->n_kv)
        return L->rc = pt_errf(L->err, "%s: %d KV heads do not divide %d query heads", L->path,
                               hp->n_kv, hp->n_head);
    if (hp->n_head / hp->n_kv > NN_ATTN_MAX_GROUP)
        return L->rc = pt_errf(L->err, "%s: %d query heads per KV head (at most %d)", L->path,
                               hp->n_head / hp->n_kv, NN_ATTN_MAX_GROUP);
    if (hp->head_dim < 2 || vl != hp->head_dim)
        return L->rc = pt_errf(L->err, "%s: key length %d and value length %d must be equal",
                               L->path, hp->head_dim, vl);
    if (n_rot < 2 || (n_rot & 1) || n_rot > hp->head_dim)
        return L->rc = pt_errf(L->err, "%s: rope.dimension_count %d must be even and at most %d",
                               L->path, n_rot, hp->head_dim);
    if (hp->n_expert < 1 || hp->n_expert_used < 1 || hp->n_expert_used > hp->n_expert ||
        hp->n_ff_exp < 1)
        return L->rc = pt_errf(
                   L->err,
                   "%s: expert_used_count %d must be in 1..expert_count (%d), expert width %d",
                   L->path, hp->n_expert_used, hp->n_expert, hp->n_ff_exp);
    hp->kq_scale = 1.0f / sqrtf((float)hp->head_dim);
    return fam_rope(L, n_rot, 1, &hp->rope, NULL);
}

static void q3_free(void *model) {
    qwen3moe_model *m = model;
    free(m->layers);
    free(m->kvl);
}

/* fam_ops.load: hyper-parameters, the trunk, every layer's tensors. */
static int q3_load(ld_ctx *L, void *model, fam_desc *d) {
    qwen3moe_model *m = model;
    qwen3moe_hparams *hp = &m->hp;
    if (load_hparams(L, hp) || fam_bind_trunk(L, hp->n_embd, d)) return -1;
    m->layers = calloc((size_t)hp->n_layer, sizeof(qwen3moe_layer));
    m->kvl = calloc((size_t)hp->n_layer, sizeof(fam_kv_layer));
    if (!m->layers || !m->kvl) return pt_errf(L->err, "%s: out of memory", L->path);
    const int E = hp->n_embd, QD = hp->n_head * hp->head_dim, KVD = hp->n_kv * hp->head_dim;
    const int X = hp->n_expert, F = hp->n_ff_exp;
    for (int l = 0; l < hp->n_layer && !L->rc; l++) {
        qwen3moe_layer *ly = &m->layers[l];
        m->kvl[l] = (fam_kv_layer){KVD, 0};
        char n[128];
#define NM(s) (snprintf(n, sizeof n, "blk.%d.%s", l, s), n)
        ly->attn_norm = ld_vec(L, NM("attn_norm.weight"), E, 1);
        ly->wq = ld_weight(L, NM("attn_q.weight"), E, QD, 1);
        ly->wk = ld_weight(L, NM("attn_k.weight"), E, KVD, 1);
        ly->wv = ld_weight(L, NM("attn_v.weight"), E, KVD, 1);
        ly->q_norm = ld_vec(L, NM("attn_q_norm.weight"), hp->head_dim, 1);
        ly->k_norm = ld_vec(L, NM("attn_k_norm.weight"), hp->head_dim, 1);
        ly->wo = ld_weight(L, NM("attn_output.weight"), QD, E, 1);
        ly->ffn_norm = ld_vec(L, NM("ffn_norm.weight"), E, 1);
        ly->gate_inp = ld_weight(L, NM("ffn_gate_inp.weight"), E, X, 1);
        ly->gate_exps = ld_stack(L, NM("ffn_gate_exps.weight"), E, F, X, 1);
        ly->up_exps = ld_stack(L, NM("ffn_up_exps.weight"), E, F, X, 1);
        ly->down_exps = ld_stack(L, NM("ffn_down_exps.weight"), F, E, X, 1);
#undef NM
    }
    if (L->rc) return -1;
    d->n_layer = hp->n_layer;
    d->kv_unit = hp->head_dim;
    d->n_expert = hp->n_expert;
    d->n_expert_used = hp->n_expert_used;
    d->rms_eps = hp->rms_eps;
    d->row_floats = hp->n_embd; /* out */
    d->max_in = PT_MAX(PT_MAX((int64_t)E, (int64_t)QD), (int64_t)F);
    return 0;
}

static qwen3moe_expert_w qwen3moe_expert(const qwen3moe_model *m, int layer,
                                         const uint8_t *const mats[3]) {
    const qwen3moe_layer *ly = &m->layers[layer];
    qwen3moe_expert_w w = {ld_slice_at(ly->gate_exps, mats[0]), ld_slice_at(ly->up_exps, mats[1]),
                           ld_slice_at(ly->down_exps, mats[2])};
    return w;
}

/* ===== Forward pass =====
 * Every layer: RMS norm, GQA attention with per-head q/k norms before NEOX
 * rope, residual; RMS norm, softmax-routed SwiGLU experts, residual. Each
 * buffer is allocated in state_new; the token loop allocates nothing. */

typedef struct q3_state {
    const qwen3moe_model *m;
    fam_ctx *c;
    fam_kv kv;           /* per layer: normed roped keys, values (every position) */
    float *out;          /* [B][n_embd] sub-block output */
    nn_gqa_scratch attn; /* q, kx, vx, o: A rows (tiles) */
    float *g, *u;        /* [A][n_ff_exp] expert gate / up projections */
} q3_state;

static void q3_state_free(void *p) {
    q3_state *s = p;
    if (!s) return;
    fam_kv_free(&s->kv);
    nn_gqa_scratch_free(&s->attn);
    FAM_SCRATCH_FREE(s->out, s->g, s->u);
    free(s);
}

static void *q3_state_new(const void *model, fam_ctx *c, pt_err *err) {
    const qwen3moe_model *m = model;
    const qwen3moe_hparams *hp = &m->hp;
    q3_state *s = fam_state_alloc(sizeof *s, err);
    if (!s) return NULL;
    s->m = m;
    s->c = c;
    const size_t B = (size_t)c->max_batch, A = (size_t)c->tile, E = (size_t)hp->n_embd;
    const size_t QD = (size_t)hp->n_head * hp->head_dim, KVD = (size_t)hp->n_kv * hp->head_dim;
    int fail = fam_kv_alloc(&s->kv, m->kvl, hp->n_layer, c) != 0;
    s->out = pt_falloc(B * E, &fail);
    if (nn_gqa_scratch_init(&s->attn, c->pool, &c->mm, c->tile, (int64_t)QD, (int64_t)KVD,
                            hp->head_dim, hp->n_head / hp->n_kv, c->n_ctx))
        fail = 1;
    s->g = pt_falloc(A * (size_t)hp->n_ff_exp, &fail);
    s->u = pt_falloc(A * (size_t)hp->n_ff_exp, &fail);
    return fam_state_done(s, fail, q3_state_free, c, err);
}

/* One routed expert on x[n] in place: SwiGLU. */
static int q3_expert(void *st, int layer, int e, const uint8_t *const mats[3], float *x, int n,
                     moe_worker *wk, pt_err *err) {
    q3_state *s = st;
    (void)e;
    (void)err;
    const qwen3moe_expert_w w = qwen3moe_expert(s->m, layer, mats);
    const nn_ffn f = fam_ffn(s->c, wk, s->g, s->u);
    nn_swiglu(&f, &w.gate, &w.up, &w.down, x, n, x, s->m->hp.n_embd);
    return 0;
}

/* Layer `layer`'s attention as nn_gqa composes it. */
static nn_gqa q3_attn(const q3_state *s, int layer) {
    const qwen3moe_hparams *hp = &s->m->hp;
    const qwen3moe_layer *ly = &s->m->layers[layer];
    return (nn_gqa){.wq = &ly->wq,
                    .wk = &ly->wk,
                    .wv = &ly->wv,
                    .wo = &ly->wo,
                    .q_norm = ly->q_norm,
                    .k_norm = ly->k_norm,
                    .rope = &hp->rope,
                    .n_head = hp->n_head,
                    .n_kv = hp->n_kv,
                    .head_dim = hp->head_dim,
                    .scale = hp->kq_scale,
                    .rms_eps = hp->rms_eps,
                    .n_embd = hp->n_embd,
                    .k_type = s->c->k_type,
                    .v_type = s->c->v_type};
}

static int q3_block(void *st, int layer, int T, int pos0, pt_err *err) {
    q3_state *s = st;
    fam_ctx *c = s->c;
    const qwen3moe_hparams *hp = &s->m->hp;
    const qwen3moe_layer *ly = &s->m->layers[layer];
    const int E = hp->n_embd;
    const nn_gqa g = q3_attn(s, layer);
    fam_gqa_attn(c, &g, &s->attn, ly->attn_norm, &s->kv, layer, T, pos0, s->out);
    for (size_t i = 0; i < (size_t)T * E; i++)
        c->x[i] += s->out[i];
    nn_rms_norm_rows(c->x, ly->ffn_norm, hp->rms_eps, E, T, c->xn);
    if (c->moe(c, layer, T, c->xn, c->xn, s->out, q3_expert, NULL, s, err)) return -1;
    for (size_t i = 0; i < (size_t)T * E; i++)
        c->x[i] += s->out[i];
    return 0;
}

/* fam_ops.block_kv: the rows' keys and values. */
static int q3_block_kv(void *st, int layer, int T, int pos0, pt_err *err) {
    q3_state *s = st;
    (void)err;
    const nn_gqa g = q3_attn(s, layer);
    fam_gqa_store(s->c, &g, &s->attn, s->m->layers[layer].attn_norm, &s->kv, layer, T, pos0);
    return 0;
}

static const mm_weight *q3_router(const void *model, int layer) {
    return &((const qwen3moe_model *)model)->layers[layer].gate_inp;
}

static void q3_route(const void *model, int layer, float *logits, int *chosen, float *w,
                     float *scratch) {
    const qwen3moe_hparams *hp = &((const qwen3moe_model *)model)->hp;
    (void)layer;
    (void)scratch;
    const nn_router r = {.n_expert = hp->n_expert,
                         .n_used = hp->n_expert_used,
                         .gating = NN_GATING_SOFTMAX,
                         .weights_norm = hp->weights_norm,
                         .weights_scale = hp->weights_scale};
    nn_route_softmax(&r, logits, chosen, w);
}

/* The next layer's router reads the same normed rows as this layer's. */
static const float *q3_lookahead_input(void *st, int next, int T) {
    (void)next;
    (void)T;
    return ((q3_state *)st)->c->xn;
}

static void q3_kv_size(const void *model, int64_t ring, uint32_t k_type, uint32_t v_type,
                       uint64_t *per_pos, uint64_t *fixed) {
    const qwen3moe_model *m = model;
    fam_kv_size(m->kvl, m->hp.n_layer, ring, k_type, v_type, per_pos, fixed);
}

/* Keys then values of every layer. */
static int q3_kv_bufs(void *st, fam_kv_buf *out, int max) {
    const q3_state *s = st;
    return fam_kv_bufs(&s->kv, s->m->kvl, s->m->hp.n_layer, s->c, out, max);
}

static const char *const q3_archs[] = {"qwen3moe", NULL};

const fam_ops qwen3moe_family = {.name = "qwen3moe",
                                 .archs = q3_archs,
                                 .model_bytes = sizeof(qwen3moe_model),
                                 .load = q3_load,
                                 .free = q3_free,
                                 .kv_size = q3_kv_size,
                                 .state_new = q3_state_new,
                                 .state_free = q3_state_free,
                                 .block = q3_block,
                                 .block_kv = q3_block_kv,
                                 .router = q3_router,
                                 .route = q3_route,
                                 .lookahead_input = q3_lookahead_input,
                                 .kv_bufs = q3_kv_bufs};
