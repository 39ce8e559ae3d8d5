/* threadpool.c — parallel-for over a fixed set of parked workers (see threadpool.h).
 *
 * A job is published by bumping a generation counter under the mutex; workers
 * wake, run their slice, and the last one to finish signals the caller. Jobs
 * are short (one matmul), so workers spin briefly before sleeping to avoid a
 * futex round trip per job on the decode path.
 */
#include "threadpool.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

struct tp_pool {
    int n;                 /* total threads including the caller */
    pthread_t *threads;    /* [n-1] */
    pthread_mutex_t mu;
    pthread_cond_t wake, done;
    tp_fn fn;
    void *ctx;
    atomic_uint gen;       /* job generation */
    atomic_int pending;    /* workers still running the current job */
    int stop;
};

typedef struct {
    tp_pool *p;
    int ith;
} worker_arg;

static void *worker(void *arg) {
    worker_arg *wa = arg;
    tp_pool *p = wa->p;
    int ith = wa->ith;
    free(wa);
    unsigned seen = 0;
    for (;;) {
        /* spin a little: consecutive matmuls arrive microseconds apart */
        for (int spin = 0; spin < 20000 && atomic_load(&p->gen) == seen; spin++)
            __builtin_ia32_pause();
        pthread_mutex_lock(&p->mu);
        while (atomic_load(&p->gen) == seen && !p->stop) pthread_cond_wait(&p->wake, &p->mu);
        if (p->stop) {
            pthread_mutex_unlock(&p->mu);
            return NULL;
        }
        seen = atomic_load(&p->gen);
        tp_fn fn = p->fn;
        void *ctx = p->ctx;
        pthread_mutex_unlock(&p->mu);
        fn(ctx, ith, p->n);
        if (atomic_fetch_sub(&p->pending, 1) == 1) {
            pthread_mutex_lock(&p->mu);
            pthread_cond_signal(&p->done);
            pthread_mutex_unlock(&p->mu);
        }
    }
}

tp_pool *tp_new(int n_threads) {
    if (n_threads < 1) n_threads = 1;
    tp_pool *p = calloc(1, sizeof *p);
    if (!p) return NULL;
    p->n = n_threads;
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->wake, NULL);
    pthread_cond_init(&p->done, NULL);
    p->threads = calloc((size_t)n_threads, sizeof(pthread_t));
    if (!p->threads) {
        free(p);
        return NULL;
    }
    for (int i = 1; i < n_threads; i++) {
        worker_arg *wa = malloc(sizeof *wa);
        if (!wa) {
            p->n = i;
            break;
        }
        wa->p = p;
        wa->ith = i;
        if (pthread_create(&p->threads[i - 1], NULL, worker, wa) != 0) {
            free(wa);
            p->n = i; /* run with the threads we got */
            break;
        }
    }
    return p;
}

void tp_free(tp_pool *p) {
    if (!p) return;
    pthread_mutex_lock(&p->mu);
    p->stop = 1;
    pthread_cond_broadcast(&p->wake);
    pthread_mutex_unlock(&p->mu);
    for (int i = 1; i < p->n; i++) pthread_join(p->threads[i - 1], NULL);
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->wake);
    pthread_cond_destroy(&p->done);
    free(p->threads);
    free(p);
}

int tp_size(const tp_pool *p) { return p ? p->n : 1; }

void tp_run(tp_pool *p, tp_fn fn, void *ctx) {
    if (!p || p->n == 1) {
        fn(ctx, 0, 1);
        return;
    }
    pthread_mutex_lock(&p->mu);
    p->fn = fn;
    p->ctx = ctx;
    atomic_store(&p->pending, p->n - 1);
    atomic_fetch_add(&p->gen, 1);
    pthread_cond_broadcast(&p->wake);
    pthread_mutex_unlock(&p->mu);
    fn(ctx, 0, p->n);
    if (atomic_load(&p->pending) > 0) {
        for (int spin = 0; spin < 100000 && atomic_load(&p->pending) > 0; spin++)
            __builtin_ia32_pause();
        pthread_mutex_lock(&p->mu);
        while (atomic_load(&p->pending) > 0) pthread_cond_wait(&p->done, &p->mu);
        pthread_mutex_unlock(&p->mu);
    }
}
