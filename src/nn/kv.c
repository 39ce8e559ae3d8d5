/* kv.c — KV cache element types (see kv.h). */
#include "kv.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common.h"
#include "kernels/qtypes.h"
#include "kernels/quant.h"
#include "nn/ops.h"
#include "os/os.h"
#include "runtime/xio.h"

int kv_type_ok(uint32_t type) {
    return type == QT_F32 || type == QT_F16 || type == QT_BF16 || type == QT_Q8_0 ||
           type == QT_Q4_0;
}

int kv_block(uint32_t type) {
    return type == QT_Q8_0 || type == QT_Q4_0 ? 32 : 1;
}

size_t kv_bytes(uint32_t type, int64_t n) {
    uint64_t b = 0;
    PT_ASSERT(qt_row_bytes(type, n, &b) == 0);
    return (size_t)b;
}

/* q4_0 as ggml stores a row (quantize_row_q4_0_ref): the value of largest
 * magnitude maps to -8, d = max / -8, q = min(15, (int)(x / d + 8.5)). */
static void store_q4_0(const float *x, int64_t n, block_q4_0 *y) {
    for (int64_t i = 0; i < n / 32; i++, x += 32) {
        float amax = 0.0f, max = 0.0f;
        for (int j = 0; j < 32; j++)
            if (amax < fabsf(x[j])) {
                amax = fabsf(x[j]);
                max = x[j];
            }
        const float d = max / -8.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
        y[i].d = qt_f32_to_f16(d);
        for (int j = 0; j < 16; j++) {
            const int a = (int)(int8_t)(x[j] * id + 8.5f), b = (int)(int8_t)(x[j + 16] * id + 8.5f);
            y[i].qs[j] = (uint8_t)((a < 15 ? a : 15) | (b < 15 ? b : 15) << 4);
        }
    }
}

void kv_store(uint32_t type, const float *x, int64_t n, void *dst) {
    if (type == QT_F32)
        memcpy(dst, x, (size_t)n * sizeof(float));
    else if (type == QT_Q4_0)
        store_q4_0(x, n, dst);
    else
        qt_quantize_act_best()(type, x, dst, n); /* fp16/bf16 rounding; ggml-cpu's q8_0 rows */
}

/* fp16 -> float by table: value rows are decoded once per (query, head, key) */
static float f16_table[65536];
static pthread_once_t f16_once = PTHREAD_ONCE_INIT;
static void f16_table_init(void);

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
/* F16C converts exactly, as the table does: the same floats, 8 at a time. */
__attribute__((target("avx,f16c"))) static void f16_load_f16c(const uint16_t *h, int64_t n,
                                                              float *dst) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(h + i))));
    for (; i < n; i++)
        dst[i] = f16_table[h[i]];
}
/* The same conversion 16 at a time (the AVX-512 level). */
__attribute__((target("avx512f"))) static void f16_load_avx512(const uint16_t *h, int64_t n,
                                                               float *dst) {
    int64_t i = 0;
    for (; i + 16 <= n; i += 16)
        _mm512_storeu_ps(dst + i, _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(h + i))));
    f16_load_f16c(h + i, n - i, dst + i);
}
static int f16c_ok = -1, f16_512_ok = -1; /* set once in f16_table_init */
#define HAVE_F16C_PATH 1
#endif

static void f16_table_init(void) {
    for (uint32_t i = 0; i < 65536; i++)
        f16_table[i] = qt_f16_to_f32((pt_f16)i);
#ifdef HAVE_F16C_PATH
    f16c_ok = qt_isa_detect() >= QT_ISA_AVX2; /* AVX2 level includes F16C (dispatch.c) */
    f16_512_ok = qt_isa_detect() >= QT_ISA_AVX512;
#endif
}

void kv_load(uint32_t type, const void *src, int64_t n, float *dst) {
    if (type == QT_F32) {
        memcpy(dst, src, (size_t)n * sizeof(float));
    } else if (type == QT_F16) {
        pthread_once(&f16_once, f16_table_init);
        const uint16_t *h = src;
#ifdef HAVE_F16C_PATH
        if (f16_512_ok) {
            f16_load_avx512(h, n, dst);
            return;
        }
        if (f16c_ok) {
            f16_load_f16c(h, n, dst);
            return;
        }
#endif
        for (int64_t i = 0; i < n; i++)
            dst[i] = f16_table[h[i]];
    } else if (type == QT_BF16) {
        const uint16_t *h = src;
        for (int64_t i = 0; i < n; i++) {
            const uint32_t u = (uint32_t)h[i] << 16;
            memcpy(dst + i, &u, 4);
        }
    } else {
        qt_dequant_ref(type, src, dst, n);
    }
}

static uint32_t query_type(uint32_t type) {
    return type == QT_F32 ? QT_F32 : (uint32_t)qt_get(type)->act_type;
}

size_t kv_query_bytes(uint32_t type, int64_t n) {
    return kv_bytes(query_type(type), n);
}

