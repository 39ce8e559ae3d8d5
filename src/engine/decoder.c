/* decoder.c — the chunk loop, positions, truncation and the routed-expert
 * step shared by every model family (see decoder.h, model/family.h).
 *
 * Order of operations mirrors llama.cpp's graphs where float rounding could
 * show: embeddings are scaled after the lookup, the final norm multiplies by
 * its gain after the reciprocal square root, the soft-cap is tanh(l / c) * c.
 * Every buffer is allocated in dec_new; the token loop allocates nothing.
 */
#include "engine/decoder.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "nn/ops.h"
#include "os/os.h"

struct dec {
    fam_ctx c; /* first: the family's fam_ctx * is this decoder */
    const fam_ops *ops;
    const void *model;
    fam_desc d;
    void *st;        /* the family's state */
    kv_arena kv;     /* the KV cache's reservation (c.kv points here) */
    int n_past;      /* positions cached */
    int64_t ring_lo; /* lowest position whose sliding-window keys the rings still hold */
    int prefetch;    /* router lookahead on */
    int out_rows;    /* the chunk in progress: its last rows the last layer runs whole */
    /* routing, B = max_batch rows, X = n_expert, K = n_expert_used */
    float *router;        /* [B][X] router logits (routing may overwrite them) */
    int *topk;            /* [B][K] chosen experts in selection order */
    float *topw;          /* [B][K] their weights */
    float *route_scratch; /* [2 X] */
    float *pf_logits;     /* [B][X] next layer's router logits */
    int *pf_topk;         /* [K] */
    float *pf_topw;       /* [K] */
    int *pf_uniq;         /* [X] distinct experts the lookahead predicts */
    moe_scratch ms;       /* the routed-expert executor's scratch */
    uint8_t *routed;      /* [n_layer][X] experts requested since dec_routed_reset */
    int *n_routed;        /* [n_layer] how many of them per layer */
    /* the MoE step in progress: what its overlap runs after the lookahead */
    moe_overlap_fn extra;
    void *extra_st;
    dec_progress_fn progress; /* dec_set_progress's, or NULL */
    void *progress_ud;
};

int64_t dec_ring(const fam_desc *d, int n_ctx, int tile) {
    /* a tile's first query needs window-1 older keys, its last writes T-1 newer */
    int64_t ring = d->window > 0 ? (int64_t)d->window + tile - 1 : n_ctx;
    return ring < n_ctx ? ring : n_ctx;
}

uint64_t dec_row_bytes(const fam_desc *d) {
    const uint64_t E = (uint64_t)d->n_embd, X = (uint64_t)(d->n_expert > 0 ? d->n_expert : 1),
                   K = (uint64_t)(d->n_expert_used > 0 ? d->n_expert_used : 1);
    /* x, xn; router and lookahead logits; topk, topw; moe rows, xg, yk */
    const uint64_t floats = 2 * E + 2 * X + 2 * K + 1 + E + K * E;
    return 4 * (floats + (uint64_t)(d->row_floats > 0 ? d->row_floats : 0));
}

void dec_routed_reset(dec *x) {
    const int X = x->d.n_expert > 0 ? x->d.n_expert : 1;
    memset(x->routed, 0, (size_t)x->d.n_layer * (size_t)X);
    memset(x->n_routed, 0, (size_t)x->d.n_layer * sizeof(int));
}

const int *dec_routed_counts(const dec *x) {
    return x->n_routed;
}

/* ===== The routed-expert step ===== */

/* Router lookahead: the next MoE layer's router on the rows the family says it
 * would read predicts that layer's experts; their reads start now and overlap
 * this layer's compute. Only the cache is affected, never the arithmetic. */
