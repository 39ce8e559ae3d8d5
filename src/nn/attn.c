/* attn.c — causal attention over a linear or ring KV cache (see attn.h). */
#include "attn.h"

#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "kernels/quant.h"
#include "nn/kv.h"
#include "nn/ops.h"

/* Query rows per unit for a group of G heads: rows x G fills NN_WSUM_HEADS (one row when a
 * group alone fills it), so a unit's value rows are decoded once for all its heads. */
static int attn_unit_rows(int G) {
    return G < NN_WSUM_HEADS ? NN_WSUM_HEADS / G : 1;
}

int64_t nn_attn_stride(int64_t max_keys, int head_dim, int max_group) {
    /* per head of a unit (rows x group, at most max(max_group, NN_WSUM_HEADS)): a softmax row
     * from a 16-aligned position, the query in the key type and the weighted-sum lanes;
     * shared: one block of decoded value rows */
    const int64_t D = head_dim, G = max_group > 0 ? max_group : 1;
    const int64_t NH = G > NN_WSUM_HEADS ? G : NN_WSUM_HEADS;
    return NH * (((max_keys + 15) & ~(int64_t)15) + 16 + D + (int64_t)NN_WSUM_LANES * D) +
           (int64_t)NN_WSUM_KEYS * D;
}

/* Query rows t0 .. t0+R-1, the G = n_head / n_kv query heads of each that read KV head kh:
 * R * G heads. Each row's softmax row starts at a position that is a multiple of 16 (earlier
 * window keys masked) so its chunks of 16 line up with llama.cpp's KV cells, where cell =
 * position. Each head's scores, softmax and value sum are what it would get alone (the same
 * calls per head, in key order; the lane of a key is its position's, whatever block it is
 * summed in, and keys of weight 0 are skipped); what the heads share is the work on the
 * cache: keys are scored in blocks of NN_WSUM_KEYS for every head while the block is in
 * cache, and a block's value rows are decoded once for all. The rows' softmax rows lie on
 * one span of positions from the first row's start (zero outside each row's own range). */
