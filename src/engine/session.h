/* session.h — what engine/pcache.c needs of an engine and a session beyond petrel.h: the
 * decoder, the token record, and what decides the bytes of a KV row (model fingerprint,
 * cache types, kernel level). Internal. */
#ifndef PT_ENGINE_SESSION_H
#define PT_ENGINE_SESSION_H

#include <stdint.h>

#include "engine/decoder.h"
#include "petrel.h"

dec *engine_session_dec(pt_session *s);
/* [n_ctx] token ids; [pt_session_n_past] valid */
int32_t *engine_session_hist(pt_session *s);
/* The model's fingerprint (SHA-256 over its files' sizes and headers: format/xpack.h). */
const uint8_t *engine_fingerprint(const pt_engine *e);
/* KV element types (ggml ids) and the kernel level rows are computed with. */
void engine_kv_key(const pt_engine *e, uint32_t *k_type, uint32_t *v_type, int32_t *isa);

#endif
