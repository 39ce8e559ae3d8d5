/* matmul.h — y = W x for a batch of activation rows, W in any ggml type.
 *
 * Activations are first converted to the weight type's act_type (Q8_K, Q8_0,
 * ... see kernels/quant.h) exactly as llama.cpp's CPU backend does, then each
 * output element is one dot product of a weight row with one converted
 * activation row, by the one kernel of the weight type (qt_mm_dot_upto), so
 * an output row is the same bits whatever n_rows is: identical in a batch of
 * any size, a routed expert's group of rows or alone. Work is split across the
 * thread pool by weight rows, so the result is identical for any thread count. Nothing is allocated
 * per call: the conversion buffer belongs to the mm_ctx, sized at creation; a call with more rows
 * than it holds runs in passes of as many rows as it does (same bits). Where the weight type has
 * panel tiles (qt_ptile: Q4_K, Q8_0, widened Q4_0/Q5_0), the conversion also writes each group of
 * four rows as a panel in that buffer, and the tiles read it (same bits).
 */
#ifndef PT_NN_MATMUL_H
#define PT_NN_MATMUL_H

#include <stdint.h>

#include "runtime/threadpool.h"

/* A 2-D weight: n_out rows of n_in weights (ggml ne0 = n_in, ne1 = n_out). */
typedef struct mm_weight {
    uint32_t type;
    int64_t n_in, n_out;
    uint64_t row_bytes;
    const uint8_t *data;
} mm_weight;

typedef struct mm_ctx {
    tp_pool *pool;
    int max_isa;      /* highest kernel ISA level to use; -1: best available */
    uint8_t *act;     /* converted activations: up to max_rows x max_in */
    uint64_t act_cap; /* bytes */
} mm_ctx;

/* Allocate conversion space for up to max_rows activation rows of max_in values. */
int mm_ctx_init(mm_ctx *c, tp_pool *pool, int max_isa, int64_t max_rows, int64_t max_in);
void mm_ctx_free(mm_ctx *c);

/* y[t][o] = sum_i W[o][i] * x[t][i] for t < n_rows (any number: passes of
 * what the context holds); x rows are n_in apart, y rows are ldy apart
 * (ldy >= n_out). */
void mm_run(mm_ctx *c, const mm_weight *w, const float *x, int n_rows, float *y, int64_t ldy);

/* Several products at once: task i is y_i = W_i x_i for the same number of
 * rows, x_i's rows ldx apart, y_i's ldy apart. The activations of every task
 * are converted in one pool job and the products run in one more (instead of
 * two per task): for the many small per-head matmuls of an attention layer.
 * Each output is the bits mm_run gives it. */
enum { MM_MANY_MAX = 64 };
typedef struct mm_task {
    const mm_weight *w;
    const float *x;
    int64_t ldx;
    float *y;
    int64_t ldy;
} mm_task;
void mm_run_many(mm_ctx *c, const mm_task *tasks, int n, int n_rows);

/* Dequantise row r of W into out[n_in] (embedding lookup). */
void mm_get_row(const mm_weight *w, int64_t r, float *out);

#endif