void kv_query(uint32_t type, const float *q, int64_t n, void *qbuf) {
    if (type == QT_F32)
        memcpy(qbuf, q, (size_t)n * sizeof(float));
    else
        qt_quantize_act_best()(query_type(type), q, qbuf, n);
}

float kv_dot(uint32_t type, const void *qbuf, const void *krow, int64_t n) {
    if (type == QT_F32) return nn_dot_f32(qbuf, krow, (int)n);
    return qt_dot_best(type)(krow, qbuf, n);
}

void kv_round(uint32_t type, float *x, int64_t n) {
    if (type == QT_F32) return;
    uint8_t buf[4 * 1024];
    PT_ASSERT(n <= 1024 && n % kv_block(type) == 0);
    kv_store(type, x, n, buf);
    kv_load(type, buf, n, x);
}

float kv_weight(uint32_t type, float p) {
    if (type == QT_F16) return qt_f16_to_f32(qt_f32_to_f16(p));
    if (type == QT_BF16) return qt_bf16_to_f32(qt_f32_to_bf16(p));
    return p;
}

void kv_wsum_keys(int g, float *const *acc, const float *const *p, uint32_t v_type, int d,
                  int64_t key0, int nk, const void *rows, int rows_f16, size_t stride,
                  uint64_t *used) {
    float pk[NN_WSUM_HEADS][NN_WSUM_KEYS];
    unsigned char on[NN_WSUM_HEADS][NN_WSUM_KEYS];
    for (int h0 = 0; h0 < g; h0 += NN_WSUM_HEADS) {
        const int gb = g - h0 < NN_WSUM_HEADS ? g - h0 : NN_WSUM_HEADS;
        for (int b = 0; b < gb; b++) {
            /* a weight of 0 (either sign) is a key passed over, and +0 (x + 0 is x for
             * every other x, -0 + 0 is +0) */
            nn_weights_on(p[h0 + b], nk, pk[b], on[b]);
            /* kv_weight's rounding (fp16, bf16; the identity for the rest), a row at a time */
            if (v_type == QT_F16 || v_type == QT_BF16) kv_round(v_type, pk[b], nk);
        }
        if (rows_f16)
            nn_wsum_add_keys_heads_f16(gb, acc + h0, NN_WSUM_LANES, d, key0, nk, &pk[0][0],
                                       &on[0][0], rows, stride, used + h0);
        else
            nn_wsum_add_keys_heads(gb, acc + h0, NN_WSUM_LANES, d, key0, nk, &pk[0][0], &on[0][0],
                                   rows, stride, used + h0);
    }
}

/* ===== The arena ===== */

int kv_arena_init(kv_arena *a, size_t cap) {
    const size_t pg = os_page_size();
    *a = (kv_arena){0};
    a->fd = a->dfd = -1;
    cap = (cap + pg - 1) / pg * pg;
    if (!cap) cap = pg;
#ifdef MAP_NORESERVE
    const int flags = MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE;
#else
    const int flags = MAP_PRIVATE | MAP_ANONYMOUS;
#endif
    void *p = mmap(NULL, cap, PROT_READ | PROT_WRITE, flags, -1, 0);
    if (p == MAP_FAILED) return -1;
    a->base = p;
    a->cap = cap;
    return 0;
}

void *kv_arena_take(kv_arena *a, size_t bytes) {
    const size_t pg = os_page_size();
    const size_t n = (bytes + pg - 1) / pg * pg;
    if (!a->base || n > a->cap - a->used) return NULL;
    void *p = a->base + a->used;
    a->used += n ? n : pg;
    return p; /* anonymous pages read as zero until written */
}

/* An unlinked file in dir: O_TMPFILE where the file system has it, else a
 * named one removed at once. */
