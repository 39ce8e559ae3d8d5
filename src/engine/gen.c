/* gen.c — a session's generation (petrel.h: pt_gen_*), shared by `petrel generate`,
 * `petrel chat` and the server: prefill with the prefix cache, then sample, stream UTF-8
 * safely, stop; drafting with the MTP head (spec.c) behind it.
 *
 * It is the engine's: it drives a session (the prefix cache, the MTP head's cache, the
 * progress span are engine internals, engine/session.h) and uses the text layer's streaming
 * detokenizer, sampler and stop-string matcher, none of which front ends see. The session
 * alone records which tokens its cache holds.
 *
 * A run is a sequence of steps (pt_gen_step), each over any number of generations of one
 * engine: first every generation samples its token from its logits, streams the token's text
 * and checks its stops (take), then every one that goes on gets its next logits (advance).
 * pt_gen_run is the same steps over one generation. A generation's state between steps is
 * all in its pt_gen (the stream decoder's pending bytes, what was emitted, the result), so
 * which generations share a step never reaches its tokens or text. Nothing allocates per token
 * (the text buffer grows geometrically); nothing prints.
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
#include "engine/gen.h"
#include "engine/pcache.h"
#include "engine/spec.h"

struct pt_gen {
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
    /* The run under way (pt_gen_start until it ends). */
    int running;
    const pt_gen_opts *o;
    pt_gen_emit_fn emit;
    void *ud;
    const volatile sig_atomic_t *stop;
    pt_gen_result *r;
    tok_stream st;  /* the streaming decoder's pending bytes */
    size_t emitted; /* bytes of r->text handed to emit */
    size_t floor;   /* the end of the last written control token's text */
    int32_t next;   /* the token this step sampled, to be evaluated */
    int go;         /* this step sampled next and goes on */
    char err[512];  /* why the last run ended with PT_GEN_ERROR */
};

static void gen_end(pt_gen *g, int reason);

/* What changes a generation's session, sampler or drafting ends the run under way first, as
 * interrupted (its result complete, the drafts past its last token out of the cache). */
static void end_run(pt_gen *g) {
    if (g->running) gen_end(g, PT_GEN_INTERRUPT);
}

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
    g->s = s, g->v = v;
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
    /* a run left under way: its drafts leave the session, which outlives the generation (the
     * caller's result and callbacks are not touched) */
    if (g->running && g->spec) spec_end(g->spec);
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
    end_run(g);
    pt_err pe = {{0}};
    sampler *s = sampler_new(sp, g->n_vocab, &pe);
    if (!s) return fail(err, err_len, pe.msg);
    sampler_free(g->smp);
    g->smp = s;
    g->penalty_last_n = sp->penalty_last_n;
    return 0;
}

void pt_gen_clear(pt_gen *g) {
    end_run(g);
    pt_session_truncate(g->s, 0);
    if (g->spec) spec_clear(g->spec);
    g->have_logits = 0;
}

