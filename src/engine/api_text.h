/* api_text.h — what the engine keeps of the model's text side, loaded from the
 * GGUF the engine already opened (the model file is opened once): the
 * vocabulary, the chat format and the published sampling defaults. engine.c
 * owns one per engine (engine_text_load at open, engine_text_free at close);
 * api_text.c, api_chat.c and engine/gen.c implement the public text, chat,
 * sampling and generation functions of petrel.h over it. Internal. */
#ifndef PT_API_TEXT_H
#define PT_API_TEXT_H

#include <pthread.h>

#include "format/gguf.h"
#include "petrel.h"
#include "text/chat.h"
#include "text/sampler.h"
#include "text/tokenizer.h"

typedef struct engine_text {
    tok_vocab *vocab; /* NULL when the GGUF has none usable (why: vocab_err) */
    char vocab_err[512];
    const chat_fmt *fmt; /* detected from the GGUF; NULL when unknown */
    sampler_params sp;   /* petrel's defaults overridden by general.sampling.* */
    /* The vocabulary's token trie for grammars (text/grammar.h): built by the first
     * pt_grammar_new, under gv_lock, then read-only. */
    struct gram_vocab *gv;
    pthread_mutex_t gv_lock;
} engine_text;

/* The token trie of the engine's vocabulary, built on first use; NULL with err. */
const struct gram_vocab *engine_gram_vocab(const pt_engine *e, char *err, size_t err_len);

/* Fill t from g. Never fails: a missing or malformed vocabulary is recorded
 * in vocab_err (a model opened for token ids does not need one). */
void engine_text_load(engine_text *t, const gguf_ctx *g);
void engine_text_free(engine_text *t);

/* The engine's (engine.c). */
const engine_text *engine_text_of(const pt_engine *e);

/* The vocabulary, or NULL with the reason in err (err may be NULL). */
const tok_vocab *engine_vocab(const pt_engine *e, char *err, size_t err_len);

#endif
