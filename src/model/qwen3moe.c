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
#include <string.h>

#include "format/gguf.h"
#include "model/family.h"
#include "model/loader.h"
#include "nn/attn.h"
#include "nn/ffn.h"
#include "nn/matmul.h"
#include "nn/ops.h"
#include "nn/router.h"
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

static int load_hparams(ld_ctx *L, qwen3moe_hparams *hp) {
    int vl, n_rot;
    if (ld_u32(L, "block_count", &hp->n_layer, 1, 0) ||
        ld_u32(L, "embedding_length", &hp->n_embd, 1, 0) ||
        ld_u32(L, "attention.head_count", &hp->n_head, 1, 0) ||
        ld_u32(L, "attention.head_count_kv", &hp->n_kv, 0, hp->n_head) ||
        ld_u32(L, "expert_count", &hp->n_expert, 1, 0) ||
        ld_u32(L, "expert_used_count", &hp->n_expert_used, 1, 0) ||
        ld_u32(L, "expert_feed_forward_length", &hp->n_ff_exp, 1, 0) ||
        ld_u32(L, "context_length", &hp->n_ctx_train, 0, 4096) ||
        ld_f32(L, "attention.layer_norm_rms_epsilon", &hp->rms_eps, 1, 0) ||
        ld_f32(L, "expert_weights_scale", &hp->weights_scale, 0, 0.0f) ||
        ld_bool(L, "expert_weights_norm", &hp->weights_norm, 1))
        return -1;
    if (hp->n_layer < 1 || hp->n_layer > QWEN3MOE_MAX_LAYERS)
        return L->rc = pt_errf(L->err, "%s: qwen3moe.block_count %d outside 1..%d", L->path,
                               hp->n_layer, QWEN3MOE_MAX_LAYERS);
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
    nn_rope *r = &hp->rope;
    memset(r, 0, sizeof *r);
    r->n_dims = n_rot;
    r->neox = 1;
    r->freq_scale = 1.0f;
    r->attn_factor = 1.0f;
    char stype[32] = "", k[160];
    snprintf(k, sizeof k, "%s.rope.scaling.type", L->arch);
    if (gguf_find(L->g, k) && gguf_get_str(L->g, k, stype, sizeof stype, L->err)) return L->rc = -1;
    if (stype[0] && strcmp(stype, "none"))
        return L->rc =
                   pt_errf(L->err, "%s: rope.scaling.type '%s' is not supported", L->path, stype);
    return ld_f32(L, "rope.freq_base", &r->freq_base, 0, 10000.0f);
}

static void qwen3moe_model_free(qwen3moe_model *m) {
    free(m->layers);
    memset(m, 0, sizeof *m);
}