static int lookahead(dec *x, int layer, int T, pt_err *err) {
    const int next = layer + 1, X = x->d.n_expert, K = x->d.n_expert_used;
    if (next >= x->d.n_layer || !x->ops->lookahead_input) return 0;
    const mm_weight *rw = x->ops->router(x->model, next);
    if (!rw) return 0;
    /* the last layer routes only the rows it runs whole */
    const int skip = next == x->d.n_layer - 1 ? T - x->out_rows : 0, R = T - skip;
    if (R <= 0) return 0;
    const float *in = x->ops->lookahead_input(x->st, next, T) + (size_t)skip * x->d.n_embd;
    mm_run(&x->c.mm, rw, in, R, x->pf_logits, X);
    int n = 0;
    for (int t = 0; t < R; t++) {
        x->ops->route(x->model, next, x->pf_logits + (size_t)t * X, x->pf_topk, x->pf_topw,
                      x->route_scratch);
        moe_mark(x->pf_topk, K, x->ms.seen, x->pf_uniq, &n);
    }
    moe_unmark(x->ms.seen, x->pf_uniq, n);
    return xs_prefetch(x->c.xs, next, x->pf_uniq, n, err);
}

/* While the layer's first expert reads are in flight: the lookahead, then the
 * family's own overlapping work. */
static int overlap(void *arg, int layer, int T, pt_err *err) {
    dec *x = arg;
    if (x->prefetch && lookahead(x, layer, T, err)) return -1;
    return x->extra ? x->extra(x->extra_st, layer, T, err) : 0;
}

static int moe_step(fam_ctx *c, int layer, int T, const float *router_in, const float *expert_in,
                    float *out, moe_expert_fn expert, moe_overlap_fn extra, void *st, pt_err *err) {
    dec *x = (dec *)c;
    const int X = x->d.n_expert, K = x->d.n_expert_used;
    mm_run(&c->mm, x->ops->router(x->model, layer), router_in, T, x->router, X);
    for (int t = 0; t < T; t++)
        x->ops->route(x->model, layer, x->router + (size_t)t * X, x->topk + (size_t)t * K,
                      x->topw + (size_t)t * K, x->route_scratch);
    if (layer < x->d.n_layer) /* the trunk's (not the MTP head's) distinct experts */
        for (int i = 0; i < T * K; i++) {
            uint8_t *r = x->routed + (size_t)layer * X + x->topk[i];
            if (!*r) x->n_routed[layer]++;
            *r = 1;
        }
    x->extra = extra;
    x->extra_st = st;
    const moe_call mc = {.xs = c->xs,
                         .layer = layer,
                         .T = T,
                         .K = K,
                         .n_embd = x->d.n_embd,
                         .topk = x->topk,
                         .topw = x->topw,
                         .x = expert_in,
                         .out = out,
                         .expert = expert,
                         .overlap = x->prefetch || extra ? overlap : NULL,
                         .arch = st,
                         .overlap_arg = x};
    return moe_run(&mc, &x->ms, err);
}

/* ===== Life cycle ===== */

