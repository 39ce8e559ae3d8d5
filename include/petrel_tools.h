/* petrel_tools.h — the public interface of petrel's model tools: a GGUF
 * model's header (metadata, tensor types, the resident / routed-expert split)
 * and expert packs (write, find, verify). `petrel inspect`, `pack` and `verify`
 * use only this header and petrel.h; running a model is petrel.h's business.
 *
 * A pt_model is an opened GGUF file (all parts of a split model), validated as
 * hostile input; only its header is read, so opening a 244 GB model is
 * instant. Functions that can fail take an error buffer and return NULL / -1
 * after writing one line into it.
 */
#ifndef PETREL_TOOLS_H
#define PETREL_TOOLS_H

#include <stddef.h>
#include <stdint.h>

#include "petrel.h" /* PT_PATH_MAX */

typedef struct pt_model pt_model;

pt_model *pt_model_open(const char *path, char *err, size_t err_len);
void pt_model_close(pt_model *m);
/* The path of the model's first file (a split model's part 1). */
const char *pt_model_path(const pt_model *m);

/* ===== Metadata =====
 * Key/value pairs in file order. Value types are GGUF's. */
enum {
    PT_META_UINT8 = 0,
    PT_META_INT8 = 1,
    PT_META_UINT16 = 2,
    PT_META_INT16 = 3,
    PT_META_UINT32 = 4,
    PT_META_INT32 = 5,
    PT_META_FLOAT32 = 6,
    PT_META_BOOL = 7,
    PT_META_STRING = 8,
    PT_META_ARRAY = 9,
    PT_META_UINT64 = 10,
    PT_META_INT64 = 11,
    PT_META_FLOAT64 = 12
};

typedef struct pt_meta {
    const char *key; /* key_len bytes, not NUL-terminated */
    size_t key_len;
    int type;      /* PT_META_* */
    int elem_type; /* arrays: the elements' PT_META_* type */
    uint64_t n;    /* arrays: element count */
} pt_meta;

uint64_t pt_model_n_meta(const pt_model *m);
/* Pair i (< pt_model_n_meta). */
void pt_model_meta(const pt_model *m, uint64_t i, pt_meta *out);
/* Scalar value of pair i, or element j of its array (j < 0: the scalar itself).
 * Each returns 0, or -1 when the value is not of that kind: _str for strings
 * (s: len bytes, not NUL-terminated), _i64 for integers that fit and bools,
 * _u64 for unsigned integers, _f64 for floats. */
int pt_model_meta_str(const pt_model *m, uint64_t i, int64_t j, const char **s, size_t *len);
int pt_model_meta_i64(const pt_model *m, uint64_t i, int64_t j, int64_t *out);
int pt_model_meta_u64(const pt_model *m, uint64_t i, int64_t j, uint64_t *out);
int pt_model_meta_f64(const pt_model *m, uint64_t i, int64_t j, double *out);
/* "uint32", "string", ... ("?" for an unknown type) */
const char *pt_meta_type_name(int type);

/* ===== What streaming a model costs ===== */

#define PT_TYPE_COUNT 40       /* ggml tensor type ids are below this */
#define PT_NO_TYPE 0xffffffffu /* expert_types entry of a matrix a layer lacks */

/* "Q4_K", "IQ2_XXS", ... ("?" for an unknown id). */
const char *pt_type_name(uint32_t type);

typedef struct pt_layer_info {
    int32_t index;            /* N of blk.N */
    int is_mtp;               /* one of the trailing nextn/MTP blocks */
    uint32_t n_expert;        /* routed experts, 0 for a dense layer */
    uint64_t expert_bytes;    /* bytes of ONE routed expert (all its matrices) */
    uint64_t routed_bytes;    /* bytes of all routed experts of the layer */
    uint64_t resident_bytes;  /* bytes of the layer's other tensors */
    uint32_t expert_types[3]; /* ggml types of gate/up/down (gate_up in [0] when fused) */
    int fused_gate_up;
} pt_layer_info;

typedef struct pt_model_info {
    char arch[64];    /* general.architecture */
    char name[256];   /* general.name, or "" */
    uint32_t version; /* GGUF version */
    uint32_t n_files;
    uint64_t file_bytes; /* all files */
    uint64_t n_tensors;
    uint64_t tensor_bytes;                             /* all tensor data */
    uint64_t routed_bytes;                             /* routed-expert tensors (streamed) */
    uint64_t resident_bytes;                           /* everything else */
    uint64_t type_count[PT_TYPE_COUNT];                /* tensors of each ggml type */
    uint64_t type_bytes[PT_TYPE_COUNT];                /* their bytes */
    uint32_t n_layers;                                 /* blocks, MTP included */
    uint32_t n_nextn;                                  /* trailing MTP blocks */
    uint32_t n_expert, n_expert_used, n_expert_shared; /* from metadata (0 if absent) */
    uint32_t n_expert_max;                             /* most routed experts found in one layer */
    uint32_t n_moe_layers;      /* trunk layers (not MTP) with routed experts */
    uint64_t expert_bytes_max;  /* largest single expert */
    uint64_t touched_per_token; /* routed bytes one token reads: top-k experts of every trunk MoE
                                   layer */
    pt_layer_info *layers;      /* [n_layers] */
    /* Output rows (output.weight, else the tied token_embd.weight; 0 without either) and
     * tokens of tokenizer.ggml.tokens (0 without one). Rows past the vocabulary are padding: the
     * generation loop masks them out of sampling (petrel inspect reports them). */
    uint64_t n_output_rows, n_vocab_tokens;
} pt_model_info;

/* Fill *out (free with pt_model_info_free). 0, or -1 with err. */
int pt_model_info_get(const pt_model *m, pt_model_info *out, char *err, size_t err_len);
void pt_model_info_free(pt_model_info *info);

/* ===== Expert packs =====
 * Every routed expert as one 4 KiB-aligned record in a sidecar file, so the
 * engine reads an expert in one request (format: src/format/xpack.h). */

/* Bytes done of total, called a few times a second. */
typedef void (*pt_progress_fn)(uint64_t done, uint64_t total, void *user);

/* Where the engine looks for the model's pack: next to the model, then in
 * cache_dir (NULL: nowhere else). Writes up to two paths; returns how many. */
int pt_pack_candidates(const pt_model *m, const char *cache_dir, char out[2][PT_PATH_MAX]);

/* Write (or resume) the pack of m at path. stop_after >= 0 stops after that
 * many records as if killed (tests); -1 runs to the end. 0, or -1 with err. */
int pt_pack_write(const pt_model *m, const char *path, pt_progress_fn progress, void *user,
                  int64_t stop_after, char *err, size_t err_len);

/* A checksum table alone (MODEL.gguf.xsums: a pack without records, from a
 * full read of the model), for checking streamed reads of a model that has no
 * pack. Where the engine looks for it (like pt_pack_candidates), and writing
 * it: 0, or -1 with err. pt_pack_verify checks one against the model. */
int pt_table_candidates(const pt_model *m, const char *cache_dir, char out[2][PT_PATH_MAX]);
int pt_table_write(const pt_model *m, const char *path, pt_progress_fn progress, void *user,
                   char *err, size_t err_len);

/* Check the pack at path against m: header, the model's size, header hash,
 * mtime and inode, every record's checksum and bytes against the model's (a
 * full read of both files). Returns 0 with *n_records set when valid, -1 with
 * err naming what is wrong (stale, truncated, a bad record). */
int pt_pack_verify(const pt_model *m, const char *path, pt_progress_fn progress, void *user,
                   uint64_t *n_records, char *err, size_t err_len);

#endif