static int qwen3moe_model_load(const gguf_ctx *g, qwen3moe_model *m, pt_err *err) {
    memset(m, 0, sizeof *m);
    char arch[32];
    if (gguf_get_str(g, "general.architecture", arch, sizeof arch, err)) return -1;
    ld_ctx L = {g, arch, g->files[0].path, err, 0};
    if (strcmp(arch, "qwen3moe"))
        return pt_errf(err, "%s: architecture '%s' is not qwen3moe", L.path, arch);
    qwen3moe_hparams *hp = &m->hp;
    if (load_hparams(&L, hp)) return -1;
    const gguf_tensor *emb = ld_tensor(&L, "token_embd.weight", 2, hp->n_embd, -1, 1, 1);
    if (!emb) return -1;
    hp->n_vocab = (int)emb->ne[1];
    int vocab_meta;
    if (ld_u32(&L, "vocab_size", &vocab_meta, 0, hp->n_vocab)) return -1;
    if (vocab_meta != hp->n_vocab)
        return pt_errf(err, "%s: vocab_size %d but token_embd has %d rows", L.path, vocab_meta,
                       hp->n_vocab);
    m->tok_embd = ld_weight(&L, "token_embd.weight", hp->n_embd, hp->n_vocab, 1);
    m->output_norm = ld_vec(&L, "output_norm.weight", hp->n_embd, 1);
    m->output = ld_weight(&L, "output.weight", hp->n_embd, hp->n_vocab, 0);
    if (L.rc) return -1;
    if (!m->output.data) m->output = m->tok_embd; /* tied embeddings */
    m->layers = calloc((size_t)hp->n_layer, sizeof(qwen3moe_layer));
    if (!m->layers) return pt_errf(err, "%s: out of memory", L.path);
    const int E = hp->n_embd, QD = hp->n_head * hp->head_dim, KVD = hp->n_kv * hp->head_dim;
    const int X = hp->n_expert, F = hp->n_ff_exp;
    for (int l = 0; l < hp->n_layer && !L.rc; l++) {
        qwen3moe_layer *ly = &m->layers[l];
        char n[128];
#define NM(s) (snprintf(n, sizeof n, "blk.%d.%s", l, s), n)
        ly->attn_norm = ld_vec(&L, NM("attn_norm.weight"), E, 1);
        ly->wq = ld_weight(&L, NM("attn_q.weight"), E, QD, 1);
        ly->wk = ld_weight(&L, NM("attn_k.weight"), E, KVD, 1);
        ly->wv = ld_weight(&L, NM("attn_v.weight"), E, KVD, 1);
        ly->q_norm = ld_vec(&L, NM("attn_q_norm.weight"), hp->head_dim, 1);
        ly->k_norm = ld_vec(&L, NM("attn_k_norm.weight"), hp->head_dim, 1);
        ly->wo = ld_weight(&L, NM("attn_output.weight"), QD, E, 1);
        ly->ffn_norm = ld_vec(&L, NM("ffn_norm.weight"), E, 1);
        ly->gate_inp = ld_weight(&L, NM("ffn_gate_inp.weight"), E, X, 1);
        ly->gate_exps = ld_stack(&L, NM("ffn_gate_exps.weight"), E, F, X, 1);
        ly->up_exps = ld_stack(&L, NM("ffn_up_exps.weight"), E, F, X, 1);
        ly->down_exps = ld_stack(&L, NM("ffn_down_exps.weight"), F, E, X, 1);
#undef NM
    }
    if (L.rc) {
        qwen3moe_model_free(m);
        return -1;
    }
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
    void **k, **v;       /* [n_layer] -> [n_ctx] rows of n_kv * head_dim elements of c->k_type /
                            c->v_type: normed roped keys, values (in c->kv) */
    float *out;          /* [B][n_embd] sub-block output */
    nn_gqa_scratch attn; /* q, kx, vx, o: A rows (tiles) */
    float *g, *u;        /* [A][n_ff_exp] expert gate / up projections */
} q3_state;

static void q3_state_free(void *p) {
    q3_state *s = p;
    if (!s) return;
    free(s->k);
    free(s->v);
    nn_gqa_scratch_free(&s->attn);
    float *bufs[] = {s->out, s->g, s->u};
    for (size_t i = 0; i < PT_ARRAY_LEN(bufs); i++)
        pt_scratch_free(bufs[i]);
    free(s);
}

static void *q3_state_new(const void *model, fam_ctx *c, pt_err *err) {
    const qwen3moe_model *m = model;
    const qwen3moe_hparams *hp = &m->hp;
    q3_state *s = calloc(1, sizeof *s);
    if (!s) return pt_errf(err, "out of memory"), NULL;
    s->m = m;
    s->c = c;
    const size_t B = (size_t)c->max_batch, A = (size_t)c->tile, E = (size_t)hp->n_embd;
    const size_t QD = (size_t)hp->n_head * hp->head_dim, KVD = (size_t)hp->n_kv * hp->head_dim;
    int fail = 0;
    s->k = calloc((size_t)hp->n_layer, sizeof(void *));
    s->v = calloc((size_t)hp->n_layer, sizeof(void *));
    if (!s->k || !s->v) fail = 1;
    for (int l = 0; l < hp->n_layer && !fail; l++) {
        /* full attention reads every position: spilled rows are read whole (nn/kv.h) */
        s->k[l] = kv_arena_rows(c->kv, kv_bytes(c->k_type, (int64_t)KVD), c->n_ctx, 0);
        s->v[l] = kv_arena_rows(c->kv, kv_bytes(c->v_type, (int64_t)KVD), c->n_ctx, 0);
        if (!s->k[l] || !s->v[l]) fail = 1;
    }
    s->out = pt_falloc(B * E, &fail);
    if (nn_gqa_scratch_init(&s->attn, c->pool, &c->mm, c->tile, (int64_t)QD, (int64_t)KVD,
                            hp->head_dim, hp->n_head / hp->n_kv, c->n_ctx))
        fail = 1;
    s->g = pt_falloc(A * (size_t)hp->n_ff_exp, &fail);
    s->u = pt_falloc(A * (size_t)hp->n_ff_exp, &fail);
    if (fail) {
        q3_state_free(s);
        pt_errf(err, "out of memory allocating the KV cache and scratch for %d positions",
                c->n_ctx);
        return NULL;
    }
    return s;
}

