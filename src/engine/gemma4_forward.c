/* gemma4_forward.c — forward pass of the Gemma 4 MoE family: sliding-window
 * and full attention with per-layer geometry, q/k/v RMS norms, proportional
 * rope, a dense GeGLU MLP beside softmax-routed GeGLU experts, post-norms,
 * layer output scale and the final logit soft-cap. See gemma4_forward.h for
 * the state it keeps.
 *
 * Order of operations mirrors llama.cpp's graph where float rounding could
 * show: norms multiply by their gain after the reciprocal square root; the
 * router input is ((rms(x) * 1/sqrt(n_embd)) * gain); an expert's output is
 * multiplied by its scale, then by its routing weight, and the experts are
 * summed in selection order; GELU goes through fp16 as llama.cpp's table does.
 * Every buffer is allocated in gemma4_state_new; the token loop allocates nothing.
 */
#include "gemma4_forward.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "kernels/quant.h"
#include "nn/attn.h"
#include "nn/matmul.h"
#include "nn/moe.h"
#include "nn/ops.h"
#include "runtime/experts.h"

struct gemma4_state {
    const gemma4_model *m;
    tp_pool *pool;
    xs_store *xs;         /* where routed experts come from (shared with the engine) */
    mm_ctx mm;
    int n_ctx;       /* positions the caches can address */
    int max_batch;   /* rows per chunk */
    int n_past;      /* positions cached */
    int64_t ring;    /* slots of a sliding-window layer's cache */
    int64_t ring_lo; /* lowest position whose sliding-window keys the rings still hold */
    int64_t *cap;    /* [n_layer] slots of each layer's cache: n_ctx or ring */
    float **k, **v;  /* [n_layer] -> [cap][n_kv * head_dim]: normed roped keys, normed values */
    /* scratch, B = max_batch rows */
    float *x;       /* [B][n_embd] residual stream */
    float *xn;      /* [B][n_embd] normed input of a sub-block */
    float *h;       /* [B][n_embd] residual after attention (input of both FFN branches) */
    float *a;       /* [B][n_embd] sub-block output (attention, then dense MLP) */
    float *moe;     /* [B][n_embd] routed experts' output */
    float *q;       /* [B][n_head * max_head_dim] */
    float *kx, *vx; /* [B][max_kv_dim] new keys / values */
    float *o;       /* [B][n_head * max_head_dim] attention output per head */
    float *cs;      /* [max_head_dim] rope table */
    float *scores;  /* [n_threads][nn_attn_stride(n_ctx, max_head_dim)] attention scratch */
    float *g;       /* [B][max(n_ff, 2 n_ff_exp)] gate (or fused gate|up) projections */
    float *u;       /* [B][max(n_ff, n_ff_exp)] up projections / gated activations */
    float *router;  /* [B][n_expert] router logits */
    int *topk;      /* [B][n_used] chosen experts in selection order */
    float *topw;    /* [B][n_used] their weights */
    int prefetch;   /* router lookahead into the next layer's experts */
    float *pf_logits; /* [B][n_expert] next layer's router logits */
    float *pf_in;     /* [B][n_embd] next layer's router input */
    int *pf_topk;     /* [n_used] */
    int *pf_uniq;     /* [n_expert] */
    moe_scratch ms;       /* the routed-expert executor's scratch */
};

