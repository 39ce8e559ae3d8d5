/* mla.c — MLA attention with weight absorption and the DSA lightning indexer
 * (see mla.h). Moved from the glm-dsa forward pass unchanged in arithmetic. */
#include "nn/mla.h"

#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "kernels/quant.h"
#include "nn/kv.h"
#include "os/os.h"

/* Each thread holds score rows and NN_WSUM_LANES sum lanes for MLA_ALLOC_HEADS
 * heads, and a unit of work takes at most MLA_MAX_GROUP heads. */
#define MLA_ALLOC_HEADS 8
#define MLA_MAX_GROUP 16

int64_t nn_mla_max_in(const nn_mla_dims *d) {
    int64_t m = d->n_embd;
    const int64_t cand[] = {d->kv_lora, (int64_t)d->n_head * d->v_head, d->q_lora, d->qk_nope};
    for (size_t i = 0; i < PT_ARRAY_LEN(cand); i++)
        if (cand[i] > m) m = cand[i];
    return m;
}

/* The indexer's Walsh-Hadamard rotation h[n][n] (n a power of two), as
 * llama.cpp builds it: h[0][0] = 1/sqrt(n) (a float square root, divided in
 * double), then doubled by [[h, h], [h, -h]]. Orthonormal and symmetric. */
static void idx_hadamard(float *h, int n) {
    h[0] = (float)(1.0 / (double)sqrtf((float)n));
    for (int s = 1; s < n; s *= 2)
        for (int i = 0; i < s; i++)
            for (int j = 0; j < s; j++) {
                const float v = h[(size_t)i * n + j];
                h[(size_t)(i + s) * n + j] = v;
                h[(size_t)i * n + j + s] = v;
                h[(size_t)(i + s) * n + j + s] = -v;
            }
}

int nn_mla_kv_read(const nn_mla_dims *d, uint32_t kv_type) {
    return d->idx_n_head <= 0  ? KV_READ_ALL
           : kv_type == QT_F32 ? KV_READ_SELECTED
                               : KV_READ_GATHERED;
}

int nn_mla_init(nn_mla *a, const nn_mla_dims *d, tp_pool *pool, mm_ctx *mm, int n_ctx,
                int max_batch, int block_rows, uint32_t kv_type, kv_arena *kv) {
    memset(a, 0, sizeof *a);
    a->d = *d;
    a->pool = pool;
    a->mm = mm;
    a->kv_dim = d->kv_lora + d->qk_rope;
    a->rows = max_batch;
    if (block_rows < max_batch) block_rows = max_batch;
    const size_t B = (size_t)max_batch, H = (size_t)d->n_head;
    const size_t qd = H * (size_t)(d->qk_nope + d->qk_rope);
    const size_t topk = (size_t)(d->idx_top_k > 0 ? d->idx_top_k : 1);
    int fail = 0;
    a->qa = pt_falloc(B * (size_t)(d->q_lora > 0 ? d->q_lora : 1), &fail);
    a->q = pt_falloc(B * qd, &fail);
    a->kva = pt_falloc(B * (size_t)a->kv_dim, &fail);
    a->qfull = pt_falloc(B * H * (size_t)a->kv_dim, &fail);
    a->ctx = pt_falloc(B * H * (size_t)d->kv_lora, &fail);
    a->o = pt_falloc(B * H * (size_t)d->v_head, &fail);
    /* per thread: score rows and sum lanes for a group of heads (attention) */
    const size_t NT = (size_t)tp_size(pool);
    a->mla_heads = d->n_head < MLA_ALLOC_HEADS ? d->n_head : MLA_ALLOC_HEADS;
    a->n_scores = ((size_t)n_ctx + 15) & ~(size_t)15;
    a->score_rows = (size_t)a->mla_heads;
    a->scores = pt_falloc(NT * a->score_rows * a->n_scores, &fail);
    a->wacc = pt_falloc(NT * (size_t)a->mla_heads * NN_WSUM_LANES * (size_t)d->kv_lora, &fail);
    a->cs = pt_falloc((size_t)d->qk_rope, &fail);
    a->kv_type = kv_type; /* latent and rope key: the K type, as llama.cpp */
    a->krow = pt_falloc((size_t)a->kv_dim, &fail);
    a->kvq = pt_falloc(NT * (size_t)a->mla_heads * (size_t)a->kv_dim, &fail);
    a->kvrow = pt_falloc(NT * NN_WSUM_KEYS * (size_t)a->kv_dim, &fail);
    a->keys = malloc(NT * a->n_scores * sizeof(int));
    a->keybits = malloc(NT * (a->n_scores / 64 + 1) * sizeof(uint64_t));
    if (!a->keys || !a->keybits) fail = 1;
    a->sel_rows = block_rows;
    a->sel_all = calloc((size_t)block_rows * topk, sizeof(int));
    a->n_sel_all = calloc((size_t)block_rows, sizeof(int));
    if (!a->sel_all || !a->n_sel_all) fail = 1;
    a->iq = pt_falloc(B * (size_t)d->idx_n_head * (size_t)d->idx_head_dim, &fail);
    a->ik = pt_falloc(B * (size_t)d->idx_head_dim, &fail);
    a->iw = pt_falloc(B * (size_t)d->idx_n_head, &fail);
    const int D = d->idx_head_dim;
    if (d->idx_top_k > 0 && D >= 64 && (D & (D - 1)) == 0) {
        a->irot = pt_falloc((size_t)D * (size_t)D, &fail);
        a->itmp = pt_falloc((size_t)D, &fail);
        if (a->irot) idx_hadamard(a->irot, D);
    }
    if (kv && kv_arena_spills(kv) && d->idx_n_head > 0) {
        /* the indexer's selection read ahead from the spill file, a byte per page */
        const size_t pg = os_page_size();
        a->n_pmark = ((size_t)n_ctx * kv_bytes(kv_type, (int64_t)a->kv_dim) + pg - 1) / pg + 1;
        if (!(a->pmark = calloc(a->n_pmark, 1))) fail = 1;
        a->spill = kv;
        if (nn_mla_kv_read(d, kv_type) == KV_READ_GATHERED && kv->gcap) {
            /* rows read directly where they can be */
            a->rowp = calloc((size_t)n_ctx, sizeof *a->rowp);
            a->gmark = calloc((size_t)n_ctx, 1);
            a->glist = calloc((size_t)n_ctx, sizeof *a->glist);
            if (!a->rowp || !a->gmark || !a->glist) fail = 1;
        }
    }
    return fail ? -1 : 0;
}

