/* dot_neon_body.h — arm64 dot products shared by dot_neon.c (ISA level QT_ISA_NEON,
 * ARMv8.0 Advanced SIMD) and dot_dotprod.c (QT_ISA_DOTPROD, compiled with +dotprod, where
 * __ARM_FEATURE_DOTPROD makes the block sums of Q8_0/Q4_0/Q5_0 and Q2_K's group sums use
 * sdot). Included only by those two files.
 *
 * Every kernel here returns the bits of the scalar reference (qt_dot_ref):
 * integer parts are exact in any order, and the float part follows the
 * reference's structure exactly, one rounding per operation as written there
 * (the build passes -ffp-contract=off, so neither file gets a fused
 * multiply-add the other lacks):
 *
 *   - Q8_0, Q4_0, Q5_0, MXFP4: one float sum over blocks, sumf += (float)sumi * scale;
 *   - Q4_1, Q5_1: eight float lanes of four-weight sums and an offset sum (the x86 order);
 *   - Q2_K: sumf += dall * isum - dmin * summs per super-block;
 *   - Q3_K..Q6_K: ggml's generic eight integer lanes (weight index mod 8) per
 *     super-block, scaled into eight float lanes that live across blocks and
 *     are added to the min term at the end. vmull_s8 on eight consecutive
 *     weights puts weight p in int16 lane p % 8, and vmlal_s16 keeps it there,
 *     so the lanes are the reference's lanes with no shuffle.
 *
 * Bit-identity with the reference is what test_simd checks (memcmp), stricter
 * than the x86 kernels' bound: those follow ggml's AVX2 float order instead.
 * It also means an arm64 machine computes the logits of petrel's scalar
 * reference, the same bits on any ARM CPU and at every arm64 ISA level
 * (dispatch.c: the dot-product level only speeds up the integer part).
 *
 * int16 headroom: a sum of up to four int16 products is formed before
 * widening; |weight| <= 63 (Q6_K: 32) and |activation| <= 127 (qt_quantize_act_ref
 * never produces -128 for Q8_K; Q8_0 can, where products are widened at once).
 *
 * The four-row kernels (qt_dot4_fn) run the same per-row code over four
 * activation rows with the weight block decoded once, so each row's bits are
 * the single-row kernel's. Compiled only for aarch64 (Makefile).
 */
#ifndef PT_DOT_NEON_BODY_H
#define PT_DOT_NEON_BODY_H
#include <arm_neon.h>
#include <math.h>
#include <string.h>

#include "kernels/quant.h"
#include "kernels/quant_impl.h"

/* ===== Helpers ===== */

static inline float f16(pt_f16 h) {
    __fp16 v;
    memcpy(&v, &h, sizeof v);
    return (float)v; /* exact, as qt_f16_to_f32 */
}

/* Sum of 16 int8 x int8 products, widened at once (no int16 sum: Q8_0 may hold -128). */
static inline int32x4_t mul16_s8(int32x4_t acc, int8x16_t x, int8x16_t y) {
    acc = vpadalq_s16(acc, vmull_s8(vget_low_s8(x), vget_low_s8(y)));
    return vpadalq_s16(acc, vmull_high_s8(x, y));
}

/* The single-row and four-row entry points of a NAME##_rows kernel (the same code per row). */
#define ENTRY_POINTS(NAME)                                                                         \
    static float dot_##NAME(const void *w, const void *a, int64_t n) {                             \
        float o;                                                                                   \
        NAME##_rows(w, a, 0, n, 1, &o);                                                            \
        return o;                                                                                  \
    }                                                                                              \
    static void dot4_##NAME(const void *w, const void *a, uint64_t stride, int64_t n,              \
                            float *out) {                                                          \
        NAME##_rows(w, a, stride, n, 4, out);                                                      \
    }

/* ===== 32-weight blocks against Q8_0 ===== */

