/* gemma4.c — the Gemma 4 MoE family (GGUF arch `gemma4`, e.g. 26B-A4B):
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
 *
 * The file: hyper-parameters and tensor binding for `gemma4`.
 * Every tensor is checked against the shape the per-layer metadata implies and
 * its type against what petrel can compute with, so a contradictory file is
 * refused at load with the key or tensor and the problem named.
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

typedef struct gemma4_hparams {
    int n_embd; /* hidden size */
    int n_layer;
    int n_head;   /* query heads (every layer) */
    int n_ff;     /* dense GeGLU MLP width */
    int n_ff_exp; /* routed expert width */
    int n_expert, n_expert_used;
    int window;  /* sliding window: a query at t sees keys s with t - s < window */
    int any_swa; /* some layer slides */
    float rms_eps;
    float embd_scale; /* input embeddings are multiplied by sqrt(n_embd) */
    float softcap;    /* final logits: softcap * tanh(logits / softcap); 0 = none */
    int max_head_dim; /* largest head dim over layers */
    int max_kv_dim;   /* largest n_kv * head_dim over layers */
    int max_group;    /* largest n_head / n_kv over layers */
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
    gemma4_layer *layers; /* [n_layer] */
    fam_kv_layer *kvl;    /* [n_layer] K/V rows of n_kv * head_dim: a ring on sliding layers */
} gemma4_model;

/* One routed expert's weights, as the forward pass consumes them. */
typedef struct gemma4_expert_w {
    mm_weight gate_up; /* n_embd -> 2*n_ff_exp: gate rows, then up rows */
    mm_weight down;    /* n_ff_exp -> n_embd */
    float scale;       /* multiplies the expert's output */
} gemma4_expert_w;

