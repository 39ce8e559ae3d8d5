/* pcache.c — prefixes that survive (petrel.h: pt_pcache_*, pt_session_save_file /
 * pt_session_load_file): a session's KV rows written to disk and read back into any session
 * of the same model, cache types and kernel level.
 *
 * What a segment holds. The family lists its per-position buffers (fam_ops.kv_bufs: MLA
 * latent|rope rows, DSA indexer keys, K and V rows, sliding-window rings, the MTP head's
 * rows). A segment covers positions [a, b): their tokens, the rows of every linear buffer,
 * the ring rows of positions [ring_from, b) (those the rings still held when it was written)
 * and the MTP rows [mtp_from, mtp_to). On disk (native byte order, as the arena holds it):
 *   pc_header (144 bytes, below)
 *   int32 tokens[b - a]
 *   for each buffer in kv_bufs order: linear rows [a, b) | ring rows [ring_from, b) |
 *                                     MTP rows [mtp_from, mtp_to), row_bytes each
 *   extra bytes (a session file's conversation)
 * The checksum is XXH3-64 over everything after the header.
 *
 * The prefix store is blocks of PT_PCACHE_BLOCK positions, file DIR/<key>.kv, key = SHA-256
 * chained block by block from a seed of (format version, fingerprint, KV types, kernel level,
 * buffer layout, scope) over each block's tokens: a block's name says everything that
 * decides its bytes, so a shared system prompt is one set of files whatever follows it, and
 * another model, type or API key never finds it. Block [a, b) holds the MTP rows [a-1, b-1):
 * MTP position j is (hidden j, token j+1), decided by the tokens up to b.
 *
 * What a restore to L positions needs. Linear rows [0, L) of every block. Rings: the next
 * query, at P, reads keys P-W+1..P; rows [P-W+1, P) must be stored (a block written when its
 * positions had left the rings stores fewer: ring_from). MTP head: with MTP rows [0, L-1)
 * the trunk is restored to P = L-1 and the head to L-1, so evaluating token L-1 again gives
 * the hidden row the head continues from (no hidden rows are stored); without them the trunk
 * gets L and the head nothing.
 *
 * Several processes share a folder: files appear by rename(2) of a complete temporary file,
 * a reader maps the file it opened (a file replaced or removed meanwhile stays readable), and
 * eviction runs under flock(2) on DIR/.lock (one evictor at a time; others skip). Eviction
 * removes the least recently used files (mtime, refreshed when a block is used or found
 * present) until the folder is within max_bytes, and temporary files older than an hour
 * (writers that died).
 */
#include <assert.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <xxhash.h>

#include "common.h"
#include "engine/pcache.h"
#include "engine/session.h"
#include "os/os.h"
#include "petrel.h" /* PT_PATH_MAX */

#define PC_MAGIC 0x564b5450u /* "PTKV" */
#define PC_VERSION 1u
#define PC_S PT_PCACHE_BLOCK

/* The header of a segment file. */
typedef struct pc_header {
    uint32_t magic, version;
    uint8_t fingerprint[32]; /* the model's (engine_fingerprint) */
    uint32_t k_type, v_type; /* ggml ids of the cache types */
    int32_t isa;             /* kernel level the rows were computed with */
    uint32_t n_bufs;         /* per-position buffers (fam_ops.kv_bufs) */
    int32_t a, b;            /* positions [a, b): tokens and linear rows */
    int32_t ring_from;       /* ring rows of [ring_from, b) */
    int32_t mtp_from;        /* MTP rows [mtp_from, mtp_to) */
    int32_t mtp_to;
    uint32_t reserved;      /* 0 */
    uint64_t layout;        /* XXH3-64 of the buffers' (kind, row_bytes) */
    uint64_t extra_bytes;   /* after the rows */
    uint64_t payload_bytes; /* everything after the header */
    uint64_t checksum;      /* XXH3-64 of the payload */
    uint8_t key[32];        /* the block's chained key; zero in a session file */
} pc_header;
static_assert(sizeof(pc_header) == 144, "pc_header is 144 bytes on disk");

