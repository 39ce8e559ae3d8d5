/* moe.c — the routed-expert executor (see moe.h). */
#include "moe.h"

#include <stdlib.h>
#include <string.h>

int moe_scratch_init(moe_scratch *s, int n_expert, int B, int K, int n_embd) {
    int fail = 0;
    s->uniq = calloc((size_t)n_expert + 1, sizeof(int)); /* + 1: no zero-size calloc */
    s->seen = calloc((size_t)n_expert + 1, 1);
    s->rows = calloc((size_t)B, sizeof(int)); /* a row chooses an expert at most once */
    s->xg = pt_falloc((size_t)B * (size_t)n_embd, &fail);
    s->yk = pt_falloc((size_t)B * (size_t)K * (size_t)n_embd, &fail);
    return fail || !s->uniq || !s->seen || !s->rows ? -1 : 0;
}

void moe_scratch_free(moe_scratch *s) {
    free(s->uniq);
    free(s->seen);
    free(s->rows);
    free(s->xg);
    free(s->yk);
    memset(s, 0, sizeof *s);
}

void moe_mark(const int *ids, int m, uint8_t *seen, int *uniq, int *n) {
    for (int i = 0; i < m; i++)
        if (!seen[ids[i]]) {
            seen[ids[i]] = 1;
            uniq[(*n)++] = ids[i];
        }
}

void moe_unmark(uint8_t *seen, const int *uniq, int n) {
    for (int i = 0; i < n; i++)
        seen[uniq[i]] = 0;
}

int moe_run(const moe_call *c, moe_scratch *s, pt_err *err) {
    const int T = c->T, K = c->K, E = c->n_embd;
    int n_uniq = 0;
    moe_mark(c->topk, T * K, s->seen, s->uniq, &n_uniq);
    moe_unmark(s->seen, s->uniq, n_uniq);
    if (xs_begin(c->xs, c->layer, s->uniq, n_uniq, err)) return -1;
    if (c->overlap && c->overlap(c->overlap_arg, c->layer, T, err)) return -1;
    int e, rc;
    const uint8_t *mats[3];
    while ((rc = xs_next(c->xs, c->layer, &e, mats, err)) == 1) {
        int n = 0;
        for (int t = 0; t < T; t++)
            for (int k = 0; k < K; k++)
                if (c->topk[t * K + k] == e) {
                    s->rows[n] = t * K + k;
                    memcpy(s->xg + (size_t)n * E, c->x + (size_t)t * E, (size_t)E * sizeof(float));
                    n++;
                }
        if (c->expert(c->arch, c->layer, e, mats, s->xg, n, err)) return -1;
        for (int i = 0; i < n; i++)
            memcpy(s->yk + (size_t)s->rows[i] * E, s->xg + (size_t)i * E,
                   (size_t)E * sizeof(float));
    }
    if (rc < 0) return -1;
    for (int t = 0; t < T; t++) {
        float *o = c->out + (size_t)t * E;
        for (int k = 0; k < K; k++) {
            const float w = c->topw[t * K + k];
            const float *y = s->yk + ((size_t)t * K + k) * E;
            if (k == 0)
                for (int i = 0; i < E; i++)
                    o[i] = y[i] * w;
            else
                for (int i = 0; i < E; i++)
                    o[i] += y[i] * w;
        }
    }
    return 0;
}
