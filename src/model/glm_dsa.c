/* glm_dsa.c — the GLM-5.x (`glm-dsa`) and DeepSeek-V3 (`deepseek2`) family:
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
 *
 * The file: hyper-parameters and tensor binding for `glm-dsa` and
 * `deepseek2`. Every tensor is checked against the shape the
 * metadata implies and its type against what petrel can compute with, so a
 * contradictory file is refused at load with the tensor and the problem named.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "format/gguf.h"
#include "model/fam_common.h"
#include "model/family.h"
#include "model/loader.h"
#include "nn/ffn.h"
#include "nn/matmul.h"
#include "nn/mla.h"
#include "nn/ops.h"
#include "nn/router.h"

typedef struct glm_hparams {
    int n_embd;  /* hidden size */
    int n_layer; /* trunk layers (block_count - n_nextn) */
    int n_nextn; /* trailing MTP blocks */
    int n_vocab;
    int n_head;
    int q_lora;           /* q LoRA rank; 0 = direct attn_q */
    int kv_lora;          /* compressed latent width */
    int qk_nope, qk_rope; /* per-head query/key split */
    int v_head;           /* per-head value width */
    int n_ff;             /* dense FFN width */
    int n_ff_exp;         /* routed / shared expert width */
    int n_expert, n_expert_used, n_expert_shared;
    int n_dense_lead;          /* leading dense layers */
    int n_group, n_group_used; /* group-limited routing (1/1: none) */
    int gating;                /* NN_GATING_* */
    int weights_norm;          /* normalise the chosen experts' weights */
    float weights_scale;
    float rms_eps;
    float kq_scale; /* attention logit scale (includes YaRN mscale^2) */
    nn_rope rope;   /* MLA rope (qk_rope dims) */
    /* DSA indexer (glm-dsa); idx_n_head = 0: none */
    int idx_n_head, idx_head_dim, idx_top_k;
    uint8_t *idx_full; /* [n_layer] 1 = computes its own top-k, 0 = reuses */
} glm_hparams;

/* One decoder block. Pointers to F32 vectors are NULL when absent. */
typedef struct glm_layer {
    const float *attn_norm; /* [n_embd] */
    nn_mla_w attn;          /* MLA attention and, on full layers, the DSA indexer */
    const float *ffn_norm;  /* [n_embd] */
    /* dense FFN (leading layers) */
    mm_weight ffn_gate, ffn_up, ffn_down;
    /* MoE */
    mm_weight gate_inp;                                 /* n_embd -> n_expert (router) */
    const float *exp_bias;                              /* [n_expert] selection-only bias */
    const gguf_tensor *gate_exps, *up_exps, *down_exps; /* stacked [n_expert] */
    mm_weight gate_sh, up_sh, down_sh; /* shared expert(s), width n_ff_exp*n_shared */
    /* NextN / MTP block extras */
    mm_weight eh_proj;                             /* 2*n_embd -> n_embd */
    const float *enorm, *hnorm, *shared_head_norm; /* [n_embd] */
    mm_weight embed_tokens;                        /* n_vocab rows of n_embd */
    mm_weight shared_head;                         /* n_embd -> n_vocab */
    int is_moe, is_nextn;
} glm_layer;

typedef struct glm_model {
    glm_hparams hp;
    glm_layer *layers; /* [n_layer + n_nextn] */
} glm_model;