/* A session's buffers and what its rows are keyed by. */
typedef struct pc_layout {
    fam_kv_buf *bufs;
    int n;
    int has_ring, has_mtp;
    int window;
    uint64_t hash;           /* XXH3-64 of (kind, row_bytes) per buffer */
    uint64_t lin, ring, mtp; /* bytes per position of each kind, all buffers */
} pc_layout;

struct pt_pcache {
    pt_engine *e;
    char dir[PT_PATH_MAX];
    uint64_t max_bytes;
    void (*warn)(void *ud, const char *msg);
    void *warn_ud;
    unsigned tmp_seq;
    pt_pcache_stats st;
};

/* ===== Pieces ===== */

static void pc_warn(pt_pcache *pc, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void pc_warn(pt_pcache *pc, const char *fmt, ...) {
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (pc) pc->st.warnings++;
    if (pc && pc->warn)
        pc->warn(pc->warn_ud, msg);
    else
        fprintf(stderr, "petrel: WARNING: %s\n", msg);
}

static int layout_get(pt_session *s, pc_layout *L) {
    memset(L, 0, sizeof *L);
    dec *d = engine_session_dec(s);
    const int n = dec_kv_bufs(d, NULL, 0);
    L->bufs = calloc((size_t)n + 1, sizeof *L->bufs);
    if (!L->bufs) return -1;
    L->n = dec_kv_bufs(d, L->bufs, n);
    if (L->n < 1) return free(L->bufs), -1; /* a family that lists no state: nothing to copy */
    L->window = dec_window(d);
    XXH3_state_t *h = XXH3_createState();
    if (!h) return free(L->bufs), -1;
    XXH3_64bits_reset(h);
    for (int i = 0; i < L->n; i++) {
        const fam_kv_buf *b = &L->bufs[i];
        const uint64_t v[2] = {(uint64_t)b->kind, (uint64_t)b->row_bytes};
        XXH3_64bits_update(h, v, sizeof v);
        if (b->kind == FAM_KV_RING) L->has_ring = 1, L->ring += b->row_bytes;
        if (b->kind == FAM_KV_MTP) L->has_mtp = 1, L->mtp += b->row_bytes;
        if (b->kind == FAM_KV_LINEAR) L->lin += b->row_bytes;
    }
    L->hash = XXH3_64bits_digest(h);
    XXH3_freeState(h);
    return 0;
}

static uint8_t *row_at(const fam_kv_buf *b, int64_t pos) {
    const int64_t slot = b->kind == FAM_KV_RING ? pos % b->slots : pos;
    return b->base + (size_t)slot * b->row_bytes;
}

static uint64_t payload_bytes(const pc_layout *L, const pc_header *h) {
    return (uint64_t)(h->b - h->a) * sizeof(int32_t) + (uint64_t)(h->b - h->a) * L->lin +
           (uint64_t)(h->b - h->ring_from) * L->ring +
           (uint64_t)(h->mtp_to - h->mtp_from) * L->mtp + h->extra_bytes;
}

static void header_init(pc_header *h, pt_session *s, const pc_layout *L) {
    memset(h, 0, sizeof *h);
    const pt_engine *e = pt_session_engine(s);
    h->magic = PC_MAGIC;
    h->version = PC_VERSION;
    memcpy(h->fingerprint, engine_fingerprint(e), 32);
    engine_kv_key(e, &h->k_type, &h->v_type, &h->isa);
    h->n_bufs = (uint32_t)L->n;
    h->layout = L->hash;
}

/* Why h cannot be used in a session laid out as `want` ("" when it can): version, model,
 * types, kernel level, layout. */
static const char *header_mismatch(const pc_header *h, const pc_header *want) {
    if (h->magic != PC_MAGIC) return "not a petrel KV file";
    if (h->version != PC_VERSION) return "another format version";
    if (memcmp(h->fingerprint, want->fingerprint, 32)) return "another model (fingerprint)";
    if (h->k_type != want->k_type || h->v_type != want->v_type) return "other KV cache types";
    if (h->isa != want->isa) return "another kernel level";
    if (h->n_bufs != want->n_bufs || h->layout != want->layout) return "another KV layout";
    return "";
}

/* ===== Writing a segment ===== */

/* Write all of buf at the file's offset, hashed into h (may be NULL); -1 (errno) on failure. */
static int write_all(int fd, const void *buf, size_t n, XXH3_state_t *h) {
    if (h) XXH3_64bits_update(h, buf, n);
    return os_write_all(fd, buf, n);
}

/* Rows [from, to) of one buffer (contiguous runs; a ring wraps at most once per run). */
static int write_rows(int fd, const fam_kv_buf *b, int64_t from, int64_t to, XXH3_state_t *h) {
    while (from < to) {
        int64_t run = to - from;
        if (b->kind == FAM_KV_RING) {
            const int64_t slot = from % b->slots;
            if (run > b->slots - slot) run = b->slots - slot;
        }
        if (write_all(fd, row_at(b, from), (size_t)run * b->row_bytes, h)) return -1;
        from += run;
    }
    return 0;
}

/* The segment of h (positions, ranges and extra set) to `path` through a temporary file in
 * the same folder, renamed into place. 0, or -1 with errno (the temporary file removed). */
static int segment_write(const char *path, const char *tmp, pc_header *h, const pc_layout *L,
                         const int32_t *tokens, const void *extra) {
    const int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) return -1;
    XXH3_state_t *xs = XXH3_createState();
    int rc = xs ? 0 : (errno = ENOMEM, -1);
    if (!rc) XXH3_64bits_reset(xs);
    h->payload_bytes = payload_bytes(L, h);
    if (!rc) rc = write_all(fd, h, sizeof *h, NULL);
    if (!rc) rc = write_all(fd, tokens + h->a, (size_t)(h->b - h->a) * sizeof(int32_t), xs);
    for (int i = 0; i < L->n && !rc; i++) {
        const fam_kv_buf *b = &L->bufs[i];
        rc = b->kind == FAM_KV_LINEAR ? write_rows(fd, b, h->a, h->b, xs)
             : b->kind == FAM_KV_RING ? write_rows(fd, b, h->ring_from, h->b, xs)
                                      : write_rows(fd, b, h->mtp_from, h->mtp_to, xs);
    }
    if (!rc && h->extra_bytes) rc = write_all(fd, extra, (size_t)h->extra_bytes, xs);
    if (!rc) {
        h->checksum = XXH3_64bits_digest(xs);
        rc = pwrite(fd, h, sizeof *h, 0) == (ssize_t)sizeof *h ? 0 : -1;
    }
    XXH3_freeState(xs);
    const int saved = errno;
    if (close(fd) && !rc)
        rc = -1;
    else
        errno = saved;
    if (!rc && rename(tmp, path)) rc = -1;
    if (rc) {
        const int e = errno;
        unlink(tmp);
        errno = e;
    }
    return rc;
}

