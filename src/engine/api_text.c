/* api_text.c — the public buffers, vocabulary, sampling and sampler functions
 * of petrel.h, over the tokenizer (text/tokenizer.c) and the sampler
 * (text/sampler.c), and the loading of the engine's text side at open.
 *
 * The tokenizer's buffers are the public pt_buf / pt_ids themselves; the
 * public pt_sampling mirrors sampler_params field for field (the wrappers
 * copy between them), and the static asserts below keep the flag values in
 * step. */
#include <assert.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common.h"
#include "engine/api_text.h"
#include "text/utf8.h"

static_assert((int)PT_TOKENIZE_ADD_SPECIAL == (int)TOK_ADD_SPECIAL, "tokenize flags");
static_assert((int)PT_TOKENIZE_PARSE_SPECIAL == (int)TOK_PARSE_SPECIAL, "tokenize flags");
static_assert((int)PT_DETOKENIZE_RENDER_SPECIAL == (int)TOK_RENDER_SPECIAL, "detokenize flags");

/* ===== Buffers and the clock ===== */

int pt_buf_append(pt_buf *b, const char *s, size_t n) { return tok_bytes_append(b, s, n); }
void pt_buf_free(pt_buf *b) { tok_bytes_free(b); }
void pt_ids_free(pt_ids *a) { tok_ids_free(a); }
double pt_now(void) { return pt_now_s(); }
int pt_utf8_repair(const char *s, size_t n, pt_buf *out) { return utf8_repair(s, n, out); }

static void put_err(char *err, size_t err_len, const char *msg) {
    if (err && err_len) snprintf(err, err_len, "%s", msg);
}

/* ===== The engine's text side ===== */

void engine_text_load(engine_text *t, const gguf_ctx *g) {
    memset(t, 0, sizeof *t);
    pt_err e = {{0}};
    t->vocab = tok_load(g, &e);
    if (!t->vocab) snprintf(t->vocab_err, sizeof t->vocab_err, "%s", e.msg);
    t->fmt = chat_detect_gguf(g);
    sampler_params_default(&t->sp);
    sampler_params_from_gguf(&t->sp, g);
}

void engine_text_free(engine_text *t) {
    tok_free(t->vocab);
    memset(t, 0, sizeof *t);
}

const tok_vocab *engine_vocab(const pt_engine *e, char *err, size_t err_len) {
    const engine_text *t = engine_text_of(e);
    if (!t->vocab) put_err(err, err_len, t->vocab_err[0] ? t->vocab_err : "the model has no vocabulary");
    return t->vocab;
}

int pt_engine_has_vocab(const pt_engine *e, char *err, size_t err_len) {
    return engine_vocab(e, err, err_len) != NULL;
}

int pt_vocab_size(const pt_engine *e) {
    const tok_vocab *v = engine_vocab(e, NULL, 0);
    return v ? tok_n_vocab(v) : 0;
}

/* ===== Tokens ===== */

int pt_tokenize(const pt_engine *e, const char *text, size_t len, int flags, pt_ids *out, char *err,
                size_t err_len) {
    const tok_vocab *v = engine_vocab(e, err, err_len);
    if (!v) return -1;
    pt_err pe = {{0}};
    int rc = tok_encode(v, text, len, flags, out, &pe);
    if (rc) put_err(err, err_len, pe.msg);
    return rc ? -1 : 0;
}

int pt_detokenize(const pt_engine *e, const int32_t *ids, size_t n, int flags, pt_buf *out, char *err,
                  size_t err_len) {
    const tok_vocab *v = engine_vocab(e, err, err_len);
    if (!v) return -1;
    pt_err pe = {{0}};
    int rc = tok_decode(v, ids, n, flags, out, &pe);
    if (rc) {
        put_err(err, err_len, pe.msg);
        return -1;
    }
    if (pt_buf_append(out, "", 0)) {
        put_err(err, err_len, "out of memory");
        return -1;
    }
    return 0;
}

const char *pt_token_piece(const pt_engine *e, int32_t id, int flags, size_t *len) {
    const tok_vocab *v = engine_vocab(e, NULL, 0);
    if (!v) {
        *len = 0;
        return NULL;
    }
    return tok_piece(v, id, flags, len);
}

