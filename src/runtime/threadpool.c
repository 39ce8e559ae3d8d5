/* threadpool.c — parallel-for over a fixed set of workers (see threadpool.h).
 *
 * A job has n parts (n = pool size). Parts are claimed, not assigned: the
 * caller and any awake worker take the next unclaimed part from one atomic
 * word holding (job generation << 32 | next part). A worker that is asleep or
 * descheduled — the machine is shared, another process may hold its core —
 * therefore costs nothing: the caller runs the parts nobody took. Results do
 * not depend on who runs a part, since fn(ctx, part, n) computes the same
 * outputs whoever calls it, and a part index is never run twice at once (so
 * per-part scratch indexed by it stays private).
 *
 * Claiming compares the generation, so a worker that wakes late can never take
 * a part of a newer job with an older job's function: its claim fails and it
 * re-reads the job. Workers spin briefly (consecutive matmuls arrive
 * microseconds apart) and then sleep on a condition variable.
 */
#include "threadpool.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>

/* Pause iterations before sleeping: about 0.4 ms on Zen 5 (a pause is ~20 ns). A decode
 * step's serial stretches between jobs (a layer's norms, rope and KV store, the sampler)
 * run 50-500 us; 4000 (~80 us) let the worker fall asleep in them about ten times a
 * token, and each wake (a futex call, then the wait for the woken thread) cost more than
 * the spin: gemma4-shaped decode 2376 -> 197 futex calls over 100 tokens. */
#define TP_SPIN 20000

struct tp_pool {
    int n;              /* threads including the caller = parts per job */
    pthread_t *threads; /* [n-1] */
    pthread_mutex_t mu;
    pthread_cond_t wake;
    /* The current job, written before `word` is published. Atomic (relaxed) because a late
     * worker may read them while tp_run writes the next job's: its claim then fails and it
     * never calls what it read, but a plain read would still be a data race. */
    _Atomic(tp_fn) fn;
    _Atomic(void *) ctx;
    _Atomic uint64_t word; /* generation << 32 | next unclaimed part */
    atomic_int done;       /* parts of the current job finished */
    atomic_int sleeping;   /* workers parked on `wake` (or about to be) */
    atomic_int stop;
};

static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

/* Claim and run parts of job `gen` until none is left or the job changed. */
static void run_parts(tp_pool *p, uint32_t gen) {
    for (;;) {
        uint64_t w = atomic_load_explicit(&p->word, memory_order_acquire);
        if ((uint32_t)(w >> 32) != gen) return;
        uint32_t part = (uint32_t)w;
        if ((int)part >= p->n) return;
        /* the job's fn/ctx are stable while it has unclaimed parts */
        tp_fn fn = atomic_load_explicit(&p->fn, memory_order_relaxed);
        void *ctx = atomic_load_explicit(&p->ctx, memory_order_relaxed);
        if (!atomic_compare_exchange_weak_explicit(&p->word, &w, w + 1, memory_order_acq_rel,
                                                   memory_order_relaxed))
            continue;
        fn(ctx, (int)part, p->n);
        atomic_fetch_add_explicit(&p->done, 1, memory_order_release);
    }
}

static void *worker(void *arg) {
    tp_pool *p = arg;
    uint32_t seen = 0;
    for (;;) {
        uint32_t gen = 0;
        int spin = 0;
        for (;;) {
            if (atomic_load_explicit(&p->stop, memory_order_relaxed)) return NULL;
            gen = (uint32_t)(atomic_load_explicit(&p->word, memory_order_acquire) >> 32);
            if (gen != seen) break;
            if (++spin < TP_SPIN) {
                cpu_relax();
                continue;
            }
            /* announce the sleep before re-checking the job word: tp_run stores the
             * word before reading `sleeping`, so one of the two sees the other */
            pthread_mutex_lock(&p->mu);
            atomic_fetch_add(&p->sleeping, 1);
            while ((uint32_t)(atomic_load(&p->word) >> 32) == seen && !atomic_load(&p->stop))
                pthread_cond_wait(&p->wake, &p->mu);
            atomic_fetch_sub(&p->sleeping, 1);
            pthread_mutex_unlock(&p->mu);
            spin = 0;
        }
        seen = gen;
        run_parts(p, gen);
    }
}

tp_pool *tp_new(int n_threads) {
    if (n_threads < 1) n_threads = 1;
    tp_pool *p = calloc(1, sizeof *p);
    if (!p) return NULL;
    p->n = n_threads;
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->wake, NULL);
    p->threads = calloc((size_t)n_threads, sizeof(pthread_t));
    if (!p->threads) {
        free(p);
        return NULL;
    }
    for (int i = 1; i < n_threads; i++) {
        if (pthread_create(&p->threads[i - 1], NULL, worker, p) != 0) {
            p->n = i; /* run with the threads we got */
            break;
        }
    }
    return p;
}

void tp_free(tp_pool *p) {
    if (!p) return;
    pthread_mutex_lock(&p->mu);
    atomic_store(&p->stop, 1);
    pthread_cond_broadcast(&p->wake);
    pthread_mutex_unlock(&p->mu);
    for (int i = 1; i < p->n; i++)
        pthread_join(p->threads[i - 1], NULL);
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->wake);
    free(p->threads);
    free(p);
}

int tp_size(const tp_pool *p) {
    return p ? p->n : 1;
}

void tp_run(tp_pool *p, tp_fn fn, void *ctx) {
    if (!p || p->n == 1) {
        fn(ctx, 0, 1);
        return;
    }
    const uint32_t gen = (uint32_t)(atomic_load(&p->word) >> 32) + 1;
    atomic_store_explicit(&p->fn, fn, memory_order_relaxed);
    atomic_store_explicit(&p->ctx, ctx, memory_order_relaxed);
    atomic_store_explicit(&p->done, 0, memory_order_relaxed);
    atomic_store(&p->word, (uint64_t)gen << 32);
    /* spinning workers see the word; only parked ones need the (syscall) wake */
    if (atomic_load(&p->sleeping)) {
        pthread_mutex_lock(&p->mu);
        pthread_cond_broadcast(&p->wake);
        pthread_mutex_unlock(&p->mu);
    }
    run_parts(p, gen);
    /* every part is claimed; wait for the ones still running elsewhere */
    for (int spin = 0; atomic_load_explicit(&p->done, memory_order_acquire) < p->n; spin++)
        if (spin < TP_SPIN)
            cpu_relax();
        else
            sched_yield();
}
