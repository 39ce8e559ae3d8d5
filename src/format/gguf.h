/* gguf.h — reading and writing GGUF files (the format llama.cpp models ship in).
 *
 * On-disk layout (little-endian; versions 2 and 3):
 *   "GGUF" | u32 version | i64 n_tensors | i64 n_kv
 *   n_kv    x  key: string, value type: i32, value
 *   n_tensors x name: string, n_dims: u32 (1..4), ne: i64[n_dims], type: i32, offset: u64
 *   padding to `general.alignment` (default 32) | data section (tensor offsets are
 *   relative to its start, each aligned)
 *   string = u64 length + bytes (no NUL); array = i32 element type + u64 count + elements.
 *
 * The reader maps each file read-only and validates everything before exposing
 * it: every file is hostile input. Counts are bounded by the bytes left in the
 * file before anything is allocated, sizes are overflow-checked, each tensor must
 * be a whole number of blocks of a known type, aligned, inside the file and not
 * overlapping another. Errors name the file, what was found and what was expected.
 *
 * Split models (`NAME-00001-of-00003.gguf`, keys split.no/split.count) are opened
 * as one model: metadata comes from the first file, tensors from all of them.
 * Strings returned by the reader point into the mapping (not NUL-terminated)
 * except tensor names, which are copied and NUL-terminated.
 */
#ifndef PT_GGUF_H
#define PT_GGUF_H

#include <stdint.h>

#include "common.h"

enum {
    GGUF_UINT8 = 0,
    GGUF_INT8 = 1,
    GGUF_UINT16 = 2,
    GGUF_INT16 = 3,
    GGUF_UINT32 = 4,
    GGUF_INT32 = 5,
    GGUF_FLOAT32 = 6,
    GGUF_BOOL = 7,
    GGUF_STRING = 8,
    GGUF_ARRAY = 9,
    GGUF_UINT64 = 10,
    GGUF_INT64 = 11,
    GGUF_FLOAT64 = 12,
    GGUF_NTYPES = 13
};

#define GGUF_MAX_DIMS 4
#define GGUF_DEFAULT_ALIGNMENT 32

typedef struct gguf_str {
    const char *ptr; /* not NUL-terminated */
    uint64_t len;
} gguf_str;

typedef struct gguf_value gguf_value;
struct gguf_value {
    uint32_t type; /* GGUF_* */
    union {
        uint64_t u64; /* any unsigned integer type */
        int64_t i64;  /* any signed integer type */
        double f64;   /* FLOAT32 or FLOAT64 */
        int b;        /* BOOL */
        gguf_str str; /* STRING */
        struct {
            uint32_t type;           /* element type */
            uint64_t n;              /* element count */
            const uint8_t *data;     /* raw little-endian elements (fixed-size types) */
            const gguf_value *items; /* parsed elements (STRING and ARRAY types) */
        } arr;
    };
};

typedef struct gguf_kv {
    gguf_str key;
    gguf_value val;
} gguf_kv;

typedef struct gguf_tensor {
    const char *name;          /* NUL-terminated copy */
    uint32_t type;             /* ggml type id (QT_*) */
    uint32_t n_dims;           /* 1..4 */
    int64_t ne[GGUF_MAX_DIMS]; /* ne[0] is contiguous; unused dims are 1 */
    uint64_t offset;           /* relative to its file's data section */
    uint64_t nbytes;           /* exact size of the data */
    uint32_t file;             /* index into gguf_ctx.files (split models) */
    uint64_t file_offset;      /* absolute offset of the data in that file */
    const uint8_t *data;       /* the mapped bytes */
} gguf_tensor;

typedef struct gguf_file {
    char *path;
    int fd;               /* -1 for in-memory buffers */
    const uint8_t *map;   /* whole file, read-only */
    uint64_t size;        /* bytes */
    uint64_t data_offset; /* start of the data section */
    int mapped;           /* 1 when map must be munmap'ed */
} gguf_file;

typedef struct gguf_ctx {
    uint32_t version;
    uint64_t alignment;
    uint64_t n_kv;
    gguf_kv *kv; /* [n_kv] metadata of the first file */
    uint64_t n_tensors;
    gguf_tensor *tensors; /* [n_tensors], in file order (file 0 first) */
    uint32_t n_files;
    gguf_file *files;    /* [n_files] */
    uint64_t total_size; /* bytes of all files */
    void *arena;         /* internal allocations */
    uint32_t *by_name;   /* tensor indices sorted by name */
} gguf_ctx;

/* ===== Reader ===== */

/* Open a GGUF file (or the whole set when it is part of a split model).
 * Returns NULL with err set on any problem. */
gguf_ctx *gguf_open(const char *path, pt_err *err);

/* Parse a GGUF image held in memory (not copied: buf must outlive the ctx).
 * `name` is used in error messages. Split keys are not followed. */
gguf_ctx *gguf_parse(const void *buf, uint64_t len, const char *name, pt_err *err);

void gguf_close(gguf_ctx *ctx);