/* One routed expert on x[n] in place: SwiGLU. */
static int q3_expert(void *st, int layer, int e, const uint8_t *const mats[3], float *x, int n,
                     moe_worker *wk, pt_err *err) {
    q3_state *s = st;
    (void)e;
    (void)err;
    const qwen3moe_expert_w w = qwen3moe_expert(s->m, layer, mats);
    const nn_ffn f = wk ? (nn_ffn){&wk->mm, wk->g, wk->u, wk->rows}
                        : (nn_ffn){&s->c->mm, s->g, s->u, s->c->tile};
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
    nn_rms_norm_rows(c->x, ly->attn_norm, hp->rms_eps, E, T, c->xn);
    const nn_gqa g = q3_attn(s, layer);
    nn_gqa_forward(&g, &s->attn, c->xn, T, pos0, s->k[layer], s->v[layer], c->n_ctx, s->out);
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
    fam_ctx *c = s->c;
    const qwen3moe_hparams *hp = &s->m->hp;
    (void)err;
    nn_rms_norm_rows(c->x, s->m->layers[layer].attn_norm, hp->rms_eps, hp->n_embd, T, c->xn);
    const nn_gqa g = q3_attn(s, layer);
    nn_gqa_store(&g, &s->attn, c->xn, T, pos0, s->k[layer], s->v[layer], c->n_ctx);
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
    const qwen3moe_hparams *hp = &((const qwen3moe_model *)model)->hp;
    const int64_t KVD = (int64_t)hp->n_kv * hp->head_dim;
    (void)ring;
    *per_pos = (uint64_t)hp->n_layer * (kv_bytes(k_type, KVD) + kv_bytes(v_type, KVD));
    *fixed = 0;
}

static int q3_load(const gguf_ctx *g, void **model, fam_desc *d, pt_err *err) {
    qwen3moe_model *m = calloc(1, sizeof *m);
    if (!m) return pt_errf(err, "out of memory");
    if (qwen3moe_model_load(g, m, err)) {
        qwen3moe_model_free(m);
        free(m);
        return -1;
    }
    const qwen3moe_hparams *hp = &m->hp;
    const int64_t QD = (int64_t)hp->n_head * hp->head_dim;
    *d = (fam_desc){.n_vocab = hp->n_vocab,
                    .n_embd = hp->n_embd,
                    .n_layer = hp->n_layer,
                    .kv_unit = hp->head_dim,
                    .n_ctx_train = hp->n_ctx_train,
                    .n_expert = hp->n_expert,
                    .n_expert_used = hp->n_expert_used,
                    .rms_eps = hp->rms_eps,
                    .tok_embd = &m->tok_embd,
                    .embd_scale = 1.0f,
                    .output_norm = m->output_norm,
                    .output = &m->output,
                    .row_floats = hp->n_embd, /* out */
                    .max_in = PT_MAX(PT_MAX((int64_t)hp->n_embd, QD), (int64_t)hp->n_ff_exp)};
    *model = m;
    return 0;
}

static void q3_free(void *model) {
    qwen3moe_model_free(model);
    free(model);
}

/* Keys then values of every layer. */
static int q3_kv_bufs(void *st, fam_kv_buf *out, int max) {
    q3_state *s = st;
    const qwen3moe_hparams *hp = &s->m->hp;
    const int64_t w = (int64_t)hp->n_kv * hp->head_dim;
    int n = 0;
    for (int l = 0; l < hp->n_layer; l++) {
        if (n + 2 <= max) {
            out[n] = (fam_kv_buf){s->k[l], kv_bytes(s->c->k_type, w), FAM_KV_LINEAR, s->c->n_ctx};
            out[n + 1] =
                (fam_kv_buf){s->v[l], kv_bytes(s->c->v_type, w), FAM_KV_LINEAR, s->c->n_ctx};
        }
        n += 2;
    }
    return n;
}

static const char *const q3_archs[] = {"qwen3moe", NULL};

const fam_ops qwen3moe_family = {.name = "qwen3moe",
                                 .archs = q3_archs,
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
