/* engine.c — the public engine/session API (petrel.h): opening finds the
 * model's family (model/families.c), binds it, gathers the memory plan's
 * inputs (runtime/plan.c) and opens the expert store; a session is a decoder
 * (decoder.c) plus the token ids its cache holds. Opening validates the whole
 * model (metadata, every tensor's shape and type) before any session can run,
 * so a bad file fails at load with a message naming the tensor or key. The text side (vocabulary,
 * chat format, sampling defaults) is read from the same open GGUF here and served by api_text.c,
 * api_chat.c and gen.c. */
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "common.h"
#include "engine/api_text.h"
#include "engine/decoder.h"
#include "engine/session.h"
#include "format/ggml_types.h"
#include "format/gguf.h"
#include "format/xpack.h"
#include "kernels/quant.h"
#include "model/family.h"
#include "model/info.h"
#include "nn/kv.h"
#include "os/os.h"
#include "petrel.h"
#include "runtime/budget.h"
#include "runtime/experts.h"
#include "runtime/plan.h"
#include "runtime/threadpool.h"
#include "runtime/usage.h"
#include "runtime/xio.h"

#define DEFAULT_BATCH                                                                              \
    256 /* rows per forward chunk when the session does not say and                                \
           experts do not stream; rows per tile of row-local work */

struct pt_engine {
    gguf_ctx *g;
    tp_pool *pool;
    char arch[32];
    int max_isa;        /* kernel ISA cap, -1: best */
    const fam_ops *fam; /* the model's family */
    void *model;        /* the family's loaded model */
    fam_desc desc;      /* what the decoder needs to know about it */
    /* KV cache of a session, for the memory plan (at the cache types) */
    uint32_t k_type, v_type; /* element types (QT_* ids, nn/kv.h) */
    char kv_types[32];       /* their names as the plan line says them ("f16", "K q8_0, V f16") */
    int n_ctx;               /* the plan's context: a session's default */
    int kv_hot;              /* > 0: positions the KV's RAM share holds; longer contexts spill */
    char spill_dir[512];     /* where spilled KV positions go (the cache directory) */
    int block_rows;          /* the plan's prompt block: a session's default batch */
    uint64_t *expert_bytes;  /* [n_layer] bytes of one routed expert's weights (0: dense) */
    uint64_t kv_per_pos;     /* bytes per position, all layers that keep every position */
    uint64_t kv_fixed;       /* bytes independent of the context: sliding-window rings */
    int plan_only;           /* opened for the plan only: no store, no pool, no sessions */
    xs_layer_desc *xl;       /* [n_layers] routed-expert tensors per layer */
    xpack *pack;             /* valid expert pack in use, or NULL */
    xpack *table;            /* valid pack kept for its checksum table alone (no_pack), or NULL */
    xs_store *xs;
    int prefetch;      /* router lookahead into the next layer's experts */
    FILE *trace;       /* routing trace, or NULL */
    usage_table usage; /* expert request counts (this run plus history) */
    int have_usage;
    char usage_path[PT_PATH_MAX]; /* where the counts are saved at close, "" to skip */
    uint8_t fingerprint[32];
    char plan[1536];  /* the plan line: the planner's part (< 768) + a pack warning (< 700) */
    engine_text text; /* vocabulary, chat format, sampling defaults */
};

struct pt_session {
    pt_engine *e;
    dec *dec; /* the decoder: the family's KV caches and scratch */
    int n_ctx, n_batch;
    int32_t *hist; /* [n_ctx] token ids at the positions the cache holds ([n_past] valid) */
    /* prompt progress (pt_session_set_progress, engine/session.h) */
    pt_prompt_progress_fn progress;
    void *progress_ud;
    pt_prompt_progress prog; /* the span in progress (prog.total 0: none) */
    int64_t prog_base;       /* work of the span's pt_session_eval calls that returned */
    int in_sync;             /* pt_session_sync in progress: its evals are one prompt */
    uint64_t read0;          /* the store's bytes read when the prompt began */
    uint64_t xread0;         /* ... and experts read */
    double t0;               /* ... and the time */
    pt_prompt_stats last;    /* the last prompt's figures */
};

static const struct {
    const char *name;
    uint32_t qt;
} KV_TYPES[] = {{"f16", QT_F16},   {"f32", QT_F32},   {"f16", QT_F16},
                {"bf16", QT_BF16}, {"q8_0", QT_Q8_0}, {"q4_0", QT_Q4_0}};

/* llama.cpp's spelling of a cache type ("f16", "q8_0"). */
static const char *qt_name_lower(uint32_t qt) {
    for (size_t i = 1; i < PT_ARRAY_LEN(KV_TYPES); i++)
        if (KV_TYPES[i].qt == qt) return KV_TYPES[i].name;
    return "?";
}

