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

int64_t nn_attn_stride(int64_t max_keys, int head_dim) {
    /* a softmax row from a 16-aligned position, the query in the key type and
     * one decoded value row, then the weighted-sum lanes */
    return ((max_keys + 15) & ~(int64_t)15) + 16 + 2 * (int64_t)head_dim +
           (int64_t)NN_WSUM_LANES * head_dim;
}

/* One query row t, head h. The softmax row starts at a position that is a
 * multiple of 16 (earlier window keys masked) so its chunks of 16 line up with
 * llama.cpp's KV cells, where cell = position. */
static void attend_one(const nn_attn *a, int t, int h, float *sc, float *qb, float *vb,
                       float *acc) {
    const int D = a->head_dim;
    const int64_t pos = a->pos0 + t;
    const int64_t lo = a->window > 0 && pos - a->window + 1 > 0 ? pos - a->window + 1 : 0;
    const int64_t base = lo & ~(int64_t)15;
    const int n_pad = (int)(((pos + 1 - base) + 15) & ~(int64_t)15);
    const int kh = h / (a->n_head / a->n_kv);
    const float *q = a->q + ((size_t)t * a->n_head + h) * D;
    const size_t koff = kv_bytes(a->k_type, (int64_t)kh * D),
                 voff = kv_bytes(a->v_type, (int64_t)kh * D);
#define KROW(p) (a->k + (size_t)((p) % a->cap) * a->k_row + koff)
#define VROW(p) (a->v + (size_t)((p) % a->cap) * a->v_row + voff)
    for (int j = 0; j < n_pad; j++)
        sc[j] = -INFINITY;
    int64_t p = lo;
    if (a->k_type == QT_F32) {
        for (; p + 1 <= pos; p += 2) /* two keys per query load */
            nn_dot2_f32(q, (const float *)KROW(p), (const float *)KROW(p + 1), D, sc + (p - base));
        if (p <= pos) sc[p - base] = nn_dot_f32(q, (const float *)KROW(p), D);
    } else {
        kv_query(a->k_type, q, D, qb);
        for (; p <= pos; p++)
            sc[p - base] = kv_dot(a->k_type, qb, KROW(p), D);
    }
    nn_softmax(sc, n_pad, a->scale);
    const int lanes = NN_WSUM_LANES; /* for one query row too: see nn_wsum_add */
    uint64_t used;
    nn_wsum_begin(acc, lanes, D, &used);
    for (p = lo; p <= pos; p++) {
        if (sc[p - base] == 0.0f) continue;
        if (a->v_type == QT_F32) {
            nn_wsum_add(acc, lanes, D, p, sc[p - base], (const float *)VROW(p), &used);
        } else {
            kv_load(a->v_type, VROW(p), D, vb);
            nn_wsum_add(acc, lanes, D, p, kv_weight(a->v_type, sc[p - base]), vb, &used);
        }
    }
#undef KROW
#undef VROW
    nn_wsum_end(acc, lanes, D, a->out + ((size_t)t * a->n_head + h) * D, used);
}

/* Pairs ith, ith + nth, ...: the later rows of a prompt see more keys, and a
 * contiguous split would leave the last part with most of the work. */
static void attn_worker(void *arg, int ith, int nth) {
    const nn_attn *a = arg;
    float *sc = a->scores + (size_t)ith * a->scores_stride;
    float *acc = sc + (a->scores_stride - (int64_t)NN_WSUM_LANES * a->head_dim);
    float *vb = acc - a->head_dim, *qb = vb - a->head_dim;
    for (long i = ith; i < (long)a->T * a->n_head; i += nth)
        attend_one(a, (int)(i / a->n_head), (int)(i % a->n_head), sc, qb, vb, acc);
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
                        int64_t kv_dim, int head_dim, int64_t n_ctx) {
    const size_t B = (size_t)max_batch;
    int fail = 0;
    *s = (nn_gqa_scratch){.pool = pool,
                          .mm = mm,
                          .rows = max_batch,
                          .scores_stride = nn_attn_stride(n_ctx, head_dim)};
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
        free(bufs[i]);
    memset(s, 0, sizeof *s);
}

/* One tile: T <= s->rows query rows. */
static void gqa_tile(const nn_gqa *g, nn_gqa_scratch *s, const float *xn, int T, int64_t pos0,
                     void *k, void *v, int64_t cap, float *out) {
    const int H = g->n_head, D = g->head_dim, NKV = g->n_kv, KVD = NKV * D;
    mm_run(s->mm, g->wq, xn, T, s->q, (int64_t)H * D);
    mm_run(s->mm, g->wk, xn, T, s->kx, KVD);
    if (g->wv)
        mm_run(s->mm, g->wv, xn, T, s->vx, KVD);
    else
        memcpy(s->vx, s->kx, (size_t)T * KVD * sizeof(float));
    for (int t = 0; t < T; t++) {
        nn_rope_cache(g->rope, pos0 + t, s->cs);
        for (int h = 0; h < H; h++) {
            float *q = s->q + ((size_t)t * H + h) * D;
            nn_rms_norm(q, g->q_norm, g->rms_eps, D, q);
            nn_rope_apply(g->rope, s->cs, q);
        }
        /* normed, roped rows in float, then stored in the cache types */
        float *krow = s->krow, *vrow = s->vrow;
        for (int h = 0; h < NKV; h++) {
            const float *kx = s->kx + (size_t)t * KVD + (size_t)h * D,
                        *vx = s->vx + (size_t)t * KVD + (size_t)h * D;
            nn_rms_norm(kx, g->k_norm, g->rms_eps, D, krow + (size_t)h * D);
            nn_rope_apply(g->rope, s->cs, krow + (size_t)h * D);
            if (g->v_norm)
                nn_rms_norm(vx, NULL, g->rms_eps, D, vrow + (size_t)h * D);
            else
                memcpy(vrow + (size_t)h * D, vx, (size_t)D * sizeof(float));
        }
        const int64_t slot = (pos0 + t) % cap;
        kv_store(g->k_type, krow, KVD, (uint8_t *)k + (size_t)slot * kv_bytes(g->k_type, KVD));
        kv_store(g->v_type, vrow, KVD, (uint8_t *)v + (size_t)slot * kv_bytes(g->v_type, KVD));
    }
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
