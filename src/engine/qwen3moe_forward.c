/* qwen3moe_forward.c — forward pass of the Qwen3-MoE family: GQA attention
 * with per-head q/k RMS norms before NEOX rope, and a softmax-routed SwiGLU
 * MoE with renormalised top-k weights. See qwen3moe_forward.h for the state.
 *
 * Order of operations mirrors llama.cpp's graph where float rounding could
 * show: routed expert outputs are weighted and summed in selection order;
 * norms multiply by their gain after the reciprocal square root.
 * Every buffer is allocated in qwen3moe_state_new; the token loop allocates nothing.
 */
#include "qwen3moe_forward.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "nn/attn.h"
#include "nn/matmul.h"
#include "nn/moe.h"
#include "nn/ops.h"
#include "runtime/experts.h"

struct qwen3moe_state {
    const qwen3moe_model *m;
    tp_pool *pool;
    xs_store *xs;         /* where routed experts come from (shared with the engine) */
    mm_ctx mm;
    int n_ctx;      /* cache capacity in positions */
    int max_batch;  /* rows per chunk */
    int n_past;     /* positions cached */
    float **k, **v; /* [n_layer] -> [n_ctx][n_kv * head_dim]: normed roped keys, values */
    /* scratch, B = max_batch rows */
    float *x;      /* [B][n_embd] residual stream */
    float *xn;     /* [B][n_embd] normed input of a sub-block */
    float *out;    /* [B][n_embd] sub-block output */
    float *q;      /* [B][n_head * head_dim] */
    float *kx;     /* [B][n_kv * head_dim] new keys */
    float *o;      /* [B][n_head * head_dim] attention output per head */
    float *cs;     /* [head_dim] rope table */
    float *scores; /* [n_threads][nn_attn_stride(n_ctx, head_dim)] attention scratch */
    float *g, *u;  /* [B][n_ff_exp] expert gate / up projections */
    float *router; /* [B][n_expert] router logits, then probabilities */
    int *topk;     /* [B][n_used] chosen experts in selection order */
    float *topw;   /* [B][n_used] their weights */
    int prefetch;   /* router lookahead into the next layer's experts */
    float *pf_logits; /* [B][n_expert] next layer's router logits */
    float *pf_in;     /* [B][n_embd] next layer's router input */
    int *pf_topk;     /* [n_used] */
    int *pf_uniq;     /* [n_expert] */
    moe_scratch ms;       /* the routed-expert executor's scratch */
};

