/* moe.c — the routed-expert executor (see moe.h). */
#include "moe.h"

#include <string.h>

int moe_run(const moe_call *c, moe_scratch *s, pt_err *err) {
    const int T = c->T, K = c->K, D = c->n_embd;
    int n_uniq = 0;
    for (int i = 0; i < T * K; i++) {
        const int e = c->topk[i];
        if (!s->seen[e]) {
            s->seen[e] = 1;
            s->uniq[n_uniq++] = e;
        }
    }
    for (int i = 0; i < n_uniq; i++) s->seen[s->uniq[i]] = 0;
    if (xs_begin(c->xs, c->layer, s->uniq, n_uniq, err)) return -1;
    if (c->overlap && c->overlap(c->arch, c->layer, T, err)) return -1;
    int e, rc;
    const uint8_t *mats[3];
    while ((rc = xs_next(c->xs, c->layer, &e, mats, err)) == 1) {
        int n = 0;
        for (int t = 0; t < T; t++)
            for (int k = 0; k < K; k++)
                if (c->topk[t * K + k] == e) {
                    s->rows[n] = t * K + k;
                    memcpy(s->xg + (size_t)n * D, c->x + (size_t)t * D, (size_t)D * sizeof(float));
                    n++;
                }
        if (c->expert(c->arch, c->layer, e, mats, s->xg, n, err)) return -1;
        for (int i = 0; i < n; i++)
            memcpy(s->yk + (size_t)s->rows[i] * D, s->xg + (size_t)i * D, (size_t)D * sizeof(float));
    }
    if (rc < 0) return -1;
    for (int t = 0; t < T; t++) {
        float *o = c->out + (size_t)t * D;
        for (int k = 0; k < K; k++) {
            const float w = c->topw[t * K + k];
            const float *y = s->yk + ((size_t)t * K + k) * D;
            if (k == 0)
                for (int i = 0; i < D; i++) o[i] = y[i] * w;
            else
                for (int i = 0; i < D; i++) o[i] += y[i] * w;
        }
    }
    return 0;
}