void nn_mla_free(nn_mla *a) {
    float *bufs[] = {a->qa, a->q,  a->kva, a->qfull, a->ctx,  a->o,    a->scores, a->wacc, a->cs,
                     a->iq, a->ik, a->iw,  a->irot,  a->itmp, a->krow, a->kvq,    a->kvrow};
    for (size_t i = 0; i < PT_ARRAY_LEN(bufs); i++)
        pt_scratch_free(bufs[i]);
    free(a->keys);
    free(a->keybits);
    free(a->sel_all);
    free(a->n_sel_all);
    free(a->pmark);
    free(a->rowp);
    free(a->gmark);
    free(a->glist);
    memset(a, 0, sizeof *a);
}

/* ===== DSA lightning indexer =====
 * For each query row t (position pos0+t) score every causal key s:
 *   score = sum_h relu(iq_h(t) . ik(s)) * w_h(t),  w = proj(x) / sqrt(D * heads)
 * and keep the top min(top_k, pos+1). Keys come from LayerNorm(attn_k(x)) with
 * weight and bias (eps 0, as llama.cpp's loader leaves it), the first qk_rope
 * dims of query and key rotated like the MLA rope. */
/* The indexer's scores and top-k of query rows ith, ith + nth, ... (later rows
 * see more keys; striding balances them), each thread in its own score row. */
/* The indexer's top-k as a set, with llama.cpp's tie-breaking. The key set
 * is what matters (attention masks the others out), and at a tie on the cut
 * (keys whose heads all score <= 0 tie at exactly 0, common in short
 * contexts) the set depends on the selection algorithm: ggml's CPU top-k is
 * C++'s std::partial_sort of the indices 0..n-1 under "score greater", which
 * in GNU libstdc++ (the library llama.cpp's Linux builds use) is a heap
 * selection: a heap of the first k indices whose root is the worst score,
 * each later index replacing the root when it scores strictly higher, the
 * heap sifted the library's way. idx_heap_* below reproduce that sifting
 * (written from the algorithm, libstdc++'s __adjust_heap / __push_heap), so
 * the same keys survive a tie. */
static int idx_worse(const float *x, int a, int b) {
    return x[a] > x[b];
}

static void idx_heap_push(int *h, const float *x, long hole, long top, int v) {
    long parent = (hole - 1) / 2;
    while (hole > top && idx_worse(x, h[parent], v)) {
        h[hole] = h[parent];
        hole = parent;
        parent = (hole - 1) / 2;
    }
    h[hole] = v;
}

static void idx_heap_adjust(int *h, const float *x, long hole, long len, int v) {
    const long top = hole;
    long child = hole;
    while (child < (len - 1) / 2) {
        child = 2 * (child + 1);
        if (idx_worse(x, h[child], h[child - 1])) child--;
        h[hole] = h[child];
        hole = child;
    }
    if ((len & 1) == 0 && child == (len - 2) / 2) {
        child = 2 * (child + 1);
        h[hole] = h[child - 1];
        hole = child - 1;
    }
    idx_heap_push(h, x, hole, top, v);
}

/* idx[0..k) = the selected keys of x[0..n) (k <= n), in heap order. */
void nn_idx_top_k_heap(const float *x, int n, int k, int *idx) {
    for (int j = 0; j < k; j++)
        idx[j] = j;
    if (k >= 2)
        for (long parent = (k - 2) / 2;; parent--) {
            idx_heap_adjust(idx, x, parent, k, idx[parent]);
            if (parent == 0) break;
        }
    for (int i = k; i < n; i++)
        if (k > 0 && x[i] > x[idx[0]]) idx_heap_adjust(idx, x, 0, k, i);
}

/* A score's bits as an unsigned key in the scores' order (NaN excluded):
 * the larger float has the larger key, -0 just below +0. */
static inline uint32_t idx_ukey(float f) {
    uint32_t b;
    memcpy(&b, &f, sizeof b);
    return b & 0x80000000u ? ~b : b | 0x80000000u;
}

static inline float idx_unkey(uint32_t u) {
    const uint32_t b = u & 0x80000000u ? u & 0x7FFFFFFFu : ~u;
    float f;
    memcpy(&f, &b, sizeof f);
    return f;
}

/* The heap's key set without the heap where it can have only one value:
 * when exactly k scores are >= the k-th largest v (no tie on the cut; -0 and
 * +0 tie) and none is NaN, the heap returns those k keys, because a key it
 * leaves out scores at most its smallest. v comes from a radix selection on
 * the scores' keys (idx_ukey), a byte at a time from the top, the candidates
 * of each byte in tmp[n]. Sets idx[0..k) in key order and returns 1; returns 0
 * (idx undefined) where the heap must decide. */
static int idx_top_k_radix(const float *x, int n, int k, int *idx, uint32_t *tmp) {
    uint32_t hist[256] = {0};
    for (int i = 0; i < n; i++) {
        uint32_t b;
        memcpy(&b, x + i, sizeof b);
        if ((b & 0x7FFFFFFFu) > 0x7F800000u) return 0; /* NaN */
        hist[idx_ukey(x[i]) >> 24]++;
    }
    uint32_t prefix = 0;
    int need = k, m = 0; /* the k-th largest is the need-th largest of the candidates */
    for (int shift = 24;; shift -= 8) {
        int d = 255;
        while ((int)hist[d] < need)
            need -= (int)hist[d--];
        prefix |= (uint32_t)d << shift;
        if (shift == 0) break;
        int j = 0;
        if (shift == 24) {
            for (int i = 0; i < n; i++) {
                const uint32_t u = idx_ukey(x[i]);
                if (u >> 24 == (uint32_t)d) tmp[j++] = u;
            }
        } else {
            for (int i = 0; i < m; i++)
                if ((tmp[i] >> shift & 255u) == (uint32_t)d) tmp[j++] = tmp[i];
        }
        m = j;
        memset(hist, 0, sizeof hist);
        for (int i = 0; i < m; i++)
            hist[tmp[i] >> (shift - 8) & 255u]++;
    }
    const float v = idx_unkey(prefix);
    int j = 0;
    for (int i = 0; i < n; i++)
        if (x[i] >= v) {
            if (j == k) return 0; /* a tie on the cut */
            idx[j++] = i;
        }
    return j == k;
}

