/* kv.h — element types of the KV cache, as llama.cpp names and computes them
 * (--cache-type-k / --cache-type-v: f32, f16, bf16, q8_0, q4_0).
 *
 * A cache row (one position's keys or values of one layer, all KV heads) is
 * converted to the cache type when it is stored, the way ggml converts a row
 * written into a cache tensor of that type: fp16 and bf16 round to nearest
 * even; q8_0 and q4_0 are blocks of 32 with one fp16 scale (q8_0 as ggml-cpu
 * quantises a row, rounding x / d to nearest even).
 *
 * Attention reads the rows back as llama.cpp's CPU backend does:
 *  - scores: the query is converted to the key type's dot-product partner
 *    (F16 for f16, BF16 for bf16, Q8_0 for q8_0 and q4_0: ggml's vec_dot_type)
 *    and dotted with the stored row by the type's one kernel (qt_dot_best);
 *    products of two fp16 or two bf16 values are exact in float, so only the
 *    summation order can differ from llama.cpp.
 *  - values: the softmax probabilities are rounded to fp16 / bf16 for an f16 /
 *    bf16 value cache (llama.cpp converts them for the probability x value
 *    product); quantised value caches (which llama.cpp runs only with flash
 *    attention, where the value rows are decoded to float and the weights stay
 *    float) keep float weights. The value row is decoded to float and summed
 *    in the lanes of nn_wsum_* as before.
 * f32 is the arithmetic petrel had before the types existed, bit for bit.
 * Every choice depends on the type only, never on the batch: a row's results
 * are the same alone or in a prompt (ARCHITECTURE.md, batch invariance).
 */
#ifndef PT_NN_KV_H
#define PT_NN_KV_H

#include <stddef.h>
#include <stdint.h>

#include "common.h" /* pt_err */

/* 1 when type (a ggml type id) is a KV cache type petrel supports. */
int kv_type_ok(uint32_t type);
/* Elements per block of the type (32 for q8_0 / q4_0, else 1): head widths
 * must be multiples of it. */
int kv_block(uint32_t type);
/* Bytes of n elements of the type (n a multiple of kv_block). */
size_t kv_bytes(uint32_t type, int64_t n);
/* Store x[n] into dst in the cache type. */
void kv_store(uint32_t type, const float *x, int64_t n, void *dst);
/* Decode n stored elements to float. */
void kv_load(uint32_t type, const void *src, int64_t n, float *dst);
/* The query q[n] in the form keys of `type` are dotted with; qbuf holds
 * kv_query_bytes(type, n) bytes. F32: a copy. */
size_t kv_query_bytes(uint32_t type, int64_t n);
void kv_query(uint32_t type, const float *q, int64_t n, void *qbuf);
/* Score of a prepared query with a stored key row of n elements. */
float kv_dot(uint32_t type, const void *qbuf, const void *krow, int64_t n);
/* x[n] (n <= 1024) replaced by its value stored in the type and read back:
 * rows kept in float that llama.cpp keeps in the cache type (DSA indexer keys). */
void kv_round(uint32_t type, float *x, int64_t n);
/* A probability as it multiplies a value row of the type. */
float kv_weight(uint32_t type, float p);
/* The weighted sums of g heads (nn_wsum_*, NN_WSUM_LANES lanes of d floats at
 * acc[h], lane mask used[h]) over one block of nk <= NN_WSUM_KEYS keys from
 * key0: head h's probabilities at p[h][0..nk), a key counted where its
 * probability is not 0, weighted as it multiplies a value row of v_type;
 * rows (stride elements apart) are the block's value rows: floats, or the
 * cache's own fp16 rows when rows_f16 is set (v_type QT_F16), converted as
 * they are loaded. */
void kv_wsum_keys(int g, float *const *acc, const float *const *p, uint32_t v_type, int d,
                  int64_t key0, int nk, const void *rows, int rows_f16, size_t stride,
                  uint64_t *used);

