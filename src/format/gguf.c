/* gguf.c — the GGUF reader: map, parse, validate (see gguf.h for the format).
 *
 * Policy: a file is accepted only when every count, length and offset is
 * consistent with the file's size. Counts are checked against the smallest
 * possible encoding of the items they announce before any allocation, so a
 * hostile header can never make us allocate more than a small multiple of the
 * file's size, and every loop is bounded by the bytes actually present.
 */
#include "gguf.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "format/ggml_types.h"
#include "os/os.h"
#include "petrel.h" /* PT_PATH_MAX */

#define GGUF_MAX_ARRAY_DEPTH 8
#define GGUF_MAX_KEY_LEN 65535
#define GGUF_MAX_NAME_LEN 1024
#define GGUF_MAX_SPLITS 9999
/* Tensor data is read in place (mapped) by the kernels, which load the blocks' fp16/f32
 * fields directly: every tensor must start at a multiple of this many bytes in its file
 * (the mapping itself is page-aligned). GGUF's default alignment (32) always satisfies it;
 * a file written with general.alignment 1, 2 or 4 may not and is refused. */
#define GGUF_MIN_DATA_ALIGN 8

/* ===== Arena: everything the parser allocates, freed at close ===== */

typedef struct arena_block {
    struct arena_block *next;
} arena_block;

static void *arena_alloc(gguf_ctx *ctx, uint64_t size) {
    if (size > SIZE_MAX - sizeof(arena_block) - 16) return NULL;
    arena_block *b = malloc(sizeof(arena_block) + 16 + (size_t)size);
    if (!b) return NULL;
    b->next = ctx->arena;
    ctx->arena = b;
    return (char *)b + sizeof(arena_block) + 16; /* 16: keep items 16-aligned */
}

static void arena_free(gguf_ctx *ctx) {
    arena_block *b = ctx->arena;
    while (b) {
        arena_block *n = b->next;
        free(b);
        b = n;
    }
    ctx->arena = NULL;
}

/* ===== Cursor over one file image ===== */

typedef struct cursor {
    const uint8_t *p;
    uint64_t len;
    uint64_t pos;
    const char *name; /* file name for messages */
    pt_err *err;
    gguf_ctx *ctx;
} cursor;

static uint64_t left(const cursor *c) {
    return c->len - c->pos;
}

static int need(cursor *c, uint64_t n, const char *what) {
    if (n > left(c))
        return pt_errf(c->err,
                       "%s: truncated file: %s needs %llu bytes at offset %llu, only %llu left",
                       c->name, what, (unsigned long long)n, (unsigned long long)c->pos,
                       (unsigned long long)left(c));
    return 0;
}

static int rd(cursor *c, void *dst, uint64_t n, const char *what) {
    if (need(c, n, what)) return -1;
    memcpy(dst, c->p + c->pos, n);
    c->pos += n;
    return 0;
}

static int rd_u32(cursor *c, uint32_t *v, const char *what) {
    return rd(c, v, 4, what);
}
static int rd_u64(cursor *c, uint64_t *v, const char *what) {
    return rd(c, v, 8, what);
}

static int rd_str(cursor *c, gguf_str *s, uint64_t max_len, const char *what) {
    uint64_t n;
    if (rd_u64(c, &n, what)) return -1;
    if (n > left(c))
        return pt_errf(c->err,
                       "%s: %s at offset %llu has length %llu, past the end of the file "
                       "(%llu bytes left)",
                       c->name, what, (unsigned long long)(c->pos - 8), (unsigned long long)n,
                       (unsigned long long)left(c));
    if (n > max_len)
        return pt_errf(c->err, "%s: %s at offset %llu has length %llu, expected at most %llu",
                       c->name, what, (unsigned long long)(c->pos - 8), (unsigned long long)n,
                       (unsigned long long)max_len);
    s->ptr = (const char *)c->p + c->pos;
    s->len = n;
    c->pos += n;
    return 0;
}

/* ===== Value types ===== */

static const char *type_names[GGUF_NTYPES] = {"uint8",  "int8",    "uint16", "int16",  "uint32",
                                              "int32",  "float32", "bool",   "string", "array",
                                              "uint64", "int64",   "float64"};
static const uint8_t type_sizes[GGUF_NTYPES] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};

uint32_t gguf_type_size(uint32_t type) {
    return type < GGUF_NTYPES ? type_sizes[type] : 0;
}

const char *gguf_type_name(uint32_t type) {
    return type < GGUF_NTYPES ? type_names[type] : "?";
}