void nn_idx_top_k(const float *x, int n, int k, int *idx, uint32_t *tmp) {
    if (k >= n || !idx_top_k_radix(x, n, k, idx, tmp)) nn_idx_top_k_heap(x, n, k, idx);
}

typedef struct idx_job {
    nn_mla *s;
    int T, pos0;
    const float *cache;
} idx_job;

/* The indexer scores of row t for keys [j0, j1). A key's score depends on
 * that key alone (dot2 gives dot's bits), so the same bits however a row is
 * split. */
static void idx_score(const idx_job *a, int t, int j0, int j1, float *scores) {
    const nn_mla_dims *hp = &a->s->d;
    const int D = hp->idx_head_dim, NH = hp->idx_n_head;
    const float *q = a->s->iq + (size_t)t * NH * D, *w = a->s->iw + (size_t)t * NH;
    int j = j0;
    /* eight keys at a time: their sums over the heads are eight independent
     * chains (each in head order, as one key alone); the eight dots of two
     * heads in one call (AVX-512; an odd last head goes in twice, its copy's
     * dots left unread) or two keys per query load */
    const qt_f32_dot8_fn dot8 = qt_f32_dot8_best();
    enum { HB = 16 }; /* heads whose dots are summed at once */
    for (; j + 8 <= j1; j += 8) {
        const float *k0 = a->cache + (size_t)j * D;
        float sc[8] = {0}, d[(HB + 1) * 8];
        for (int h0 = 0; h0 < NH; h0 += HB) {
            const int nh = NH - h0 < HB ? NH - h0 : HB;
            if (dot8)
                for (int h = h0; h < h0 + nh; h += 2)
                    dot8(q + (size_t)h * D, q + (size_t)(h + 1 < h0 + nh ? h + 1 : h) * D, k0, D, D,
                         d + 8 * (h - h0));
            else
                for (int h = h0; h < h0 + nh; h++)
                    for (int k = 0; k < 8; k += 2)
                        nn_dot2_f32(q + (size_t)h * D, k0 + (size_t)k * D, k0 + (size_t)(k + 1) * D,
                                    D, d + 8 * (h - h0) + k);
            nn_relu_wsum8(d, w + h0, nh, sc); /* the sums go on in head order */
        }
        memcpy(scores + j, sc, sizeof sc);
    }
    for (; j + 2 <= j1; j += 2) { /* two keys per query load */
        const float *k0 = a->cache + (size_t)j * D, *k1 = k0 + D;
        float sc0 = 0, sc1 = 0, d[2];
        for (int h = 0; h < NH; h++) {
            nn_dot2_f32(q + (size_t)h * D, k0, k1, D, d);
            sc0 += (d[0] > 0 ? d[0] : 0) * w[h];
            sc1 += (d[1] > 0 ? d[1] : 0) * w[h];
        }
        scores[j] = sc0, scores[j + 1] = sc1;
    }
    if (j < j1) {
        const float *kj = a->cache + (size_t)j * D;
        float sc = 0;
        for (int h = 0; h < NH; h++) {
            const float d = nn_dot_f32(q + (size_t)h * D, kj, D);
            sc += (d > 0 ? d : 0) * w[h];
        }
        scores[j] = sc;
    }
}

/* Row t's selection; ith is the calling thread (its key buffer is the
 * selection's scratch). */
static void idx_select(const idx_job *a, int t, const float *scores, int ith) {
    nn_mla *s = a->s;
    const int n_keys = a->pos0 + t + 1, TOPK = s->d.idx_top_k;
    const int k = n_keys < TOPK ? n_keys : TOPK;
    nn_idx_top_k(scores, n_keys, k, s->sel + (size_t)t * TOPK,
                 (uint32_t *)s->keys + (size_t)ith * s->n_scores);
    s->n_sel[t] = k;
}

/* Row t sees no more keys than the top-k keeps: its selection is every key,
 * whatever the scores, so they are not computed (the attention then reads
 * every key, as a full selection makes it do). Sets that selection, in key
 * order, and returns 1; returns 0 for a row whose scores decide. */
static int idx_select_all(nn_mla *s, int pos0, int t) {
    const int n_keys = pos0 + t + 1, TOPK = s->d.idx_top_k;
    if (n_keys > TOPK) return 0;
    int *sel = s->sel + (size_t)t * TOPK;
    for (int j = 0; j < n_keys; j++)
        sel[j] = j;
    s->n_sel[t] = n_keys;
    return 1;
}

/* Row t's scores in thread t's score rows (T <= threads). */
static float *idx_row_scores(const idx_job *a, int t) {
    return a->s->scores + (size_t)t * a->s->score_rows * a->s->n_scores;
}

/* A row per thread, strided. */
static void idx_worker(void *arg, int ith, int nth) {
    const idx_job *a = arg;
    float *scores = idx_row_scores(a, ith);
    for (int t = ith; t < a->T; t += nth) {
        if (idx_select_all(a->s, a->pos0, t)) continue;
        idx_score(a, t, 0, a->pos0 + t + 1, scores);
        idx_select(a, t, scores, ith);
    }
}

/* Fewer rows than threads (decode): every thread scores a share of each
 * row's keys (in parts of IDX_KEY_PART), then each row's top-k is one thread's. */