/* ===== Reading a segment ===== */

typedef struct pc_seg {
    pc_header h;
    uint8_t *map; /* the whole file, mapped */
    size_t size;
    const int32_t *tokens; /* [b - a] */
    const uint8_t *rows;   /* the buffers' rows, in order */
} pc_seg;

static void seg_close(pc_seg *g) {
    if (g->map) munmap(g->map, g->size);
    memset(g, 0, sizeof *g);
}

/* Map `path` and check it against `want` (model, types, layout) and its own checksum.
 * 1 when usable; 0 when absent; -1 when unusable, why in `why`. With `loose`, a file of
 * another model or types still passes (its header and checksum are sound): 2. */
static int seg_open(const char *path, const pc_header *want, const pc_layout *L, pc_seg *g,
                    int loose, char *why, size_t why_len) {
    memset(g, 0, sizeof *g);
    const int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        if (errno == ENOENT) return 0;
        snprintf(why, why_len, "cannot open: %s", strerror(errno));
        return -1;
    }
    struct stat sb;
    if (fstat(fd, &sb) || sb.st_size < (off_t)sizeof(pc_header)) {
        close(fd);
        snprintf(why, why_len, "shorter than a header");
        return -1;
    }
    g->size = (size_t)sb.st_size;
    void *m = mmap(NULL, g->size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (m == MAP_FAILED) {
        snprintf(why, why_len, "cannot map: %s", strerror(errno));
        g->size = 0;
        return -1;
    }
    g->map = m;
    memcpy(&g->h, g->map, sizeof g->h);
    const pc_header *h = &g->h;
    const char *bad = "";
    if (h->magic != PC_MAGIC)
        bad = "not a petrel KV file";
    else if (h->version != PC_VERSION)
        bad = "another format version";
    else if (h->a < 0 || h->b < h->a || h->ring_from < h->a || h->ring_from > h->b ||
             h->mtp_from < 0 || h->mtp_to < h->mtp_from || h->mtp_to > h->b)
        bad = "positions out of range";
    else if (h->payload_bytes != g->size - sizeof *h)
        bad = "truncated (payload size)";
    else if (XXH3_64bits(g->map + sizeof *h, g->size - sizeof *h) != h->checksum)
        bad = "checksum mismatch";
    int compatible = 1;
    if (!*bad) {
        const char *mm = header_mismatch(h, want);
        if (*mm) {
            compatible = 0;
            if (!loose) bad = mm;
        } else if (payload_bytes(L, h) != h->payload_bytes) {
            bad = "payload size does not match the layout";
        }
    }
    if (*bad) {
        snprintf(why, why_len, "%s", bad);
        seg_close(g);
        return -1;
    }
    g->tokens = (const int32_t *)(g->map + sizeof *h);
    g->rows = g->map + sizeof *h + (size_t)(h->b - h->a) * sizeof(int32_t);
    return compatible ? 1 : 2;
}

