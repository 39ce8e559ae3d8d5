/* moe.c — the routed-expert executor (see moe.h). */
#include "moe.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

int moe_scratch_init(moe_scratch *s, int n_expert, int B, int K, int n_embd, tp_pool *pool,
                     int64_t max_in, int max_isa) {
    int fail = 0;
    memset(s, 0, sizeof *s);
    s->uniq = calloc((size_t)n_expert + 1, sizeof(int)); /* + 1: no zero-size calloc */
    s->seen = calloc((size_t)n_expert + 1, 1);
    s->yk = pt_falloc((size_t)B * (size_t)K * (size_t)n_embd, &fail);
    s->slot_pos = calloc((size_t)B * (size_t)K, sizeof(int));
    s->first = calloc((size_t)n_expert + 1, sizeof(int));
    s->count = calloc((size_t)n_expert + 1, sizeof(int));
    if (fail || !s->uniq || !s->seen || !s->slot_pos || !s->first || !s->count) return -1;
    s->slots = B * K;
    s->pool = pool;
    const int nt = tp_size(pool), rows = MOE_PAR_ROWS * K;
    if (nt < 2) return 0;
    s->workers = calloc((size_t)nt, sizeof *s->workers);
    if (!s->workers) return -1;
    for (int i = 0; i < nt; i++) {
        moe_worker *w = &s->workers[i];
        w->rows = rows;
        w->g = pt_falloc((size_t)rows * 2 * (size_t)max_in, &fail);
        w->u = pt_falloc((size_t)rows * 2 * (size_t)max_in, &fail);
        if (fail || mm_ctx_init(&w->mm, NULL, max_isa, rows, max_in)) return -1;
    }
    return 0;
}

void moe_scratch_free(moe_scratch *s) {
    free(s->uniq);
    free(s->seen);
    pt_scratch_free(s->yk);
    for (int i = 0; s->workers && i < tp_size(s->pool); i++) {
        pt_scratch_free(s->workers[i].g);
        pt_scratch_free(s->workers[i].u);
        mm_ctx_free(&s->workers[i].mm);
    }
    free(s->workers);
    free(s->slot_pos);
    free(s->first);
    free(s->count);
    memset(s, 0, sizeof *s);
}

void moe_mark(const int *ids, int m, uint8_t *seen, int *uniq, int *n) {
    for (int i = 0; i < m; i++)
        if (!seen[ids[i]]) {
            seen[ids[i]] = 1;
            uniq[(*n)++] = ids[i];
        }
}

void moe_unmark(uint8_t *seen, const int *uniq, int n) {
    for (int i = 0; i < n; i++)
        seen[uniq[i]] = 0;
}

/* Several threads: each part takes the next expert the store delivers, runs
 * it alone on its rows in yk, releases it, and takes the next, so a slot's
 * next read starts as soon as its expert is done and no part waits for
 * another's expert to finish (the store has no lock of its own: every call
 * to it is made under mu). A part that finds every expert still to come
 * waiting for a slot another part holds sleeps until a release. */
typedef struct pull_job {
    const moe_call *c;
    moe_scratch *s;
    pthread_mutex_t mu;
    pthread_cond_t released;
    int failed; /* 1 + the part whose err says what failed first, or 0 */
} pull_job;

static void pull_worker(void *arg, int ith, int nth) {
    pull_job *j = arg;
    (void)nth;
    const moe_call *c = j->c;
    moe_scratch *s = j->s;
    moe_worker *w = &s->workers[ith];
    pthread_mutex_lock(&j->mu);
    while (!j->failed) {
        int e;
        const uint8_t *mats[3];
        const int rc = xs_take(c->xs, c->layer, &e, mats, &w->err);
        if (rc == XS_AGAIN) {
            pthread_cond_wait(&j->released, &j->mu);
            continue;
        }
        if (rc < 0) j->failed = ith + 1;
        if (rc <= 0) break;
        pthread_mutex_unlock(&j->mu);
        const int bad = c->expert(c->arch, c->layer, e, mats,
                                  s->yk + (size_t)s->first[e] * c->n_embd, s->count[e], w, &w->err);
        pthread_mutex_lock(&j->mu);
        xs_release(c->xs, c->layer, e);
        if (bad && !j->failed) j->failed = ith + 1;
        pthread_cond_broadcast(&j->released);
    }
    pthread_cond_broadcast(&j->released); /* a sleeping part sees the failure */
    pthread_mutex_unlock(&j->mu);
}

/* The call's experts as the store delivers them: one thread, or a single
 * expert, with the architecture's threaded matmuls; else whole experts per
 * thread (pull_worker). 0, or -1 with err. */