/* Decode a fixed-size scalar at p into v (v->type already set). */
static void decode_scalar(gguf_value *v, const uint8_t *p) {
    switch (v->type) {
    case GGUF_UINT8: v->u64 = p[0]; break;
    case GGUF_INT8: v->i64 = (int8_t)p[0]; break;
    case GGUF_UINT16: {
        uint16_t x;
        memcpy(&x, p, 2);
        v->u64 = x;
    } break;
    case GGUF_INT16: {
        int16_t x;
        memcpy(&x, p, 2);
        v->i64 = x;
    } break;
    case GGUF_UINT32: {
        uint32_t x;
        memcpy(&x, p, 4);
        v->u64 = x;
    } break;
    case GGUF_INT32: {
        int32_t x;
        memcpy(&x, p, 4);
        v->i64 = x;
    } break;
    case GGUF_FLOAT32: {
        float x;
        memcpy(&x, p, 4);
        v->f64 = x;
    } break;
    case GGUF_BOOL: v->b = p[0] != 0; break;
    case GGUF_UINT64: memcpy(&v->u64, p, 8); break;
    case GGUF_INT64: memcpy(&v->i64, p, 8); break;
    case GGUF_FLOAT64: memcpy(&v->f64, p, 8); break;
    default: break;
    }
}

/* Smallest encoding of one element of `type`, used to bound counts. */
static uint64_t min_encoding(uint32_t type) {
    if (type == GGUF_STRING) return 8;    /* u64 length, empty string */
    if (type == GGUF_ARRAY) return 4 + 8; /* element type + count, empty array */
    return type_sizes[type];
}

static int parse_value(cursor *c, gguf_value *v, uint32_t type, int depth, const char *key);

static int parse_array(cursor *c, gguf_value *v, int depth, const char *key) {
    uint32_t et;
    uint64_t n;
    if (rd_u32(c, &et, "array element type") || rd_u64(c, &n, "array length")) return -1;
    if (et >= GGUF_NTYPES)
        return pt_errf(c->err, "%s: key '%s': array element type %u is unknown (expected 0..12)",
                       c->name, key, et);
    if (depth >= GGUF_MAX_ARRAY_DEPTH)
        return pt_errf(c->err, "%s: key '%s': arrays nested deeper than %d levels", c->name, key,
                       GGUF_MAX_ARRAY_DEPTH);
    uint64_t min = min_encoding(et);
    if (n > left(c) / min)
        return pt_errf(
            c->err, "%s: key '%s': array of %llu %s elements cannot fit in the %llu bytes left",
            c->name, key, (unsigned long long)n, type_names[et], (unsigned long long)left(c));
    v->arr.type = et;
    v->arr.n = n;
    v->arr.data = c->p + c->pos;
    v->arr.items = NULL;
    if (et != GGUF_STRING && et != GGUF_ARRAY) {
        c->pos += n * min;
        return 0;
    }
    /* n * sizeof(gguf_value) is bounded: n <= file bytes / 8. */
    gguf_value *items = arena_alloc(c->ctx, n * sizeof(gguf_value));
    if (!items && n) return pt_errf(c->err, "%s: out of memory reading key '%s'", c->name, key);
    for (uint64_t i = 0; i < n; i++)
        if (parse_value(c, &items[i], et, depth + 1, key)) return -1;
    v->arr.items = items;
    return 0;
}

static int parse_value(cursor *c, gguf_value *v, uint32_t type, int depth, const char *key) {
    memset(v, 0, sizeof *v);
    v->type = type;
    if (type == GGUF_STRING) return rd_str(c, &v->str, UINT64_MAX, "string value");
    if (type == GGUF_ARRAY) return parse_array(c, v, depth, key);
    if (type >= GGUF_NTYPES)
        return pt_errf(c->err, "%s: key '%s': value type %u is unknown (expected 0..12)", c->name,
                       key, type);
    if (need(c, type_sizes[type], "value")) return -1;
    decode_scalar(v, c->p + c->pos);
    c->pos += type_sizes[type];
    return 0;
}

/* ===== Value conversions ===== */

int gguf_value_i64(const gguf_value *v, int64_t *out) {
    switch (v->type) {
    case GGUF_UINT8:
    case GGUF_UINT16:
    case GGUF_UINT32:
    case GGUF_UINT64:
        if (v->u64 > (uint64_t)INT64_MAX) return -1;
        *out = (int64_t)v->u64;
        return 0;
    case GGUF_INT8:
    case GGUF_INT16:
    case GGUF_INT32:
    case GGUF_INT64: *out = v->i64; return 0;
    case GGUF_BOOL: *out = v->b; return 0;
    default: return -1;
    }
}

int gguf_value_f64(const gguf_value *v, double *out) {
    if (v->type == GGUF_FLOAT32 || v->type == GGUF_FLOAT64) {
        *out = v->f64;
        return 0;
    }
    int64_t i;
    if (gguf_value_i64(v, &i)) return -1;
    *out = (double)i;
    return 0;
}

