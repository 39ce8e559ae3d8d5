/* experts.h — the expert store: where routed experts' bytes come from, and
 * the bounded per-layer cache they are streamed into.
 *
 * Two modes:
 *  - resident: expert weights are read straight from the memory-mapped GGUF
 *    (the OS pages them in); no cache, no I/O of our own;
 *  - streaming: each MoE layer owns `slots` fixed slots in one arena allocated
 *    at open; an expert is read explicitly (never through mmap page faults) into
 *    a slot as one record (its gate|up|down slices, or one contiguous record of
 *    an expert pack). Reads go through xio (io_uring / pread pool).
 *
 * Per token and layer the forward pass names the experts it needs
 * (xs_begin), then takes them one at a time (xs_take, xs_next): cached experts
 * first, so they are computed while the misses are read, then each miss as it
 * lands. An expert the current token still needs is never evicted, nor one
 * taken and not yet released; when a layer has fewer slots than experts
 * needed, the rest are read into the slots of experts released (a rolling
 * wave: each released slot starts its next read at the next call). The
 * caller computes every expert into its own buffer and sums in selection
 * order, so results never depend on timing.
 *
 * Replacement: LRU, or LFU with exponential decay per token (XS_LFU). Pinned
 * experts (hot ones from usage statistics) occupy slots that are never evicted.
 *
 * Checked reads: with a checksum table (xs_config.sums, a valid pack's), every
 * streamed expert is hashed (XXH3-64) the first time it is delivered after a
 * read, before anything computes with it. A bad one is never used: it is read
 * again once; a pack record that fails twice is then read from the GGUF; bytes
 * from the GGUF that fail twice fail the request with an error naming the
 * tensors and offsets. Each bad read is counted (xs_stats.bad_reads) and the
 * first one warned about on stderr. Without a table, and in resident mode
 * (experts read through the memory map), nothing is checked.
 */
#ifndef PT_RUNTIME_EXPERTS_H
#define PT_RUNTIME_EXPERTS_H

#include <stdint.h>
#include <stdio.h>

#include "format/gguf.h"
#include "format/xpack.h"
#include "runtime/usage.h"

enum { XS_LRU = 0, XS_LFU = 1 };

/* The routed-expert tensors of one layer (n_mats = 0: a dense layer). */
typedef xp_layer_desc xs_layer_desc;

typedef struct xs_config {
    int streaming;      /* 0: resident (mmap), 1: streaming through the cache */
    int slots;          /* slots per MoE layer (streaming), >= 1 */
    int policy;         /* XS_LRU or XS_LFU */
    int io;             /* XIO_AUTO, XIO_URING, XIO_PREAD */
    int direct;         /* 1: try O_DIRECT (page cache untouched), 0: buffered reads */
    const xpack *pack;  /* expert pack to read records from (validated), or NULL: the GGUF */
    const xpack *sums;  /* pack whose checksum table checks every streamed read (the pack in use,
                           or a valid one kept for its table), or NULL: reads unchecked */
    usage_table *usage; /* request counts to update, or NULL */
    FILE *trace;        /* routing trace: one line "LAYER E1 E2 ..." per request, or NULL */
} xs_config;

typedef struct xs_stats {
    uint64_t hits, misses;  /* expert requests served from the cache / read */
    uint64_t bytes_read;    /* bytes read from storage */
    uint64_t reads;         /* read requests completed */
    double wait_s;          /* time xs_take spent blocked on reads */
    double read_s;          /* sum over misses of submit-to-completion time */
    uint64_t pinned;        /* experts pinned in the cache */
    uint64_t prefetched;    /* reads issued ahead of the router */
    uint64_t prefetch_used; /* ... whose expert was then requested */
    uint64_t bad_reads;     /* expert reads that failed their checksum (read again, never used) */
    uint64_t fallbacks;     /* ... of which pack records then read from the GGUF */
    uint64_t checked;       /* expert reads checked against the checksum table */
    double verify_s;        /* time spent hashing them */
} xs_stats;

typedef struct xs_store xs_store;

/* Open the store for layers[n_layers] (indexed by model layer). */
xs_store *xs_open(const gguf_ctx *g, const xs_layer_desc *layers, int n_layers,
                  const xs_config *cfg, pt_err *err);
void xs_close(xs_store *s);

/* Bytes one slot of model layer l occupies in streaming mode (0 for a dense
 * layer), reading from `pack` when not NULL; the engine sizes the cache from it. */
uint64_t xs_slot_bytes(const xs_layer_desc *layer, const xpack *pack, int l, int direct);

/* Request experts[n] (distinct ids) of `layer` for the current token(s). */
int xs_begin(xs_store *s, int layer, const int *experts, int n, pt_err *err);

/* Read experts[n] of `layer` into slots that are never evicted (hot experts
 * from usage statistics), leaving at least one slot of the layer free. Waits
 * for the reads. Returns how many were pinned, or -1 on a read error. */
int xs_pin(xs_store *s, int layer, const int *experts, int n, pt_err *err);

/* Start reading experts[n] of `layer` ahead of need (router lookahead) into
 * empty or cold slots; never evicts a pinned expert or one still needed by the
 * request in progress. Does not wait. 0, or -1 on a submission error. */
int xs_prefetch(xs_store *s, int layer, const int *experts, int n, pt_err *err);

/* Deliver the next requested expert: returns 1 with *expert and mats[] (data
 * of each matrix's slice, in the order of xs_layer_desc.mats) set, 0 when every
 * requested expert has been delivered, -1 on a read error or on bytes that
 * fail their checksum after every retry (err set). Waits for a read when none
 * is ready. The expert is held (its slot takes no other expert) until
 * xs_release, or the next xs_next/xs_begin call on this layer. Reads of the
 * experts still missing go into released slots as soon as the store is called
 * (xs_take or xs_next), so the disk works while the caller computes.
 * XS_AGAIN: none can be delivered before the caller releases one it holds
 * (every slot the rest could go to is held). Not thread-safe: callers on
 * several threads take a lock around each call. */
enum { XS_AGAIN = 2 };
int xs_take(xs_store *s, int layer, int *expert, const uint8_t *mats[3], pt_err *err);
void xs_release(xs_store *s, int layer, int expert);

/* xs_take after releasing every expert of the layer delivered so far: for a
 * caller that is done with one before it asks for the next. */
int xs_next(xs_store *s, int layer, int *expert, const uint8_t *mats[3], pt_err *err);

void xs_get_stats(const xs_store *s, xs_stats *st);
int xs_io_backend(const xs_store *s); /* XIO_* in use; 0 in resident mode */
int xs_uses_pack(const xs_store *s);
int xs_direct(const xs_store *s); /* 1 when reads bypass the page cache */
int xs_slots(const xs_store *s);  /* slots per MoE layer (0 in resident mode) */

#endif
