/* gemma4_forward.h — the forward pass of the Gemma 4 MoE family.
 *
 * A gemma4_state is one sequence: per layer a KV cache (full-attention layers
 * a linear one of n_ctx positions; sliding-window layers a ring of
 * window + max_batch - 1 positions, enough for one batch's queries to see
 * their whole window) and all scratch, allocated once for a maximum batch.
 * Prefill and decode run the same code: a call evaluates n tokens at the next
 * positions, in chunks of at most max_batch.
 */
#ifndef PT_ENGINE_GEMMA4_FORWARD_H
#define PT_ENGINE_GEMMA4_FORWARD_H

#include <stdint.h>

#include "model/gemma4.h"
#include "runtime/experts.h"
#include "runtime/threadpool.h"

typedef struct gemma4_state gemma4_state;

/* max_isa: highest kernel ISA level (QT_ISA_*), -1 for the best available. */
gemma4_state *gemma4_state_new(const gemma4_model *m, tp_pool *pool, xs_store *xs, int prefetch, int max_isa, int n_ctx,
                               int max_batch, pt_err *err);
void gemma4_state_free(gemma4_state *s);

/* Positions already in the cache. */
int gemma4_n_past(const gemma4_state *s);
/* Forget the cache. */
void gemma4_reset(gemma4_state *s);
/* Keep only the first n positions (n <= n_past). A sliding-window ring may
 * already have overwritten keys the window before n needs (when more than
 * about max_batch positions are dropped); then the whole cache is forgotten
 * and n_past becomes 0, so callers must read gemma4_n_past afterwards. */
void gemma4_truncate(gemma4_state *s, int n);

/* Evaluate tokens[n] at positions n_past.. . logits: NULL, [n][n_vocab] when
 * all_rows, else [n_vocab] for the last token (soft-capped, as the model
 * defines them). hidden: NULL or [n][n_embd], the state after the final norm.
 * 0, or -1 with err. */
int gemma4_eval(gemma4_state *s, const int32_t *tokens, int n, float *logits, int all_rows,
                float *hidden, pt_err *err);

#endif