static int array_item(const gguf_value *arr, uint64_t i, gguf_value *tmp) {
    if (arr->type != GGUF_ARRAY || i >= arr->arr.n) return -1;
    uint32_t et = arr->arr.type;
    if (et == GGUF_STRING || et == GGUF_ARRAY || et >= GGUF_NTYPES) return -1;
    memset(tmp, 0, sizeof *tmp);
    tmp->type = et;
    decode_scalar(tmp, arr->arr.data + i * type_sizes[et]);
    return 0;
}

int gguf_array_i64(const gguf_value *arr, uint64_t i, int64_t *out) {
    gguf_value tmp;
    return array_item(arr, i, &tmp) ? -1 : gguf_value_i64(&tmp, out);
}

int gguf_array_f64(const gguf_value *arr, uint64_t i, double *out) {
    gguf_value tmp;
    return array_item(arr, i, &tmp) ? -1 : gguf_value_f64(&tmp, out);
}

/* ===== Lookup ===== */

const gguf_kv *gguf_find(const gguf_ctx *ctx, const char *key) {
    size_t kl = strlen(key);
    for (uint64_t i = 0; i < ctx->n_kv; i++)
        if (ctx->kv[i].key.len == kl && memcmp(ctx->kv[i].key.ptr, key, kl) == 0)
            return &ctx->kv[i];
    return NULL;
}

static const gguf_kv *find_or_err(const gguf_ctx *ctx, const char *key, pt_err *err) {
    const gguf_kv *kv = gguf_find(ctx, key);
    if (!kv)
        pt_errf(err, "%s: missing metadata key '%s'", ctx->n_files ? ctx->files[0].path : "gguf",
                key);
    return kv;
}

static int bad_type(const gguf_ctx *ctx, const gguf_kv *kv, const char *wanted, pt_err *err) {
    return pt_errf(err, "%s: metadata key '%.*s' has type %s, expected %s",
                   ctx->n_files ? ctx->files[0].path : "gguf", (int)PT_MIN(kv->key.len, 200),
                   kv->key.ptr, gguf_type_name(kv->val.type), wanted);
}

int gguf_get_i64(const gguf_ctx *ctx, const char *key, int64_t *out, pt_err *err) {
    const gguf_kv *kv = find_or_err(ctx, key, err);
    if (!kv) return -1;
    if (kv->val.type == GGUF_BOOL || gguf_value_i64(&kv->val, out))
        return bad_type(ctx, kv, "an integer", err);
    return 0;
}

int gguf_get_u64(const gguf_ctx *ctx, const char *key, uint64_t *out, pt_err *err) {
    const gguf_kv *kv = find_or_err(ctx, key, err);
    if (!kv) return -1;
    const gguf_value *v = &kv->val;
    if (v->type == GGUF_UINT8 || v->type == GGUF_UINT16 || v->type == GGUF_UINT32 ||
        v->type == GGUF_UINT64) {
        *out = v->u64;
        return 0;
    }
    int64_t i;
    if (v->type == GGUF_BOOL || gguf_value_i64(v, &i) || i < 0)
        return bad_type(ctx, kv, "a non-negative integer", err);
    *out = (uint64_t)i;
    return 0;
}

int gguf_get_u32(const gguf_ctx *ctx, const char *key, uint32_t *out, pt_err *err) {
    uint64_t v;
    if (gguf_get_u64(ctx, key, &v, err)) return -1;
    if (v > UINT32_MAX)
        return pt_errf(err, "%s: metadata key '%s' = %llu does not fit in 32 bits",
                       ctx->files[0].path, key, (unsigned long long)v);
    *out = (uint32_t)v;
    return 0;
}

int gguf_get_f32(const gguf_ctx *ctx, const char *key, float *out, pt_err *err) {
    const gguf_kv *kv = find_or_err(ctx, key, err);
    if (!kv) return -1;
    double d;
    if (kv->val.type == GGUF_BOOL || gguf_value_f64(&kv->val, &d))
        return bad_type(ctx, kv, "a number", err);
    *out = (float)d;
    return 0;
}

int gguf_get_bool(const gguf_ctx *ctx, const char *key, int *out, pt_err *err) {
    const gguf_kv *kv = find_or_err(ctx, key, err);
    if (!kv) return -1;
    if (kv->val.type != GGUF_BOOL) return bad_type(ctx, kv, "bool", err);
    *out = kv->val.b;
    return 0;
}

