/* glm_forward.c — forward pass of glm-dsa (GLM-5.x) and deepseek2 (DeepSeek-V3):
 * MLA attention with weight absorption, the DSA lightning indexer, sigmoid /
 * softmax MoE with selection bias and group limits, shared experts, and the
 * NextN/MTP head. See glm_forward.h for the state it keeps.
 *
 * Order of operations mirrors llama.cpp's graphs where float rounding could
 * show: the attention score of a key is one dot over [latent | rope key];
 * routed expert outputs are weighted and summed in selection order, then the
 * shared expert is added; norms scale by a float reciprocal square root.
 * Every buffer is allocated in glm_state_new; the token loop allocates nothing.
 */
#include "glm_forward.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "kernels/quant.h"
#include "nn/matmul.h"
#include "nn/moe.h"
#include "nn/ops.h"
#include "runtime/experts.h"

/* MLA attention scratch: each thread holds score rows and 64 sum lanes for
 * MLA_ALLOC_HEADS heads (at a batch's 16 lanes, four times as many heads),
 * and a unit of work takes at most MLA_MAX_GROUP heads. */
#define MLA_ALLOC_HEADS 2
#define MLA_MAX_GROUP 16


struct glm_state {
    const glm_model *m;
    tp_pool *pool;
    xs_store *xs;         /* where routed experts come from (shared with the engine) */
    mm_ctx mm;
    int n_ctx;            /* cache capacity in positions */
    int max_batch;        /* rows per chunk */
    int n_past;           /* trunk positions cached */
    int mtp_past;         /* MTP positions cached */
    int kv_dim;           /* kv_lora + qk_rope */
    float **kv;           /* [n_layer + n_nextn] -> [n_ctx][kv_dim]: normed latent | roped key */
    float **idx_k;        /* [n_layer] -> [n_ctx][idx_head_dim] (full indexer layers only) */
    /* scratch, B = max_batch rows */
    float *x;             /* [B][n_embd] residual stream */
    float *xn;            /* [B][n_embd] normed input of a sub-block */
    float *out;           /* [B][n_embd] sub-block output */
    float *qa;            /* [B][q_lora] */
    float *q;             /* [B][H][nope + rope] */
    float *kva;           /* [B][kv_lora + rope] */
    float *qfull;         /* [B][H][kv_dim]: absorbed query | roped query */
    float *qnope;         /* [B][nope] one head, gathered */
    float *qabs;          /* [B][kv_lora] */
    float *ctx;           /* [B][H][kv_lora] attention-weighted latents */
    float *ctxh;          /* [B][kv_lora] one head, gathered */
    float *vout;          /* [B][v_head] */
    float *o;             /* [B][H * v_head] */
    float *scores;        /* [n_threads][score_rows][n_scores] softmax rows (attention, indexer) */
    float *wacc;          /* [n_threads][mla_heads * NN_WSUM_LANES_MAX][kv_lora] weighted-sum lanes */
    size_t n_scores;      /* n_ctx rounded up to 16 */
    int mla_heads;        /* heads whose 64 sum lanes each thread has (MLA_ALLOC_HEADS or fewer) */
    size_t score_rows;    /* score rows per thread: mla_heads * (64 / 16) */
    float *cs;            /* [qk_rope] rope table (also indexer: first qk_rope dims) */
    int *sel;             /* [B][top_k] key selection of the last full DSA layer */
    int *n_sel;           /* [B] */
    float *iq;            /* [B][idx_heads][idx_dim] */
    float *ik;            /* [B][idx_dim] */
    float *iw;            /* [B][idx_heads] */
    float *router;        /* [B][n_expert] */
    float *probs;         /* [n_expert] */
    float *esel;          /* [n_expert] selection scores */
    int *topk;            /* [B][n_used] chosen experts in selection order */
    float *topw;          /* [B][n_used] their weights */
    float *g, *u;         /* [B][max(n_ff, n_ff_exp * max(1, n_shared))] */
    float *sh;            /* [B][n_embd] shared-expert output */
    int prefetch;         /* router lookahead on */
    float *pf_router;     /* [B][n_expert] next layer's router logits */
    int *pf_topk;         /* [n_used] */
    float *pf_topw;       /* [n_used] */
    int *pf_uniq;         /* [n_expert] */
    float *cat;           /* [B][2 n_embd] MTP input */
    moe_scratch ms;       /* the routed-expert executor's scratch */
};