dec *dec_new(const fam_ops *ops, const void *model, const fam_desc *d, const dec_params *p,
             pt_err *err) {
    if (p->n_ctx < 1 || p->max_batch < 1) {
        pt_errf(err, "context size and batch must be positive");
        return NULL;
    }
    if (p->tile < 1 || p->tile > p->max_batch) {
        pt_errf(err, "tile of %d rows: expected 1 to the batch (%d)", p->tile, p->max_batch);
        return NULL;
    }
    dec *x = calloc(1, sizeof *x);
    if (!x) {
        pt_errf(err, "out of memory");
        return NULL;
    }
    x->ops = ops;
    x->model = model;
    x->d = *d;
    x->prefetch = p->prefetch;
    fam_ctx *c = &x->c;
    c->pool = p->pool;
    c->xs = p->xs;
    c->n_ctx = p->n_ctx;
    c->max_batch = p->max_batch;
    c->tile = p->tile;
    c->ring = dec_ring(d, p->n_ctx, p->tile);
    c->moe = moe_step;
    c->k_type = p->k_type;
    c->v_type = p->v_type;
    c->kv = &x->kv;
    const size_t B = (size_t)p->max_batch, E = (size_t)d->n_embd;
    const size_t X = (size_t)(d->n_expert > 0 ? d->n_expert : 1),
                 K = (size_t)(d->n_expert_used > 0 ? d->n_expert_used : 1);
    int fail = 0;
    c->x = pt_falloc(B * E, &fail);
    c->xn = pt_falloc(B * E, &fail);
    x->router = pt_falloc(B * X, &fail);
    x->topw = pt_falloc(B * K, &fail);
    x->route_scratch = pt_falloc(2 * X, &fail);
    x->pf_logits = pt_falloc(B * X, &fail);
    x->pf_topw = pt_falloc(K, &fail);
    x->topk = calloc(B * K, sizeof(int));
    x->pf_topk = calloc(K, sizeof(int));
    x->pf_uniq = calloc(X + 1, sizeof(int));
    x->routed = calloc((size_t)(d->n_layer > 0 ? d->n_layer : 1) * X, 1);
    x->n_routed = calloc((size_t)(d->n_layer > 0 ? d->n_layer : 1), sizeof(int));
    if (!x->topk || !x->pf_topk || !x->pf_uniq || !x->routed || !x->n_routed) fail = 1;
    if (moe_scratch_init(&x->ms, (int)X, p->max_batch, (int)K, d->n_embd, p->pool, d->max_in,
                         p->max_isa))
        fail = 1;
    if (!fail && mm_ctx_init(&c->mm, p->pool, p->max_isa, (int64_t)p->tile, d->max_in)) fail = 1;
    /* the whole context's KV reserved, backed as positions are written; a
     * page of slack for every buffer a state takes (each starts on a page) */
    uint64_t per_pos = 0, fixed = 0;
    ops->kv_size(model, c->ring, p->k_type, p->v_type, &per_pos, &fixed);
    const uint64_t slack = (uint64_t)(4 * (d->n_layer > 0 ? d->n_layer : 1) + 16) * 65536;
    const size_t cap = (size_t)(per_pos * (uint64_t)p->n_ctx + fixed + slack);
    if (!fail && kv_arena_init(&x->kv, cap)) fail = 1;
    /* beyond RAM: the per-position buffers in a file of the same size */
    const int spill = p->kv_hot > 0 && p->kv_hot < p->n_ctx;
    int spill_failed = 0;
    if (!fail && spill &&
        kv_arena_spill(&x->kv, cap, p->spill_dir ? p->spill_dir : "/var/tmp", p->kv_hot, p->n_ctx,
                       err))
        spill_failed = 1;
    if (!fail && !spill_failed) x->st = ops->state_new(model, c, err);
    if (fail || spill_failed || !x->st) {
        if (fail)
            pt_errf(err, "out of memory allocating the KV cache and scratch for %d positions",
                    p->n_ctx);
        dec_free(x);
        return NULL;
    }
    return x;
}

void dec_free(dec *x) {
    if (!x) return;
    if (x->st) x->ops->state_free(x->st);
    float *bufs[] = {x->c.x,           x->c.xn,      x->router, x->topw,
                     x->route_scratch, x->pf_logits, x->pf_topw};
    for (size_t i = 0; i < PT_ARRAY_LEN(bufs); i++)
        pt_scratch_free(bufs[i]);
    free(x->topk);
    free(x->pf_topk);
    free(x->pf_uniq);
    free(x->routed);
    free(x->n_routed);
    moe_scratch_free(&x->ms);
    mm_ctx_free(&x->c.mm);
    kv_arena_free(&x->kv);
    free(x);
}

uint64_t dec_kv_resident(const dec *x) {
    return kv_arena_resident(&x->kv);
}
uint64_t dec_kv_reserved(const dec *x) {
    return x->kv.cap;
}
uint64_t dec_kv_disk(const dec *x) {
    return kv_arena_disk(&x->kv);
}
int dec_kv_hot(const dec *x) {
    return kv_arena_spills(&x->kv) ? (int)(x->kv.hot + x->kv.blk - 1) : 0;
}
void dec_kv_cache(const dec *x, pt_kv_cache_stats *st) {
    size_t c = 0;
    const kv_arena *a = &x->kv;
    *st = (pt_kv_cache_stats){.bytes = (uint64_t)kv_arena_cache_pages(a, &c) * os_page_size(),
                              .cap_bytes = (uint64_t)c * os_page_size(),
                              .selected = a->sel_pages,
                              .hits = a->sel_hits,
                              .gather_cap = a->dfd >= 0 ? a->gcap : 0,
                              .gathers = a->g_steps,
                              .gather_rows = a->g_rows,
                              .gather_reads = a->g_reads,
                              .gather_bytes = a->g_bytes,
                              .gather_kept = a->g_hits};
}
int dec_kv_reserve(dec *x, int n, pt_err *err) {
    return kv_arena_reserve(&x->kv, n, err);
}