int gguf_get_str(const gguf_ctx *ctx, const char *key, char *buf, uint64_t cap, pt_err *err) {
    const gguf_kv *kv = find_or_err(ctx, key, err);
    if (!kv) return -1;
    if (kv->val.type != GGUF_STRING) return bad_type(ctx, kv, "string", err);
    if (kv->val.str.len >= cap)
        return pt_errf(err, "%s: metadata key '%s' is %llu bytes long, expected under %llu",
                       ctx->files[0].path, key, (unsigned long long)kv->val.str.len,
                       (unsigned long long)cap);
    memcpy(buf, kv->val.str.ptr, kv->val.str.len);
    buf[kv->val.str.len] = 0;
    return 0;
}

static int cmp_tensor_name(const void *a, const void *b, void *arg) {
    const gguf_ctx *ctx = arg;
    return strcmp(ctx->tensors[*(const uint32_t *)a].name, ctx->tensors[*(const uint32_t *)b].name);
}

const gguf_tensor *gguf_find_tensor(const gguf_ctx *ctx, const char *name) {
    uint64_t lo = 0, hi = ctx->n_tensors;
    while (lo < hi) {
        uint64_t mid = lo + (hi - lo) / 2;
        const gguf_tensor *t = &ctx->tensors[ctx->by_name[mid]];
        int c = strcmp(t->name, name);
        if (c == 0) return t;
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}

int64_t gguf_nelements(const gguf_tensor *t) {
    return t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3]; /* overflow excluded at parse time */
}

/* ===== Header parsing ===== */

static int cmp_kv_key(const void *a, const void *b) {
    const gguf_kv *x = *(const gguf_kv *const *)a, *y = *(const gguf_kv *const *)b;
    uint64_t n = PT_MIN(x->key.len, y->key.len);
    int c = memcmp(x->key.ptr, y->key.ptr, n);
    if (c) return c;
    return x->key.len < y->key.len ? -1 : x->key.len > y->key.len;
}

static int check_duplicate_keys(cursor *c, gguf_ctx *ctx) {
    if (ctx->n_kv < 2) return 0;
    const gguf_kv **idx = malloc(ctx->n_kv * sizeof *idx);
    if (!idx) return pt_errf(c->err, "%s: out of memory", c->name);
    for (uint64_t i = 0; i < ctx->n_kv; i++)
        idx[i] = &ctx->kv[i];
    qsort(idx, ctx->n_kv, sizeof *idx, cmp_kv_key);
    int rc = 0;
    for (uint64_t i = 1; i < ctx->n_kv && !rc; i++)
        if (cmp_kv_key(&idx[i - 1], &idx[i]) == 0)
            rc = pt_errf(c->err, "%s: metadata key '%.*s' appears more than once", c->name,
                         (int)PT_MIN(idx[i]->key.len, 200), idx[i]->key.ptr);
    free(idx);
    return rc;
}

/* Parse the key/value section of one file into kv[n_kv]. */
static int parse_kvs(cursor *c, gguf_kv *kv, uint64_t n_kv) {
    for (uint64_t i = 0; i < n_kv; i++) {
        if (rd_str(c, &kv[i].key, GGUF_MAX_KEY_LEN, "metadata key")) return -1;
        if (kv[i].key.len == 0)
            return pt_errf(c->err, "%s: metadata key %llu is empty", c->name,
                           (unsigned long long)i);
        char key[128];
        snprintf(key, sizeof key, "%.*s", (int)PT_MIN(kv[i].key.len, 100), kv[i].key.ptr);
        uint32_t type;
        if (rd_u32(c, &type, "metadata value type")) return -1;
        if (type >= GGUF_NTYPES)
            return pt_errf(c->err, "%s: key '%s': value type %u is unknown (expected 0..12)",
                           c->name, key, type);
        if (parse_value(c, &kv[i].val, type, 0, key)) return -1;
    }
    return 0;
}