qwen3moe_state *qwen3moe_state_new(const qwen3moe_model *m, tp_pool *pool, xs_store *xs, int prefetch, int max_isa, int n_ctx,
                                   int max_batch, pt_err *err) {
    const qwen3moe_hparams *hp = &m->hp;
    if (n_ctx < 1 || max_batch < 1) {
        pt_errf(err, "context size and batch must be positive");
        return NULL;
    }
    qwen3moe_state *s = calloc(1, sizeof *s);
    if (!s) {
        pt_errf(err, "out of memory");
        return NULL;
    }
    s->m = m;
    s->pool = pool;
    s->xs = xs;
    s->n_ctx = n_ctx;
    s->max_batch = max_batch;
    const size_t B = (size_t)max_batch, E = (size_t)hp->n_embd, K = (size_t)hp->n_expert_used;
    const size_t QD = (size_t)hp->n_head * hp->head_dim, KVD = (size_t)hp->n_kv * hp->head_dim;
    int fail = 0;
    s->k = calloc((size_t)hp->n_layer, sizeof(float *));
    s->v = calloc((size_t)hp->n_layer, sizeof(float *));
    if (!s->k || !s->v) fail = 1;
    for (int l = 0; l < hp->n_layer && !fail; l++) {
        s->k[l] = pt_falloc((size_t)n_ctx * KVD, &fail);
        s->v[l] = pt_falloc((size_t)n_ctx * KVD, &fail);
    }
    s->x = pt_falloc(B * E, &fail);
    s->xn = pt_falloc(B * E, &fail);
    s->out = pt_falloc(B * E, &fail);
    s->q = pt_falloc(B * QD, &fail);
    s->kx = pt_falloc(B * KVD, &fail);
    s->o = pt_falloc(B * QD, &fail);
    s->cs = pt_falloc((size_t)hp->head_dim, &fail);
    s->scores = pt_falloc((size_t)tp_size(pool) * (size_t)nn_attn_stride(n_ctx, hp->head_dim), &fail);
    s->g = pt_falloc(B * (size_t)hp->n_ff_exp, &fail);
    s->u = pt_falloc(B * (size_t)hp->n_ff_exp, &fail);
    s->router = pt_falloc(B * (size_t)hp->n_expert, &fail);
    s->topw = pt_falloc(B * K, &fail);
    s->topk = calloc(B * K, sizeof(int));
    s->prefetch = prefetch;
    s->pf_logits = calloc((size_t)max_batch * (size_t)hp->n_expert, sizeof(float));
    s->pf_in = calloc((size_t)max_batch * (size_t)hp->n_embd, sizeof(float));
    s->pf_topk = calloc((size_t)hp->n_expert_used, sizeof(int));
    s->pf_uniq = calloc((size_t)hp->n_expert, sizeof(int));
    if (!s->pf_logits || !s->pf_in || !s->pf_topk || !s->pf_uniq) fail = 1;
    if (!s->topk) fail = 1;
    if (moe_scratch_init(&s->ms, hp->n_expert, max_batch, (int)K, hp->n_embd)) fail = 1;
    int64_t max_in = PT_MAX((int64_t)E, (int64_t)QD);
    max_in = PT_MAX(max_in, (int64_t)hp->n_ff_exp);
    if (!fail && mm_ctx_init(&s->mm, pool, max_isa, (int64_t)B, max_in)) fail = 1;
    if (fail) {
        qwen3moe_state_free(s);
        pt_errf(err, "out of memory allocating the KV cache and scratch for %d positions", n_ctx);
        return NULL;
    }
    return s;
}

void qwen3moe_state_free(qwen3moe_state *s) {
    if (!s) return;
    for (int l = 0; l < s->m->hp.n_layer; l++) {
        if (s->k) free(s->k[l]);
        if (s->v) free(s->v[l]);
    }
    free(s->k);
    free(s->v);
    float *bufs[] = {s->x,      s->xn, s->out, s->q,      s->kx,   s->o,  s->cs,
                     s->scores, s->g,  s->u,   s->router, s->topw};
    for (size_t i = 0; i < PT_ARRAY_LEN(bufs); i++)
        free(bufs[i]);
    free(s->topk);
    free(s->pf_logits);
    free(s->pf_in);
    free(s->pf_topk);
    free(s->pf_uniq);
    moe_scratch_free(&s->ms);
    mm_ctx_free(&s->mm);
    free(s);
}

int qwen3moe_n_past(const qwen3moe_state *s) {
    return s->n_past;
}

void qwen3moe_reset(qwen3moe_state *s) {
    s->n_past = 0;
}

void qwen3moe_truncate(qwen3moe_state *s, int n) {
    if (n >= 0 && n < s->n_past) s->n_past = n;
}

/* ===== Attention ===== */

