/* api_text.c — the public buffers, vocabulary, sampling and sampler functions
 * of petrel.h, over the tokenizer (text/tokenizer.c) and the sampler
 * (text/sampler.c), and the loading of the engine's text side at open.
 *
 * The internal buffers, sampling parameters and sampler are the public types
 * themselves (pt_buf, pt_ids, pt_sampling, pt_sampler); the static asserts
 * below keep the flag values in step. */
#include <assert.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common.h"
#include "engine/api_text.h"
#include "text/grammar.h"
#include "text/utf8.h"

static_assert((int)PT_TOKENIZE_ADD_SPECIAL == (int)TOK_ADD_SPECIAL, "tokenize flags");
static_assert((int)PT_TOKENIZE_PARSE_SPECIAL == (int)TOK_PARSE_SPECIAL, "tokenize flags");
static_assert((int)PT_DETOKENIZE_RENDER_SPECIAL == (int)TOK_RENDER_SPECIAL, "detokenize flags");

/* ===== Buffers and the clock ===== */

int pt_buf_append(pt_buf *b, const char *s, size_t n) {
    return tok_bytes_append(b, s, n);
}
void pt_buf_free(pt_buf *b) {
    tok_bytes_free(b);
}
int pt_ids_push(pt_ids *a, int32_t id) {
    return tok_ids_push(a, id);
}
void pt_ids_free(pt_ids *a) {
    tok_ids_free(a);
}
void pt_spans_free(pt_spans *s) {
    tok_spans_free(s);
}
double pt_now(void) {
    return pt_now_s();
}
int pt_utf8_repair(const char *s, size_t n, pt_buf *out) {
    return utf8_repair(s, n, out);
}

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
    pthread_mutex_init(&t->gv_lock, NULL);
}

void engine_text_free(engine_text *t) {
    gram_vocab_free(t->gv);
    pthread_mutex_destroy(&t->gv_lock);
    tok_free(t->vocab);
    memset(t, 0, sizeof *t);
}

const tok_vocab *engine_vocab(const pt_engine *e, char *err, size_t err_len) {
    const engine_text *t = engine_text_of(e);
    if (!t->vocab)
        put_err(err, err_len, t->vocab_err[0] ? t->vocab_err : "the model has no vocabulary");
    return t->vocab;
}

const struct gram_vocab *engine_gram_vocab(const pt_engine *e, char *err, size_t err_len) {
    engine_text *t = (engine_text *)engine_text_of(e); /* the lazily built trie is the one
                                                          mutable part, behind its lock */
    if (!engine_vocab(e, err, err_len)) return NULL;
    pthread_mutex_lock(&t->gv_lock);
    if (!t->gv) {
        pt_err pe = {{0}};
        t->gv = gram_vocab_new(t->vocab, &pe);
        if (!t->gv) put_err(err, err_len, pe.msg);
    }
    gram_vocab *gv = t->gv;
    pthread_mutex_unlock(&t->gv_lock);
    return gv;
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

int pt_tokenize_spans(const pt_engine *e, const char *text, size_t len, int flags,
                      const pt_spans *plain, pt_ids *out, char *err, size_t err_len) {
    const tok_vocab *v = engine_vocab(e, err, err_len);
    if (!v) return -1;
    pt_err pe = {{0}};
    int rc = tok_encode_spans(v, text, len, flags, plain, out, &pe);
    if (rc) put_err(err, err_len, pe.msg);
    return rc ? -1 : 0;
}

int pt_detokenize(const pt_engine *e, const int32_t *ids, size_t n, int flags, pt_buf *out,
                  char *err, size_t err_len) {
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

void pt_sampling_default(pt_sampling *p) {
    sampler_params_default(p);
}
void pt_engine_sampling(const pt_engine *e, pt_sampling *p) {
    *p = engine_text_of(e)->sp;
}

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
    if (fields & PT_SAMPLING_LOGIT_BIAS)
        p->logit_bias = with->logit_bias, p->n_logit_bias = with->n_logit_bias;
    if (fields & PT_SAMPLING_GRAMMAR) p->grammar = with->grammar;
}

/* The public sampler is the internal one (sampler.h names it pt_sampler). */
pt_sampler *pt_sampler_new(const pt_sampling *p, int n_vocab, char *err, size_t err_len) {
    pt_err pe = {{0}};
    pt_sampler *s = sampler_new(p, n_vocab, &pe);
    if (!s) put_err(err, err_len, pe.msg);
    return s;
}

void pt_sampler_free(pt_sampler *s) {
    sampler_free(s);
}
void pt_sampler_reset(pt_sampler *s) {
    sampler_reset(s);
}
int pt_sampler_accept(pt_sampler *s, int32_t tok) {
    return sampler_accept(s, tok);
}
int pt_sampler_grammar_done(const pt_sampler *s) {
    return sampler_grammar_done(s);
}
int32_t pt_sampler_sample(pt_sampler *s, float *logits) {
    return sampler_sample(s, logits);
}
