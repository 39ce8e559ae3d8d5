/* router.c — MoE routers (see router.h). */
#include "nn/router.h"

#include <math.h>
#include <string.h>

#include "nn/ops.h"

/* The smallest weight sum llama.cpp divides by (2^-14). */
#define ROUTER_MIN_SUM 6.103515625e-5f

/* Weights of the chosen experts from probabilities p: normalised, scaled. */
static void chosen_weights(const nn_router *r, const float *p, const int *chosen, float *w) {
    const int K = r->n_used;
    float sum = 0;
    for (int k = 0; k < K; k++)
        sum += w[k] = p[chosen[k]];
    if (r->weights_norm) {
        if (sum < ROUTER_MIN_SUM) sum = ROUTER_MIN_SUM;
        for (int k = 0; k < K; k++)
            w[k] /= sum;
    }
    if (r->weights_scale != 0.0f && r->weights_scale != 1.0f)
        for (int k = 0; k < K; k++)
            w[k] *= r->weights_scale;
}

void nn_route_softmax(const nn_router *r, float *logits, int *chosen, float *w) {
    nn_softmax(logits, r->n_expert, 1.0f);
    nn_top_k(logits, r->n_expert, r->n_used, chosen);
    chosen_weights(r, logits, chosen, w);
}

/* Mask (to -inf) the selection scores of every group outside the best
 * n_group_used, a group scoring the sum of its top-2 selection scores. */
static void limit_groups(const nn_router *r, float *sel) {
    const int per = r->n_expert / r->n_group, k2 = per < 2 ? per : 2;
    float gscore[NN_ROUTER_MAX_GROUPS];
    int gidx[NN_ROUTER_MAX_GROUPS];
    for (int gi = 0; gi < r->n_group; gi++) {
        int top2[2];
        nn_top_k(sel + gi * per, per, k2, top2);
        gscore[gi] = 0;
        for (int i = 0; i < k2; i++)
            gscore[gi] += sel[gi * per + top2[i]];
    }
    nn_top_k(gscore, r->n_group, r->n_group_used, gidx);
    for (int gi = 0; gi < r->n_group; gi++) {
        int keep = 0;
        for (int i = 0; i < r->n_group_used; i++)
            keep |= gidx[i] == gi;
        if (!keep)
            for (int e = gi * per; e < (gi + 1) * per; e++)
                sel[e] = -INFINITY;
    }
}

void nn_route_biased(const nn_router *r, const float *logits, int *chosen, float *w,
                     float *scratch) {
    const int X = r->n_expert;
    float *p = scratch, *sel = scratch + X;
    if (r->gating == NN_GATING_SIGMOID) {
        for (int e = 0; e < X; e++)
            p[e] = nn_sigmoid(logits[e]);
    } else {
        memcpy(p, logits, (size_t)X * sizeof(float));
        nn_softmax(p, X, 1.0f);
    }
    for (int e = 0; e < X; e++)
        sel[e] = p[e] + (r->bias ? r->bias[e] : 0.0f);
    if (r->n_group > 1) limit_groups(r, sel);
    nn_top_k(sel, X, r->n_used, chosen);
    chosen_weights(r, p, chosen, w);
}