static int run_experts(const moe_call *c, moe_scratch *s, int n_uniq, pt_err *err) {
    if (!s->workers || n_uniq == 1) {
        int e, rc;
        const uint8_t *mats[3];
        while ((rc = xs_next(c->xs, c->layer, &e, mats, err)) > 0)
            if (c->expert(c->arch, c->layer, e, mats, s->yk + (size_t)s->first[e] * c->n_embd,
                          s->count[e], NULL, err))
                return -1;
        return rc;
    }
    pull_job j = {.c = c, .s = s};
    pthread_mutex_init(&j.mu, NULL);
    pthread_cond_init(&j.released, NULL);
    tp_run(s->pool, pull_worker, &j);
    pthread_cond_destroy(&j.released);
    pthread_mutex_destroy(&j.mu);
    if (j.failed) {
        *err = s->workers[j.failed - 1].err;
        return -1;
    }
    return 0;
}

/* Rows of a prompt block that the copies into yk and the weighted sum split
 * across the pool (each row's bytes are the same whoever copies or sums it);
 * below that, the calling thread alone. */
enum { MOE_SPLIT_ROWS = 32 };

/* The input rows of slots [j0, j1) at their places in yk (slot_pos). */
static void gather(const moe_call *c, const moe_scratch *s, long j0, long j1) {
    const int K = c->K, E = c->n_embd;
    for (long j = j0; j < j1; j++)
        memcpy(s->yk + (size_t)s->slot_pos[j] * E, c->x + (size_t)(j / K) * E,
               (size_t)E * sizeof(float));
}

/* out[t] = sum over k of topw * the output of slot (t, k), at yk + pos(t, k),
 * for rows [t0, t1) */
static void weigh(const moe_call *c, const float *yk, const int *pos, long t0, long t1) {
    const int K = c->K, E = c->n_embd;
    for (long t = t0; t < t1; t++) {
        float *o = c->out + (size_t)t * E;
        for (int k = 0; k < K; k++) {
            const float w = c->topw[t * K + k];
            const float *y = yk + (size_t)pos[t * K + k] * E;
            if (k == 0)
                for (int i = 0; i < E; i++)
                    o[i] = y[i] * w;
            else
                for (int i = 0; i < E; i++)
                    o[i] += y[i] * w;
        }
    }
}

typedef struct rows_job {
    const moe_call *c;
    const moe_scratch *s;
} rows_job;

static void gather_worker(void *arg, int ith, int nth) {
    const rows_job *j = arg;
    long lo, hi;
    tp_range((long)j->c->T * j->c->K, ith, nth, &lo, &hi);
    gather(j->c, j->s, lo, hi);
}

static void weigh_worker(void *arg, int ith, int nth) {
    const rows_job *j = arg;
    long lo, hi;
    tp_range(j->c->T, ith, nth, &lo, &hi);
    weigh(j->c, j->s->yk, j->s->slot_pos, lo, hi);
}

int moe_run(const moe_call *c, moe_scratch *s, pt_err *err) {
    const int T = c->T, K = c->K;
    PT_ASSERT(T * K <= s->slots);
    int n_uniq = 0;
    moe_mark(c->topk, T * K, s->seen, s->uniq, &n_uniq);
    moe_unmark(s->seen, s->uniq, n_uniq);
    if (xs_begin(c->xs, c->layer, s->uniq, n_uniq, err)) return -1;
    if (c->overlap && c->overlap(c->overlap_arg, c->layer, T, err)) return -1;
    /* the slots grouped by expert in yk, each expert's rows in row order: count
     * each expert's slots, place the groups in uniq's order, then fill them */
    for (int i = 0; i < n_uniq; i++)
        s->count[s->uniq[i]] = 0;
    for (int j = 0; j < T * K; j++)
        s->count[c->topk[j]]++;
    for (int i = 0, at = 0; i < n_uniq; i++) {
        const int x = s->uniq[i];
        s->first[x] = at;
        at += s->count[x];
        s->count[x] = 0;
    }
    for (int j = 0; j < T * K; j++) {
        const int x = c->topk[j];
        s->slot_pos[j] = s->first[x] + s->count[x]++;
    }
    const rows_job rj = {c, s};
    const int split = s->workers && T >= MOE_SPLIT_ROWS;
    if (split)
        tp_run(s->pool, gather_worker, (void *)&rj);
    else
        gather(c, s, 0, (long)T * K);
    if (run_experts(c, s, n_uniq, err)) return -1;
    if (split)
        tp_run(s->pool, weigh_worker, (void *)&rj);
    else
        weigh(c, s->yk, s->slot_pos, 0, T);
    return 0;
}