static int load_hparams(ld_ctx *L, glm_hparams *hp) {
    int block_count;
    if (fam_block_count(L, &block_count) || ld_u32(L, "embedding_length", &hp->n_embd, 1, 0) ||
        ld_u32(L, "nextn_predict_layers", &hp->n_nextn, 0, 0) ||
        ld_u32(L, "attention.head_count", &hp->n_head, 1, 0) ||
        ld_u32(L, "attention.q_lora_rank", &hp->q_lora, 0, 0) ||
        ld_u32(L, "attention.kv_lora_rank", &hp->kv_lora, 1, 0) ||
        ld_u32(L, "feed_forward_length", &hp->n_ff, 0, 0) ||
        ld_u32(L, "expert_feed_forward_length", &hp->n_ff_exp, 0, 0) ||
        ld_u32(L, "expert_count", &hp->n_expert, 0, 0) ||
        ld_u32(L, "expert_used_count", &hp->n_expert_used, 0, 0) ||
        ld_u32(L, "expert_shared_count", &hp->n_expert_shared, 0, 0) ||
        ld_u32(L, "leading_dense_block_count", &hp->n_dense_lead, 0, 0) ||
        ld_u32(L, "expert_group_count", &hp->n_group, 0, 1) ||
        ld_u32(L, "expert_group_used_count", &hp->n_group_used, 0, 1) ||
        ld_u32(L, "expert_gating_func", &hp->gating, 0, NN_GATING_SOFTMAX) ||
        ld_f32(L, "attention.layer_norm_rms_epsilon", &hp->rms_eps, 1, 0) ||
        ld_f32(L, "expert_weights_scale", &hp->weights_scale, 0, 1.0f))
        return -1;
    int kl_mla, vl_mla, n_rot;
    if (ld_u32(L, "attention.key_length_mla", &kl_mla, 1, 0) ||
        ld_u32(L, "attention.value_length_mla", &vl_mla, 1, 0) ||
        ld_u32(L, "rope.dimension_count", &n_rot, 1, 0))
        return -1;
    hp->qk_rope = n_rot;
    hp->qk_nope = kl_mla - n_rot;
    hp->v_head = vl_mla;
    char k[160];
    if (ld_bool(L, "expert_weights_norm", &hp->weights_norm, 0)) return -1;
    if (hp->n_nextn >= block_count)
        return pt_errf(L->err, "%s: nextn_predict_layers %d must be below block_count %d", L->path,
                       hp->n_nextn, block_count);
    hp->n_layer = block_count - hp->n_nextn;
    if (hp->n_head < 1 || hp->n_head > NN_MLA_MAX_HEADS)
        return pt_errf(L->err, "%s: attention.head_count %d outside 1..%d", L->path, hp->n_head,
                       NN_MLA_MAX_HEADS);
    if (hp->qk_nope <= 0 || n_rot <= 0 || (n_rot & 1))
        return pt_errf(L->err, "%s: key_length_mla %d and rope.dimension_count %d are inconsistent",
                       L->path, kl_mla, n_rot);
    if (hp->gating != NN_GATING_SOFTMAX && hp->gating != NN_GATING_SIGMOID)
        return pt_errf(L->err, "%s: expert_gating_func %d is not supported (1 softmax, 2 sigmoid)",
                       L->path, hp->gating);
    if (hp->n_expert && (hp->n_expert_used < 1 || hp->n_expert_used > hp->n_expert))
        return pt_errf(L->err, "%s: expert_used_count %d must be in 1..expert_count (%d)", L->path,
                       hp->n_expert_used, hp->n_expert);
    if (hp->n_group < 1 || hp->n_group > NN_ROUTER_MAX_GROUPS || hp->n_group_used < 1 ||
        hp->n_group_used > hp->n_group || (hp->n_expert && hp->n_expert % hp->n_group))
        return pt_errf(L->err, "%s: expert groups %d/%d do not divide %d experts", L->path,
                       hp->n_group_used, hp->n_group, hp->n_expert);

    /* rope: NORM pairs; YaRN (deepseek2) when rope.scaling.type = yarn */
    nn_rope *r = &hp->rope;
    fam_yarn yarn;
    if (fam_rope(L, n_rot, 0, r, &yarn)) return -1;
    float mscale = 1.0f;
    if (yarn.on) {
        /* the rope magnitude factor is cancelled (llama.cpp passes attn_factor =
         * 1/(1+0.1 ln(1/freq_scale))); the attention scale carries mscale^2 */
        r->attn_factor = 1.0f / (1.0f + 0.1f * logf(1.0f / r->freq_scale));
        /* the converter stores 0.1 x mscale_all_dim as yarn_log_multiplier, so
         * mscale = 1 + 0.1 * mscale_all_dim * ln(factor) */
        mscale = 1.0f + yarn.log_mul * logf(1.0f / r->freq_scale);
    }
    hp->kq_scale = mscale * mscale / sqrtf((float)(hp->qk_nope + hp->qk_rope));

    /* DSA indexer */
    if (ld_u32(L, "attention.indexer.head_count", &hp->idx_n_head, 0, 0) ||
        ld_u32(L, "attention.indexer.key_length", &hp->idx_head_dim, 0, 0) ||
        ld_u32(L, "attention.indexer.top_k", &hp->idx_top_k, 0, 0))
        return -1;
    hp->idx_full = calloc((size_t)hp->n_layer + 1, 1);
    if (!hp->idx_full) return pt_errf(L->err, "%s: out of memory", L->path);
    if (hp->idx_n_head) {
        if (hp->idx_top_k < 1 || hp->idx_head_dim < n_rot || hp->idx_head_dim > 1024)
            return pt_errf(L->err, "%s: indexer top_k %d / key_length %d are invalid", L->path,
                           hp->idx_top_k, hp->idx_head_dim);
        snprintf(k, sizeof k, "%s.attention.indexer.types", L->arch);
        const gguf_kv *types = gguf_find(L->g, k);
        for (int l = 0; l < hp->n_layer; l++) {
            int64_t v = 1;
            if (types &&
                (types->val.type != GGUF_ARRAY || gguf_array_i64(&types->val, (uint64_t)l, &v)))
                return pt_errf(L->err, "%s: '%s' must be an array of %d bools", L->path, k,
                               hp->n_layer);
            hp->idx_full[l] = v != 0;
        }
        if (!hp->idx_full[0])
            return pt_errf(L->err, "%s: '%s': layer 0 is 'shared' but no earlier full layer exists",
                           L->path, k);
    }
    return 0;
}

