/* plan.h — the memory planner: how a model is served within a memory budget.
 *
 * A pure function of numbers: no I/O, no model, no globals, so the plan for a
 * 744B model at 16 GB can be computed (and tested) on any machine. The engine
 * gathers the inputs (budget, resident and routed bytes from the GGUF header,
 * one cache slot's bytes per layer from the expert store, the family's KV cache
 * arithmetic) and turns the result into an expert store.
 *
 * The policy, in order:
 *  1. the KV cache is budgeted for the context wanted: the one asked for, else
 *     the model's training context (PT_DEFAULT_CTX when unknown). A context
 *     not asked for is capped by the KV cache's share of the budget: what is
 *     left after the resident tensors, the margin, a prompt block of
 *     PLAN_BLOCK_MAX rows (see 6.) and an expert-cache floor of
 *     two tokens' worth of experts per layer (2 x n_expert_used slots, at most
 *     n_expert), so a long default context never starves the expert cache
 *     (it never goes below min(training context, PT_DEFAULT_CTX), the default
 *     before the share existed: below that the floor yields, as it did).
 *     Positions beyond the share (or beyond a share forced with kv_ram, for
 *     any context) spill to the SSD: the context is the one wanted, the
 *     share's positions (kv_hot) stay in RAM, the older ones live in a file
 *     in spill_dir (nn/kv.h, kv_arena_spill); only the share counts as a
 *     fixed cost. The KV cache is paid for as it is used (pages backed as
 *     positions are written, nn/kv.h), so a large context costs nothing until
 *     it is filled; the plan still counts the share whole, since a session
 *     may fill it;
 *  2. resident tensors + KV cache + a margin (scratch, I/O buffers, allocator)
 *     are fixed costs;
 *  3. when the whole model fits beside them (fixed + routed bytes <= budget) and
 *     slots are not forced, routed experts are read through the memory map;
 *  4. otherwise the rest of the budget becomes an expert cache of equal slot
 *     counts per MoE layer (at most n_expert: more could never be used);
 *  5. when not even one slot per layer fits, the plan is refused with a message
 *     naming every number, so the user knows what to change.
 *  6. when experts stream, a prompt runs in blocks as large as half of what
 *     the budget leaves after the fixed costs and one slot per layer allows
 *     (row_bytes per row; at most the context and PLAN_BLOCK_MAX, at least
 *     the default batch; this may take the cache below the floor of 1.):
 *     each routed expert is then read once per layer per block instead of
 *     once per 256-row chunk. The block's activations are taken from the
 *     expert cache before the slots are counted (the default batch's are in
 *     the margin, as before). In mmap mode with a known budget the block is
 *     half of what the fixed costs and the whole model leave, with the same
 *     bounds: fewer, larger blocks run a long prompt faster in memory too
 *     (4096-token prompts, 2026-12-06: glm-dsa 1.1-1.3x, gemma4-shaped 1.05-1.1x
 *     with 4096-row blocks against 256).
 * A share of the cache (PLAN_PIN_SHARE by default) may hold experts pinned from
 * usage history; the engine picks them.
 *
 * Non-goals: measuring the machine (runtime/budget.c does that), sizing scratch
 * buffers exactly (the margin covers them).
 */
#ifndef PT_RUNTIME_PLAN_H
#define PT_RUNTIME_PLAN_H

#include <stdint.h>

#include "common.h"
#include "petrel.h" /* PT_DEFAULT_CTX, PT_EXPERTS_MMAP */

#define PLAN_MIB 1048576.0           /* bytes in a MiB: --kv-ram-mb, the plan line's MB */
#define PLAN_GIB (1024.0 * PLAN_MIB) /* bytes in a GiB: --ram, --pin-gb, the plan line's GB */
#define PLAN_MARGIN (512ull << 20)   /* bytes kept free for scratch, I/O and the allocator */
#define PLAN_PIN_SHARE 0.25          /* default share of the expert cache given to pinned experts */
#define PLAN_BLOCK_MAX                                                                             \
    8192 /* most rows of a prompt block: a 32k prompt reads each expert                            \
            4 times a layer, not 128 as in 256-row chunks */