const char *pt_kv_type_name(int t) {
    return t >= 0 && t < (int)PT_ARRAY_LEN(KV_TYPES) ? KV_TYPES[t].name : "?";
}

int pt_kv_type_parse(const char *name) {
    for (int t = PT_KV_F32; t < (int)PT_ARRAY_LEN(KV_TYPES); t++)
        if (!strcasecmp(name, KV_TYPES[t].name)) return t;
    return -1;
}

static void copy_err(const pt_err *e, char *buf, size_t len) {
    if (buf && len) snprintf(buf, len, "%s", e->msg);
}

/* Usage statistics: zeroed counts for this model, plus the history saved for
 * the same file. With a usage_dir the history lives there alone; otherwise it
 * is looked for next to the model and in the cache dir, and saved at close to
 * the first writable of those places. */
static int open_usage(pt_engine *en, const pt_engine_params *p, int n_all, pt_err *e) {
    int *ne = calloc((size_t)n_all + 1, sizeof(int));
    if (!ne) return pt_errf(e, "out of memory");
    for (int l = 0; l < n_all; l++)
        ne[l] = en->xl[l].n_mats ? (int)en->xl[l].mats[0]->ne[2] : 0;
    int rc = usage_init(&en->usage, n_all, ne);
    free(ne);
    if (rc) return pt_errf(e, "out of memory");
    if (xpack_fingerprint(en->g, en->fingerprint, e)) return -1;
    char cand[2][PT_PATH_MAX];
    int n;
    if (p->usage_dir && *p->usage_dir) {
        const char *base = strrchr(en->g->files[0].path, '/');
        snprintf(cand[0], sizeof cand[0], "%s/%s.xpack", p->usage_dir,
                 base ? base + 1 : en->g->files[0].path);
        n = 1;
    } else {
        n = xpack_candidates(en->g->files[0].path, p->cache_dir, cand);
    }
    for (int i = 0; i < n; i++) {
        /* same places as the pack, ".usage" instead of ".xpack" */
        size_t len = strlen(cand[i]);
        if (len > 6) snprintf(cand[i] + len - 6, sizeof cand[i] - (len - 6), ".usage");
        if (!en->have_usage) en->have_usage = usage_load(&en->usage, cand[i], en->fingerprint);
        char dir[PT_PATH_MAX];
        snprintf(dir, sizeof dir, "%s", cand[i]);
        char *slash = strrchr(dir, '/');
        if (slash) *slash = 0;
        if (!en->usage_path[0] && access(slash ? dir : ".", W_OK) == 0)
            snprintf(en->usage_path, sizeof en->usage_path, "%s", cand[i]);
    }
    return 0;
}

typedef struct hot {
    uint64_t count;
    int layer, expert;
} hot;

static int cmp_hot(const void *a, const void *b) {
    const hot *x = a, *y = b;
    if (x->count != y->count) return x->count < y->count ? 1 : -1;
    return x->layer != y->layer ? x->layer - y->layer : x->expert - y->expert;
}

/* Pin the most requested experts (over all layers) into pin_bytes of the
 * cache, at most slots-1 per layer. Returns how many were pinned, or -1. */
static int pin_hot_experts(pt_engine *en, int n_all, int slots, uint64_t pin_bytes, pt_err *e) {
    size_t n = 0;
    for (int l = 0; l < n_all; l++)
        n += (size_t)en->usage.n_expert[l];
    hot *h = calloc(n + 1, sizeof *h);
    int *per_layer = calloc((size_t)n_all + 1, sizeof(int));
    int **pick = calloc((size_t)n_all + 1, sizeof(int *));
    if (!h || !per_layer || !pick) {
        free(h);
        free(per_layer);
        free(pick);
        return pt_errf(e, "out of memory");
    }
    size_t k = 0;
    for (int l = 0; l < n_all; l++)
        for (int x = 0; x < en->usage.n_expert[l]; x++)
            if (en->usage.count[l][x]) h[k++] = (hot){en->usage.count[l][x], l, x};
    qsort(h, k, sizeof *h, cmp_hot);
    uint64_t used = 0;
    int total = 0, rc = 0;
    for (int l = 0; l < n_all; l++)
        pick[l] = calloc((size_t)slots + 1, sizeof(int));
    for (size_t i = 0; i < k; i++) {
        uint64_t sb = xs_slot_bytes(&en->xl[h[i].layer], en->pack, h[i].layer, xs_direct(en->xs));
        if (used + sb > pin_bytes) break;
        if (!pick[h[i].layer] || per_layer[h[i].layer] >= slots - 1) continue;
        pick[h[i].layer][per_layer[h[i].layer]++] = h[i].expert;
        used += sb;
    }
    for (int l = 0; l < n_all && rc >= 0; l++) {
        if (!per_layer[l]) continue;
        int got = xs_pin(en->xs, l, pick[l], per_layer[l], e);
        if (got < 0)
            rc = -1;
        else
            total += got;
    }
    for (int l = 0; l < n_all; l++)
        free(pick[l]);
    free(pick);
    free(per_layer);
    free(h);
    return rc < 0 ? -1 : total;
}