static void glm_free(void *model) {
    glm_model *m = model;
    free(m->hp.idx_full);
    free(m->layers);
}

static nn_mla_dims mla_dims(const glm_hparams *hp) {
    return (nn_mla_dims){.n_embd = hp->n_embd,
                         .n_head = hp->n_head,
                         .q_lora = hp->q_lora,
                         .kv_lora = hp->kv_lora,
                         .qk_nope = hp->qk_nope,
                         .qk_rope = hp->qk_rope,
                         .v_head = hp->v_head,
                         .rms_eps = hp->rms_eps,
                         .kq_scale = hp->kq_scale,
                         .rope = hp->rope,
                         .idx_n_head = hp->idx_n_head,
                         .idx_head_dim = hp->idx_head_dim,
                         .idx_top_k = hp->idx_top_k};
}

/* Width of the FFN scratch: the dense FFN or the (shared) experts. */
static size_t ffn_width(const glm_hparams *hp) {
    const size_t shw =
        (size_t)hp->n_ff_exp * (size_t)(hp->n_expert_shared > 1 ? hp->n_expert_shared : 1);
    return PT_MAX((size_t)hp->n_ff, shw);
}

/* fam_ops.load: hyper-parameters, the trunk, every block's tensors (the MTP blocks' too). */
static int glm_load(ld_ctx *L, void *model, fam_desc *d) {
    glm_model *m = model;
    glm_hparams *hp = &m->hp;
    if (load_hparams(L, hp) || fam_bind_trunk(L, hp->n_embd, d)) return -1;
    hp->n_vocab = d->n_vocab;
    const int n_all = hp->n_layer + hp->n_nextn;
    m->layers = calloc((size_t)n_all, sizeof(glm_layer));
    if (!m->layers) return pt_errf(L->err, "%s: out of memory", L->path);
    const int H = hp->n_head, qdim = H * (hp->qk_nope + hp->qk_rope);
    for (int l = 0; l < n_all && !L->rc; l++) {
        glm_layer *ly = &m->layers[l];
        char n[128];
#define NM(s) (snprintf(n, sizeof n, "blk.%d.%s", l, s), n)
        ly->is_nextn = l >= hp->n_layer;
        ly->attn_norm = ld_vec(L, NM("attn_norm.weight"), hp->n_embd, 1);
        if (hp->q_lora) {
            ly->attn.q_a = ld_weight(L, NM("attn_q_a.weight"), hp->n_embd, hp->q_lora, 1);
            ly->attn.q_a_norm = ld_vec(L, NM("attn_q_a_norm.weight"), hp->q_lora, 1);
            ly->attn.q_b = ld_weight(L, NM("attn_q_b.weight"), hp->q_lora, qdim, 1);
        } else {
            ly->attn.q_b = ld_weight(L, NM("attn_q.weight"), hp->n_embd, qdim, 1);
        }
        ly->attn.kv_a =
            ld_weight(L, NM("attn_kv_a_mqa.weight"), hp->n_embd, hp->kv_lora + hp->qk_rope, 1);
        ly->attn.kv_a_norm = ld_vec(L, NM("attn_kv_a_norm.weight"), hp->kv_lora, 1);
        const gguf_tensor *kb = ld_stack(L, NM("attn_k_b.weight"), hp->qk_nope, hp->kv_lora, H, 1);
        const gguf_tensor *vb = ld_stack(L, NM("attn_v_b.weight"), hp->kv_lora, hp->v_head, H, 1);
        if (L->rc) break;
        for (int h = 0; h < H; h++) {
            ly->attn.k_b[h] = ld_slice(kb, h);
            ly->attn.v_b[h] = ld_slice(vb, h);
        }
        ly->attn.wo = ld_weight(L, NM("attn_output.weight"), H * hp->v_head, hp->n_embd, 1);
        ly->ffn_norm = ld_vec(L, NM("ffn_norm.weight"), hp->n_embd, 1);
        ly->is_moe = l >= hp->n_dense_lead && hp->n_expert > 0;
        if (!ly->is_moe) {
            ly->ffn_gate = ld_weight(L, NM("ffn_gate.weight"), hp->n_embd, hp->n_ff, 1);
            ly->ffn_up = ld_weight(L, NM("ffn_up.weight"), hp->n_embd, hp->n_ff, 1);
            ly->ffn_down = ld_weight(L, NM("ffn_down.weight"), hp->n_ff, hp->n_embd, 1);
        } else {
            const int X = hp->n_expert, F = hp->n_ff_exp;
            ly->gate_inp = ld_weight(L, NM("ffn_gate_inp.weight"), hp->n_embd, X, 1);
            ly->exp_bias = ld_vec(L, NM("exp_probs_b.bias"), X, 0);
            ly->gate_exps = ld_stack(L, NM("ffn_gate_exps.weight"), hp->n_embd, F, X, 1);
            ly->up_exps = ld_stack(L, NM("ffn_up_exps.weight"), hp->n_embd, F, X, 1);
            ly->down_exps = ld_stack(L, NM("ffn_down_exps.weight"), F, hp->n_embd, X, 1);
            if (L->rc) break;
            if (hp->n_expert_shared) {
                const int S = F * hp->n_expert_shared;
                ly->gate_sh = ld_weight(L, NM("ffn_gate_shexp.weight"), hp->n_embd, S, 1);
                ly->up_sh = ld_weight(L, NM("ffn_up_shexp.weight"), hp->n_embd, S, 1);
                ly->down_sh = ld_weight(L, NM("ffn_down_shexp.weight"), S, hp->n_embd, 1);
            }
        }
        if (!ly->is_nextn && hp->idx_n_head && hp->idx_full[l]) {
            const int D = hp->idx_head_dim;
            ly->attn.has_idx = 1;
            ly->attn.idx_q_b =
                ld_weight(L, NM("indexer.attn_q_b.weight"), hp->q_lora, hp->idx_n_head * D, 1);
            ly->attn.idx_k = ld_weight(L, NM("indexer.attn_k.weight"), hp->n_embd, D, 1);
            ly->attn.idx_k_norm_w = ld_vec(L, NM("indexer.k_norm.weight"), D, 1);
            ly->attn.idx_k_norm_b = ld_vec(L, NM("indexer.k_norm.bias"), D, 1);
            ly->attn.idx_proj =
                ld_weight(L, NM("indexer.proj.weight"), hp->n_embd, hp->idx_n_head, 1);
            if (!hp->q_lora && !L->rc)
                L->rc = pt_errf(
                    L->err, "%s: the DSA indexer needs a q LoRA (attention.q_lora_rank)", L->path);
        }
        if (ly->is_nextn) {
            ly->eh_proj = ld_weight(L, NM("nextn.eh_proj.weight"), 2 * hp->n_embd, hp->n_embd, 1);
            ly->enorm = ld_vec(L, NM("nextn.enorm.weight"), hp->n_embd, 1);
            ly->hnorm = ld_vec(L, NM("nextn.hnorm.weight"), hp->n_embd, 1);
            ly->shared_head_norm = ld_vec(L, NM("nextn.shared_head_norm.weight"), hp->n_embd, 1);
            ly->embed_tokens =
                ld_weight(L, NM("nextn.embed_tokens.weight"), hp->n_embd, hp->n_vocab, 0);
            ly->shared_head =
                ld_weight(L, NM("nextn.shared_head_head.weight"), hp->n_embd, hp->n_vocab, 0);
            if (!ly->embed_tokens.data) ly->embed_tokens = d->tok_embd;
            if (!ly->shared_head.data) ly->shared_head = d->output;
        }
#undef NM
    }
    if (L->rc) return -1;
    /* the cache rows' widths (latent, rope key, indexer key): kv_unit is their gcd */
    const int unit =
        fam_gcd(fam_gcd(hp->kv_lora, hp->qk_rope), hp->idx_n_head ? hp->idx_head_dim : 0);
    const nn_mla_dims md = mla_dims(hp);
    d->kv_unit = unit;
    d->n_layer = hp->n_layer;
    d->n_expert = hp->n_expert;
    d->n_expert_used = hp->n_expert_used;
    d->has_mtp = hp->n_nextn > 0;
    d->k_only = 1; /* MLA: V is the latent part of the K row */
    d->rms_eps = hp->rms_eps;
    /* out, sh, cat; the indexer's selection per row (ints) */
    d->row_floats = 5 * (int64_t)hp->n_embd + PT_MAX(hp->idx_top_k, 1) + 1;
    d->max_in = PT_MAX(PT_MAX(2 * (int64_t)hp->n_embd, (int64_t)ffn_width(hp)), nn_mla_max_in(&md));
    return 0;
}