glm_state *glm_state_new(const glm_model *m, tp_pool *pool, xs_store *xs, int prefetch, int max_isa,
                         int n_ctx, int max_batch, pt_err *err) {
    const glm_hparams *hp = &m->hp;
    if (n_ctx < 1 || max_batch < 1) {
        pt_errf(err, "context size and batch must be positive");
        return NULL;
    }
    glm_state *s = calloc(1, sizeof *s);
    if (!s) {
        pt_errf(err, "out of memory");
        return NULL;
    }
    s->m = m;
    s->pool = pool;
    s->xs = xs;
    s->n_ctx = n_ctx;
    s->max_batch = max_batch;
    s->kv_dim = hp->kv_lora + hp->qk_rope;
    const size_t B = (size_t)max_batch, E = (size_t)hp->n_embd, H = (size_t)hp->n_head;
    const int n_all = hp->n_layer + hp->n_nextn;
    int fail = 0;
    s->kv = calloc((size_t)n_all, sizeof(float *));
    s->idx_k = calloc((size_t)hp->n_layer + 1, sizeof(float *));
    if (!s->kv || !s->idx_k) fail = 1;
    for (int l = 0; l < n_all && !fail; l++) {
        s->kv[l] = pt_falloc((size_t)n_ctx * (size_t)s->kv_dim, &fail);
        if (l < hp->n_layer && m->layers[l].has_idx)
            s->idx_k[l] = pt_falloc((size_t)n_ctx * (size_t)hp->idx_head_dim, &fail);
    }
    const size_t qd = H * (size_t)(hp->qk_nope + hp->qk_rope);
    size_t ffw = (size_t)hp->n_ff;
    size_t shw = (size_t)hp->n_ff_exp * (size_t)(hp->n_expert_shared > 1 ? hp->n_expert_shared : 1);
    if (shw > ffw) ffw = shw;
    const size_t K = (size_t)(hp->n_expert_used > 0 ? hp->n_expert_used : 1);
    const size_t topk = (size_t)(hp->idx_top_k > 0 ? hp->idx_top_k : 1);
    s->x = pt_falloc(B * E, &fail);
    s->xn = pt_falloc(B * E, &fail);
    s->out = pt_falloc(B * E, &fail);
    s->qa = pt_falloc(B * (size_t)(hp->q_lora > 0 ? hp->q_lora : 1), &fail);
    s->q = pt_falloc(B * qd, &fail);
    s->kva = pt_falloc(B * (size_t)s->kv_dim, &fail);
    s->qfull = pt_falloc(B * H * (size_t)s->kv_dim, &fail);
    s->qnope = pt_falloc(B * (size_t)hp->qk_nope, &fail);
    s->qabs = pt_falloc(B * (size_t)hp->kv_lora, &fail);
    s->ctx = pt_falloc(B * H * (size_t)hp->kv_lora, &fail);
    s->ctxh = pt_falloc(B * (size_t)hp->kv_lora, &fail);
    s->vout = pt_falloc(B * (size_t)hp->v_head, &fail);
    s->o = pt_falloc(B * H * (size_t)hp->v_head, &fail);
    /* per thread: score rows and sum lanes for a group of heads (attention) */
    const size_t NT = (size_t)tp_size(pool);
    s->mla_heads = hp->n_head < MLA_ALLOC_HEADS ? hp->n_head : MLA_ALLOC_HEADS;
    s->n_scores = ((size_t)n_ctx + 15) & ~(size_t)15;
    s->score_rows = (size_t)s->mla_heads * (NN_WSUM_LANES_MAX / NN_WSUM_LANES_BATCH);
    s->scores = pt_falloc(NT * s->score_rows * s->n_scores, &fail);
    s->wacc = pt_falloc(NT * (size_t)s->mla_heads * NN_WSUM_LANES_MAX * (size_t)hp->kv_lora, &fail);
    s->cs = pt_falloc((size_t)hp->qk_rope, &fail);
    s->sel = calloc(B * topk, sizeof(int));
    s->n_sel = calloc(B, sizeof(int));
    s->topk = calloc(B * K, sizeof(int));
    if (!s->sel || !s->n_sel || !s->topk) fail = 1;
    s->iq = pt_falloc(B * (size_t)hp->idx_n_head * (size_t)hp->idx_head_dim, &fail);
    s->ik = pt_falloc(B * (size_t)hp->idx_head_dim, &fail);
    s->iw = pt_falloc(B * (size_t)hp->idx_n_head, &fail);
    s->router = pt_falloc(B * (size_t)hp->n_expert, &fail);
    s->probs = pt_falloc((size_t)hp->n_expert, &fail);
    s->esel = pt_falloc((size_t)hp->n_expert, &fail);
    s->topw = pt_falloc(B * K, &fail);
    s->g = pt_falloc(B * ffw, &fail);
    s->u = pt_falloc(B * ffw, &fail);
    s->sh = pt_falloc(B * E, &fail);
    s->prefetch = prefetch;
    s->pf_router = pt_falloc(B * (size_t)hp->n_expert, &fail);
    s->pf_topk = calloc(K, sizeof(int));
    s->pf_topw = pt_falloc(K, &fail);
    s->pf_uniq = calloc((size_t)hp->n_expert + 1, sizeof(int));
    if (!s->pf_topk || !s->pf_uniq) fail = 1;
    if (moe_scratch_init(&s->ms, hp->n_expert, max_batch, (int)K, hp->n_embd)) fail = 1;
    s->cat = pt_falloc(B * 2 * E, &fail);
    int64_t max_in = 2 * (int64_t)E;
    int64_t cand[] = {(int64_t)ffw, hp->kv_lora, (int64_t)H * hp->v_head, hp->q_lora, hp->qk_nope};
    for (size_t i = 0; i < PT_ARRAY_LEN(cand); i++)
        if (cand[i] > max_in) max_in = cand[i];
    if (!fail && mm_ctx_init(&s->mm, pool, max_isa, (int64_t)B, max_in)) fail = 1;
    if (fail) {
        glm_state_free(s);
        pt_errf(err, "out of memory allocating the KV cache and scratch for %d positions", n_ctx);
        return NULL;
    }
    return s;
}