static void attend_rows(const nn_attn *a, int t0, int R, int kh, float *scratch) {
    const int D = a->head_dim, G = a->n_head / a->n_kv, NH = R * G;
    int64_t pos[NN_WSUM_HEADS], lo[NN_WSUM_HEADS], base[NN_WSUM_HEADS];
    int n_pad[NN_WSUM_HEADS];
    for (int r = 0; r < R; r++) {
        pos[r] = a->pos0 + t0 + r;
        lo[r] = a->window > 0 && pos[r] - a->window + 1 > 0 ? pos[r] - a->window + 1 : 0;
        base[r] = lo[r] & ~(int64_t)15;
        n_pad[r] = (int)(((pos[r] + 1 - base[r]) + 15) & ~(int64_t)15);
    }
    /* the span: from the first row's start to the last row's end */
    const int64_t lo_u = lo[0], base_u = base[0], hi_u = pos[R - 1];
    const int64_t span = base[R - 1] + n_pad[R - 1] - base_u;
    const int64_t sc_len = ((a->scores_keys + 15) & ~(int64_t)15) + 16;
    float *scb = scratch, *qbb = scb + (size_t)NH * sc_len, *acb = qbb + (size_t)NH * D,
          *vb = acb + (size_t)NH * NN_WSUM_LANES * D;
#define SC(i) (scb + (size_t)(i)*sc_len)
#define QB(i) (qbb + (size_t)(i)*D)
#define ACC(i) (acb + (size_t)(i)*NN_WSUM_LANES * D)
    const size_t koff = kv_bytes(a->k_type, (int64_t)kh * D),
                 voff = kv_bytes(a->v_type, (int64_t)kh * D);
#define KROW(p) (a->k + (size_t)((p) % a->cap) * a->k_row + koff)
#define VROW(p) (a->v + (size_t)((p) % a->cap) * a->v_row + voff)
    /* fp16 keys: eight heads (qt_f16_dot8_fn, AVX-512) or two (qt_f16_dot2_fn) per pass over
     * a key row, the queries rounded to fp16 and held as floats (the same products as kv_dot's
     * fp16 query; the three give one head the same bits) */
    const qt_f16_dot2_fn dot2 = a->k_type == QT_F16 && D <= 1024 ? qt_f16_dot2_best() : NULL;
    const qt_f16_dot8_fn dot8 = dot2 ? qt_f16_dot8_best() : NULL;
    const float *qs[NN_ATTN_MAX_GROUP]; /* head i's query: row t0 + i / G, head kh * G + i % G */
    for (int i = 0; i < NH; i++) {
        const float *q = qs[i] =
            a->q + ((size_t)(t0 + i / G) * a->n_head + (size_t)kh * G + i % G) * D;
        float *sc = SC(i);
        for (int64_t j = 0; j < span; j++)
            sc[j] = -INFINITY;
        if (dot2) {
            memcpy(QB(i), q, (size_t)D * sizeof(float));
            kv_round(a->k_type, QB(i), D);
        } else if (a->k_type != QT_F32) {
            kv_query(a->k_type, q, D, QB(i));
        }
    }
    /* heads 8e .. 8e + 7 scored together (dot8) over the block's keys that all of them see:
     * [c0[e], c1[e]], rows ascending, so from the last row's start to the first row's end */
    int64_t c0[NN_ATTN_MAX_GROUP / 8], c1[NN_ATTN_MAX_GROUP / 8];
    const int n8 = dot8 ? NH / 8 : 0;
    for (int64_t b0 = lo_u; b0 <= hi_u; b0 += NN_WSUM_KEYS) {
        const int64_t b1 = b0 + NN_WSUM_KEYS - 1 < hi_u ? b0 + NN_WSUM_KEYS - 1 : hi_u;
        const void *krows[NN_WSUM_KEYS];
        for (int64_t p = b0; n8 && p <= b1; p++)
            krows[p - b0] = KROW(p);
        for (int e = 0; e < n8; e++) {
            const int ra = 8 * e / G, rb = (8 * e + 7) / G;
            c0[e] = b0 > lo[rb] ? b0 : lo[rb];
            c1[e] = b1 < pos[ra] ? b1 : pos[ra];
            if (c0[e] > c1[e]) continue;
            float d[8 * NN_WSUM_KEYS];
            dot8(krows + (c0[e] - b0), (int)(c1[e] - c0[e] + 1), QB(8 * e), D, D, d);
            for (int k = 0; k < 8; k++) {
                float *sc = SC(8 * e + k) - base_u;
                for (int64_t p = c0[e]; p <= c1[e]; p++)
                    sc[p] = d[8 * (p - c0[e]) + k];
            }
        }
        for (int r = 0; r < R; r++) {
            const int64_t k0 = b0 > lo[r] ? b0 : lo[r], k1 = b1 < pos[r] ? b1 : pos[r];
            for (int hh = 0; hh < G && k0 <= k1; hh++) {
                const int i = r * G + hh;
                float *sc = SC(i) - base_u;
                const float *q = qs[i];
                int64_t p = k0;
                if (a->k_type == QT_F32) {
                    /* two keys per query load (each score is nn_dot_f32's bits) */
                    for (; p + 1 <= k1; p += 2)
                        nn_dot2_f32(q, (const float *)KROW(p), (const float *)KROW(p + 1), D,
                                    sc + p);
                    if (p <= k1) sc[p] = nn_dot_f32(q, (const float *)KROW(p), D);
                } else if (dot2) {
                    /* this head and the next of the row together; a head left over: the pair
                     * kernel with itself. The keys dot8 scored for the head's group (a pair is
                     * in one group), [skip0, skip1] within [k0, k1], are passed over. */
                    const int pair = hh + 1 < G, in8 = i < 8 * n8 && c0[i / 8] <= c1[i / 8];
                    const int64_t skip0 = in8 ? c0[i / 8] : k1 + 1, skip1 = in8 ? c1[i / 8] : k1;
                    float *sc1 = pair ? SC(i + 1) - base_u : NULL;
                    const float *q1 = QB(i + pair);
                    for (; p <= k1; p++) {
                        if (p == skip0) p = skip1 + 1;
                        if (p > k1) break;
                        float d[2];
                        dot2(KROW(p), QB(i), q1, D, d);
                        sc[p] = d[0];
                        if (pair) sc1[p] = d[1];
                    }
                    hh += pair;
                } else {
                    for (; p <= k1; p++)
                        sc[p] = kv_dot(a->k_type, QB(i), KROW(p), D);
                }
            }
        }
    }
    uint64_t used[NN_ATTN_MAX_GROUP];
    for (int i = 0; i < NH; i++) {
        const int r = i / G;
        float *sc = SC(i);
        const int64_t off = base[r] - base_u;
        nn_softmax(sc + off, n_pad[r], a->scale);
        for (int64_t j = 0; j < off; j++) /* earlier rows' keys: weight 0 */
            sc[j] = 0.0f;
        for (int64_t j = off + n_pad[r]; j < span; j++) /* later rows' keys */
            sc[j] = 0.0f;
        nn_wsum_begin(ACC(i), NN_WSUM_LANES, D, &used[i]);
    }
    float *accs[NN_ATTN_MAX_GROUP];
    const float *ps[NN_ATTN_MAX_GROUP];
    for (int i = 0; i < NH; i++)
        accs[i] = ACC(i);
    for (int64_t p0 = lo_u; p0 <= hi_u;) {
        /* a block of keys in consecutive cache slots (a ring's wrap ends one) */
        int nk = (int)(hi_u + 1 - p0 < NN_WSUM_KEYS ? hi_u + 1 - p0 : NN_WSUM_KEYS);
        if (p0 % a->cap + nk > a->cap) nk = (int)(a->cap - p0 % a->cap);
        const void *rows = VROW(p0);
        size_t stride = a->v_row / sizeof(float);
        const int f16 = a->v_type == QT_F16;
        if (f16) {
            stride = a->v_row / sizeof(pt_f16); /* the cache's rows, converted as loaded */
        } else if (a->v_type != QT_F32) {
            for (int k = 0; k < nk; k++) {
                int any = 0;
                for (int i = 0; i < NH && !any; i++)
                    any = SC(i)[p0 + k - base_u] != 0.0f;
                if (any) kv_load(a->v_type, VROW(p0 + k), D, vb + (size_t)k * D);
            }
            rows = vb;
            stride = (size_t)D;
        }
        for (int i = 0; i < NH; i++)
            ps[i] = SC(i) + (p0 - base_u);
        kv_wsum_keys(NH, accs, ps, a->v_type, D, p0, nk, rows, f16, stride, used);
        p0 += nk;
    }
    for (int i = 0; i < NH; i++)
        nn_wsum_end(ACC(i), NN_WSUM_LANES, D,
                    a->out + ((size_t)(t0 + i / G) * a->n_head + (size_t)kh * G + i % G) * D,
                    used[i]);
#undef KROW
#undef VROW
#undef SC
#undef QB
#undef ACC
}