/* ===== Forward pass =====
 * Every block: RMS norm, MLA attention (with the DSA indexer's key selection
 * on glm-dsa), residual; RMS norm, then a dense SwiGLU FFN (leading layers)
 * or the routed experts plus the shared expert, residual. The NextN/MTP head
 * runs one more block on eh_proj([enorm(embed(token)) | hnorm(hidden)]).
 *
 * Order of operations mirrors llama.cpp's graphs where float rounding could
 * show: routed expert outputs are weighted and summed in selection order,
 * then the shared expert is added. Each buffer is allocated in state_new. */

typedef struct glm_state {
    const glm_model *m;
    fam_ctx *c;
    int mtp_past;  /* MTP positions cached */
    void **kv;     /* [n_layer + n_nextn] -> [n_ctx] rows of kv_lora + qk_rope elements of
                      c->k_type: normed latent | roped key (in c->kv) */
    float **idx_k; /* [n_layer] -> [n_ctx][idx_head_dim] f32 (full indexer layers only; in c->kv) */
    nn_mla attn;   /* attention scratch and the indexer's selection */
    float *out;    /* [B][n_embd] sub-block output */
    float *g, *u;  /* [A][max(n_ff, n_ff_exp * max(1, n_shared))] FFN scratch (tiles) */
    float *sh;     /* [B][n_embd] shared-expert output */
    float *cat;    /* [B][2 n_embd] MTP input */
} glm_state;

