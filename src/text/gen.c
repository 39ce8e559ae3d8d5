/* gen.c — prefill with prefix reuse, then the sample/stream/stop loop. See gen.h. */
#include "text/gen.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>


struct gen {
    pt_engine *e;
    pt_session *s;
    const tok_vocab *v;
    sampler *smp;
    int penalty_last_n;
    int n_ctx, n_vocab;
    float *logits;  /* [n_vocab] logits after the last evaluated token */
    int have_logits;
};

double gen_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

gen *gen_new(pt_engine *e, pt_session *s, const tok_vocab *v, const sampler_params *sp, pt_err *err) {
    gen *g = calloc(1, sizeof *g);
    if (!g) return pt_errf(err, "out of memory"), NULL;
    g->e = e, g->s = s, g->v = v;
    g->n_ctx = pt_session_n_ctx(s);
    g->n_vocab = pt_engine_n_vocab(e);
    g->penalty_last_n = sp->penalty_last_n;
    if (tok_n_vocab(v) > g->n_vocab) {
        pt_errf(err, "the vocabulary has %d tokens but the model's output has %d", tok_n_vocab(v), g->n_vocab);
        free(g);
        return NULL;
    }
    g->smp = sampler_new(sp, g->n_vocab, err);
    g->logits = malloc((size_t)g->n_vocab * sizeof *g->logits);
    if (!g->smp || !g->logits) {
        if (g->smp) pt_errf(err, "out of memory for the generation buffers");
        gen_free(g);
        return NULL;
    }
    return g;
}

void gen_free(gen *g) {
    if (!g) return;
    sampler_free(g->smp);
    free(g->logits);
    free(g);
}

int gen_set_sampling(gen *g, const sampler_params *sp, pt_err *err) {
    sampler *s = sampler_new(sp, g->n_vocab, err);
    if (!s) return -1;
    sampler_free(g->smp);
    g->smp = s;
    g->penalty_last_n = sp->penalty_last_n;
    return 0;
}

void gen_clear(gen *g) {
    pt_session_truncate(g->s, 0);
    g->have_logits = 0;
}

int gen_prefill(gen *g, const int32_t *ids, int n, const volatile sig_atomic_t *stop, pt_err *err) {
    char msg[512];
    g->have_logits = 0;
    const int reused = pt_session_sync(g->s, ids, n, g->logits, stop, msg, sizeof msg);
    if (reused == -1) return pt_errf(err, "%s", msg);
    g->have_logits = reused >= 0;
    return reused;
}

/* Bytes of text[0..len) safe to show: all but a possible stop-string prefix. */
static int emit_upto(gen_emit_fn emit, void *ud, const tok_bytes *t, size_t *emitted, size_t upto) {
    if (upto <= *emitted) return 0;
    int rc = emit ? emit(ud, t->v + *emitted, upto - *emitted) : 0;
    *emitted = upto;
    return rc;
}

int gen_run(gen *g, const gen_opts *o, gen_emit_fn emit, void *ud, const volatile sig_atomic_t *stop,
            gen_result *r, pt_err *err) {
    tok_bytes text = r->text;
    memset(r, 0, sizeof *r);
    text.n = 0;
    r->text = text;
    if (!g->have_logits) return pt_errf(err, "gen_run: nothing was prefilled");
    /* the penalties see the last tokens of the context, prompt included */
    sampler_reset(g->smp);
    const int32_t *held = pt_session_tokens(g->s);
    const int n_held = pt_session_n_past(g->s);
    for (int i = n_held > g->penalty_last_n ? n_held - g->penalty_last_n : 0; i < n_held; i++)
        sampler_accept(g->smp, held[i]);
    tok_stream st = {0};
    size_t emitted = 0;
    char msg[512];
    int rc = 0;
    for (;;) {
        if (o->max_tokens >= 0 && r->n_tokens >= o->max_tokens) {
            r->reason = GEN_LENGTH;
            break;
        }
        if ((stop && *stop) || (o->should_stop && o->should_stop(o->should_stop_ud))) {
            r->reason = GEN_INTERRUPT;
            break;
        }
        int32_t tok = sampler_sample(g->smp, g->logits);
        g->have_logits = 0; /* the penalties modified them */
        if (!r->t_first) r->t_first = gen_now();
        if (!o->ignore_eog && tok_is_eog(g->v, tok)) {
            r->reason = GEN_EOG;
            break;
        }
        sampler_accept(g->smp, tok);
        r->n_tokens++;
        if (tok_stream_push(g->v, &st, tok, o->decode_flags, &r->text, err)) {
            rc = -1;
            break;
        }
        size_t hold = 0;
        long at = stop_find(o->stops, o->n_stops, r->text.v, r->text.n, emitted, &hold);
        if (at >= 0) {
            emit_upto(emit, ud, &r->text, &emitted, (size_t)at);
            r->text.n = (size_t)at;
            r->reason = GEN_STOP_STRING;
            break;
        }
        if (emit_upto(emit, ud, &r->text, &emitted, r->text.n - hold)) {
            r->reason = GEN_INTERRUPT;
            break;
        }
        if (o->max_tokens >= 0 && r->n_tokens >= o->max_tokens) {
            r->reason = GEN_LENGTH; /* no need to evaluate the last token */
            break;
        }
        if (pt_session_n_past(g->s) >= g->n_ctx) {
            r->reason = GEN_CONTEXT;
            break;
        }
        if (pt_session_eval(g->s, &tok, 1, g->logits, 0, NULL, msg, sizeof msg)) {
            rc = pt_errf(err, "%s", msg);
            break;
        }
        g->have_logits = 1;
    }
    if (rc == 0 && r->reason != GEN_STOP_STRING) {
        if (tok_stream_flush(&st, &r->text, err)) rc = -1;
        else emit_upto(emit, ud, &r->text, &emitted, r->text.n);
    }
    r->t_end = gen_now();
    return rc;
}