#define IDX_KEY_PART 256
static void idx_split_worker(void *arg, int ith, int nth) {
    const idx_job *a = arg;
    int u = 0;
    for (int t = 0; t < a->T; t++) {
        const int n_keys = a->pos0 + t + 1;
        if (n_keys <= a->s->d.idx_top_k) continue; /* idx_select_worker selects every key */
        for (int j0 = 0; j0 < n_keys; j0 += IDX_KEY_PART, u++)
            if (u % nth == ith)
                idx_score(a, t, j0, PT_MIN(j0 + IDX_KEY_PART, n_keys), idx_row_scores(a, t));
    }
}

static void idx_select_worker(void *arg, int ith, int nth) {
    const idx_job *a = arg;
    for (int t = ith; t < a->T; t += nth)
        if (!idx_select_all(a->s, a->pos0, t)) idx_select(a, t, idx_row_scores(a, t), ith);
}

/* x = H x in place, each output one dot product of a rotation row with x in
 * the order llama.cpp multiplies its rotation into the indexer's queries and
 * keys: an F32 matmul whose columns are the heads of a token (queries) or one
 * key. With two columns or more that is tinyBLAS (petrel's F32 matmul kernel),
 * with one (keys; queries of a one-head indexer) ggml's vec_dot_f32
 * (nn_dot_f32): a function of the head count, not of the batch. The rotation
 * is orthogonal, so it moves the scores by rounding only, but at a near tie
 * of the top-k cut that rounding picks the key. */
static void idx_rotate(nn_mla *s, float *x, int D, int columns) {
    if (!s->irot) return;
    const qt_dot_fn dot = qt_mm_dot_upto(QT_F32, s->mm->max_isa);
    for (int i = 0; i < D; i++)
        s->itmp[i] = columns >= 2 ? dot(s->irot + (size_t)i * D, x, D)
                                  : nn_dot_f32(s->irot + (size_t)i * D, x, D);
    memcpy(x, s->itmp, (size_t)D * sizeof(float));
}

/* The indexer's keys of the tile's rows pos0.. into cache, from their projections in
 * s->ik: what later rows' selections score. */
static void idx_store_keys(nn_mla *s, const nn_mla_w *ly, int T, int pos0, float *cache) {
    const int D = s->d.idx_head_dim;
    nn_rope rope = s->d.rope; /* the indexer rotates with the model's rope, over its first dims */
    for (int t = 0; t < T; t++) {
        nn_rope_cache(&rope, pos0 + t, s->cs);
        float *k = s->ik + (size_t)t * D;
        nn_layer_norm(k, ly->idx_k_norm_w, ly->idx_k_norm_b, 0.0f, D, k);
        nn_rope_apply(&rope, s->cs, k);
        idx_rotate(s, k, D, 1);
        memcpy(cache + (size_t)(pos0 + t) * D, k, (size_t)D * sizeof(float));
        /* llama.cpp caches the indexer keys in the K type too: their values */
        kv_round(s->kv_type, cache + (size_t)(pos0 + t) * D, D);
    }
}

/* The indexer's keys of rows pos0.. (stored in cache) and, with queries, every
 * row's selection; its projections are in s->ik and, with queries, s->iq and
 * s->iw (mla_tile runs them in its projection jobs). Without queries (rows that
 * see at most top-k keys, idx_select_all) only the keys are computed, for the
 * rows after them. */
static void dsa_select(nn_mla *s, const nn_mla_w *ly, int T, int pos0, float *cache, int queries) {
    const nn_mla_dims *hp = &s->d;
    const int D = hp->idx_head_dim, NH = hp->idx_n_head;
    idx_store_keys(s, ly, T, pos0, cache);
    if (!queries) {
        for (int t = 0; t < T; t++)
            idx_select_all(s, pos0, t);
        return;
    }
    nn_rope rope = hp->rope;
    const float wscale = 1.0f / sqrtf((float)(D * NH));
    for (int t = 0; t < T; t++) {
        nn_rope_cache(&rope, pos0 + t, s->cs);
        for (int h = 0; h < NH; h++) {
            nn_rope_apply(&rope, s->cs, s->iq + ((size_t)t * NH + h) * D);
            idx_rotate(s, s->iq + ((size_t)t * NH + h) * D, D, NH);
        }
        for (int h = 0; h < NH; h++)
            s->iw[(size_t)t * NH + h] *= wscale;
    }
    idx_job j = {s, T, pos0, cache};
    if (T < tp_size(s->pool)) {
        tp_run(s->pool, idx_split_worker, &j);
        tp_run(s->pool, idx_select_worker, &j);
    } else {
        tp_run(s->pool, idx_worker, &j);
    }
}

/* ===== MLA attention (absorbed) ===== */

/* Scores over [latent | rope key], softmax, weighted latent sum of each
 * (query row, head) pair, each in ggml's rounding order (ops.c); the softmax
 * row is padded to 16 with masked keys like llama.cpp's KV window, and the
 * sum takes NN_WSUM_LANES lanes whatever the chunk's row count.
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
    nn_mla *s;
    float kq_scale;
    int T, pos0, use_dsa, lanes;
    int G;               /* heads per unit */
    const float *cache;  /* f32 cache rows (kv_type QT_F32) */
    const uint8_t *rows; /* the same rows in any type; row bytes apart */
    size_t row;
    const uint8_t *const *rowp; /* rows below n_cold: where kv_gather read them (or NULL) */
    int n_cold;
    atomic_int next; /* units claimed so far (mla_worker) */
} mla_job;

/* Key row j of a typed cache: gathered from the spill file, or in the cache itself. */
static inline const uint8_t *mla_row(const mla_job *a, int j) {
    return j < a->n_cold ? a->rowp[j] : a->rows + (size_t)j * a->row;
}

/* How many selected keys ahead of the one being used a row is requested: the
 * selection skips rows, which the hardware prefetcher does not follow, and a
 * row is a few hundred cycles of work. */
#define MLA_AHEAD 4

static inline void mla_prefetch(const uint8_t *p, size_t n) {
    for (size_t o = 0; o < n; o += 64)
        __builtin_prefetch(p + o, 0, 3);
    __builtin_prefetch(p + n - 1, 0, 3);
}