void glm_state_free(glm_state *s) {
    if (!s) return;
    const glm_hparams *hp = &s->m->hp;
    for (int l = 0; s->kv && l < hp->n_layer + hp->n_nextn; l++) free(s->kv[l]);
    for (int l = 0; s->idx_k && l < hp->n_layer; l++) free(s->idx_k[l]);
    free(s->kv);
    free(s->idx_k);
    float *bufs[] = {s->x, s->xn, s->out, s->qa, s->q, s->kva, s->qfull, s->qnope, s->qabs, s->ctx,
                     s->ctxh, s->vout, s->o, s->scores, s->wacc, s->cs, s->iq, s->ik, s->iw, s->router,
                     s->probs, s->esel, s->topw, s->g, s->u, s->sh, s->cat, s->pf_router, s->pf_topw};
    for (size_t i = 0; i < PT_ARRAY_LEN(bufs); i++) free(bufs[i]);
    free(s->sel);
    free(s->n_sel);
    free(s->topk);
    free(s->pf_topk);
    free(s->pf_uniq);
    moe_scratch_free(&s->ms);
    mm_ctx_free(&s->mm);
    free(s);
}

int glm_n_past(const glm_state *s) { return s->n_past; }

void glm_reset(glm_state *s) {
    s->n_past = 0;
    s->mtp_past = 0;
}

void glm_truncate(glm_state *s, int n) {
    if (n < 0 || n >= s->n_past) return;
    s->n_past = n;
    /* MTP position i was computed from trunk position i and token i+1: those
     * from n-1 on saw a token that is gone */
    if (s->mtp_past > n - 1) s->mtp_past = n > 0 ? n - 1 : 0;
}

/* ===== DSA lightning indexer =====
 * For each query row t (position pos0+t) score every causal key s:
 *   score = sum_h relu(iq_h(t) . ik(s)) * w_h(t),  w = proj(x) / sqrt(D * heads)
 * and keep the top min(top_k, pos+1). Keys come from LayerNorm(attn_k(x)) with
 * weight and bias (eps 0, as llama.cpp's loader leaves it), the first qk_rope
 * dims of query and key rotated like the MLA rope. */
/* The indexer's scores and top-k of query rows ith, ith + nth, ... (later rows
 * see more keys; striding balances them), each thread in its own score row. */
typedef struct idx_job {
    glm_state *s;
    int T, pos0;
    const float *cache;
} idx_job;

static void idx_worker(void *arg, int ith, int nth) {
    const idx_job *a = arg;
    glm_state *s = a->s;
    const glm_hparams *hp = &s->m->hp;
    const int D = hp->idx_head_dim, NH = hp->idx_n_head, K = hp->idx_top_k;
    float *scores = s->scores + (size_t)ith * s->score_rows * s->n_scores;
    for (int t = ith; t < a->T; t += nth) {
        const int n_keys = a->pos0 + t + 1;
        const float *q = s->iq + (size_t)t * NH * D, *w = s->iw + (size_t)t * NH;
        int j = 0;
        for (; j + 2 <= n_keys; j += 2) { /* two keys per query load */
            const float *k0 = a->cache + (size_t)j * D, *k1 = k0 + D;
            float sc0 = 0, sc1 = 0, d[2];
            for (int h = 0; h < NH; h++) {
                nn_dot2_f32(q + (size_t)h * D, k0, k1, D, d);
                sc0 += (d[0] > 0 ? d[0] : 0) * w[h];
                sc1 += (d[1] > 0 ? d[1] : 0) * w[h];
            }
            scores[j] = sc0, scores[j + 1] = sc1;
        }
        if (j < n_keys) {
            const float *kj = a->cache + (size_t)j * D;
            float sc = 0;
            for (int h = 0; h < NH; h++) {
                const float d = nn_dot_f32(q + (size_t)h * D, kj, D);
                sc += (d > 0 ? d : 0) * w[h];
            }
            scores[j] = sc;
        }
        const int k = n_keys < K ? n_keys : K;
        nn_top_k(scores, n_keys, k, s->sel + (size_t)t * K);
        s->n_sel[t] = k;
    }
}

