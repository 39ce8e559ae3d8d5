/* moe.h — the routed-expert executor shared by every MoE architecture.
 *
 * Given each row's chosen experts (selection order) and weights, it asks the
 * expert store for the distinct experts of the chunk (cached ones come first,
 * misses as their reads land), runs each expert once on all rows that chose
 * it, keeps every (row, choice) output in its own slot, and finally sums per
 * row in selection order — so the result never depends on which expert
 * arrived first, or on whether experts were streamed or resident. With several
 * threads, each thread takes the next expert the store delivers and runs it
 * whole by itself, then releases its slot for the next read (a call with one
 * expert runs it with threaded matmuls).
 *
 * The architecture supplies the expert computation (SwiGLU, GeGLU on a fused
 * gate_up, a per-expert output scale, ...) and optionally work to overlap with
 * the first reads (the shared expert, router lookahead).
 */
#ifndef PT_NN_MOE_H
#define PT_NN_MOE_H

#include <stdint.h>

#include "common.h"
#include "nn/matmul.h"
#include "runtime/experts.h"
#include "runtime/threadpool.h"

/* One thread's scratch for running whole experts by itself (moe_run's
 * parallel path): a matmul context without a pool, and FFN scratch of `rows`
 * rows (g, u: 2 * max_in floats a row). */
typedef struct moe_worker {
    mm_ctx mm;
    float *g, *u;
    int rows;
    pt_err err; /* where an expert run by this thread reports */
} moe_worker;

/* Compute expert e of `layer` on x[n][n_embd] in place (inputs in, outputs
 * out); mats[] are its weight slices from the store. w NULL: with the
 * architecture's own scratch and threaded matmuls; else on the calling thread
 * alone with w's scratch (the same bits: no output depends on the thread
 * count). 0, or -1 with err. */
typedef int (*moe_expert_fn)(void *arch, int layer, int e, const uint8_t *const mats[3], float *x,
                             int n, moe_worker *w, pt_err *err);

/* Work to overlap with the layer's first reads. 0, or -1 with err. */
typedef int (*moe_overlap_fn)(void *arch, int layer, int T, pt_err *err);

/* Scratch the caller allocates once (B = rows per chunk, K = experts per row). */
typedef struct moe_scratch {
    int *uniq;          /* [n_expert] the call's distinct experts */
    uint8_t *seen;      /* [n_expert], all zero between calls */
    float *yk;          /* [B][K][n_embd] per-(row, choice) inputs, then outputs */
    int slots;          /* B * K: the most (row, choice) slots a call may have */
    int *slot_pos;      /* [slots] where slot t * K + k is in yk */
    int *first, *count; /* [n_expert + 1] an expert's slots in yk */
    tp_pool *pool;
    moe_worker *workers; /* [tp_size(pool)], NULL with one thread: experts one at a time */
} moe_scratch;

/* Allocate / free a scratch for n_expert experts, B rows, K choices per row,
 * n_embd-wide rows; with a pool of several threads also the parallel path's
 * (FFN scratch of MOE_PAR_ROWS * K rows per thread: an expert with more rows
 * runs in tiles of that many; matmul inputs up to max_in wide, kernels up to
 * max_isa). 0, or -1 (out of memory; free it all the same). */
enum { MOE_PAR_ROWS = 4 };
int moe_scratch_init(moe_scratch *s, int n_expert, int B, int K, int n_embd, tp_pool *pool,
                     int64_t max_in, int max_isa);
void moe_scratch_free(moe_scratch *s);

/* Append to uniq[*n] each of ids[m] that seen[] does not mark yet, marking it;
 * moe_unmark clears the marks of uniq[n] again (seen is all zero between uses). */
void moe_mark(const int *ids, int m, uint8_t *seen, int *uniq, int *n);
void moe_unmark(uint8_t *seen, const int *uniq, int n);

typedef struct moe_call {
    xs_store *xs;
    int layer, T, K, n_embd;
    const int *topk;   /* [T][K] chosen experts, selection order */
    const float *topw; /* [T][K] their weights */
    const float *x;    /* [T][n_embd] expert input */
    float *out;        /* [T][n_embd] sum over choices of weight * output */
    moe_expert_fn expert;
    moe_overlap_fn overlap; /* or NULL */
    void *arch;             /* first argument of expert() */
    void *overlap_arg;      /* first argument of overlap() */
} moe_call;

int moe_run(const moe_call *c, moe_scratch *s, pt_err *err);

#endif