/* Copy a segment's rows into the session's buffers: linear rows [a, b), ring rows of
 * [max(ring_from, ring_lo), min(b, upto)), MTP rows when `mtp`. */
static void seg_apply(const pc_seg *g, const pc_layout *L, int64_t ring_lo, int64_t upto, int mtp) {
    const pc_header *h = &g->h;
    const uint8_t *p = g->rows;
    for (int i = 0; i < L->n; i++) {
        const fam_kv_buf *b = &L->bufs[i];
        int64_t from = h->a, to = h->b;
        if (b->kind == FAM_KV_RING) from = h->ring_from;
        if (b->kind == FAM_KV_MTP) from = h->mtp_from, to = h->mtp_to;
        const uint8_t *src = p;
        p += (size_t)(to - from) * b->row_bytes;
        if (b->kind == FAM_KV_MTP && !mtp) continue;
        if (b->kind == FAM_KV_RING) {
            const int64_t lo = PT_MAX(from, ring_lo), hi = PT_MIN(to, upto);
            for (int64_t pos = lo; pos < hi; pos++)
                memcpy(row_at(b, pos), src + (size_t)(pos - from) * b->row_bytes, b->row_bytes);
            continue;
        }
        memcpy(row_at(b, from), src, (size_t)(to - from) * b->row_bytes);
    }
}

/* ===== The store ===== */

pt_pcache *pt_pcache_open(pt_engine *e, const pt_pcache_params *p, char *err, size_t err_len) {
    if (!p->dir || !*p->dir) return snprintf(err, err_len, "no folder for the prefix cache"), NULL;
    if (pt_mkdirs(p->dir) || access(p->dir, W_OK | X_OK))
        return snprintf(err, err_len, "%s: cannot use as the prefix cache folder: %s", p->dir,
                        strerror(errno)),
               NULL;
    pt_pcache *pc = calloc(1, sizeof *pc);
    if (!pc) return snprintf(err, err_len, "out of memory"), NULL;
    pc->e = e;
    snprintf(pc->dir, sizeof pc->dir, "%s", p->dir);
    pc->max_bytes = p->max_bytes;
    pc->warn = p->warn;
    pc->warn_ud = p->warn_ud;
    return pc;
}

void pt_pcache_close(pt_pcache *pc) {
    free(pc);
}

