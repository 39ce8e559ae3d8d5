/* attn.h — causal softmax attention of a batch of query rows over a KV cache,
 * shared by the GQA architectures (gemma4, qwen3moe), and the whole GQA
 * attention block they compose (nn_gqa_forward).
 *
 * The cache holds one row per position: keys [cap][n_kv*head_dim] and values
 * likewise, position p in slot p % cap. A linear cache has cap >= every
 * position; a sliding-window layer uses a ring with cap >= window + tile - 1
 * (tile: the rows the scratch holds; nn_gqa_forward runs a larger batch in
 * tiles) so the keys one tile needs are never overwritten by the same tile. Query
 * head h reads KV head h / (n_head / n_kv).
 *
 * Numerics follow llama.cpp without flash attention, rounding included: scores
 * by nn_dot_f32, softmax by nn_softmax over rows aligned to 16 cells, values
 * summed by nn_wsum_* (lanes by key position; 16 lanes for a batch, 64 for a
 * single row, as llama.cpp's kernel choice). Work is split over units of (a
 * few consecutive rows, KV head), each running the rows' query heads of that
 * group together (scores in blocks of keys, fp16 keys scored for eight or two heads per
 * pass, a block's value rows decoded once for all the unit's heads; every head
 * gets the bits it would get alone), so the result depends neither on the
 * thread count nor on how the rows are batched.
 */
#ifndef PT_NN_ATTN_H
#define PT_NN_ATTN_H

#include <stddef.h>
#include <stdint.h>

#include "nn/matmul.h"
#include "nn/ops.h"
#include "runtime/threadpool.h"

typedef struct nn_attn {
    const float *q;   /* [T][n_head*head_dim] queries (normed, roped) */
    const uint8_t *k; /* [cap] key rows of n_kv*head_dim elements of k_type (nn/kv.h) */
    const uint8_t *v; /* [cap] value rows, likewise of v_type */
    uint32_t k_type, v_type;
    size_t k_row, v_row; /* bytes of one cache row */
    float *out;          /* [T][n_head*head_dim] */
    int T;               /* query rows, at positions pos0 .. pos0+T-1 */
    int64_t pos0;
    int n_head, n_kv, head_dim;
    int64_t cap;           /* cache slots */
    int window;            /* 0: every earlier key; > 0: keys s with pos - s < window */
    float scale;           /* attention logit scale */
    float *scores;         /* scratch [tp_size(pool)][scores_stride] */
    int64_t scores_keys;   /* the most keys one query sees (sizes the softmax rows) */
    int64_t scores_stride; /* nn_attn_stride(scores_keys, head_dim, n_head / n_kv or more) */
} nn_attn;

/* Query heads per KV head at most (n_head / n_kv). */
enum { NN_ATTN_MAX_GROUP = 256 };

/* Scratch floats one thread needs for groups of up to max_group query heads (softmax rows,
 * queries in the key type, weighted-sum lanes, one block of decoded value rows), for units
 * of max(max_group, NN_WSUM_HEADS) heads. */
int64_t nn_attn_stride(int64_t max_keys, int head_dim, int max_group);

void nn_attn_run(tp_pool *pool, const nn_attn *a);

/* ===== GQA attention block =====
 * Projections, per-head q/k RMS norms before rope, the new keys and values
 * into the cache rows of their positions (slot pos % cap), attention over the
 * cache, output projection. Qwen3-MoE and Gemma 4 compose it per layer. */
typedef struct nn_gqa {
    const mm_weight *wq;          /* n_embd -> n_head*head_dim */
    const mm_weight *wk, *wv;     /* n_embd -> n_kv*head_dim; wv NULL: V is the raw K projection */
    const mm_weight *wo;          /* n_head*head_dim -> n_embd */
    const float *q_norm, *k_norm; /* [head_dim] per-head RMS norm gains */
    int v_norm;                   /* 1: values RMS-normed without gain (Gemma 4) */
    const nn_rope *rope;
    int n_head, n_kv, head_dim;
    int window;  /* 0: every earlier key; > 0: sliding window */
    float scale; /* attention logit scale */
    float rms_eps;
    int n_embd;
    uint32_t k_type, v_type; /* cache element types (nn/kv.h) */
} nn_gqa;

/* Scratch for a batch (B rows), allocated by the caller once. */
typedef struct nn_gqa_scratch {
    tp_pool *pool;
    mm_ctx *mm;
    int rows;              /* B: query rows per tile (nn_gqa_forward runs larger T in tiles) */
    float *q;              /* [B][n_head * max head_dim] */
    float *kx, *vx;        /* [B][max n_kv * head_dim] new keys / values */
    float *o;              /* [B][n_head * max head_dim] attention output per head */
    float *cs;             /* [max head_dim] rope table */
    float *krow, *vrow;    /* [max n_kv * head_dim] one position's key / value row before storing */
    float *scores;         /* [n_threads][scores_stride] */
    int64_t scores_keys;   /* n_ctx */
    int64_t scores_stride; /* nn_attn_stride(n_ctx, max head_dim, max group) */
} nn_gqa_scratch;

/* Allocate the scratch for max_batch rows of at most q_dim query floats
 * (n_head * head_dim), kv_dim key floats (n_kv * head_dim), heads of at
 * most head_dim and at most max_group query heads per KV head
 * (<= NN_ATTN_MAX_GROUP), over n_ctx positions. 0, or -1 (out of memory; free it all
 * the same). */
int nn_gqa_scratch_init(nn_gqa_scratch *s, tp_pool *pool, mm_ctx *mm, int max_batch, int64_t q_dim,
                        int64_t kv_dim, int head_dim, int max_group, int64_t n_ctx);
void nn_gqa_scratch_free(nn_gqa_scratch *s);

/* Attention of rows xn[T][n_embd] at positions pos0.. over the cache k, v
 * ([cap] rows of n_kv*head_dim elements of g->k_type / g->v_type, which
 * receive the rows' keys and values): out[T][n_embd]. T may exceed the
 * scratch's rows: tiles of s->rows, each storing its keys before reading. */
void nn_gqa_forward(const nn_gqa *g, nn_gqa_scratch *s, const float *xn, int T, int64_t pos0,
                    void *k, void *v, int64_t cap, float *out);

/* nn_gqa_forward's keys and values alone (rows whose attention output nobody reads, but
 * whose positions later rows attend to): the same cache bits, no queries, no attention. */
void nn_gqa_store(const nn_gqa *g, nn_gqa_scratch *s, const float *xn, int T, int64_t pos0, void *k,
                  void *v, int64_t cap);

#endif
