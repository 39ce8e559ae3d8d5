/* xpack.c — writing, resuming, opening and verifying expert packs (see xpack.h).
 *
 * Checksums are XXH3-64 (libxxhash): the engine checks every record it reads
 * (runtime/experts.c), so the hash must cost next to nothing beside the matmul
 * that reads the same bytes; XXH3 runs at tens of GB/s per core. The model's
 * fingerprint stays SHA-256 (it is computed once per open over the headers). */
#include "xpack.h"

#include <errno.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include "os/os.h"
#if defined(__x86_64__) && defined(__has_include)
#if __has_include(<xxh_x86dispatch.h>)
#include <xxh_x86dispatch.h> /* XXH3 on AVX2 / AVX-512 when the CPU has them: twice SSE2's speed */
#endif
#endif

#define XPACK_MAGIC "PTXPACK"
#define XPACK_VERSION 2
#define XPACK_FIXED 128 /* header bytes before the layer table */
#define XPACK_LAYER_ENTRY 48
#define XPACK_JOURNAL_BYTES (256ull << 20) /* sync + journal every this many bytes */

/* ===== little helpers ===== */

static void put32(uint8_t *p, uint32_t v) {
    memcpy(p, &v, 4);
}
static void put64(uint8_t *p, uint64_t v) {
    memcpy(p, &v, 8);
}
static uint32_t get32(const uint8_t *p) {
    uint32_t v;
    memcpy(&v, p, 4);
    return v;
}
static uint64_t get64(const uint8_t *p) {
    uint64_t v;
    memcpy(&v, p, 8);
    return v;
}

/* Modification time (ns) and inode of the model's first file, and a digest of
 * every file's size, mtime and inode: what tells a pack its model changed. */
typedef struct source_stat {
    uint64_t mtime_ns, inode, digest;
} source_stat;

static int get_source_stat(const gguf_ctx *g, source_stat *out, pt_err *err) {
    XXH3_state_t *h = XXH3_createState();
    if (!h) return pt_errf(err, "out of memory");
    XXH3_64bits_reset(h);
    for (uint32_t f = 0; f < g->n_files; f++) {
        struct stat st;
        if ((g->files[f].fd >= 0 ? fstat(g->files[f].fd, &st) : stat(g->files[f].path, &st)) != 0) {
            XXH3_freeState(h);
            return pt_errf(err, "%s: cannot stat: %s", g->files[f].path, strerror(errno));
        }
        const uint64_t v[3] = {(uint64_t)st.st_size,
                               (uint64_t)st.st_mtim.tv_sec * 1000000000ull +
                                   (uint64_t)st.st_mtim.tv_nsec,
                               (uint64_t)st.st_ino};
        if (f == 0) out->mtime_ns = v[1], out->inode = v[2];
        XXH3_64bits_update(h, v, sizeof v);
    }
    out->digest = XXH3_64bits_digest(h);
    XXH3_freeState(h);
    return 0;
}

int xpack_fingerprint(const gguf_ctx *g, uint8_t out[32], pt_err *err) {
    EVP_MD_CTX *c = EVP_MD_CTX_new();
    if (!c || !EVP_DigestInit_ex(c, EVP_sha256(), NULL)) {
        EVP_MD_CTX_free(c);
        return pt_errf(err, "SHA-256 unavailable");
    }
    for (uint32_t f = 0; f < g->n_files; f++) {
        uint64_t size = g->files[f].size;
        EVP_DigestUpdate(c, &size, 8);
        EVP_DigestUpdate(c, g->files[f].map, g->files[f].data_offset);
    }
    unsigned len = 0;
    EVP_DigestFinal_ex(c, out, &len);
    EVP_MD_CTX_free(c);
    return 0;
}

