/* gguf_write.c — the GGUF writer (see gguf.h for usage and guarantees).
 *
 * The header (metadata and tensor infos) is serialised into memory as it is
 * declared; tensor data is streamed afterwards in declaration order, so files
 * far larger than memory can be written. Offsets are assigned at declaration:
 * tensor i starts at the first multiple of the alignment after tensor i-1 —
 * the strict layout llama.cpp's reader requires.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "format/ggml_types.h"
#include "gguf.h"
#include "os/os.h"

typedef struct wbuf {
    uint8_t *p; /* [len] serialised bytes */
    size_t len, cap;
} wbuf;

typedef struct wtensor {
    uint64_t offset, nbytes;
} wtensor;

struct gguf_writer {
    uint32_t alignment;
    wbuf kv; /* serialised key/value pairs */
    uint64_t n_kv;
    char **keys; /* for duplicate detection */
    wbuf ti;     /* serialised tensor infos */
    wtensor *tensors;
    size_t n_tensors, cap_tensors;
    uint64_t data_size; /* bytes of the data section declared so far */
    /* streaming state */
    int fd;
    char *path, *tmp_path;
    uint64_t cur;      /* index of the tensor being written */
    uint64_t cur_done; /* bytes of it written */
    uint64_t data_pos; /* bytes of the data section written (incl. padding) */
    int failed;
};

static int wb_put(wbuf *b, const void *d, uint64_t n) {
    if (n > SIZE_MAX - b->len || pt_grow((void **)&b->p, &b->cap, b->len + n, 1)) return -1;
    if (n) memcpy(b->p + b->len, d, n);
    b->len += n;
    return 0;
}

static int wb_u32(wbuf *b, uint32_t v) {
    return wb_put(b, &v, 4);
}
static int wb_u64(wbuf *b, uint64_t v) {
    return wb_put(b, &v, 8);
}
static int wb_str(wbuf *b, const char *s, uint64_t n) {
    return wb_u64(b, n) || wb_put(b, s, n);
}

gguf_writer *gguf_writer_new(uint32_t alignment) {
    if (alignment == 0 || (alignment & (alignment - 1))) return NULL;
    gguf_writer *w = calloc(1, sizeof *w);
    if (!w) return NULL;
    w->alignment = alignment;
    w->fd = -1;
    return w;
}

void gguf_writer_free(gguf_writer *w) {
    if (!w) return;
    if (w->fd >= 0) {
        close(w->fd);
        unlink(w->tmp_path); /* never finished: leave nothing half-written behind */
    }
    for (uint64_t i = 0; i < w->n_kv; i++)
        free(w->keys[i]);
    free(w->keys);
    free(w->kv.p);
    free(w->ti.p);
    free(w->tensors);
    free(w->path);
    free(w->tmp_path);
    free(w);
}

/* Start a key: checks for duplicates, writes the key and the value type. */
static int kv_begin(gguf_writer *w, const char *key, uint32_t type, pt_err *err) {
    for (uint64_t i = 0; i < w->n_kv; i++)
        if (strcmp(w->keys[i], key) == 0)
            return pt_errf(err, "gguf writer: duplicate key '%s'", key);
    if (w->alignment != GGUF_DEFAULT_ALIGNMENT && strcmp(key, "general.alignment") == 0)
        return pt_errf(err, "gguf writer: general.alignment is written by the writer itself");
    char **k = realloc(w->keys, (w->n_kv + 1) * sizeof *k);
    if (!k) return pt_errf(err, "gguf writer: out of memory");
    w->keys = k;
    if (!(k[w->n_kv] = strdup(key))) return pt_errf(err, "gguf writer: out of memory");
    w->n_kv++;
    if (wb_str(&w->kv, key, strlen(key)) || wb_u32(&w->kv, type))
        return pt_errf(err, "gguf writer: out of memory");
    return 0;
}

static int kv_scalar(gguf_writer *w, const char *key, uint32_t type, const void *v, pt_err *err) {
    if (kv_begin(w, key, type, err)) return -1;
    if (wb_put(&w->kv, v, gguf_type_size(type))) return pt_errf(err, "gguf writer: out of memory");
    return 0;
}

