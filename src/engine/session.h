/* session.h — what the engine's own modules need of a session beyond petrel.h: the
 * generation loop and drafting (gen.c, spec.c), the prefix cache (pcache.c) and the tests.
 * The NextN/MTP head's cache, the progress span of a prompt evaluated chunk by chunk, the
 * decoder and token record, and what decides the bytes of a KV row (model fingerprint, cache
 * types, kernel level). Front ends never see these: they reach a session's generation
 * through pt_gen_* (petrel.h). Internal. */
#ifndef PT_ENGINE_SESSION_H
#define PT_ENGINE_SESSION_H

#include <stdint.h>

#include "engine/decoder.h"
#include "petrel.h"

/* ===== The NextN/MTP head (drafting) ===== */

/* MTP/NextN draft rows: row i from (tokens[i], hidden_prev[i]), hidden_prev[i] being the trunk
 * state of the position before. logits: NULL (only the MTP cache advances: no
 * vocabulary-wide head is computed), [n][n_vocab], or with last_only [n_vocab] for the last
 * row. hidden_out: NULL or [n][n_embd], the MTP block's state after its shared-head norm (what
 * a chained draft feeds back as the next row's hidden_prev). MTP position j is made from trunk
 * position j's hidden state and token j+1; the MTP cache appends at session_mtp_n_past.
 * 0, or -1 with err (a model without an MTP head says so). */
int session_mtp(pt_session *s, const int32_t *tokens, const float *hidden_prev, int n,
                float *logits, int last_only, float *hidden_out, char *err, size_t err_len);
/* Positions the MTP head's cache holds (0 without one). pt_session_truncate(s, n) cuts it to
 * at most n - 1 (position n - 1 saw token n, which is gone). */
int session_mtp_n_past(const pt_session *s);
/* Keep at most n MTP positions (drafts chained past the trunk are taken back); returns the
 * positions held. */
int session_mtp_keep(pt_session *s, int n);
/* pt_session_truncate that keeps the MTP positions made from tokens up to position n (n of
 * them, when the head holds them), for a caller that evaluates the same token at n next: its
 * hidden row is what the head continues from. */
int session_truncate_keep_mtp(pt_session *s, int n);

/* ===== A prompt ===== */

/* 0 when tokens[0..n) can be a prompt of s (not empty, within its context, every id in the
 * model's vocabulary); -1 with err naming what is wrong. pt_session_sync and the drafting
 * prefill check with it before they touch the cache. */
int session_check_prompt(const pt_session *s, const int32_t *tokens, int n, char *err,
                         size_t err_len);

/* ===== The progress span of a prompt (pt_session_set_progress) =====
 * For the code that evaluates a prompt chunk by chunk: pt_session_sync and the drafting
 * prefill (spec.c). Between begin and end, every pt_session_eval on the session reports its
 * layers' work to the session's callback, added up over the calls. */

/* tokens[0..n_reused) are kept, tokens[n_reused..n_prompt) follow: reports done 0 when a
 * callback is set (nothing to evaluate: no span). */
void session_progress_begin(pt_session *s, int n_prompt, int n_reused);
/* The span ends (whether it completed, was stopped or failed). */
void session_progress_end(pt_session *s);

/* ===== For the prefix cache ===== */

dec *engine_session_dec(pt_session *s);
/* [n_ctx] token ids; [pt_session_n_past] valid */
int32_t *engine_session_hist(pt_session *s);
/* The model's fingerprint (SHA-256 over its files' sizes and headers: format/xpack.h). */
const uint8_t *engine_fingerprint(const pt_engine *e);
/* KV element types (ggml ids) and the kernel level rows are computed with. */
void engine_kv_key(const pt_engine *e, uint32_t *k_type, uint32_t *v_type, int32_t *isa);

#endif
