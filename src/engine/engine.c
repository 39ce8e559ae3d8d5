/* engine.c — the public engine/session API (petrel.h) over the per-family
 * forward passes. Opening validates the whole model (metadata, every tensor's
 * shape and type) before any session can run, so a bad file fails at load with
 * a message naming the tensor or key. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common.h"
#include "engine/glm_forward.h"
#include "format/gguf.h"
#include "format/xpack.h"
#include "model/glm_dsa.h"
#include "model/info.h"
#include "petrel.h"
#include "runtime/budget.h"
#include "runtime/experts.h"
#include "runtime/threadpool.h"
#include "runtime/xio.h"

#define GIB (1024.0 * 1024.0 * 1024.0)

/* "1.23 GB" or "45.6 MB": plans mention tiny fixtures and 200 GB models alike. */
static const char *gb(uint64_t bytes, char buf[32]) {
    if (bytes >= (1ull << 30)) snprintf(buf, 32, "%.2f GB", bytes / GIB);
    else snprintf(buf, 32, "%.1f MB", bytes / 1048576.0);
    return buf;
}
#define PLAN_KV_CTX 4096             /* context assumed when budgeting the KV cache */
#define PLAN_MARGIN (512ull << 20)   /* kept free for scratch, I/O and the allocator */

struct pt_engine {
    gguf_ctx *g;
    tp_pool *pool;
    char arch[32];
    int max_isa; /* kernel ISA cap, -1: best */
    glm_model glm;
    xs_layer_desc *xl; /* [n_layers] routed-expert tensors per layer */
    xpack *pack;       /* valid expert pack in use, or NULL */
    xs_store *xs;
    char plan[512];
};

struct pt_session {
    pt_engine *e;
    glm_state *st;
    int n_ctx;
};

static void copy_err(const pt_err *e, char *buf, size_t len) {
    if (buf && len) snprintf(buf, len, "%s", e->msg);
}

/* Decide how routed experts are served and open the store. The memory plan:
 * budget (--ram, or what the machine and cgroup can spare) minus resident
 * tensors, a KV cache for PLAN_KV_CTX positions and a margin; the rest is
 * expert cache. A model that fits entirely is read through the mmap unless
 * slots are forced; one whose resident part does not fit is refused. */
