/* gen.c — the generation loop of petrel.h (pt_gen_*), shared by `petrel
 * generate`, `petrel chat` and the server: prefill with prefix reuse, then
 * sample, stream UTF-8 safely, stop.
 *
 * It lives in the library rather than in the front ends because it needs the
 * streaming detokenizer, the sampler and the stop-string matcher, all internal
 * (see petrel.h's top comment). It sits on the public session API plus those;
 * the session alone records which tokens its cache holds. Nothing allocates
 * per token (the text buffer grows geometrically); nothing prints.
 *
 * With a grammar (pt_sampling.grammar) the sampler masks every draw and follows the accepted
 * tokens; its position restarts with each run (sampler_reset), and the prompt's tokens only
 * feed the penalties (sampler_note), never the grammar.
 *
 * Padded vocabularies: a model's output head may have more rows than its
 * tokenizer has tokens; those rows' logits are set to -inf before every draw,
 * so no id outside the vocabulary is ever produced. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "engine/api_text.h"
#include "text/spec.h"

struct pt_gen {
    pt_engine *e;
    pt_session *s;
    const tok_vocab *v;
    sampler *smp;
    int penalty_last_n;
    int n_ctx, n_vocab;
    int n_tok;     /* tokens in the vocabulary: ids n_tok..n_vocab-1 are padded output rows */
    float *logits; /* [n_vocab] logits after the last evaluated token */
    int have_logits;
    float *raw;    /* [n_vocab] the logits before sampling changes them (logprobs only) */
    spec *spec;    /* drafting with the MTP head (spec.c); NULL: off */
    pt_pcache *pc; /* prefixes restored before and stored after a prefill; NULL: none */
    int restored;  /* positions the last prefill restored from the prefix cache */
    char *scope;   /* the prefix cache's scope (an API key), or NULL */
};

static int fail(char *err, size_t err_len, const char *msg) {
    if (err && err_len) snprintf(err, err_len, "%s", msg);
    return -1;
}

pt_gen *pt_gen_new(pt_session *s, const pt_sampling *sp, char *err, size_t err_len) {
    pt_engine *e = pt_session_engine(s);
    const tok_vocab *v = engine_vocab(e, err, err_len);
    if (!v) return NULL;
    pt_gen *g = calloc(1, sizeof *g);
    if (!g) return fail(err, err_len, "out of memory"), NULL;
    g->e = e, g->s = s, g->v = v;
    g->n_ctx = pt_session_n_ctx(s);
    g->n_vocab = pt_engine_n_vocab(e);
    g->n_tok = tok_n_vocab(v);
    g->penalty_last_n = sp->penalty_last_n;
    if (tok_n_vocab(v) > g->n_vocab) {
        if (err && err_len)
            snprintf(err, err_len, "the vocabulary has %d tokens but the model's output has %d",
                     tok_n_vocab(v), g->n_vocab);
        free(g);
        return NULL;
    }
    pt_err pe = {{0}};
    g->smp = sampler_new(sp, g->n_vocab, &pe);
    g->logits = malloc((size_t)g->n_vocab * sizeof *g->logits);
    if (!g->smp || !g->logits) {
        fail(err, err_len, g->smp ? "out of memory for the generation buffers" : pe.msg);
        pt_gen_free(g);
        return NULL;
    }
    return g;
}

void pt_gen_free(pt_gen *g) {
    if (!g) return;
    sampler_free(g->smp);
    spec_free(g->spec);
    free(g->logits);
    free(g->raw);
    free(g->scope);
    free(g);
}

pt_session *pt_gen_session(const pt_gen *g) {
    return g->s;
}

int pt_gen_set_sampling(pt_gen *g, const pt_sampling *sp, char *err, size_t err_len) {
    pt_err pe = {{0}};
    sampler *s = sampler_new(sp, g->n_vocab, &pe);
    if (!s) return fail(err, err_len, pe.msg);
    sampler_free(g->smp);
    g->smp = s;
    g->penalty_last_n = sp->penalty_last_n;
    return 0;
}

void pt_gen_clear(pt_gen *g) {
    pt_session_truncate(g->s, 0);
    if (g->spec) spec_clear(g->spec);
    g->have_logits = 0;
}

int pt_gen_set_draft(pt_gen *g, int n, char *err, size_t err_len) {
    if (n < 0) n = 0;
    if (n > PT_MAX_DRAFT) n = PT_MAX_DRAFT;
    if (n > g->n_ctx - 2) n = g->n_ctx - 2 > 0 ? g->n_ctx - 2 : 0;
    if (n == (g->spec ? spec_n_draft(g->spec) : 0)) return n;
    spec *sp = NULL;
    if (n > 0 && !(sp = spec_new(g->s, n, g->n_tok, err, err_len))) return -1;
    spec_free(g->spec);
    g->spec = sp;
    return n;
}

int pt_gen_draft(const pt_gen *g) {
    return g->spec ? spec_n_draft(g->spec) : 0;
}

