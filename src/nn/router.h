/* router.h — MoE routers: from one row of router logits, the chosen experts in
 * selection order and their weights. A family composes the one its model uses.
 *
 * Softmax router (Qwen3-MoE, Gemma 4): probabilities over all experts, the top
 * n_used, weights optionally renormalised to sum 1, then scaled.
 * Sigmoid/softmax router with selection bias and groups (GLM-5, DeepSeek-V3):
 * the bias is added for *selection only*; with groups, a group's score is the
 * sum of its top-2 selection scores and only the best n_group_used groups stay
 * eligible; weights are the unbiased probabilities of the chosen experts.
 *
 * Float order follows llama.cpp (weights summed in selection order; the sum
 * clamped at 2^-14 before dividing).
 */
#ifndef PT_NN_ROUTER_H
#define PT_NN_ROUTER_H

#define NN_ROUTER_MAX_GROUPS 256 /* expert groups for group-limited routing */

enum { NN_GATING_SOFTMAX = 1, NN_GATING_SIGMOID = 2 };

typedef struct nn_router {
    int n_expert, n_used;      /* experts, experts chosen per row */
    int gating;                /* NN_GATING_* */
    const float *bias;         /* [n_expert] selection-only bias, or NULL */
    int n_group, n_group_used; /* group-limited selection; n_group <= 1: none */
    int weights_norm;          /* renormalise the chosen weights to sum 1 */
    float weights_scale;       /* multiplies the weights; 0 or 1: none */
} nn_router;

/* Softmax routing of logits[n_expert] (overwritten by the probabilities):
 * chosen[n_used], w[n_used]. */
void nn_route_softmax(const nn_router *r, float *logits, int *chosen, float *w);

/* Routing with a selection bias and groups (sigmoid or softmax gating);
 * logits are read only. scratch: [2 * n_expert] floats. */
void nn_route_biased(const nn_router *r, const float *logits, int *chosen, float *w,
                     float *scratch);

#endif