/* Units (KV head, row block) ith, ith + nth, ...: the later rows of a prompt see more keys,
 * and a contiguous split would leave the last part with most of the work. A KV head's row
 * blocks run one after another, so its keys and values are still in this core's cache
 * when the next block reads them. */
static void attn_worker(void *arg, int ith, int nth) {
    const nn_attn *a = arg;
    float *scratch = a->scores + (size_t)ith * a->scores_stride;
    const int R = attn_unit_rows(a->n_head / a->n_kv);
    const long n_blocks = (a->T + R - 1) / R;
    for (long i = ith; i < n_blocks * a->n_kv; i += nth) {
        const int t0 = (int)(i % n_blocks) * R;
        attend_rows(a, t0, a->T - t0 < R ? a->T - t0 : R, (int)(i / n_blocks), scratch);
    }
}

void nn_attn_run(tp_pool *pool, const nn_attn *a) {
    /* keys the last row sees bound the work; small jobs stay on this thread */
    const int64_t last = a->pos0 + a->T;
    const int64_t keys = a->window > 0 && a->window < last ? a->window : last;
    if ((int64_t)a->T * a->n_head * keys * a->head_dim < 65536)
        attn_worker((void *)a, 0, 1);
    else
        tp_run(pool, attn_worker, (void *)a);
}

int nn_gqa_scratch_init(nn_gqa_scratch *s, tp_pool *pool, mm_ctx *mm, int max_batch, int64_t q_dim,
                        int64_t kv_dim, int head_dim, int max_group, int64_t n_ctx) {
    const size_t B = (size_t)max_batch;
    int fail = 0;
    *s = (nn_gqa_scratch){.pool = pool,
                          .mm = mm,
                          .rows = max_batch,
                          .scores_keys = n_ctx,
                          .scores_stride = nn_attn_stride(n_ctx, head_dim, max_group)};
    s->q = pt_falloc(B * (size_t)q_dim, &fail);
    s->kx = pt_falloc(B * (size_t)kv_dim, &fail);
    s->vx = pt_falloc(B * (size_t)kv_dim, &fail);
    s->o = pt_falloc(B * (size_t)q_dim, &fail);
    s->cs = pt_falloc((size_t)head_dim, &fail);
    s->krow = pt_falloc((size_t)kv_dim, &fail);
    s->vrow = pt_falloc((size_t)kv_dim, &fail);
    s->scores = pt_falloc((size_t)tp_size(pool) * (size_t)s->scores_stride, &fail);
    return fail ? -1 : 0;
}

void nn_gqa_scratch_free(nn_gqa_scratch *s) {
    float *bufs[] = {s->q, s->kx, s->vx, s->o, s->cs, s->krow, s->vrow, s->scores};
    for (size_t i = 0; i < PT_ARRAY_LEN(bufs); i++)
        pt_scratch_free(bufs[i]);
    memset(s, 0, sizeof *s);
}

/* The keys and values of a tile's rows (T <= s->rows) into the cache rows of their
 * positions and, with queries, the rows' queries (normed, roped) in s->q. The
 * projections of the same rows go in one pool job (mm_run_many: the same bits as
 * one at a time), so a row's key and value bits are the same with or without its
 * query. */