/* Per-layer attention geometry and rope; fills layers[].swa/head_dim/n_kv/rope. */
static int load_hparams(ld_ctx *L, gemma4_model *m) {
    gemma4_hparams *hp = &m->hp;
    int per_layer_in = 0, shared_kv = 0;
    if (ld_u32(L, "embedding_length", &hp->n_embd, 1, 0) ||
        ld_u32(L, "feed_forward_length", &hp->n_ff, 1, 0) ||
        ld_u32(L, "expert_count", &hp->n_expert, 0, 0) ||
        ld_u32(L, "expert_used_count", &hp->n_expert_used, 0, 0) ||
        ld_u32(L, "expert_feed_forward_length", &hp->n_ff_exp, 0, 0) ||
        ld_f32(L, "attention.layer_norm_rms_epsilon", &hp->rms_eps, 1, 0) ||
        ld_f32(L, "final_logit_softcapping", &hp->softcap, 0, 0.0f) ||
        ld_u32(L, "embedding_length_per_layer_input", &per_layer_in, 0, 0) ||
        ld_u32(L, "attention.shared_kv_layers", &shared_kv, 0, 0))
        return -1;
    if (hp->n_embd < 1)
        return L->rc =
                   pt_errf(L->err, "%s: embedding_length %d must be positive", L->path, hp->n_embd);
    if (hp->n_expert == 0)
        return L->rc = pt_errf(
                   L->err,
                   "%s: dense Gemma 4 (no gemma4.expert_count) is not supported; petrel runs the "
                   "MoE variants (e.g. 26B-A4B)",
                   L->path);
    if (per_layer_in > 0 || shared_kv > 0)
        return L->rc = pt_errf(L->err,
                               "%s: Gemma 4 with per-layer input embeddings (%d) or shared KV "
                               "layers (%d) is not "
                               "supported",
                               L->path, per_layer_in, shared_kv);
    if (hp->n_expert_used < 1 || hp->n_expert_used > hp->n_expert || hp->n_ff_exp < 1)
        return L->rc = pt_errf(
                   L->err,
                   "%s: expert_used_count %d must be in 1..expert_count (%d), expert width %d",
                   L->path, hp->n_expert_used, hp->n_expert, hp->n_ff_exp);
    if (hp->softcap < 0)
        return L->rc = pt_errf(L->err, "%s: final_logit_softcapping is negative", L->path);
    hp->embd_scale = sqrtf((float)hp->n_embd);

    const int n = hp->n_layer;
    int *heads = calloc((size_t)n, sizeof(int)), *kv = calloc((size_t)n, sizeof(int));
    uint8_t *swa = calloc((size_t)n, 1);
    if (!heads || !kv || !swa) {
        free(heads), free(kv), free(swa);
        return L->rc = pt_errf(L->err, "%s: out of memory", L->path);
    }
    int kl, vl, kl_swa, vl_swa, rot, rot_swa;
    float base, base_swa;
    ld_u32_layers(L, "attention.head_count", n, heads, 1, 0);
    ld_u32_layers(L, "attention.head_count_kv", n, kv, 0, 0);
    ld_bool_layers(L, "attention.sliding_window_pattern", n, swa, 0);
    ld_u32(L, "attention.key_length", &kl, 1, 0);
    ld_u32(L, "attention.value_length", &vl, 0, kl);
    ld_u32(L, "attention.key_length_swa", &kl_swa, 0, kl);
    ld_u32(L, "attention.value_length_swa", &vl_swa, 0, kl_swa);
    ld_u32(L, "rope.dimension_count", &rot, 0, kl);
    ld_u32(L, "rope.dimension_count_swa", &rot_swa, 0, kl_swa);
    ld_f32(L, "rope.freq_base", &base, 0, FAM_ROPE_FREQ_BASE);
    ld_f32(L, "rope.freq_base_swa", &base_swa, 0, base);
    ld_u32(L, "attention.sliding_window", &hp->window, 0, 0);
    hp->n_head = heads[0];
    for (int l = 0; l < n && !L->rc; l++) {
        gemma4_layer *ly = &m->layers[l];
        ly->swa = swa[l];
        hp->any_swa |= ly->swa;
        ly->head_dim = ly->swa ? kl_swa : kl;
        ly->n_kv = kv[l] ? kv[l] : heads[l];
        const int vdim = ly->swa ? vl_swa : vl, r = ly->swa ? rot_swa : rot;
        if (heads[l] != hp->n_head)
            L->rc = pt_errf(L->err, "%s: attention.head_count differs between layers (%d vs %d)",
                            L->path, heads[l], hp->n_head);
        else if (hp->n_head < 1 || ly->n_kv < 1 || hp->n_head % ly->n_kv)
            L->rc = pt_errf(L->err, "%s: layer %d: %d KV heads do not divide %d query heads",
                            L->path, l, ly->n_kv, hp->n_head);
        else if (hp->n_head / ly->n_kv > NN_ATTN_MAX_GROUP)
            L->rc = pt_errf(L->err, "%s: layer %d: %d query heads per KV head (at most %d)",
                            L->path, l, hp->n_head / ly->n_kv, NN_ATTN_MAX_GROUP);
        else if (ly->head_dim < 2 || vdim != ly->head_dim)
            L->rc = pt_errf(L->err, "%s: layer %d: key length %d and value length %d must be equal",
                            L->path, l, ly->head_dim, vdim);
        else if (r < 2 || (r & 1) || r > ly->head_dim)
            L->rc =
                pt_errf(L->err, "%s: layer %d: rope dimension count %d must be even and at most %d",
                        L->path, l, r, ly->head_dim);
        ly->rope = fam_rope_plain(r, 1, ly->swa ? base_swa : base);
        m->kvl[l] = (fam_kv_layer){(int64_t)ly->n_kv * ly->head_dim, ly->swa};
        if (ly->head_dim > hp->max_head_dim) hp->max_head_dim = ly->head_dim;
        if (ly->n_kv * ly->head_dim > hp->max_kv_dim) hp->max_kv_dim = ly->n_kv * ly->head_dim;
        if (ly->n_kv > 0 && hp->n_head / ly->n_kv > hp->max_group)
            hp->max_group = hp->n_head / ly->n_kv;
    }
    free(heads), free(kv), free(swa);
    char key[160];
    snprintf(key, sizeof key, "%s.attention.sliding_window_pattern", L->arch);
    if (!L->rc && hp->window > 0 && !gguf_find(L->g, key))
        L->rc =
            pt_errf(L->err, "%s: missing metadata key '%s' (which layers use the sliding window)",
                    L->path, key);
    if (!L->rc && hp->any_swa && hp->window < 1)
        L->rc = pt_errf(L->err,
                        "%s: sliding-window layers but %s.attention.sliding_window is missing or 0",
                        L->path, L->arch);
    return L->rc;
}