void dec_set_progress(dec *x, dec_progress_fn fn, void *ud) {
    x->progress = fn;
    x->progress_ud = ud;
}

int dec_n_past(const dec *x) {
    return x->n_past;
}

int dec_truncate(dec *x, int n) {
    if (n < 0) n = 0;
    if (n >= x->n_past && n > 0) return x->n_past;
    /* the next query (position n) needs the sliding-window keys from n-window+1 on */
    int64_t need = x->d.window > 0 ? (int64_t)n - x->d.window + 1 : 0;
    if (need < 0) need = 0;
    if (need < x->ring_lo || n == 0) {
        n = 0;
        x->ring_lo = 0;
    }
    x->n_past = n;
    kv_arena_truncate(&x->kv, n);
    if (x->ops->truncated) x->ops->truncated(x->st, n);
    return n;
}

/* ===== The state's rows, for the prefix cache ===== */

int dec_kv_bufs(dec *x, fam_kv_buf *out, int max) {
    return x->ops->kv_bufs ? x->ops->kv_bufs(x->st, out, max) : 0;
}
int dec_window(const dec *x) {
    return x->d.window;
}
int64_t dec_ring_slots(const dec *x) {
    return x->c.ring;
}
int64_t dec_ring_lo(const dec *x) {
    return x->ring_lo;
}

void dec_set_restored(dec *x, int n, int64_t ring_lo, int n_mtp) {
    x->n_past = n;
    x->ring_lo = ring_lo;
    kv_arena_truncate(&x->kv, 0); /* the restore wrote rows from position 0 */
    /* a failed write back keeps the rows in the page cache: the next chunk retries it */
    pt_err ignored;
    kv_arena_settle(&x->kv, n, &ignored);
    if (x->ops->mtp_restored && x->d.has_mtp) x->ops->mtp_restored(x->st, n_mtp);
}

/* ===== Evaluation ===== */

static int check_tokens(const dec *x, const int32_t *tokens, int n, int past, pt_err *err) {
    if (n < 0) return pt_errf(err, "negative token count");
    if ((int64_t)past + n > x->c.n_ctx)
        return pt_errf(err, "context full: %d positions cached + %d new exceed the context size %d",
                       past, n, x->c.n_ctx);
    for (int i = 0; i < n; i++)
        if (tokens[i] < 0 || tokens[i] >= x->d.n_vocab)
            return pt_errf(err, "token id %d at index %d is outside the vocabulary (0..%d)",
                           tokens[i], i, x->d.n_vocab - 1);
    return 0;
}

/* cap * tanh(v / cap) over v[0 .. n), in parts across the pool (each value on its own: the
 * same bits whoever computes it; a 262k vocabulary is milliseconds of tanhf a token) */
typedef struct softcap_job {
    float *v;
    long n;
    float cap;
} softcap_job;

static void softcap_worker(void *arg, int ith, int nth) {
    const softcap_job *j = arg;
    long lo, hi;
    tp_range(j->n, ith, nth, &lo, &hi);
    const float inv = 1.0f / j->cap;
    for (long i = lo; i < hi; i++)
        j->v[i] = tanhf(j->v[i] * inv) * j->cap;
}

/* logits[T][n_vocab] of the normed rows xn, soft-capped when the model says so. */
static void output(dec *x, const float *xn, int T, float *logits) {
    const fam_desc *d = &x->d;
    mm_run(&x->c.mm, &d->output, xn, T, logits, d->n_vocab);
    if (d->softcap > 0) {
        softcap_job j = {logits, (long)T * d->n_vocab, d->softcap};
        tp_run(x->c.pool, softcap_worker, &j);
    }
}

/* The last layer when only the chunk's last n_out rows' output is read (n_out < T):
 * the rows before them only store what later positions read (fam_ops.block_kv),
 * then the whole block runs on those rows, moved to the front of c->x. Every row
 * is computed as in a block of its own, so the bits are the whole block's. */