int gguf_writer_kv_u32(gguf_writer *w, const char *key, uint32_t v, pt_err *err) {
    return kv_scalar(w, key, GGUF_UINT32, &v, err);
}
int gguf_writer_kv_i32(gguf_writer *w, const char *key, int32_t v, pt_err *err) {
    return kv_scalar(w, key, GGUF_INT32, &v, err);
}
int gguf_writer_kv_u64(gguf_writer *w, const char *key, uint64_t v, pt_err *err) {
    return kv_scalar(w, key, GGUF_UINT64, &v, err);
}
int gguf_writer_kv_f32(gguf_writer *w, const char *key, float v, pt_err *err) {
    return kv_scalar(w, key, GGUF_FLOAT32, &v, err);
}
int gguf_writer_kv_bool(gguf_writer *w, const char *key, int v, pt_err *err) {
    uint8_t b = v ? 1 : 0;
    return kv_scalar(w, key, GGUF_BOOL, &b, err);
}

int gguf_writer_kv_str(gguf_writer *w, const char *key, const char *v, pt_err *err) {
    if (kv_begin(w, key, GGUF_STRING, err)) return -1;
    if (wb_str(&w->kv, v, strlen(v))) return pt_errf(err, "gguf writer: out of memory");
    return 0;
}

int gguf_writer_kv_array(gguf_writer *w, const char *key, uint32_t type, const void *data,
                         uint64_t n, pt_err *err) {
    uint32_t es = gguf_type_size(type);
    if (es == 0)
        return pt_errf(err, "gguf writer: key '%s': array of non-scalar type %u", key, type);
    if (kv_begin(w, key, GGUF_ARRAY, err)) return -1;
    if (wb_u32(&w->kv, type) || wb_u64(&w->kv, n) || wb_put(&w->kv, data, n * es))
        return pt_errf(err, "gguf writer: out of memory");
    return 0;
}

int gguf_writer_kv_str_array(gguf_writer *w, const char *key, const char *const *v, uint64_t n,
                             pt_err *err) {
    if (kv_begin(w, key, GGUF_ARRAY, err)) return -1;
    if (wb_u32(&w->kv, GGUF_STRING) || wb_u64(&w->kv, n))
        return pt_errf(err, "gguf writer: out of memory");
    for (uint64_t i = 0; i < n; i++)
        if (wb_str(&w->kv, v[i], strlen(v[i]))) return pt_errf(err, "gguf writer: out of memory");
    return 0;
}

/* Serialise a parsed value (without its type tag). */
static int put_value(wbuf *b, const gguf_value *v) {
    switch (v->type) {
    case GGUF_STRING: return wb_str(b, v->str.ptr, v->str.len);
    case GGUF_ARRAY: {
        if (wb_u32(b, v->arr.type) || wb_u64(b, v->arr.n)) return -1;
        if (v->arr.type == GGUF_STRING || v->arr.type == GGUF_ARRAY) {
            for (uint64_t i = 0; i < v->arr.n; i++)
                if (put_value(b, &v->arr.items[i])) return -1;
            return 0;
        }
        return wb_put(b, v->arr.data, v->arr.n * gguf_type_size(v->arr.type));
    }
    case GGUF_BOOL: {
        uint8_t x = v->b ? 1 : 0;
        return wb_put(b, &x, 1);
    }
    case GGUF_FLOAT32: {
        float f = (float)v->f64;
        return wb_put(b, &f, 4);
    }
    case GGUF_FLOAT64: return wb_put(b, &v->f64, 8);
    case GGUF_INT8:
    case GGUF_INT16:
    case GGUF_INT32:
    case GGUF_INT64:
        return wb_put(b, &v->i64, gguf_type_size(v->type)); /* little-endian truncation */
    default: return wb_put(b, &v->u64, gguf_type_size(v->type));
    }
}

