/* store.h — the responses `petrel serve` keeps for the Responses API: what
 * `previous_response_id` continues from and `GET` / `DELETE /v1/responses/{id}`
 * read. Bounded in memory (entries and bytes; the oldest go first), private to
 * the API key (tenant) that made each one, safe to call from any thread. */
#ifndef PT_SERVER_STORE_H
#define PT_SERVER_STORE_H

#include <jansson.h>
#include <stddef.h>

typedef struct rstore rstore;

/* NULL when out of memory. */
rstore *rstore_new(int max_entries, size_t max_bytes);
void rstore_free(rstore *st);

/* Keep the response `id` of `tenant`: its JSON (the object GET returns) and the
 * conversation it ended (chat-shaped messages: the input without the
 * instructions, then the answer), both copied. 0, or -1 (out of memory, or
 * larger than the store). */
int rstore_put(rstore *st, const char *id, int tenant, const char *response_json,
               const json_t *conversation);
/* 0 and copies (free / json_decref them; either pointer may be NULL when not
 * wanted), or -1 when the store has no such id for this tenant. */
int rstore_get(rstore *st, const char *id, int tenant, char **response_json, json_t **conversation);
/* 0 removed, -1 no such id for this tenant. */
int rstore_delete(rstore *st, const char *id, int tenant);

#endif
