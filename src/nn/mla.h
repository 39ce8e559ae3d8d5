/* mla.h — multi-head latent attention (MLA, DeepSeek-V3 / GLM-5) with weight
 * absorption, and the DSA lightning indexer (GLM-5.x) that picks which keys
 * each query attends to.
 *
 * The cache keeps, per position, the normed kv latent followed by the roped
 * shared key: kv_lora + qk_rope floats. The query's no-rope part is absorbed
 * through k_b into latent space, so scores are one dot over [latent | rope
 * key]; the attention-weighted latent goes back through v_b per head.
 *
 * Numerics follow llama.cpp's graphs: scores by nn_dot_f32 (two keys per
 * query load, same bits), softmax over rows padded to 16 masked keys,
 * weighted sums in nn_wsum_* lanes whose count depends on the chunk's rows.
 * Work is split over (query row, group of heads) units strided over the
 * threads, so the bits depend neither on the thread count nor on the split.
 */
#ifndef PT_NN_MLA_H
#define PT_NN_MLA_H

#include <stddef.h>
#include <stdint.h>

#include "nn/kv.h"
#include "nn/matmul.h"
#include "nn/ops.h"
#include "runtime/threadpool.h"

#define NN_MLA_MAX_HEADS 128 /* attention heads (DeepSeek-V3 has 128) */

/* Dimensions shared by every MLA layer of a model. */
typedef struct nn_mla_dims {
    int n_embd, n_head;
    int q_lora;           /* q LoRA rank; 0: attn_q straight from the input */
    int kv_lora;          /* compressed latent width */
    int qk_nope, qk_rope; /* per-head query/key split */
    int v_head;           /* per-head value width */
    float rms_eps;
    float kq_scale; /* attention logit scale */
    nn_rope rope;   /* over the qk_rope dims (the indexer rotates its first dims with it) */
    int idx_n_head, idx_head_dim, idx_top_k; /* DSA indexer; idx_n_head 0: none */
} nn_mla_dims;

/* One layer's attention weights. */
typedef struct nn_mla_w {
    mm_weight q_a;                   /* n_embd -> q_lora */
    const float *q_a_norm;           /* [q_lora] */
    mm_weight q_b;                   /* q_lora -> n_head*(nope+rope) (attn_q: n_embd -> ...) */
    mm_weight kv_a;                  /* n_embd -> kv_lora + qk_rope */
    const float *kv_a_norm;          /* [kv_lora] */
    mm_weight k_b[NN_MLA_MAX_HEADS]; /* [n_head] each nope -> kv_lora */
    mm_weight v_b[NN_MLA_MAX_HEADS]; /* [n_head] each kv_lora -> v_head */
    mm_weight wo;                    /* n_head*v_head -> n_embd */
    /* DSA indexer ("full" layers only; has_idx 0 elsewhere) */
    int has_idx;
    mm_weight idx_q_b;                        /* q_lora -> idx_n_head*idx_head_dim */
    mm_weight idx_k;                          /* n_embd -> idx_head_dim */
    const float *idx_k_norm_w, *idx_k_norm_b; /* [idx_head_dim] */
    mm_weight idx_proj;                       /* n_embd -> idx_n_head */
} nn_mla_w;

/* Per-session scratch (B = max_batch rows), allocated once. The indexer's key
 * selection (sel, n_sel) persists from a full layer to the "shared" layers
 * after it. */