static void dsa_select(glm_state *s, const glm_layer *ly, int layer, int T, int pos0) {
    const glm_hparams *hp = &s->m->hp;
    const int D = hp->idx_head_dim, NH = hp->idx_n_head;
    mm_run(&s->mm, &ly->idx_q_b, s->qa, T, s->iq, NH * D);
    mm_run(&s->mm, &ly->idx_k, s->xn, T, s->ik, D);
    mm_run(&s->mm, &ly->idx_proj, s->xn, T, s->iw, NH);
    nn_rope rope = hp->rope; /* the indexer rotates with the model's rope, over its first dims */
    float *cache = s->idx_k[layer];
    const float wscale = 1.0f / sqrtf((float)(D * NH));
    for (int t = 0; t < T; t++) {
        nn_rope_cache(&rope, pos0 + t, s->cs);
        float *k = s->ik + (size_t)t * D;
        nn_layer_norm(k, ly->idx_k_norm_w, ly->idx_k_norm_b, 0.0f, D, k);
        nn_rope_apply(&rope, s->cs, k);
        memcpy(cache + (size_t)(pos0 + t) * D, k, (size_t)D * sizeof(float));
        for (int h = 0; h < NH; h++) nn_rope_apply(&rope, s->cs, s->iq + ((size_t)t * NH + h) * D);
        for (int h = 0; h < NH; h++) s->iw[(size_t)t * NH + h] *= wscale;
    }
    idx_job j = {s, T, pos0, cache};
    tp_run(s->pool, idx_worker, &j);
}

/* ===== MLA attention (absorbed) ===== */

/* Scores over [latent | rope key], softmax, weighted latent sum of each
 * (query row, head) pair, each in ggml's rounding order (ops.c); the softmax
 * row is padded to 16 with masked keys like llama.cpp's KV window, and the
 * lane count of the sum depends on the chunk's row count as llama.cpp's
 * kernel choice does.
 *
 * Every head reads the same cache rows (the latent is shared), so a unit of
 * work is one query row and a group of heads, and the keys go in blocks of
 * MLA_KEY_BLOCK that stay in cache while each head of the group uses them:
 * a row is read once per group instead of once per head. Per head, the
 * scores are independent per key and every sum lane still receives its keys
 * in increasing order, so the bits are those of one head at a time. Units
 * are independent: thread ith takes units ith, ith + nth, ... (later rows see
 * more keys; striding balances them), with its own score rows and sum lanes,
 * so the bits do not depend on the thread count either. */
#define MLA_KEY_BLOCK 32
typedef struct mla_job {
    glm_state *s;
    float kq_scale;
    int T, pos0, use_dsa, lanes;
    int G; /* heads per unit */
    const float *cache;
} mla_job;

