/* plan.c — the memory planner (see plan.h): budget in, serving mode, context,
 * slots per layer and the plan line out. Pure arithmetic on the caller's
 * numbers; sums saturate instead of wrapping, so an absurd input is refused
 * rather than planned. */
#include "plan.h"

#include <stdio.h>
#include <string.h>

const char *plan_gb(uint64_t bytes, char buf[32]) {
    if (bytes >= (1ull << 30))
        snprintf(buf, 32, "%.2f GB", bytes / PLAN_GIB);
    else
        snprintf(buf, 32, "%.1f MB", bytes / PLAN_MIB);
    return buf;
}

static uint64_t sat_add(uint64_t a, uint64_t b) {
    uint64_t s;
    return pt_add_u64(a, b, &s) ? UINT64_MAX : s;
}

static uint64_t sat_mul(uint64_t a, uint64_t b) {
    uint64_t p;
    return pt_mul_u64(a, b, &p) ? UINT64_MAX : p;
}

int plan_compute(const plan_in *in, const char *path, plan_out *out, pt_err *err) {
    memset(out, 0, sizeof *out);
    out->budget = in->budget;
    out->resident = in->resident;
    out->routed = in->routed;
    snprintf(out->kv_types, sizeof out->kv_types, "%s", in->kv_types[0] ? in->kv_types : "f16");
    for (int l = 0; l < in->n_layers; l++)
        out->slot_sum = sat_add(out->slot_sum, in->slot_bytes[l]);
    /* the context: asked for, or the training context within the KV share */
    out->n_ctx_want = in->n_ctx > 0         ? in->n_ctx
                      : in->n_ctx_train > 0 ? in->n_ctx_train
                                            : PT_DEFAULT_CTX;
    out->n_ctx = out->n_ctx_want;
    /* the positions the KV's RAM share holds: forced, or (a context not asked
     * for) what the budget leaves beside the floor; the rest spill to the SSD */
    uint64_t hot = UINT64_MAX;
    if (in->kv_ram && in->kv_per_pos) {
        hot = in->kv_ram / in->kv_per_pos;
        if (hot < 1) hot = 1;
    } else if (in->n_ctx <= 0 && in->budget && in->kv_per_pos) {
        int floor_slots = 2 * (in->n_expert_used > 0 ? in->n_expert_used : 1);
        if (in->n_expert > 0 && floor_slots > in->n_expert) floor_slots = in->n_expert;
        out->floor_bytes = sat_mul(out->slot_sum, (uint64_t)floor_slots);
        /* a whole prompt block (PLAN_BLOCK_MAX rows) is set aside beside the floor */
        const uint64_t block = sat_mul(in->row_bytes, PLAN_BLOCK_MAX);
        const uint64_t taken = sat_add(
            sat_add(sat_add(sat_add(in->resident, in->margin), out->floor_bytes), in->kv_fixed),
            block);
        hot = in->budget > taken ? (in->budget - taken) / in->kv_per_pos : 0;
        /* never below what the default was before the share existed */
        const int least = out->n_ctx < PT_DEFAULT_CTX ? out->n_ctx : PT_DEFAULT_CTX;
        if (hot < (uint64_t)least) hot = (uint64_t)least;
    }
    if (hot < (uint64_t)out->n_ctx) out->kv_hot = (int)hot;
    snprintf(out->spill_dir, sizeof out->spill_dir, "%s", in->spill_dir ? in->spill_dir : "");
    out->kv_bytes = sat_add(
        sat_mul((uint64_t)(out->kv_hot ? out->kv_hot : out->n_ctx), in->kv_per_pos), in->kv_fixed);
    const uint64_t fixed = sat_add(sat_add(in->resident, out->kv_bytes), in->margin);
    if (in->slots > 0) {
        out->streaming = 1;
        out->slots = in->slots; /* forced: the user's number, even above n_expert */
    } else if (in->slots == 0 && out->slot_sum && in->budget &&
               sat_add(fixed, in->routed) > in->budget) {
        const uint64_t need = sat_add(fixed, out->slot_sum);
        if (need > in->budget)
            return pt_errf(
                err,
                "%s%snot enough memory: petrel needs at least %.2f GB (tensors %.2f GB, "
                "KV cache %.2f GB for %d positions in RAM, margin %.2f GB, one expert slot per "
                "layer "
                "%.2f GB) but the budget is %.2f GB (set --ram, a shorter context or free memory)",
                path ? path : "", path ? ": " : "", need / PLAN_GIB, in->resident / PLAN_GIB,
                out->kv_bytes / PLAN_GIB, out->kv_hot ? out->kv_hot : out->n_ctx,
                in->margin / PLAN_GIB, out->slot_sum / PLAN_GIB, in->budget / PLAN_GIB);
        out->streaming = 1;
        const uint64_t slots = (in->budget - fixed) / out->slot_sum;
        out->slots = in->n_expert > 0 && slots > (uint64_t)in->n_expert ? in->n_expert
                     : slots > (uint64_t)INT32_MAX                      ? INT32_MAX
                                                                        : (int)slots;
    }
    out->block_rows = in->batch > 0 ? in->batch : 1;
    if (out->block_rows > out->n_ctx) out->block_rows = out->n_ctx;
    /* what the block may take half of: streaming, what the fixed costs and the slots kept
     * (one per layer, or the forced ones) leave; the other half stays expert cache. In
     * memory, what the fixed costs and the whole model leave. */
    const uint64_t keep = out->streaming
                              ? sat_mul(out->slot_sum, (uint64_t)(in->slots > 0 ? in->slots : 1))
                              : in->routed;
    if (in->row_bytes && in->budget > sat_add(fixed, keep)) {
        const uint64_t share = (in->budget - sat_add(fixed, keep)) / 2;
        uint64_t rows = share / in->row_bytes;
        if (rows > (uint64_t)out->n_ctx) rows = (uint64_t)out->n_ctx;
        if (rows > PLAN_BLOCK_MAX) rows = PLAN_BLOCK_MAX;
        if (rows > (uint64_t)out->block_rows) {
            out->block_rows = (int)rows;
            out->block_bytes = sat_mul(rows, in->row_bytes);
            if (out->streaming && in->slots == 0) {
                const uint64_t slots = (in->budget - fixed - out->block_bytes) / out->slot_sum;
                out->slots = slots < (uint64_t)out->slots ? (int)slots : out->slots;
            }
        }
    }
    if (out->streaming) {
        out->cache_bytes = sat_mul(out->slot_sum, (uint64_t)out->slots);
        if (!in->no_pin)
            out->pin_bytes = in->pin_bytes > 0
                                 ? in->pin_bytes
                                 : (uint64_t)(PLAN_PIN_SHARE * (double)out->slot_sum * out->slots);
    }
    plan_line(out, "", out->line, sizeof out->line);
    return 0;
}

