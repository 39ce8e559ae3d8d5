/* experts.c — expert store and per-layer cache (see experts.h for the policy).
 *
 * Slot layout (streaming from the GGUF): one region per matrix, each large
 * enough for the matrix slice plus the alignment slack of an O_DIRECT read
 * (GGUF tensors are only 32-byte aligned, so the read covers the enclosing
 * 4 KiB blocks and the weights start `shift` bytes into the region). From an
 * expert pack a record is already 4 KiB aligned and contiguous: one read.
 *
 * Checking (experts.h): a slot is hashed when first delivered after its read,
 * not when the read lands, so a prefetched expert nobody asks for costs no
 * hashing. A pack record that fails is re-read; if it fails again the slot is
 * refilled from the GGUF through descriptors opened without O_DIRECT (a pack
 * slot has no room for alignment slack; the slices land back to back exactly
 * where the record's would). The checksum is defined over the slices in order
 * (xpack_checksum), so one table entry checks a record and the GGUF's
 * scattered slices alike. The pieces are hashed on the engine thread: handing
 * them to the thread pool was 2.6 times slower on a loaded 2-core machine
 * (bench/RESULTS.md, 23:00 entry); the piece layout leaves that door open.
 */
#include "experts.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include <xxhash.h>
#if defined(__x86_64__) && defined(__has_include)
#if __has_include(<xxh_x86dispatch.h>)
#include <xxh_x86dispatch.h> /* XXH3 on AVX2 / AVX-512 when the CPU has them: twice SSE2's speed */
#endif
#endif

#include "os/os.h"
#include "runtime/plan.h"
#include "runtime/xio.h"

/* a pack record is read whole with O_DIRECT, where it stands in the file: the format's
 * alignment (fixed on disk) must be one the reads accept */
static_assert(XPACK_ALIGN % OS_DIRECT_ALIGN == 0, "pack records O_DIRECT-aligned");
#define XS_LFU_DECAY 0.9f /* per token: an expert unused for ~7 tokens has lost half its weight */

enum { SLOT_EMPTY = 0, SLOT_LOADING, SLOT_READY };

typedef struct xs_slot {
    int expert;        /* -1 when empty */
    int state;         /* SLOT_* */
    int pending;       /* reads outstanding while loading */
    uint64_t last;     /* token tick of the last use */
    float freq;        /* LFU score as of `last` */
    int pinned;        /* never evicted */
    int prefetched;    /* loaded ahead of need and not yet used */
    uint32_t shift[3]; /* start of each matrix inside its region */
    uint64_t bytes;    /* bytes requested by the load in progress */
    int failed;        /* a read of the load in progress failed */
    int attempt;       /* 0: first read, 1: re-read after a bad checksum, 2: from the GGUF */
    int checked;       /* the bytes passed their checksum (or there is no table) */
    int held;          /* delivered and not released: the caller computes with its bytes */
    double t_submit;
} xs_slot;

typedef struct xs_lay {
    int n_mats, n_expert;
    uint64_t mat_bytes[3];      /* one expert's slice of each matrix */
    uint64_t mat_off[3];        /* file offset of expert 0's slice */
    int fd_idx[3];              /* index into the store's fds */
    const uint8_t *map[3];      /* resident mode: expert 0's slice in the mapping */
    const gguf_tensor *mats[3]; /* for error messages */
    uint64_t region[3];         /* offset of each matrix's region in a slot */
    uint64_t slot_bytes;
    uint8_t *arena; /* n_slots * slot_bytes */
    int n_slots;
    xs_slot *slots;
    int *where; /* [n_expert]: slot holding the expert, or -1 */
    uint64_t tick;
    /* the current request */
    int *need;          /* [n_expert] */
    uint8_t *delivered; /* [n_expert] per need index */
    int n_need, n_delivered;
} xs_lay;

struct xs_store {
    xs_config cfg;
    const gguf_ctx *g; /* the model (outlives the store) */
    int n_layers;
    xs_lay *lay;
    xio *io;
    int fds[64]; /* one per GGUF file (split models) */
    int n_fds;
    int pack_fd; /* the pack, when records come from it */
    int direct;
    int gguf_direct; /* fds use O_DIRECT (never with a pack: they are its fallback) */
    /* the pieces of the read being checked (xpack_checksum), sized at open */
    uint64_t *piece_sum; /* [max_pieces] XXH3-64 of each */
    int warned;          /* the first bad read was reported on stderr */
    uint8_t *arena;
    xs_stats st;
};