static void mla_worker(void *arg, int ith, int nth) {
    const mla_job *a = arg;
    glm_state *s = a->s;
    const glm_hparams *hp = &s->m->hp;
    const int H = hp->n_head, KVL = hp->kv_lora, KVD = s->kv_dim, G = a->G, n_groups = (H + G - 1) / G;
    float *scores = s->scores + (size_t)ith * s->score_rows * s->n_scores;
    float *wacc = s->wacc + (size_t)ith * s->mla_heads * NN_WSUM_LANES_MAX * (size_t)KVL;
    uint64_t used[MLA_MAX_GROUP];
    for (int u = ith; u < a->T * n_groups; u += nth) {
        const int t = u / n_groups, h0 = (u % n_groups) * G, g = H - h0 < G ? H - h0 : G;
        const int n_keys = a->pos0 + t + 1, n_pad = (n_keys + 15) & ~15;
        const int sparse = a->use_dsa && s->n_sel[t] < n_keys;
        const float *qf = s->qfull + ((size_t)t * H + h0) * KVD;
        for (int hh = 0; hh < g; hh++) {
            float *sc = scores + (size_t)hh * s->n_scores;
            for (int j = 0; j < n_pad; j++) sc[j] = sparse || j >= n_keys ? -INFINITY : 0.0f;
            if (sparse) {
                const int *sel = s->sel + (size_t)t * hp->idx_top_k;
                for (int i = 0; i < s->n_sel[t]; i++) sc[sel[i]] = 0.0f;
            }
        }
        for (int j0 = 0; j0 < n_keys; j0 += MLA_KEY_BLOCK) {
            const int j1 = j0 + MLA_KEY_BLOCK < n_keys ? j0 + MLA_KEY_BLOCK : n_keys;
            for (int hh = 0; hh < g; hh++) {
                float *sc = scores + (size_t)hh * s->n_scores;
                const float *q = qf + (size_t)hh * KVD;
                int j = j0;
                for (; j + 2 <= j1; j += 2) {
                    if (sc[j] == -INFINITY || sc[j + 1] == -INFINITY) {
                        for (int jj = j; jj < j + 2; jj++)
                            if (sc[jj] != -INFINITY) sc[jj] = nn_dot_f32(q, a->cache + (size_t)jj * KVD, KVD);
                        continue;
                    }
                    nn_dot2_f32(q, a->cache + (size_t)j * KVD, a->cache + (size_t)(j + 1) * KVD, KVD, sc + j);
                }
                if (j < j1 && sc[j] != -INFINITY) sc[j] = nn_dot_f32(q, a->cache + (size_t)j * KVD, KVD);
            }
        }
        for (int hh = 0; hh < g; hh++) {
            nn_softmax(scores + (size_t)hh * s->n_scores, n_pad, a->kq_scale);
            nn_wsum_begin(wacc + (size_t)hh * a->lanes * KVL, a->lanes, KVL, &used[hh]);
        }
        for (int j0 = 0; j0 < n_keys; j0 += MLA_KEY_BLOCK) {
            const int j1 = j0 + MLA_KEY_BLOCK < n_keys ? j0 + MLA_KEY_BLOCK : n_keys;
            for (int hh = 0; hh < g; hh++) {
                const float *sc = scores + (size_t)hh * s->n_scores;
                float *acc = wacc + (size_t)hh * a->lanes * KVL;
                for (int j = j0; j < j1; j++)
                    if (sc[j] != 0.0f) nn_wsum_add(acc, a->lanes, KVL, j, sc[j], a->cache + (size_t)j * KVD, &used[hh]);
            }
        }
        for (int hh = 0; hh < g; hh++)
            nn_wsum_end(wacc + (size_t)hh * a->lanes * KVL, a->lanes, KVL, s->ctx + ((size_t)t * H + h0 + hh) * KVL,
                        used[hh]);
    }
}