int pt_gen_set_draft(pt_gen *g, int n, char *err, size_t err_len) {
    end_run(g);
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

void gen_set_draft_adaptive(pt_gen *g, int on) {
    if (g->spec) spec_set_adaptive(g->spec, on);
}

int gen_set_draft_replay(pt_gen *g, const int32_t *ids, int n) {
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

int pt_gen_last_restored(const pt_gen *g) {
    return g->restored;
}

/* Positions were restored into the session from disk: drafting starts from them. */
static void session_restored(pt_gen *g) {
    if (g->spec) spec_restored(g->spec);
    g->have_logits = 0;
}

int pt_gen_save_file(pt_gen *g, const char *path, const void *extra, size_t extra_len, char *err,
                     size_t err_len) {
    end_run(g);
    /* the head behind is no error: the file then holds fewer MTP positions */
    if (g->spec) spec_catch_up(g->spec);
    return pt_session_save_file(g->s, path, extra, extra_len, err, err_len);
}

int pt_gen_load_file(pt_gen *g, const char *path, char **extra, size_t *extra_len, char *err,
                     size_t err_len) {
    end_run(g);
    const int got = pt_session_load_file(g->s, path, extra, extra_len, err, err_len);
    if (got >= 0) session_restored(g);
    return got;
}

int pt_gen_prefill(pt_gen *g, const int32_t *ids, int n, const volatile sig_atomic_t *stop,
                   char *err, size_t err_len) {
    end_run(g);
    g->have_logits = 0;
    g->restored = 0;
    if (g->pc && n > 0 && n <= g->n_ctx &&
        (g->restored = pcache_restore(g->pc, g->s, g->scope, ids, n)) > 0)
        session_restored(g);
    if (g->restored < 0) g->restored = 0;
    const int reused = g->spec ? spec_prefill(g->spec, ids, n, g->logits, stop, err, err_len)
                               : pt_session_sync(g->s, ids, n, g->logits, stop, err, err_len);
    g->have_logits = reused >= 0;
    /* the prompt's blocks, before the answer: the rings still hold its last positions */
    if (g->pc && reused >= 0) pcache_save(g->pc, g->s, g->scope, n);
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

int pt_gen_start(pt_gen *g, const pt_gen_opts *o, pt_gen_emit_fn emit, void *ud,
                 const volatile sig_atomic_t *stop, pt_gen_result *r, char *err, size_t err_len) {
    if (g->running) return fail(err, err_len, "pt_gen_start: a run is already under way");
    pt_buf text = r->text;
    memset(r, 0, sizeof *r);
    text.n = 0;
    r->text = text;
    g->err[0] = 0;
    if (!g->have_logits)
        return fail(err, err_len, "nothing was prefilled: pt_gen_prefill comes before a run");
    /* the penalties see the last tokens of the context, prompt included */
    sampler_reset(g->smp);
    const int32_t *held = pt_session_tokens(g->s);
    const int n_held = pt_session_n_past(g->s);
    for (int i = n_held > g->penalty_last_n ? n_held - g->penalty_last_n : 0; i < n_held; i++)
        sampler_note(g->smp, held[i]);
    if (g->spec) spec_begin(g->spec);
    g->o = o, g->emit = emit, g->ud = ud, g->stop = stop, g->r = r;
    g->st = (tok_stream){0};
    g->emitted = g->floor = 0;
    g->running = 1;
    return 0;
}

/* The run is over: drafts past the last token handed out leave the cache, the text held back
 * for a stop string or a split character is flushed (not after a stop string or an error),
 * the result completed. */
static void gen_end(pt_gen *g, int reason) {
    pt_gen_result *r = g->r;
    pt_err pe = {{0}};
    r->reason = reason;
    if (g->spec) spec_end(g->spec);
    if (reason != PT_GEN_STOP_STRING && reason != PT_GEN_ERROR) {
        if (flush_stream(&g->st, &r->text, &pe)) {
            snprintf(g->err, sizeof g->err, "%s", pe.msg);
            r->reason = PT_GEN_ERROR;
        } else {
            emit_upto(g->emit, g->ud, &r->text, &g->emitted, r->text.n);
        }
    }
    /* the text is NUL-terminated like every pt_buf (a stop string cut it) */
    if (pt_buf_append(&r->text, "", 0) && r->reason != PT_GEN_ERROR) {
        snprintf(g->err, sizeof g->err, "out of memory");
        r->reason = PT_GEN_ERROR;
    }
    /* a stop string cut the text before tokens the grammar has already followed */
    r->grammar_done = r->reason != PT_GEN_STOP_STRING && sampler_grammar_done(g->smp);
    r->t_end = pt_now();
    g->running = 0;
}

static void gen_fail(pt_gen *g, const char *msg) {
    snprintf(g->err, sizeof g->err, "%s", msg);
    gen_end(g, PT_GEN_ERROR);
}

/* The first half of a step: sample the next token from the logits, stream its text, check the
 * stops. 1 when the run goes on with g->next to be evaluated; 0 when it ended. */
static int gen_take(pt_gen *g) {
    const pt_gen_opts *o = g->o;
    pt_gen_result *r = g->r;
    pt_err pe = {{0}};
    if (o->max_tokens >= 0 && r->n_tokens >= o->max_tokens) return gen_end(g, PT_GEN_LENGTH), 0;
    if (pt_stop_requested(g->stop) || (o->should_stop && o->should_stop(o->should_stop_ud)))
        return gen_end(g, PT_GEN_INTERRUPT), 0;
    /* Output rows past the vocabulary (a head padded to a round size) name no token: they can
     * never be sampled, whatever their logits. */
    for (int i = g->n_tok; i < g->n_vocab; i++)
        g->logits[i] = -INFINITY;
    pt_logprob top[PT_MAX_TOP_LOGPROBS];
    int n_top = 0;
    double lse = 0;
    int k = o->n_top_logprobs < 0                     ? 0
            : o->n_top_logprobs > PT_MAX_TOP_LOGPROBS ? PT_MAX_TOP_LOGPROBS
                                                      : o->n_top_logprobs;
    if (o->on_logprob && logprob_prepare(g, k, top, &n_top, &lse))
        return gen_fail(g, "out of memory"), 0;
    int32_t tok = sampler_sample(g->smp, g->logits);
    g->have_logits = 0; /* the penalties modified them */
    if (tok < 0)
        return gen_fail(g, "grammar: no token of the vocabulary can continue the grammar here"), 0;
    if (!r->t_first) r->t_first = pt_now();
    if (!o->ignore_eog && tok_is_eog(g->v, tok)) return gen_end(g, PT_GEN_EOG), 0;
    sampler_accept(g->smp, tok);
    r->n_tokens++;
    if (o->on_logprob) {
        pt_logprob sl = {tok, (float)(g->raw[tok] - lse)};
        o->on_logprob(o->on_logprob_ud, &sl, top, n_top);
    }
    int flags = o->decode_flags;
    int control =
        (flags & PT_DETOKENIZE_RENDER_SPECIAL) && (tok_attr(g->v, tok) & TOK_ATTR_CONTROL);
    if (control && o->show_control && !o->show_control[tok])
        flags &= ~PT_DETOKENIZE_RENDER_SPECIAL, control = 0;
    if (push_token(g->v, &g->st, tok, flags, &r->text, &pe)) return gen_fail(g, pe.msg), 0;
    /* stop strings are matched on the text after the last written control token */
    if (control) g->floor = r->text.n;
    size_t hold = 0, from = g->emitted > g->floor ? g->emitted - g->floor : 0;
    long at =
        stop_find(o->stops, o->n_stops, r->text.v + g->floor, r->text.n - g->floor, from, &hold);
    if (at >= 0) {
        at += (long)g->floor;
        emit_upto(g->emit, g->ud, &r->text, &g->emitted, (size_t)at);
        r->text.n = (size_t)at;
        return gen_end(g, PT_GEN_STOP_STRING), 0;
    }
    if (emit_upto(g->emit, g->ud, &r->text, &g->emitted, r->text.n - hold))
        return gen_end(g, PT_GEN_INTERRUPT), 0;
    /* no need to evaluate the last token */
    if (o->max_tokens >= 0 && r->n_tokens >= o->max_tokens) return gen_end(g, PT_GEN_LENGTH), 0;
    if (pt_session_n_past(g->s) >= g->n_ctx) return gen_end(g, PT_GEN_CONTEXT), 0;
    g->next = tok;
    return 1;
}

/* The second half of a step: the next logits of every generation of g[0..n) that goes on
 * (go). Today each session's rows go through the decoder in a call of their own (a one-token
 * forward, or a drafting cycle's verify pass, or nothing when the verify pass already holds
 * them); one decoder pass over the rows of all the sessions can replace this loop without
 * changing a bit, since each row's arithmetic is that of a block of its own (ARCHITECTURE.md,
 * batch invariance). */
static void gen_advance(pt_gen *const *g, int n) {
    for (int i = 0; i < n; i++) {
        pt_gen *x = g[i];
        if (!x || !x->go || !x->running) continue;
        int32_t tok = x->next;
        if (x->spec ? spec_next(x->spec, tok, x->logits, x->err, sizeof x->err)
                    : pt_session_eval(x->s, &tok, 1, x->logits, 0, NULL, x->err, sizeof x->err)) {
            gen_end(x, PT_GEN_ERROR);
            continue;
        }
        x->have_logits = 1;
    }
}

int pt_gen_step(pt_gen *const *g, int n) {
    for (int i = 0; i < n; i++) {
        if (!g[i] || !g[i]->running) continue;
        g[i]->go = 0;
        int twice = 0; /* an earlier entry of this step, running, on the same session */
        for (int j = 0; j < i && !twice; j++)
            twice = g[j] == g[i] || (g[j] && g[j]->running && g[j]->s == g[i]->s);
        if (twice)
            gen_fail(g[i], "pt_gen_step: two generations of one session in one step");
        else
            g[i]->go = gen_take(g[i]);
    }
    gen_advance(g, n);
    int running = 0;
    for (int i = 0; i < n; i++)
        running += g[i] && g[i]->running && g[i]->go;
    return running;
}

int pt_gen_running(const pt_gen *g) {
    return g->running;
}

const char *pt_gen_error(const pt_gen *g) {
    return g->err;
}

int pt_gen_run(pt_gen *g, const pt_gen_opts *o, pt_gen_emit_fn emit, void *ud,
               const volatile sig_atomic_t *stop, pt_gen_result *r, char *err, size_t err_len) {
    if (pt_gen_start(g, o, emit, ud, stop, r, err, err_len)) return -1;
    while (pt_gen_step(&g, 1))
        ;
    return r->reason == PT_GEN_ERROR ? fail(err, err_len, g->err) : 0;
}