/* Integer dot of 32 signed weights (two vectors) with a Q8_0 block. */
static inline int32_t sumi32(int8x16_t w0, int8x16_t w1, const int8_t *q) {
#if defined(__ARM_FEATURE_DOTPROD)
    int32x4_t acc = vdotq_s32(vdupq_n_s32(0), w0, vld1q_s8(q));
    acc = vdotq_s32(acc, w1, vld1q_s8(q + 16));
#else
    int32x4_t acc = mul16_s8(vdupq_n_s32(0), w0, vld1q_s8(q));
    acc = mul16_s8(acc, w1, vld1q_s8(q + 16));
#endif
    return vaddvq_s32(acc);
}

#define ROWS_LEGACY(NAME, XT, DECODE, ACCUM)                                                       \
    static inline __attribute__((always_inline)) void NAME##_rows(                                 \
        const void *w, const void *a, uint64_t stride, int64_t n, int nr, float *out) {            \
        const XT *x = w;                                                                           \
        float sumf[4] = {0, 0, 0, 0};                                                              \
        for (int64_t i = 0; i < n / 32; i++) {                                                     \
            const XT *xb = &x[i];                                                                  \
            int8x16_t w0, w1;                                                                      \
            DECODE;                                                                                \
            for (int r = 0; r < nr; r++) {                                                         \
                const block_q8_0 *yb = (const block_q8_0 *)((const uint8_t *)a + r * stride) + i;  \
                const int32_t sumi = sumi32(w0, w1, yb->qs);                                       \
                ACCUM;                                                                             \
            }                                                                                      \
        }                                                                                          \
        for (int r = 0; r < nr; r++)                                                               \
            out[r] = sumf[r];                                                                      \
    }                                                                                              \
    ENTRY_POINTS(NAME)

/* Q8_0: sumf += sumi * (dx * dy). */
ROWS_LEGACY(q8_0, block_q8_0, (w0 = vld1q_s8(xb->qs), w1 = vld1q_s8(xb->qs + 16)),
            sumf[r] += (float)sumi * (f16(xb->d) * f16(yb->d)))

/* Q4_0: weight j = low nibble of qs[j] - 8, weight j + 16 = high nibble - 8;
 * sumf += sumi * dx * dy (left to right, as the reference). */
#define DECODE_Q4_0                                                                                \
    do {                                                                                           \
        const uint8x16_t q = vld1q_u8(xb->qs);                                                     \
        w0 = vsubq_s8(vreinterpretq_s8_u8(vandq_u8(q, vdupq_n_u8(15))), vdupq_n_s8(8));            \
        w1 = vsubq_s8(vreinterpretq_s8_u8(vshrq_n_u8(q, 4)), vdupq_n_s8(8));                       \
    } while (0)
ROWS_LEGACY(q4_0, block_q4_0, DECODE_Q4_0, sumf[r] += (float)sumi * f16(xb->d) * f16(yb->d))

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
#define DECODE_Q5_0                                                                                \
    do {                                                                                           \
        q5_weights(xb->qs, xb->qh, &w0, &w1);                                                      \
        w0 = vsubq_s8(w0, vdupq_n_s8(16));                                                         \
        w1 = vsubq_s8(w1, vdupq_n_s8(16));                                                         \
    } while (0)
ROWS_LEGACY(q5_0, block_q5_0, DECODE_Q5_0, sumf[r] += (f16(xb->d) * f16(yb->d)) * (float)sumi)

/* MXFP4: weight = kvalues_mxfp4[nibble] (a table lookup, vqtbl1q_s8), scale
 * qt_e8m0_half(e); sumf += (dy * scale) * sumi as the reference (quant_iq.c). */
#define DECODE_MXFP4                                                                               \
    do {                                                                                           \
        const uint8x16_t q = vld1q_u8(xb->qs);                                                     \
        const int8x16_t tab = vld1q_s8(kvalues_mxfp4);                                             \
        w0 = vqtbl1q_s8(tab, vandq_u8(q, vdupq_n_u8(15)));                                         \
        w1 = vqtbl1q_s8(tab, vshrq_n_u8(q, 4));                                                    \
    } while (0)
ROWS_LEGACY(mxfp4, block_mxfp4, DECODE_MXFP4,
            sumf[r] += (f16(yb->d) * qt_e8m0_half(xb->e)) * (float)sumi)