static void attention(glm_state *s, const glm_layer *ly, int layer, int T, int pos0, int use_dsa) {
    const glm_hparams *hp = &s->m->hp;
    const int H = hp->n_head, NOPE = hp->qk_nope, ROPE = hp->qk_rope, KVL = hp->kv_lora, KVD = s->kv_dim;
    const int QD = NOPE + ROPE;
    if (hp->q_lora) {
        mm_run(&s->mm, &ly->q_a, s->xn, T, s->qa, hp->q_lora);
        for (int t = 0; t < T; t++)
            nn_rms_norm(s->qa + (size_t)t * hp->q_lora, ly->q_a_norm, hp->rms_eps, hp->q_lora,
                        s->qa + (size_t)t * hp->q_lora);
        mm_run(&s->mm, &ly->q_b, s->qa, T, s->q, (int64_t)H * QD);
    } else {
        mm_run(&s->mm, &ly->q_b, s->xn, T, s->q, (int64_t)H * QD);
    }
    mm_run(&s->mm, &ly->kv_a, s->xn, T, s->kva, KVD);
    float *cache = s->kv[layer];
    for (int t = 0; t < T; t++) {
        float *row = cache + (size_t)(pos0 + t) * KVD;
        const float *kv = s->kva + (size_t)t * KVD;
        nn_rms_norm(kv, ly->kv_a_norm, hp->rms_eps, KVL, row);
        memcpy(row + KVL, kv + KVL, (size_t)ROPE * sizeof(float));
        nn_rope_cache(&hp->rope, pos0 + t, s->cs);
        nn_rope_apply(&hp->rope, s->cs, row + KVL);
        for (int h = 0; h < H; h++) {
            float *qr = s->q + ((size_t)t * H + h) * QD + NOPE;
            nn_rope_apply(&hp->rope, s->cs, qr);
            memcpy(s->qfull + ((size_t)t * H + h) * KVD + KVL, qr, (size_t)ROPE * sizeof(float));
        }
    }
    /* absorb k_b into the query: q_abs[h] = k_b[h] q_nope[h] */
    for (int h = 0; h < H; h++) {
        for (int t = 0; t < T; t++)
            memcpy(s->qnope + (size_t)t * NOPE, s->q + ((size_t)t * H + h) * QD, (size_t)NOPE * sizeof(float));
        mm_run(&s->mm, &ly->k_b[h], s->qnope, T, s->qabs, KVL);
        for (int t = 0; t < T; t++)
            memcpy(s->qfull + ((size_t)t * H + h) * KVD, s->qabs + (size_t)t * KVL, (size_t)KVL * sizeof(float));
    }
    if (use_dsa && ly->has_idx) dsa_select(s, ly, layer, T, pos0);
    /* heads per unit: what the allocated sum lanes hold at this lane count, but
     * for a single row the heads are split across the threads */
    const int lanes = nn_wsum_lanes(T);
    int G = s->mla_heads * (NN_WSUM_LANES_MAX / lanes);
    if (G > MLA_MAX_GROUP) G = MLA_MAX_GROUP;
    if (G > hp->n_head) G = hp->n_head;
    const int nt = tp_size(s->pool);
    if (T < nt && G * nt > hp->n_head) G = (hp->n_head + nt - 1) / nt;
    mla_job j = {s, hp->kq_scale, T, pos0, use_dsa, lanes, G, cache};
    tp_run(s->pool, mla_worker, &j);
    /* per-head value projection, then the output projection */
    for (int h = 0; h < H; h++) {
        for (int t = 0; t < T; t++)
            memcpy(s->ctxh + (size_t)t * KVL, s->ctx + ((size_t)t * H + h) * KVL, (size_t)KVL * sizeof(float));
        mm_run(&s->mm, &ly->v_b[h], s->ctxh, T, s->vout, hp->v_head);
        for (int t = 0; t < T; t++)
            memcpy(s->o + ((size_t)t * H + h) * hp->v_head, s->vout + (size_t)t * hp->v_head,
                   (size_t)hp->v_head * sizeof(float));
    }
    mm_run(&s->mm, &ly->wo, s->o, T, s->out, hp->n_embd);
}

/* ===== Feed-forward ===== */

/* out[T][n_embd] = down(silu(gate(x)) * up(x)); routed: a routed expert's
 * weights (mm_run_routed: llama.cpp's mul_mat_id order) */
static void swiglu_ffn(glm_state *s, const mm_weight *gate, const mm_weight *up, const mm_weight *down,
                       const float *x, int T, float *out, int routed) {
    void (*run)(mm_ctx *, const mm_weight *, const float *, int, float *, int64_t) = routed ? mm_run_routed : mm_run;
    const int64_t F = gate->n_out;
    run(&s->mm, gate, x, T, s->g, F);
    run(&s->mm, up, x, T, s->u, F);
    for (int64_t i = 0; i < (int64_t)T * F; i++) s->g[i] = nn_silu(s->g[i]) * s->u[i];
    run(&s->mm, down, s->g, T, out, s->m->hp.n_embd);
}

/* Router: from one row of router logits, the chosen experts (selection
 * order) and their weights. */
static void route(glm_state *s, const glm_layer *ly, const float *logit, int *chosen, float *w) {
    const glm_hparams *hp = &s->m->hp;
    const int E = hp->n_expert, K = hp->n_expert_used;
    float *p = s->probs;
    if (hp->gating == GATING_SIGMOID) {
        for (int e = 0; e < E; e++) p[e] = nn_sigmoid(logit[e]);
    } else {
        memcpy(p, logit, (size_t)E * sizeof(float));
        nn_softmax(p, E, 1.0f);
    }
    /* selection scores: probabilities plus the selection-only bias */
    float *sel = s->esel;
    for (int e = 0; e < E; e++) sel[e] = p[e] + (ly->exp_bias ? ly->exp_bias[e] : 0.0f);
    if (hp->n_group > 1) {
        /* group-limited routing: a group's score is the sum of its top-2 selection
         * scores; only the best n_group_used groups stay eligible */
        const int per = E / hp->n_group;
        float gscore[GLM_MAX_GROUPS];
        int gidx[GLM_MAX_GROUPS];
        for (int gi = 0; gi < hp->n_group; gi++) {
            int top2[2];
            int k2 = per < 2 ? per : 2;
            nn_top_k(sel + gi * per, per, k2, top2);
            gscore[gi] = 0;
            for (int i = 0; i < k2; i++) gscore[gi] += sel[gi * per + top2[i]];
        }
        nn_top_k(gscore, hp->n_group, hp->n_group_used, gidx);
        for (int gi = 0; gi < hp->n_group; gi++) {
            int keep = 0;
            for (int i = 0; i < hp->n_group_used; i++) keep |= gidx[i] == gi;
            if (!keep)
                for (int e = gi * per; e < (gi + 1) * per; e++) sel[e] = -INFINITY;
        }
    }
    nn_top_k(sel, E, K, chosen);
    float sum = 0;
    for (int k = 0; k < K; k++) {
        w[k] = p[chosen[k]];
        sum += w[k];
    }
    if (hp->weights_norm) {
        if (sum < 6.103515625e-5f) sum = 6.103515625e-5f;
        for (int k = 0; k < K; k++) w[k] /= sum;
    }
    for (int k = 0; k < K; k++) w[k] *= hp->weights_scale;
}