typedef struct plan_in {
    uint64_t budget;   /* bytes the process may use; 0: unknown (experts through the mmap) */
    uint64_t resident; /* bytes of every tensor but the routed experts */
    uint64_t routed;   /* bytes of the routed experts on disk */
    const uint64_t
        *slot_bytes;     /* [n_layers] bytes of one cache slot of each layer (one expert's
                            record, aligned for the reads); 0 for layers without routed experts */
    int n_layers;        /* entries of slot_bytes (every block, MTP included) */
    int n_expert;        /* routed experts per MoE layer: the most slots a layer can use */
    int n_expert_used;   /* experts chosen per token (the floor is twice this per layer) */
    uint64_t kv_per_pos; /* KV cache bytes per position, all layers (at the cache's element size) */
    uint64_t kv_fixed;   /* KV cache bytes independent of the context (sliding-window rings);
                            counted whole even for a context shorter than a ring */
    int n_ctx;           /* positions wanted; 0: PT_DEFAULT_CTX capped by n_ctx_train */
    int n_ctx_train;     /* the model's training context; 0: unknown (no cap) */
    int slots;           /* >0: this many slots per layer (forced); 0: automatic;
                            PT_EXPERTS_MMAP: read experts through the mmap */
    uint64_t pin_bytes;  /* cache bytes for pinned experts; 0: PLAN_PIN_SHARE of the cache */
    int no_pin;          /* 1: pin nothing (pin_bytes of the plan is 0) */
    uint64_t margin;     /* bytes kept free (the engine passes PLAN_MARGIN) */
    char kv_types[32];   /* the cache types for the plan line ("f16", "K q8_0, V f16") */
    uint64_t row_bytes;  /* activation bytes per row of a prompt block (0: blocks stay `batch`) */
    int batch;           /* rows of the default block, covered by the margin (>= 1) */
    uint64_t kv_ram;     /* > 0: the KV's RAM share forced to this many bytes (--kv-ram-mb) */
    const char *spill_dir; /* where spilled positions go (for the plan line); NULL: "the SSD" */
} plan_in;

typedef struct plan_out {
    int streaming;        /* 1: experts streamed into a cache; 0: read through the mmap */
    int n_ctx;            /* positions the KV cache is budgeted for */
    int n_ctx_want;       /* the context wanted (= n_ctx: the share spills, never caps) */
    int kv_hot;           /* > 0: positions the KV's RAM share holds, the rest spill; 0: all */
    char spill_dir[256];  /* the input spill_dir ("" for none) */
    uint64_t floor_bytes; /* the expert-cache floor the KV share leaves (0: no budget) */
    int slots;            /* cache slots per MoE layer (streaming), else 0 */
    uint64_t budget;      /* the input budget, bytes */
    uint64_t resident;    /* the input resident bytes */
    uint64_t routed;      /* the input routed bytes */
    uint64_t kv_bytes;    /* KV cache in RAM: (kv_hot or n_ctx) * kv_per_pos + kv_fixed */
    uint64_t slot_sum;    /* bytes of one slot in every layer */
    uint64_t cache_bytes; /* expert cache: slot_sum * slots (0 in mmap mode) */
    uint64_t pin_bytes;   /* share of the cache for pinned experts (0 in mmap mode or no_pin) */
    char kv_types[32];    /* the input kv_types */
    int block_rows;       /* rows per prompt block a session takes by default */
    uint64_t block_bytes; /* their activations beyond the margin (0: the default batch) */
    char line[768];       /* the budget part of the plan line (see plan_line) */
} plan_out;

/* Compute the plan for `in`. Returns 0 with *out filled, or -1 with err naming
 * the budget and every part of the minimum (resident, KV, margin, one slot per
 * layer) when one slot per layer does not fit. `path` (may be NULL) prefixes
 * the refusal. */
int plan_compute(const plan_in *in, const char *path, plan_out *out, pt_err *err);

/* The plan line with `store` (the expert store's details, e.g. ", LFU, io_uring,
 * O_DIRECT, from the GGUF"; "" for none) inside the cache's parentheses:
 *   "budget 32.00 GB: resident 19.5 GB, KV 1.2 GB (4096 ctx), experts 241 GB on
 *    disk streamed into 9 slots/layer (8.5 GB<store>); context 4096 (KV f16,
 *    RAM share 1.2 GB, grows as used; spill: none)"
 *   "budget 64.00 GB: resident 1.5 GB, experts 14.2 GB read through the memory
 *    map; context ..."
 * When the KV spills, the KV part reads "KV 511.5 MB (4096 of 1048576 positions in
 * RAM)" and the spill part "spill: positions beyond 4096 to /home/u/.cache/petrel".
 * Writes at most cap bytes into buf; returns buf. */
const char *plan_line(const plan_out *p, const char *store, char *buf, size_t cap);

/* "1.23 GB" at or above 1 GiB, else "45.6 MB": plans mention tiny fixtures and
 * 200 GB models alike. Returns buf. */
const char *plan_gb(uint64_t bytes, char buf[32]);

#endif