/* --load-mode ram / mlock: the tensors the plan keeps in RAM (all of them when the experts
 * are read through the mmap, else everything but the routed experts), page-aligned and
 * merged into runs per file, made private anonymous copies (os_privatize) or locked. A
 * failure is reported in `note`, never fatal: the mapping still serves the same bytes. */
static void hold_weights(pt_engine *en, int mode, int experts_too, char *note, size_t cap) {
    const gguf_ctx *g = en->g;
    const uint64_t ps = os_page_size();
    uint64_t done = 0;
    for (uint32_t f = 0; f < g->n_files; f++) {
        const gguf_file *gf = &g->files[f];
        if (!gf->mapped || gf->fd < 0) continue;
        uint64_t lo = 0, hi = 0; /* the run being gathered, file offsets */
        for (uint64_t i = 0; i <= g->n_tensors; i++) {
            const gguf_tensor *t = i < g->n_tensors ? &g->tensors[i] : NULL;
            int take = t && t->file == f && t->nbytes > 0;
            int layer;
            if (take && !experts_too && model_is_routed_expert(t->name, &layer)) take = 0;
            uint64_t a = 0, b = 0;
            if (take) {
                a = t->file_offset / ps * ps;
                b = (t->file_offset + t->nbytes + ps - 1) / ps * ps;
                if (b > (gf->size + ps - 1) / ps * ps) b = (gf->size + ps - 1) / ps * ps;
            }
            if (take && hi > lo && a >= lo && a <= hi) { /* the next tensor in file order */
                if (b > hi) hi = b;
                continue;
            }
            if (hi > lo) {
                void *addr = (void *)(gf->map + lo);
                const int rc = mode == PT_LOAD_MLOCK ? os_lock(addr, hi - lo)
                                                     : os_privatize(addr, hi - lo, gf->fd, lo);
                if (rc) {
                    const int ern = errno;
                    char gb[32];
                    snprintf(note, cap, "; WARNING: %s of %s of weights failed: %s%s",
                             mode == PT_LOAD_MLOCK ? "mlock" : "copying into RAM",
                             plan_gb(hi - lo, gb), strerror(ern),
                             mode == PT_LOAD_MLOCK && (ern == ENOMEM || ern == EPERM)
                                 ? " (RLIMIT_MEMLOCK: ulimit -l)"
                                 : "");
                    return;
                }
                done += hi - lo;
            }
            lo = a, hi = b;
        }
    }
    char gb[32];
    snprintf(note, cap, ", %s of weights %s", plan_gb(done, gb),
             mode == PT_LOAD_MLOCK ? "locked in RAM" : "copied into RAM");
}

/* Decide how routed experts are served and open the store. The memory plan
 * (runtime/plan.h): budget (--ram, or what the machine and cgroup can spare)
 * minus resident tensors, a KV cache for the context to budget for and a
 * margin; the rest is expert cache. A model that fits entirely is read through
 * the mmap unless slots are forced; one whose resident part does not fit is
 * refused. With plan_only the plan is computed and nothing is opened. */