/* ===== The cache's memory: paid for as it is used =====
 * A session's KV rows live in one reservation of address space (anonymous
 * mmap, MAP_NORESERVE) sized for the whole context; the kernel backs a page
 * when a row in it is first written, so a 1M-position context costs what the
 * positions actually evaluated fill (rows of every layer are laid out by
 * position, each layer's buffer from its own page boundary). Truncation keeps
 * the pages: the next positions reuse them.
 *
 * Beyond RAM (kv_arena_spill): when the context's KV exceeds its RAM share,
 * the per-position buffers (kv_arena_rows) come from a second reservation, a
 * MAP_SHARED mapping of an unlinked file in the cache directory (gone when
 * the session ends, however it ends), read with MADV_RANDOM so a fault reads
 * the touched page only. Rows are the same bytes wherever they live, so the
 * arithmetic, and every logit, is the RAM cache's by construction. The RAM
 * share is enforced here, not left to the kernel: the newest positions that
 * fit it stay in RAM; after every chunk (kv_arena_settle) the older ones are
 * written back (msync, a block of a quarter of the share at a time) and
 * dropped (MADV_DONTNEED on the mapping, POSIX_FADV_DONTNEED on the file),
 * including the older rows the chunk read.
 * Sparse buffers (attention reads the rows its selection picks: the DSA
 * indexer's top-k) split the share in two: half holds the newest positions,
 * half is a cache of the spilled pages recent steps selected. Each page of the
 * mapping carries a stamp (the step that last selected it, KV_PAGE_OUT when
 * dropped, KV_PAGE_READ when read but not selected: a gap page of a merged
 * read, a row just turned cold); after every chunk the cache keeps the most
 * recently selected pages up to its bound and drops every other cold page, so
 * a step re-reads only what it selects anew, and the resident bytes never
 * exceed the share (kv_arena_cache_pages).
 * Gathered buffers (KV_READ_GATHERED: glm-dsa's typed latent rows) skip the
 * mapping for their spilled rows where the file system has O_DIRECT: the rows
 * a step selects are read with direct reads, merged across small gaps, into a
 * gather buffer of the cache's half of the share (kv_gather), and attention
 * reads them there. No page of the mapping is faulted, mapped or dropped for
 * them, which is what the page-cache path pays per page; a step whose rows do
 * not fit the buffer (a prompt chunk's many rows) reads through the mapping,
 * with no cache of pages between steps. When a buffer's consecutive steps
 * select mostly the same rows (a trained indexer attends where it attended a
 * token before; a random one does not), the gather buffer switches to caching:
 * a quarter stays for the reads, the rest is split into slots per buffer that
 * keep rows between steps, so a step reads only the rows it selects anew; it
 * switches back when too few of a step's rows are found there (kv_gather).
 * File blocks are allocated (posix_fallocate) before positions are written
 * (kv_arena_reserve), so a full disk is an error from the evaluation, never a
 * SIGBUS from a store into the mapping. Buffers a family keeps resident by
 * design (the DSA indexer keys, sliding-window rings, the MTP block's rows)
 * come from kv_arena_take and stay anonymous. */
/* How attention reads a per-position buffer (kv_arena_rows). */
enum {
    KV_READ_ALL = 0,      /* every row, every step */
    KV_READ_SELECTED = 1, /* the rows it selects, through the mapping (kv_prefetch_*) */
    KV_READ_GATHERED = 2  /* the rows it selects, its spilled ones by kv_gather when it can */
};

struct kv_gsel;

typedef struct kv_rows {
    uint8_t *p;         /* the buffer: row r at p + r * row */
    size_t row;         /* bytes per position */
    int sparse;         /* KV_READ_* */
    struct kv_gsel *gs; /* gathered buffers: the rows kept between steps (kv.c) */
} kv_rows;

struct xio;

typedef struct kv_arena {
    uint8_t *base; /* the reservation, page aligned */
    size_t cap;    /* bytes reserved */
    size_t used;   /* bytes handed out (each buffer rounded up to a page) */
    /* spilling (kv_arena_spill); fbase NULL: none */
    int fd;         /* the unlinked spill file */
    uint8_t *fbase; /* its mapping (MAP_SHARED), offset = address - fbase */
    size_t fcap, fused;
    kv_rows *rows; /* the per-position buffers in it */
    int n_rows, rows_cap;
    int64_t hot;    /* positions always kept in RAM: the newest */
    int64_t blk;    /* ... and up to blk - 1 more: positions turn cold a block at a time */
    int64_t backed; /* positions [0, backed) have file blocks */
    int64_t cold;   /* positions [0, cold) written back and dropped from RAM */
    int64_t n_ctx;  /* positions the buffers hold */
    int64_t share;  /* positions the RAM share holds (the hot window, plus the cache's half) */
    /* the cache of selected spilled pages (sparse buffers only) */
    uint32_t *stamp;  /* [fcap / page]: a page's last selecting step, or KV_PAGE_OUT / _READ */
    uint32_t step;    /* the current step (chunk), from 1 */
    size_t cache_cap; /* pages the cache may keep: half the share's bytes of sparse rows */
    size_t cached;    /* pages it keeps after the last settle */
    uint64_t sel_pages, sel_hits; /* selected cold pages, and those the cache already held */
    /* direct reads of selected spilled rows (kv_gather; KV_READ_GATHERED buffers) */
    int dfd;          /* the spill file opened with O_DIRECT; -1: no direct reads here */
    size_t dio_align; /* offset and length alignment of those reads */
    size_t gcap;      /* bytes of the gather buffer: the share's cache half of gathered rows */
    uint8_t *gbuf;    /* the gather buffer (allocated at the first gather) */
    struct xio *io;   /* its reader */
    uint64_t g_steps, g_rows, g_reads, g_bytes; /* gathers done, rows, reads and bytes read */
    uint64_t g_hits;   /* rows of those the gather buffer already held (caching mode) */
    int g_caching;     /* 1: part of the gather buffer keeps rows between steps */
    int n_gathered;    /* gathered buffers */
    size_t g_stage;    /* caching: the bytes of the gather buffer that reads land in */
    uint64_t g_win[3]; /* the gathers, rows and rows selected again since the last decision */
    char dir[512];     /* where the file is (for messages and the plan line) */
} kv_arena;