static uint64_t mat_region(uint64_t bytes, int direct) {
    /* O_DIRECT: the slice may start anywhere in a block and end anywhere */
    return direct ? pt_align_up(bytes, OS_DIRECT_ALIGN) + OS_DIRECT_ALIGN : pt_align_up(bytes, 64);
}

uint64_t xs_slot_bytes(const xs_layer_desc *d, const xpack *pack, int l, int direct) {
    if (!d->n_mats) return 0;
    if (pack) return pack->layers[l].record_bytes; /* aligned, contiguous: read as is */
    uint64_t total = 0;
    for (int m = 0; m < d->n_mats; m++)
        total += mat_region(d->mats[m]->nbytes / (uint64_t)d->mats[m]->ne[2], direct);
    return pt_align_up(total, OS_DIRECT_ALIGN);
}

static void lay_free(xs_lay *L) {
    free(L->slots);
    free(L->where);
    free(L->need);
    free(L->delivered);
}

void xs_close(xs_store *s) {
    if (!s) return;
    xio_close(s->io);
    free(s->piece_sum);
    if (s->pack_fd >= 0) close(s->pack_fd);
    for (int i = 0; i < s->n_fds; i++)
        if (s->fds[i] >= 0) close(s->fds[i]);
    for (int l = 0; s->lay && l < s->n_layers; l++)
        lay_free(&s->lay[l]);
    free(s->lay);
    free(s->arena);
    free(s);
}