static int parse_tensor_info(cursor *c, gguf_ctx *ctx, gguf_tensor *t, uint64_t idx) {
    gguf_str name;
    if (rd_str(c, &name, GGUF_MAX_NAME_LEN, "tensor name")) return -1;
    char *nm = arena_alloc(ctx, name.len + 1);
    if (!nm) return pt_errf(c->err, "%s: out of memory", c->name);
    memcpy(nm, name.ptr, name.len);
    nm[name.len] = 0;
    if (strlen(nm) != name.len)
        return pt_errf(c->err, "%s: tensor %llu has a name containing a NUL byte", c->name,
                       (unsigned long long)idx);
    t->name = nm;
    if (rd_u32(c, &t->n_dims, "tensor dimension count")) return -1;
    if (t->n_dims < 1 || t->n_dims > GGUF_MAX_DIMS)
        return pt_errf(c->err, "%s: tensor '%s' has %u dimensions, expected 1..%d", c->name, nm,
                       t->n_dims, GGUF_MAX_DIMS);
    int64_t n = 1;
    for (uint32_t d = 0; d < GGUF_MAX_DIMS; d++) {
        int64_t ne = 1;
        if (d < t->n_dims && rd(c, &ne, 8, "tensor shape")) return -1;
        if (ne < 0)
            return pt_errf(c->err, "%s: tensor '%s' has negative size %lld in dimension %u",
                           c->name, nm, (long long)ne, d);
        if (__builtin_mul_overflow(n, ne, &n))
            return pt_errf(c->err, "%s: tensor '%s': element count overflows 64 bits", c->name, nm);
        t->ne[d] = ne;
    }
    if (rd_u32(c, &t->type, "tensor type") || rd_u64(c, &t->offset, "tensor offset")) return -1;
    const qt_traits *tr = qt_get(t->type);
    if (!tr)
        return pt_errf(c->err, "%s: tensor '%s' has unknown ggml type %u", c->name, nm, t->type);
    if (t->ne[0] % tr->block != 0)
        return pt_errf(c->err,
                       "%s: tensor '%s': row of %lld weights is not a whole number of %s blocks "
                       "(%d weights each)",
                       c->name, nm, (long long)t->ne[0], tr->name, tr->block);
    if (qt_row_bytes(t->type, n, &t->nbytes))
        return pt_errf(c->err, "%s: tensor '%s': byte size of %lld %s weights overflows", c->name,
                       nm, (long long)n, tr->name);
    if (t->offset % ctx->alignment != 0)
        return pt_errf(
            c->err, "%s: tensor '%s' has offset %llu, not a multiple of the alignment %llu",
            c->name, nm, (unsigned long long)t->offset, (unsigned long long)ctx->alignment);
    return 0;
}

static int cmp_offset(const void *a, const void *b) {
    const gguf_tensor *x = *(const gguf_tensor *const *)a, *y = *(const gguf_tensor *const *)b;
    return x->offset < y->offset ? -1 : x->offset > y->offset;
}

/* Check tensors [first, first+n) of file f: inside the file, no overlaps. */
static int check_tensor_ranges(cursor *c, gguf_ctx *ctx, gguf_file *f, gguf_tensor *ts,
                               uint64_t n) {
    for (uint64_t i = 0; i < n; i++) {
        uint64_t start, end;
        if (pt_add_u64(f->data_offset, ts[i].offset, &start) ||
            pt_add_u64(start, ts[i].nbytes, &end) || end > f->size)
            return pt_errf(c->err,
                           "%s: tensor '%s' (offset %llu, %llu bytes) extends past the end of "
                           "the file (%llu bytes, data section at %llu)",
                           c->name, ts[i].name, (unsigned long long)ts[i].offset,
                           (unsigned long long)ts[i].nbytes, (unsigned long long)f->size,
                           (unsigned long long)f->data_offset);
        if (start % GGUF_MIN_DATA_ALIGN)
            return pt_errf(c->err,
                           "%s: tensor '%s' starts at byte %llu of the file, not a multiple of %d "
                           "(general.alignment %llu): tensor data is read in place and must be "
                           "aligned",
                           c->name, ts[i].name, (unsigned long long)start, GGUF_MIN_DATA_ALIGN,
                           (unsigned long long)ctx->alignment);
        ts[i].file_offset = start;
        ts[i].data = f->map + start;
    }
    if (n < 2) return 0;
    const gguf_tensor **s = malloc(n * sizeof *s);
    if (!s) return pt_errf(c->err, "%s: out of memory", c->name);
    for (uint64_t i = 0; i < n; i++)
        s[i] = &ts[i];
    qsort(s, n, sizeof *s, cmp_offset);
    int rc = 0;
    for (uint64_t i = 1; i < n && !rc; i++)
        if (s[i - 1]->offset + s[i - 1]->nbytes > s[i]->offset)
            rc = pt_errf(c->err, "%s: tensors '%s' and '%s' overlap (offsets %llu+%llu and %llu)",
                         c->name, s[i - 1]->name, s[i]->name, (unsigned long long)s[i - 1]->offset,
                         (unsigned long long)s[i - 1]->nbytes, (unsigned long long)s[i]->offset);
    free(s);
    return rc;
}

/* Parse one file image. For file index 0 the metadata becomes ctx->kv; for
 * later splits it is parsed (validated) into a temporary array and the split
 * keys are returned through split_no / split_count (-1 when absent). */