static void g4_free(void *model) {
    gemma4_model *m = model;
    free(m->layers);
    free(m->kvl);
}

/* fam_ops.load: hyper-parameters and per-layer geometry, the trunk, every layer's tensors. */
static int g4_load(ld_ctx *L, void *model, fam_desc *d) {
    gemma4_model *m = model;
    gemma4_hparams *hp = &m->hp;
    if (fam_block_count(L, &hp->n_layer)) return -1;
    m->layers = calloc((size_t)hp->n_layer, sizeof(gemma4_layer));
    m->kvl = calloc((size_t)hp->n_layer, sizeof(fam_kv_layer));
    if (!m->layers || !m->kvl) return pt_errf(L->err, "%s: out of memory", L->path);
    if (load_hparams(L, m) || fam_bind_trunk(L, hp->n_embd, d)) return -1;

    /* proportional rope: one table of per-pair divisors, used by full layers */
    const float *rope_freqs = NULL;
    for (int l = 0; l < hp->n_layer; l++)
        if (!m->layers[l].swa) {
            rope_freqs = ld_vec(L, "rope_freqs.weight", m->layers[l].rope.n_dims / 2, 0);
            break;
        }
    if (L->rc) return -1;

    const int E = hp->n_embd, H = hp->n_head, X = hp->n_expert, F = hp->n_ff_exp;
    for (int l = 0; l < hp->n_layer && !L->rc; l++) {
        gemma4_layer *ly = &m->layers[l];
        const int D = ly->head_dim, KV = ly->n_kv * D;
        char n[128];
#define NM(s) (snprintf(n, sizeof n, "blk.%d.%s", l, s), n)
        if (!ly->swa) ly->rope.freq_factors = rope_freqs;
        ly->attn_norm = ld_vec(L, NM("attn_norm.weight"), E, 1);
        ly->wq = ld_weight(L, NM("attn_q.weight"), E, (int64_t)H * D, 1);
        ly->wk = ld_weight(L, NM("attn_k.weight"), E, KV, 1);
        ly->wv = ld_weight(L, NM("attn_v.weight"), E, KV, 0);
        ly->q_norm = ld_vec(L, NM("attn_q_norm.weight"), D, 1);
        ly->k_norm = ld_vec(L, NM("attn_k_norm.weight"), D, 1);
        ly->wo = ld_weight(L, NM("attn_output.weight"), (int64_t)H * D, E, 1);
        ly->post_attn_norm = ld_vec(L, NM("post_attention_norm.weight"), E, 1);
        ly->ffn_norm = ld_vec(L, NM("ffn_norm.weight"), E, 1);
        ly->ffn_gate = ld_weight(L, NM("ffn_gate.weight"), E, hp->n_ff, 1);
        ly->ffn_up = ld_weight(L, NM("ffn_up.weight"), E, hp->n_ff, 1);
        ly->ffn_down = ld_weight(L, NM("ffn_down.weight"), hp->n_ff, E, 1);
        ly->post_ffw_norm_1 = ld_vec(L, NM("post_ffw_norm_1.weight"), E, 1);
        ly->pre_ffw_norm_2 = ld_vec(L, NM("pre_ffw_norm_2.weight"), E, 1);
        ly->gate_inp = ld_weight(L, NM("ffn_gate_inp.weight"), E, X, 1);
        ly->gate_inp_scale = ld_vec(L, NM("ffn_gate_inp.scale"), E, 1);
        ly->gate_up_exps = ld_stack(L, NM("ffn_gate_up_exps.weight"), E, 2 * (int64_t)F, X, 1);
        ly->down_exps = ld_stack(L, NM("ffn_down_exps.weight"), F, E, X, 1);
        ly->down_exps_scale = ld_vec(L, NM("ffn_down_exps.scale"), X, 0);
        ly->post_ffw_norm_2 = ld_vec(L, NM("post_ffw_norm_2.weight"), E, 1);
        ly->post_ffw_norm = ld_vec(L, NM("post_ffw_norm.weight"), E, 1);
        const float *os = ld_vec(L, NM("layer_output_scale.weight"), 1, 0);
        ly->out_scale = os ? os[0] : 1.0f;
#undef NM
    }
    if (L->rc) return -1;
    int unit = 0;
    for (int l = 0; l < hp->n_layer; l++)
        unit = fam_gcd(unit, m->layers[l].head_dim);
    d->kv_unit = unit;
    d->n_layer = hp->n_layer;
    d->n_expert = hp->n_expert;
    d->n_expert_used = hp->n_expert_used;
    d->window = hp->any_swa ? hp->window : 0;
    d->rms_eps = hp->rms_eps;
    d->embd_scale = hp->embd_scale;
    d->softcap = hp->softcap;
    d->row_floats = 4 * (int64_t)E; /* h, a, moe, pf_in */
    d->max_in =
        PT_MAX(PT_MAX((int64_t)E, (int64_t)H * hp->max_head_dim), (int64_t)PT_MAX(hp->n_ff, F));
    return 0;
}

