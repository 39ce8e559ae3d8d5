/* threadpool.h — a fixed set of worker threads running parallel-for loops.
 *
 * The engine splits every matrix multiplication by output rows across the
 * pool. Workers are created once at engine open and park between jobs; a job
 * is a function called as fn(ctx, part, n) once for each part in [0, n), n the
 * pool size. Parts are claimed dynamically by whichever threads are awake (the
 * caller included), so a descheduled worker does not hold a job up. fn must
 * compute the same outputs for a part whoever runs it (per-part scratch indexed
 * by `part` is private: a part never runs twice at once). Nothing is allocated
 * per job. Results do not depend on the number of threads: each output element
 * is computed entirely within one part.
 */
#ifndef PT_THREADPOOL_H
#define PT_THREADPOOL_H

typedef struct tp_pool tp_pool;
typedef void (*tp_fn)(void *ctx, int ith, int nth);

/* Create a pool of n_threads in total (the caller counts as one). NULL on failure. */
tp_pool *tp_new(int n_threads);
void tp_free(tp_pool *p);
int tp_size(const tp_pool *p);

/* Run fn(ctx, part, n) for every part in [0, n), n = tp_size(); returns when all are done. */
void tp_run(tp_pool *p, tp_fn fn, void *ctx);

/* Rows [*lo, *hi) of n that worker ith of nth should handle (contiguous, balanced). */
static inline void tp_range(long n, int ith, int nth, long *lo, long *hi) {
    long per = n / nth, extra = n % nth;
    *lo = ith * per + (ith < extra ? ith : extra);
    *hi = *lo + per + (ith < extra ? 1 : 0);
}

#endif