const char *plan_line(const plan_out *p, const char *store, char *buf, size_t cap) {
    char b1[32], b2[32], b3[32], b4[32], b5[32], ctx[400], blk[96] = "", kvn[64];
    if (p->kv_hot) {
        snprintf(ctx, sizeof ctx,
                 "; context %d (KV %s, RAM share %s, grows as used; spill: positions beyond %d "
                 "to %s)",
                 p->n_ctx, p->kv_types, plan_gb(p->kv_bytes, b1), p->kv_hot,
                 p->spill_dir[0] ? p->spill_dir : "the SSD");
        snprintf(kvn, sizeof kvn, "%d of %d positions in RAM", p->kv_hot, p->n_ctx);
    } else {
        snprintf(ctx, sizeof ctx, "; context %d (KV %s, RAM share %s, grows as used; spill: none)",
                 p->n_ctx, p->kv_types, plan_gb(p->kv_bytes, b1));
        snprintf(kvn, sizeof kvn, "%d ctx", p->n_ctx);
    }
    size_t n;
    if (p->block_bytes)
        snprintf(blk, sizeof blk, "; prompt blocks of %d rows (activations %s)", p->block_rows,
                 plan_gb(p->block_bytes, b1));
    if (p->streaming)
        snprintf(buf, cap,
                 "budget %s: resident %s, KV %s (%s), experts %s on disk streamed into %d "
                 "slots/layer (%s%s)%s",
                 plan_gb(p->budget, b1), plan_gb(p->resident, b2), plan_gb(p->kv_bytes, b3), kvn,
                 plan_gb(p->routed, b4), p->slots, plan_gb(p->cache_bytes, b5), store, blk);
    else
        snprintf(buf, cap, "budget %s: resident %s, experts %s read through the memory map%s",
                 plan_gb(p->budget, b1), plan_gb(p->resident, b2), plan_gb(p->routed, b3), blk);
    n = strlen(buf);
    if (n < cap) snprintf(buf + n, cap - n, "%s", ctx);
    return buf;
}
