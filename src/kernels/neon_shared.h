/* neon_shared.h — arm64 helpers shared by the dot-product kernels (dot_neon_body.h, compiled
 * at the NEON and dotprod levels) and the i8mm tile kernels (dot_i8mm.c), so that both read a
 * block's bits and fold the K-quants' float lanes one way: a block's scale as float, Q5_0/
 * Q5_1's fifth bits, Q4_K/Q5_K's packed six-bit scales and mins, the 256 int8 weights of a
 * Q4_K/Q5_K/Q6_K block in weight order, and the eight float lanes of the K-quants. Every
 * function is static inline and uses baseline Advanced SIMD only.
 */
#ifndef PT_NEON_SHARED_H
#define PT_NEON_SHARED_H
#include <arm_neon.h>
#include <string.h>

#include "kernels/qtypes.h"

static inline float f16(pt_f16 h) {
    __fp16 v;
    memcpy(&v, &h, sizeof v);
    return (float)v; /* exact, as qt_f16_to_f32 */
}

/* Q5_0: weight = (nibble | bit << 4) - 16; bit j of qh (little-endian) for weight j. */
static inline int8x16_t bits16(uint16_t b) {
    const uint8x16_t sel = {1, 2, 4, 8, 16, 32, 64, 128, 1, 2, 4, 8, 16, 32, 64, 128};
    const uint8x16_t v = vcombine_u8(vdup_n_u8((uint8_t)b), vdup_n_u8((uint8_t)(b >> 8)));
    return vreinterpretq_s8_u8(vtstq_u8(v, sel)); /* 0xFF where the bit is set */
}
/* Q5_0 / Q5_1's unsigned weights (0..31): nibble | bit << 4, bit j of qh for weight j. */
static inline void q5_weights(const uint8_t *qs, const uint8_t *qh, int8x16_t *w0, int8x16_t *w1) {
    const uint8x16_t q = vld1q_u8(qs);
    const uint16_t h0 = (uint16_t)(qh[0] | qh[1] << 8), h1 = (uint16_t)(qh[2] | qh[3] << 8);
    const int8x16_t lo = vreinterpretq_s8_u8(vandq_u8(q, vdupq_n_u8(15)));
    const int8x16_t hi = vreinterpretq_s8_u8(vshrq_n_u8(q, 4));
    *w0 = vorrq_s8(lo, vandq_s8(bits16(h0), vdupq_n_s8(16)));
    *w1 = vorrq_s8(hi, vandq_s8(bits16(h1), vdupq_n_s8(16)));
}

/* Q4_K/Q5_K scale and min j (6 bits each, packed in 12 bytes; see quant_ref.c). */
static inline void k4_scale_min(int j, const uint8_t *q, int *sc, int *mn) {
    if (j < 4) {
        *sc = q[j] & 63;
        *mn = q[j + 4] & 63;
    } else {
        *sc = (q[j + 4] & 0x0f) | ((q[j - 4] >> 6) << 4);
        *mn = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
    }
}

/* Q4_K and Q5_K's 256 unsigned weights (0..15, Q5_K 0..31) in order, wv[k] = weights
 * 16k..16k+15: weight 64c + l (l < 32) is the low nibble of qs[32c + l] (scale 2c),
 * 64c + 32 + l the high nibble (scale 2c + 1); Q5_K (qh != NULL) adds 16 for bit 2c
 * (2c + 1) of qh[l]. */
static inline __attribute__((always_inline)) void k45_weights(const uint8_t *qs, const uint8_t *qh,
                                                              int8x16_t *wv) {
    for (int c = 0; c < 4; c++) {
        for (int h = 0; h < 2; h++) {
            const uint8x16_t q = vld1q_u8(qs + 32 * c + 16 * h);
            uint8x16_t lo = vandq_u8(q, vdupq_n_u8(15)), hi = vshrq_n_u8(q, 4);
            if (qh) {
                const uint8x16_t b = vld1q_u8(qh + 16 * h);
                const uint8x16_t m1 = vdupq_n_u8((uint8_t)(1u << (2 * c))),
                                 m2 = vdupq_n_u8((uint8_t)(2u << (2 * c)));
                lo = vorrq_u8(lo, vandq_u8(vtstq_u8(b, m1), vdupq_n_u8(16)));
                hi = vorrq_u8(hi, vandq_u8(vtstq_u8(b, m2), vdupq_n_u8(16)));
            }
            wv[4 * c + h] = vreinterpretq_s8_u8(lo);
            wv[4 * c + 2 + h] = vreinterpretq_s8_u8(hi);
        }
    }
}

/* Q6_K's 256 signed weights (-32..31) in order, wv[g] = weights 16g..16g+15 (scale g):
 * weight 128h + 32k + l = (4 bits of ql, 2 bits of qh) - 32. */
static inline __attribute__((always_inline)) void q6k_weights(const block_q6_K *b, int8x16_t *wv) {
    const uint8x16_t m4 = vdupq_n_u8(15), m3 = vdupq_n_u8(3);
    for (int h = 0; h < 2; h++) {
        for (int s = 0; s < 2; s++) { /* l = 16s .. 16s + 15 */
            const uint8x16_t l0 = vld1q_u8(b->ql + 64 * h + 16 * s);
            const uint8x16_t l1 = vld1q_u8(b->ql + 64 * h + 32 + 16 * s);
            const uint8x16_t qh = vld1q_u8(b->qh + 32 * h + 16 * s);
            const uint8x16_t v0 = vorrq_u8(vandq_u8(l0, m4), vshlq_n_u8(vandq_u8(qh, m3), 4));
            const uint8x16_t v1 =
                vorrq_u8(vandq_u8(l1, m4), vshlq_n_u8(vandq_u8(vshrq_n_u8(qh, 2), m3), 4));
            const uint8x16_t v2 =
                vorrq_u8(vshrq_n_u8(l0, 4), vshlq_n_u8(vandq_u8(vshrq_n_u8(qh, 4), m3), 4));
            const uint8x16_t v3 = vorrq_u8(vshrq_n_u8(l1, 4), vshlq_n_u8(vshrq_n_u8(qh, 6), 4));
            const int8x16_t off = vdupq_n_s8(32);
            wv[8 * h + 0 + s] = vsubq_s8(vreinterpretq_s8_u8(v0), off);
            wv[8 * h + 2 + s] = vsubq_s8(vreinterpretq_s8_u8(v1), off);
            wv[8 * h + 4 + s] = vsubq_s8(vreinterpretq_s8_u8(v2), off);
            wv[8 * h + 6 + s] = vsubq_s8(vreinterpretq_s8_u8(v3), off);
        }
    }
}

/* Eight float lanes (two vectors) += d * acc, then the reference's final sum. */
static inline void lanes_add(float32x4_t *l, int32x4_t a0, int32x4_t a1, float d) {
    l[0] = vaddq_f32(l[0], vmulq_n_f32(vcvtq_f32_s32(a0), d));
    l[1] = vaddq_f32(l[1], vmulq_n_f32(vcvtq_f32_s32(a1), d));
}
static inline float lanes_sum(float s, const float32x4_t *l) {
    float v[8];
    vst1q_f32(v, l[0]);
    vst1q_f32(v + 4, l[1]);
    for (int k = 0; k < 8; k++)
        s += v[k];
    return s;
}

#endif