static int parse_file(gguf_ctx *ctx, gguf_file *f, uint32_t file_idx, gguf_tensor **tensors_out,
                      uint64_t *n_tensors_out, int64_t *split_no, int64_t *split_count,
                      int64_t *split_tensors, pt_err *err) {
    cursor c = {.p = f->map, .len = f->size, .pos = 0, .name = f->path, .err = err, .ctx = ctx};
    char magic[4];
    if (f->size < 4 || memcmp(f->map, "GGUF", 4) != 0) {
        if (f->size < 4)
            return pt_errf(err, "%s: not a GGUF file: %llu bytes, too short for the header",
                           f->path, (unsigned long long)f->size);
        return pt_errf(err, "%s: not a GGUF file: magic is %02x %02x %02x %02x, expected 'GGUF'",
                       f->path, f->map[0], f->map[1], f->map[2], f->map[3]);
    }
    rd(&c, magic, 4, "magic");
    uint32_t version;
    if (rd_u32(&c, &version, "version")) return -1;
    if (version == 0x03000000u || version == 0x02000000u)
        return pt_errf(err, "%s: big-endian GGUF (version 0x%08x) is not supported", f->path,
                       version);
    if (version != 2 && version != 3)
        return pt_errf(err, "%s: unsupported GGUF version %u, expected 2 or 3", f->path, version);
    int64_t n_tensors, n_kv;
    if (rd(&c, &n_tensors, 8, "tensor count") || rd(&c, &n_kv, 8, "metadata count")) return -1;
    if (n_kv < 0 || (uint64_t)n_kv > left(&c) / 13)
        return pt_errf(err, "%s: absurd metadata count %lld for a file with %llu bytes left",
                       f->path, (long long)n_kv, (unsigned long long)left(&c));
    if (n_tensors < 0 || (uint64_t)n_tensors > left(&c) / 32)
        return pt_errf(err, "%s: absurd tensor count %lld for a file with %llu bytes left", f->path,
                       (long long)n_tensors, (unsigned long long)left(&c));
    if (file_idx == 0) ctx->version = version;

    gguf_kv *kv = arena_alloc(ctx, (uint64_t)n_kv * sizeof(gguf_kv) + 1);
    if (!kv) return pt_errf(err, "%s: out of memory", f->path);
    if (parse_kvs(&c, kv, (uint64_t)n_kv)) return -1;

    /* Work on a temporary context view so the lookup helpers apply to this file. */
    gguf_ctx view = *ctx;
    view.kv = kv;
    view.n_kv = (uint64_t)n_kv;
    if (check_duplicate_keys(&c, &view)) return -1;

    uint64_t alignment = GGUF_DEFAULT_ALIGNMENT;
    const gguf_kv *ak = gguf_find(&view, "general.alignment");
    if (ak) {
        int64_t a;
        if (ak->val.type == GGUF_BOOL || gguf_value_i64(&ak->val, &a) || a <= 0 || a > (1 << 30) ||
            (a & (a - 1)) != 0)
            return pt_errf(err, "%s: general.alignment must be a power of two up to 2^30", f->path);
        alignment = (uint64_t)a;
    }
    if (file_idx == 0) {
        ctx->kv = kv;
        ctx->n_kv = (uint64_t)n_kv;
        ctx->alignment = alignment;
    } else if (alignment != ctx->alignment) {
        return pt_errf(err, "%s: alignment %llu differs from the first split's %llu", f->path,
                       (unsigned long long)alignment, (unsigned long long)ctx->alignment);
    }
    *split_no = *split_count = *split_tensors = -1;
    const gguf_kv *sk;
    if ((sk = gguf_find(&view, "split.no")) && gguf_value_i64(&sk->val, split_no))
        return pt_errf(err, "%s: split.no is not an integer", f->path);
    if ((sk = gguf_find(&view, "split.count")) && gguf_value_i64(&sk->val, split_count))
        return pt_errf(err, "%s: split.count is not an integer", f->path);
    if ((sk = gguf_find(&view, "split.tensors.count")) && gguf_value_i64(&sk->val, split_tensors))
        return pt_errf(err, "%s: split.tensors.count is not an integer", f->path);

    gguf_tensor *ts = arena_alloc(ctx, (uint64_t)n_tensors * sizeof(gguf_tensor) + 1);
    if (!ts) return pt_errf(err, "%s: out of memory", f->path);
    memset(ts, 0, (uint64_t)n_tensors * sizeof(gguf_tensor));
    ctx->alignment = alignment; /* parse_tensor_info checks offsets against it */
    for (int64_t i = 0; i < n_tensors; i++) {
        if (parse_tensor_info(&c, ctx, &ts[i], (uint64_t)i)) return -1;
        ts[i].file = file_idx;
    }
    f->data_offset = pt_align_up(c.pos, alignment);
    if (n_tensors > 0 && f->data_offset > f->size)
        return pt_errf(err,
                       "%s: truncated file: data section would start at %llu, file has %llu bytes",
                       f->path, (unsigned long long)f->data_offset, (unsigned long long)f->size);
    if (check_tensor_ranges(&c, ctx, f, ts, (uint64_t)n_tensors)) return -1;
    *tensors_out = ts;
    *n_tensors_out = (uint64_t)n_tensors;
    return 0;
}