void pt_gen_draft_stats(const pt_gen *g, pt_draft_stats *st) {
    if (g->spec)
        spec_stats(g->spec, st);
    else
        memset(st, 0, sizeof *st);
}

void pt_gen_set_draft_adaptive(pt_gen *g, int on) {
    if (g->spec) spec_set_adaptive(g->spec, on);
}

int pt_gen_set_draft_replay(pt_gen *g, const int32_t *ids, int n) {
    return g->spec ? spec_set_replay(g->spec, ids, n) : -1;
}

int pt_gen_set_prefix_cache(pt_gen *g, pt_pcache *pc, const char *scope) {
    char *sc = scope ? strdup(scope) : NULL;
    if (scope && !sc) return -1;
    free(g->scope);
    g->scope = sc;
    g->pc = pc;
    return 0;
}

int pt_gen_catch_up_mtp(pt_gen *g) {
    return g->spec ? spec_catch_up(g->spec) : 0;
}

int pt_gen_last_restored(const pt_gen *g) {
    return g->restored;
}

void pt_gen_session_restored(pt_gen *g) {
    if (g->spec) spec_restored(g->spec);
    g->have_logits = 0;
}

int pt_gen_prefill(pt_gen *g, const int32_t *ids, int n, const volatile sig_atomic_t *stop,
                   char *err, size_t err_len) {
    g->have_logits = 0;
    g->restored = 0;
    if (g->pc && n > 0 && n <= g->n_ctx &&
        (g->restored = pt_pcache_restore(g->pc, g->s, g->scope, ids, n)) > 0)
        pt_gen_session_restored(g);
    if (g->restored < 0) g->restored = 0;
    const int reused = g->spec ? spec_prefill(g->spec, ids, n, g->logits, stop, err, err_len)
                               : pt_session_sync(g->s, ids, n, g->logits, stop, err, err_len);
    g->have_logits = reused >= 0;
    /* the prompt's blocks, before the answer: the rings still hold its last positions */
    if (g->pc && reused >= 0) pt_pcache_save(g->pc, g->s, g->scope, n);
    return reused;
}

/* Emit text[*emitted..upto): the bytes now known not to start a stop string. */
static int emit_upto(pt_gen_emit_fn emit, void *ud, const pt_buf *t, size_t *emitted, size_t upto) {
    if (upto <= *emitted) return 0;
    int rc = emit ? emit(ud, t->v + *emitted, upto - *emitted) : 0;
    *emitted = upto;
    return rc;
}

/* The streaming decoder appends to a tok_bytes; the result's text is a pt_buf
 * of the same fields. */
static int push_token(const tok_vocab *v, tok_stream *st, int32_t tok, int flags, pt_buf *text,
                      pt_err *e) {
    tok_bytes b = {text->v, text->n, text->cap};
    int rc = tok_stream_push(v, st, tok, flags, &b, e);
    text->v = b.v, text->n = b.n, text->cap = b.cap;
    return rc;
}

/* Before sampling: keep the logits and find their log-sum-exp and the k most likely tokens
 * (top[0..k), most likely first; ties by lower id). -1 when out of memory. */
static int logprob_prepare(pt_gen *g, int k, pt_logprob *top, int *n_top, double *lse) {
    if (!g->raw && !(g->raw = malloc((size_t)g->n_vocab * sizeof *g->raw))) return -1;
    memcpy(g->raw, g->logits, (size_t)g->n_vocab * sizeof *g->raw);
    float mx = -INFINITY;
    for (int i = 0; i < g->n_tok; i++)
        if (g->raw[i] > mx) mx = g->raw[i];
    double sum = 0;
    for (int i = 0; i < g->n_tok; i++)
        sum += exp((double)g->raw[i] - mx);
    *lse = mx + log(sum);
    int n = 0;
    for (int i = 0; i < g->n_tok && k > 0; i++) {
        float x = g->raw[i];
        if (n == k && !(x > top[n - 1].logprob)) continue;
        int j = n < k ? n++ : n - 1; /* insert, dropping the last when full */
        while (j > 0 && top[j - 1].logprob < x) {
            top[j] = top[j - 1];
            j--;
        }
        top[j] = (pt_logprob){i, x};
    }
    for (int i = 0; i < n; i++)
        top[i].logprob = (float)(top[i].logprob - *lse);
    *n_top = n;
    return 0;
}

static int flush_stream(tok_stream *st, pt_buf *text, pt_err *e) {
    tok_bytes b = {text->v, text->n, text->cap};
    int rc = tok_stream_flush(st, &b, e);
    text->v = b.v, text->n = b.n, text->cap = b.cap;
    return rc;
}

