/* qtraits.c — the table of ggml tensor types (name, block size, block bytes,
 * activation type for dot products) and exact fp16/bf16 conversions.
 *
 * This file has no dependencies beyond libc so that the GGUF parser (and its
 * fuzz target) can validate tensor sizes without pulling in the kernels.
 */
#include <string.h>

#include "common.h"
#include "quant.h"

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

/* ===== fp16 / bf16 ===== */

static inline uint32_t f32_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}
static inline float bits_f32(uint32_t u) {
    float f;
    memcpy(&f, &u, 4);
    return f;
}

float qt_f16_to_f32(pt_f16 h) {
    uint32_t sign = (uint32_t)(h & 0x8000) << 16;
    uint32_t exp = (h >> 10) & 0x1f;
    uint32_t man = h & 0x3ff;
    if (exp == 0x1f) return bits_f32(sign | 0x7f800000u | (man << 13)); /* inf / nan */
    if (exp == 0) {
        if (man == 0) return bits_f32(sign);
        /* subnormal: man * 2^-24 exactly */
        float v = (float)man * 5.9604644775390625e-8f;
        return sign ? -v : v;
    }
    return bits_f32(sign | ((exp + 112) << 23) | (man << 13));
}

pt_f16 qt_f32_to_f16(float f) {
    uint32_t x = f32_bits(f);
    uint32_t sign = (x >> 16) & 0x8000;
    uint32_t ax = x & 0x7fffffffu;
    if (ax >= 0x7f800000u) /* inf or nan */
        return (pt_f16)(sign | 0x7c00 | (ax > 0x7f800000u ? 0x200 : 0));
    if (ax >= 0x477ff000u) return (pt_f16)(sign | 0x7c00); /* rounds to >= 65520: inf */
    if (ax < 0x38800000u) {
        /* result is subnormal or zero: value / 2^-24, rounded to nearest even */
        float v = bits_f32(ax) * 16777216.0f; /* exact scaling by 2^24 */
        uint32_t m = (uint32_t)v;
        float frac = v - (float)m;
        if (frac > 0.5f || (frac == 0.5f && (m & 1))) m++;
        return (pt_f16)(sign | m);
    }
    uint32_t e = ((ax >> 23) - 112) << 10;
    uint32_t m = (ax >> 13) & 0x3ff;
    uint32_t rest = ax & 0x1fff;
    uint32_t h = e | m;
    if (rest > 0x1000 || (rest == 0x1000 && (h & 1))) h++; /* carry may bump exponent: correct */
    return (pt_f16)(sign | h);
}

float qt_bf16_to_f32(pt_bf16 h) { return bits_f32((uint32_t)h << 16); }

pt_bf16 qt_f32_to_bf16(float f) {
    uint32_t u = f32_bits(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (pt_bf16)((u >> 16) | 64); /* quiet nan */
    return (pt_bf16)((u + (0x7fff + ((u >> 16) & 1))) >> 16);
}