static int last_block(dec *x, int layer, int T, int pos0, int n_out, pt_err *err) {
    const int nk = T - n_out;
    const size_t E = (size_t)x->d.n_embd;
    if (x->ops->block_kv(x->st, layer, nk, pos0, err)) return -1;
    if (!n_out) return 0;
    memmove(x->c.x, x->c.x + (size_t)nk * E, (size_t)n_out * E * sizeof(float));
    return x->ops->block(x->st, layer, n_out, pos0 + nk, err);
}

int dec_eval(dec *x, const int32_t *tokens, int n, float *logits, int all_rows, float *hidden,
             pt_err *err) {
    const fam_desc *d = &x->d;
    const int E = d->n_embd;
    fam_ctx *c = &x->c;
    if (check_tokens(x, tokens, n, x->n_past, err)) return -1;
    for (int c0 = 0; c0 < n; c0 += c->max_batch) {
        const int T = n - c0 < c->max_batch ? n - c0 : c->max_batch;
        const int pos0 = x->n_past;
        /* spilled cache: file blocks for the chunk's rows, the older rows read ahead */
        if (kv_arena_reserve(&x->kv, (int64_t)pos0 + T, err)) return -1;
        kv_arena_prefetch(&x->kv, pos0);
        for (int t = 0; t < T; t++) {
            float *row = c->x + (size_t)t * E;
            mm_get_row(&d->tok_embd, tokens[c0 + t], row);
            if (d->embd_scale != 1.0f)
                for (int i = 0; i < E; i++)
                    row[i] *= d->embd_scale;
        }
        /* rows whose output the last layer must give: every row for all their logits
         * or states, the prompt's last for its logits, else none */
        const int last_chunk = c0 + T == n;
        const int n_out = all_rows || hidden || !x->ops->block_kv ? T
                          : logits && last_chunk                  ? 1
                                                                  : 0;
        x->out_rows = n_out;
        for (int l = 0; l < d->n_layer; l++) {
            if (l == d->n_layer - 1 && n_out < T ? last_block(x, l, T, pos0, n_out, err)
                                                 : x->ops->block(x->st, l, T, pos0, err))
                return -1;
            if (x->progress)
                x->progress(x->progress_ud, (int64_t)c0 * d->n_layer + (int64_t)(l + 1) * T,
                            (int64_t)n * d->n_layer);
        }
        for (int t = 0; t < n_out; t++)
            nn_rms_norm(c->x + (size_t)t * E, d->output_norm, d->rms_eps, E, c->xn + (size_t)t * E);
        if (hidden) memcpy(hidden + (size_t)c0 * E, c->xn, (size_t)T * E * sizeof(float));
        if (logits && all_rows)
            output(x, c->xn, T, logits + (size_t)c0 * d->n_vocab);
        else if (logits && last_chunk)
            output(x, c->xn + (size_t)(n_out - 1) * E, 1, logits);
        x->n_past += T;
        /* positions older than n_past - ring have left the sliding-window rings */
        if ((int64_t)x->n_past - c->ring > x->ring_lo) x->ring_lo = (int64_t)x->n_past - c->ring;
        /* spilled cache: positions older than the RAM share's to the file, out of RAM */
        if (kv_arena_settle(&x->kv, x->n_past, err)) return -1;
    }
    return 0;
}

int dec_mtp(dec *x, const int32_t *tokens, const float *hidden_prev, int n, float *logits,
            int last_only, float *hidden_out, pt_err *err) {
    if (!x->ops->mtp || !x->d.has_mtp) return pt_errf(err, "this model has no NextN/MTP block");
    if (check_tokens(x, tokens, n, 0, err)) return -1;
    return x->ops->mtp(x->st, tokens, hidden_prev, n, logits, last_only, hidden_out, err);
}

void dec_mtp_hold(dec *x, int n) {
    if (x->ops->mtp_restored && x->d.has_mtp) x->ops->mtp_restored(x->st, n);
}

int dec_mtp_keep(dec *x, int n) {
    if (!x->ops->mtp_keep || !x->d.has_mtp) return 0;
    return x->ops->mtp_keep(x->st, n < 0 ? 0 : n);
}