typedef struct nn_mla {
    nn_mla_dims d;
    tp_pool *pool;
    mm_ctx *mm;
    int kv_dim;        /* kv_lora + qk_rope */
    float *qa;         /* [B][q_lora] */
    float *q;          /* [B][H][nope + rope] */
    float *kva;        /* [B][kv_dim] */
    float *qfull;      /* [B][H][kv_dim]: absorbed query | roped query */
    float *ctx;        /* [B][H][kv_lora] attention-weighted latents */
    float *o;          /* [B][H * v_head] */
    float *scores;     /* [n_threads][score_rows][n_scores] softmax rows (attention, indexer) */
    float *wacc;       /* [n_threads][mla_heads * NN_WSUM_LANES][kv_lora] weighted-sum lanes */
    size_t n_scores;   /* n_ctx rounded up to 16 */
    int mla_heads;     /* heads whose NN_WSUM_LANES sum lanes each thread has */
    size_t score_rows; /* score rows per thread: mla_heads */
    float *cs;         /* [qk_rope] rope table */
    uint32_t kv_type;  /* cache element type (nn/kv.h) */
    float *krow;       /* [kv_dim] one position's cache row before storing */
    float *kvq;        /* [n_threads][mla_heads][kv_dim] queries in the key type's dot form */
    float *kvrow;      /* [n_threads][NN_WSUM_KEYS][kv_dim] decoded latent rows */
    int *keys;         /* [n_threads][n_scores] a unit's keys (mla_unit_typed); the top-k scratch */
    uint64_t *keybits; /* [n_threads][n_scores / 64 + 1] a sparse unit's keys as a bit set */
    int rows;          /* B: query rows per tile (nn_mla_forward runs larger T in tiles) */
    int *sel_all;      /* [sel_rows][top_k] key selection of the last full DSA layer */
    int *n_sel_all;    /* [sel_rows] */
    int sel_rows;      /* block rows: the most one nn_mla_forward call runs */
    int sel_pos0;      /* the position of sel_all's first row */
    int *sel, *n_sel;  /* the rows of sel_all, n_sel_all of the tile in progress */
    /* a spilled cache (nn/kv.h), as nn_mla_init finds the arena: */
    uint8_t *pmark; /* one byte per page of a layer's rows, for reading the selected rows ahead
                       (kv_prefetch_mark); NULL: in RAM */
    size_t n_pmark;
    kv_arena *spill; /* the arena pmark's buffers are spilled in (their cache of selected pages) */
    /* selected spilled rows read directly (kv_gather; a cache type other than f32): */
    const uint8_t **rowp; /* [n_ctx] where a gathered row's bytes are; NULL: not gathered */
    uint8_t *gmark;       /* [n_ctx] the rows a tile selects, one byte each */
    int *glist;           /* [n_ctx] ... in ascending order */
    float *iq;            /* [B][idx_heads][idx_dim] */
    float *ik;            /* [B][idx_dim] */
    float *iw;            /* [B][idx_heads] */
    float *irot; /* [idx_dim][idx_dim] Walsh-Hadamard rotation (NULL: idx_dim not a power of two >=
                    64) */
    float *itmp; /* [idx_dim] one rotated vector */
} nn_mla;

/* How the attention reads a layer's cache rows of kv_type (KV_READ_*, for kv_arena_rows):
 * every row without the DSA indexer; with it, the rows it selects, gathered by direct reads
 * where the cache is spilled, unless the type is f32 (its weighted sums read whole blocks of
 * rows, which the mapping serves better). */
int nn_mla_kv_read(const nn_mla_dims *d, uint32_t kv_type);

/* Allocate the scratch for n_ctx positions, tiles of max_batch rows and a
 * selection for block_rows rows (the most one nn_mla_forward call runs), for
 * cache rows of kv_type in the arena kv (its rows already taken with
 * nn_mla_kv_read's mode): where kv spills and the layers select keys, the
 * marks that read the selected pages ahead, and where it gathers, the table
 * of gathered rows. 0, or -1 (out of memory; nn_mla_free it all the same). */
int nn_mla_init(nn_mla *a, const nn_mla_dims *d, tp_pool *pool, mm_ctx *mm, int n_ctx,
                int max_batch, int block_rows, uint32_t kv_type, kv_arena *kv);
void nn_mla_free(nn_mla *a);

/* The DSA indexer's top-k as a set: idx[0..k) = the keys of x[0..n) (k <= n)
 * that GNU libstdc++'s heap selection keeps (llama.cpp's CPU top-k), ties on
 * the cut broken its way. nn_idx_top_k gives the heap's set (in key order
 * where no tie or NaN needs the heap itself) through tmp[n]; nn_idx_top_k_heap
 * is the heap, its order. */
void nn_idx_top_k(const float *x, int n, int k, int *idx, uint32_t *tmp);
void nn_idx_top_k_heap(const float *x, int n, int k, int *idx);

/* Widest input any of its matmuls sees (for mm_ctx_init). */
int64_t nn_mla_max_in(const nn_mla_dims *d);

/* Attention of rows xn[T][n_embd] at positions pos0.. : writes their cache
 * rows kv[pos] (kv_dim elements of a->kv_type) (and the indexer keys idx_keys[pos][idx_head_dim] on
 * a full DSA layer), then out[T][n_embd], in tiles of a->rows. use_dsa: attend only to the
 * indexer's selection (0 for the MTP block). */
void nn_mla_forward(nn_mla *a, const nn_mla_w *w, const float *xn, int T, int pos0, void *kv,
                    float *idx_keys, int use_dsa, float *out);

/* nn_mla_forward's cache rows (and indexer keys on a full DSA layer) alone, for rows whose
 * output nobody reads but whose positions later rows attend to: the same bits, no queries, no
 * attention. A layer that shares the selection may then run a run of the rows after them. */
void nn_mla_store(nn_mla *a, const nn_mla_w *w, const float *xn, int T, int pos0, void *kv,
                  float *idx_keys, int use_dsa);

#endif