/* Build the by-name index and reject duplicate tensor names. */
static int index_names(gguf_ctx *ctx, pt_err *err) {
    ctx->by_name = arena_alloc(ctx, ctx->n_tensors * sizeof(uint32_t) + 1);
    if (!ctx->by_name) return pt_errf(err, "%s: out of memory", ctx->files[0].path);
    if (ctx->n_tensors > UINT32_MAX)
        return pt_errf(err, "%s: too many tensors", ctx->files[0].path);
    for (uint64_t i = 0; i < ctx->n_tensors; i++)
        ctx->by_name[i] = (uint32_t)i;
    os_qsort_ctx(ctx->by_name, ctx->n_tensors, sizeof(uint32_t), cmp_tensor_name, ctx);
    for (uint64_t i = 1; i < ctx->n_tensors; i++) {
        const char *a = ctx->tensors[ctx->by_name[i - 1]].name,
                   *b = ctx->tensors[ctx->by_name[i]].name;
        if (strcmp(a, b) == 0)
            return pt_errf(err, "%s: tensor name '%s' appears more than once", ctx->files[0].path,
                           a);
    }
    return 0;
}

/* ===== Opening ===== */

static gguf_ctx *ctx_new(uint32_t n_files) {
    gguf_ctx *ctx = calloc(1, sizeof *ctx);
    if (!ctx) return NULL;
    ctx->files = calloc(n_files, sizeof(gguf_file));
    if (!ctx->files) {
        free(ctx);
        return NULL;
    }
    for (uint32_t i = 0; i < n_files; i++)
        ctx->files[i].fd = -1;
    ctx->alignment = GGUF_DEFAULT_ALIGNMENT;
    return ctx;
}

void gguf_close(gguf_ctx *ctx) {
    if (!ctx) return;
    for (uint32_t i = 0; i < ctx->n_files; i++) {
        gguf_file *f = &ctx->files[i];
        if (f->mapped && f->map) munmap((void *)f->map, f->size);
        if (f->fd >= 0) close(f->fd);
        free(f->path);
    }
    free(ctx->files);
    free(ctx->tensors);
    arena_free(ctx);
    free(ctx);
}

gguf_ctx *gguf_parse(const void *buf, uint64_t len, const char *name, pt_err *err) {
    gguf_ctx *ctx = ctx_new(1);
    if (!ctx) {
        pt_errf(err, "%s: out of memory", name);
        return NULL;
    }
    ctx->n_files = 1;
    gguf_file *f = &ctx->files[0];
    f->path = strdup(name);
    f->map = buf;
    f->size = len;
    ctx->total_size = len;
    gguf_tensor *ts;
    uint64_t n;
    int64_t sno, scount, stens;
    if (!f->path || parse_file(ctx, f, 0, &ts, &n, &sno, &scount, &stens, err)) goto fail;
    ctx->tensors = malloc(n * sizeof *ts + 1);
    if (!ctx->tensors) goto fail;
    memcpy(ctx->tensors, ts, n * sizeof *ts);
    ctx->n_tensors = n;
    if (index_names(ctx, err)) goto fail;
    return ctx;
fail:
    if (err && !err->msg[0]) pt_errf(err, "%s: out of memory", name);
    gguf_close(ctx);
    return NULL;
}

static int map_file(gguf_file *f, const char *path, pt_err *err) {
    f->path = strdup(path);
    if (!f->path) return pt_errf(err, "%s: out of memory", path);
    f->fd = open(path, O_RDONLY | O_CLOEXEC);
    if (f->fd < 0) return pt_errf(err, "%s: cannot open: %s", path, strerror(errno));
    struct stat st;
    if (fstat(f->fd, &st) != 0) return pt_errf(err, "%s: cannot stat: %s", path, strerror(errno));
    if (!S_ISREG(st.st_mode)) return pt_errf(err, "%s: not a regular file", path);
    f->size = (uint64_t)st.st_size;
    if (f->size == 0) return pt_errf(err, "%s: not a GGUF file: the file is empty", path);
    void *m = mmap(NULL, f->size, PROT_READ, MAP_SHARED, f->fd, 0);
    if (m == MAP_FAILED) return pt_errf(err, "%s: cannot map: %s", path, strerror(errno));
    f->map = m;
    f->mapped = 1;
    return 0;
}

/* If path ends in -NNNNN-of-MMMMM.gguf, return the length of the prefix before
 * the dash and set no/count; else return -1. */
