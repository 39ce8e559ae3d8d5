/* loader.h — helpers every per-architecture model binder shares: typed reads
 * of `<arch>.*` hyper-parameters (scalars, per-layer arrays) with defaults,
 * and tensor binding by name with the shape the hyper-parameters imply.
 *
 * A binder keeps one ld_ctx for the whole load. The first problem found is
 * recorded in it (rc = -1, err naming the file, the key or tensor, what was
 * found and what was expected) and every later call becomes a no-op, so a
 * binder can bind a whole layer and check once. Nothing here reads tensor
 * data: binding records pointers into the mapping.
 */
#ifndef PT_MODEL_LOADER_H
#define PT_MODEL_LOADER_H

#include <stdint.h>

#include "format/gguf.h"
#include "nn/matmul.h"

/* A block_count above this is refused as implausible: by every family (fam_block_count) and
 * by the model info that inspect and the expert store read (model/info.c). */
#define LD_MAX_LAYERS 4096

typedef struct ld_ctx {
    const gguf_ctx *g;
    const char *arch; /* key prefix: general.architecture */
    const char *path; /* first file, for messages */
    pt_err *err;
    int rc; /* 0, or -1 once a problem has been reported */
} ld_ctx;

/* `<arch>.key` as an integer in 0..2^30. Absent: required -> error, else def. */
int ld_u32(ld_ctx *L, const char *key, int *out, int required, int def);
/* `<arch>.key` as a float. Absent: required -> error, else def. */
int ld_f32(ld_ctx *L, const char *key, float *out, int required, float def);
/* `<arch>.key` as a bool. Absent: def. */
int ld_bool(ld_ctx *L, const char *key, int *out, int def);
/* Per-layer integer: `<arch>.key` is either one integer (same for every layer)
 * or an array of n integers. out[n]. Absent: required -> error, else def. */
int ld_u32_layers(ld_ctx *L, const char *key, int n, int *out, int required, int def);
/* Per-layer bool array `<arch>.key` of n entries (a shorter array repeats, as
 * llama.cpp's pattern keys do). out[n]. Absent: every entry def. */
int ld_bool_layers(ld_ctx *L, const char *key, int n, uint8_t *out, int def);

/* Tensor `name` with n_dims dims {ne0, ne1, ne2} (< 0: any). Missing: NULL,
 * an error only when required. */
const gguf_tensor *ld_tensor(ld_ctx *L, const char *name, int n_dims, int64_t ne0, int64_t ne1,
                             int64_t ne2, int required);
/* F32 vector of n values (norm gains, scales). */
const float *ld_vec(ld_ctx *L, const char *name, int64_t n, int required);
/* 2-D weight n_in -> n_out in a type petrel can compute with; data NULL when absent. */
mm_weight ld_weight(ld_ctx *L, const char *name, int64_t n_in, int64_t n_out, int required);
/* Stack of n 2-D weights n_in -> n_out (routed experts, per-head matrices). */
const gguf_tensor *ld_stack(ld_ctx *L, const char *name, int64_t n_in, int64_t n_out, int64_t n,
                            int required);

/* A 2-D tensor as a weight (zeroed when t is NULL). */
mm_weight ld_as_weight(const gguf_tensor *t);
/* Slice i of a stack of 2-D weights. */
mm_weight ld_slice(const gguf_tensor *t, int i);
/* One slice of a stacked tensor (an expert) whose bytes are at `data`: in the
 * mapping or in an expert-cache slot. */
mm_weight ld_slice_at(const gguf_tensor *t, const uint8_t *data);

#endif