void pt_pcache_get_stats(const pt_pcache *pc, pt_pcache_stats *st) {
    *st = pc->st;
}

/* The chain's seed: everything but the tokens that decides a block's bytes. */
static void key_seed(const pc_header *h, const char *scope, uint8_t out[32]) {
    EVP_MD_CTX *c = EVP_MD_CTX_new();
    const uint32_t v[6] = {PC_VERSION, h->k_type, h->v_type, (uint32_t)h->isa, h->n_bufs, PC_S};
    EVP_DigestInit_ex(c, EVP_sha256(), NULL);
    EVP_DigestUpdate(c, "petrel-kv", 9);
    EVP_DigestUpdate(c, v, sizeof v);
    EVP_DigestUpdate(c, h->fingerprint, 32);
    EVP_DigestUpdate(c, &h->layout, sizeof h->layout);
    /* the scope's length first, so no scope and an empty one differ */
    const uint64_t sl = scope ? strlen(scope) + 1 : 0;
    EVP_DigestUpdate(c, &sl, sizeof sl);
    if (scope) EVP_DigestUpdate(c, scope, sl - 1);
    EVP_DigestFinal_ex(c, out, NULL);
    EVP_MD_CTX_free(c);
}

/* key = SHA-256(previous key | the block's tokens) */
static void key_next(uint8_t key[32], const int32_t *tokens) {
    EVP_MD_CTX *c = EVP_MD_CTX_new();
    EVP_DigestInit_ex(c, EVP_sha256(), NULL);
    EVP_DigestUpdate(c, key, 32);
    EVP_DigestUpdate(c, tokens, PC_S * sizeof(int32_t));
    EVP_DigestFinal_ex(c, key, NULL);
    EVP_MD_CTX_free(c);
}

static void key_path(const pt_pcache *pc, const uint8_t key[32], char *out, size_t len) {
    char hex[65];
    for (int i = 0; i < 32; i++)
        snprintf(hex + 2 * i, 3, "%02x", key[i]);
    snprintf(out, len, "%s/%s.kv", pc->dir, hex);
}

/* The rows a restore to L needs from block g (positions [a, b)): ring rows from P-W+1 (P
 * the trunk's positions after it), MTP rows [a-1, b-1) when mtp. */
static int block_serves(const pc_seg *g, const pc_layout *L, int64_t P, int mtp) {
    const pc_header *h = &g->h;
    if (mtp && (h->mtp_from != PT_MAX(h->a - 1, 0) || h->mtp_to != h->b - 1)) return 0;
    if (!L->has_ring) return 1;
    const int64_t lo = PT_MAX(P - L->window + 1, 0);
    if (h->b <= lo) return 1;
    return h->ring_from <= PT_MAX((int64_t)h->a, lo);
}