/* The same into the outer caches only: a whole block of rows requested at once. */
static inline void mla_prefetch_l2(const uint8_t *p, size_t n) {
    for (size_t o = 0; o < n; o += 64)
        __builtin_prefetch(p + o, 0, 1);
    __builtin_prefetch(p + n - 1, 0, 1);
}

/* Scores and weighted latent sums of one unit over a cache of another type
 * than f32 (nn/kv.h): the query in the key type's dot form, each latent row
 * decoded once for the unit's heads, the probabilities as they multiply it.
 * keys[0 .. nk) are the unit's keys in increasing order (the causal window,
 * or the row's DSA selection: the same for every head). */
static void mla_unit_typed(const mla_job *a, int t, int h0, int g, int n_keys, const int *keys,
                           int nk, float *scores, float *wacc, uint64_t *used, float *qbuf,
                           float *vrow) {
    nn_mla *s = a->s;
    const uint32_t ty = s->kv_type;
    const int H = s->d.n_head, KVL = s->d.kv_lora, KVD = s->kv_dim;
    const size_t qb = kv_query_bytes(ty, KVD), lat = kv_bytes(ty, KVL);
    const int n_pad = (n_keys + 15) & ~15;
    /* fp16 keys: eight heads (qt_f16_dot8_fn, AVX-512) or two (qt_f16_dot2_fn)
     * per pass over a row, the queries rounded to fp16 and held as floats */
    const qt_f16_dot2_fn dot2 = ty == QT_F16 && KVD <= 1024 ? qt_f16_dot2_best() : NULL;
    const qt_f16_dot8_fn dot8 = dot2 ? qt_f16_dot8_best() : NULL;
    for (int hh = 0; hh < g; hh++) {
        const float *q = s->qfull + ((size_t)t * H + h0 + hh) * KVD;
        if (dot2) {
            memcpy(qbuf + (size_t)hh * KVD, q, (size_t)KVD * sizeof(float));
            kv_round(ty, qbuf + (size_t)hh * KVD, KVD);
        } else {
            kv_query(ty, q, KVD, (uint8_t *)qbuf + hh * qb);
        }
    }
    /* keys in blocks that stay in cache while every head of the unit scores
     * them; the first pass over a block requests the rows ahead */
    for (int i0 = 0; i0 < nk; i0 += MLA_KEY_BLOCK) {
        const int i1 = i0 + MLA_KEY_BLOCK < nk ? i0 + MLA_KEY_BLOCK : nk;
        for (int hh = 0; hh < g;) {
            const int n = dot8 && hh + 8 <= g ? 8 : dot2 && hh + 2 <= g ? 2 : 1;
            float *sc = scores + (size_t)hh * s->n_scores;
            const float *q = qbuf + (size_t)hh * KVD;
            if (n == 8) { /* the block's rows at once (the kernel requests its rows ahead) */
                const void *rw[MLA_KEY_BLOCK];
                for (int i = i0; i < i1; i++)
                    rw[i - i0] = mla_row(a, keys[i]);
                for (int i = i1; hh == 0 && i < i1 + MLA_AHEAD && i < nk; i++)
                    mla_prefetch(mla_row(a, keys[i]), a->row);
                float d[8 * MLA_KEY_BLOCK];
                dot8(rw, i1 - i0, q, KVD, KVD, d);
                for (int k = 0; k < 8; k++)
                    for (int i = i0; i < i1; i++)
                        sc[(size_t)k * s->n_scores + keys[i]] = d[8 * (i - i0) + k];
                hh += n;
                continue;
            }
            for (int i = i0; i < i1; i++) {
                const int j = keys[i];
                if (hh == 0 && i + MLA_AHEAD < nk)
                    mla_prefetch(mla_row(a, keys[i + MLA_AHEAD]), a->row);
                const uint8_t *row = mla_row(a, j);
                float d[8];
                if (n == 2) {
                    dot2(row, q, q + KVD, KVD, d);
                } else if (dot2) { /* a head left over: the pair kernel with itself */
                    dot2(row, q, q, KVD, d);
                } else {
                    d[0] = kv_dot(ty, (uint8_t *)qbuf + hh * qb, row, KVD);
                }
                for (int k = 0; k < n; k++)
                    sc[(size_t)k * s->n_scores + j] = d[k];
            }
            hh += n;
        }
    }
    for (int hh = 0; hh < g; hh++) {
        float *sc = scores + (size_t)hh * s->n_scores;
        nn_softmax(sc, n_pad, a->kq_scale);
        nn_wsum_begin(wacc + (size_t)hh * a->lanes * KVL, a->lanes, KVL, &used[hh]);
    }
    /* keys in blocks of NN_WSUM_KEYS, every head adding a block lane by lane
     * (a key outside the selection has probability 0 and is passed over):
     * fp16 rows in the cache as they are, converted on the load; other types,
     * and rows gathered from the spill file, decoded once into vrow first */
    float *accs[MLA_MAX_GROUP];
    const float *ps[MLA_MAX_GROUP];
    for (int hh = 0; hh < g; hh++)
        accs[hh] = wacc + (size_t)hh * a->lanes * KVL;
    for (int j0 = 0, i = 0; j0 < n_keys; j0 += NN_WSUM_KEYS) {
        const int nb = n_keys - j0 < NN_WSUM_KEYS ? n_keys - j0 : NN_WSUM_KEYS, i_first = i;
        const int direct = ty == QT_F16 && j0 >= a->n_cold;
        for (; i < nk && keys[i] < j0 + nb; i++) {
            /* the latent: V is K's first part */
            if (direct) {
                mla_prefetch_l2(mla_row(a, keys[i]), lat);
                continue;
            }
            if (i + MLA_AHEAD < nk) mla_prefetch(mla_row(a, keys[i + MLA_AHEAD]), lat);
            kv_load(ty, mla_row(a, keys[i]), KVL, vrow + (size_t)(keys[i] - j0) * KVL);
        }
        if (i == i_first) continue;
        for (int hh = 0; hh < g; hh++)
            ps[hh] = scores + (size_t)hh * s->n_scores + j0;
        if (direct)
            kv_wsum_keys(g, accs, ps, ty, KVL, j0, nb, mla_row(a, j0), 1, a->row / sizeof(pt_f16),
                         used);
        else
            kv_wsum_keys(g, accs, ps, ty, KVL, j0, nb, vrow, 0, (size_t)KVL, used);
    }
    for (int hh = 0; hh < g; hh++)
        nn_wsum_end(wacc + (size_t)hh * a->lanes * KVL, a->lanes, KVL,
                    s->ctx + ((size_t)t * H + h0 + hh) * KVL, used[hh]);
}