uint64_t xpack_checksum(const uint8_t *const mats[], const uint64_t bytes[], int n_mats) {
    XXH3_state_t *h = XXH3_createState();
    if (!h) return 0; /* out of memory: a value no record matches, so it is never trusted */
    XXH3_64bits_reset(h);
    for (int m = 0; m < n_mats; m++)
        for (uint64_t at = 0; at < bytes[m]; at += XPACK_SUM_PIECE) {
            const uint64_t n = PT_MIN(bytes[m] - at, (uint64_t)XPACK_SUM_PIECE);
            const uint64_t v = XXH3_64bits(mats[m] + at, n);
            XXH3_64bits_update(h, &v, 8);
        }
    const uint64_t sum = XXH3_64bits_digest(h);
    XXH3_freeState(h);
    return sum;
}

/* The checksum of a payload laid out as in a record (slices back to back). */
static uint64_t record_checksum(const xpack_layer *L, const uint8_t *payload) {
    const uint8_t *mats[3];
    uint64_t off = 0;
    for (uint32_t m = 0; m < L->n_mats; m++) {
        mats[m] = payload + off;
        off += L->mat_bytes[m];
    }
    return xpack_checksum(mats, L->mat_bytes, (int)L->n_mats);
}

/* ===== layout ===== */

typedef struct layout {
    uint32_t n_layers;
    xpack_layer *layers;
    uint64_t n_records, header_bytes, sums_offset, data_offset, total_size;
    uint64_t records_bytes; /* of all records, even in a table (progress) */
    int table_only;
} layout;

static int make_layout(const xp_layer_desc *d, int n_layers, int table_only, layout *lo,
                       pt_err *err) {
    memset(lo, 0, sizeof *lo);
    lo->table_only = table_only;
    lo->n_layers = (uint32_t)n_layers;
    lo->layers = calloc((size_t)(n_layers > 0 ? n_layers : 1), sizeof(xpack_layer));
    if (!lo->layers) return pt_errf(err, "out of memory");
    for (int l = 0; l < n_layers; l++) {
        xpack_layer *L = &lo->layers[l];
        L->first_record = lo->n_records;
        if (!d[l].n_mats) continue;
        L->n_mats = (uint32_t)d[l].n_mats;
        L->n_expert = (uint32_t)d[l].mats[0]->ne[2];
        uint64_t payload = 0;
        for (int m = 0; m < d[l].n_mats; m++) {
            L->mat_bytes[m] = d[l].mats[m]->nbytes / (uint64_t)d[l].mats[m]->ne[2];
            payload += L->mat_bytes[m];
        }
        L->record_bytes = pt_align_up(payload, XPACK_ALIGN);
        lo->n_records += L->n_expert;
    }
    lo->header_bytes =
        pt_align_up(XPACK_FIXED + (uint64_t)n_layers * XPACK_LAYER_ENTRY, XPACK_ALIGN);
    lo->sums_offset = lo->header_bytes;
    lo->data_offset = pt_align_up(lo->sums_offset + lo->n_records * 8, XPACK_ALIGN);
    for (uint32_t l = 0; l < lo->n_layers; l++)
        lo->records_bytes += lo->layers[l].record_bytes * lo->layers[l].n_expert;
    lo->total_size = lo->data_offset + (table_only ? 0 : lo->records_bytes);
    return 0;
}

static void encode_header(const layout *lo, const gguf_ctx *g, const uint8_t fp[32],
                          const source_stat *ss, uint64_t done, int complete, uint8_t *h) {
    memset(h, 0, lo->header_bytes);
    memcpy(h, XPACK_MAGIC, 8);
    put32(h + 8, XPACK_VERSION);
    put32(h + 12, lo->n_layers);
    put64(h + 16, g->total_size);
    memcpy(h + 24, fp, 32);
    put64(h + 56, lo->n_records);
    put64(h + 64, done);
    put64(h + 72, lo->sums_offset);
    put64(h + 80, lo->data_offset);
    put32(h + 88, complete ? 1 : 0);
    put32(h + 92, lo->table_only ? XPACK_TABLE_ONLY : 0);
    put64(h + 96, ss->mtime_ns);
    put64(h + 104, ss->inode);
    put64(h + 112, ss->digest);
    for (uint32_t l = 0; l < lo->n_layers; l++) {
        uint8_t *e = h + XPACK_FIXED + (uint64_t)l * XPACK_LAYER_ENTRY;
        const xpack_layer *L = &lo->layers[l];
        put32(e, L->n_expert);
        put32(e + 4, L->n_mats);
        for (int m = 0; m < 3; m++)
            put64(e + 8 + 8 * m, L->mat_bytes[m]);
        put64(e + 32, L->record_bytes);
        put64(e + 40, L->first_record);
    }
}