int pt_gen_run(pt_gen *g, const pt_gen_opts *o, pt_gen_emit_fn emit, void *ud,
               const volatile sig_atomic_t *stop, pt_gen_result *r, char *err, size_t err_len) {
    pt_buf text = r->text;
    memset(r, 0, sizeof *r);
    text.n = 0;
    r->text = text;
    if (!g->have_logits) return fail(err, err_len, "pt_gen_run: nothing was prefilled");
    /* the penalties see the last tokens of the context, prompt included */
    sampler_reset(g->smp);
    const int32_t *held = pt_session_tokens(g->s);
    const int n_held = pt_session_n_past(g->s);
    for (int i = n_held > g->penalty_last_n ? n_held - g->penalty_last_n : 0; i < n_held; i++)
        sampler_note(g->smp, held[i]);
    if (g->spec) spec_begin(g->spec);
    tok_stream st = {0};
    size_t emitted = 0, floor = 0; /* floor: the end of the last control token's text */
    pt_err pe = {{0}};
    int rc = 0;
    for (;;) {
        if (o->max_tokens >= 0 && r->n_tokens >= o->max_tokens) {
            r->reason = PT_GEN_LENGTH;
            break;
        }
        if (pt_stop_requested(stop) || (o->should_stop && o->should_stop(o->should_stop_ud))) {
            r->reason = PT_GEN_INTERRUPT;
            break;
        }
        /* Output rows past the vocabulary (a head padded to a round size) name no token:
         * they can never be sampled, whatever their logits. */
        for (int i = g->n_tok; i < g->n_vocab; i++)
            g->logits[i] = -INFINITY;
        pt_logprob top[PT_MAX_TOP_LOGPROBS];
        int n_top = 0;
        double lse = 0;
        int k = o->n_top_logprobs < 0                     ? 0
                : o->n_top_logprobs > PT_MAX_TOP_LOGPROBS ? PT_MAX_TOP_LOGPROBS
                                                          : o->n_top_logprobs;
        if (o->on_logprob && logprob_prepare(g, k, top, &n_top, &lse)) {
            rc = fail(err, err_len, "out of memory");
            break;
        }
        int32_t tok = sampler_sample(g->smp, g->logits);
        g->have_logits = 0; /* the penalties modified them */
        if (tok < 0) {
            rc = fail(err, err_len,
                      "grammar: no token of the vocabulary can continue the grammar here");
            break;
        }
        if (!r->t_first) r->t_first = pt_now();
        if (!o->ignore_eog && tok_is_eog(g->v, tok)) {
            r->reason = PT_GEN_EOG;
            break;
        }
        sampler_accept(g->smp, tok);
        r->n_tokens++;
        if (o->on_logprob) {
            pt_logprob s = {tok, (float)(g->raw[tok] - lse)};
            o->on_logprob(o->on_logprob_ud, &s, top, n_top);
        }
        int flags = o->decode_flags;
        int control =
            (flags & PT_DETOKENIZE_RENDER_SPECIAL) && (tok_attr(g->v, tok) & TOK_ATTR_CONTROL);
        if (control && o->show_control && !o->show_control[tok])
            flags &= ~PT_DETOKENIZE_RENDER_SPECIAL, control = 0;
        if (push_token(g->v, &st, tok, flags, &r->text, &pe)) {
            rc = fail(err, err_len, pe.msg);
            break;
        }
        /* stop strings are matched on the text after the last written control token */
        if (control) floor = r->text.n;
        size_t hold = 0, from = emitted > floor ? emitted - floor : 0;
        long at =
            stop_find(o->stops, o->n_stops, r->text.v + floor, r->text.n - floor, from, &hold);
        if (at >= 0) at += (long)floor;
        if (at >= 0) {
            emit_upto(emit, ud, &r->text, &emitted, (size_t)at);
            r->text.n = (size_t)at;
            r->reason = PT_GEN_STOP_STRING;
            break;
        }
        if (emit_upto(emit, ud, &r->text, &emitted, r->text.n - hold)) {
            r->reason = PT_GEN_INTERRUPT;
            break;
        }
        if (o->max_tokens >= 0 && r->n_tokens >= o->max_tokens) {
            r->reason = PT_GEN_LENGTH; /* no need to evaluate the last token */
            break;
        }
        if (pt_session_n_past(g->s) >= g->n_ctx) {
            r->reason = PT_GEN_CONTEXT;
            break;
        }
        if (g->spec ? spec_next(g->spec, tok, g->logits, err, err_len)
                    : pt_session_eval(g->s, &tok, 1, g->logits, 0, NULL, err, err_len)) {
            rc = -1;
            break;
        }
        g->have_logits = 1;
    }
    if (g->spec) spec_end(g->spec); /* drafts past the last token handed out leave the cache */
    if (rc == 0 && r->reason != PT_GEN_STOP_STRING) {
        if (flush_stream(&st, &r->text, &pe))
            rc = fail(err, err_len, pe.msg);
        else
            emit_upto(emit, ud, &r->text, &emitted, r->text.n);
    }
    /* the text is NUL-terminated like every pt_buf (a stop string cut it) */
    if (rc == 0 && pt_buf_append(&r->text, "", 0)) rc = fail(err, err_len, "out of memory");
    /* a stop string cut the text before tokens the grammar has already followed */
    r->grammar_done = r->reason != PT_GEN_STOP_STRING && sampler_grammar_done(g->smp);
    r->t_end = pt_now();
    return rc;
}
