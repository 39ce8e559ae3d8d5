/* attn.c — causal attention over a linear or ring KV cache (see attn.h). */
#include "attn.h"

#include <string.h>

#include "nn/ops.h"

/* One query row t, head h. */
static void attend_one(const nn_attn *a, int t, int h, float *sc) {
    const int D = a->head_dim, kvd = a->n_kv * a->head_dim;
    const int64_t pos = a->pos0 + t;
    const int64_t lo = a->window > 0 && pos - a->window + 1 > 0 ? pos - a->window + 1 : 0;
    const int n = (int)(pos - lo + 1);
    const int kh = h / (a->n_head / a->n_kv);
    const float *q = a->q + ((size_t)t * a->n_head + h) * D;
    for (int j = 0; j < n; j++) {
        const float *k = a->k + (size_t)((lo + j) % a->cap) * kvd + (size_t)kh * D;
        float d = 0;
        for (int i = 0; i < D; i++)
            d += q[i] * k[i];
        sc[j] = d;
    }
    nn_softmax(sc, n, a->scale);
    float *o = a->out + ((size_t)t * a->n_head + h) * D;
    memset(o, 0, (size_t)D * sizeof(float));
    for (int j = 0; j < n; j++) {
        const float p = sc[j];
        const float *v = a->v + (size_t)((lo + j) % a->cap) * kvd + (size_t)kh * D;
        for (int i = 0; i < D; i++)
            o[i] += p * v[i];
    }
}

static void attn_worker(void *arg, int ith, int nth) {
    const nn_attn *a = arg;
    long lo, hi;
    tp_range((long)a->T * a->n_head, ith, nth, &lo, &hi);
    float *sc = a->scores + (size_t)ith * a->scores_stride;
    for (long i = lo; i < hi; i++)
        attend_one(a, (int)(i / a->n_head), (int)(i % a->n_head), sc);
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