static long split_name(const char *path, int *no, int *count) {
    size_t n = strlen(path);
    const char *suffix = "-00000-of-00000.gguf";
    size_t sl = strlen(suffix);
    if (n < sl) return -1;
    const char *s = path + n - sl;
    int a, b;
    char tail[8];
    if (sscanf(s, "-%5d-of-%5d%7s", &a, &b, tail) != 3 || strcmp(tail, ".gguf") != 0) return -1;
    for (int i = 1; i <= 5; i++)
        if (s[i] < '0' || s[i] > '9' || s[i + 9] < '0' || s[i + 9] > '9') return -1;
    *no = a;
    *count = b;
    return (long)(n - sl);
}

gguf_ctx *gguf_open(const char *path, pt_err *err) {
    int no = 0, count = 0;
    long plen = split_name(path, &no, &count);
    char first[PT_PATH_MAX];
    if (plen >= 0 && no != 1) {
        /* Opening any part of a split model opens the whole set from part 1. */
        snprintf(first, sizeof first, "%.*s-00001-of-%05d.gguf", (int)plen, path, count);
        path = first;
    }
    uint32_t max_files = plen >= 0 && count > 1 ? (uint32_t)PT_MIN(count, GGUF_MAX_SPLITS) : 1;
    gguf_ctx *ctx = ctx_new(max_files);
    if (!ctx) {
        pt_errf(err, "%s: out of memory", path);
        return NULL;
    }
    uint64_t total_n = 0;
    int64_t sno, scount, stens;
    gguf_tensor *ts;
    uint64_t n;
    ctx->n_files = 1;
    if (map_file(&ctx->files[0], path, err)) goto fail;
    if (parse_file(ctx, &ctx->files[0], 0, &ts, &n, &sno, &scount, &stens, err)) goto fail;
    ctx->total_size = ctx->files[0].size;

    int64_t n_splits = scount > 0 ? scount : 1;
    if (n_splits > 1) {
        if (plen < 0) goto fail_msg_name;
        if (n_splits != count || sno != 0) {
            pt_errf(err, "%s: split.no=%lld split.count=%lld do not match the file name", path,
                    (long long)sno, (long long)scount);
            goto fail;
        }
    }
    /* Gather tensors of all parts into one array. */
    gguf_tensor **part_ts = calloc((size_t)n_splits, sizeof *part_ts);
    uint64_t *part_n = calloc((size_t)n_splits, sizeof *part_n);
    if (!part_ts || !part_n) {
        free(part_ts);
        free(part_n);
        pt_errf(err, "%s: out of memory", path);
        goto fail;
    }
    part_ts[0] = ts;
    part_n[0] = n;
    total_n = n;
    for (int64_t i = 1; i < n_splits; i++) {
        char p[PT_PATH_MAX];
        snprintf(p, sizeof p, "%.*s-%05lld-of-%05lld.gguf", (int)plen, path, (long long)i + 1,
                 (long long)n_splits);
        ctx->n_files = (uint32_t)i + 1;
        int64_t no2, count2, tens2;
        if (map_file(&ctx->files[i], p, err) ||
            parse_file(ctx, &ctx->files[i], (uint32_t)i, &part_ts[i], &part_n[i], &no2, &count2,
                       &tens2, err)) {
            free(part_ts);
            free(part_n);
            goto fail;
        }
        if (no2 != i || count2 != n_splits) {
            pt_errf(err, "%s: split.no=%lld split.count=%lld, expected %lld and %lld", p,
                    (long long)no2, (long long)count2, (long long)i, (long long)n_splits);
            free(part_ts);
            free(part_n);
            goto fail;
        }
        ctx->total_size += ctx->files[i].size;
        total_n += part_n[i];
    }
    if (n_splits > 1 && stens >= 0 && (uint64_t)stens != total_n) {
        pt_errf(err, "%s: split.tensors.count is %lld but the %lld parts hold %llu tensors", path,
                (long long)stens, (long long)n_splits, (unsigned long long)total_n);
        free(part_ts);
        free(part_n);
        goto fail;
    }
    ctx->tensors = malloc(total_n * sizeof(gguf_tensor) + 1);
    if (!ctx->tensors) {
        free(part_ts);
        free(part_n);
        pt_errf(err, "%s: out of memory", path);
        goto fail;
    }
    for (int64_t i = 0, k = 0; i < n_splits; i++) {
        memcpy(ctx->tensors + k, part_ts[i], part_n[i] * sizeof(gguf_tensor));
        k += (int64_t)part_n[i];
    }
    ctx->n_tensors = total_n;
    free(part_ts);
    free(part_n);
    if (index_names(ctx, err)) goto fail;
    return ctx;

fail_msg_name:
    pt_errf(err, "%s: split.count is %lld but the file name does not end in -NNNNN-of-NNNNN.gguf",
            path, (long long)scount);
fail:
    gguf_close(ctx);
    return NULL;
}