static void glm_state_free(void *p) {
    glm_state *s = p;
    if (!s) return;
    free(s->kv);
    free(s->idx_k);
    nn_mla_free(&s->attn);
    FAM_SCRATCH_FREE(s->out, s->g, s->u, s->sh, s->cat);
    free(s);
}

static void *glm_state_new(const void *model, fam_ctx *c, pt_err *err) {
    const glm_model *m = model;
    const glm_hparams *hp = &m->hp;
    glm_state *s = fam_state_alloc(sizeof *s, err);
    if (!s) return NULL;
    s->m = m;
    s->c = c;
    const size_t B = (size_t)c->max_batch, A = (size_t)c->tile, E = (size_t)hp->n_embd,
                 KVD = (size_t)(hp->kv_lora + hp->qk_rope);
    const int n_all = hp->n_layer + hp->n_nextn;
    const nn_mla_dims d = mla_dims(hp);
    int fail = 0;
    s->kv = calloc((size_t)n_all, sizeof(void *));
    s->idx_k = calloc((size_t)hp->n_layer + 1, sizeof(float *));
    if (!s->kv || !s->idx_k) fail = 1;
    for (int l = 0; l < n_all && !fail; l++) {
        /* the trunk's latent rows may spill to the SSD (nn/kv.h); the MTP block's stay in RAM */
        const size_t row = kv_bytes(c->k_type, (int64_t)KVD);
        s->kv[l] = l < hp->n_layer
                       ? kv_arena_rows(c->kv, row, c->n_ctx, nn_mla_kv_read(&d, c->k_type))
                       : kv_arena_take(c->kv, (size_t)c->n_ctx * row);
        if (!s->kv[l]) fail = 1;
        if (l < hp->n_layer && m->layers[l].attn.has_idx &&
            !(s->idx_k[l] = kv_arena_take(c->kv, (size_t)c->n_ctx * (size_t)hp->idx_head_dim *
                                                     sizeof(float))))
            fail = 1;
    }
    if (!fail && nn_mla_init(&s->attn, &d, c->pool, &c->mm, c->n_ctx, c->tile, c->max_batch,
                             c->k_type, c->kv))
        fail = 1;
    s->out = pt_falloc(B * E, &fail);
    s->g = pt_falloc(A * ffn_width(hp), &fail);
    s->u = pt_falloc(A * ffn_width(hp), &fail);
    s->sh = pt_falloc(B * E, &fail);
    s->cat = pt_falloc(B * 2 * E, &fail);
    return fam_state_done(s, fail, glm_state_free, c, err);
}