/* ===== Q4_1 / Q5_1 against Q8_1 =====
 *
 * The reference's x86 order: the integer products of weights 4l..4l+3 in lane l of
 * eight, each lane fused-multiply-added with dx * dy per block (vfmaq_f32 is fmaf per
 * lane), the lanes folded as ((a0+a4)+(a2+a6))+((a1+a5)+(a3+a7)), the offsets m * s
 * summed apart by fmaf and added last. Weights are unsigned (0..31), so a sum of two
 * int16 products cannot overflow. */
static inline int32x4_t quad_sums(int8x16_t w, int8x16_t q) {
#if defined(__ARM_FEATURE_DOTPROD)
    return vdotq_s32(vdupq_n_s32(0), w, q); /* lane k: bytes 4k..4k+3 */
#else
    const int32x4_t lo = vpaddlq_s16(vmull_s8(vget_low_s8(w), vget_low_s8(q)));
    const int32x4_t hi = vpaddlq_s16(vmull_high_s8(w, q));
    return vpaddq_s32(lo, hi); /* pairs of pairs: lanes 0-3, 4-7, 8-11, 12-15 */
#endif
}

#define ROWS_Q1(NAME, XT, DECODE)                                                                  \
    static inline __attribute__((always_inline)) void NAME##_rows(                                 \
        const void *w, const void *a, uint64_t stride, int64_t n, int nr, float *out) {            \
        const XT *x = w;                                                                           \
        float32x4_t acc[4][2];                                                                     \
        float summs[4] = {0, 0, 0, 0};                                                             \
        for (int r = 0; r < nr; r++)                                                               \
            acc[r][0] = acc[r][1] = vdupq_n_f32(0);                                                \
        for (int64_t i = 0; i < n / 32; i++) {                                                     \
            const XT *xb = &x[i];                                                                  \
            int8x16_t w0, w1;                                                                      \
            DECODE;                                                                                \
            for (int r = 0; r < nr; r++) {                                                         \
                const block_q8_1 *yb = (const block_q8_1 *)((const uint8_t *)a + r * stride) + i;  \
                summs[r] = fmaf(f16(xb->m), f16(yb->s), summs[r]);                                 \
                const float dd = f16(xb->d) * f16(yb->d);                                          \
                const float32x4_t s0 = vcvtq_f32_s32(quad_sums(w0, vld1q_s8(yb->qs)));             \
                const float32x4_t s1 = vcvtq_f32_s32(quad_sums(w1, vld1q_s8(yb->qs + 16)));        \
                acc[r][0] = vfmaq_n_f32(acc[r][0], s0, dd);                                        \
                acc[r][1] = vfmaq_n_f32(acc[r][1], s1, dd);                                        \
            }                                                                                      \
        }                                                                                          \
        for (int r = 0; r < nr; r++) {                                                             \
            const float32x4_t c = vaddq_f32(acc[r][0], acc[r][1]); /* a_l + a_{l+4} */             \
            const float32x2_t h = vadd_f32(vget_low_f32(c), vget_high_f32(c));                     \
            out[r] = (vget_lane_f32(h, 0) + vget_lane_f32(h, 1)) + summs[r];                       \
        }                                                                                          \
    }                                                                                              \
    ENTRY_POINTS(NAME)

/* Q4_1: weight j = low nibble of qs[j], weight j + 16 = high nibble (0..15). */
#define DECODE_Q4_1                                                                                \
    do {                                                                                           \
        const uint8x16_t q = vld1q_u8(xb->qs);                                                     \
        w0 = vreinterpretq_s8_u8(vandq_u8(q, vdupq_n_u8(15)));                                     \
        w1 = vreinterpretq_s8_u8(vshrq_n_u8(q, 4));                                                \
    } while (0)
ROWS_Q1(q4_1, block_q4_1, DECODE_Q4_1)

/* Q5_1: weight = nibble | bit << 4 (0..31). */
#define DECODE_Q5_1 q5_weights(xb->qs, xb->qh, &w0, &w1)
ROWS_Q1(q5_1, block_q5_1, DECODE_Q5_1)