xs_store *xs_open(const gguf_ctx *g, const xs_layer_desc *layers, int n_layers,
                  const xs_config *cfg, pt_err *err) {
    xs_store *s = calloc(1, sizeof *s);
    if (!s) {
        pt_errf(err, "out of memory");
        return NULL;
    }
    s->cfg = *cfg;
    s->g = g;
    s->n_layers = n_layers;
    s->pack_fd = -1;
    s->lay = calloc((size_t)(n_layers > 0 ? n_layers : 1), sizeof(xs_lay));
    if (!s->lay) goto oom;
    int max_expert = 1;
    for (int l = 0; l < n_layers; l++) {
        const xs_layer_desc *d = &layers[l];
        xs_lay *L = &s->lay[l];
        L->n_mats = d->n_mats;
        if (!d->n_mats) continue;
        L->n_expert = (int)d->mats[0]->ne[2];
        for (int m = 0; m < d->n_mats; m++) {
            const gguf_tensor *t = d->mats[m];
            if ((int)t->ne[2] != L->n_expert) {
                pt_errf(err, "%s: expert tensors of layer %d disagree on the expert count",
                        g->files[0].path, l);
                goto fail;
            }
            L->mat_bytes[m] = t->nbytes / (uint64_t)t->ne[2];
            L->mat_off[m] = t->file_offset;
            L->fd_idx[m] = (int)t->file;
            L->map[m] = t->data;
            L->mats[m] = t;
        }
        if (L->n_expert > max_expert) max_expert = L->n_expert;
        L->need = calloc((size_t)L->n_expert, sizeof(int));
        L->delivered = calloc((size_t)L->n_expert, 1);
        if (!L->need || !L->delivered) goto oom;
    }
    if (!cfg->streaming) return s;

    /* streaming: descriptors, arena, slots, reader */
    if (g->n_files > PT_ARRAY_LEN(s->fds)) {
        pt_errf(err, "%s: more than %zu split files", g->files[0].path, PT_ARRAY_LEN(s->fds));
        goto fail;
    }
    s->direct = cfg->direct;
    if (cfg->pack) {
        if (s->direct) s->pack_fd = os_open_direct(cfg->pack->path);
        if (s->pack_fd < 0) {
            s->direct = 0;
            s->pack_fd = open(cfg->pack->path, O_RDONLY | O_CLOEXEC);
        }
        if (s->pack_fd < 0) {
            pt_errf(err, "%s: cannot open: %s", cfg->pack->path, strerror(errno));
            goto fail;
        }
    }
    /* the GGUF: the source without a pack, the fallback for a pack record that
     * fails its checksum twice */
    s->gguf_direct = cfg->pack ? 0 : s->direct;
    if (!cfg->pack || cfg->sums)
        for (uint32_t f = 0; f < g->n_files; f++) {
            int fd = -1;
            if (s->gguf_direct) fd = os_open_direct(g->files[f].path);
            if (fd < 0 && s->gguf_direct && f == 0) /* file system without O_DIRECT */
                s->gguf_direct = s->direct = 0;
            if (fd < 0) fd = open(g->files[f].path, O_RDONLY | O_CLOEXEC);
            if (fd < 0) {
                pt_errf(err, "%s: cannot open for reading experts: %s", g->files[f].path,
                        strerror(errno));
                goto fail;
            }
            s->fds[s->n_fds++] = fd;
        }
    if (cfg->sums) {
        uint64_t most = 1;
        for (int l = 0; l < n_layers; l++) {
            uint64_t n = 0;
            for (int m = 0; m < s->lay[l].n_mats; m++)
                n += (s->lay[l].mat_bytes[m] + XPACK_SUM_PIECE - 1) / XPACK_SUM_PIECE;
            most = PT_MAX(most, n);
        }
        s->piece_sum = calloc(most, sizeof *s->piece_sum);
        if (!s->piece_sum) goto oom;
    }
    uint64_t total = 0;
    for (int l = 0; l < n_layers; l++) {
        xs_lay *L = &s->lay[l];
        if (!L->n_mats) continue;
        uint64_t off = 0;
        for (int m = 0; m < L->n_mats; m++) {
            L->region[m] = off;
            /* a pack record holds the slices back to back */
            off += cfg->pack ? L->mat_bytes[m] : mat_region(L->mat_bytes[m], s->direct);
        }
        L->slot_bytes = pt_align_up(off, OS_DIRECT_ALIGN);
        L->n_slots = cfg->slots < L->n_expert ? cfg->slots : L->n_expert;
        if (L->n_slots < 1) {
            pt_errf(err, "the expert cache needs at least 1 slot per layer");
            goto fail;
        }
        total += L->slot_bytes * (uint64_t)L->n_slots;
        L->slots = calloc((size_t)L->n_slots, sizeof(xs_slot));
        L->where = malloc((size_t)L->n_expert * sizeof(int));
        if (!L->slots || !L->where) goto oom;
        for (int i = 0; i < L->n_slots; i++)
            L->slots[i].expert = -1;
        for (int e = 0; e < L->n_expert; e++)
            L->where[e] = -1;
    }
    /* 2 MiB aligned and, where the kernel offers transparent huge pages only on
     * request (the common "madvise" setting), backed by huge pages: the arena is
     * rewritten by DMA and streamed through by the expert matmuls every token,
     * and 4 KiB pages cost a TLB miss per page on both paths */
    if (posix_memalign((void **)&s->arena, OS_HUGE_PAGE, total ? total : OS_DIRECT_ALIGN) != 0) {
        pt_errf(err, "cannot allocate %.2f GiB for the expert cache", (double)total / PLAN_GIB);
        goto fail;
    }
#ifdef MADV_HUGEPAGE
    if (total >= OS_HUGE_PAGE)
        (void)madvise(s->arena, total, MADV_HUGEPAGE); /* a hint: failure is harmless */
#endif
    /* Backed now, at load, rather than page by page as the first reads land: a read into
     * an unbacked page makes the kernel fault it in, and with O_DIRECT through io_uring
     * that runs in the ring's worker threads, which then take the CPUs from the compute
     * threads (6% of a 2k-token glm-dsa prompt's samples were workers clearing pages)
     * while the other thread waits at the next barrier. 2k-token glm-dsa prompt under
     * 4 GiB, 2 threads: 60.3-64.1 tok/s against 50.4-59.5; the load takes 0.1-0.6 s more
     * for its 2.39 GB, 2.5-4.7 s where a VM's host must back the memory first, which the
     * reads paid before (bench/RESULTS.md, 2026-12-06). */
    os_populate(s->arena, total);
    uint64_t off = 0;
    for (int l = 0; l < n_layers; l++) {
        xs_lay *L = &s->lay[l];
        if (!L->n_mats) continue;
        L->arena = s->arena + off;
        off += L->slot_bytes * (uint64_t)L->n_slots;
    }
    /* a layer's misses are submitted together, and the next layer's prefetch
     * may be in flight meanwhile: depth for two layers' worth of slot reads */
    int depth = 0;
    for (int l = 0; l < n_layers; l++)
        depth = PT_MAX(depth, s->lay[l].n_slots * PT_MAX(s->lay[l].n_mats, 1));
    s->io = xio_open(cfg->io, depth > 0 ? 2 * depth : 1, err);
    if (!s->io) goto fail;
    return s;
oom:
    pt_errf(err, "out of memory");
fail:
    xs_close(s);
    return NULL;
}

