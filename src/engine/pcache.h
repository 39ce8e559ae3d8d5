/* pcache.h — the prefix cache's two calls that the generation loop (gen.c) makes around a
 * prompt: restore the longest stored prefix before it is evaluated, store its new blocks after.
 * Opening, closing and statistics are public (pt_pcache_*, petrel.h); see pcache.c for the
 * format and ARCHITECTURE.md ("Prefixes that survive"). Internal. */
#ifndef PT_ENGINE_PCACHE_H
#define PT_ENGINE_PCACHE_H

#include <stdint.h>

#include "petrel.h"

/* Load into s the longest stored prefix of tokens[0..n-1) (scope: the API key the entries
 * belong to, NULL for none) when it is longer than what s already holds of tokens; returns
 * the positions s then holds from the store (s keeps its own prefix when the store has
 * nothing longer: 0). A model with an MTP head restored with its MTP rows holds one position
 * less than the stored prefix, and its MTP head as many: the next evaluation of the last
 * token rebuilds the hidden row the head continues from. */
int pcache_restore(pt_pcache *pc, pt_session *s, const char *scope, const int32_t *tokens, int n);
/* Store the blocks of the first n positions s holds that the folder lacks (or holds with
 * fewer sliding-window or MTP rows); returns the bytes written (0 when nothing was new or
 * writing is off). Never fails the caller: problems are warnings. */
uint64_t pcache_save(pt_pcache *pc, pt_session *s, const char *scope, int n);

#endif
