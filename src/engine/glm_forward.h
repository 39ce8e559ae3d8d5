/* glm_forward.h — the forward pass of the glm-dsa / deepseek2 family.
 *
 * A glm_state is one sequence: its MLA cache (per layer, per position: the
 * normed kv latent followed by the roped shared key, kv_lora + qk_rope floats),
 * the DSA indexer key cache of every full layer, the NextN/MTP block's own
 * cache, and all scratch, allocated once for a maximum batch. Prefill and
 * decode run the same code: a call evaluates n tokens at the next positions,
 * in chunks of at most max_batch.
 */
#ifndef PT_ENGINE_GLM_FORWARD_H
#define PT_ENGINE_GLM_FORWARD_H

#include <stdint.h>

#include "model/glm_dsa.h"
#include "runtime/experts.h"
#include "runtime/threadpool.h"

typedef struct glm_state glm_state;

/* xs: the engine's expert store (model layer indices); prefetch: router
 * lookahead into the next layer's experts; max_isa: highest kernel ISA level
 * (QT_ISA_*), -1 for the best available. */
glm_state *glm_state_new(const glm_model *m, tp_pool *pool, xs_store *xs, int prefetch, int max_isa,
                         int n_ctx, int max_batch, pt_err *err);
void glm_state_free(glm_state *s);

/* Positions already in the trunk cache. */
int glm_n_past(const glm_state *s);
/* Forget the cache (trunk and MTP). */
void glm_reset(glm_state *s);
/* Keep only the first n positions of the trunk cache (n <= n_past). */
void glm_truncate(glm_state *s, int n);

/* Evaluate tokens[n] at positions n_past.. . logits: NULL, [n][n_vocab] when
 * all_rows, else [n_vocab] for the last token. hidden: NULL or [n][n_embd], the
 * trunk state after the final norm (the MTP head's input). 0, or -1 with err. */
int glm_eval(glm_state *s, const int32_t *tokens, int n, float *logits, int all_rows, float *hidden,
             pt_err *err);

/* NextN/MTP draft logits: row i from (tokens[i], hidden_prev[i]) at MTP position
 * mtp_past + i, where hidden_prev[i] is the trunk state of the previous
 * position. logits: [n][n_vocab]. 0, or -1 with err. */
int glm_mtp(glm_state *s, const int32_t *tokens, const float *hidden_prev, int n, float *logits,
            pt_err *err);

#endif