static gemma4_expert_w gemma4_expert(const gemma4_model *m, int layer, int e,
                                     const uint8_t *const mats[2]) {
    const gemma4_layer *ly = &m->layers[layer];
    gemma4_expert_w w = {ld_slice_at(ly->gate_up_exps, mats[0]),
                         ld_slice_at(ly->down_exps, mats[1]),
                         ly->down_exps_scale ? ly->down_exps_scale[e] : 1.0f};
    return w;
}

/* ===== Forward pass =====
 * Every layer: attention (sliding-window or full, per-layer geometry, q/k/v
 * RMS norms, proportional rope on full layers), post-attention norm and
 * residual; a dense GeGLU MLP and softmax-routed GeGLU experts side by side,
 * each post-normed, summed, normed again, added to the residual and scaled.
 *
 * Order of operations mirrors llama.cpp's graph where float rounding could
 * show: the router input is ((rms(h) * 1/sqrt(n_embd)) * gain); an expert's
 * output is multiplied by its scale, then by its routing weight (nn/moe.c),
 * and the experts are summed in selection order; GELU goes through fp16 as
 * llama.cpp's table does. Each buffer is allocated in state_new. */

typedef struct g4_state {
    const gemma4_model *m;
    fam_ctx *c;
    fam_kv kv;           /* per layer: normed roped keys, normed values (rings on sliding layers) */
    float *h;            /* [B][n_embd] residual after attention (input of both FFN branches) */
    float *a;            /* [B][n_embd] sub-block output (attention, then dense MLP) */
    float *moe;          /* [B][n_embd] router input, then the routed experts' output */
    float *pf_in;        /* [B][n_embd] next layer's router input (lookahead) */
    nn_gqa_scratch attn; /* q, o: [A][n_head * max_head_dim]; kx, vx: [A][max_kv_dim] (tiles) */
    float *g;            /* [A][max(n_ff, 2 n_ff_exp)] gate (or fused gate|up) projections */
    float *u;            /* [A][max(n_ff, n_ff_exp)] up projections / gated activations */
} g4_state;

static void g4_state_free(void *p) {
    g4_state *s = p;
    if (!s) return;
    fam_kv_free(&s->kv);
    nn_gqa_scratch_free(&s->attn);
    FAM_SCRATCH_FREE(s->h, s->a, s->moe, s->pf_in, s->g, s->u);
    free(s);
}

