/* f16.c — exact fp16/bf16 conversions (the type table itself is
 * format knowledge: format/ggml_types.c). */
#include <string.h>

#include "common.h"
#include "quant.h"

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

float qt_bf16_to_f32(pt_bf16 h) {
    return bits_f32((uint32_t)h << 16);
}

pt_bf16 qt_f32_to_bf16(float f) {
    uint32_t u = f32_bits(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (pt_bf16)((u >> 16) | 64); /* quiet nan */
    return (pt_bf16)((u + (0x7fff + ((u >> 16) & 1))) >> 16);
}