int pcache_restore(pt_pcache *pc, pt_session *s, const char *scope, const int32_t *tokens, int n) {
    const int held = pt_session_n_past(s);
    const int32_t *hist = pt_session_tokens(s);
    int common = 0;
    while (common < held && common < n - 1 && hist[common] == tokens[common])
        common++;
    const int kmax = n > 1 ? (n - 1) / PC_S : 0;
    if (kmax * PC_S <= common || n > pt_session_n_ctx(s)) return 0;
    pc_layout L;
    if (layout_get(s, &L)) return 0;
    pc_seg *seg = calloc((size_t)kmax, sizeof *seg);
    if (!seg) return free(L.bufs), 0;
    pc_header want;
    header_init(&want, s, &L);
    uint8_t key[32];
    key_seed(&want, scope, key);
    int K = 0;
    for (; K < kmax; K++) {
        key_next(key, tokens + (size_t)K * PC_S);
        char path[PT_FILE_PATH_MAX], why[160];
        key_path(pc, key, path, sizeof path);
        const int r = seg_open(path, &want, &L, &seg[K], 0, why, sizeof why);
        if (r == 1 && (memcmp(seg[K].h.key, key, 32) || seg[K].h.a != K * PC_S ||
                       seg[K].h.b != (K + 1) * PC_S ||
                       memcmp(seg[K].tokens, tokens + (size_t)K * PC_S, PC_S * sizeof(int32_t)))) {
            snprintf(why, sizeof why, "its key, positions or tokens are not the block's");
            seg_close(&seg[K]);
            pc_warn(pc, "prefix cache: %s: %s; ignored and removed", path, why);
            unlink(path);
            break;
        }
        if (r < 0) {
            pc_warn(pc, "prefix cache: %s: %s; ignored and removed", path, why);
            unlink(path);
        }
        if (r != 1) break;
    }
    /* the longest prefix the blocks serve: with MTP rows when every block has them */
    int k = K, P = 0, mtp = 0;
    for (; k > 0; k--) {
        const int64_t Lk = (int64_t)k * PC_S;
        mtp = L.has_mtp;
        for (int j = 0; j < k && mtp; j++)
            if (seg[j].h.mtp_from != PT_MAX(seg[j].h.a - 1, 0) || seg[j].h.mtp_to != seg[j].h.b - 1)
                mtp = 0;
        P = (int)(mtp ? Lk - 1 : Lk);
        int ok = 1;
        for (int j = 0; j < k && ok; j++)
            ok = block_serves(&seg[j], &L, P, mtp);
        if (ok) break;
    }
    int got = 0;
    pt_err rerr = {{0}};
    if (k > 0 && P > common && dec_kv_reserve(engine_session_dec(s), P, &rerr)) {
        pc_warn(pc, "prefix cache: %s; the prefix is evaluated instead", rerr.msg);
        k = 0;
    }
    if (k > 0 && P > common) {
        const int64_t ring_lo = L.has_ring ? PT_MAX((int64_t)P - L.window + 1, 0) : 0;
        for (int j = 0; j < k; j++)
            seg_apply(&seg[j], &L, ring_lo, P, mtp);
        memcpy(engine_session_hist(s), tokens, (size_t)P * sizeof *tokens);
        dec_set_restored(engine_session_dec(s), P, ring_lo, mtp ? P : 0);
        for (int j = 0; j < k; j++) { /* used: the newest for eviction */
            char path[PT_FILE_PATH_MAX];
            key_path(pc, seg[j].h.key, path, sizeof path);
            utimensat(AT_FDCWD, path, NULL, 0);
        }
        pc->st.restores++;
        pc->st.tokens_restored += (uint64_t)P;
        got = P;
    }
    for (int j = 0; j < K; j++)
        seg_close(&seg[j]);
    free(seg);
    free(L.bufs);
    return got;
}

typedef struct pc_file {
    struct timespec mtime;
    uint64_t bytes;
    char name[80];
} pc_file;

static int cmp_file(const void *a, const void *b) {
    const pc_file *x = a, *y = b;
    if (x->mtime.tv_sec != y->mtime.tv_sec) return x->mtime.tv_sec < y->mtime.tv_sec ? -1 : 1;
    if (x->mtime.tv_nsec != y->mtime.tv_nsec) return x->mtime.tv_nsec < y->mtime.tv_nsec ? -1 : 1;
    return strcmp(x->name, y->name);
}

/* Keep the folder within max_bytes: least recently used entries first. One process at a
 * time (flock on DIR/.lock); another one busy evicting is enough. */