/* Router lookahead: the next MoE layer's router applied to this layer's
 * normed input predicts its experts; their reads start now, so they overlap
 * this layer's compute. Only the cache is affected, never the arithmetic. */
static int prefetch_next(glm_state *s, int layer, int T, pt_err *err) {
    const glm_hparams *hp = &s->m->hp;
    const int next = layer + 1, E = hp->n_expert, K = hp->n_expert_used;
    if (next >= hp->n_layer || !s->m->layers[next].is_moe) return 0;
    const glm_layer *ny = &s->m->layers[next];
    mm_run(&s->mm, &ny->gate_inp, s->xn, T, s->pf_router, E);
    int n = 0;
    for (int t = 0; t < T; t++) {
        route(s, ny, s->pf_router + (size_t)t * E, s->pf_topk, s->pf_topw);
        moe_mark(s->pf_topk, K, s->ms.seen, s->pf_uniq, &n);
    }
    moe_unmark(s->ms.seen, s->pf_uniq, n);
    return xs_prefetch(s->xs, next, s->pf_uniq, n, err);
}

/* One routed expert on x[n] in place: SwiGLU with the slices in mats[]. */
static int expert_ffn(void *arch, int layer, int e, const uint8_t *const mats[3], float *x, int n, pt_err *err) {
    glm_state *s = arch;
    const glm_layer *ly = &s->m->layers[layer];
    (void)e;
    (void)err;
    mm_weight g = glm_expert_at(ly->gate_exps, mats[0]), u = glm_expert_at(ly->up_exps, mats[1]),
              dn = glm_expert_at(ly->down_exps, mats[2]);
    swiglu_ffn(s, &g, &u, &dn, x, n, x, 1);
    return 0;
}

/* While the layer's first expert reads are in flight: router lookahead for the
 * next layer, and the shared expert (added after the routed sum). */
static int overlap(void *arch, int layer, int T, pt_err *err) {
    glm_state *s = arch;
    const glm_layer *ly = &s->m->layers[layer];
    if (s->prefetch && prefetch_next(s, layer, T, err)) return -1;
    if (s->m->hp.n_expert_shared) swiglu_ffn(s, &ly->gate_sh, &ly->up_sh, &ly->down_sh, s->xn, T, s->sh, 0);
    return 0;
}

/* Routed experts through the expert store and the shared expert; the sum per
 * row happens in selection order (see nn/moe.h), then the shared output. */
static int moe(glm_state *s, const glm_layer *ly, int layer, int T, pt_err *err) {
    const glm_hparams *hp = &s->m->hp;
    const int E = hp->n_expert, K = hp->n_expert_used, D = hp->n_embd;
    mm_run(&s->mm, &ly->gate_inp, s->xn, T, s->router, E);
    for (int t = 0; t < T; t++)
        route(s, ly, s->router + (size_t)t * E, s->topk + (size_t)t * K, s->topw + (size_t)t * K);

    const moe_call c = {s->xs, layer, T, K, D, s->topk, s->topw, s->xn, s->out, expert_ffn, overlap, s};
    if (moe_run(&c, &s->ms, err)) return -1;
    if (hp->n_expert_shared)
        for (size_t i = 0; i < (size_t)T * D; i++) s->out[i] += s->sh[i];
    return 0;
}