static float lfu_score(const xs_slot *sl, uint64_t tick) {
    return sl->freq * powf(XS_LFU_DECAY, (float)(tick - sl->last));
}

/* A slot that may receive a new expert now, or -1. Empty slots first; never
 * one that is loading, pinned, held, or holds an expert this request still
 * needs. */
static int pick_victim(const xs_store *s, const xs_lay *L) {
    int best = -1;
    float best_score = 0;
    for (int i = 0; i < L->n_slots; i++) {
        const xs_slot *sl = &L->slots[i];
        if (sl->state == SLOT_EMPTY) return i;
        if (sl->state == SLOT_LOADING || sl->pinned || sl->held) continue;
        int busy = 0;
        for (int k = 0; k < L->n_need && !busy; k++)
            busy = L->need[k] == sl->expert && !L->delivered[k];
        if (busy) continue;
        float score = s->cfg.policy == XS_LFU ? lfu_score(sl, L->tick) : (float)sl->last;
        if (best < 0 || score < best_score) {
            best = i;
            best_score = score;
        }
    }
    return best;
}

/* Start reading expert e of layer l into slot i: attempt 0 from the source
 * (the pack or the GGUF), 1 again from it after a bad checksum, 2 from the
 * GGUF after a pack record failed twice. */
static int load(xs_store *s, int l, int i, int e, int attempt, pt_err *err) {
    xs_lay *L = &s->lay[l];
    xs_slot *sl = &L->slots[i];
    if (sl->expert >= 0) L->where[sl->expert] = -1;
    sl->expert = e;
    sl->state = SLOT_LOADING;
    sl->pending = L->n_mats;
    sl->failed = 0;
    sl->attempt = attempt;
    sl->checked = !s->cfg.sums;
    if (!attempt) sl->prefetched = sl->pinned = 0; /* a re-read keeps the slot's role */
    sl->bytes = 0;
    sl->t_submit = pt_now_s();
    L->where[e] = i;
    uint8_t *base = L->arena + (uint64_t)i * L->slot_bytes;
    const uint64_t tag = ((uint64_t)l << 32) | (uint64_t)i;
    if (s->cfg.pack && attempt < 2) { /* one aligned read of the whole record */
        sl->pending = 1;
        sl->bytes = L->slot_bytes;
        for (int m = 0; m < L->n_mats; m++)
            sl->shift[m] = 0;
        if (xio_submit(s->io, s->pack_fd, xpack_record_offset(s->cfg.pack, l, e), L->slot_bytes,
                       L->slot_bytes, base, tag))
            return pt_errf(err, "internal error: I/O queue full");
        return 0;
    }
    for (int m = 0; m < L->n_mats; m++) {
        uint64_t off = L->mat_off[m] + (uint64_t)e * L->mat_bytes[m], len = L->mat_bytes[m],
                 start = off;
        if (s->gguf_direct) {
            start = off & ~(uint64_t)(OS_DIRECT_ALIGN - 1);
            len = pt_align_up(off + len, OS_DIRECT_ALIGN) - start;
        }
        sl->shift[m] = (uint32_t)(off - start);
        sl->bytes += len;
        if (xio_submit(s->io, s->fds[L->fd_idx[m]], start, len, off - start + L->mat_bytes[m],
                       base + L->region[m], tag))
            return pt_errf(err, "internal error: I/O queue full");
    }
    return 0;
}