/* x[0 .. n) = -inf: sixteen stores, then copies of what is filled (libc's wide ones) */
static void fill_ninf(float *x, int n) {
    int i = 0;
    for (; i < n && i < 16; i++)
        x[i] = -INFINITY;
    while (i < n) {
        const int c = n - i < i ? n - i : i;
        memcpy(x + i, x, (size_t)c * sizeof(float));
        i += c;
    }
}

/* Units (row t, group of G heads), claimed one at a time by whichever thread is free, the
 * last rows (the most keys) first: a static split left one thread waiting for the other
 * whenever that one was interrupted or descheduled (the wait, sched_yield in tp_run, was 2%
 * of a 512-token glm-dsa prompt), and claiming the largest units first leaves a small one
 * last. Which thread runs a unit changes none of its bits. */
static void mla_worker(void *arg, int ith, int nth) {
    mla_job *a = arg;
    nn_mla *s = a->s;
    const nn_mla_dims *hp = &s->d;
    const int H = hp->n_head, KVL = hp->kv_lora, KVD = s->kv_dim, G = a->G,
              n_groups = (H + G - 1) / G;
    float *scores = s->scores + (size_t)ith * s->score_rows * s->n_scores;
    float *wacc = s->wacc + (size_t)ith * s->mla_heads * NN_WSUM_LANES * (size_t)KVL;
    uint64_t used[MLA_MAX_GROUP];
    (void)nth;
    const int n_units = a->T * n_groups;
    for (int c; (c = atomic_fetch_add_explicit(&a->next, 1, memory_order_relaxed)) < n_units;) {
        const int u = n_units - 1 - c;
        const int t = u / n_groups, h0 = (u % n_groups) * G, g = H - h0 < G ? H - h0 : G;
        const int n_keys = a->pos0 + t + 1, n_pad = (n_keys + 15) & ~15;
        const int sparse = a->use_dsa && s->n_sel[t] < n_keys;
        if (s->kv_type != QT_F32) {
            /* the unit's keys in increasing order: the selection through a bit set */
            int *keys = s->keys + (size_t)ith * s->n_scores, nk = 0;
            if (sparse) {
                uint64_t *bits = s->keybits + (size_t)ith * (s->n_scores / 64 + 1);
                const int nw = (n_keys + 63) / 64;
                const int *sel = s->sel + (size_t)t * hp->idx_top_k;
                memset(bits, 0, (size_t)nw * sizeof *bits);
                for (int i = 0; i < s->n_sel[t]; i++)
                    bits[sel[i] / 64] |= 1ull << (sel[i] % 64);
                for (int w = 0; w < nw; w++)
                    for (uint64_t b = bits[w]; b; b &= b - 1)
                        keys[nk++] = 64 * w + __builtin_ctzll(b);
            } else {
                for (; nk < n_keys; nk++)
                    keys[nk] = nk;
            }
            /* every head's scores: -inf for the padding and the keys left out; mla_unit_typed
             * writes the scored keys' */
            for (int hh = 0; hh < g; hh++)
                fill_ninf(scores + (size_t)hh * s->n_scores + (sparse ? 0 : n_keys),
                          n_pad - (sparse ? 0 : n_keys));
            mla_unit_typed(a, t, h0, g, n_keys, keys, nk, scores, wacc, used,
                           s->kvq + (size_t)ith * s->mla_heads * KVD,
                           s->kvrow + (size_t)ith * NN_WSUM_KEYS * KVD);
            continue;
        }
        const float *qf = s->qfull + ((size_t)t * H + h0) * KVD;
        /* the row's mask (0: a key to score, -inf: masked) in the first head's
         * scores, copied to the others: every head sees the same keys */
        const float in = sparse ? -INFINITY : 0.0f;
        for (int j = 0; j < n_keys; j++)
            scores[j] = in;
        for (int j = n_keys; j < n_pad; j++)
            scores[j] = -INFINITY;
        if (sparse) {
            const int *sel = s->sel + (size_t)t * hp->idx_top_k;
            for (int i = 0; i < s->n_sel[t]; i++)
                scores[sel[i]] = 0.0f;
        }
        for (int hh = 1; hh < g; hh++)
            memcpy(scores + (size_t)hh * s->n_scores, scores, (size_t)n_pad * sizeof(float));
        for (int j0 = 0; j0 < n_keys; j0 += MLA_KEY_BLOCK) {
            const int j1 = j0 + MLA_KEY_BLOCK < n_keys ? j0 + MLA_KEY_BLOCK : n_keys;
            for (int hh = 0; hh < g; hh++) {
                float *sc = scores + (size_t)hh * s->n_scores;
                const float *q = qf + (size_t)hh * KVD;
                int j = j0;
                for (; j + 2 <= j1; j += 2) {
                    if (sc[j] == -INFINITY || sc[j + 1] == -INFINITY) {
                        for (int jj = j; jj < j + 2; jj++)
                            if (sc[jj] != -INFINITY)
                                sc[jj] = nn_dot_f32(q, a->cache + (size_t)jj * KVD, KVD);
                        continue;
                    }
                    nn_dot2_f32(q, a->cache + (size_t)j * KVD, a->cache + (size_t)(j + 1) * KVD,
                                KVD, sc + j);
                }
                if (j < j1 && sc[j] != -INFINITY)
                    sc[j] = nn_dot_f32(q, a->cache + (size_t)j * KVD, KVD);
            }
        }
        for (int hh = 0; hh < g; hh++) {
            nn_softmax(scores + (size_t)hh * s->n_scores, n_pad, a->kq_scale);
            nn_wsum_begin(wacc + (size_t)hh * a->lanes * KVL, a->lanes, KVL, &used[hh]);
        }
        float *accs[MLA_MAX_GROUP];
        const float *ps[MLA_MAX_GROUP];
        for (int hh = 0; hh < g; hh++)
            accs[hh] = wacc + (size_t)hh * a->lanes * KVL;
        for (int j0 = 0; j0 < n_keys; j0 += NN_WSUM_KEYS) {
            const int nk = n_keys - j0 < NN_WSUM_KEYS ? n_keys - j0 : NN_WSUM_KEYS;
            for (int hh = 0; hh < g; hh++)
                ps[hh] = scores + (size_t)hh * s->n_scores + j0;
            kv_wsum_keys(g, accs, ps, QT_F32, KVL, j0, nk, a->cache + (size_t)j0 * KVD, 0,
                         (size_t)KVD, used);
        }
        for (int hh = 0; hh < g; hh++)
            nn_wsum_end(wacc + (size_t)hh * a->lanes * KVL, a->lanes, KVL,
                        s->ctx + ((size_t)t * H + h0 + hh) * KVL, used[hh]);
    }
}