int gguf_writer_kv_copy(gguf_writer *w, const gguf_kv *kv, pt_err *err) {
    char key[4096];
    if (kv->key.len >= sizeof key) return pt_errf(err, "gguf writer: key too long");
    memcpy(key, kv->key.ptr, kv->key.len);
    key[kv->key.len] = 0;
    if (kv_begin(w, key, kv->val.type, err)) return -1;
    if (put_value(&w->kv, &kv->val)) return pt_errf(err, "gguf writer: out of memory");
    return 0;
}

int gguf_writer_add_tensor(gguf_writer *w, const char *name, uint32_t type, uint32_t n_dims,
                           const int64_t *ne, pt_err *err) {
    if (w->fd >= 0) return pt_errf(err, "gguf writer: tensor '%s' declared after begin", name);
    if (n_dims < 1 || n_dims > GGUF_MAX_DIMS)
        return pt_errf(err, "gguf writer: tensor '%s': %u dimensions, expected 1..4", name, n_dims);
    int64_t n = 1;
    for (uint32_t d = 0; d < n_dims; d++)
        if (ne[d] < 0 || __builtin_mul_overflow(n, ne[d], &n))
            return pt_errf(err, "gguf writer: tensor '%s': bad shape", name);
    const qt_traits *tr = qt_get(type);
    uint64_t nbytes;
    if (!tr || ne[0] % tr->block || qt_row_bytes(type, n, &nbytes))
        return pt_errf(err,
                       "gguf writer: tensor '%s': %lld weights per row are not whole %s blocks",
                       name, (long long)ne[0], qt_name(type));
    if (pt_grow((void **)&w->tensors, &w->cap_tensors, w->n_tensors + 1, sizeof *w->tensors))
        return pt_errf(err, "gguf writer: out of memory");
    uint64_t off = pt_align_up(w->data_size, w->alignment);
    w->tensors[w->n_tensors++] = (wtensor){off, nbytes};
    w->data_size = off + nbytes;
    int rc = wb_str(&w->ti, name, strlen(name)) || wb_u32(&w->ti, n_dims);
    for (uint32_t d = 0; d < n_dims && !rc; d++)
        rc = wb_u64(&w->ti, (uint64_t)ne[d]);
    rc = rc || wb_u32(&w->ti, type) || wb_u64(&w->ti, off);
    return rc ? pt_errf(err, "gguf writer: out of memory") : 0;
}

static int write_all(gguf_writer *w, const void *p, uint64_t n, pt_err *err) {
    if (!os_write_all(w->fd, p, n)) return 0;
    w->failed = 1;
    return pt_errf(err, "%s: write failed: %s", w->tmp_path,
                   errno ? strerror(errno) : "no progress");
}

static int write_zeros(gguf_writer *w, uint64_t n, pt_err *err) {
    static const uint8_t zeros[256];
    while (n) {
        uint64_t k = PT_MIN(n, sizeof zeros);
        if (write_all(w, zeros, k, err)) return -1;
        n -= k;
    }
    return 0;
}