/* One routed expert on x[n] in place: SwiGLU with the slices in mats[]. */
static int glm_expert(void *st, int layer, int e, const uint8_t *const mats[3], float *x, int n,
                      moe_worker *wk, pt_err *err) {
    glm_state *s = st;
    const glm_layer *ly = &s->m->layers[layer];
    (void)e;
    (void)err;
    const mm_weight g = ld_slice_at(ly->gate_exps, mats[0]), u = ld_slice_at(ly->up_exps, mats[1]),
                    dn = ld_slice_at(ly->down_exps, mats[2]);
    const nn_ffn f = fam_ffn(s->c, wk, s->g, s->u);
    nn_swiglu(&f, &g, &u, &dn, x, n, x, s->m->hp.n_embd);
    return 0;
}

/* The shared expert, while the layer's first expert reads are in flight. */
static int glm_shared(void *st, int layer, int T, pt_err *err) {
    glm_state *s = st;
    const glm_layer *ly = &s->m->layers[layer];
    (void)err;
    const nn_ffn f = fam_ffn(s->c, NULL, s->g, s->u);
    nn_swiglu(&f, &ly->gate_sh, &ly->up_sh, &ly->down_sh, s->c->xn, T, s->sh, s->m->hp.n_embd);
    return 0;
}

/* Block `layer` (the MTP block too) on c->x[T] at positions pos0.. . */
static int glm_run_block(glm_state *s, int layer, int T, int pos0, int use_dsa, pt_err *err) {
    fam_ctx *c = s->c;
    const glm_hparams *hp = &s->m->hp;
    const glm_layer *ly = &s->m->layers[layer];
    const int E = hp->n_embd;
    nn_rms_norm_rows(c->x, ly->attn_norm, hp->rms_eps, E, T, c->xn);
    nn_mla_forward(&s->attn, &ly->attn, c->xn, T, pos0, s->kv[layer],
                   layer < hp->n_layer ? s->idx_k[layer] : NULL, use_dsa, s->out);
    for (size_t i = 0; i < (size_t)T * E; i++)
        c->x[i] += s->out[i];
    nn_rms_norm_rows(c->x, ly->ffn_norm, hp->rms_eps, E, T, c->xn);
    if (ly->is_moe) {
        if (c->moe(c, layer, T, c->xn, c->xn, s->out, glm_expert,
                   hp->n_expert_shared ? glm_shared : NULL, s, err))
            return -1;
        if (hp->n_expert_shared)
            for (size_t i = 0; i < (size_t)T * E; i++)
                s->out[i] += s->sh[i];
    } else {
        const nn_ffn f = fam_ffn(s->c, NULL, s->g, s->u);
        nn_swiglu(&f, &ly->ffn_gate, &ly->ffn_up, &ly->ffn_down, c->xn, T, s->out, E);
    }
    for (size_t i = 0; i < (size_t)T * E; i++)
        c->x[i] += s->out[i];
    return 0;
}