#define KV_PAGE_OUT 0u          /* a page not in RAM (dropped, or never read) */
#define KV_PAGE_READ UINT32_MAX /* in the page cache, not selected: dropped at the next settle */

/* Reserve cap bytes. 0, or -1 (no address space). */
int kv_arena_init(kv_arena *a, size_t cap);
/* A zeroed buffer of `bytes` from the reservation, page aligned; NULL when
 * the reservation is exhausted. Stays in RAM when spilling. */
void *kv_arena_take(kv_arena *a, size_t bytes);
/* Spill per-position buffers beyond `hot` positions of n_ctx to an unlinked
 * file in dir (created when missing); fcap bytes of file mapping are
 * reserved. 0, or -1 with err naming the folder and the reason. */
int kv_arena_spill(kv_arena *a, size_t fcap, const char *dir, int64_t hot, int64_t n_ctx,
                   pt_err *err);
/* A per-position buffer of n rows of row_bytes (in the spill file when
 * spilling, else as kv_arena_take); NULL when the reservation is exhausted.
 * sparse: how attention reads it (KV_READ_*). */
void *kv_arena_rows(kv_arena *a, size_t row_bytes, int64_t n, int sparse);
/* 1 when the arena spills. */
int kv_arena_spills(const kv_arena *a);
/* Before positions below n are written: file blocks for them (a no-op when
 * not spilling). -1 with err (a full disk: ENOSPC, a file size limit: EFBIG)
 * and nothing written: the positions already cached stay valid. */
int kv_arena_reserve(kv_arena *a, int64_t n, pt_err *err);
/* Before a chunk reads the cache of n_past positions: start reading the
 * spilled rows of buffers that are read whole (MADV_WILLNEED), so the
 * attention's faults find them in flight. */
void kv_arena_prefetch(kv_arena *a, int64_t n_past);
/* After positions below n_past are written: write back and drop from RAM
 * every position older than the newest `hot`. -1 with err when the write
 * back fails (the rows are then still in the page cache, not lost). */
int kv_arena_settle(kv_arena *a, int64_t n_past, pt_err *err);
/* The cache was cut to n positions: those from n on will be written again. */
void kv_arena_truncate(kv_arena *a, int64_t n);
/* A sparse buffer's selected rows, read ahead in runs of pages: mark the
 * pages of rows sel[0..n) in marks (one byte per page of the buffer, zeroed),
 * then kv_prefetch_flush stamps the marked pages as selected by this step (a
 * is the buffer's arena), starts reading the runs of those not cached
 * (MADV_WILLNEED) and clears the marks. */
void kv_prefetch_mark(uint8_t *marks, size_t row, const int *sel, int n);
void kv_prefetch_flush(kv_arena *a, const void *buf, uint8_t *marks, size_t n_marks);
/* Selected spilled rows read directly, without the mapping: the rows
 * rows[0..n) (ascending, each below a->cold) of KV_READ_GATHERED buffer buf
 * are read from the spill file with O_DIRECT into the arena's gather buffer,
 * and rowp[rows[i]] points at each row's bytes there until the next gather.
 * Rows whose blocks lie close together are read as one (gaps up to 16 KB: on
 * the SSDs measured a read of that size costs what a 4 KB one does, their
 * rate is bounded by requests, not bytes), less when the bytes would not fit
 * the buffer. A step reads no page through the mapping, so it faults none,
 * maps none and drops none: the page-cache path's cost per page.
 * In caching mode (see the arena's comment) rows the buffer's slots hold are
 * not read again, and rows read are copied into slots not used by this step.
 * 1: read; 0: not possible here (no O_DIRECT on the file system, f32 rows,
 * or the rows exceed the buffer) and the caller reads through the mapping
 * (kv_prefetch_*); -1 with err: a read failed (the caller may still read
 * through the mapping). */
int kv_gather(kv_arena *a, const void *buf, const int *rows, int n, const uint8_t **rowp,
              pt_err *err);
/* Pages of spilled rows the cache of selected pages keeps now, and its bound. */
size_t kv_arena_cache_pages(const kv_arena *a, size_t *cap);
/* Bytes of the reservation backed by memory now (pages touched, spilled
 * pages in the page cache included). */
size_t kv_arena_resident(const kv_arena *a);
/* Bytes of the spill file on disk (0 when not spilling). */
size_t kv_arena_disk(const kv_arena *a);
void kv_arena_free(kv_arena *a);

#endif