static void *g4_state_new(const void *model, fam_ctx *c, pt_err *err) {
    const gemma4_model *m = model;
    const gemma4_hparams *hp = &m->hp;
    g4_state *s = fam_state_alloc(sizeof *s, err);
    if (!s) return NULL;
    s->m = m;
    s->c = c;
    const size_t B = (size_t)c->max_batch, A = (size_t)c->tile, E = (size_t)hp->n_embd;
    const size_t QD = (size_t)hp->n_head * (size_t)hp->max_head_dim, KVD = (size_t)hp->max_kv_dim;
    const size_t F = (size_t)hp->n_ff, FX = (size_t)hp->n_ff_exp;
    int fail = fam_kv_alloc(&s->kv, m->kvl, hp->n_layer, c) != 0;
    s->h = pt_falloc(B * E, &fail);
    s->a = pt_falloc(B * E, &fail);
    s->moe = pt_falloc(B * E, &fail);
    s->pf_in = pt_falloc(B * E, &fail);
    if (nn_gqa_scratch_init(&s->attn, c->pool, &c->mm, c->tile, (int64_t)QD, (int64_t)KVD,
                            hp->max_head_dim, hp->max_group, c->n_ctx))
        fail = 1;
    s->g = pt_falloc(A * PT_MAX(F, 2 * FX), &fail);
    s->u = pt_falloc(A * PT_MAX(F, FX), &fail);
    return fam_state_done(s, fail, g4_state_free, c, err);
}

/* The router input: rms(h) / sqrt(n_embd) * gain, rows r[T][n_embd]. */
static void g4_router_input(const g4_state *s, const float *gain, int T, float *r) {
    const int E = s->m->hp.n_embd;
    const float inv = 1.0f / sqrtf((float)E);
    nn_rms_norm_rows(s->h, NULL, s->m->hp.rms_eps, E, T, r);
    for (int t = 0; t < T; t++) {
        float *row = r + (size_t)t * E;
        for (int i = 0; i < E; i++)
            row[i] = (row[i] * inv) * gain[i];
    }
}

/* One routed expert on x[n] in place: GeGLU over the fused gate|up
 * projection, down projection, times the expert's output scale. */
static int g4_expert(void *st, int layer, int e, const uint8_t *const mats[3], float *x, int n,
                     moe_worker *wk, pt_err *err) {
    g4_state *s = st;
    (void)err;
    const int E = s->m->hp.n_embd;
    const gemma4_expert_w w = gemma4_expert(s->m, layer, e, mats);
    const nn_ffn f = fam_ffn(s->c, wk, s->g, s->u);
    nn_geglu_fused(&f, &w.gate_up, s->m->hp.n_ff_exp, &w.down, x, n, x, E);
    for (size_t i = 0; i < (size_t)n * E; i++)
        x[i] *= w.scale;
    return 0;
}

/* Layer `layer`'s attention as nn_gqa composes it. */
static nn_gqa g4_attn(const g4_state *s, int layer) {
    const gemma4_hparams *hp = &s->m->hp;
    const gemma4_layer *ly = &s->m->layers[layer];
    return (nn_gqa){.wq = &ly->wq,
                    .wk = &ly->wk,
                    .wv = ly->wv.data ? &ly->wv : NULL,
                    .wo = &ly->wo,
                    .q_norm = ly->q_norm,
                    .k_norm = ly->k_norm,
                    .v_norm = 1,
                    .rope = &ly->rope,
                    .n_head = hp->n_head,
                    .n_kv = ly->n_kv,
                    .head_dim = ly->head_dim,
                    .window = ly->swa ? hp->window : 0,
                    .scale = 1.0f,
                    .rms_eps = hp->rms_eps,
                    .n_embd = hp->n_embd,
                    .k_type = s->c->k_type,
                    .v_type = s->c->v_type};
}