static int glm_block(void *st, int layer, int T, int pos0, pt_err *err) {
    glm_state *s = st;
    return glm_run_block(s, layer, T, pos0, s->m->hp.idx_n_head > 0, err);
}

/* fam_ops.block_kv: the rows' latent cache rows and indexer keys. */
static int glm_block_kv(void *st, int layer, int T, int pos0, pt_err *err) {
    glm_state *s = st;
    fam_ctx *c = s->c;
    const glm_hparams *hp = &s->m->hp;
    const glm_layer *ly = &s->m->layers[layer];
    (void)err;
    nn_rms_norm_rows(c->x, ly->attn_norm, hp->rms_eps, hp->n_embd, T, c->xn);
    nn_mla_store(&s->attn, &ly->attn, c->xn, T, pos0, s->kv[layer], s->idx_k[layer],
                 hp->idx_n_head > 0);
    return 0;
}

/* MTP position i comes from trunk position i and token i+1: after the trunk is
 * cut to n, those from n-1 on saw a token that is gone. */
static void glm_truncated(void *st, int n) {
    glm_state *s = st;
    if (s->mtp_past > n - 1) s->mtp_past = n > 0 ? n - 1 : 0;
}

static int glm_mtp_keep(void *st, int n) {
    glm_state *s = st;
    if (s->mtp_past > n) s->mtp_past = n;
    return s->mtp_past;
}

/* Rows whose logits nobody asked for skip the shared head (a vocabulary-wide matmul): the
 * MTP cache over a prompt needs only the block. hidden_out: the shared-head-normed state,
 * which a chained draft feeds back as the next row's hidden_prev. */
static int glm_mtp(void *st, const int32_t *tokens, const float *hidden_prev, int n, float *logits,
                   int last_only, float *hidden_out, pt_err *err) {
    glm_state *s = st;
    fam_ctx *c = s->c;
    const glm_hparams *hp = &s->m->hp;
    const int E = hp->n_embd;
    if ((int64_t)s->mtp_past + n > c->n_ctx)
        return pt_errf(err, "context full: %d positions cached + %d new exceed the context size %d",
                       s->mtp_past, n, c->n_ctx);
    const int layer = hp->n_layer; /* the first MTP block */
    const glm_layer *ly = &s->m->layers[layer];
    for (int c0 = 0; c0 < n; c0 += c->max_batch) {
        const int T = n - c0 < c->max_batch ? n - c0 : c->max_batch;
        for (int t = 0; t < T; t++) {
            float *cat = s->cat + (size_t)t * 2 * E;
            mm_get_row(&ly->embed_tokens, tokens[c0 + t], cat);
            nn_rms_norm(cat, ly->enorm, hp->rms_eps, E, cat);
            nn_rms_norm(hidden_prev + (size_t)(c0 + t) * E, ly->hnorm, hp->rms_eps, E, cat + E);
        }
        mm_run(&c->mm, &ly->eh_proj, s->cat, T, c->x, E);
        if (glm_run_block(s, layer, T, s->mtp_past, 0, err)) return -1;
        s->mtp_past += T;
        if (!logits && !hidden_out) continue;
        nn_rms_norm_rows(c->x, ly->shared_head_norm, hp->rms_eps, E, T, c->xn);
        if (hidden_out) memcpy(hidden_out + (size_t)c0 * E, c->xn, (size_t)T * E * sizeof(float));
        if (logits && !last_only)
            mm_run(&c->mm, &ly->shared_head, c->xn, T, logits + (size_t)c0 * hp->n_vocab,
                   hp->n_vocab);
        else if (logits && c0 + T == n)
            mm_run(&c->mm, &ly->shared_head, c->xn + (size_t)(T - 1) * E, 1, logits, hp->n_vocab);
    }
    return 0;
}