gemma4_state *gemma4_state_new(const gemma4_model *m, tp_pool *pool, xs_store *xs, int prefetch, int max_isa, int n_ctx,
                               int max_batch, pt_err *err) {
    const gemma4_hparams *hp = &m->hp;
    if (n_ctx < 1 || max_batch < 1) {
        pt_errf(err, "context size and batch must be positive");
        return NULL;
    }
    gemma4_state *s = calloc(1, sizeof *s);
    if (!s) {
        pt_errf(err, "out of memory");
        return NULL;
    }
    s->m = m;
    s->pool = pool;
    s->xs = xs;
    s->n_ctx = n_ctx;
    s->max_batch = max_batch;
    /* a batch's first query needs window-1 older keys, its last writes T-1 newer */
    int any_swa = 0;
    for (int l = 0; l < hp->n_layer; l++)
        any_swa |= m->layers[l].swa;
    s->ring = any_swa ? (int64_t)hp->window + max_batch - 1 : n_ctx;
    if (s->ring > n_ctx) s->ring = n_ctx;
    const size_t B = (size_t)max_batch, E = (size_t)hp->n_embd, H = (size_t)hp->n_head;
    const size_t QD = H * (size_t)hp->max_head_dim, KVD = (size_t)hp->max_kv_dim;
    const size_t F = (size_t)hp->n_ff, FX = (size_t)hp->n_ff_exp, K = (size_t)hp->n_expert_used;
    int fail = 0;
    s->cap = calloc((size_t)hp->n_layer, sizeof(int64_t));
    s->k = calloc((size_t)hp->n_layer, sizeof(float *));
    s->v = calloc((size_t)hp->n_layer, sizeof(float *));
    if (!s->cap || !s->k || !s->v) fail = 1;
    for (int l = 0; l < hp->n_layer && !fail; l++) {
        const gemma4_layer *ly = &m->layers[l];
        s->cap[l] = ly->swa ? s->ring : n_ctx;
        const size_t n = (size_t)s->cap[l] * (size_t)(ly->n_kv * ly->head_dim);
        s->k[l] = pt_falloc(n, &fail);
        s->v[l] = pt_falloc(n, &fail);
    }
    s->x = pt_falloc(B * E, &fail);
    s->xn = pt_falloc(B * E, &fail);
    s->h = pt_falloc(B * E, &fail);
    s->a = pt_falloc(B * E, &fail);
    s->moe = pt_falloc(B * E, &fail);
    s->q = pt_falloc(B * QD, &fail);
    s->kx = pt_falloc(B * KVD, &fail);
    s->vx = pt_falloc(B * KVD, &fail);
    s->o = pt_falloc(B * QD, &fail);
    s->cs = pt_falloc((size_t)hp->max_head_dim, &fail);
    s->scores = pt_falloc((size_t)tp_size(pool) * (size_t)nn_attn_stride(n_ctx, hp->max_head_dim), &fail);
    s->g = pt_falloc(B * PT_MAX(F, 2 * FX), &fail);
    s->u = pt_falloc(B * PT_MAX(F, FX), &fail);
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
    max_in = PT_MAX(max_in, (int64_t)PT_MAX(F, FX));
    if (!fail && mm_ctx_init(&s->mm, pool, max_isa, (int64_t)B, max_in)) fail = 1;
    if (fail) {
        gemma4_state_free(s);
        pt_errf(err, "out of memory allocating the KV cache and scratch for %d positions", n_ctx);
        return NULL;
    }
    return s;
}