/* One decoder block on rows x[T] at positions pos0.. using cache `layer`. */
static int block(glm_state *s, const glm_layer *ly, int layer, int T, int pos0, int use_dsa, pt_err *err) {
    const glm_hparams *hp = &s->m->hp;
    const int D = hp->n_embd;
    for (int t = 0; t < T; t++)
        nn_rms_norm(s->x + (size_t)t * D, ly->attn_norm, hp->rms_eps, D, s->xn + (size_t)t * D);
    attention(s, ly, layer, T, pos0, use_dsa);
    for (size_t i = 0; i < (size_t)T * D; i++) s->x[i] += s->out[i];
    for (int t = 0; t < T; t++)
        nn_rms_norm(s->x + (size_t)t * D, ly->ffn_norm, hp->rms_eps, D, s->xn + (size_t)t * D);
    if (ly->is_moe) {
        if (moe(s, ly, layer, T, err)) return -1;
    } else {
        swiglu_ffn(s, &ly->ffn_gate, &ly->ffn_up, &ly->ffn_down, s->xn, T, s->out, 0);
    }
    for (size_t i = 0; i < (size_t)T * D; i++) s->x[i] += s->out[i];
    return 0;
}


static int check_tokens(const glm_state *s, const int32_t *tokens, int n, int past, pt_err *err) {
    if (n < 0) return pt_errf(err, "negative token count");
    if ((int64_t)past + n > s->n_ctx)
        return pt_errf(err, "context full: %d positions cached + %d new exceed the context size %d", past, n,
                       s->n_ctx);
    for (int i = 0; i < n; i++)
        if (tokens[i] < 0 || tokens[i] >= s->m->hp.n_vocab)
            return pt_errf(err, "token id %d at index %d is outside the vocabulary (0..%d)", tokens[i], i,
                           s->m->hp.n_vocab - 1);
    return 0;
}

int glm_eval(glm_state *s, const int32_t *tokens, int n, float *logits, int all_rows, float *hidden,
             pt_err *err) {
    const glm_model *m = s->m;
    const glm_hparams *hp = &m->hp;
    const int D = hp->n_embd;
    if (check_tokens(s, tokens, n, s->n_past, err)) return -1;
    for (int c0 = 0; c0 < n; c0 += s->max_batch) {
        const int T = n - c0 < s->max_batch ? n - c0 : s->max_batch;
        const int pos0 = s->n_past;
        for (int t = 0; t < T; t++) mm_get_row(&m->tok_embd, tokens[c0 + t], s->x + (size_t)t * D);
        for (int l = 0; l < hp->n_layer; l++)
            if (block(s, &m->layers[l], l, T, pos0, hp->idx_n_head > 0, err)) return -1;
        for (int t = 0; t < T; t++)
            nn_rms_norm(s->x + (size_t)t * D, m->output_norm, hp->rms_eps, D, s->xn + (size_t)t * D);
        if (hidden) memcpy(hidden + (size_t)c0 * D, s->xn, (size_t)T * D * sizeof(float));
        if (logits && all_rows)
            mm_run(&s->mm, &m->output, s->xn, T, logits + (size_t)c0 * hp->n_vocab, hp->n_vocab);
        else if (logits && c0 + T == n)
            mm_run(&s->mm, &m->output, s->xn + (size_t)(T - 1) * D, 1, logits, hp->n_vocab);
        s->n_past += T;
    }
    return 0;
}

int glm_mtp(glm_state *s, const int32_t *tokens, const float *hidden_prev, int n, float *logits, pt_err *err) {
    const glm_model *m = s->m;
    const glm_hparams *hp = &m->hp;
    const int D = hp->n_embd;
    if (hp->n_nextn < 1) return pt_errf(err, "this model has no NextN/MTP block");
    if (check_tokens(s, tokens, n, s->mtp_past, err)) return -1;
    const int layer = hp->n_layer; /* the first MTP block */
    const glm_layer *ly = &m->layers[layer];
    for (int c0 = 0; c0 < n; c0 += s->max_batch) {
        const int T = n - c0 < s->max_batch ? n - c0 : s->max_batch;
        for (int t = 0; t < T; t++) {
            float *cat = s->cat + (size_t)t * 2 * D;
            mm_get_row(&ly->embed_tokens, tokens[c0 + t], cat);
            nn_rms_norm(cat, ly->enorm, hp->rms_eps, D, cat);
            nn_rms_norm(hidden_prev + (size_t)(c0 + t) * D, ly->hnorm, hp->rms_eps, D, cat + D);
        }
        mm_run(&s->mm, &ly->eh_proj, s->cat, T, s->x, D);
        if (block(s, ly, layer, T, s->mtp_past, 0, err)) return -1;
        for (int t = 0; t < T; t++)
            nn_rms_norm(s->x + (size_t)t * D, ly->shared_head_norm, hp->rms_eps, D, s->xn + (size_t)t * D);
        mm_run(&s->mm, &ly->shared_head, s->xn, T, logits + (size_t)c0 * hp->n_vocab, hp->n_vocab);
        s->mtp_past += T;
    }
    return 0;
}
