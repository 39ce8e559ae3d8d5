/* attn.h — causal softmax attention of a batch of query rows over a KV cache,
 * shared by the GQA architectures (gemma4, qwen3moe).
 *
 * The cache holds one row per position: keys [cap][n_kv*head_dim] and values
 * likewise, position p in slot p % cap. A linear cache has cap >= every
 * position; a sliding-window layer uses a ring with cap >= window + batch - 1
 * so the keys one batch needs are never overwritten by the same batch. Query
 * head h reads KV head h / (n_head / n_kv).
 *
 * Numerics follow llama.cpp without flash attention, rounding included: scores
 * by nn_dot_f32, softmax by nn_softmax over rows aligned to 16 cells, values
 * summed by nn_wsum_* (lanes by key position; 16 lanes for a batch, 64 for a
 * single row, as llama.cpp's kernel choice). Work is split over (row, head)
 * pairs, so the result does not depend on the thread count.
 */
#ifndef PT_NN_ATTN_H
#define PT_NN_ATTN_H

#include <stdint.h>

#include "runtime/threadpool.h"

typedef struct nn_attn {
    const float *q; /* [T][n_head*head_dim] queries (normed, roped) */
    const float *k; /* [cap][n_kv*head_dim] key cache */
    const float *v; /* [cap][n_kv*head_dim] value cache */
    float *out;     /* [T][n_head*head_dim] */
    int T;          /* query rows, at positions pos0 .. pos0+T-1 */
    int64_t pos0;
    int n_head, n_kv, head_dim;
    int64_t cap;           /* cache slots */
    int window;            /* 0: every earlier key; > 0: keys s with pos - s < window */
    float scale;           /* attention logit scale */
    float *scores;         /* scratch [tp_size(pool)][scores_stride] */
    int64_t scores_stride; /* nn_attn_stride(the most keys one query sees, head_dim) */
} nn_attn;

/* Scratch floats one thread needs (softmax row and weighted-sum lanes). */
int64_t nn_attn_stride(int64_t max_keys, int head_dim);

void nn_attn_run(tp_pool *pool, const nn_attn *a);

#endif
