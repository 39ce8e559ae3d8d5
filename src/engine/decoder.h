/* decoder.h — the one decoder every model family runs under.
 *
 * A decoder is one sequence of a model: the family's state (its KV caches and
 * scratch) plus what every family shares, allocated once at dec_new for
 * n_ctx positions, max_batch rows per chunk (a block) and tiles of `tile`
 * rows. A call evaluates n tokens at the next positions in chunks of at most
 * max_batch: token checks, embedding lookup, the family's blocks in order
 * (layer-major within a chunk: every row of the chunk through layer L before
 * layer L+1, so each routed expert is read at most once per layer per chunk;
 * row-local work runs in tiles, see model/family.h), final norm, hidden rows
 * and logits.
 * It also runs the routed-expert step of every family (router, routing,
 * lookahead prefetch, the expert store) and owns positions and truncation,
 * including what a sliding-window ring can still serve. See model/family.h
 * for the family side of the contract.
 */
#ifndef PT_ENGINE_DECODER_H
#define PT_ENGINE_DECODER_H

#include <stdint.h>

#include "model/family.h"
#include "petrel.h" /* pt_kv_cache_stats */

typedef struct dec dec;

typedef struct dec_params {
    tp_pool *pool;
    xs_store *xs;            /* the engine's expert store */
    int prefetch;            /* router lookahead into the next layer's experts */
    int max_isa;             /* highest kernel ISA level (QT_ISA_*), -1 for the best */
    int n_ctx;               /* positions */
    int max_batch;           /* rows per chunk (block) */
    int tile;                /* rows per tile of row-local work, 1..max_batch */
    uint32_t k_type, v_type; /* KV cache element types (nn/kv.h) */
    /* KV beyond RAM (nn/kv.h, kv_arena_spill): > 0 and below n_ctx: only the newest kv_hot
     * positions stay in RAM, the older ones live in an unlinked file in spill_dir */
    int kv_hot;
    const char *spill_dir;
} dec_params;

/* A decoder for the loaded model; NULL with err (bad sizes, out of memory). */
dec *dec_new(const fam_ops *ops, const void *model, const fam_desc *d, const dec_params *p,
             pt_err *err);
void dec_free(dec *x);

/* Slots of a sliding-window layer's cache for this model and tile. */
int64_t dec_ring(const fam_desc *d, int n_ctx, int tile);

/* Bytes a block row costs beyond the tile-sized scratch: the decoder's
 * row buffers (residual, normed rows, routing, the MoE's gathered inputs and
 * per-choice outputs) and the family's (fam_desc.row_floats). The memory
 * plan multiplies it by the block's rows. */
uint64_t dec_row_bytes(const fam_desc *d);

/* Distinct routed experts per trunk layer ([n_layer] counts) requested since
 * dec_routed_reset: what a prompt routes to, whatever the chunking. */
void dec_routed_reset(dec *x);
const int *dec_routed_counts(const dec *x);

int dec_n_past(const dec *x);

/* Bytes of the session's KV cache backed by memory now (it grows with the
 * positions written: nn/kv.h), and bytes reserved for the whole context. */
uint64_t dec_kv_resident(const dec *x);
uint64_t dec_kv_reserved(const dec *x);
/* Bytes of the KV spill file on disk (0 when the cache is all in RAM), and the
 * positions kept in RAM when it spills (0: all). */
uint64_t dec_kv_disk(const dec *x);
int dec_kv_hot(const dec *x);
/* The spill's cache of selected pages (kv_arena_cache_pages): bytes kept, bound, selected
 * spilled pages and hits so far. */
void dec_kv_cache(const dec *x, pt_kv_cache_stats *st);
/* Before rows of positions below n are written other than by dec_eval (a
 * prefix restored from disk): file blocks for them when the cache spills.
 * 0, or -1 with err (a full disk); dec_set_restored then writes them back. */
int dec_kv_reserve(dec *x, int n, pt_err *err);

/* Keep at most the first n positions; returns the positions kept (0 when a
 * sliding-window ring no longer holds the keys position n's window needs). */
int dec_truncate(dec *x, int n);

/* Progress of dec_eval: called after each layer of each chunk with the work
 * done in this call out of its total, one unit being one row through one layer
 * (done = rows of earlier chunks x n_layer + rows of this chunk x layers done;
 * total = n x n_layer). Work, not positions, so that any order of chunks and
 * layers can report it. */
typedef void (*dec_progress_fn)(void *ud, int64_t done, int64_t total);
/* fn NULL: no reports. */
void dec_set_progress(dec *x, dec_progress_fn fn, void *ud);

/* Evaluate tokens[n] at positions n_past.. . logits: NULL, [n][n_vocab] when
 * all_rows, else [n_vocab] for the last token. hidden: NULL or [n][n_embd],
 * the state after the final norm. 0, or -1 with err; the chunks completed
 * before an error stay cached. */
int dec_eval(dec *x, const int32_t *tokens, int n, float *logits, int all_rows, float *hidden,
             pt_err *err);

/* ===== The state's rows, for the prefix cache (engine/pcache.c) ===== */

/* The family's per-position buffers (fam_ops.kv_bufs), at most max; returns how many. */
int dec_kv_bufs(dec *x, fam_kv_buf *out, int max);
/* Sliding-window width (0: none) and ring slots. */
int dec_window(const dec *x);
int64_t dec_ring_slots(const dec *x);
/* Lowest position whose rows the rings still hold (rows [lo, n_past) are there). */
int64_t dec_ring_lo(const dec *x);
/* After the caller wrote rows into the buffers: the trunk holds n positions, the rings
 * positions ring_lo..n-1, the MTP head n_mtp. */
void dec_set_restored(dec *x, int n, int64_t ring_lo, int n_mtp);

/* NextN/MTP draft logits (see session_mtp). 0, or -1 with err. */
int dec_mtp(dec *x, const int32_t *tokens, const float *hidden_prev, int n, float *logits,
            int last_only, float *hidden_out, pt_err *err);
/* The MTP head holds n positions whose rows its buffers still have (no MTP head: nothing). */
void dec_mtp_hold(dec *x, int n);
/* Keep at most n MTP positions; returns the positions held (0 without an MTP head). */
int dec_mtp_keep(dec *x, int n);

#endif