/* Every slot of layer l that the caller held is free to take a new expert. */
static void release_all(xs_lay *L) {
    for (int i = 0; i < L->n_slots; i++)
        L->slots[i].held = 0;
}

int xs_begin(xs_store *s, int l, const int *experts, int n, pt_err *err) {
    xs_lay *L = &s->lay[l];
    if (n < 0 || n > L->n_expert)
        return pt_errf(err, "internal error: %d experts requested of %d", n, L->n_expert);
    release_all(L);
    memcpy(L->need, experts, (size_t)n * sizeof(int));
    if (s->cfg.usage)
        for (int k = 0; k < n; k++)
            s->cfg.usage->count[l][experts[k]]++;
    if (s->cfg.trace) {
        fprintf(s->cfg.trace, "%d", l);
        for (int k = 0; k < n; k++)
            fprintf(s->cfg.trace, " %d", experts[k]);
        fputc('\n', s->cfg.trace);
    }
    memset(L->delivered, 0, (size_t)n);
    L->n_need = n;
    L->n_delivered = 0;
    L->tick++;
    if (!s->cfg.streaming) return 0;
    /* count hits, then submit every miss that has a slot to go to */
    for (int k = 0; k < n; k++) {
        if (L->where[experts[k]] >= 0)
            s->st.hits++;
        else
            s->st.misses++;
    }
    for (int k = 0; k < n; k++) {
        if (L->where[experts[k]] >= 0) continue;
        int v = pick_victim(s, L);
        if (v < 0) break; /* the rest goes into slots as they are released (refill) */
        if (load(s, l, v, experts[k], 0, err)) return -1;
    }
    xio_kick(s->io);
    return 0;
}

static int complete(xs_store *s, uint64_t tag, int rc, double t);

static void mark_used(xs_lay *L, xs_slot *sl) {
    sl->freq = lfu_score(sl, L->tick) + 1.0f;
    sl->last = L->tick;
}

/* Hash the bytes of slot i (xpack_checksum of its slices) and compare with
 * the table. 1 when they match. */
static int slot_ok(xs_store *s, int l, int i) {
    const xs_lay *L = &s->lay[l];
    const xs_slot *sl = &L->slots[i];
    const uint8_t *base = L->arena + (uint64_t)i * L->slot_bytes;
    const double t0 = pt_now_s();
    size_t n = 0;
    for (int m = 0; m < L->n_mats; m++)
        for (uint64_t at = 0; at < L->mat_bytes[m]; at += XPACK_SUM_PIECE)
            s->piece_sum[n++] =
                XXH3_64bits(base + L->region[m] + sl->shift[m] + at,
                            PT_MIN(L->mat_bytes[m] - at, (uint64_t)XPACK_SUM_PIECE));
    const uint64_t sum = XXH3_64bits(s->piece_sum, n * 8);
    const int ok = sum == xpack_sum(s->cfg.sums, l, sl->expert);
    s->st.verify_s += pt_now_s() - t0;
    s->st.checked++;
    return ok;
}

/* Let every read in flight land, results ignored: they write into slots, so
 * nothing may fail a request while one is still running. */
static void drain(xs_store *s) {
    while (xio_inflight(s->io)) {
        uint64_t tag;
        pt_err ignore;
        const int rc = xio_wait(s->io, &tag, &ignore);
        complete(s, tag, rc, pt_now_s());
    }
}

/* Expert e of layer l in slot i failed its checksum on read `attempt`: read it
 * again (from the GGUF after a pack record's second failure), or give up with
 * an error naming where the bytes came from. 0 when a new read is in flight. */