/* The tile's selected rows below the spilled boundary (its rows that read every key: all of
 * theirs), read into the gather buffer (kv_gather): the boundary when they were, 0 when
 * nothing is spilled, -1 when they must be read through the mapping. */
static int gather_selected(nn_mla *s, int T, int pos0, const void *cache) {
    const int64_t cold = s->spill->cold;
    if (!s->rowp) return -1;
    if (cold <= 0) return 0;
    int n = 0;
    for (int t = 0; t < T; t++) {
        const int n_keys = pos0 + t + 1;
        if (s->n_sel[t] < n_keys) {
            const int *sel = s->sel + (size_t)t * s->d.idx_top_k;
            for (int i = 0; i < s->n_sel[t]; i++)
                if (sel[i] < cold) s->gmark[sel[i]] = 1;
        } else {
            memset(s->gmark, 1, (size_t)(n_keys < cold ? n_keys : cold));
        }
    }
    for (int64_t j = 0; j < cold; j++)
        if (s->gmark[j]) {
            s->gmark[j] = 0;
            s->glist[n++] = (int)j;
        }
    pt_err err = {0};
    return kv_gather(s->spill, cache, s->glist, n, s->rowp, &err) == 1 ? (int)cold : -1;
}

/* Row t's cache row (position pos0 + t) from its projection in s->kva: the normed
 * latent and the roped key part, stored in the cache type; s->cs is left holding
 * the position's rope table. */
static void mla_store_row(nn_mla *s, const nn_mla_w *ly, int t, int pos0, void *cache) {
    const nn_mla_dims *hp = &s->d;
    const int KVL = hp->kv_lora, KVD = s->kv_dim;
    float *row = s->krow; /* in float, then stored in the cache type */
    const float *kv = s->kva + (size_t)t * KVD;
    nn_rms_norm(kv, ly->kv_a_norm, hp->rms_eps, KVL, row);
    memcpy(row + KVL, kv + KVL, (size_t)hp->qk_rope * sizeof(float));
    nn_rope_cache(&hp->rope, pos0 + t, s->cs);
    nn_rope_apply(&hp->rope, s->cs, row + KVL);
    kv_store(s->kv_type, row, KVD,
             (uint8_t *)cache + (size_t)(pos0 + t) * kv_bytes(s->kv_type, KVD));
}