/* Metadata lookup; NULL when absent. */
const gguf_kv *gguf_find(const gguf_ctx *ctx, const char *key);

/* Typed getters: 0 on success, -1 with err set when the key is missing or its
 * value cannot be represented in the requested type (wrong type, out of range). */
int gguf_get_u32(const gguf_ctx *ctx, const char *key, uint32_t *out, pt_err *err);
int gguf_get_u64(const gguf_ctx *ctx, const char *key, uint64_t *out, pt_err *err);
int gguf_get_i64(const gguf_ctx *ctx, const char *key, int64_t *out, pt_err *err);
int gguf_get_f32(const gguf_ctx *ctx, const char *key, float *out, pt_err *err);
int gguf_get_bool(const gguf_ctx *ctx, const char *key, int *out, pt_err *err);
/* Copies the string NUL-terminated into buf (cap bytes); -1 if too long. */
int gguf_get_str(const gguf_ctx *ctx, const char *key, char *buf, uint64_t cap, pt_err *err);

/* Value conversions usable on array items as well. 0 on success. */
int gguf_value_i64(const gguf_value *v, int64_t *out);
int gguf_value_f64(const gguf_value *v, double *out);
/* Element i of an array of fixed-size numeric or bool elements. 0 on success. */
int gguf_array_i64(const gguf_value *arr, uint64_t i, int64_t *out);
int gguf_array_f64(const gguf_value *arr, uint64_t i, double *out);

/* Size in bytes of one element of a fixed-size value type, 0 for STRING/ARRAY. */
uint32_t gguf_type_size(uint32_t type);
const char *gguf_type_name(uint32_t type);

/* Tensor lookup by exact name; NULL when absent. */
const gguf_tensor *gguf_find_tensor(const gguf_ctx *ctx, const char *name);

/* Number of elements of a tensor. */
int64_t gguf_nelements(const gguf_tensor *t);

/* ===== Writer =====
 * Produces files llama.cpp's strict reader accepts: tensor data laid out in the
 * order tensors were added, each at the next multiple of the alignment, the file
 * padded to the alignment. Writing goes to PATH.tmp and is renamed into place by
 * gguf_writer_finish, so a crash never leaves a truncated file under PATH.
 *
 *   w = gguf_writer_new(32);
 *   gguf_writer_kv_str(w, "general.architecture", "glm-dsa"); ...
 *   gguf_writer_add_tensor(w, "token_embd.weight", QT_Q8_0, 2, ne, err); ...
 *   gguf_writer_begin(w, path, err);
 *   gguf_writer_write(w, bytes, n, err) ...   (all tensor data, in order, any chunking)
 *   gguf_writer_finish(w, err); gguf_writer_free(w);
 */
typedef struct gguf_writer gguf_writer;

gguf_writer *gguf_writer_new(uint32_t alignment);
void gguf_writer_free(gguf_writer *w);

/* Metadata setters return 0, or -1 (err) on a duplicate key or allocation failure. */
int gguf_writer_kv_u32(gguf_writer *w, const char *key, uint32_t v, pt_err *err);
int gguf_writer_kv_i32(gguf_writer *w, const char *key, int32_t v, pt_err *err);
int gguf_writer_kv_u64(gguf_writer *w, const char *key, uint64_t v, pt_err *err);
int gguf_writer_kv_f32(gguf_writer *w, const char *key, float v, pt_err *err);
int gguf_writer_kv_bool(gguf_writer *w, const char *key, int v, pt_err *err);
int gguf_writer_kv_str(gguf_writer *w, const char *key, const char *v, pt_err *err);
/* Array of fixed-size elements of `type` (raw little-endian data, n elements). */
int gguf_writer_kv_array(gguf_writer *w, const char *key, uint32_t type, const void *data,
                         uint64_t n, pt_err *err);
int gguf_writer_kv_str_array(gguf_writer *w, const char *key, const char *const *v, uint64_t n,
                             pt_err *err);
/* Copy one metadata pair from a parsed file (any type, nested arrays included). */
int gguf_writer_kv_copy(gguf_writer *w, const gguf_kv *kv, pt_err *err);

/* Declare the next tensor; its data is written later, in declaration order. */
int gguf_writer_add_tensor(gguf_writer *w, const char *name, uint32_t type, uint32_t n_dims,
                           const int64_t *ne, pt_err *err);

int gguf_writer_begin(gguf_writer *w, const char *path, pt_err *err);
int gguf_writer_write(gguf_writer *w, const void *data, uint64_t n, pt_err *err);
/* Like gguf_writer_write, but the n bytes are not written: the writer seeks over
 * them, leaving a hole (reads as zeros). Skipping all the data makes a sparse
 * file with a real header at the real size, e.g. the shape of a 244 GB model
 * in a few MB of disk (tools/mkmodel --header-only). */
int gguf_writer_skip(gguf_writer *w, uint64_t n, pt_err *err);
int gguf_writer_finish(gguf_writer *w, pt_err *err);

#endif