static int open_experts(pt_engine *en, const pt_engine_params *p, pt_err *e) {
    int n_all;
    if (model_expert_layers(en->g, &en->xl, &n_all, e)) return -1;
    /* an expert pack next to the model (or in the cache dir) when valid; a stale
     * or corrupt one is reported in the plan and the GGUF is used instead */
    char note[700] = "";
    if (!p->no_pack && p->expert_slots != PT_EXPERTS_MMAP) {
        char cand[2][PT_PATH_MAX];
        int n = p->pack_path ? 1 : xpack_candidates(en->g->files[0].path, p->cache_dir, cand);
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
            if (en->pack && en->pack->table_only) { /* --pack named a checksum table */
                en->table = en->pack;
                en->pack = NULL;
            }
            break;
        }
    }
    /* --no-pack: a valid pack still lends its checksum table to the GGUF reads */
    if (p->no_pack && !p->no_verify && p->expert_slots != PT_EXPERTS_MMAP) {
        char cand[2][PT_PATH_MAX];
        int n = p->pack_path ? 1 : xpack_candidates(en->g->files[0].path, p->cache_dir, cand);
        if (p->pack_path) snprintf(cand[0], sizeof cand[0], "%s", p->pack_path);
        for (int i = 0; i < n && !en->table; i++) {
            pt_err pe = {{0}};
            if (access(cand[i], F_OK) == 0)
                en->table = xpack_open(cand[i], en->g, en->xl, n_all, &pe);
        }
    }
    /* no pack to read from or to lend its table: a checksum table of its own
     * (MODEL.gguf.xsums, `petrel pack --table-only`); a stale one is reported */
    if (!en->pack && !en->table && !p->no_verify && p->expert_slots != PT_EXPERTS_MMAP) {
        char cand[2][PT_PATH_MAX];
        const int n = xpack_table_candidates(en->g->files[0].path, p->cache_dir, cand);
        for (int i = 0; i < n && !en->table; i++) {
            if (access(cand[i], F_OK) != 0) continue;
            pt_err pe = {{0}};
            en->table = xpack_open(cand[i], en->g, en->xl, n_all, &pe);
            if (!en->table && !note[0])
                snprintf(note, sizeof note, "; WARNING: %s; expert reads unchecked", pe.msg);
            break;
        }
    }
    uint64_t *slot_bytes = calloc((size_t)n_all + 1, sizeof *slot_bytes);
    if (!slot_bytes) return pt_errf(e, "out of memory");
    for (int l = 0; l < n_all; l++)
        slot_bytes[l] = xs_slot_bytes(&en->xl[l], en->pack, l, !p->buffered_io);
    model_info mi;
    if (model_info_get(en->g, &mi, e)) {
        free(slot_bytes);
        return -1;
    }
    plan_in in = {.budget = p->ram_gb > 0 ? (uint64_t)(p->ram_gb * PLAN_GIB) : mem_available(),
                  .resident = mi.resident_bytes,
                  .routed = mi.routed_bytes,
                  .slot_bytes = slot_bytes,
                  .n_layers = n_all,
                  .n_expert = en->desc.n_expert,
                  .n_expert_used = en->desc.n_expert_used,
                  .kv_per_pos = en->kv_per_pos,
                  .kv_fixed = en->kv_fixed,
                  .n_ctx = p->n_ctx,
                  .n_ctx_train = en->desc.n_ctx_train,
                  .slots = p->expert_slots,
                  .pin_bytes = p->pin_gb > 0 ? (uint64_t)(p->pin_gb * PLAN_GIB) : 0,
                  .no_pin = p->no_pin,
                  .margin = PLAN_MARGIN,
                  .row_bytes = dec_row_bytes(&en->desc),
                  .batch = DEFAULT_BATCH,
                  .kv_ram = p->kv_ram_mb > 0 ? (uint64_t)(p->kv_ram_mb * PLAN_MIB) : 0};
    /* spilled KV positions go to the cache directory (the engine reads no environment) */
    snprintf(en->spill_dir, sizeof en->spill_dir, "%s",
             p->cache_dir && *p->cache_dir ? p->cache_dir : "/var/tmp");
    in.spill_dir = en->spill_dir;
    model_info_free(&mi);
    plan_out pl;
    snprintf(in.kv_types, sizeof in.kv_types, "%s", en->kv_types);
    const int rc = plan_compute(&in, en->g->files[0].path, &pl, e);
    free(slot_bytes);
    if (rc) return -1;
    /* one routed expert's weights per trunk layer: what a prompt's figures weigh by */
    en->expert_bytes = calloc((size_t)en->desc.n_layer + 1, sizeof *en->expert_bytes);
    if (!en->expert_bytes) return pt_errf(e, "out of memory");
    for (int l = 0; l < en->desc.n_layer && l < n_all; l++)
        for (int m = 0; m < en->xl[l].n_mats; m++)
            en->expert_bytes[l] += en->xl[l].mats[m]->nbytes / (uint64_t)en->xl[l].mats[m]->ne[2];
    en->n_ctx = pl.n_ctx;
    /* positions in RAM for a session's own context too: the plan's, or a forced share's */
    en->kv_hot = pl.kv_hot;
    if (!en->kv_hot && in.kv_ram && en->kv_per_pos)
        en->kv_hot = in.kv_ram / en->kv_per_pos > 0 && in.kv_ram / en->kv_per_pos < INT32_MAX
                         ? (int)(in.kv_ram / en->kv_per_pos)
                     : in.kv_ram / en->kv_per_pos ? INT32_MAX
                                                  : 1;
    en->block_rows = pl.block_rows;
    if (en->plan_only) { /* where slots would be read from is known; the I/O back-end is not */
        char line[768];
        plan_line(&pl, pl.streaming ? en->pack ? ", from the expert pack" : ", from the GGUF" : "",
                  line, sizeof line);
        snprintf(en->plan, sizeof en->plan, "%.767s%.699s", line, note);
        return 0;
    }
    /* LFU with decay is the default: on the streaming benchmark's routing trace it
     * hits more than LRU, most when slots are scarce (bench/RESULTS.md) */
    xs_config cfg = {.streaming = pl.streaming,
                     .slots = pl.slots,
                     .policy = p->expert_policy == PT_POLICY_LRU ? XS_LRU : XS_LFU,
                     .io = p->io == PT_IO_URING   ? XIO_URING
                           : p->io == PT_IO_PREAD ? XIO_PREAD
                                                  : XIO_AUTO,
                     .direct = !p->buffered_io,
                     .pack = en->pack,
                     .sums = p->no_verify ? NULL
                             : en->pack   ? en->pack
                                          : en->table};
    if (open_usage(en, p, n_all, e)) return -1;
    cfg.usage = &en->usage;
    if (p->trace_path) {
        en->trace = fopen(p->trace_path, "w");
        if (!en->trace)
            return pt_errf(e, "%s: cannot write the trace: %s", p->trace_path, strerror(errno));
        cfg.trace = en->trace;
    }
    en->xs = xs_open(en->g, en->xl, n_all, &cfg, e);
    if (!en->xs) return -1;
    int n_pinned = 0;
    if (cfg.streaming && pl.pin_bytes && en->have_usage) {
        n_pinned = pin_hot_experts(en, n_all, cfg.slots, pl.pin_bytes, e);
        if (n_pinned < 0) return -1;
    }
    char held[160] = "";
    if (p->load_mode == PT_LOAD_RAM || p->load_mode == PT_LOAD_MLOCK)
        hold_weights(en, p->load_mode, !cfg.streaming, held, sizeof held);
    /* the store's part of the plan line, inside the cache's parentheses */
    char pins[96] = "", store[256] = "", line[768];
    if (n_pinned) snprintf(pins, sizeof pins, ", %d hot experts pinned", n_pinned);
    if (cfg.streaming)
        snprintf(store, sizeof store, ", %s, %s%s, %s%s%s", cfg.policy == XS_LFU ? "LFU" : "LRU",
                 xio_backend_name(xs_io_backend(en->xs)), xs_direct(en->xs) ? ", O_DIRECT" : "",
                 en->pack ? "from the expert pack" : "from the GGUF", pins,
                 en->prefetch ? ", prefetch" : "");
    snprintf(en->plan, sizeof en->plan, "%.767s%.159s%.600s",
             plan_line(&pl, store, line, sizeof line), held, note);
    return 0;
}