static int bad_read(xs_store *s, int l, int i, pt_err *err) {
    xs_lay *L = &s->lay[l];
    xs_slot *sl = &L->slots[i];
    const int e = sl->expert, attempt = sl->attempt;
    const int from_pack = s->cfg.pack && attempt < 2;
    s->st.bad_reads++;
    if (!s->warned) {
        s->warned = 1;
        fprintf(stderr,
                "petrel: warning: expert %d of layer %d read from %s fails its checksum; reading "
                "it again%s (counted in the statistics as bad reads)\n",
                e, l, from_pack ? s->cfg.pack->path : "the GGUF",
                from_pack ? ", then from the GGUF" : "");
    }
    if (attempt == 0 || (attempt == 1 && s->cfg.pack)) {
        if (attempt == 1) s->st.fallbacks++;
        const int rc = load(s, l, i, e, attempt + 1, err);
        xio_kick(s->io);
        return rc;
    }
    /* the GGUF's own bytes fail twice: never used */
    char where[768] = "";
    for (int m = 0, n = 0; m < L->n_mats && n >= 0 && (size_t)n < sizeof where; m++)
        n += snprintf(where + n, sizeof where - (size_t)n, "%s%s at offset %llu", m ? ", " : "",
                      L->mats[m]->name,
                      (unsigned long long)(L->mat_off[m] + (uint64_t)e * L->mat_bytes[m]));
    L->where[e] = -1;
    sl->expert = -1;
    sl->state = SLOT_EMPTY;
    drain(s);
    return pt_errf(err,
                   "expert %d of layer %d read twice from %s fails its checksum (%s): the file "
                   "differs from the one the checksum table %s was made from, or the storage "
                   "returns bad data",
                   e, l, s->g->files[L->mats[0]->file].path, where, s->cfg.sums->path);
}

/* Deliver one requested expert that is ready (read, checked), without waiting
 * or starting reads other than a bad record's second read: 1 with *expert and
 * mats[], 0 when none is ready, -1 with err. */
static int deliver_ready(xs_store *s, int l, int *expert, const uint8_t *mats[3], pt_err *err) {
    xs_lay *L = &s->lay[l];
    if (!s->cfg.streaming) {
        if (L->n_delivered == L->n_need) return 0;
        int k = L->n_delivered++;
        int e = L->need[k];
        L->delivered[k] = 1;
        *expert = e;
        for (int m = 0; m < L->n_mats; m++)
            mats[m] = L->map[m] + (uint64_t)e * L->mat_bytes[m];
        return 1;
    }
    for (int k = 0; k < L->n_need; k++) {
        if (L->delivered[k]) continue;
        int e = L->need[k], i = L->where[e];
        if (i < 0 || L->slots[i].state != SLOT_READY) continue;
        xs_slot *sl = &L->slots[i];
        if (!sl->checked) {
            if (!slot_ok(s, l, i)) {
                if (bad_read(s, l, i, err)) return -1;
                continue; /* LOADING again: deliver others, then wait for it */
            }
            sl->checked = 1;
        }
        L->delivered[k] = 1;
        L->n_delivered++;
        sl->held = 1;
        mark_used(L, sl);
        if (sl->prefetched) {
            sl->prefetched = 0;
            s->st.prefetch_used++;
        }
        *expert = e;
        const uint8_t *base = L->arena + (uint64_t)i * L->slot_bytes;
        for (int m = 0; m < L->n_mats; m++)
            mats[m] = base + L->region[m] + sl->shift[m];
        return 1;
    }
    return 0;
}

/* Start reading the requested experts that have no slot yet into slots that
 * may take them (empty ones, then ones whose expert the caller released). */
static int refill(xs_store *s, int l, pt_err *err) {
    xs_lay *L = &s->lay[l];
    int started = 0;
    for (int k = 0; k < L->n_need; k++) {
        if (L->delivered[k] || L->where[L->need[k]] >= 0) continue;
        const int v = pick_victim(s, L);
        if (v < 0) break;
        if (load(s, l, v, L->need[k], 0, err)) return -1;
        started = 1;
    }
    if (started) xio_kick(s->io);
    return 0;
}

int xs_take(xs_store *s, int l, int *expert, const uint8_t *mats[3], pt_err *err) {
    xs_lay *L = &s->lay[l];
    if (L->n_delivered == L->n_need) return 0;
    for (;;) {
        /* slots released since the last call take the next reads first, so the
         * disk works while the caller computes what it took */
        if (s->cfg.streaming && refill(s, l, err)) return -1;
        const int got = deliver_ready(s, l, expert, mats, err);
        if (got) return got;
        if (!s->cfg.streaming) return 0;
        if (!xio_inflight(s->io)) {
            for (int i = 0; i < L->n_slots; i++)
                if (L->slots[i].held) return XS_AGAIN;
            return pt_errf(
                err, "internal error: layer %d waits for experts but no read is in flight", l);
        }
        double t0 = pt_now_s();
        uint64_t tag;
        pt_err rerr = {{0}};
        int rc = xio_wait(s->io, &tag, &rerr);
        double t1 = pt_now_s();
        s->st.wait_s += t1 - t0;
        if (complete(s, tag, rc, t1)) {
            drain(s); /* a failed expert is never used */
            return pt_errf(err, "reading experts of layer %d: %s", l, rerr.msg);
        }
    }
}