static int open_experts(pt_engine *en, const pt_engine_params *p, pt_err *e) {
    const glm_hparams *hp = &en->glm.hp;
    int n_all;
    if (model_expert_layers(en->g, &en->xl, &n_all, e)) return -1;
    /* an expert pack next to the model (or in the cache dir) when valid; a stale
     * or corrupt one is reported in the plan and the GGUF is used instead */
    char note[700] = "";
    if (!p->no_pack && p->expert_slots != PT_EXPERTS_MMAP) {
        char cand[2][4096];
        int n = p->pack_path ? 1 : xpack_candidates(en->g->files[0].path, cand);
        if (p->pack_path) snprintf(cand[0], sizeof cand[0], "%s", p->pack_path);
        for (int i = 0; i < n; i++) {
            if (access(cand[i], F_OK) != 0) {
                if (p->pack_path) return pt_errf(e, "%s: no such expert pack", cand[i]);
                continue;
            }
            pt_err pe = {{0}};
            en->pack = xpack_open(cand[i], en->g, en->xl, n_all, &pe);
            if (!en->pack && p->pack_path) return pt_errf(e, "%s", pe.msg);
            if (!en->pack) snprintf(note, sizeof note, "; WARNING: %s; using the GGUF", pe.msg);
            break;
        }
    }
    uint64_t slot_sum = 0;
    for (int l = 0; l < n_all; l++) slot_sum += xs_slot_bytes(&en->xl[l], en->pack, l, !p->buffered_io);
    model_info mi;
    if (model_info_get(en->g, &mi, e)) return -1;
    const uint64_t resident = mi.resident_bytes, routed = mi.routed_bytes;
    model_info_free(&mi);
    const uint64_t kv = (uint64_t)PLAN_KV_CTX * (uint64_t)n_all * (uint64_t)(hp->kv_lora + hp->qk_rope) * 4;
    const uint64_t budget = p->ram_gb > 0 ? (uint64_t)(p->ram_gb * GIB) : mem_available();
    const uint64_t fixed = resident + kv + PLAN_MARGIN;
    xs_config cfg = {.policy = p->expert_policy == PT_POLICY_LFU ? XS_LFU : XS_LRU,
                     .io = p->io == PT_IO_URING ? XIO_URING : p->io == PT_IO_PREAD ? XIO_PREAD : XIO_AUTO,
                     .direct = !p->buffered_io,
                     .pack = en->pack};
    if (p->expert_slots > 0) {
        cfg.streaming = 1;
        cfg.slots = p->expert_slots;
    } else if (p->expert_slots == 0 && slot_sum && budget && fixed + routed > budget) {
        if (fixed + slot_sum > budget)
            return pt_errf(e,
                           "%s: not enough memory: petrel needs at least %.2f GB (tensors %.2f GB, "
                           "KV cache %.2f GB, margin %.2f GB, one expert slot per layer %.2f GB) "
                           "but the budget is %.2f GB (set --ram or free memory)",
                           en->g->files[0].path, (fixed + slot_sum) / GIB, resident / GIB, kv / GIB,
                           PLAN_MARGIN / GIB, slot_sum / GIB, budget / GIB);
        cfg.streaming = 1;
        cfg.slots = (int)((budget - fixed) / slot_sum);
        if (cfg.slots > hp->n_expert) cfg.slots = hp->n_expert;
    }
    en->xs = xs_open(en->g, en->xl, n_all, &cfg, e);
    if (!en->xs) return -1;
    char b1[32], b2[32], b3[32], b4[32], b5[32];
    if (cfg.streaming)
        snprintf(en->plan, sizeof en->plan,
                 "budget %s: resident %s, KV %s (%d ctx), experts %s on disk streamed into %d slots/layer "
                 "(%s, %s, %s%s, %s)%s",
                 gb(budget, b1), gb(resident, b2), gb(kv, b3), PLAN_KV_CTX, gb(routed, b4), cfg.slots,
                 gb(slot_sum * (uint64_t)cfg.slots, b5), cfg.policy == XS_LFU ? "LFU" : "LRU",
                 xio_backend_name(xs_io_backend(en->xs)), xs_direct(en->xs) ? ", O_DIRECT" : "",
                 en->pack ? "from the expert pack" : "from the GGUF", note);
    else
        snprintf(en->plan, sizeof en->plan, "budget %s: resident %s, experts %s read through the memory map%s",
                 gb(budget, b1), gb(resident, b2), gb(routed, b3), note);
    return 0;
}

pt_engine *pt_engine_open(const pt_engine_params *p, char *err, size_t err_len) {
    pt_err e = {{0}};
    pt_engine *en = calloc(1, sizeof *en);
    if (!en) {
        snprintf(err, err_len, "out of memory");
        return NULL;
    }
    en->max_isa = p->kernels - 1; /* PT_KERNELS_BEST -> -1, SCALAR -> QT_ISA_SCALAR, ... */
    en->g = gguf_open(p->model_path, &e);
    if (!en->g) goto fail;
    if (gguf_get_str(en->g, "general.architecture", en->arch, sizeof en->arch, &e)) goto fail;
    if (!strcmp(en->arch, "glm-dsa") || !strcmp(en->arch, "deepseek2")) {
        if (glm_model_load(en->g, &en->glm, &e)) goto fail;
    } else {
        pt_errf(&e, "%s: architecture '%s' is not supported (supported: glm-dsa, deepseek2)", p->model_path,
                en->arch);
        goto fail;
    }
    int nt = p->n_threads > 0 ? p->n_threads : (int)sysconf(_SC_NPROCESSORS_ONLN);
    if (nt < 1) nt = 1;
    en->pool = tp_new(nt);
    if (!en->pool) {
        pt_errf(&e, "cannot start %d threads", nt);
        goto fail;
    }
    if (open_experts(en, p, &e)) goto fail;
    return en;
fail:
    copy_err(&e, err, err_len);
    pt_engine_close(en);
    return NULL;
}

