/* spec.h — speculative decoding with the model's NextN/MTP head, behind pt_gen (engine/gen.c).
 *
 * The generation loop asks for "the logits after this token"; with drafting on, spec.c
 * answers from a verify pass that evaluated the token and the MTP head's drafts after it in
 * one forward, and evaluates again only when the sampled token leaves the drafted path. The
 * sampler never sees anything else: every token is drawn by the whole chain (biases,
 * penalties, grammar, temperature, truncations) from the target's own logits for its
 * position, bit-identical to a one-token decode (batch invariance). See spec.c. Internal. */
#ifndef PT_SPEC_H
#define PT_SPEC_H

#include <signal.h>

#include "petrel.h"

typedef struct spec spec;

/* n_draft >= 1 drafts per verify; n_tok: ids >= n_tok are padded output rows never drafted.
 * NULL with err. */
spec *spec_new(pt_session *s, int n_draft, int n_tok, char *err, size_t err_len);
void spec_free(spec *sp);
int spec_n_draft(const spec *sp);
/* pt_session_sync that also keeps the trunk's hidden rows and fills the MTP cache up to the
 * last prompt position. Same returns as pt_session_sync. */
int spec_prefill(spec *sp, const int32_t *ids, int n, float *logits,
                 const volatile sig_atomic_t *stop, char *err, size_t err_len);
/* Start of a run (pt_gen_start): zero the run's statistics. */
void spec_begin(spec *sp);
/* logits[n_vocab] after token tok at the session's next position: from the current verify
 * pass when tok is the draft there, else from a new draft + verify (or a one-token forward
 * while backed off). 0, or -1 with err. */
int spec_next(spec *sp, int32_t tok, float *logits, char *err, size_t err_len);
/* End of a run: drafted positions beyond the tokens handed out leave the session. */
void spec_end(spec *sp);
/* The session was cleared (pt_gen_clear). */
void spec_clear(spec *sp);
/* The session's positions were restored from disk (its MTP head with them, or not): no
 * hidden rows are known below them. */
void spec_restored(spec *sp);
/* Bring the MTP head up to the trunk's last position but one (before a save). 0 or -1. */
int spec_catch_up(spec *sp);
void spec_stats(const spec *sp, pt_draft_stats *st);
/* Tests and benchmarks: draft ids[i] at generated-token index i instead of the MTP head (a
 * replay of an earlier run: the mechanism's ceiling). n = 0 goes back to the MTP head. */
int spec_set_replay(spec *sp, const int32_t *ids, int n);
/* 0: draft on every token, never back off (tests, benchmarks); 1: adaptive (default). */
void spec_set_adaptive(spec *sp, int on);

#endif