static void attention(qwen3moe_state *s, const qwen3moe_layer *ly, int layer, int T, int pos0) {
    const qwen3moe_hparams *hp = &s->m->hp;
    const int H = hp->n_head, NKV = hp->n_kv, D = hp->head_dim, KVD = NKV * D;
    float *kc = s->k[layer], *vc = s->v[layer];
    mm_run(&s->mm, &ly->wq, s->xn, T, s->q, (int64_t)H * D);
    mm_run(&s->mm, &ly->wk, s->xn, T, s->kx, KVD);
    /* values go straight into the cache rows of their positions */
    mm_run(&s->mm, &ly->wv, s->xn, T, vc + (size_t)pos0 * KVD, KVD);
    for (int t = 0; t < T; t++) {
        nn_rope_cache(&hp->rope, pos0 + t, s->cs);
        for (int h = 0; h < H; h++) {
            float *q = s->q + ((size_t)t * H + h) * D;
            nn_rms_norm(q, ly->q_norm, hp->rms_eps, D, q);
            nn_rope_apply(&hp->rope, s->cs, q);
        }
        float *krow = kc + (size_t)(pos0 + t) * KVD;
        for (int h = 0; h < NKV; h++) {
            nn_rms_norm(s->kx + (size_t)t * KVD + (size_t)h * D, ly->k_norm, hp->rms_eps, D,
                        krow + (size_t)h * D);
            nn_rope_apply(&hp->rope, s->cs, krow + (size_t)h * D);
        }
    }
    nn_attn at = {.q = s->q,
                  .k = kc,
                  .v = vc,
                  .out = s->o,
                  .T = T,
                  .pos0 = pos0,
                  .n_head = H,
                  .n_kv = NKV,
                  .head_dim = D,
                  .cap = s->n_ctx,
                  .window = 0,
                  .scale = hp->kq_scale,
                  .scores = s->scores,
                  .scores_stride = nn_attn_stride(s->n_ctx, hp->head_dim)};
    nn_attn_run(s->pool, &at);
    mm_run(&s->mm, &ly->wo, s->o, T, s->out, hp->n_embd);
}

/* ===== Routed experts ===== */

/* Softmax router over all experts, top n_used, weights renormalised and scaled. */
static void route(qwen3moe_state *s, int t) {
    const qwen3moe_hparams *hp = &s->m->hp;
    const int X = hp->n_expert, K = hp->n_expert_used;
    float *p = s->router + (size_t)t * X;
    nn_softmax(p, X, 1.0f);
    int *chosen = s->topk + (size_t)t * K;
    float *w = s->topw + (size_t)t * K;
    nn_top_k(p, X, K, chosen);
    float sum = 0;
    for (int k = 0; k < K; k++)
        sum += w[k] = p[chosen[k]];
    if (hp->weights_norm) {
        if (sum < 6.103515625e-5f) sum = 6.103515625e-5f;
        for (int k = 0; k < K; k++)
            w[k] /= sum;
    }
    if (hp->weights_scale != 0.0f && hp->weights_scale != 1.0f)
        for (int k = 0; k < K; k++)
            w[k] *= hp->weights_scale;
}

/* Router lookahead: the next layer's router on this layer's normed input
 * predicts its experts, whose reads then overlap this layer's compute. */
static int prefetch_next(qwen3moe_state *s, int layer, int T, pt_err *err) {
    const qwen3moe_hparams *hp = &s->m->hp;
    const int X = hp->n_expert, K = hp->n_expert_used;
    if (layer + 1 >= hp->n_layer) return 0;
    mm_run(&s->mm, &s->m->layers[layer + 1].gate_inp, s->xn, T, s->pf_logits, X);
    int n = 0;
    for (int t = 0; t < T; t++) {
        nn_top_k(s->pf_logits + (size_t)t * X, X, K, s->pf_topk); /* softmax keeps the order */
        moe_mark(s->pf_topk, K, s->ms.seen, s->pf_uniq, &n);
    }
    moe_unmark(s->ms.seen, s->pf_uniq, n);
    return xs_prefetch(s->xs, layer + 1, s->pf_uniq, n, err);
}

/* One routed expert on x[n] in place: SwiGLU. */
static int expert_ffn(void *arch, int layer, int e, const uint8_t *const mats[3], float *x, int n, pt_err *err) {
    qwen3moe_state *s = arch;
    (void)e;
    (void)err;
    const int E = s->m->hp.n_embd, F = s->m->hp.n_ff_exp;
    const qwen3moe_expert_w w = qwen3moe_expert(s->m, layer, mats);
    mm_run_routed(&s->mm, &w.gate, x, n, s->g, F);
    mm_run_routed(&s->mm, &w.up, x, n, s->u, F);
    for (int64_t i = 0; i < (int64_t)n * F; i++)
        s->g[i] = nn_silu(s->g[i]) * s->u[i];
    mm_run_routed(&s->mm, &w.down, s->g, n, x, E);
    return 0;
}