static void gqa_project(const nn_gqa *g, nn_gqa_scratch *s, const float *xn, int T, int64_t pos0,
                        void *k, void *v, int64_t cap, int queries) {
    const int H = g->n_head, D = g->head_dim, NKV = g->n_kv, KVD = NKV * D;
    mm_task proj[3];
    int n = 0;
    if (queries) proj[n++] = (mm_task){g->wq, xn, g->wq->n_in, s->q, (int64_t)H * D};
    proj[n++] = (mm_task){g->wk, xn, g->wk->n_in, s->kx, KVD};
    if (g->wv) proj[n++] = (mm_task){g->wv, xn, g->wv->n_in, s->vx, KVD};
    mm_run_many(s->mm, proj, n, T);
    if (!g->wv) memcpy(s->vx, s->kx, (size_t)T * KVD * sizeof(float));
    for (int t = 0; t < T; t++) {
        nn_rope_cache(g->rope, pos0 + t, s->cs);
        if (queries) {
            float *qt = s->q + (size_t)t * H * D;
            nn_rms_norm_rows(qt, g->q_norm, g->rms_eps, D, H, qt);
            for (int h = 0; h < H; h++)
                nn_rope_apply(g->rope, s->cs, qt + (size_t)h * D);
        }
        /* normed, roped rows in float, then stored in the cache types */
        float *krow = s->krow, *vrow = s->vrow;
        const float *kx = s->kx + (size_t)t * KVD, *vx = s->vx + (size_t)t * KVD;
        nn_rms_norm_rows(kx, g->k_norm, g->rms_eps, D, NKV, krow);
        for (int h = 0; h < NKV; h++)
            nn_rope_apply(g->rope, s->cs, krow + (size_t)h * D);
        if (g->v_norm)
            nn_rms_norm_rows(vx, NULL, g->rms_eps, D, NKV, vrow);
        else
            memcpy(vrow, vx, (size_t)KVD * sizeof(float));
        const int64_t slot = (pos0 + t) % cap;
        kv_store(g->k_type, krow, KVD, (uint8_t *)k + (size_t)slot * kv_bytes(g->k_type, KVD));
        kv_store(g->v_type, vrow, KVD, (uint8_t *)v + (size_t)slot * kv_bytes(g->v_type, KVD));
    }
}

/* One tile: T <= s->rows query rows. */
static void gqa_tile(const nn_gqa *g, nn_gqa_scratch *s, const float *xn, int T, int64_t pos0,
                     void *k, void *v, int64_t cap, float *out) {
    const int H = g->n_head, D = g->head_dim, NKV = g->n_kv, KVD = NKV * D;
    gqa_project(g, s, xn, T, pos0, k, v, cap, 1);
    nn_attn at = {.q = s->q,
                  .k = k,
                  .v = v,
                  .k_type = g->k_type,
                  .v_type = g->v_type,
                  .k_row = kv_bytes(g->k_type, KVD),
                  .v_row = kv_bytes(g->v_type, KVD),
                  .out = s->o,
                  .T = T,
                  .pos0 = pos0,
                  .n_head = H,
                  .n_kv = NKV,
                  .head_dim = D,
                  .cap = cap,
                  .window = g->window,
                  .scale = g->scale,
                  .scores = s->scores,
                  .scores_keys = s->scores_keys,
                  .scores_stride = s->scores_stride};
    nn_attn_run(s->pool, &at);
    mm_run(s->mm, g->wo, s->o, T, out, g->n_embd);
}

/* Tiles of the rows the scratch holds, each storing its keys and values before
 * its queries read the cache: the same order as chunks of that size, so the
 * same bits (a row's attention depends on its position and the cache only). */
void nn_gqa_forward(const nn_gqa *g, nn_gqa_scratch *s, const float *xn, int T, int64_t pos0,
                    void *k, void *v, int64_t cap, float *out) {
    for (int t0 = 0, n; t0 < T; t0 += n) {
        n = T - t0 < s->rows ? T - t0 : s->rows;
        gqa_tile(g, s, xn + (size_t)t0 * g->n_embd, n, pos0 + t0, k, v, cap,
                 out + (size_t)t0 * g->n_embd);
    }
}

void nn_gqa_store(const nn_gqa *g, nn_gqa_scratch *s, const float *xn, int T, int64_t pos0, void *k,
                  void *v, int64_t cap) {
    for (int t0 = 0, n; t0 < T; t0 += n) {
        n = T - t0 < s->rows ? T - t0 : s->rows;
        gqa_project(g, s, xn + (size_t)t0 * g->n_embd, n, pos0 + t0, k, v, cap, 0);
    }
}