static void evict(pt_pcache *pc) {
    char lock[PT_FILE_PATH_MAX];
    snprintf(lock, sizeof lock, "%s/.lock", pc->dir);
    const int lfd = open(lock, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (lfd < 0) return;
    if (flock(lfd, LOCK_EX | LOCK_NB)) {
        close(lfd);
        return;
    }
    DIR *d = opendir(pc->dir);
    pc_file *f = NULL;
    size_t n = 0, cap = 0;
    uint64_t total = 0;
    const time_t now = time(NULL);
    for (struct dirent *de; d && (de = readdir(d));) {
        const size_t len = strlen(de->d_name);
        const int tmp = !strncmp(de->d_name, ".tmp-", 5);
        if (!tmp && (len < 4 || strcmp(de->d_name + len - 3, ".kv") || len >= sizeof f->name))
            continue;
        char path[4400];
        snprintf(path, sizeof path, "%s/%s", pc->dir, de->d_name);
        struct stat sb;
        if (stat(path, &sb)) continue;
        if (tmp) { /* a writer that died an hour ago */
            if (now - sb.st_mtime > 3600) unlink(path);
            continue;
        }
        if (n == cap) {
            cap = cap ? 2 * cap : 256;
            pc_file *g = realloc(f, cap * sizeof *f);
            if (!g) break;
            f = g;
        }
        f[n].mtime = sb.st_mtim;
        f[n].bytes = (uint64_t)sb.st_size;
        memcpy(f[n].name, de->d_name, len + 1); /* len < sizeof name: checked above */
        total += f[n].bytes;
        n++;
    }
    if (d) closedir(d);
    if (total > pc->max_bytes) {
        qsort(f, n, sizeof *f, cmp_file);
        for (size_t i = 0; i < n && total > pc->max_bytes; i++) {
            char path[4400];
            snprintf(path, sizeof path, "%s/%s", pc->dir, f[i].name);
            if (!unlink(path)) total -= f[i].bytes;
        }
    }
    free(f);
    flock(lfd, LOCK_UN);
    close(lfd);
}

uint64_t pcache_save(pt_pcache *pc, pt_session *s, const char *scope, int n) {
    if (pc->st.writes_off) return 0;
    if (n > pt_session_n_past(s)) n = pt_session_n_past(s);
    const int K = n / PC_S;
    if (K < 1) return 0;
    pc_layout L;
    if (layout_get(s, &L)) return 0;
    pc_header want;
    header_init(&want, s, &L);
    dec *d = engine_session_dec(s);
    const int32_t *hist = pt_session_tokens(s);
    const int n_mtp = L.has_mtp ? session_mtp_n_past(s) : 0;
    /* the rings hold [ring_lo, n_past) */
    const int64_t ring_lo = L.has_ring ? dec_ring_lo(d) : 0;
    uint8_t key[32];
    key_seed(&want, scope, key);
    uint64_t written = 0;
    for (int k = 0; k < K; k++) {
        key_next(key, hist + (size_t)k * PC_S);
        pc_header h = want;
        memcpy(h.key, key, 32);
        h.a = k * PC_S;
        h.b = h.a + PC_S;
        h.ring_from =
            L.has_ring ? (int32_t)PT_MIN(PT_MAX(ring_lo, (int64_t)h.a), (int64_t)h.b) : h.b;
        const int mtp = L.has_mtp && n_mtp >= h.b - 1;
        h.mtp_from = mtp ? PT_MAX(h.a - 1, 0) : 0;
        h.mtp_to = mtp ? h.b - 1 : 0;
        char path[PT_FILE_PATH_MAX];
        key_path(pc, key, path, sizeof path);
        /* present with as many rings and MTP rows: keep it, as recently used */
        const int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd >= 0) {
            pc_header old;
            const int ok = pread(fd, &old, sizeof old, 0) == (ssize_t)sizeof old &&
                           !*header_mismatch(&old, &want) && !memcmp(old.key, key, 32) &&
                           old.ring_from <= h.ring_from && (old.mtp_to > old.mtp_from || !mtp);
            close(fd);
            if (ok) {
                utimensat(AT_FDCWD, path, NULL, 0);
                pc->st.blocks_present++;
                continue;
            }
        }
        char tmp[PT_FILE_PATH_MAX];
        snprintf(tmp, sizeof tmp, "%s/.tmp-%ld-%u", pc->dir, (long)getpid(), pc->tmp_seq++);
        if (segment_write(path, tmp, &h, &L, hist, NULL)) {
            pc_warn(pc,
                    "prefix cache: writing %s failed (%s); no more prefixes are stored by "
                    "this process (the answers go on)",
                    path, strerror(errno));
            pc->st.writes_off = 1;
            break;
        }
        written += sizeof h + h.payload_bytes;
        pc->st.blocks_written++;
        pc->st.bytes_written += sizeof h + h.payload_bytes;
    }
    free(L.bufs);
    if (written && pc->max_bytes) evict(pc);
    return written;
}