void xs_release(xs_store *s, int l, int expert) {
    xs_lay *L = &s->lay[l];
    if (s->cfg.streaming && L->where[expert] >= 0) L->slots[L->where[expert]].held = 0;
}

int xs_next(xs_store *s, int l, int *expert, const uint8_t *mats[3], pt_err *err) {
    release_all(&s->lay[l]);
    const int rc = xs_take(s, l, expert, mats, err);
    if (rc == XS_AGAIN)
        return pt_errf(err, "internal error: layer %d waits for a released slot", l);
    return rc;
}

/* Account one finished read; returns -1 when it failed. */
static int complete(xs_store *s, uint64_t tag, int rc, double t) {
    xs_lay *L = &s->lay[(int)(tag >> 32)];
    xs_slot *sl = &L->slots[(int)(tag & 0xffffffffu)];
    if (rc)
        sl->failed = 1;
    else
        s->st.reads++;
    if (--sl->pending == 0) {
        if (sl->failed) {
            if (sl->expert >= 0) L->where[sl->expert] = -1;
            sl->expert = -1;
            sl->state = SLOT_EMPTY;
        } else {
            sl->state = SLOT_READY;
            s->st.read_s += t - sl->t_submit;
            s->st.bytes_read += sl->bytes;
        }
    }
    return rc ? -1 : 0;
}

int xs_pin(xs_store *s, int l, const int *experts, int n, pt_err *err) {
    if (!s->cfg.streaming || !s->lay[l].n_mats) return 0;
    xs_lay *L = &s->lay[l];
    int pinned = 0;
    for (int k = 0; k < n; k++) {
        int free_slots = 0, slot = -1;
        for (int i = 0; i < L->n_slots; i++)
            if (L->slots[i].state == SLOT_EMPTY) {
                free_slots++;
                if (slot < 0) slot = i;
            }
        if (free_slots < 2 || L->where[experts[k]] >= 0) continue; /* keep one slot for streaming */
        if (load(s, l, slot, experts[k], 0, err)) return -1;
        L->slots[slot].pinned = 1;
        pinned++;
    }
    xio_kick(s->io);
    while (xio_inflight(s->io)) {
        uint64_t tag;
        pt_err rerr = {{0}};
        int rc = xio_wait(s->io, &tag, &rerr);
        if (complete(s, tag, rc, pt_now_s())) {
            drain(s);
            return pt_errf(err, "pinning experts of layer %d: %s", l, rerr.msg);
        }
    }
    s->st.pinned += (uint64_t)pinned;
    return pinned;
}

int xs_prefetch(xs_store *s, int l, const int *experts, int n, pt_err *err) {
    if (!s->cfg.streaming || !s->lay[l].n_mats) return 0;
    xs_lay *L = &s->lay[l];
    for (int k = 0; k < n; k++) {
        if (L->where[experts[k]] >= 0) continue;
        int v = pick_victim(s, L);
        if (v < 0) break;
        if (load(s, l, v, experts[k], 0, err)) return -1;
        L->slots[v].prefetched = 1;
        s->st.prefetched++;
    }
    xio_kick(s->io);
    return 0;
}

void xs_get_stats(const xs_store *s, xs_stats *st) {
    *st = s->st;
}
int xs_io_backend(const xs_store *s) {
    return s->io ? xio_backend(s->io) : 0;
}
int xs_uses_pack(const xs_store *s) {
    return s->cfg.pack != NULL;
}
int xs_direct(const xs_store *s) {
    return s->direct;
}
int xs_slots(const xs_store *s) {
    return s->cfg.streaming ? s->cfg.slots : 0;
}
