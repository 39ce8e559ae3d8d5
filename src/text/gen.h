/* gen.h — the text generation loop shared by `petrel generate`, `petrel chat`
 * and the server: bring a session to a token prompt (pt_session_sync reuses
 * the longest prefix the session holds, so a chat turn prefills only its new
 * tokens), then sample, stream and stop.
 *
 * It sits on the public engine API (petrel.h) plus the tokenizer and the
 * sampler; the session alone records which tokens its cache holds. Nothing
 * allocates per token (the text buffer grows geometrically); nothing prints:
 * text goes to the caller's emit callback.
 */
#ifndef PT_GEN_H
#define PT_GEN_H

#include <signal.h>
#include <stdint.h>

#include "petrel.h"
#include "text/sampler.h"
#include "text/tokenizer.h"

typedef struct gen gen;

/* The engine, session and vocabulary stay the caller's; the sampler is made
 * from sp. NULL with err. */
gen *gen_new(pt_engine *e, pt_session *s, const tok_vocab *v, const sampler_params *sp, pt_err *err);
void gen_free(gen *g);

/* Make the session hold exactly ids[0..n) and leave the logits of the last
 * one ready. Returns the number of leading tokens reused from the cache, or
 * -1 with err (empty prompt, longer than the context, engine error), or -2
 * when *stop became set between chunks (the cache then holds a prefix). */
int gen_prefill(gen *g, const int32_t *ids, int n, const volatile sig_atomic_t *stop, pt_err *err);

/* Replace the sampler with one made from sp (the server's per-request
 * temperature, top-p, seed...); the cache is kept. 0, or -1 with err. */
int gen_set_sampling(gen *g, const sampler_params *sp, pt_err *err);

/* Drop the whole cache (the next prefill starts from zero). */
void gen_clear(gen *g);

enum { GEN_EOG = 1, GEN_LENGTH, GEN_STOP_STRING, GEN_CONTEXT, GEN_INTERRUPT };

typedef struct gen_opts {
    int max_tokens;           /* < 0: until end of generation or the context is full */
    const char *const *stops; /* stop strings matched on the decoded text */
    int n_stops;
    int decode_flags;         /* TOK_RENDER_SPECIAL to show control tokens such as </think> */
    int ignore_eog;           /* 1: end-of-generation tokens do not stop (benchmarks) */
    /* Asked before each token is sampled (may be NULL); non-zero stops the run
     * as GEN_INTERRUPT. The server uses it to notice a client that went away. */
    int (*should_stop)(void *ud);
    void *should_stop_ud;
} gen_opts;

typedef struct gen_result {
    int reason;      /* GEN_* */
    int n_tokens;    /* tokens sampled (the EOG token not counted) */
    double t_first;  /* CLOCK_MONOTONIC seconds when the first token was sampled (0: none) */
    double t_end;
    tok_bytes text;  /* every byte generated, cut before a stop string; the caller frees */
} gen_result;

/* Callback for streamed text; return non-zero to stop (treated as interrupt). */
typedef int (*gen_emit_fn)(void *ud, const char *s, size_t n);

/* Sample and stream after gen_prefill. Bytes that might begin a stop string
 * are held back until they cannot; a character split across tokens is never
 * emitted in halves. 0, or -1 with err (engine error). */
int gen_run(gen *g, const gen_opts *o, gen_emit_fn emit, void *ud, const volatile sig_atomic_t *stop,
            gen_result *r, pt_err *err);

double gen_now(void); /* CLOCK_MONOTONIC seconds */

#endif