void pt_engine_close(pt_engine *e) {
    if (!e) return;
    xs_close(e->xs);
    xpack_close(e->pack);
    free(e->xl);
    glm_model_free(&e->glm);
    tp_free(e->pool);
    gguf_close(e->g);
    free(e);
}

int pt_engine_n_vocab(const pt_engine *e) { return e->glm.hp.n_vocab; }
int pt_engine_n_embd(const pt_engine *e) { return e->glm.hp.n_embd; }
int pt_engine_n_threads(const pt_engine *e) { return tp_size(e->pool); }
int pt_engine_has_mtp(const pt_engine *e) { return e->glm.hp.n_nextn > 0; }
const char *pt_engine_arch(const pt_engine *e) { return e->arch; }
const char *pt_engine_plan(const pt_engine *e) { return e->plan; }

void pt_engine_stats(const pt_engine *e, pt_stats *st) {
    xs_stats xs;
    xs_get_stats(e->xs, &xs);
    memset(st, 0, sizeof *st);
    int backend = xs_io_backend(e->xs);
    st->streaming = backend != 0;
    st->io_backend = backend ? xio_backend_name(backend) : "mmap";
    st->direct_io = xs_direct(e->xs);
    st->expert_pack = xs_uses_pack(e->xs);
    st->slots_per_layer = xs_slots(e->xs);
    st->hits = xs.hits;
    st->misses = xs.misses;
    st->bytes_read = xs.bytes_read;
    st->io_wait_s = xs.wait_s;
    st->rss_bytes = mem_rss();
    st->peak_rss_bytes = mem_peak_rss();
}

pt_session *pt_session_new(pt_engine *e, const pt_session_params *p, char *err, size_t err_len) {
    pt_err er = {{0}};
    int n_ctx = p && p->n_ctx > 0 ? p->n_ctx : 4096;
    if (n_ctx > e->glm.hp.n_ctx_train && e->glm.hp.n_ctx_train > 0 && !(p && p->n_ctx > 0))
        n_ctx = e->glm.hp.n_ctx_train;
    int n_batch = p && p->n_batch > 0 ? p->n_batch : 64;
    pt_session *s = calloc(1, sizeof *s);
    if (!s) {
        snprintf(err, err_len, "out of memory");
        return NULL;
    }
    s->e = e;
    s->n_ctx = n_ctx;
    s->st = glm_state_new(&e->glm, e->pool, e->xs, e->max_isa, n_ctx, n_batch, &er);
    if (!s->st) {
        copy_err(&er, err, err_len);
        free(s);
        return NULL;
    }
    return s;
}

void pt_session_free(pt_session *s) {
    if (!s) return;
    glm_state_free(s->st);
    free(s);
}

int pt_session_n_ctx(const pt_session *s) { return s->n_ctx; }
int pt_session_n_past(const pt_session *s) { return glm_n_past(s->st); }

void pt_session_truncate(pt_session *s, int n) {
    if (n <= 0) glm_reset(s->st);
    else glm_truncate(s->st, n);
}

int pt_session_eval(pt_session *s, const int32_t *tokens, int n, float *logits, int all_rows, float *hidden,
                    char *err, size_t err_len) {
    pt_err e = {{0}};
    if (glm_eval(s->st, tokens, n, logits, all_rows, hidden, &e)) {
        copy_err(&e, err, err_len);
        return -1;
    }
    return 0;
}

int pt_session_mtp(pt_session *s, const int32_t *tokens, const float *hidden_prev, int n, float *logits,
                   char *err, size_t err_len) {
    pt_err e = {{0}};
    if (glm_mtp(s->st, tokens, hidden_prev, n, logits, &e)) {
        copy_err(&e, err, err_len);
        return -1;
    }
    return 0;
}
