/* progress.h — the progress span of a prompt evaluation (pt_session_set_progress
 * in petrel.h), for the library code that evaluates a prompt chunk by chunk:
 * pt_session_sync (engine.c) and the drafting prefill (text/spec.c). Between
 * begin and end, every pt_session_eval on the session reports its layers'
 * work to the session's callback, added up over the calls. Internal. */
#ifndef PT_ENGINE_PROGRESS_H
#define PT_ENGINE_PROGRESS_H

#include "petrel.h"

/* tokens[0..n_reused) are kept, tokens[n_reused..n_prompt) follow: reports
 * done 0 when a callback is set (nothing to evaluate: no span). */
void session_progress_begin(pt_session *s, int n_prompt, int n_reused);
/* The span ends (whether it completed, was stopped or failed). */
void session_progress_end(pt_session *s);

#endif