int gguf_writer_begin(gguf_writer *w, const char *path, pt_err *err) {
    if (w->fd >= 0) return pt_errf(err, "gguf writer: already begun");
    uint64_t n_kv = w->n_kv;
    wbuf head = {0};
    int rc = wb_put(&head, "GGUF", 4) || wb_u32(&head, 3) || wb_u64(&head, w->n_tensors);
    if (w->alignment != GGUF_DEFAULT_ALIGNMENT) {
        rc = rc || wb_u64(&head, n_kv + 1) || wb_put(&head, w->kv.p, w->kv.len) ||
             wb_str(&head, "general.alignment", 17) || wb_u32(&head, GGUF_UINT32) ||
             wb_u32(&head, w->alignment);
    } else {
        rc = rc || wb_u64(&head, n_kv) || (w->kv.len && wb_put(&head, w->kv.p, w->kv.len));
    }
    rc = rc || (w->ti.len && wb_put(&head, w->ti.p, w->ti.len));
    if (rc) {
        free(head.p);
        return pt_errf(err, "gguf writer: out of memory");
    }
    w->path = strdup(path);
    w->tmp_path = malloc(strlen(path) + 5);
    if (!w->path || !w->tmp_path) {
        free(head.p);
        return pt_errf(err, "gguf writer: out of memory");
    }
    sprintf(w->tmp_path, "%s.tmp", path);
    w->fd = open(w->tmp_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (w->fd < 0) {
        free(head.p);
        return pt_errf(err, "%s: cannot create: %s", w->tmp_path, strerror(errno));
    }
    uint64_t pad = pt_align_up(head.len, w->alignment) - head.len;
    rc = write_all(w, head.p, head.len, err) || write_zeros(w, pad, err);
    free(head.p);
    w->cur = 0;
    w->cur_done = 0;
    w->data_pos = 0;
    return rc ? -1 : 0;
}

/* Advance over n bytes of tensor data: write them from data, or, when data is
 * NULL, seek over them (a hole in a sparse file; padding is skipped too). */
static int advance(gguf_writer *w, const void *data, uint64_t n, pt_err *err) {
    if (w->fd < 0 || w->failed) return pt_errf(err, "gguf writer: not writing");
    const uint8_t *p = data;
    while (n) {
        if (w->cur >= w->n_tensors)
            return pt_errf(err, "%s: more tensor data written than declared", w->tmp_path);
        wtensor *t = &w->tensors[w->cur];
        if (w->cur_done == 0 && w->data_pos < t->offset) {
            if (!data && lseek(w->fd, (off_t)(t->offset - w->data_pos), SEEK_CUR) < 0) {
                w->failed = 1;
                return pt_errf(err, "%s: seek failed: %s", w->tmp_path, strerror(errno));
            }
            if (data && write_zeros(w, t->offset - w->data_pos, err)) return -1;
            w->data_pos = t->offset;
        }
        uint64_t k = PT_MIN(n, t->nbytes - w->cur_done);
        if (!data && lseek(w->fd, (off_t)k, SEEK_CUR) < 0) {
            w->failed = 1;
            return pt_errf(err, "%s: seek failed: %s", w->tmp_path, strerror(errno));
        }
        if (data && write_all(w, p, k, err)) return -1;
        if (data) p += k;
        n -= k;
        w->cur_done += k;
        w->data_pos += k;
        if (w->cur_done == t->nbytes) {
            w->cur++;
            w->cur_done = 0;
        }
    }
    return 0;
}

int gguf_writer_write(gguf_writer *w, const void *data, uint64_t n, pt_err *err) {
    if (!data && n) return pt_errf(err, "gguf writer: no data to write");
    return advance(w, data, n, err);
}

int gguf_writer_skip(gguf_writer *w, uint64_t n, pt_err *err) {
    return advance(w, NULL, n, err);
}

int gguf_writer_finish(gguf_writer *w, pt_err *err) {
    if (w->fd < 0 || w->failed) return pt_errf(err, "gguf writer: not writing");
    /* Zero-sized tensors at the end complete without data. */
    while (w->cur < w->n_tensors && w->tensors[w->cur].nbytes == 0)
        w->cur++;
    if (w->cur != w->n_tensors)
        return pt_errf(err, "%s: only %llu of %llu tensors were written", w->tmp_path,
                       (unsigned long long)w->cur, (unsigned long long)w->n_tensors);
    if (write_zeros(w, pt_align_up(w->data_pos, w->alignment) - w->data_pos, err)) return -1;
    /* a skipped tail is a hole past the last byte written: give the file its full size */
    const off_t end = lseek(w->fd, 0, SEEK_CUR);
    if (end < 0 || ftruncate(w->fd, end) != 0)
        return pt_errf(err, "%s: cannot set the file size: %s", w->tmp_path, strerror(errno));
    if (fsync(w->fd) != 0 && errno != EINVAL)
        return pt_errf(err, "%s: fsync failed: %s", w->tmp_path, strerror(errno));
    if (close(w->fd) != 0) {
        w->fd = -1;
        return pt_errf(err, "%s: close failed: %s", w->tmp_path, strerror(errno));
    }
    w->fd = -1;
    if (rename(w->tmp_path, w->path) != 0)
        return pt_errf(err, "%s: cannot rename to %s: %s", w->tmp_path, w->path, strerror(errno));
    return 0;
}
