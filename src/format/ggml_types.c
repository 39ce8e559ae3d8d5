/* ggml_types.c — the table of ggml tensor types (see ggml_types.h). No
 * dependencies beyond libc and common.h, so the GGUF parser and its fuzz
 * target validate tensor sizes without the kernels. */
#include "format/ggml_types.h"

#include <stddef.h>

#include "common.h"

#define T(id, nm, blk, by, act, dec) [id] = {nm, blk, by, act, dec}

static const qt_traits traits[QT_COUNT] = {
    T(QT_F32, "F32", 1, 4, QT_F32, 1),
    T(QT_F16, "F16", 1, 2, QT_F16, 1),
    T(QT_BF16, "BF16", 1, 2, QT_BF16, 1),
    T(QT_Q4_0, "Q4_0", 32, 18, QT_Q8_0, 1),
    T(QT_Q4_1, "Q4_1", 32, 20, QT_Q8_1, 1),
    T(QT_Q5_0, "Q5_0", 32, 22, QT_Q8_0, 1),
    T(QT_Q5_1, "Q5_1", 32, 24, QT_Q8_1, 1),
    T(QT_Q8_0, "Q8_0", 32, 34, QT_Q8_0, 1),
    T(QT_Q8_1, "Q8_1", 32, 36, -1, 1),
    T(QT_Q2_K, "Q2_K", 256, 84, QT_Q8_K, 1),
    T(QT_Q3_K, "Q3_K", 256, 110, QT_Q8_K, 1),
    T(QT_Q4_K, "Q4_K", 256, 144, QT_Q8_K, 1),
    T(QT_Q5_K, "Q5_K", 256, 176, QT_Q8_K, 1),
    T(QT_Q6_K, "Q6_K", 256, 210, QT_Q8_K, 1),
    T(QT_Q8_K, "Q8_K", 256, 292, -1, 1),
    T(QT_IQ2_XXS, "IQ2_XXS", 256, 66, QT_Q8_K, 1),
    T(QT_IQ2_XS, "IQ2_XS", 256, 74, QT_Q8_K, 1),
    T(QT_IQ3_XXS, "IQ3_XXS", 256, 98, QT_Q8_K, 1),
    T(QT_IQ1_S, "IQ1_S", 256, 50, QT_Q8_K, 1),
    T(QT_IQ4_NL, "IQ4_NL", 32, 18, QT_Q8_0, 1),
    T(QT_IQ3_S, "IQ3_S", 256, 110, QT_Q8_K, 1),
    T(QT_IQ2_S, "IQ2_S", 256, 82, QT_Q8_K, 1),
    T(QT_IQ4_XS, "IQ4_XS", 256, 136, QT_Q8_K, 1),
    T(QT_I8, "I8", 1, 1, -1, 0),
    T(QT_I16, "I16", 1, 2, -1, 0),
    T(QT_I32, "I32", 1, 4, -1, 0),
    T(QT_I64, "I64", 1, 8, -1, 0),
    T(QT_F64, "F64", 1, 8, -1, 0),
    T(QT_IQ1_M, "IQ1_M", 256, 56, QT_Q8_K, 1),
    T(QT_TQ1_0, "TQ1_0", 256, 54, -1, 0),
    T(QT_TQ2_0, "TQ2_0", 256, 66, -1, 0),
    T(QT_MXFP4, "MXFP4", 32, 17, QT_Q8_0, 1),
};

const qt_traits *qt_get(uint32_t type) {
    if (type >= QT_COUNT || traits[type].name == NULL) return NULL;
    return &traits[type];
}

const char *qt_name(uint32_t type) {
    const qt_traits *t = qt_get(type);
    return t ? t->name : "?";
}

int qt_row_bytes(uint32_t type, int64_t n, uint64_t *out) {
    const qt_traits *t = qt_get(type);
    if (!t || n < 0 || n % t->block != 0) return -1;
    return pt_mul_u64((uint64_t)(n / t->block), (uint64_t)t->bytes, out);
}