/* ===== Session files ===== */

int pt_session_save_file(pt_session *s, const char *path, const void *extra, size_t extra_len,
                         char *err, size_t err_len) {
    pc_layout L;
    if (layout_get(s, &L))
        return snprintf(err, err_len, "cannot list the session's KV buffers (out of memory)"), -1;
    pc_header h;
    header_init(&h, s, &L);
    dec *d = engine_session_dec(s);
    const int n = pt_session_n_past(s);
    h.a = 0;
    h.b = n;
    h.ring_from = L.has_ring ? (int32_t)PT_MIN(dec_ring_lo(d), (int64_t)n) : n;
    /* MTP positions up to n-2 are made from the tokens saved; position n-1 saw token n */
    h.mtp_to = L.has_mtp && n > 0 ? PT_MIN(session_mtp_n_past(s), n - 1) : 0;
    h.extra_bytes = extra_len;
    char tmp[PT_FILE_PATH_MAX];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    const int rc = segment_write(path, tmp, &h, &L, pt_session_tokens(s), extra);
    if (rc) snprintf(err, err_len, "%s: cannot write the session: %s", path, strerror(errno));
    free(L.bufs);
    return rc;
}

int pt_session_load_file(pt_session *s, const char *path, char **extra, size_t *extra_len,
                         char *err, size_t err_len) {
    *extra = NULL;
    *extra_len = 0;
    pc_layout L;
    if (layout_get(s, &L))
        return snprintf(err, err_len, "cannot list the session's KV buffers (out of memory)"), -1;
    pc_header want;
    header_init(&want, s, &L);
    pc_seg g;
    char why[160];
    const int r = seg_open(path, &want, &L, &g, 1, why, sizeof why);
    if (r <= 0) {
        free(L.bufs);
        if (r == 0) return snprintf(err, err_len, "%s: no such session file", path), -1;
        return snprintf(err, err_len, "%s: %s", path, why), -1;
    }
    const pc_header *h = &g.h;
    *extra = malloc((size_t)h->extra_bytes + 1);
    if (!*extra) {
        seg_close(&g);
        free(L.bufs);
        return snprintf(err, err_len, "out of memory"), -1;
    }
    memcpy(*extra, g.map + g.size - h->extra_bytes, (size_t)h->extra_bytes);
    (*extra)[h->extra_bytes] = 0;
    *extra_len = (size_t)h->extra_bytes;
    int got = 0;
    const int n = h->b;
    /* MTP rows up to the trunk's last position: that position is evaluated again */
    const int mtp = L.has_mtp && n > 0 && h->mtp_to == n - 1;
    const int P = mtp ? n - 1 : n;
    const int64_t ring_lo = L.has_ring ? PT_MAX((int64_t)P - L.window + 1, 0) : 0;
    const char *mm = header_mismatch(h, &want);
    pt_err rerr = {{0}};
    if (*mm)
        snprintf(err, err_len, "%s: %s; the conversation is restored, its KV is not", path, mm);
    else if (h->a != 0 || n > pt_session_n_ctx(s))
        snprintf(err, err_len, "%s: %d positions do not fit the context %d; the KV is not restored",
                 path, n, pt_session_n_ctx(s));
    else if (L.has_ring && h->ring_from > ring_lo)
        snprintf(err, err_len, "%s: the sliding-window rows are missing; the KV is not restored",
                 path);
    else if (P > 0 && dec_kv_reserve(engine_session_dec(s), P, &rerr))
        snprintf(err, err_len, "%s: %s; the KV is not restored", path, rerr.msg);
    else if (P > 0) {
        seg_apply(&g, &L, ring_lo, P, mtp);
        memcpy(engine_session_hist(s), g.tokens, (size_t)P * sizeof(int32_t));
        dec_set_restored(engine_session_dec(s), P, ring_lo, mtp ? P : 0);
        got = P;
    }
    seg_close(&g);
    free(L.bufs);
    return got;
}