static int overlap(void *arch, int layer, int T, pt_err *err) { return prefetch_next(arch, layer, T, err); }

static int moe(qwen3moe_state *s, const qwen3moe_layer *ly, int layer, int T, pt_err *err) {
    const qwen3moe_hparams *hp = &s->m->hp;
    const int X = hp->n_expert, K = hp->n_expert_used, E = hp->n_embd;
    mm_run(&s->mm, &ly->gate_inp, s->xn, T, s->router, X);
    for (int t = 0; t < T; t++)
        route(s, t);
    const moe_call c = {s->xs, layer, T, K, E, s->topk, s->topw, s->xn, s->out,
                        expert_ffn, s->prefetch ? overlap : NULL, s};
    return moe_run(&c, &s->ms, err);
}

/* One decoder block on rows x[T] at positions pos0.. . */
static int block(qwen3moe_state *s, int layer, int T, int pos0, pt_err *err) {
    const qwen3moe_hparams *hp = &s->m->hp;
    const qwen3moe_layer *ly = &s->m->layers[layer];
    const int E = hp->n_embd;
    for (int t = 0; t < T; t++)
        nn_rms_norm(s->x + (size_t)t * E, ly->attn_norm, hp->rms_eps, E, s->xn + (size_t)t * E);
    attention(s, ly, layer, T, pos0);
    for (size_t i = 0; i < (size_t)T * E; i++)
        s->x[i] += s->out[i];
    for (int t = 0; t < T; t++)
        nn_rms_norm(s->x + (size_t)t * E, ly->ffn_norm, hp->rms_eps, E, s->xn + (size_t)t * E);
    if (moe(s, ly, layer, T, err)) return -1;
    for (size_t i = 0; i < (size_t)T * E; i++)
        s->x[i] += s->out[i];
    return 0;
}

static int check_tokens(const qwen3moe_state *s, const int32_t *tokens, int n, pt_err *err) {
    if (n < 0) return pt_errf(err, "negative token count");
    if ((int64_t)s->n_past + n > s->n_ctx)
        return pt_errf(err, "context full: %d positions cached + %d new exceed the context size %d",
                       s->n_past, n, s->n_ctx);
    for (int i = 0; i < n; i++)
        if (tokens[i] < 0 || tokens[i] >= s->m->hp.n_vocab)
            return pt_errf(err, "token id %d at index %d is outside the vocabulary (0..%d)",
                           tokens[i], i, s->m->hp.n_vocab - 1);
    return 0;
}

int qwen3moe_eval(qwen3moe_state *s, const int32_t *tokens, int n, float *logits, int all_rows,
                  float *hidden, pt_err *err) {
    const qwen3moe_model *m = s->m;
    const qwen3moe_hparams *hp = &m->hp;
    const int E = hp->n_embd;
    if (check_tokens(s, tokens, n, err)) return -1;
    for (int c0 = 0; c0 < n; c0 += s->max_batch) {
        const int T = n - c0 < s->max_batch ? n - c0 : s->max_batch;
        const int pos0 = s->n_past;
        for (int t = 0; t < T; t++)
            mm_get_row(&m->tok_embd, tokens[c0 + t], s->x + (size_t)t * E);
        for (int l = 0; l < hp->n_layer; l++)
            if (block(s, l, T, pos0, err)) return -1;
        for (int t = 0; t < T; t++)
            nn_rms_norm(s->x + (size_t)t * E, m->output_norm, hp->rms_eps, E,
                        s->xn + (size_t)t * E);
        if (hidden) memcpy(hidden + (size_t)c0 * E, s->xn, (size_t)T * E * sizeof(float));
        if (logits && all_rows)
            mm_run(&s->mm, &m->output, s->xn, T, logits + (size_t)c0 * hp->n_vocab, hp->n_vocab);
        else if (logits && c0 + T == n)
            mm_run(&s->mm, &m->output, s->xn + (size_t)(T - 1) * E, 1, logits, hp->n_vocab);
        s->n_past += T;
    }
    return 0;
}