/* The latent|rope rows of every trunk layer, the indexer keys of full DSA layers, then the
 * first MTP block's rows (the only one glm_mtp runs). */
static int glm_kv_bufs(void *st, fam_kv_buf *out, int max) {
    glm_state *s = st;
    const glm_hparams *hp = &s->m->hp;
    const fam_ctx *c = s->c;
    const size_t row = kv_bytes(c->k_type, (int64_t)hp->kv_lora + hp->qk_rope);
    int n = 0;
    for (int l = 0; l < hp->n_layer; l++) {
        if (n < max) out[n] = (fam_kv_buf){s->kv[l], row, FAM_KV_LINEAR, c->n_ctx};
        n++;
        if (!s->m->layers[l].attn.has_idx) continue;
        if (n < max)
            out[n] = (fam_kv_buf){(uint8_t *)s->idx_k[l], (size_t)hp->idx_head_dim * sizeof(float),
                                  FAM_KV_LINEAR, c->n_ctx};
        n++;
    }
    if (hp->n_nextn > 0) {
        if (n < max) out[n] = (fam_kv_buf){s->kv[hp->n_layer], row, FAM_KV_MTP, c->n_ctx};
        n++;
    }
    return n;
}

static void glm_mtp_restored(void *st, int n) {
    ((glm_state *)st)->mtp_past = n;
}

static const mm_weight *glm_router(const void *model, int layer) {
    const glm_layer *ly = &((const glm_model *)model)->layers[layer];
    return ly->is_moe ? &ly->gate_inp : NULL;
}

static void glm_route(const void *model, int layer, float *logits, int *chosen, float *w,
                      float *scratch) {
    const glm_model *m = model;
    const glm_hparams *hp = &m->hp;
    const nn_router r = {.n_expert = hp->n_expert,
                         .n_used = hp->n_expert_used,
                         .gating = hp->gating,
                         .bias = m->layers[layer].exp_bias,
                         .n_group = hp->n_group,
                         .n_group_used = hp->n_group_used,
                         .weights_norm = hp->weights_norm,
                         .weights_scale = hp->weights_scale};
    nn_route_biased(&r, logits, chosen, w, scratch);
}

/* The next layer's router reads the same normed rows as this layer's. */
static const float *glm_lookahead_input(void *st, int next, int T) {
    (void)next;
    (void)T;
    return ((glm_state *)st)->c->xn;
}

/* Every block (MTP included) caches the latent and rope key per position; full
 * DSA layers also their indexer keys. */
/* The MLA row (latent | rope key) in the K type (llama.cpp keeps no V cache
 * for MLA: V is the latent part of the K row); the DSA indexer keys in f32. */
static void glm_kv_size(const void *model, int64_t ring, uint32_t k_type, uint32_t v_type,
                        uint64_t *per_pos, uint64_t *fixed) {
    const glm_model *m = model;
    const glm_hparams *hp = &m->hp;
    (void)ring;
    (void)v_type;
    uint64_t n = (uint64_t)(hp->n_layer + hp->n_nextn) *
                 (uint64_t)kv_bytes(k_type, (int64_t)hp->kv_lora + hp->qk_rope);
    for (int l = 0; l < hp->n_layer; l++)
        if (m->layers[l].attn.has_idx) n += (uint64_t)hp->idx_head_dim * sizeof(float);
    *per_pos = n;
    *fixed = 0;
}

static const char *const glm_archs[] = {"glm-dsa", "deepseek2", NULL};

const fam_ops glm_dsa_family = {.name = "glm-dsa",
                                .archs = glm_archs,
                                .model_bytes = sizeof(glm_model),
                                .load = glm_load,
                                .free = glm_free,
                                .kv_size = glm_kv_size,
                                .state_new = glm_state_new,
                                .state_free = glm_state_free,
                                .block = glm_block,
                                .block_kv = glm_block_kv,
                                .router = glm_router,
                                .route = glm_route,
                                .lookahead_input = glm_lookahead_input,
                                .mtp = glm_mtp,
                                .mtp_keep = glm_mtp_keep,
                                .truncated = glm_truncated,
                                .kv_bufs = glm_kv_bufs,
                                .mtp_restored = glm_mtp_restored};
