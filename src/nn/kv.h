/* kv.h — element types of the KV cache, as llama.cpp names and computes them
 * (--cache-type-k / --cache-type-v: f32, f16, bf16, q8_0, q4_0).
 *
 * A cache row (one position's keys or values of one layer, all KV heads) is
 * converted to the cache type when it is stored, the way ggml converts a row
 * written into a cache tensor of that type: fp16 and bf16 round to nearest
 * even; q8_0 and q4_0 are blocks of 32 with one fp16 scale (q8_0 as ggml-cpu
 * quantises a row, rounding x / d to nearest even).
 *
 * Attention reads the rows back as llama.cpp's CPU backend does:
 *  - scores: the query is converted to the key type's dot-product partner
 *    (F16 for f16, BF16 for bf16, Q8_0 for q8_0 and q4_0: ggml's vec_dot_type)
 *    and dotted with the stored row by the type's one kernel (qt_dot_best);
 *    products of two fp16 or two bf16 values are exact in float, so only the
 *    summation order can differ from llama.cpp.
 *  - values: the softmax probabilities are rounded to fp16 / bf16 for an f16 /
 *    bf16 value cache (llama.cpp converts them for the probability x value
 *    product); quantised value caches (which llama.cpp runs only with flash
 *    attention, where the value rows are decoded to float and the weights stay
 *    float) keep float weights. The value row is decoded to float and summed
 *    in the lanes of nn_wsum_* as before.
 * f32 is the arithmetic petrel had before the types existed, bit for bit.
 * Every choice depends on the type only, never on the batch: a row's results
 * are the same alone or in a prompt (ARCHITECTURE.md, batch invariance).
 */
#ifndef PT_NN_KV_H
#define PT_NN_KV_H

#include <stddef.h>
#include <stdint.h>

/* 1 when type (a ggml type id) is a KV cache type petrel supports. */
int kv_type_ok(uint32_t type);
/* Elements per block of the type (32 for q8_0 / q4_0, else 1): head widths
 * must be multiples of it. */
int kv_block(uint32_t type);
/* Bytes of n elements of the type (n a multiple of kv_block). */
size_t kv_bytes(uint32_t type, int64_t n);
/* Store x[n] into dst in the cache type. */
void kv_store(uint32_t type, const float *x, int64_t n, void *dst);
/* Decode n stored elements to float. */
void kv_load(uint32_t type, const void *src, int64_t n, float *dst);
/* The query q[n] in the form keys of `type` are dotted with; qbuf holds
 * kv_query_bytes(type, n) bytes. F32: a copy. */
size_t kv_query_bytes(uint32_t type, int64_t n);
void kv_query(uint32_t type, const float *q, int64_t n, void *qbuf);
/* Score of a prepared query with a stored key row of n elements. */
float kv_dot(uint32_t type, const void *qbuf, const void *krow, int64_t n);
/* x[n] (n <= 1024) replaced by its value stored in the type and read back:
 * rows kept in float that llama.cpp keeps in the cache type (DSA indexer keys). */
void kv_round(uint32_t type, float *x, int64_t n);
/* A probability as it multiplies a value row of the type. */
float kv_weight(uint32_t type, float p);

/* ===== The cache's memory: paid for as it is used =====
 * A session's KV rows live in one reservation of address space (anonymous
 * mmap, MAP_NORESERVE) sized for the whole context; the kernel backs a page
 * when a row in it is first written, so a 1M-position context costs what the
 * positions actually evaluated fill (rows of every layer are laid out by
 * position, each layer's buffer from its own page boundary). Truncation keeps
 * the pages: the next positions reuse them. */
typedef struct kv_arena {
    uint8_t *base; /* the reservation, page aligned */
    size_t cap;    /* bytes reserved */
    size_t used;   /* bytes handed out (each buffer rounded up to a page) */
} kv_arena;

/* Reserve cap bytes. 0, or -1 (no address space). */
int kv_arena_init(kv_arena *a, size_t cap);
/* A zeroed buffer of `bytes` from the reservation, page aligned; NULL when
 * the reservation is exhausted. */
void *kv_arena_take(kv_arena *a, size_t bytes);
/* Bytes of the reservation backed by memory now (pages touched). */
size_t kv_arena_resident(const kv_arena *a);
void kv_arena_free(kv_arena *a);

#endif