void gemma4_state_free(gemma4_state *s) {
    if (!s) return;
    for (int l = 0; l < s->m->hp.n_layer; l++) {
        if (s->k) free(s->k[l]);
        if (s->v) free(s->v[l]);
    }
    free(s->k);
    free(s->v);
    free(s->cap);
    float *bufs[] = {s->x,  s->xn,     s->h, s->a, s->moe,    s->q,    s->kx, s->vx, s->o,
                     s->cs, s->scores, s->g, s->u, s->router, s->topw};
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

int gemma4_n_past(const gemma4_state *s) {
    return s->n_past;
}

void gemma4_reset(gemma4_state *s) {
    s->n_past = 0;
    s->ring_lo = 0;
}

void gemma4_truncate(gemma4_state *s, int n) {
    if (n < 0 || n >= s->n_past) return;
    /* the next query (position n) needs the sliding-window keys from n-window+1 on */
    int64_t need = (int64_t)n - s->m->hp.window + 1;
    if (need < 0) need = 0;
    if (need < s->ring_lo)
        gemma4_reset(s);
    else
        s->n_past = n;
}

/* ===== Activation ===== */

/* GELU (tanh form) as llama.cpp's CPU backend evaluates it: through a table
 * indexed by the fp16 input and holding fp16 outputs, y = f16(gelu(f16(x))),
 * for |x| < 10; the identity above and 0 below. Computing the table entry on
 * the fly gives the same value. */
static float gelu_f16(float x) {
    if (x <= -10.0f) return 0.0f;
    if (x >= 10.0f) return x;
    const float h = qt_f16_to_f32(qt_f32_to_f16(x));
    const float y =
        0.5f * h *
        (1.0f + tanhf(0.79788456080286535587989211986876f * h * (1.0f + 0.044715f * h * h)));
    return qt_f16_to_f32(qt_f32_to_f16(y));
}

/* ===== Attention ===== */

static void attention(gemma4_state *s, int layer, int T, int pos0) {
    const gemma4_hparams *hp = &s->m->hp;
    const gemma4_layer *ly = &s->m->layers[layer];
    const int H = hp->n_head, D = ly->head_dim, NKV = ly->n_kv, KVD = NKV * D;
    mm_run(&s->mm, &ly->wq, s->xn, T, s->q, (int64_t)H * D);
    mm_run(&s->mm, &ly->wk, s->xn, T, s->kx, KVD);
    if (ly->wv.data)
        mm_run(&s->mm, &ly->wv, s->xn, T, s->vx, KVD);
    else /* full layers: V is the raw K projection */
        memcpy(s->vx, s->kx, (size_t)T * KVD * sizeof(float));
    float *kc = s->k[layer], *vc = s->v[layer];
    const int64_t cap = s->cap[layer];
    for (int t = 0; t < T; t++) {
        nn_rope_cache(&ly->rope, pos0 + t, s->cs);
        for (int h = 0; h < H; h++) {
            float *q = s->q + ((size_t)t * H + h) * D;
            nn_rms_norm(q, ly->q_norm, hp->rms_eps, D, q);
            nn_rope_apply(&ly->rope, s->cs, q);
        }
        float *krow = kc + (size_t)((pos0 + t) % cap) * KVD,
              *vrow = vc + (size_t)((pos0 + t) % cap) * KVD;
        for (int h = 0; h < NKV; h++) {
            const float *k = s->kx + (size_t)t * KVD + (size_t)h * D,
                        *v = s->vx + (size_t)t * KVD + (size_t)h * D;
            nn_rms_norm(k, ly->k_norm, hp->rms_eps, D, krow + (size_t)h * D);
            nn_rope_apply(&ly->rope, s->cs, krow + (size_t)h * D);
            nn_rms_norm(v, NULL, hp->rms_eps, D, vrow + (size_t)h * D);
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
                  .cap = cap,
                  .window = ly->swa ? hp->window : 0,
                  .scale = 1.0f,
                  .scores = s->scores,
                  .scores_stride = nn_attn_stride(s->n_ctx, hp->max_head_dim)};
    nn_attn_run(s->pool, &at);
    mm_run(&s->mm, &ly->wo, s->o, T, s->a, hp->n_embd);
}

/* ===== Feed-forward ===== */

/* a[T][n_embd] = down(gelu(gate(xn)) * up(xn)) */
static void dense_mlp(gemma4_state *s, const gemma4_layer *ly, int T) {
    const int64_t F = s->m->hp.n_ff;
    mm_run(&s->mm, &ly->ffn_gate, s->xn, T, s->g, F);
    mm_run(&s->mm, &ly->ffn_up, s->xn, T, s->u, F);
    for (int64_t i = 0; i < (int64_t)T * F; i++)
        s->g[i] = gelu_f16(s->g[i]) * s->u[i];
    mm_run(&s->mm, &ly->ffn_down, s->g, T, s->a, s->m->hp.n_embd);
}

/* Softmax router over all experts, top n_used, weights renormalised. */
static void route(gemma4_state *s, int t) {
    const gemma4_hparams *hp = &s->m->hp;
    const int X = hp->n_expert, K = hp->n_expert_used;
    float *p = s->router + (size_t)t * X;
    nn_softmax(p, X, 1.0f);
    int *chosen = s->topk + (size_t)t * K;
    float *w = s->topw + (size_t)t * K;
    nn_top_k(p, X, K, chosen);
    float sum = 0;
    for (int k = 0; k < K; k++)
        sum += w[k] = p[chosen[k]];
    if (sum < 6.103515625e-5f) sum = 6.103515625e-5f;
    for (int k = 0; k < K; k++)
        w[k] /= sum;
}

/* moe[T][n_embd]: routed experts on xn (the pre_ffw_norm_2 input), routed from
 * the residual h. */
/* Router lookahead: the next layer's router (with its own input gain) on this
 * layer's residual predicts its experts, whose reads then overlap this
 * layer's compute. */
static int prefetch_next(gemma4_state *s, int layer, int T, pt_err *err) {
    const gemma4_hparams *hp = &s->m->hp;
    const int X = hp->n_expert, K = hp->n_expert_used, E = hp->n_embd;
    if (layer + 1 >= hp->n_layer) return 0;
    const gemma4_layer *ny = &s->m->layers[layer + 1];
    const float inv = 1.0f / sqrtf((float)E);
    for (int t = 0; t < T; t++) {
        float *r = s->pf_in + (size_t)t * E;
        nn_rms_norm(s->h + (size_t)t * E, NULL, hp->rms_eps, E, r);
        for (int i = 0; i < E; i++) r[i] = (r[i] * inv) * ny->gate_inp_scale[i];
    }
    mm_run(&s->mm, &ny->gate_inp, s->pf_in, T, s->pf_logits, X);
    int n = 0;
    for (int t = 0; t < T; t++) {
        nn_top_k(s->pf_logits + (size_t)t * X, X, K, s->pf_topk); /* softmax keeps the order */
        moe_mark(s->pf_topk, K, s->ms.seen, s->pf_uniq, &n);
    }
    moe_unmark(s->ms.seen, s->pf_uniq, n);
    return xs_prefetch(s->xs, layer + 1, s->pf_uniq, n, err);
}

/* One routed expert on x[n] in place: GeGLU (fp16-table GELU) over the fused
 * gate|up projection, down projection, times the expert's output scale. */
static int expert_ffn(void *arch, int layer, int e, const uint8_t *const mats[3], float *x, int n, pt_err *err) {
    gemma4_state *s = arch;
    (void)err;
    const int E = s->m->hp.n_embd, F = s->m->hp.n_ff_exp;
    const gemma4_expert_w w = gemma4_expert(s->m, layer, e, mats);
    mm_run_routed(&s->mm, &w.gate_up, x, n, s->g, 2 * (int64_t)F);
    for (int i = 0; i < n; i++) {
        const float *gu = s->g + (size_t)i * 2 * F;
        float *act = s->u + (size_t)i * F;
        for (int j = 0; j < F; j++)
            act[j] = gelu_f16(gu[j]) * gu[F + j];
    }
    mm_run_routed(&s->mm, &w.down, s->u, n, x, E);
    for (size_t i = 0; i < (size_t)n * E; i++)
        x[i] *= w.scale;
    return 0;
}

static int overlap(void *arch, int layer, int T, pt_err *err) { return prefetch_next(arch, layer, T, err); }

static int moe(gemma4_state *s, int layer, int T, pt_err *err) {
    const gemma4_hparams *hp = &s->m->hp;
    const gemma4_layer *ly = &s->m->layers[layer];
    const int X = hp->n_expert, K = hp->n_expert_used, E = hp->n_embd;
    /* router input: rms(h) / sqrt(n_embd) * gate_inp.scale (into moe[] as scratch) */
    const float inv = 1.0f / sqrtf((float)E);
    for (int t = 0; t < T; t++) {
        float *r = s->moe + (size_t)t * E;
        nn_rms_norm(s->h + (size_t)t * E, NULL, hp->rms_eps, E, r);
        for (int i = 0; i < E; i++)
            r[i] = (r[i] * inv) * ly->gate_inp_scale[i];
    }
    mm_run(&s->mm, &ly->gate_inp, s->moe, T, s->router, X);
    for (int t = 0; t < T; t++)
        route(s, t);
    const moe_call c = {s->xs, layer, T, K, E, s->topk, s->topw, s->xn, s->moe,
                        expert_ffn, s->prefetch ? overlap : NULL, s};
    return moe_run(&c, &s->ms, err);
}

/* One decoder block on rows x[T] at positions pos0.. . */
static int block(gemma4_state *s, int layer, int T, int pos0, pt_err *err) {
    const gemma4_hparams *hp = &s->m->hp;
    const gemma4_layer *ly = &s->m->layers[layer];
    const int E = hp->n_embd;
    const float eps = hp->rms_eps;
    for (int t = 0; t < T; t++)
        nn_rms_norm(s->x + (size_t)t * E, ly->attn_norm, eps, E, s->xn + (size_t)t * E);
    attention(s, layer, T, pos0);
    /* h = x + post_attention_norm(attn) */
    for (int t = 0; t < T; t++) {
        float *a = s->a + (size_t)t * E, *h = s->h + (size_t)t * E;
        const float *x = s->x + (size_t)t * E;
        nn_rms_norm(a, ly->post_attn_norm, eps, E, a);
        for (int i = 0; i < E; i++)
            h[i] = a[i] + x[i];
    }
    /* dense MLP -> a, normed with post_ffw_norm_1 */
    for (int t = 0; t < T; t++)
        nn_rms_norm(s->h + (size_t)t * E, ly->ffn_norm, eps, E, s->xn + (size_t)t * E);
    dense_mlp(s, ly, T);
    for (int t = 0; t < T; t++)
        nn_rms_norm(s->a + (size_t)t * E, ly->post_ffw_norm_1, eps, E, s->a + (size_t)t * E);
    /* routed experts -> moe, normed with post_ffw_norm_2 */
    for (int t = 0; t < T; t++)
        nn_rms_norm(s->h + (size_t)t * E, ly->pre_ffw_norm_2, eps, E, s->xn + (size_t)t * E);
    if (moe(s, layer, T, err)) return -1;
    for (int t = 0; t < T; t++)
        nn_rms_norm(s->moe + (size_t)t * E, ly->post_ffw_norm_2, eps, E, s->moe + (size_t)t * E);
    /* x = (h + post_ffw_norm(mlp + moe)) * layer_output_scale */
    for (int t = 0; t < T; t++) {
        float *a = s->a + (size_t)t * E, *x = s->x + (size_t)t * E;
        const float *mo = s->moe + (size_t)t * E, *h = s->h + (size_t)t * E;
        for (int i = 0; i < E; i++)
            a[i] += mo[i];
        nn_rms_norm(a, ly->post_ffw_norm, eps, E, a);
        for (int i = 0; i < E; i++)
            x[i] = (a[i] + h[i]) * ly->out_scale;
    }
    return 0;
}

static int check_tokens(const gemma4_state *s, const int32_t *tokens, int n, pt_err *err) {
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

/* logits[T][n_vocab] of the normed rows xn, soft-capped. */
static void output(gemma4_state *s, const float *xn, int T, float *logits) {
    const gemma4_hparams *hp = &s->m->hp;
    mm_run(&s->mm, &s->m->output, xn, T, logits, hp->n_vocab);
    if (hp->softcap > 0) {
        const float inv = 1.0f / hp->softcap;
        for (size_t i = 0; i < (size_t)T * hp->n_vocab; i++)
            logits[i] = tanhf(logits[i] * inv) * hp->softcap;
    }
}

int gemma4_eval(gemma4_state *s, const int32_t *tokens, int n, float *logits, int all_rows,
                float *hidden, pt_err *err) {
    const gemma4_model *m = s->m;
    const gemma4_hparams *hp = &m->hp;
    const int E = hp->n_embd;
    if (check_tokens(s, tokens, n, err)) return -1;
    for (int c0 = 0; c0 < n; c0 += s->max_batch) {
        const int T = n - c0 < s->max_batch ? n - c0 : s->max_batch;
        const int pos0 = s->n_past;
        for (int t = 0; t < T; t++) {
            float *x = s->x + (size_t)t * E;
            mm_get_row(&m->tok_embd, tokens[c0 + t], x);
            for (int i = 0; i < E; i++)
                x[i] *= hp->embd_scale;
        }
        for (int l = 0; l < hp->n_layer; l++)
            if (block(s, l, T, pos0, err)) return -1;
        for (int t = 0; t < T; t++)
            nn_rms_norm(s->x + (size_t)t * E, m->output_norm, hp->rms_eps, E,
                        s->xn + (size_t)t * E);
        if (hidden) memcpy(hidden + (size_t)c0 * E, s->xn, (size_t)T * E * sizeof(float));
        if (logits && all_rows)
            output(s, s->xn, T, logits + (size_t)c0 * hp->n_vocab);
        else if (logits && c0 + T == n)
            output(s, s->xn + (size_t)(T - 1) * E, 1, logits);
        s->n_past += T;
        /* positions older than n_past - ring have left the sliding-window rings */
        if ((int64_t)s->n_past - s->ring > s->ring_lo) s->ring_lo = (int64_t)s->n_past - s->ring;
    }
    return 0;
}
