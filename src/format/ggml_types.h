/* ggml_types.h — the ggml tensor types as the file formats know them: the
 * type ids GGUF stores (they never change) and, per type, its name, block size
 * and block bytes, so the GGUF parser can validate every tensor's size without
 * the kernels. The kernels (kernels/quant.h) add the arithmetic; the table also
 * records which activation type a type's dot product uses and whether the
 * scalar reference decodes it, so that binding can refuse a type early.
 */
#ifndef PT_FORMAT_GGML_TYPES_H
#define PT_FORMAT_GGML_TYPES_H

#include <stdint.h>

enum {
    QT_F32 = 0,
    QT_F16 = 1,
    QT_Q4_0 = 2,
    QT_Q4_1 = 3,
    QT_Q5_0 = 6,
    QT_Q5_1 = 7,
    QT_Q8_0 = 8,
    QT_Q8_1 = 9,
    QT_Q2_K = 10,
    QT_Q3_K = 11,
    QT_Q4_K = 12,
    QT_Q5_K = 13,
    QT_Q6_K = 14,
    QT_Q8_K = 15,
    QT_IQ2_XXS = 16,
    QT_IQ2_XS = 17,
    QT_IQ3_XXS = 18,
    QT_IQ1_S = 19,
    QT_IQ4_NL = 20,
    QT_IQ3_S = 21,
    QT_IQ2_S = 22,
    QT_IQ4_XS = 23,
    QT_I8 = 24,
    QT_I16 = 25,
    QT_I32 = 26,
    QT_I64 = 27,
    QT_F64 = 28,
    QT_IQ1_M = 29,
    QT_BF16 = 30,
    QT_TQ1_0 = 34,
    QT_TQ2_0 = 35,
    QT_MXFP4 = 39,
    QT_COUNT = 40 /* one past the largest id we know */
};

/* Static facts about one type id. */
typedef struct qt_traits {
    const char *name; /* as ggml prints it: "Q4_K", "IQ2_XXS", "F32" */
    int32_t block;    /* weights per block */
    int32_t bytes;    /* bytes per block */
    int32_t act_type; /* type the activations are converted to for qt_dot; -1: no dot */
    int32_t decodes;  /* 1 when qt_dequant_ref supports the type */
} qt_traits;

/* Traits of `type`, or NULL for an id petrel does not know. */
const qt_traits *qt_get(uint32_t type);

/* Name of `type` ("unknown(N)" is not returned: unknown ids give "?"). */
const char *qt_name(uint32_t type);

/* Bytes of n weights of `type`. Returns 0 on success; -1 when the type is
 * unknown, n is not a whole number of blocks, or the size overflows. */
int qt_row_bytes(uint32_t type, int64_t n, uint64_t *out);

#endif