static int spill_file(const char *dir) {
#ifdef O_TMPFILE
    const int fd = open(dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
    if (fd >= 0) return fd;
#endif
    char path[600];
    snprintf(path, sizeof path, "%s/kv-spill-XXXXXX", dir);
    const int f = mkstemp(path);
    if (f < 0) return -1;
    unlink(path);
    fcntl(f, F_SETFD, FD_CLOEXEC);
    return f;
}

/* The spill file opened again for direct reads (kv_gather), and the alignment
 * they need; -1 where the system or file system has none. */
static int direct_fd(int fd, size_t *align) {
#if defined(__linux__) && defined(O_DIRECT)
    char path[64];
    snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    const int d = open(path, O_RDONLY | O_DIRECT | O_CLOEXEC);
    if (d < 0) return -1;
    size_t al = OS_DIRECT_ALIGN;
#ifdef STATX_DIOALIGN
    struct statx sx;
    if (statx(d, "", AT_EMPTY_PATH, STATX_DIOALIGN, &sx) == 0 && (sx.stx_mask & STATX_DIOALIGN)) {
        if (!sx.stx_dio_offset_align) { /* the file system has no direct I/O for this file */
            close(d);
            return -1;
        }
        al = sx.stx_dio_offset_align > sx.stx_dio_mem_align ? sx.stx_dio_offset_align
                                                            : sx.stx_dio_mem_align;
    }
#endif
    *align = al;
    return d;
#else
    (void)fd;
    (void)align;
    return -1;
#endif
}

/* A gathered buffer's rows between steps, sorted: streaming, the rows its
 * last step selected (what the next step selects again is counted); caching,
 * the rows its slots hold, slot[i] holding row[i]. */
typedef struct kv_gsel {
    int *row;
    uint32_t *slot;
    int n, cap;
    int *tmp;            /* [cap] scratch: a step's rows not held */
    int *trow;           /* [cap] scratch: the rows just kept */
    uint32_t *tslot;     /* [cap] scratch: their slots */
    int n_slots, hand;   /* caching: slots, and where the next free one is looked for */
    int *slot_row;       /* [n_slots] the row a slot holds, -1 none */
    uint64_t *slot_used; /* [n_slots] the gather that last used it */
    uint8_t *mem;        /* the slots' bytes: slot k at mem + k * row */
} kv_gsel;

static void gsel_free(kv_gsel *g) {
    if (!g) return;
    free(g->row), free(g->slot), free(g->tmp), free(g->trow), free(g->tslot), free(g->slot_row);
    free(g->slot_used);
    free(g);
}

/* Room for n rows in the lists. 0, or -1 (out of memory). */
static int gsel_room(kv_gsel *g, int n) {
    if (n <= g->cap) return 0;
    const int cap = n > 2 * g->cap ? n : 2 * g->cap;
    int *r = realloc(g->row, sizeof(int) * (size_t)cap);
    if (r) g->row = r;
    uint32_t *sl = realloc(g->slot, sizeof(uint32_t) * (size_t)cap);
    if (sl) g->slot = sl;
    int *t = realloc(g->tmp, sizeof(int) * (size_t)cap);
    if (t) g->tmp = t;
    int *tr = realloc(g->trow, sizeof(int) * (size_t)cap);
    if (tr) g->trow = tr;
    uint32_t *ts = realloc(g->tslot, sizeof(uint32_t) * (size_t)cap);
    if (ts) g->tslot = ts;
    if (!r || !sl || !t || !tr || !ts) return -1;
    g->cap = cap;
    return 0;
}

/* The hot window: `hot` positions. They turn cold in blocks of a quarter of
 * the window (one write back per block, not per token): the newest hot - blk
 * are always in RAM, never more than hot. */
static void window(kv_arena *a, int64_t hot) {
    a->blk = hot >= 8 ? hot / 4 : 1;
    a->hot = hot > a->blk ? hot - a->blk : 1;
}

int kv_arena_spill(kv_arena *a, size_t fcap, const char *dir, int64_t hot, int64_t n_ctx,
                   pt_err *err) {
    const size_t pg = os_page_size();
    fcap = (fcap + pg - 1) / pg * pg;
    snprintf(a->dir, sizeof a->dir, "%s", dir);
    if (pt_mkdirs(dir) || (a->fd = spill_file(dir)) < 0)
        return pt_errf(err, "%s: cannot create the KV spill file there: %s", dir, strerror(errno));
    void *p = mmap(NULL, fcap ? fcap : pg, PROT_READ | PROT_WRITE, MAP_SHARED, a->fd, 0);
    if (p == MAP_FAILED) {
        const int e = errno;
        close(a->fd);
        return pt_errf(err, "%s: cannot map the KV spill file: %s", dir, strerror(e));
    }
    madvise(p, fcap ? fcap : pg, MADV_RANDOM); /* a fault reads its page, no more */
    a->fbase = p;
    a->fcap = fcap ? fcap : pg;
    a->stamp = calloc(a->fcap / pg, sizeof *a->stamp); /* KV_PAGE_OUT: nothing read yet */
    if (!a->stamp) {
        munmap(a->fbase, a->fcap);
        close(a->fd);
        a->fbase = NULL;
        a->fd = -1;
        return pt_errf(err, "out of memory for the KV spill file's page table (%zu pages)",
                       a->fcap / pg);
    }
    a->dfd = direct_fd(a->fd, &a->dio_align);
    a->step = 1;
    a->n_ctx = n_ctx;
    a->share = hot;
    window(a, hot);
    return 0;
}

int kv_arena_spills(const kv_arena *a) {
    return a->fbase != NULL;
}

void *kv_arena_rows(kv_arena *a, size_t row_bytes, int64_t n, int sparse) {
    if (!a->fbase) return kv_arena_take(a, row_bytes * (size_t)n);
    const size_t pg = os_page_size(), bytes = (row_bytes * (size_t)n + pg - 1) / pg * pg;
    if (bytes > a->fcap - a->fused) return NULL;
    if (a->n_rows == a->rows_cap) {
        const int cap = a->rows_cap ? 2 * a->rows_cap : 16;
        kv_rows *r = realloc(a->rows, (size_t)cap * sizeof *r);
        if (!r) return NULL;
        a->rows = r;
        a->rows_cap = cap;
    }
    uint8_t *p = a->fbase + a->fused;
    a->fused += bytes ? bytes : pg;
    a->rows[a->n_rows++] = (kv_rows){p, row_bytes, sparse, NULL};
    if (sparse == KV_READ_GATHERED && a->dfd >= 0) {
        if (!(a->rows[a->n_rows - 1].gs = calloc(1, sizeof(kv_gsel)))) return NULL;
        a->n_gathered++;
    }
    if (sparse) {
        /* half the share for the newest positions, half for the selected pages' cache (or,
         * where rows are read directly, the gather buffer); the halves are fixed before the
         * first chunk (buffers are taken when a session opens) */
        window(a, a->share - a->share / 2);
        if (sparse == KV_READ_GATHERED && a->dfd >= 0)
            a->gcap += (size_t)(a->share / 2) * row_bytes;
        else
            a->cache_cap += (size_t)(a->share / 2) * row_bytes / pg;
    }
    return p; /* the file's holes read as zero until written */
}

/* Bytes [0, n rows) of a buffer rounded down / up to a page. */
static size_t rows_down(const kv_rows *r, int64_t n) {
    const size_t pg = os_page_size();
    return r->row * (size_t)n / pg * pg;
}
static size_t rows_up(const kv_rows *r, int64_t n) {
    const size_t pg = os_page_size();
    return (r->row * (size_t)n + pg - 1) / pg * pg;
}

int kv_arena_reserve(kv_arena *a, int64_t n, pt_err *err) {
    if (!a->fbase || n <= a->backed) return 0;
    /* ahead in steps of 1024 positions: one call per step, not per token */
    int64_t to = (n + 1023) / 1024 * 1024;
    if (to > a->n_ctx) to = a->n_ctx;
    if (to < n) to = n;
    for (int i = 0; i < a->n_rows; i++) {
        const kv_rows *r = &a->rows[i];
        const size_t lo = rows_down(r, a->backed), hi = rows_up(r, to);
        const off_t off = (off_t)(r->p - a->fbase) + (off_t)lo;
        int e = 0;
#if defined(__linux__)
        e = posix_fallocate(a->fd, off, (off_t)(hi - lo));
#else
        /* no posix_fallocate: write the zeros, so the blocks exist before a store */
        static const uint8_t zero[65536];
        for (size_t o = 0; o < hi - lo && !e;) {
            const size_t k = hi - lo - o < sizeof zero ? hi - lo - o : sizeof zero;
            const ssize_t w = pwrite(a->fd, zero, k, off + (off_t)o);
            if (w <= 0) e = w < 0 ? errno : ENOSPC;
            o += w > 0 ? (size_t)w : 0;
        }
#endif
        if (e)
            return pt_errf(err,
                           "the KV spill file in %s cannot grow to %lld positions: %s (free disk "
                           "space there, or give the KV more RAM with --kv-ram-mb)",
                           a->dir, (long long)to, strerror(e));
    }
    a->backed = to;
    return 0;
}

void kv_arena_prefetch(kv_arena *a, int64_t n_past) {
    if (!a->fbase) return;
    const int64_t cold = n_past < a->cold ? n_past : a->cold;
    for (int i = 0; i < a->n_rows; i++)
        if (!a->rows[i].sparse && cold > 0)
            madvise(a->rows[i].p, rows_up(&a->rows[i], cold), MADV_WILLNEED);
}

/* A selected page's age in steps; ages from KV_AGES - 1 on count as one (the
 * least recent), so the cache's cut is a histogram of KV_AGES counts. */
#define KV_AGES 64
static uint32_t page_age(const kv_arena *a, uint32_t stamp) {
    const uint32_t age = a->step - stamp;
    return age < KV_AGES - 1 ? age : KV_AGES - 1;
}

/* Pages of cold positions below `hi` bytes of sparse buffer r: drop every page
 * the cache does not keep (keep_age: stamps at most this many steps old are
 * kept; *quota more of age keep_age + 1). Maximal runs of pages not kept are
 * dropped with one call each when they hold a page that may be in RAM. */
static void settle_sparse(kv_arena *a, const kv_rows *r, size_t hi, int keep_age, size_t *quota) {
    const size_t pg = os_page_size(), p0 = (size_t)(r->p - a->fbase) / pg, n = hi / pg;
    uint32_t *st = a->stamp + p0;
    size_t run = 0; /* the run of pages not kept starts here */
    int any = 0;    /* 1: a page of the run may be in RAM */
    for (size_t i = 0; i <= n; i++) {
        int keep = 0;
        if (i < n && st[i] != KV_PAGE_OUT && st[i] != KV_PAGE_READ) {
            const int age = (int)page_age(a, st[i]);
            keep = age <= keep_age || (age == keep_age + 1 && *quota > 0 && (*quota)--);
        }
        if (i < n && !keep) {
            any |= st[i] != KV_PAGE_OUT;
            st[i] = KV_PAGE_OUT;
            continue;
        }
        if (any) {
            madvise(r->p + run * pg, (i - run) * pg, MADV_DONTNEED);
#if defined(POSIX_FADV_DONTNEED)
            posix_fadvise(a->fd, (off_t)((p0 + run) * pg), (off_t)((i - run) * pg),
                          POSIX_FADV_DONTNEED);
#endif
        }
        if (keep) a->cached++;
        run = i + 1;
        any = 0;
    }
}

/* Ages of selection kept by the cache: stamps at most *keep_age steps old, and
 * the returned count of pages one step older, so that no more than cache_cap
 * cold pages stay. */
static size_t cache_cut(kv_arena *a, int64_t cold, int *keep_age) {
    size_t h[KV_AGES] = {0};
    const size_t pg = os_page_size();
    for (int b = 0; b < a->n_rows; b++) {
        const kv_rows *r = &a->rows[b];
        if (!r->sparse) continue;
        const uint32_t *st = a->stamp + (size_t)(r->p - a->fbase) / pg;
        for (size_t i = 0, n = rows_down(r, cold) / pg; i < n; i++)
            if (st[i] != KV_PAGE_OUT && st[i] != KV_PAGE_READ) {
                h[page_age(a, st[i])]++;
            }
    }
    size_t sum = 0;
    *keep_age = -1;
    for (int g = 0; g < KV_AGES; g++) {
        if (sum + h[g] > a->cache_cap) return a->cache_cap - sum;
        sum += h[g];
        *keep_age = g;
    }
    return 0;
}

int kv_arena_settle(kv_arena *a, int64_t n_past, pt_err *err) {
    if (!a->fbase) return 0;
    const size_t pg = os_page_size();
    int64_t cold = n_past - a->hot;
    if (cold < 0) cold = 0;
    if (cold > a->cold && cold - a->cold < a->blk) cold = a->cold; /* not a whole block yet */
    for (int i = 0; i < a->n_rows; i++) {
        const kv_rows *r = &a->rows[i];
        const size_t lo = rows_down(r, a->cold < cold ? a->cold : cold), hi = rows_down(r, cold);
        /* the newly cold rows to the file */
        if (hi > lo && msync(r->p + lo, hi - lo, MS_SYNC))
            return pt_errf(err, "writing the KV spill file in %s: %s", a->dir, strerror(errno));
        if (!hi) continue;
        if (r->sparse) { /* in RAM until the cache decides (below) */
            uint32_t *st = a->stamp + (size_t)(r->p - a->fbase) / pg;
            for (size_t k = lo / pg; k < hi / pg; k++)
                if (st[k] == KV_PAGE_OUT) st[k] = KV_PAGE_READ;
            continue;
        }
        /* rows read whole every step: every cold row out of RAM */
        madvise(r->p, hi, MADV_DONTNEED);
#if defined(POSIX_FADV_DONTNEED)
        posix_fadvise(a->fd, (off_t)(r->p - a->fbase), (off_t)hi, POSIX_FADV_DONTNEED);
#endif
    }
    /* sparse buffers: the most recently selected cold pages stay, up to cache_cap */
    int keep_age = -1;
    size_t quota = cache_cut(a, cold, &keep_age);
    a->cached = 0;
    for (int i = 0; i < a->n_rows; i++)
        if (a->rows[i].sparse)
            settle_sparse(a, &a->rows[i], rows_down(&a->rows[i], cold), keep_age, &quota);
    if (cold > a->cold) a->cold = cold;
    a->step++;
    return 0;
}

void kv_arena_truncate(kv_arena *a, int64_t n) {
    if (n < a->cold) a->cold = n;
    /* rows from n on will be written again: the gather buffer's copies go */
    for (int b = 0; b < a->n_rows; b++) {
        kv_gsel *g = a->rows[b].gs;
        if (!g) continue;
        while (g->n > 0 && g->row[g->n - 1] >= n) {
            g->n--;
            if (a->g_caching) g->slot_row[g->slot[g->n]] = -1;
        }
    }
}

void kv_prefetch_mark(uint8_t *marks, size_t row, const int *sel, int n) {
    const size_t pg = os_page_size();
    for (int i = 0; i < n; i++) {
        const size_t b = (size_t)sel[i] * row;
        for (size_t p = b / pg; p <= (b + row - 1) / pg; p++)
            marks[p] = 1;
    }
}

/* Marked runs closer than this many pages are read as one. 1: only adjacent
 * marked pages merge. Reading across gaps paid at 8k positions (a quarter of
 * the rows selected, most pages marked anyway) but not at 32k, where the
 * selection marks ~1 page in 4 and a gap of 16 read every page: decode after
 * a 32k context spilled, streaming model, 7.1-7.4 tok/s with 1, 5.0-6.7 with
 * 4, 4.5-5.0 with 16 (bench/RESULTS.md, 2026-12-03 15:35). The many small
 * reads go out together (MADV_WILLNEED on each run), not one at a time. */
#define KV_GAP_PAGES 1

void kv_prefetch_flush(kv_arena *a, const void *buf, uint8_t *marks, size_t n_marks) {
    const size_t pg = os_page_size();
    uint32_t *st = a->stamp + (size_t)((const uint8_t *)buf - a->fbase) / pg;
    size_t n_cold = 0; /* the buffer's cold pages: selections there count as hits or misses */
    for (int b = 0; b < a->n_rows; b++)
        if (a->rows[b].p == buf) n_cold = rows_down(&a->rows[b], a->cold) / pg;
    for (size_t i = 0; i < n_marks; i++) /* the selected pages */
        if (marks[i]) {
            if (i < n_cold) {
                a->sel_hits += st[i] != KV_PAGE_OUT && st[i] != KV_PAGE_READ;
                a->sel_pages++;
            }
            if (st[i] != KV_PAGE_OUT) marks[i] = 0; /* in RAM: nothing to read */
            st[i] = a->step;
        }
    for (size_t i = 0; i < n_marks;) {
        if (!marks[i]) {
            i++;
            continue;
        }
        size_t j = i, end = i; /* end: one past the last marked page of the run */
        while (j < n_marks && j < end + KV_GAP_PAGES) {
            if (marks[j]) end = j + 1;
            marks[j++] = 0;
        }
        for (size_t k = i; k < end; k++) /* gap pages come in with the run */
            if (st[k] == KV_PAGE_OUT) st[k] = KV_PAGE_READ;
        madvise((uint8_t *)buf + i * pg, (end - i) * pg, MADV_WILLNEED);
        i = j;
    }
}

/* Gaps between the blocks of selected rows bridged by one read, the widest
 * first: the first whose reads fit the gather buffer is used. On this
 * project's machine (virtio SSD, 2026-12-04) random O_DIRECT reads ran at
 * 136k a second of 4 KB and 96-107k of 16-64 KB: the device's rate is in
 * requests, and bytes within 16 KB cost about nothing beside a request, so
 * fewer, larger reads win up to there. */
static const size_t gather_gaps[] = {16384, 12288, 8192, 6144, 4096, 3072, 2048, 1024, 0};

/* Wait for every read in flight; the first failure in err. 0 or -1. */
static int gather_drain(kv_arena *a, pt_err *err) {
    int rc = 0;
    while (xio_inflight(a->io) > 0) {
        uint64_t tag;
        pt_err e = {0};
        if (xio_wait(a->io, &tag, &e) && !rc) {
            *err = e;
            rc = -1;
        }
    }
    return rc;
}

/* The reads of rows[0..n) (row i's aligned blocks at base + rows[i] * r), merged across
 * gaps up to `gap` bytes: their bytes, and their count in *n_reads. rowp NULL: counted only;
 * else each read is submitted into the gather buffer, one after another, and rowp set
 * (-1 with err when a read fails; the reads in flight are drained). */
static int64_t gather_runs(kv_arena *a, uint64_t base, size_t r, const int *rows, int n, size_t gap,
                           const uint8_t **rowp, size_t *n_reads, pt_err *err) {
    const uint64_t al = a->dio_align;
    uint64_t bytes = 0, s = 0, e = 0; /* the read being gathered: [s, e) */
    size_t reads = 0;
    int first = 0; /* its first row */
    for (int i = 0; i <= n; i++) {
        uint64_t s1 = 0, e1 = 0;
        if (i < n) {
            const uint64_t off = base + (uint64_t)rows[i] * r;
            s1 = off / al * al;
            e1 = (off + r + al - 1) / al * al;
            if (i > 0 && s1 <= e + gap) { /* joins the read */
                if (e1 > e) e = e1;
                continue;
            }
        }
        if (i > 0 && rowp) {
            uint8_t *dst = a->gbuf + bytes;
            for (int k = first; k < i; k++)
                rowp[rows[k]] = dst + (base + (uint64_t)rows[k] * r - s);
            while (xio_submit(a->io, a->dfd, s, e - s, e - s, dst, (uint64_t)first)) {
                uint64_t tag;
                if (xio_wait(a->io, &tag, err)) {
                    gather_drain(a, err);
                    return -1;
                }
            }
        }
        if (i > 0) {
            bytes += e - s;
            reads++;
        }
        s = s1, e = e1;
        first = i;
    }
    *n_reads = reads;
    return (int64_t)bytes;
}

/* The rows rows[0..n) of the buffer at base (row bytes r each) read into the
 * reads' part of the gather buffer, merged across the widest gap whose reads
 * fit it, and rowp pointed at them; reads and bytes added up. 1, 0 when even
 * unmerged they do not fit, -1 with err when a read failed. */
static int gather_read(kv_arena *a, uint64_t base, size_t r, const int *rows, int n,
                       const uint8_t **rowp, size_t *reads, uint64_t *bytes, pt_err *err) {
    size_t gap = SIZE_MAX, nr = 0;
    int64_t b = 0;
    for (size_t k = 0; k < sizeof gather_gaps / sizeof *gather_gaps && gap == SIZE_MAX; k++) {
        b = gather_runs(a, base, r, rows, n, gather_gaps[k], NULL, &nr, err);
        if ((uint64_t)b <= a->g_stage) gap = gather_gaps[k];
    }
    if (gap == SIZE_MAX) return 0;
    if (gather_runs(a, base, r, rows, n, gap, rowp, &nr, err) < 0) return -1;
    xio_kick(a->io);
    if (gather_drain(a, err)) return -1;
    *reads += nr;
    *bytes += (uint64_t)b;
    return 1;
}

/* Caching when at least half the rows a buffer's steps select were selected by
 * its step before (judged over two steps of every gathered buffer), streaming
 * again when under a quarter were found in the slots. On the random synthetic
 * models of bench/kvspill.sh consecutive selections share ~7% of their rows,
 * and caching would only take bytes from the reads' merging. */
#define KV_GATHER_CACHE_ON 0.5
#define KV_GATHER_CACHE_OFF 0.25

/* Into caching mode (on 1; not when a buffer's slots would hold fewer than
 * `rows`, what its steps select) or out of it: the slots start empty. */
static void gather_mode(kv_arena *a, int on, int rows) {
    a->g_caching = 0;
    a->g_stage = a->gcap;
    for (int b = 0; b < a->n_rows; b++)
        if (a->rows[b].gs) a->rows[b].gs->n = 0;
    if (!on || !a->n_gathered) return;
    /* a quarter of the buffer for the reads, the rest in equal shares of slots */
    const size_t stage = a->gcap / 4 / a->dio_align * a->dio_align;
    const size_t share = (a->gcap - stage) / (size_t)a->n_gathered;
    size_t off = stage;
    for (int b = 0; b < a->n_rows; b++) {
        kv_gsel *g = a->rows[b].gs;
        if (!g) continue;
        const int n_slots = (int)(share / a->rows[b].row);
        if (n_slots < rows || n_slots < 1 || gsel_room(g, n_slots)) return;
        if (n_slots > g->n_slots) {
            int *r = realloc(g->slot_row, sizeof(int) * (size_t)n_slots);
            if (r) g->slot_row = r;
            uint64_t *u = realloc(g->slot_used, sizeof(uint64_t) * (size_t)n_slots);
            if (u) g->slot_used = u;
            if (!r || !u) return;
        }
        g->n_slots = n_slots;
        g->hand = 0;
        for (int k = 0; k < n_slots; k++)
            g->slot_row[k] = -1, g->slot_used[k] = 0;
        g->mem = a->gbuf + off;
        off += share;
    }
    a->g_stage = stage;
    a->g_caching = 1;
}

/* Caching: the rows just read (miss[0..m), ascending, at rowp) copied into
 * slots this gather did not use, as long as there are such slots, and rowp
 * pointed there; the list of held rows updated. */
static void gather_keep(kv_gsel *g, size_t r, const int *miss, int m, const uint8_t **rowp,
                        uint64_t id) {
    int placed = 0;
    int *nrow = g->trow; /* [placed] rows kept, ascending */
    uint32_t *nslot = g->tslot;
    for (int i = 0; i < m; i++) {
        int k = -1;
        for (int t = 0; t < g->n_slots && k < 0; t++) {
            if (g->slot_used[g->hand] != id) k = g->hand;
            g->hand = (g->hand + 1) % g->n_slots;
        }
        if (k < 0) break; /* every slot holds a row of this gather */
        g->slot_row[k] = miss[i];
        g->slot_used[k] = id;
        memcpy(g->mem + (size_t)k * r, rowp[miss[i]], r);
        rowp[miss[i]] = g->mem + (size_t)k * r;
        nrow[placed] = miss[i], nslot[placed] = (uint32_t)k;
        placed++;
    }
    if (!placed) return;
    /* merge the rows still held (their slot not taken) with those just kept, in place from
     * the top: the list has room for n_slots rows and holds at most that many */
    int o = 0;
    for (int k = 0; k < g->n; k++) /* drop the rows whose slots were taken */
        if (g->slot_row[g->slot[k]] == g->row[k]) g->row[o] = g->row[k], g->slot[o++] = g->slot[k];
    int i = o - 1, j = placed - 1;
    o = o + placed;
    g->n = o;
    while (j >= 0) {
        o--;
        if (i >= 0 && g->row[i] > nrow[j]) {
            g->row[o] = g->row[i], g->slot[o] = g->slot[i];
            i--;
        } else {
            g->row[o] = nrow[j], g->slot[o] = nslot[j];
            j--;
        }
    }
}

int kv_gather(kv_arena *a, const void *buf, const int *rows, int n, const uint8_t **rowp,
              pt_err *err) {
    if (a->dfd < 0 || !a->gcap) return 0;
    const kv_rows *b = NULL;
    for (int k = 0; k < a->n_rows; k++)
        if (a->rows[k].p == buf && a->rows[k].gs) b = &a->rows[k];
    if (!b) return 0;
    if (n <= 0) return 1;
    if (!a->gbuf) {
        void *p = mmap(NULL, a->gcap, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED) return 0;
        memset(p, 0, a->gcap); /* backed now, not faulted in by every later read */
        a->gbuf = p;
        a->g_stage = a->gcap;
    }
    /* 64 reads in flight: 1024 (a step's reads in one submission, fewer system calls) ran
     * slower here, 20.0-21.4 vs 22.5-24.4 tok/s (bench/RESULTS.md, 2026-12-04 13:15) */
    if (!a->io && !(a->io = xio_open(XIO_AUTO, 64, err))) {
        close(a->dfd); /* no reader: the mapping from now on */
        a->dfd = -1;
        return -1;
    }
    kv_gsel *g = b->gs;
    const size_t r = b->row;
    if (gsel_room(g, n)) return 0;
    const uint64_t id = a->g_steps + 1;
    /* the rows held (caching) or selected by the step before (streaming): hits */
    int m = 0, hits = 0;
    for (int i = 0, k = 0; i < n; i++) {
        while (k < g->n && g->row[k] < rows[i])
            k++;
        if (k < g->n && g->row[k] == rows[i]) {
            hits++;
            if (a->g_caching) {
                rowp[rows[i]] = g->mem + (size_t)g->slot[k] * r;
                g->slot_used[g->slot[k]] = id;
                continue;
            }
        }
        g->tmp[m++] = rows[i];
    }
    const uint64_t base = (uint64_t)((const uint8_t *)buf - a->fbase);
    size_t reads = 0;
    uint64_t bytes = 0;
    int rc = 1;
    const int per = (int)(a->g_stage / (r + 2 * a->dio_align)); /* rows a round surely fits */
    if (a->g_caching && m > per && m <= g->n_slots - hits && per > 0) {
        /* more than the reads' part of the buffer holds, but room in the slots: in rounds,
         * each kept before the next reuses the part */
        for (int i0 = 0; i0 < m && rc == 1; i0 += per) {
            const int c = m - i0 < per ? m - i0 : per;
            rc = gather_read(a, base, r, g->tmp + i0, c, rowp, &reads, &bytes, err);
            if (rc == 1) gather_keep(g, r, g->tmp + i0, c, rowp, id);
        }
    } else if (m > 0) {
        rc = gather_read(a, base, r, g->tmp, m, rowp, &reads, &bytes, err);
        if (rc == 1 && a->g_caching) gather_keep(g, r, g->tmp, m, rowp, id);
    }
    if (rc == 0 && a->g_caching) {
        /* more rows than the slots and the reads' part hold (a prompt chunk): the slots go,
         * and the reads get the whole buffer again, for every row of this step */
        gather_mode(a, 0, 0);
        hits = 0;
        rc = gather_read(a, base, r, rows, n, rowp, &reads, &bytes, err);
    }
    if (rc != 1) return rc;
    if (!a->g_caching) { /* this step's rows, for the next step to count */
        memcpy(g->row, rows, sizeof(int) * (size_t)n);
        g->n = n;
    }
    a->g_steps = id;
    a->g_rows += (uint64_t)n;
    a->g_reads += reads;
    a->g_bytes += bytes;
    if (a->g_caching) a->g_hits += (uint64_t)hits;
    /* stream or cache from here on */
    a->g_win[0]++, a->g_win[1] += (uint64_t)n, a->g_win[2] += (uint64_t)hits;
    if (a->g_win[0] >= 2 * (uint64_t)a->n_gathered) {
        const double f = (double)a->g_win[2] / (double)a->g_win[1];
        if (!a->g_caching && f >= KV_GATHER_CACHE_ON)
            gather_mode(a, 1, (int)(a->g_win[1] / a->g_win[0]));
        else if (a->g_caching && f < KV_GATHER_CACHE_OFF)
            gather_mode(a, 0, 0);
        a->g_win[0] = a->g_win[1] = a->g_win[2] = 0;
    }
    return 1;
}

size_t kv_arena_cache_pages(const kv_arena *a, size_t *cap) {
    if (cap) *cap = a->cache_cap;
    return a->cached;
}

static size_t resident_pages(const uint8_t *base, size_t cap) {
    if (!base) return 0;
    const size_t pg = os_page_size(), n = cap / pg;
#ifdef __APPLE__
    char *vec = malloc(n);
#else
    unsigned char *vec = malloc(n);
#endif
    if (!vec || mincore((void *)base, cap, vec)) {
        free(vec);
        return 0;
    }
    size_t r = 0;
    for (size_t i = 0; i < n; i++)
        r += (size_t)(vec[i] & 1);
    free(vec);
    return r * pg;
}

size_t kv_arena_resident(const kv_arena *a) {
    return resident_pages(a->base, a->cap) + (a->fbase ? resident_pages(a->fbase, a->fcap) : 0) +
           (a->gbuf ? a->gcap : 0);
}

size_t kv_arena_disk(const kv_arena *a) {
    struct stat st;
    if (!a->fbase || fstat(a->fd, &st)) return 0;
    return (size_t)st.st_blocks * 512;
}

void kv_arena_free(kv_arena *a) {
    if (a->base) munmap(a->base, a->cap);
    if (a->fbase) {
        munmap(a->fbase, a->fcap);
        close(a->fd); /* unlinked: the file goes with its last reference */
    }
    if (a->dfd >= 0) close(a->dfd);
    if (a->gbuf) munmap(a->gbuf, a->gcap);
    xio_close(a->io);
    for (int b = 0; b < a->n_rows; b++)
        gsel_free(a->rows[b].gs);
    free(a->rows);
    free(a->stamp);
    *a = (kv_arena){0};
    a->fd = a->dfd = -1;
}
