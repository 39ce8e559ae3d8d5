/* gen.h — what tests and benchmarks may do to a generation beyond petrel.h: replace the MTP
 * head's drafts by a replay of known tokens (the mechanism's ceiling) and switch drafting's
 * back-off off. Internal: front ends have no use for either. */
#ifndef PT_ENGINE_GEN_H
#define PT_ENGINE_GEN_H

#include <stdint.h>

#include "petrel.h"

/* Draft from ids[n] (the generated tokens of an earlier run, index 0 the first) instead of the
 * MTP head; n = 0: the MTP head again. 0, or -1 (drafting off, out of memory). */
int gen_set_draft_replay(pt_gen *g, const int32_t *ids, int n);
/* 0: draft on every token, never back off; 1 (default): adaptive. */
void gen_set_draft_adaptive(pt_gen *g, int on);

#endif
