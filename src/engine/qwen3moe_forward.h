/* qwen3moe_forward.h — the forward pass of the Qwen3-MoE family.
 *
 * A qwen3moe_state is one sequence: per layer a linear KV cache of n_ctx
 * positions (normed, roped keys and values) and all scratch, allocated once
 * for a maximum batch. Prefill and decode run the same code: a call evaluates
 * n tokens at the next positions, in chunks of at most max_batch.
 */
#ifndef PT_ENGINE_QWEN3MOE_FORWARD_H
#define PT_ENGINE_QWEN3MOE_FORWARD_H

#include <stdint.h>

#include "model/qwen3moe.h"
#include "runtime/experts.h"
#include "runtime/threadpool.h"

typedef struct qwen3moe_state qwen3moe_state;

/* max_isa: highest kernel ISA level (QT_ISA_*), -1 for the best available. */
qwen3moe_state *qwen3moe_state_new(const qwen3moe_model *m, tp_pool *pool, xs_store *xs, int prefetch, int max_isa, int n_ctx,
                                   int max_batch, pt_err *err);
void qwen3moe_state_free(qwen3moe_state *s);

/* Positions already in the cache. */
int qwen3moe_n_past(const qwen3moe_state *s);
/* Forget the cache. */
void qwen3moe_reset(qwen3moe_state *s);
/* Keep only the first n positions of the cache (n <= n_past). */
void qwen3moe_truncate(qwen3moe_state *s, int n);

/* Evaluate tokens[n] at positions n_past.. . logits: NULL, [n][n_vocab] when
 * all_rows, else [n_vocab] for the last token. hidden: NULL or [n][n_embd],
 * the state after the final norm. 0, or -1 with err. */
int qwen3moe_eval(qwen3moe_state *s, const int32_t *tokens, int n, float *logits, int all_rows,
                  float *hidden, pt_err *err);

#endif