int32_t pt_token_bos(const pt_engine *e) {
    const tok_vocab *v = engine_vocab(e, NULL, 0);
    return v ? tok_bos(v) : -1;
}

int32_t pt_token_eos(const pt_engine *e) {
    const tok_vocab *v = engine_vocab(e, NULL, 0);
    return v ? tok_eos(v) : -1;
}

int32_t pt_token_eot(const pt_engine *e) {
    const tok_vocab *v = engine_vocab(e, NULL, 0);
    return v ? tok_eot(v) : -1;
}

int pt_token_is_eog(const pt_engine *e, int32_t id) {
    const tok_vocab *v = engine_vocab(e, NULL, 0);
    return v ? tok_is_eog(v, id) : 0;
}

/* ===== Sampling ===== */

void sampling_to_params(const pt_sampling *s, sampler_params *p) {
    *p = (sampler_params){.temp = s->temp,
                          .top_k = s->top_k,
                          .top_p = s->top_p,
                          .min_p = s->min_p,
                          .repeat_penalty = s->repeat_penalty,
                          .frequency_penalty = s->frequency_penalty,
                          .presence_penalty = s->presence_penalty,
                          .penalty_last_n = s->penalty_last_n,
                          .seed = s->seed};
}

void sampling_from_params(const sampler_params *p, pt_sampling *s) {
    *s = (pt_sampling){.temp = p->temp,
                       .top_k = p->top_k,
                       .top_p = p->top_p,
                       .min_p = p->min_p,
                       .repeat_penalty = p->repeat_penalty,
                       .frequency_penalty = p->frequency_penalty,
                       .presence_penalty = p->presence_penalty,
                       .penalty_last_n = p->penalty_last_n,
                       .seed = p->seed};
}

void pt_sampling_default(pt_sampling *p) {
    sampler_params sp;
    sampler_params_default(&sp);
    sampling_from_params(&sp, p);
}

void pt_engine_sampling(const pt_engine *e, pt_sampling *p) { sampling_from_params(&engine_text_of(e)->sp, p); }

void pt_sampling_override(pt_sampling *p, const pt_sampling *with, unsigned fields) {
    if (fields & PT_SAMPLING_TEMP) p->temp = with->temp;
    if (fields & PT_SAMPLING_TOP_K) p->top_k = with->top_k;
    if (fields & PT_SAMPLING_TOP_P) p->top_p = with->top_p;
    if (fields & PT_SAMPLING_MIN_P) p->min_p = with->min_p;
    if (fields & PT_SAMPLING_REPEAT) p->repeat_penalty = with->repeat_penalty;
    if (fields & PT_SAMPLING_FREQUENCY) p->frequency_penalty = with->frequency_penalty;
    if (fields & PT_SAMPLING_PRESENCE) p->presence_penalty = with->presence_penalty;
    if (fields & PT_SAMPLING_LAST_N) p->penalty_last_n = with->penalty_last_n;
    if (fields & PT_SAMPLING_SEED) p->seed = with->seed;
}

/* The public sampler is the internal one under another name. */
struct pt_sampler {
    sampler *s;
};

pt_sampler *pt_sampler_new(const pt_sampling *p, int n_vocab, char *err, size_t err_len) {
    pt_err pe = {{0}};
    sampler_params sp;
    sampling_to_params(p, &sp);
    pt_sampler *s = calloc(1, sizeof *s);
    if (!s) return put_err(err, err_len, "out of memory"), NULL;
    s->s = sampler_new(&sp, n_vocab, &pe);
    if (!s->s) {
        put_err(err, err_len, pe.msg);
        free(s);
        return NULL;
    }
    return s;
}

void pt_sampler_free(pt_sampler *s) {
    if (!s) return;
    sampler_free(s->s);
    free(s);
}

void pt_sampler_reset(pt_sampler *s) { sampler_reset(s->s); }
void pt_sampler_accept(pt_sampler *s, int32_t tok) { sampler_accept(s->s, tok); }
int32_t pt_sampler_sample(pt_sampler *s, float *logits) { return sampler_sample(s->s, logits); }