static uint64_t record_offset(const layout *lo, uint32_t layer, uint32_t e) {
    uint64_t off = lo->data_offset;
    for (uint32_t l = 0; l < layer; l++)
        off += lo->layers[l].record_bytes * lo->layers[l].n_expert;
    return off + (uint64_t)e * lo->layers[layer].record_bytes;
}

/* Copy expert e of layer l from the model into buf (payload, zero padded). */
static void gather(const xp_layer_desc *d, const xpack_layer *L, uint32_t e, uint8_t *buf) {
    uint64_t off = 0;
    for (uint32_t m = 0; m < L->n_mats; m++) {
        memcpy(buf + off, d->mats[m]->data + (uint64_t)e * L->mat_bytes[m], L->mat_bytes[m]);
        off += L->mat_bytes[m];
    }
    memset(buf + off, 0, L->record_bytes - off);
}

/* ===== writing ===== */

int xpack_write(const gguf_ctx *g, const xp_layer_desc *d, int n_layers, const char *path,
                int table_only, xpack_progress_fn progress, void *user, int64_t stop_after,
                pt_err *err) {
    layout lo;
    if (make_layout(d, n_layers, table_only, &lo, err)) return -1;
    uint8_t fp[32];
    source_stat ss;
    char partial[PT_PATH_MAX];
    int fd = -1, rc = -1;
    uint8_t *hdr = NULL, *buf = NULL;
    uint64_t *sums = NULL;
    if (lo.n_records == 0) {
        pt_errf(err, "%s: the model has no routed experts to pack", g->files[0].path);
        goto out;
    }
    if (xpack_fingerprint(g, fp, err) || get_source_stat(g, &ss, err)) goto out;
    snprintf(partial, sizeof partial, "%s.partial", path);
    hdr = calloc(1, lo.header_bytes);
    uint64_t max_rec = 0;
    for (uint32_t l = 0; l < lo.n_layers; l++)
        max_rec = PT_MAX(max_rec, lo.layers[l].record_bytes);
    buf = malloc(max_rec ? max_rec : 1);
    sums = calloc(lo.n_records, 8);
    if (!hdr || !buf || !sums) {
        pt_errf(err, "out of memory");
        goto out;
    }
    /* resume a partial pack of the same model and layout */
    uint64_t done = 0;
    fd = open(partial, O_RDWR | O_CLOEXEC);
    if (fd >= 0) {
        uint8_t *old = malloc(lo.header_bytes);
        uint8_t *want = malloc(lo.header_bytes);
        if (old && want && os_read_at(fd, old, lo.header_bytes, 0) == 0) {
            encode_header(&lo, g, fp, &ss, get64(old + 64), 0, want);
            if (memcmp(old, want, lo.header_bytes) == 0 && get64(old + 64) <= lo.n_records &&
                os_read_at(fd, sums, get64(old + 64) * 8, lo.sums_offset) == 0)
                done = get64(old + 64);
        }
        free(old);
        free(want);
        if (!done) {
            close(fd);
            fd = -1;
        }
    }
    if (fd < 0) {
        fd = open(partial, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        if (fd < 0) {
            pt_errf(err, "%s: cannot create: %s", partial, strerror(errno));
            goto out;
        }
        encode_header(&lo, g, fp, &ss, 0, 0, hdr);
        if (os_write_at(fd, hdr, lo.header_bytes, 0) || ftruncate(fd, (off_t)lo.data_offset)) {
            pt_errf(err, "%s: write failed: %s", partial, strerror(errno));
            goto out;
        }
    }
    const uint64_t total_bytes = lo.records_bytes;
    uint64_t bytes_done = 0, since_journal = 0, journal_from = done;
    for (uint64_t r = 0; r < done; r++) { /* bytes already in place */
        for (uint32_t l = 0; l < lo.n_layers; l++)
            if (r >= lo.layers[l].first_record &&
                r < lo.layers[l].first_record + lo.layers[l].n_expert)
                bytes_done += lo.layers[l].record_bytes;
    }
    uint64_t r = 0;
    for (uint32_t l = 0; l < lo.n_layers; l++) {
        const xpack_layer *L = &lo.layers[l];
        for (uint32_t e = 0; e < L->n_expert; e++, r++) {
            if (r < done) continue;
            if (stop_after >= 0 && (int64_t)r >= stop_after) {
                pt_errf(err, "%s: stopped after %lld records as asked", partial,
                        (long long)stop_after);
                goto journal_and_out;
            }
            gather(&d[l], L, e, buf);
            sums[r] = record_checksum(L, buf);
            if (!lo.table_only && os_write_at(fd, buf, L->record_bytes, record_offset(&lo, l, e))) {
                pt_errf(err, "%s: write failed: %s", partial, strerror(errno));
                goto out;
            }
            bytes_done += L->record_bytes;
            since_journal += L->record_bytes;
            if (since_journal >= XPACK_JOURNAL_BYTES) {
                /* records first, then the journal that vouches for them */
                if (fdatasync(fd) ||
                    os_write_at(fd, &sums[journal_from], (r + 1 - journal_from) * 8,
                                lo.sums_offset + journal_from * 8)) {
                    pt_errf(err, "%s: sync failed: %s", partial, strerror(errno));
                    goto out;
                }
                encode_header(&lo, g, fp, &ss, r + 1, 0, hdr);
                if (fdatasync(fd) || os_write_at(fd, hdr, lo.header_bytes, 0)) {
                    pt_errf(err, "%s: sync failed: %s", partial, strerror(errno));
                    goto out;
                }
                journal_from = r + 1;
                since_journal = 0;
            }
            if (progress) progress(bytes_done, total_bytes, user);
        }
    }
    /* complete: sums, final header, sync, atomic rename */
    encode_header(&lo, g, fp, &ss, lo.n_records, 1, hdr);
    if (os_write_at(fd, sums, lo.n_records * 8, lo.sums_offset) || fdatasync(fd) ||
        os_write_at(fd, hdr, lo.header_bytes, 0) || fsync(fd)) {
        pt_errf(err, "%s: write failed: %s", partial, strerror(errno));
        goto out;
    }
    close(fd);
    fd = -1;
    if (rename(partial, path) != 0) {
        pt_errf(err, "%s: cannot rename to %s: %s", partial, path, strerror(errno));
        goto out;
    }
    rc = 0;
    goto out;
journal_and_out:
    /* the test hook leaves the file as a kill right after a journal point would */
    if (r > journal_from) {
        fdatasync(fd);
        os_write_at(fd, &sums[journal_from], (r - journal_from) * 8,
                    lo.sums_offset + journal_from * 8);
        encode_header(&lo, g, fp, &ss, r, 0, hdr);
        fdatasync(fd);
        os_write_at(fd, hdr, lo.header_bytes, 0);
    }
out:
    if (fd >= 0) close(fd);
    free(hdr);
    free(buf);
    free(sums);
    free(lo.layers);
    return rc;
}

/* ===== reading ===== */

void xpack_close(xpack *p) {
    if (!p) return;
    if (p->fd >= 0) close(p->fd);
    free(p->path);
    free(p->layers);
    free(p->sums);
    free(p);
}

xpack *xpack_open(const char *path, const gguf_ctx *g, const xp_layer_desc *d, int n_layers,
                  pt_err *err) {
    layout lo;
    if (make_layout(d, n_layers, 0, &lo, err)) return NULL;
    xpack *p = calloc(1, sizeof *p);
    uint8_t *hdr = malloc(lo.header_bytes), *want = malloc(lo.header_bytes);
    uint8_t fp[32];
    source_stat ss;
    if (!p || !hdr || !want) {
        pt_errf(err, "out of memory");
        goto fail;
    }
    p->fd = open(path, O_RDONLY | O_CLOEXEC);
    if (p->fd < 0) {
        pt_errf(err, "%s: cannot open: %s", path, strerror(errno));
        goto fail;
    }
    p->path = strdup(path);
    struct stat st;
    if (fstat(p->fd, &st) || os_read_at(p->fd, hdr, XPACK_FIXED, 0)) {
        pt_errf(err, "%s: truncated pack (shorter than its header)", path);
        goto fail;
    }
    if (memcmp(hdr, XPACK_MAGIC, 8) != 0) {
        pt_errf(err, "%s: not an expert pack (bad magic)", path);
        goto fail;
    }
    /* before the layout: an older pack's header is shaped differently */
    if (get32(hdr + 8) != XPACK_VERSION) {
        pt_errf(err,
                "%s: stale pack: format version %u, this petrel reads version %u (checksums "
                "checked on every read, the model's mtime and inode recorded); run `petrel pack` "
                "again",
                path, get32(hdr + 8), XPACK_VERSION);
        goto fail;
    }
    if (get32(hdr + 92) & XPACK_TABLE_ONLY) { /* a checksum table: no records */
        lo.table_only = p->table_only = 1;
        lo.total_size = lo.data_offset;
    }
    if (os_read_at(p->fd, hdr, lo.header_bytes, 0)) {
        pt_errf(err, "%s: truncated pack (shorter than its %llu-byte header)", path,
                (unsigned long long)lo.header_bytes);
        goto fail;
    }
    p->size = (uint64_t)st.st_size;
    if (!get32(hdr + 88)) {
        pt_errf(err, "%s: incomplete pack (interrupted while writing)", path);
        goto fail;
    }
    if (xpack_fingerprint(g, fp, err) || get_source_stat(g, &ss, err)) goto fail;
    if (get64(hdr + 16) != g->total_size || memcmp(hdr + 24, fp, 32) != 0) {
        pt_errf(err, "%s: stale pack: it was made from a different model file", path);
        goto fail;
    }
    /* same size and header: weights edited in place, or a copy of the file */
    if (get64(hdr + 96) != ss.mtime_ns || get64(hdr + 104) != ss.inode ||
        get64(hdr + 112) != ss.digest) {
        pt_errf(err,
                "%s: stale pack: %s changed since the pack was made (%s differs); run `petrel "
                "pack` again",
                path, g->files[0].path,
                get64(hdr + 104) != ss.inode     ? "inode"
                : get64(hdr + 96) != ss.mtime_ns ? "modification time"
                                                 : "a split file's size, mtime or inode");
        goto fail;
    }
    encode_header(&lo, g, fp, &ss, lo.n_records, 1, want);
    if (memcmp(hdr, want, lo.header_bytes) != 0) {
        pt_errf(err, "%s: pack layout does not match the model", path);
        goto fail;
    }
    if (p->size != lo.total_size) {
        pt_errf(err, "%s: truncated or padded pack: %llu bytes, expected %llu", path,
                (unsigned long long)p->size, (unsigned long long)lo.total_size);
        goto fail;
    }
    p->sums = malloc(lo.n_records * 8);
    if (!p->sums || os_read_at(p->fd, p->sums, lo.n_records * 8, lo.sums_offset)) {
        pt_errf(err, "%s: cannot read the checksum table", path);
        goto fail;
    }
    p->n_layers = lo.n_layers;
    p->layers = lo.layers;
    lo.layers = NULL;
    p->n_records = lo.n_records;
    p->sums_offset = lo.sums_offset;
    p->data_offset = lo.data_offset;
    free(hdr);
    free(want);
    return p;
fail:
    free(hdr);
    free(want);
    free(lo.layers);
    xpack_close(p);
    return NULL;
}

uint64_t xpack_record_offset(const xpack *p, int layer, int expert) {
    uint64_t off = p->data_offset;
    for (int l = 0; l < layer; l++)
        off += p->layers[l].record_bytes * p->layers[l].n_expert;
    return off + (uint64_t)expert * p->layers[layer].record_bytes;
}

int xpack_verify(const xpack *p, const gguf_ctx *g, const xp_layer_desc *d,
                 xpack_progress_fn progress, void *user, pt_err *err) {
    (void)g;
    uint64_t max_rec = 0, total = 0, done = 0;
    for (uint32_t l = 0; l < p->n_layers; l++) {
        max_rec = PT_MAX(max_rec, p->layers[l].record_bytes);
        total += p->layers[l].record_bytes * p->layers[l].n_expert;
    }
    uint8_t *got = malloc(max_rec ? max_rec : 1), *want = malloc(max_rec ? max_rec : 1);
    if (!got || !want) {
        free(got);
        free(want);
        return pt_errf(err, "out of memory");
    }
    int rc = 0;
    uint64_t r = 0;
    for (uint32_t l = 0; l < p->n_layers && !rc; l++) {
        const xpack_layer *L = &p->layers[l];
        for (uint32_t e = 0; e < L->n_expert && !rc; e++, r++) {
            if (p->table_only) { /* the model's bytes against the table */
                gather(&d[l], L, e, want);
                if (record_checksum(L, want) != p->sums[r])
                    rc = pt_errf(err,
                                 "%s: stale checksum table: expert %u of layer %u of the model "
                                 "fails its checksum (the model changed since the table was "
                                 "made, or its bytes are corrupt)",
                                 p->path, e, l);
                done += L->record_bytes;
                if (progress) progress(done, total, user);
                continue;
            }
            if (os_read_at(p->fd, got, L->record_bytes, xpack_record_offset(p, (int)l, (int)e))) {
                rc = pt_errf(err, "%s: cannot read record of layer %u expert %u", p->path, l, e);
                break;
            }
            const uint64_t sum = record_checksum(L, got);
            gather(&d[l], L, e, want);
            if (sum != p->sums[r])
                rc = pt_errf(err, "%s: corrupt record: layer %u expert %u fails its checksum",
                             p->path, l, e);
            else if (memcmp(got, want, L->record_bytes) != 0)
                rc = pt_errf(err,
                             "%s: stale pack: record of layer %u expert %u differs from the "
                             "model's bytes (the model changed since the pack was made)",
                             p->path, l, e);
            done += L->record_bytes;
            if (progress) progress(done, total, user);
        }
    }
    free(got);
    free(want);
    return rc;
}

static int candidates(const char *model_path, const char *cache_dir, const char *ext,
                      char out[2][PT_PATH_MAX]) {
    int n = 0;
    snprintf(out[n++], PT_PATH_MAX, "%s%s", model_path, ext);
    const char *base = strrchr(model_path, '/');
    base = base ? base + 1 : model_path;
    if (cache_dir && *cache_dir) snprintf(out[n++], PT_PATH_MAX, "%s/%s%s", cache_dir, base, ext);
    return n;
}

int xpack_candidates(const char *model_path, const char *cache_dir, char out[2][PT_PATH_MAX]) {
    return candidates(model_path, cache_dir, ".xpack", out);
}

int xpack_table_candidates(const char *model_path, const char *cache_dir,
                           char out[2][PT_PATH_MAX]) {
    return candidates(model_path, cache_dir, ".xsums", out);
}