static int g4_block(void *st, int layer, int T, int pos0, pt_err *err) {
    g4_state *s = st;
    fam_ctx *c = s->c;
    const gemma4_hparams *hp = &s->m->hp;
    const gemma4_layer *ly = &s->m->layers[layer];
    const int E = hp->n_embd;
    const float eps = hp->rms_eps;
    const nn_gqa g = g4_attn(s, layer);
    fam_gqa_attn(c, &g, &s->attn, ly->attn_norm, &s->kv, layer, T, pos0, s->a);
    /* h = x + post_attention_norm(attn) */
    nn_rms_norm_rows(s->a, ly->post_attn_norm, eps, E, T, s->a);
    for (int t = 0; t < T; t++) {
        float *a = s->a + (size_t)t * E, *h = s->h + (size_t)t * E;
        const float *x = c->x + (size_t)t * E;
        for (int i = 0; i < E; i++)
            h[i] = a[i] + x[i];
    }
    /* dense MLP -> a, normed with post_ffw_norm_1 */
    nn_rms_norm_rows(s->h, ly->ffn_norm, eps, E, T, c->xn);
    const nn_ffn f = fam_ffn(c, NULL, s->g, s->u);
    nn_geglu(&f, &ly->ffn_gate, &ly->ffn_up, &ly->ffn_down, c->xn, T, s->a, E);
    nn_rms_norm_rows(s->a, ly->post_ffw_norm_1, eps, E, T, s->a);
    /* routed experts on pre_ffw_norm_2(h), routed from the scaled unit-normed h -> moe */
    nn_rms_norm_rows(s->h, ly->pre_ffw_norm_2, eps, E, T, c->xn);
    g4_router_input(s, ly->gate_inp_scale, T, s->moe);
    if (c->moe(c, layer, T, s->moe, c->xn, s->moe, g4_expert, NULL, s, err)) return -1;
    nn_rms_norm_rows(s->moe, ly->post_ffw_norm_2, eps, E, T, s->moe);
    /* x = (h + post_ffw_norm(mlp + moe)) * layer_output_scale */
    for (size_t i = 0; i < (size_t)T * E; i++)
        s->a[i] += s->moe[i];
    nn_rms_norm_rows(s->a, ly->post_ffw_norm, eps, E, T, s->a);
    for (size_t i = 0; i < (size_t)T * E; i++)
        c->x[i] = (s->a[i] + s->h[i]) * ly->out_scale;
    return 0;
}

/* fam_ops.block_kv: the rows' keys and values. */
static int g4_block_kv(void *st, int layer, int T, int pos0, pt_err *err) {
    g4_state *s = st;
    (void)err;
    const nn_gqa g = g4_attn(s, layer);
    fam_gqa_store(s->c, &g, &s->attn, s->m->layers[layer].attn_norm, &s->kv, layer, T, pos0);
    return 0;
}

static const mm_weight *g4_router(const void *model, int layer) {
    return &((const gemma4_model *)model)->layers[layer].gate_inp;
}

/* Softmax over all experts, top n_used, weights renormalised. */
static void g4_route(const void *model, int layer, float *logits, int *chosen, float *w,
                     float *scratch) {
    const gemma4_hparams *hp = &((const gemma4_model *)model)->hp;
    (void)layer;
    (void)scratch;
    const nn_router r = {.n_expert = hp->n_expert,
                         .n_used = hp->n_expert_used,
                         .gating = NN_GATING_SOFTMAX,
                         .weights_norm = 1};
    nn_route_softmax(&r, logits, chosen, w);
}

/* The next layer's router input (with its own gain) from this layer's residual. */
static const float *g4_lookahead_input(void *st, int next, int T) {
    g4_state *s = st;
    g4_router_input(s, s->m->layers[next].gate_inp_scale, T, s->pf_in);
    return s->pf_in;
}

/* Full-attention layers keep every position; sliding ones a ring. */
static void g4_kv_size(const void *model, int64_t ring, uint32_t k_type, uint32_t v_type,
                       uint64_t *per_pos, uint64_t *fixed) {
    const gemma4_model *m = model;
    fam_kv_size(m->kvl, m->hp.n_layer, ring, k_type, v_type, per_pos, fixed);
}

/* Keys then values of every layer: linear on global layers, rings on sliding ones. */
static int g4_kv_bufs(void *st, fam_kv_buf *out, int max) {
    const g4_state *s = st;
    return fam_kv_bufs(&s->kv, s->m->kvl, s->m->hp.n_layer, s->c, out, max);
}

static const char *const g4_archs[] = {"gemma4", NULL};

const fam_ops gemma4_family = {.name = "gemma4",
                               .archs = g4_archs,
                               .model_bytes = sizeof(gemma4_model),
                               .load = g4_load,
                               .free = g4_free,
                               .kv_size = g4_kv_size,
                               .state_new = g4_state_new,
                               .state_free = g4_state_free,
                               .block = g4_block,
                               .block_kv = g4_block_kv,
                               .router = g4_router,
                               .route = g4_route,
                               .lookahead_input = g4_lookahead_input,
                               .kv_bufs = g4_kv_bufs};