/* ===== K-quants against Q8_K ===== */

static inline const block_q8_K *row_k(const void *a, uint64_t stride, int r, int64_t i) {
    return (const block_q8_K *)((const uint8_t *)a + r * stride) + i;
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

/* 8 int16 lanes (weight index mod 8) of a group of 8k weights times the group scale into
 * the 8 int32 lanes a[0] (0..3), a[1] (4..7). */
static inline void acc_scaled(int32x4_t *acc, int16x8_t p, int16_t sc) {
    acc[0] = vmlal_n_s16(acc[0], vget_low_s16(p), sc);
    acc[1] = vmlal_high_n_s16(acc[1], p, sc);
}

/* Products of 16 weights with 16 activations folded into lanes p % 8 (int16). */
static inline int16x8_t prod16(int8x16_t w, const int8_t *q8) {
    const int8x16_t y = vld1q_s8(q8);
    return vaddq_s16(vmull_s8(vget_low_s8(w), vget_low_s8(y)), vmull_high_s8(w, y));
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

/* Q4_K and Q5_K: weight 64c + l (l < 32) is the low nibble of qs[32c + l] (scale 2c),
 * 64c + 32 + l the high nibble (scale 2c + 1); Q5_K adds 16 for bit 2c (2c + 1) of qh[l]. */
static inline __attribute__((always_inline)) void
k45_rows(const uint8_t *qs, const uint8_t *qh, const uint8_t *scales, float d_w, float dmin_w,
         const void *a, uint64_t stride, int64_t i, int nr, float32x4_t (*lanes)[2], float *sumf) {
    int sc[8], mn[8];
    for (int j = 0; j < 8; j++)
        k4_scale_min(j, scales, &sc[j], &mn[j]);
    int8x16_t wv[16]; /* the 256 weights, in order */
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
    for (int r = 0; r < nr; r++) {
        const block_q8_K *y = row_k(a, stride, r, i);
        int sumi = 0;
        for (int j = 0; j < 16; j++)
            sumi += y->bsums[j] * mn[j / 2];
        int32x4_t acc[2] = {vdupq_n_s32(0), vdupq_n_s32(0)};
        for (int k = 0; k < 8; k++) {
            const int16x8_t p = vaddq_s16(prod16(wv[2 * k], y->qs + 32 * k),
                                          prod16(wv[2 * k + 1], y->qs + 32 * k + 16));
            acc_scaled(acc, p, (int16_t)sc[k]);
        }
        lanes_add(lanes[r], acc[0], acc[1], d_w * y->d);
        sumf[r] -= (dmin_w * y->d) * (float)sumi;
    }
}

static inline __attribute__((always_inline)) void
q4k_rows(const void *w, const void *a, uint64_t stride, int64_t n, int nr, float *out) {
    const block_q4_K *x = w;
    float32x4_t lanes[4][2];
    float sumf[4] = {0, 0, 0, 0};
    for (int r = 0; r < 4; r++)
        lanes[r][0] = lanes[r][1] = vdupq_n_f32(0);
    for (int64_t i = 0; i < n / QK_K; i++)
        k45_rows(x[i].qs, NULL, x[i].scales, f16(x[i].d), f16(x[i].dmin), a, stride, i, nr, lanes,
                 sumf);
    for (int r = 0; r < nr; r++)
        out[r] = lanes_sum(sumf[r], lanes[r]);
}

static inline __attribute__((always_inline)) void
q5k_rows(const void *w, const void *a, uint64_t stride, int64_t n, int nr, float *out) {
    const block_q5_K *x = w;
    float32x4_t lanes[4][2];
    float sumf[4] = {0, 0, 0, 0};
    for (int r = 0; r < 4; r++)
        lanes[r][0] = lanes[r][1] = vdupq_n_f32(0);
    for (int64_t i = 0; i < n / QK_K; i++)
        k45_rows(x[i].qs, x[i].qh, x[i].scales, f16(x[i].d), f16(x[i].dmin), a, stride, i, nr,
                 lanes, sumf);
    for (int r = 0; r < nr; r++)
        out[r] = lanes_sum(sumf[r], lanes[r]);
}

/* Q6_K: weight 128h + 32k + l = (4 bits of ql, 2 bits of qh) - 32, int8 scale per 16. */
static inline __attribute__((always_inline)) void
q6k_rows(const void *w, const void *a, uint64_t stride, int64_t n, int nr, float *out) {
    const block_q6_K *x = w;
    float32x4_t lanes[4][2];
    for (int r = 0; r < 4; r++)
        lanes[r][0] = lanes[r][1] = vdupq_n_f32(0);
    for (int64_t i = 0; i < n / QK_K; i++) {
        int8x16_t wv[16];
        const uint8x16_t m4 = vdupq_n_u8(15), m3 = vdupq_n_u8(3);
        for (int h = 0; h < 2; h++) {
            for (int s = 0; s < 2; s++) { /* l = 16s .. 16s + 15 */
                const uint8x16_t l0 = vld1q_u8(x[i].ql + 64 * h + 16 * s);
                const uint8x16_t l1 = vld1q_u8(x[i].ql + 64 * h + 32 + 16 * s);
                const uint8x16_t qh = vld1q_u8(x[i].qh + 32 * h + 16 * s);
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
        const float d_w = f16(x[i].d);
        for (int r = 0; r < nr; r++) {
            const block_q8_K *y = row_k(a, stride, r, i);
            int32x4_t acc[2] = {vdupq_n_s32(0), vdupq_n_s32(0)};
            for (int g = 0; g < 16; g++)
                acc_scaled(acc, prod16(wv[g], y->qs + 16 * g), x[i].scales[g]);
            lanes_add(lanes[r], acc[0], acc[1], d_w * y->d);
        }
    }
    for (int r = 0; r < nr; r++)
        out[r] = lanes_sum(0.0f, lanes[r]);
}

/* Q3_K scale j (6 bits stored +32, packed in 12 bytes; see quant_ref.c). */
static inline int q3k_scale(int j, const uint8_t *q) {
    int lo = j < 8 ? (q[j] & 0x0f) : (q[j - 8] >> 4);
    int hi = (q[8 + j % 4] >> (2 * (j / 4))) & 3;
    return (lo | hi << 4) - 32;
}

/* Q3_K: weight 128h + 32g + l = bits 2g..2g+1 of qs[32h + l], minus 4 unless bit 4h + g
 * of hmask[l] is set. */
static inline __attribute__((always_inline)) void
q3k_rows(const void *w, const void *a, uint64_t stride, int64_t n, int nr, float *out) {
    const block_q3_K *x = w;
    float32x4_t lanes[4][2];
    for (int r = 0; r < 4; r++)
        lanes[r][0] = lanes[r][1] = vdupq_n_f32(0);
    for (int64_t i = 0; i < n / QK_K; i++) {
        int8x16_t wv[16];
        int16_t sc[16];
        for (int j = 0; j < 16; j++)
            sc[j] = (int16_t)q3k_scale(j, x[i].scales);
        for (int h = 0; h < 2; h++)
            for (int s = 0; s < 2; s++) {
                const uint8x16_t q = vld1q_u8(x[i].qs + 32 * h + 16 * s);
                const uint8x16_t hm = vld1q_u8(x[i].hmask + 16 * s);
                for (int g = 0; g < 4; g++) {
                    const uint8x16_t lo =
                        vandq_u8(vshlq_u8(q, vdupq_n_s8((int8_t)(-2 * g))), vdupq_n_u8(3));
                    /* 4 where the high bit is clear */
                    const uint8x16_t sub = vbicq_u8(
                        vdupq_n_u8(4), vtstq_u8(hm, vdupq_n_u8((uint8_t)(1u << (4 * h + g)))));
                    wv[8 * h + 2 * g + s] =
                        vsubq_s8(vreinterpretq_s8_u8(lo), vreinterpretq_s8_u8(sub));
                }
            }
        const float d_w = f16(x[i].d);
        for (int r = 0; r < nr; r++) {
            const block_q8_K *y = row_k(a, stride, r, i);
            int32x4_t acc[2] = {vdupq_n_s32(0), vdupq_n_s32(0)};
            for (int g = 0; g < 16; g++)
                acc_scaled(acc, prod16(wv[g], y->qs + 16 * g), sc[g]);
            lanes_add(lanes[r], acc[0], acc[1], d_w * y->d);
        }
    }
    for (int r = 0; r < nr; r++)
        out[r] = lanes_sum(0.0f, lanes[r]);
}

/* Q2_K: weight 128h + 32j + l = bits 2j..2j+1 of qs[32h + l], group 16 scale low nibble,
 * min high nibble; sumf += dall * isum - dmin * summs. */
static inline __attribute__((always_inline)) void
q2k_rows(const void *w, const void *a, uint64_t stride, int64_t n, int nr, float *out) {
    const block_q2_K *x = w;
    float sumf[4] = {0, 0, 0, 0};
    for (int64_t i = 0; i < n / QK_K; i++) {
        int8x16_t wv[16];
        for (int h = 0; h < 2; h++)
            for (int s = 0; s < 2; s++) {
                const uint8x16_t q = vld1q_u8(x[i].qs + 32 * h + 16 * s);
                for (int j = 0; j < 4; j++)
                    wv[8 * h + 2 * j + s] = vreinterpretq_s8_u8(
                        vandq_u8(vshlq_u8(q, vdupq_n_s8((int8_t)(-2 * j))), vdupq_n_u8(3)));
            }
        const uint8x16_t raw = vld1q_u8(x[i].scales);
        const int16x8_t sc_lo =
            vreinterpretq_s16_u16(vmovl_u8(vget_low_u8(vandq_u8(raw, vdupq_n_u8(15)))));
        const int16x8_t sc_hi = vreinterpretq_s16_u16(vmovl_high_u8(vandq_u8(raw, vdupq_n_u8(15))));
        const int16x8_t mn_lo = vreinterpretq_s16_u16(vmovl_u8(vget_low_u8(vshrq_n_u8(raw, 4))));
        const int16x8_t mn_hi = vreinterpretq_s16_u16(vmovl_high_u8(vshrq_n_u8(raw, 4)));
        for (int r = 0; r < nr; r++) {
            const block_q8_K *y = row_k(a, stride, r, i);
            const int16x8_t b0 = vld1q_s16(y->bsums), b1 = vld1q_s16(y->bsums + 8);
            int32x4_t m = vmull_s16(vget_low_s16(b0), vget_low_s16(mn_lo));
            m = vmlal_high_s16(m, b0, mn_lo);
            m = vmlal_s16(m, vget_low_s16(b1), vget_low_s16(mn_hi));
            m = vmlal_high_s16(m, b1, mn_hi);
            const int summs = vaddvq_s32(m);
            /* per-group sums of 16 products, then times the group's scale */
            int16x8_t g8[2];
            for (int half = 0; half < 2; half++) {
                int16_t gs[8];
                for (int g = 0; g < 8; g++) {
                    const int8_t *q8 = y->qs + 16 * (8 * half + g);
#if defined(__ARM_FEATURE_DOTPROD)
                    gs[g] = (int16_t)vaddvq_s32(
                        vdotq_s32(vdupq_n_s32(0), wv[8 * half + g], vld1q_s8(q8)));
#else
                    gs[g] = vaddvq_s16(prod16(wv[8 * half + g], q8));
#endif
                }
                g8[half] = vld1q_s16(gs);
            }
            int32x4_t s = vmull_s16(vget_low_s16(g8[0]), vget_low_s16(sc_lo));
            s = vmlal_high_s16(s, g8[0], sc_lo);
            s = vmlal_s16(s, vget_low_s16(g8[1]), vget_low_s16(sc_hi));
            s = vmlal_high_s16(s, g8[1], sc_hi);
            const int isum = vaddvq_s32(s);
            const float dall = y->d * f16(x[i].d), dmin = y->d * f16(x[i].dmin);
            sumf[r] += dall * (float)isum - dmin * (float)summs;
        }
    }
    for (int r = 0; r < nr; r++)
        out[r] = sumf[r];
}

ENTRY_POINTS(q2k)
ENTRY_POINTS(q3k)
ENTRY_POINTS(q4k)
ENTRY_POINTS(q5k)
ENTRY_POINTS(q6k)

/* ===== F32 kernels in ggml's lane order (quant.h) ===== */

/* 64 lanes as 16 vectors, fused multiply-add (exact as fmaf), folded pairwise. */
static float f32_dot(const float *x, const float *y, int64_t n) {
    float32x4_t l[16];
    for (int k = 0; k < 16; k++)
        l[k] = vdupq_n_f32(0);
    const int64_t np = n & ~(int64_t)63;
    for (int64_t i = 0; i < np; i += 64)
        for (int k = 0; k < 16; k++)
            l[k] = vfmaq_f32(l[k], vld1q_f32(x + i + 4 * k), vld1q_f32(y + i + 4 * k));
    for (int w = 8; w >= 1; w /= 2) /* 32, 16, 8, 4 lanes */
        for (int k = 0; k < w; k++)
            l[k] = vaddq_f32(l[k], l[k + w]);
    /* 4 -> 2 -> 1: lane j += lane j + 2, then lane 0 += lane 1 */
    const float32x2_t h = vadd_f32(vget_low_f32(l[0]), vget_high_f32(l[0]));
    float sum = vget_lane_f32(h, 0) + vget_lane_f32(h, 1);
    for (int64_t i = np; i < n; i++)
        sum += x[i] * y[i];
    return sum;
}

static void f32_axpy(float *acc, float a, const float *x, int64_t n) {
    int64_t i = 0;
    for (; i + 4 <= n; i += 4)
        vst1q_f32(acc + i, vfmaq_n_f32(vld1q_f32(acc + i), vld1q_f32(x + i), a));
    for (; i < n; i++)
        acc[i] = fmaf(a, x[i], acc[i]);
}

static void f32_dot2(const float *x, const float *y0, const float *y1, int64_t n, float *out) {
    out[0] = f32_dot(x, y0, n);
    out[1] = f32_dot(x, y1, n);
}

static const qt_f32_kernels neon_f32 __attribute__((unused)) = {f32_dot, f32_axpy, f32_dot2};

/* ===== Panel order (qt_dot_panel_ref: the types whose one kernel is llama.cpp's batched
 * order) ===== */

/* F32: x[i] * y[i] fused-multiply-added into lane i % 16 (four vectors), the lanes folded
 * pairwise (w = 8, 4, 2, 1), then the tail added one by one, unfused. */
static float panel_f32(const void *w, const void *a, int64_t n) {
    const float *x = w, *y = a;
    float32x4_t l[4];
    for (int k = 0; k < 4; k++)
        l[k] = vdupq_n_f32(0);
    const int64_t np = n & ~(int64_t)15;
    for (int64_t i = 0; i < np; i += 16)
        for (int k = 0; k < 4; k++)
            l[k] = vfmaq_f32(l[k], vld1q_f32(x + i + 4 * k), vld1q_f32(y + i + 4 * k));
    l[0] = vaddq_f32(l[0], l[2]); /* w = 8 */
    l[1] = vaddq_f32(l[1], l[3]);
    l[0] = vaddq_f32(l[0], l[1]);                                            /* w = 4 */
    const float32x2_t h = vadd_f32(vget_low_f32(l[0]), vget_high_f32(l[0])); /* w = 2 */
    float sum = vget_lane_f32(h, 0) + vget_lane_f32(h, 1);                   /* w = 1 */
    for (int64_t i = np; i < n; i++)
        sum += x[i] * y[i];
    return sum;
}

/* IQ4_NL against Q8_0 (tinyBLAS): lane l of eight = fma(dw * dy, products 4l..4l+3, lane),
 * folded as ((l0+l4)+(l2+l6))+((l1+l5)+(l3+l7)). */
static float panel_iq4_nl(const void *w, const void *a, int64_t n) {
    const block_iq4_nl *x = w;
    const block_q8_0 *y = a;
    const int8x16_t tab = vld1q_s8(kvalues_iq4nl);
    float32x4_t acc0 = vdupq_n_f32(0), acc1 = vdupq_n_f32(0);
    for (int64_t i = 0; i < n / 32; i++) {
        const uint8x16_t q = vld1q_u8(x[i].qs);
        const int8x16_t w0 = vqtbl1q_s8(tab, vandq_u8(q, vdupq_n_u8(15)));
        const int8x16_t w1 = vqtbl1q_s8(tab, vshrq_n_u8(q, 4));
        const float d = f16(x[i].d) * f16(y[i].d);
        acc0 = vfmaq_n_f32(acc0, vcvtq_f32_s32(quad_sums(w0, vld1q_s8(y[i].qs))), d);
        acc1 = vfmaq_n_f32(acc1, vcvtq_f32_s32(quad_sums(w1, vld1q_s8(y[i].qs + 16))), d);
    }
    const float32x4_t c = vaddq_f32(acc0, acc1);
    const float32x2_t h = vadd_f32(vget_low_f32(c), vget_high_f32(c));
    return vget_lane_f32(h, 0) + vget_lane_f32(h, 1);
}

/* IQ4_XS: per 256-weight block the exact integer sum of scale(ib) * (32-weight dot), then
 * acc = fma((float)isum, dw * dy, acc). */
static float panel_iq4_xs(const void *w, const void *a, int64_t n) {
    const block_iq4_xs *x = w;
    const block_q8_K *y = a;
    const int8x16_t tab = vld1q_s8(kvalues_iq4nl);
    float acc = 0.0f;
    for (int64_t i = 0; i < n / QK_K; i++) {
        int32_t isum = 0;
        for (int ib = 0; ib < QK_K / 32; ib++) {
            const int lo = (x[i].scales_l[ib / 2] >> (4 * (ib % 2))) & 0xf;
            const int hi = (x[i].scales_h >> (2 * ib)) & 3;
            const uint8x16_t q = vld1q_u8(x[i].qs + 16 * ib);
            const int32_t s = sumi32(vqtbl1q_s8(tab, vandq_u8(q, vdupq_n_u8(15))),
                                     vqtbl1q_s8(tab, vshrq_n_u8(q, 4)), y[i].qs + 32 * ib);
            isum += ((lo | hi << 4) - 32) * s;
        }
        acc = fmaf((float)isum, f16(x[i].d) * y[i].d, acc);
    }
    return acc;
}

static qt_dot_fn neon_panel_table(uint32_t type) {
    switch (type) {
    case QT_F32: return panel_f32;
    case QT_IQ4_NL: return panel_iq4_nl;
    case QT_IQ4_XS: return panel_iq4_xs;
    default: return NULL;
    }
}

/* ===== Tables ===== */

static qt_dot_fn neon_table(uint32_t type) {
    switch (type) {
    case QT_Q8_0: return dot_q8_0;
    case QT_Q4_0: return dot_q4_0;
    case QT_Q5_0: return dot_q5_0;
    case QT_Q4_1: return dot_q4_1;
    case QT_Q5_1: return dot_q5_1;
    case QT_MXFP4: return dot_mxfp4;
    case QT_Q2_K: return dot_q2k;
    case QT_Q3_K: return dot_q3k;
    case QT_Q4_K: return dot_q4k;
    case QT_Q5_K: return dot_q5k;
    case QT_Q6_K: return dot_q6k;
    default: return NULL;
    }
}

static qt_dot4_fn neon_table4(uint32_t type) {
    switch (type) {
    case QT_Q8_0: return dot4_q8_0;
    case QT_Q4_0: return dot4_q4_0;
    case QT_Q5_0: return dot4_q5_0;
    case QT_Q4_1: return dot4_q4_1;
    case QT_Q5_1: return dot4_q5_1;
    case QT_MXFP4: return dot4_mxfp4;
    case QT_Q2_K: return dot4_q2k;
    case QT_Q3_K: return dot4_q3k;
    case QT_Q4_K: return dot4_q4k;
    case QT_Q5_K: return dot4_q5k;
    case QT_Q6_K: return dot4_q6k;
    default: return NULL;
    }
}

#endif