/* The cache types asked for, checked against the model's head widths (a
 * q8_0 / q4_0 row is blocks of 32 per head). */
static int kv_types(pt_engine *en, const pt_engine_params *p, pt_err *e) {
    const int t[2] = {p->cache_type_k, p->cache_type_v};
    uint32_t q[2];
    for (int i = 0; i < 2; i++) {
        if (t[i] < 0 || t[i] >= (int)PT_ARRAY_LEN(KV_TYPES))
            return pt_errf(e, "cache type %d is not one of f32, f16, bf16, q8_0, q4_0", t[i]);
        q[i] = KV_TYPES[t[i]].qt;
    }
    en->k_type = q[0];
    en->v_type = q[1];
    /* one cache (the K type: MLA models) or equal types: one name */
    if (en->k_type == en->v_type || en->desc.k_only)
        snprintf(en->kv_types, sizeof en->kv_types, "%s", qt_name_lower(en->k_type));
    else
        snprintf(en->kv_types, sizeof en->kv_types, "K %s, V %s", qt_name_lower(en->k_type),
                 qt_name_lower(en->v_type));
    for (int i = 0; i < 2; i++)
        if (en->desc.kv_unit % kv_block(q[i]))
            return pt_errf(e,
                           "%s: cache type %s stores blocks of %d elements, but this model's KV "
                           "heads are multiples of %d only (use f32, f16 or bf16)",
                           en->g->files[0].path, KV_TYPES[t[i]].name, kv_block(q[i]),
                           en->desc.kv_unit);
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
    en->prefetch = p->prefetch;
    en->plan_only = p->plan_only;
    en->g = gguf_open(p->model_path, &e);
    if (!en->g) goto fail;
    engine_text_load(&en->text, en->g);
    if (p->vocab_only) {
        /* any architecture: only the tokenizer.* keys are read */
        if (!en->text.vocab) {
            pt_errf(&e, "%s", en->text.vocab_err);
            goto fail;
        }
        if (gguf_get_str(en->g, "general.architecture", en->arch, sizeof en->arch, NULL))
            en->arch[0] = 0;
        en->desc.n_vocab = tok_n_vocab(en->text.vocab);
        snprintf(en->plan, sizeof en->plan, "vocabulary only (%d tokens)", en->desc.n_vocab);
        return en;
    }
    if (gguf_get_str(en->g, "general.architecture", en->arch, sizeof en->arch, &e)) goto fail;
    if (fam_load(en->g, en->arch, &en->fam, &en->model, &en->desc, &e)) goto fail;
    if (kv_types(en, p, &e)) goto fail;
    /* the KV cache the plan reserves at the cache types, sliding-window rings
     * sized for the default batch */
    en->fam->kv_size(en->model, dec_ring(&en->desc, INT32_MAX, DEFAULT_BATCH), en->k_type,
                     en->v_type, &en->kv_per_pos, &en->kv_fixed);
    int nt = p->n_threads > 0 ? p->n_threads : (int)sysconf(_SC_NPROCESSORS_ONLN);
    if (nt < 1) nt = 1;
    en->pool = en->plan_only ? NULL : tp_new(nt);
    if (!en->pool && !en->plan_only) {
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
    if (e->xs && e->usage_path[0] && e->usage.n_layers) {
        xs_stats xs;
        xs_get_stats(e->xs, &xs);
        /* only runs that routed anything add to the history; failing to save it is
         * not worth failing a close for */
        if (xs.hits + xs.misses) usage_save(&e->usage, e->usage_path, e->fingerprint, NULL);
    }
    usage_free(&e->usage);
    xs_close(e->xs);
    if (e->trace) fclose(e->trace);
    xpack_close(e->pack);
    xpack_close(e->table);
    free(e->xl);
    free(e->expert_bytes);
    fam_free(e->fam, e->model);
    tp_free(e->pool);
    engine_text_free(&e->text);
    gguf_close(e->g);
    free(e);
}

const engine_text *engine_text_of(const pt_engine *e) {
    return &e->text;
}

int pt_engine_n_vocab(const pt_engine *e) {
    return e->desc.n_vocab;
}
int pt_engine_n_embd(const pt_engine *e) {
    return e->desc.n_embd;
}
int pt_engine_n_ctx_train(const pt_engine *e) {
    return e->desc.n_ctx_train;
}
int pt_engine_n_threads(const pt_engine *e) {
    return e->pool ? tp_size(e->pool) : 0;
}
int pt_engine_has_mtp(const pt_engine *e) {
    return e->desc.has_mtp;
}
const char *pt_engine_arch(const pt_engine *e) {
    return e->arch;
}
const char *pt_engine_plan(const pt_engine *e) {
    return e->plan;
}

void pt_engine_stats(const pt_engine *e, pt_stats *st) {
    memset(st, 0, sizeof *st);
    if (!e->xs) { /* no expert store: experts read through the memory map */
        st->io_backend = "mmap";
        st->rss_bytes = mem_rss();
        st->peak_rss_bytes = mem_peak_rss();
        return;
    }
    xs_stats xs;
    xs_get_stats(e->xs, &xs);
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
    st->pinned = xs.pinned;
    st->prefetched = xs.prefetched;
    st->prefetch_used = xs.prefetch_used;
    st->checked_reads = xs.checked;
    st->bad_reads = xs.bad_reads;
    st->fallbacks = xs.fallbacks;
    st->verify_s = xs.verify_s;
    st->rss_bytes = mem_rss();
    st->peak_rss_bytes = mem_peak_rss();
}

pt_session *pt_session_new(pt_engine *e, const pt_session_params *p, char *err, size_t err_len) {
    pt_err er = {{0}};
    if (!e->fam) {
        snprintf(err, err_len, "%s: opened for its vocabulary only; no session can run",
                 e->g->files[0].path);
        return NULL;
    }
    if (e->plan_only) {
        snprintf(err, err_len,
                 "%s: the engine was opened for its memory plan only (plan_only); open it again "
                 "without plan_only to run sessions",
                 e->g->files[0].path);
        return NULL;
    }
    const int n_ctx = p && p->n_ctx > 0 ? p->n_ctx : e->n_ctx;
    /* by default a prompt block as large as the plan allows when experts stream */
    int n_batch = p && p->n_batch > 0 ? p->n_batch
                  : e->block_rows > 0 ? e->block_rows
                                      : DEFAULT_BATCH;
    if (!(p && p->n_batch > 0) && n_batch > n_ctx)
        n_batch = n_ctx > DEFAULT_BATCH ? n_ctx : DEFAULT_BATCH;
    int tile = p && p->n_tile > 0 ? p->n_tile : DEFAULT_BATCH;
    if (tile > n_batch) tile = n_batch;
    pt_session *s = calloc(1, sizeof *s);
    if (!s) {
        snprintf(err, err_len, "out of memory");
        return NULL;
    }
    s->e = e;
    s->n_ctx = n_ctx;
    s->n_batch = n_batch;
    s->hist = malloc((size_t)n_ctx * sizeof *s->hist);
    const dec_params dp = {.pool = e->pool,
                           .xs = e->xs,
                           .prefetch = e->prefetch,
                           .max_isa = e->max_isa,
                           .n_ctx = n_ctx,
                           .max_batch = n_batch,
                           .tile = tile,
                           .k_type = e->k_type,
                           .v_type = e->v_type,
                           .kv_hot = e->kv_hot,
                           .spill_dir = e->spill_dir};
    s->dec = s->hist ? dec_new(e->fam, e->model, &e->desc, &dp, &er) : NULL;
    if (!s->dec) {
        if (!s->hist) pt_errf(&er, "out of memory for a %d-position token history", n_ctx);
        copy_err(&er, err, err_len);
        free(s->hist);
        free(s);
        return NULL;
    }
    return s;
}

void pt_session_free(pt_session *s) {
    if (!s) return;
    dec_free(s->dec);
    free(s->hist);
    free(s);
}

pt_engine *pt_session_engine(const pt_session *s) {
    return s->e;
}
int pt_session_n_ctx(const pt_session *s) {
    return s->n_ctx;
}
uint64_t pt_session_kv_bytes(const pt_session *s) {
    return dec_kv_resident(s->dec);
}
uint64_t pt_session_kv_disk_bytes(const pt_session *s) {
    return dec_kv_disk(s->dec);
}
int pt_session_kv_hot(const pt_session *s) {
    return dec_kv_hot(s->dec);
}
void pt_session_kv_cache(const pt_session *s, pt_kv_cache_stats *st) {
    dec_kv_cache(s->dec, st);
}
const char *pt_engine_kv_types(const pt_engine *e) {
    return e->kv_types;
}
int pt_engine_n_ctx(const pt_engine *e) {
    return e->n_ctx;
}
int pt_session_n_batch(const pt_session *s) {
    return s->n_batch;
}
int pt_session_n_past(const pt_session *s) {
    return dec_n_past(s->dec);
}
const int32_t *pt_session_tokens(const pt_session *s) {
    return s->hist;
}

int pt_session_truncate(pt_session *s, int n) {
    return dec_truncate(s->dec, n);
}

int session_truncate_keep_mtp(pt_session *s, int n) {
    const int m = dec_mtp_keep(s->dec, INT_MAX);
    const int kept = dec_truncate(s->dec, n);
    if (kept == n && m >= n) dec_mtp_hold(s->dec, n);
    return kept;
}

/* ===== Prompt progress ===== */

void pt_session_set_progress(pt_session *s, pt_prompt_progress_fn fn, void *ud) {
    s->progress = fn;
    s->progress_ud = ud;
}

/* The decoder's report for one pt_session_eval call, put in the span's terms. */
static void on_dec_progress(void *ud, int64_t done, int64_t total) {
    pt_session *s = ud;
    (void)total;
    s->prog.done = s->prog_base + done;
    if (s->prog.done > s->prog.total) s->prog.done = s->prog.total;
    s->progress(s->progress_ud, &s->prog);
}

void session_progress_begin(pt_session *s, int n_prompt, int n_reused) {
    const int64_t total = (int64_t)(n_prompt - n_reused) * s->e->desc.n_layer;
    if (!s->progress || total <= 0) return;
    s->prog =
        (pt_prompt_progress){.n_prompt = n_prompt, .n_reused = n_reused, .done = 0, .total = total};
    s->prog_base = 0;
    dec_set_progress(s->dec, on_dec_progress, s);
    s->progress(s->progress_ud, &s->prog);
}

void session_progress_end(pt_session *s) {
    dec_set_progress(s->dec, NULL, NULL);
    s->prog.total = 0;
}

/* ===== A prompt's expert reads ===== */

/* The store's bytes read and experts read into slots (misses and prefetches). */
static void store_reads(const pt_engine *e, uint64_t *bytes, uint64_t *experts) {
    xs_stats xs = {0};
    if (e->xs) xs_get_stats(e->xs, &xs);
    *bytes = xs.bytes_read;
    *experts = xs.misses + xs.prefetched;
}

static void prompt_begin(pt_session *s) {
    dec_routed_reset(s->dec);
    store_reads(s->e, &s->read0, &s->xread0);
    s->t0 = pt_now_s();
    s->last = (pt_prompt_stats){.n_batch = s->n_batch};
}

/* The figures of the prompt since prompt_begin, n tokens evaluated. */
static void prompt_end(pt_session *s, int n) {
    const int *cnt = dec_routed_counts(s->dec);
    s->last.n_tokens = n;
    s->last.seconds = pt_now_s() - s->t0;
    uint64_t bytes, experts;
    store_reads(s->e, &bytes, &experts);
    s->last.expert_bytes_read = bytes - s->read0;
    s->last.experts_read = experts - s->xread0;
    for (int l = 0; l < s->e->desc.n_layer; l++) {
        s->last.routed_experts += (uint64_t)cnt[l];
        s->last.routed_expert_bytes += (uint64_t)cnt[l] * s->e->expert_bytes[l];
    }
}

void pt_session_prompt_stats(const pt_session *s, pt_prompt_stats *st) {
    *st = s->last;
}

int pt_session_eval(pt_session *s, const int32_t *tokens, int n, float *logits, int all_rows,
                    float *hidden, char *err, size_t err_len) {
    pt_err e = {{0}};
    const int p0 = pt_session_n_past(s);
    const int prompt = !s->in_sync && n > 1;
    if (prompt) prompt_begin(s);
    const int rc = dec_eval(s->dec, tokens, n, logits, all_rows, hidden, &e);
    if (s->prog.total) s->prog_base += (int64_t)n * s->e->desc.n_layer;
    if (prompt) prompt_end(s, pt_session_n_past(s) - p0);
    /* the chunks that completed before an error stay cached: record their tokens */
    const int p1 = pt_session_n_past(s);
    if (p1 > p0) memcpy(s->hist + p0, tokens, (size_t)(p1 - p0) * sizeof *tokens);
    if (rc) {
        copy_err(&e, err, err_len);
        return -1;
    }
    return 0;
}

int session_check_prompt(const pt_session *s, const int32_t *tokens, int n, char *err,
                         size_t err_len) {
    if (n <= 0) return snprintf(err, err_len, "the prompt is empty (no tokens)"), -1;
    if (n > s->n_ctx)
        return snprintf(err, err_len,
                        "the prompt is %d tokens but the context holds %d (raise -c/--ctx-size)", n,
                        s->n_ctx),
               -1;
    for (int i = 0; i < n; i++)
        if (tokens[i] < 0 || tokens[i] >= s->e->desc.n_vocab)
            return snprintf(err, err_len,
                            "token id %d at position %d is outside the vocabulary (%d)", tokens[i],
                            i, s->e->desc.n_vocab),
                   -1;
    return 0;
}

int pt_session_sync(pt_session *s, const int32_t *tokens, int n, float *logits,
                    const volatile sig_atomic_t *stop, char *err, size_t err_len) {
    if (session_check_prompt(s, tokens, n, err, err_len)) return -1;
    const int held = pt_session_n_past(s);
    int keep = 0;
    while (keep < n && keep < held && s->hist[keep] == tokens[keep])
        keep++;
    if (keep == n && logits) keep = n - 1; /* the last token is evaluated again for its logits */
    const int kept = pt_session_truncate(s, keep);
    /* one chunk per call: a stop request (Ctrl-C, a client that left) is
     * noticed between chunks */
    prompt_begin(s);
    s->in_sync = 1;
    int rc = kept;
    session_progress_begin(s, n, kept);
    for (int at = kept; at < n;) {
        if (pt_stop_requested(stop)) {
            rc = -2;
            break;
        }
        const int m = n - at < s->n_batch ? n - at : s->n_batch;
        if (pt_session_eval(s, tokens + at, m, at + m == n ? logits : NULL, 0, NULL, err,
                            err_len)) {
            rc = -1;
            break;
        }
        at += m;
    }
    session_progress_end(s);
    s->in_sync = 0;
    prompt_end(s, pt_session_n_past(s) - kept);
    return rc;
}

int session_mtp(pt_session *s, const int32_t *tokens, const float *hidden_prev, int n,
                float *logits, int last_only, float *hidden_out, char *err, size_t err_len) {
    pt_err e = {{0}};
    if (!s->e->desc.has_mtp) pt_errf(&e, "this model (%s) has no NextN/MTP block", s->e->arch);
    if (!s->e->desc.has_mtp ||
        dec_mtp(s->dec, tokens, hidden_prev, n, logits, last_only, hidden_out, &e)) {
        copy_err(&e, err, err_len);
        return -1;
    }
    return 0;
}

int session_mtp_n_past(const pt_session *s) {
    return dec_mtp_keep(s->dec, INT_MAX);
}

int session_mtp_keep(pt_session *s, int n) {
    return dec_mtp_keep(s->dec, n);
}

/* ===== For the prefix cache (engine/session.h) ===== */

dec *engine_session_dec(pt_session *s) {
    return s->dec;
}
int32_t *engine_session_hist(pt_session *s) {
    return s->hist;
}
const uint8_t *engine_fingerprint(const pt_engine *e) {
    return e->fingerprint;
}
void engine_kv_key(const pt_engine *e, uint32_t *k_type, uint32_t *v_type, int32_t *isa) {
    *k_type = e->k_type;
    /* a model that keeps no V cache (MLA): its V type changes no byte */
    *v_type = e->desc.k_only ? e->k_type : e->v_type;
    const int best = qt_isa_detect();
    *isa = e->max_isa < 0 || e->max_isa > best ? best : e->max_isa;
}