/* One tile: T <= s->rows query rows; s->sel, s->n_sel point at its rows. */
static void mla_tile(nn_mla *s, const nn_mla_w *ly, const float *xn, int T, int pos0, void *cache,
                     float *idx_keys, int use_dsa, float *out) {
    const nn_mla_dims *hp = &s->d;
    const int H = hp->n_head, NOPE = hp->qk_nope, ROPE = hp->qk_rope, KVL = hp->kv_lora,
              KVD = s->kv_dim;
    const int QD = NOPE + ROPE;
    /* the indexer: its keys always, its queries for rows that see more than top-k keys */
    const int idx = use_dsa && ly->has_idx, idx_q = idx && pos0 + T > hp->idx_top_k;
    const int ID = hp->idx_head_dim, INH = hp->idx_n_head;
    /* the projections of xn (q's first one, kv_a, the indexer's) in one pool job
     * (mm_run_many: the same bits), then those of q's normed latent in another */
    mm_task proj[4] = {hp->q_lora ? (mm_task){&ly->q_a, xn, ly->q_a.n_in, s->qa, hp->q_lora}
                                  : (mm_task){&ly->q_b, xn, ly->q_b.n_in, s->q, (int64_t)H * QD},
                       {&ly->kv_a, xn, ly->kv_a.n_in, s->kva, KVD}};
    int n_proj = 2;
    if (idx) proj[n_proj++] = (mm_task){&ly->idx_k, xn, ly->idx_k.n_in, s->ik, ID};
    if (idx_q) proj[n_proj++] = (mm_task){&ly->idx_proj, xn, ly->idx_proj.n_in, s->iw, INH};
    mm_run_many(s->mm, proj, n_proj, T);
    const mm_task idx_qb = {&ly->idx_q_b, s->qa, ly->idx_q_b.n_in, s->iq, (int64_t)INH * ID};
    if (hp->q_lora) {
        nn_rms_norm_rows(s->qa, ly->q_a_norm, hp->rms_eps, hp->q_lora, T, s->qa);
        const mm_task qb[2] = {{&ly->q_b, s->qa, ly->q_b.n_in, s->q, (int64_t)H * QD}, idx_qb};
        mm_run_many(s->mm, qb, idx_q ? 2 : 1, T);
    } else if (idx_q) {
        mm_run_many(s->mm, &idx_qb, 1, T);
    }
    for (int t = 0; t < T; t++) {
        mla_store_row(s, ly, t, pos0, cache); /* and s->cs: position pos0 + t's rope */
        for (int h = 0; h < H; h++) {
            float *qr = s->q + ((size_t)t * H + h) * QD + NOPE;
            nn_rope_apply(&hp->rope, s->cs, qr);
            memcpy(s->qfull + ((size_t)t * H + h) * KVD + KVL, qr, (size_t)ROPE * sizeof(float));
        }
    }
    /* absorb k_b into the query: q_abs[h] = k_b[h] q_nope[h], every head in one job */
    mm_task heads[MM_MANY_MAX];
    for (int h0 = 0; h0 < H; h0 += MM_MANY_MAX) {
        const int n = H - h0 < MM_MANY_MAX ? H - h0 : MM_MANY_MAX;
        for (int i = 0; i < n; i++)
            heads[i] = (mm_task){&ly->k_b[h0 + i], s->q + (size_t)(h0 + i) * QD, (int64_t)H * QD,
                                 s->qfull + (size_t)(h0 + i) * KVD, (int64_t)H * KVD};
        mm_run_many(s->mm, heads, n, T);
    }
    if (idx) dsa_select(s, ly, T, pos0, idx_keys, idx_q);
    /* a spilled cache: the selected spilled rows read into the gather buffer, or else the
     * selected rows' pages read ahead, in runs, before the faults */
    const int n_cold = use_dsa && s->pmark ? gather_selected(s, T, pos0, cache) : 0;
    if (use_dsa && s->pmark && n_cold < 0) {
        for (int t = 0; t < T; t++)
            kv_prefetch_mark(s->pmark, kv_bytes(s->kv_type, KVD),
                             s->sel + (size_t)t * hp->idx_top_k, s->n_sel[t]);
        kv_prefetch_flush(s->spill, cache, s->pmark, s->n_pmark);
    }
    /* heads per unit: what the allocated sum lanes hold, but for a single row
     * the heads are split across the threads (a head's bits do not depend on
     * its group) */
    const int lanes = NN_WSUM_LANES;
    int G = s->mla_heads;
    if (G > MLA_MAX_GROUP) G = MLA_MAX_GROUP;
    if (G > hp->n_head) G = hp->n_head;
    const int nt = tp_size(s->pool);
    if (T < nt && G * nt > hp->n_head) G = (hp->n_head + nt - 1) / nt;
    mla_job j = {s,       hp->kq_scale,
                 T,       pos0,
                 use_dsa, lanes,
                 G,       (const float *)cache,
                 cache,   kv_bytes(s->kv_type, KVD),
                 s->rowp, n_cold > 0 ? n_cold : 0,
                 0};
    tp_run(s->pool, mla_worker, &j);
    /* per-head value projections in one job, then the output projection */
    for (int h0 = 0; h0 < H; h0 += MM_MANY_MAX) {
        const int n = H - h0 < MM_MANY_MAX ? H - h0 : MM_MANY_MAX;
        for (int i = 0; i < n; i++)
            heads[i] =
                (mm_task){&ly->v_b[h0 + i], s->ctx + (size_t)(h0 + i) * KVL, (int64_t)H * KVL,
                          s->o + (size_t)(h0 + i) * hp->v_head, (int64_t)H * hp->v_head};
        mm_run_many(s->mm, heads, n, T);
    }
    mm_run(s->mm, &ly->wo, s->o, T, out, hp->n_embd);
}

/* Tiles of the rows the scratch holds, each writing its cache rows (and
 * indexer keys) before its queries read them: the order of chunks of that
 * size, so the same bits. The selection is kept by position for the shared
 * indexer layers after a full one (sel_pos0, set by the full layer that made
 * it), so such a layer may run any run of the rows it covers. */
void nn_mla_forward(nn_mla *s, const nn_mla_w *ly, const float *xn, int T, int pos0, void *cache,
                    float *idx_keys, int use_dsa, float *out) {
    const size_t E = (size_t)s->d.n_embd, topk = (size_t)(s->d.idx_top_k > 0 ? s->d.idx_top_k : 1);
    size_t r0 = 0; /* the row of sel_all at pos0 */
    if (use_dsa && ly->has_idx) {
        PT_ASSERT(T <= s->sel_rows);
        s->sel_pos0 = pos0;
    } else if (use_dsa) {
        const int64_t off = (int64_t)pos0 - s->sel_pos0;
        PT_ASSERT(off >= 0 && off + T <= s->sel_rows);
        r0 = (size_t)off;
    }
    for (int t0 = 0, n; t0 < T; t0 += n) {
        n = T - t0 < s->rows ? T - t0 : s->rows;
        s->sel = s->sel_all + (r0 + (size_t)t0) * topk;
        s->n_sel = s->n_sel_all + r0 + t0;
        mla_tile(s, ly, xn + (size_t)t0 * E, n, pos0 + t0, cache, idx_keys, use_dsa,
                 out + (size_t)t0 * E);
    }
}

void nn_mla_store(nn_mla *s, const nn_mla_w *ly, const float *xn, int T, int pos0, void *cache,
                  float *idx_keys, int use_dsa) {
    const size_t E = (size_t)s->d.n_embd;
    const int idx = use_dsa && ly->has_idx;
    for (int t0 = 0, n; t0 < T; t0 += n) {
        n = T - t0 < s->rows ? T - t0 : s->rows;
        const float *x = xn + (size_t)t0 * E;
        /* mm_run_many: the bits of mla_tile's projection job */
        const mm_task proj[2] = {{&ly->kv_a, x, ly->kv_a.n_in, s->kva, s->kv_dim},
                                 {&ly->idx_k, x, ly->idx_k.n_in, s->ik, s->d.idx_head_dim}};
        mm_run_many(s->mm, proj, idx ? 2 : 1, n);
        for (int t = 0; t < n; t++)
            mla_store_row(s, ly, t, pos0 + t0, cache);
        if (idx) idx_store_keys(s, ly, n, pos0 + t0, idx_keys);
    }
}
