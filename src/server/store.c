/* store.c — the bounded, per-tenant store of Responses API responses (store.h).
 * A short array in insertion order: lookups are linear (a few hundred entries
 * at most) and eviction drops the oldest. Conversations are kept as compact
 * JSON text, so an entry's size is what it costs. */
#include "server/store.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

typedef struct rentry {
    char *id;
    int tenant;
    char *response; /* JSON text */
    char *conv;     /* JSON text of the conversation */
    size_t bytes;
} rentry;

struct rstore {
    pthread_mutex_t mu;
    rentry *e; /* [n], oldest first */
    int n, cap;
    size_t bytes, max_bytes;
};

rstore *rstore_new(int max_entries, size_t max_bytes) {
    rstore *st = calloc(1, sizeof *st);
    if (!st) return NULL;
    st->cap = max_entries > 0 ? max_entries : 1;
    st->e = calloc((size_t)st->cap, sizeof *st->e);
    if (!st->e) {
        free(st);
        return NULL;
    }
    st->max_bytes = max_bytes;
    pthread_mutex_init(&st->mu, NULL);
    return st;
}

static void entry_free(rentry *e) {
    free(e->id);
    free(e->response);
    free(e->conv);
}

/* Remove entry i (mu held). */
static void drop(rstore *st, int i) {
    st->bytes -= st->e[i].bytes;
    entry_free(&st->e[i]);
    memmove(st->e + i, st->e + i + 1, (size_t)(st->n - i - 1) * sizeof *st->e);
    st->n--;
}

void rstore_free(rstore *st) {
    if (!st) return;
    for (int i = 0; i < st->n; i++)
        entry_free(&st->e[i]);
    free(st->e);
    pthread_mutex_destroy(&st->mu);
    free(st);
}

static int find(const rstore *st, const char *id, int tenant) {
    for (int i = 0; i < st->n; i++)
        if (st->e[i].tenant == tenant && !strcmp(st->e[i].id, id)) return i;
    return -1;
}

int rstore_put(rstore *st, const char *id, int tenant, const char *response_json,
               const json_t *conversation) {
    rentry e = {.id = strdup(id),
                .tenant = tenant,
                .response = strdup(response_json),
                .conv = json_dumps(conversation, JSON_COMPACT)};
    if (!e.id || !e.response || !e.conv) {
        entry_free(&e);
        return -1;
    }
    e.bytes = strlen(e.id) + strlen(e.response) + strlen(e.conv) + sizeof e;
    if (e.bytes > st->max_bytes) {
        entry_free(&e);
        return -1;
    }
    pthread_mutex_lock(&st->mu);
    int old = find(st, id, tenant);
    if (old >= 0) drop(st, old);
    while (st->n > 0 && (st->n == st->cap || st->bytes + e.bytes > st->max_bytes))
        drop(st, 0);
    st->e[st->n++] = e;
    st->bytes += e.bytes;
    pthread_mutex_unlock(&st->mu);
    return 0;
}

int rstore_get(rstore *st, const char *id, int tenant, char **response_json,
               json_t **conversation) {
    if (response_json) *response_json = NULL;
    if (conversation) *conversation = NULL;
    pthread_mutex_lock(&st->mu);
    int i = find(st, id, tenant);
    int rc = -1;
    if (i >= 0) {
        char *r = response_json ? strdup(st->e[i].response) : NULL;
        json_t *c = conversation ? json_loads(st->e[i].conv, 0, NULL) : NULL;
        if ((!response_json || r) && (!conversation || c)) {
            if (response_json) *response_json = r;
            if (conversation) *conversation = c;
            rc = 0;
        } else {
            free(r);
            json_decref(c);
        }
    }
    pthread_mutex_unlock(&st->mu);
    return rc;
}

int rstore_delete(rstore *st, const char *id, int tenant) {
    pthread_mutex_lock(&st->mu);
    int i = find(st, id, tenant);
    if (i >= 0) drop(st, i);
    pthread_mutex_unlock(&st->mu);
    return i >= 0 ? 0 : -1;
}
