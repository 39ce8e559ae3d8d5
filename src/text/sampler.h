/* sampler.h — choosing the next token from logits, and stop strings.
 *
 * The chain, in this order (Hugging Face / OpenAI semantics):
 *   logit bias (-100: a ban) -> the grammar's mask (text/grammar.h) -> penalties (repetition,
 * frequency, presence, over the last `penalty_last_n` accepted tokens) -> greedy if temp <= 0 ->
 * temperature -> top-k -> top-p
 *   -> min-p -> draw.
 * Repetition divides a positive logit and multiplies a negative one by the
 * penalty (llama.cpp / CTRL); frequency subtracts count * f; presence
 * subtracts p once per token seen. Greedy ties go to the lowest id, like the
 * reference runs.
 *
 * The random numbers come from our own xoshiro256** generator seeded with
 * splitmix64(seed): the same seed, logits and history give the same tokens on
 * every platform (no rand(), no global state). All scratch memory (candidate
 * arrays [n_vocab], token counts [n_vocab], the history ring) is allocated by
 * sampler_new; sampling and accepting never allocate.
 */
#ifndef PT_SAMPLER_H
#define PT_SAMPLER_H

#include <stddef.h>
#include <stdint.h>

#include "common.h"
#include "format/gguf.h"
#include "petrel.h"

/* The public pt_sampling (petrel.h) itself: temp, top_k, top_p, min_p, the
 * repeat / frequency / presence penalties over the last penalty_last_n
 * tokens, and the seed. */
typedef pt_sampling sampler_params;

/* Defaults: temp 0.7, top-p 0.95, top-k off, min-p off, no penalties, seed 0. */
void sampler_params_default(sampler_params *p);
/* Override the defaults with the sampling values the model publishes
 * (general.sampling.temp / top_k / top_p / min_p, as llama.cpp's converter
 * writes them from generation_config.json). Returns how many it found. */
int sampler_params_from_gguf(sampler_params *p, const gguf_ctx *g);

typedef struct pt_sampler sampler; /* the public pt_sampler is this sampler */

/* NULL with err when a parameter is out of range or memory is short. */
sampler *sampler_new(const sampler_params *p, int n_vocab, pt_err *err);
void sampler_free(sampler *s);
/* Forget the history (penalties); the random stream continues. */
void sampler_reset(sampler *s);
/* Record a generated token in the penalty history and advance the grammar (when there is
 * one) over it: 0, or -1 when the grammar does not allow it (its position is unchanged). */
int sampler_accept(sampler *s, int32_t tok);
/* Record a token in the penalty history only (the prompt's tokens). */
void sampler_note(sampler *s, int32_t tok);
/* Pick a token from logits[n_vocab] (modified in place by the bias, the grammar's mask and
 * the penalties). Returns the id; -1 when a grammar allows no token (stuck, or out of memory).
 * Does not accept it. */
int32_t sampler_sample(sampler *s, float *logits);
/* 1 when there is a grammar and what was accepted is a whole sentence of it. */
int sampler_grammar_done(const sampler *s);

/* ===== Stop strings ===== */

/* Earliest occurrence of any stop string in text[0..len), searching from byte
 * `from`; -1 when none. With none found, *hold is the length of the longest
 * suffix of text that is a proper prefix of some stop string: bytes that must
 * not be shown yet because the next token may complete a stop string. */
long stop_find(const char *const *stops, int n_stops, const char *text, size_t len, size_t from,
               size_t *hold);

#endif
