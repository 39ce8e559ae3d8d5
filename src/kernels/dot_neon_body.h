/* dot_neon_body.h — arm64 dot products shared by dot_neon.c (ISA level QT_ISA_NEON,
 * ARMv8.0 Advanced SIMD) and dot_dotprod.c (QT_ISA_DOTPROD, compiled with +dotprod, where
 * __ARM_FEATURE_DOTPROD makes the block sums of Q8_0/Q4_0/Q5_0, Q2_K's group sums and the
 * IQ types' 16-weight sums use sdot). Included only by those two files.
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
 *   - F16, BF16: the exact products added one by one, in index order;
 *   - the lattice IQ types (IQ1_S/M, IQ2_XXS/XS/S, IQ3_XXS/S): an exact integer sum per
 *     256-weight block, then the reference's float steps per block, in its single-row
 *     order and in its panel order (qt_dot_panel_ref, what the engine's matmuls use);
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
 * the single-row kernel's; the panel kernels (F32, IQ4_NL, IQ4_XS, the lattice IQ
 * types) have four-row forms too (qt_mm_dot4_upto). Compiled only for aarch64 (Makefile).
 */
#ifndef PT_DOT_NEON_BODY_H
#define PT_DOT_NEON_BODY_H
#include <arm_neon.h>
#include <math.h>
#include <string.h>

#include "kernels/neon_shared.h"
#include "kernels/quant.h"
#include "kernels/quant_impl.h"

/* ===== Helpers ===== */

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

/* The exact sum over 16 groups g of sc[g] * (dot of the 16 weights q[g] with activations
 * 16g..16g+15), the scales in two int16 vectors (l0: groups 0-7, l1: 8-15); |q| <= 63, so two
 * products fit an int16 lane. Written out for the 16 groups (IQ_G4), so that each scale is a
 * constant lane (smlal / mla by element) rather than a scalar moved into a vector per group. */
static inline __attribute__((always_inline)) int32_t scaled_sum256(const int8x16_t *q, int16x8_t l0,
                                                                   int16x8_t l1, const int8_t *y) {
#if defined(__ARM_FEATURE_DOTPROD)
    const int32x4_t sc[4] = {vmovl_s16(vget_low_s16(l0)), vmovl_high_s16(l0),
                             vmovl_s16(vget_low_s16(l1)), vmovl_high_s16(l1)};
    int32x4_t acc = vdupq_n_s32(0);
#define IQ_G(g)                                                                                    \
    acc = vmlaq_laneq_s32(acc, vdotq_s32(vdupq_n_s32(0), q[g], vld1q_s8(y + 16 * (g))),            \
                          sc[(g) / 4], (g) % 4)
#else
    int32x4_t acc0 = vdupq_n_s32(0), acc1 = vdupq_n_s32(0);
#define IQ_G(g)                                                                                    \
    do {                                                                                           \
        const int16x8_t p = prod16(q[g], y + 16 * (g));                                            \
        acc0 = vmlal_laneq_s16(acc0, vget_low_s16(p), (g) < 8 ? l0 : l1, (g) % 8);                 \
        acc1 = vmlal_high_laneq_s16(acc1, p, (g) < 8 ? l0 : l1, (g) % 8);                          \
    } while (0)
#endif
#define IQ_G4(g)                                                                                   \
    do {                                                                                           \
        IQ_G(g);                                                                                   \
        IQ_G((g) + 1);                                                                             \
        IQ_G((g) + 2);                                                                             \
        IQ_G((g) + 3);                                                                             \
    } while (0)
    IQ_G4(0);
    IQ_G4(4);
    IQ_G4(8);
    IQ_G4(12);
#undef IQ_G4
#undef IQ_G
#if defined(__ARM_FEATURE_DOTPROD)
    return vaddvq_s32(acc);
#else
    return vaddvq_s32(vaddq_s32(acc0, acc1));
#endif
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
    k45_weights(qs, qh, wv);
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
        q6k_weights(&x[i], wv);
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

/* Q2_K's four 2-bit weights of 16 bytes of qs: bits 2j..2j+1 into w[2j] (stride 2: the
 * groups of the other 16 bytes interleave). */
static inline __attribute__((always_inline)) void q2k_weights(const uint8_t *qs, int8x16_t *w) {
    const uint8x16_t q = vld1q_u8(qs), m3 = vdupq_n_u8(3);
    w[0] = vreinterpretq_s8_u8(vandq_u8(q, m3));
    w[2] = vreinterpretq_s8_u8(vandq_u8(vshrq_n_u8(q, 2), m3));
    w[4] = vreinterpretq_s8_u8(vandq_u8(vshrq_n_u8(q, 4), m3));
    w[6] = vreinterpretq_s8_u8(vshrq_n_u8(q, 6));
}

/* Q2_K: weight 128h + 32j + l = bits 2j..2j+1 of qs[32h + l], group 16 scale low nibble,
 * min high nibble; sumf += dall * isum - dmin * summs (isum exact: any order). */
static inline __attribute__((always_inline)) void
q2k_rows(const void *w, const void *a, uint64_t stride, int64_t n, int nr, float *out) {
    const block_q2_K *x = w;
    float sumf[4] = {0, 0, 0, 0};
    for (int64_t i = 0; i < n / QK_K; i++) {
        int8x16_t wv[16]; /* group 8h + 2j + s: weights 128h + 32j + 16s .. +15 */
        q2k_weights(x[i].qs, wv);
        q2k_weights(x[i].qs + 16, wv + 1);
        q2k_weights(x[i].qs + 32, wv + 8);
        q2k_weights(x[i].qs + 48, wv + 9);
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
            const int isum = scaled_sum256(wv, sc_lo, sc_hi, y->qs);
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

/* ===== F16 / BF16: the products added one by one =====
 *
 * The reference adds the float products in index order, one rounding each. A product of
 * two fp16 (11-bit) or bf16 (8-bit) significands is exact in float, and where bf16's range
 * makes it round, the vector multiply rounds as the scalar one does; so the products are
 * formed four at a time and added lane by lane, in order. The add chain is the
 * reference's: a single row is bound by its latency, four rows run four chains. */
static inline float32x4_t f16x4(const pt_f16 *p) {
    return vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(p))); /* exact, as qt_f16_to_f32 */
}
static inline float32x4_t bf16x4(const pt_bf16 *p) {
    return vreinterpretq_f32_u32(vshll_n_u16(vld1_u16(p), 16));
}

#define ROWS_HALF(NAME, LOAD4, TO_F32)                                                             \
    static inline __attribute__((always_inline)) void NAME##_rows(                                 \
        const void *w, const void *a, uint64_t stride, int64_t n, int nr, float *out) {            \
        const uint16_t *x = w;                                                                     \
        float s[4] = {0, 0, 0, 0};                                                                 \
        int64_t i = 0;                                                                             \
        for (; i + 4 <= n; i += 4) {                                                               \
            const float32x4_t xv = LOAD4(x + i);                                                   \
            for (int r = 0; r < nr; r++) {                                                         \
                const uint16_t *y = (const uint16_t *)((const uint8_t *)a + r * stride);           \
                const float32x4_t p = vmulq_f32(xv, LOAD4(y + i));                                 \
                s[r] += vgetq_lane_f32(p, 0);                                                      \
                s[r] += vgetq_lane_f32(p, 1);                                                      \
                s[r] += vgetq_lane_f32(p, 2);                                                      \
                s[r] += vgetq_lane_f32(p, 3);                                                      \
            }                                                                                      \
        }                                                                                          \
        for (; i < n; i++)                                                                         \
            for (int r = 0; r < nr; r++) {                                                         \
                const uint16_t *y = (const uint16_t *)((const uint8_t *)a + r * stride);           \
                s[r] += TO_F32(x[i]) * TO_F32(y[i]);                                               \
            }                                                                                      \
        for (int r = 0; r < nr; r++)                                                               \
            out[r] = s[r];                                                                         \
    }                                                                                              \
    ENTRY_POINTS(NAME)

ROWS_HALF(f16, f16x4, qt_f16_to_f32)
ROWS_HALF(bf16, bf16x4, qt_bf16_to_f32)

/* ===== The lattice IQ types against Q8_K: IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S, IQ1_S,
 * IQ1_M =====
 *
 * The reference (quant_iq.c) forms per 256-weight block an exact integer sum of
 * ls * (16-weight dot) and does all its float work per block; so do these kernels, in
 * both of its orders: the single-row one (qt_dot_ref: sumf += d * d8 * isum, the
 * lattice types times their constant at the end, IQ1 with its shift term apart) and the
 * panel one the engine's matmuls use (qt_dot_panel_ref: one fma per block). The weights
 * are decoded to int8 with their signs applied (grid bytes are at most 62, so two
 * products fit an int16 lane); the block sums use sdot at the dotprod level. */

typedef struct {
    int8x16_t q[16];  /* weights 16g..16g+15 as signed levels (IQ1_M: 8 * level + shift sign) */
    int8x16_t dv[16]; /* IQ1_M: the shift's sign (+1 / -1) per weight */
    int16_t ls[16];   /* odd multiplier 2s + 1 per 16 weights */
    int16_t lsd[16];  /* IQ1_S: ls times the shift's sign, against the Q8_K bsums */
    float d;          /* block scale (fp16 decoded) */
} iq_block;

/* 16 weights from two 8-weight grid entries, negated where bit j of `signs` is set. */
static inline int8x16_t signed16(uint64_t g0, uint64_t g1, uint32_t signs) {
    const int8x16_t v = vreinterpretq_s8_u64(vcombine_u64(vcreate_u64(g0), vcreate_u64(g1)));
    const int8x16_t m = bits16((uint16_t)signs);
    return vsubq_s8(veorq_s8(v, m), m); /* (v ^ -1) - (-1) = -v */
}
static inline uint32_t ld32(const uint8_t *p) {
    uint32_t v;
    memcpy(&v, p, sizeof v); /* arm64 is little-endian, as the on-disk blocks */
    return v;
}
/* The sign masks of groups l and l + 1 of an IQ2_XXS / IQ3_XXS 32-bit word. */
static inline uint32_t signs_pair(uint32_t aux, int l) {
    return ksigns_iq2xs[(aux >> (7 * l)) & 127] | (uint32_t)ksigns_iq2xs[(aux >> (7 * l + 7)) & 127]
                                                      << 8;
}
/* An IQ3 8-weight group: two 4-weight grid entries. */
static inline uint64_t iq3_pair(const uint32_t *grid, uint32_t i0, uint32_t i1) {
    return grid[i0] | (uint64_t)grid[i1] << 32;
}

static inline __attribute__((always_inline)) void iq2_xxs_block(const void *blk, iq_block *b) {
    const block_iq2_xxs *x = blk;
    const uint8_t *qs = (const uint8_t *)x->qs;
    b->d = f16(x->d);
    for (int ib = 0; ib < 8; ib++, qs += 8) {
        const uint32_t aux = ld32(qs + 4);
        b->q[2 * ib] = signed16(iq2xxs_grid[qs[0]], iq2xxs_grid[qs[1]], signs_pair(aux, 0));
        b->q[2 * ib + 1] = signed16(iq2xxs_grid[qs[2]], iq2xxs_grid[qs[3]], signs_pair(aux, 2));
        b->ls[2 * ib] = b->ls[2 * ib + 1] = (int16_t)(2 * (aux >> 28) + 1);
    }
}

/* IQ2_XS / IQ2_S scales: a byte of two 4-bit scales per 32 weights. */
static inline void iq2_scales(const uint8_t *scales, int16_t *ls) {
    for (int ib = 0; ib < 8; ib++) {
        ls[2 * ib] = (int16_t)(2 * (scales[ib] & 15) + 1);
        ls[2 * ib + 1] = (int16_t)(2 * (scales[ib] >> 4) + 1);
    }
}

static inline __attribute__((always_inline)) void iq2_xs_block(const void *blk, iq_block *b) {
    const block_iq2_xs *x = blk;
    b->d = f16(x->d);
    for (int g = 0; g < 16; g++) {
        const uint32_t w0 = x->qs[2 * g], w1 = x->qs[2 * g + 1];
        b->q[g] = signed16(iq2xs_grid[w0 & 511], iq2xs_grid[w1 & 511],
                           ksigns_iq2xs[w0 >> 9] | (uint32_t)ksigns_iq2xs[w1 >> 9] << 8);
    }
    iq2_scales(x->scales, b->ls);
}

static inline __attribute__((always_inline)) void iq2_s_block(const void *blk, iq_block *b) {
    const block_iq2_s *x = blk;
    const uint8_t *signs = x->qs + QK_K / 8;
    b->d = f16(x->d);
    for (int g = 0; g < 16; g++) {
        const uint32_t h = (uint32_t)x->qh[g / 2] >> (4 * (g % 2)); /* 2 bits per 8 weights */
        b->q[g] = signed16(iq2s_grid[x->qs[2 * g] | (h & 3) << 8],
                           iq2s_grid[x->qs[2 * g + 1] | (h >> 2 & 3) << 8],
                           signs[2 * g] | (uint32_t)signs[2 * g + 1] << 8);
    }
    iq2_scales(x->scales, b->ls);
}

static inline __attribute__((always_inline)) void iq3_xxs_block(const void *blk, iq_block *b) {
    const block_iq3_xxs *x = blk;
    const uint8_t *gas = x->qs + QK_K / 4;
    b->d = f16(x->d);
    for (int ib = 0; ib < 8; ib++) {
        const uint8_t *p = x->qs + 8 * ib;
        const uint32_t aux = ld32(gas + 4 * ib);
        for (int h = 0; h < 2; h++, p += 4)
            b->q[2 * ib + h] = signed16(iq3_pair(iq3xxs_grid, p[0], p[1]),
                                        iq3_pair(iq3xxs_grid, p[2], p[3]), signs_pair(aux, 2 * h));
        b->ls[2 * ib] = b->ls[2 * ib + 1] = (int16_t)(2 * (aux >> 28) + 1);
    }
}

static inline __attribute__((always_inline)) void iq3_s_block(const void *blk, iq_block *b) {
    const block_iq3_s *x = blk;
    b->d = f16(x->d);
    for (int ib = 0; ib < 8; ib++) {
        const uint8_t *qs = x->qs + 8 * ib;
        const uint32_t qh = x->qh[ib];
        for (int h = 0; h < 2; h++) { /* bit k of qh: the k-th index of the 32 weights */
            const uint8_t *q = qs + 4 * h;
            const uint32_t hb = qh >> (4 * h);
            b->q[2 * ib + h] =
                signed16(iq3_pair(iq3s_grid, q[0] | (hb & 1) << 8, q[1] | (hb >> 1 & 1) << 8),
                         iq3_pair(iq3s_grid, q[2] | (hb >> 2 & 1) << 8, q[3] | (hb >> 3 & 1) << 8),
                         x->signs[4 * ib + 2 * h] | (uint32_t)x->signs[4 * ib + 2 * h + 1] << 8);
        }
        const int s = (x->scales[ib / 2] >> (4 * (ib % 2))) & 15;
        b->ls[2 * ib] = b->ls[2 * ib + 1] = (int16_t)(2 * s + 1);
    }
}

/* IQ1_S: levels -1, 0, +1 from the ternary grid; the shift's sign per 32 weights enters
 * through the Q8_K block sums, as in the reference. */
static inline __attribute__((always_inline)) void iq1_s_block(const void *blk, iq_block *b) {
    const block_iq1_s *x = blk;
    b->d = f16(x->d);
    for (int ib = 0; ib < 8; ib++) {
        const uint32_t qh = x->qh[ib];
        for (int h = 0; h < 2; h++) {
            const uint32_t i0 = x->qs[4 * ib + 2 * h] | ((qh >> (6 * h)) & 7) << 8;
            const uint32_t i1 = x->qs[4 * ib + 2 * h + 1] | ((qh >> (6 * h + 3)) & 7) << 8;
            b->q[2 * ib + h] = vreinterpretq_s8_u64(
                vcombine_u64(vcreate_u64(iq1s_grid[i0]), vcreate_u64(iq1s_grid[i1])));
        }
        const int16_t ls = (int16_t)(2 * ((qh >> 12) & 7) + 1);
        b->ls[2 * ib] = b->ls[2 * ib + 1] = ls;
        b->lsd[2 * ib] = b->lsd[2 * ib + 1] = qh & 0x8000 ? (int16_t)-ls : ls;
    }
}

/* IQ1_M: the shift's sign per 8 weights; q = 8 * level + sign, so that one integer sum
 * is the panel order's 8 * sum(ls q y) + sum(ls sign y). */
static inline __attribute__((always_inline)) void iq1_m_block(const void *blk, iq_block *b) {
    const block_iq1_m *x = blk;
    uint32_t bits = 0; /* the fp16 scale, in the top nibbles of the four scale words */
    for (int k = 0; k < 4; k++)
        bits |= (uint32_t)(x->scales[2 * k + 1] >> 4) << (4 * k);
    b->d = f16((pt_f16)bits);
    for (int g = 0; g < 16; g++) {
        const uint32_t nib = x->qh[g]; /* low nibble: weights 16g..+7, high: 16g+8..+15 */
        const int8x16_t lv = vreinterpretq_s8_u64(
            vcombine_u64(vcreate_u64(iq1s_grid[x->qs[2 * g] | (nib & 7) << 8]),
                         vcreate_u64(iq1s_grid[x->qs[2 * g + 1] | (nib >> 4 & 7) << 8])));
        b->dv[g] = vcombine_s8(vdup_n_s8(nib & 8 ? -1 : 1), vdup_n_s8(nib & 0x80 ? -1 : 1));
        b->q[g] = vaddq_s8(vshlq_n_s8(lv, 3), b->dv[g]);
    }
    for (int ib = 0; ib < 8; ib++) {
        const uint32_t sc =
            (x->scales[ib / 2 * 2] | (uint32_t)x->scales[ib / 2 * 2 + 1] << 8) >> (6 * (ib % 2));
        b->ls[2 * ib] = (int16_t)(2 * (sc & 7) + 1);
        b->ls[2 * ib + 1] = (int16_t)(2 * ((sc >> 3) & 7) + 1);
    }
}

/* IQ1_S's shift term sum(ls * sign * bsum) over the 16 block sums. */
static inline int32_t iq1_s_shift(const int16_t *lsd, const int16_t *bsums) {
    const int16x8_t l0 = vld1q_s16(lsd), l1 = vld1q_s16(lsd + 8);
    const int16x8_t b0 = vld1q_s16(bsums), b1 = vld1q_s16(bsums + 8);
    int32x4_t m = vmull_s16(vget_low_s16(l0), vget_low_s16(b0));
    m = vmlal_high_s16(m, l0, b0);
    m = vmlal_s16(m, vget_low_s16(l1), vget_low_s16(b1));
    return vaddvq_s32(vmlal_high_s16(m, l1, b1));
}

/* One kernel body for the seven types and both orders; `type` and `panel` are constants
 * in every caller (always_inline), so each entry point is one type's straight code. */
static inline __attribute__((always_inline)) void iq_rows(uint32_t type, int panel, const void *w,
                                                          const void *a, uint64_t stride, int64_t n,
                                                          int nr, float *out) {
    const int iq1 = type == QT_IQ1_S || type == QT_IQ1_M;
    size_t bytes;
    float post; /* the lattice types' constant factor */
    switch (type) {
    case QT_IQ2_XXS: bytes = sizeof(block_iq2_xxs), post = 0.125f; break;
    case QT_IQ2_XS: bytes = sizeof(block_iq2_xs), post = 0.125f; break;
    case QT_IQ2_S: bytes = sizeof(block_iq2_s), post = 0.125f; break;
    case QT_IQ3_XXS: bytes = sizeof(block_iq3_xxs), post = 0.25f; break;
    case QT_IQ3_S: bytes = sizeof(block_iq3_s), post = 1.0f; break;
    case QT_IQ1_S: bytes = sizeof(block_iq1_s), post = 0.125f; break; /* the shift, 1/8 */
    default: bytes = sizeof(block_iq1_m), post = 0.125f; break;
    }
    float sumf[4] = {0, 0, 0, 0};
    iq_block b;
    for (int64_t i = 0; i < n / QK_K; i++) {
        const uint8_t *blk = (const uint8_t *)w + (uint64_t)i * bytes;
        switch (type) {
        case QT_IQ2_XXS: iq2_xxs_block(blk, &b); break;
        case QT_IQ2_XS: iq2_xs_block(blk, &b); break;
        case QT_IQ2_S: iq2_s_block(blk, &b); break;
        case QT_IQ3_XXS: iq3_xxs_block(blk, &b); break;
        case QT_IQ3_S: iq3_s_block(blk, &b); break;
        case QT_IQ1_S: iq1_s_block(blk, &b); break;
        default: iq1_m_block(blk, &b); break;
        }
        const int16x8_t ls0 = vld1q_s16(b.ls), ls1 = vld1q_s16(b.ls + 8);
        for (int r = 0; r < nr; r++) {
            const block_q8_K *y = row_k(a, stride, r, i);
            const int32_t s = scaled_sum256(b.q, ls0, ls1, y->qs);
            if (!iq1) {
                if (panel)
                    sumf[r] = fmaf((float)s, (b.d * post) * y->d, sumf[r]);
                else
                    sumf[r] += b.d * y->d * (float)s;
                continue;
            }
            /* IQ1: sumi = sum(ls q y), shift = sum(ls sign y); IQ1_M's s is 8 sumi + shift */
            const int32_t shift = type == QT_IQ1_S ? iq1_s_shift(b.lsd, y->bsums)
                                  : panel          ? 0
                                                   : scaled_sum256(b.dv, ls0, ls1, y->qs);
            const int32_t sumi = type == QT_IQ1_S ? s : (s - shift) / 8;
            if (panel)
                sumf[r] = fmaf((float)(type == QT_IQ1_S ? 8 * s + shift : s), (b.d * post) * y->d,
                               sumf[r]);
            else
                sumf[r] += b.d * y->d * ((float)sumi + post * (float)shift);
        }
    }
    for (int r = 0; r < nr; r++)
        out[r] = iq1 || panel ? sumf[r] : post * sumf[r];
}

/* The single-row and four-row entry points of both orders for one IQ type. */
#define IQ_ENTRY_POINTS(NAME, TYPE)                                                                \
    static float dot_##NAME(const void *w, const void *a, int64_t n) {                             \
        float o;                                                                                   \
        iq_rows(TYPE, 0, w, a, 0, n, 1, &o);                                                       \
        return o;                                                                                  \
    }                                                                                              \
    static void dot4_##NAME(const void *w, const void *a, uint64_t stride, int64_t n,              \
                            float *out) {                                                          \
        iq_rows(TYPE, 0, w, a, stride, n, 4, out);                                                 \
    }                                                                                              \
    static float panel_##NAME(const void *w, const void *a, int64_t n) {                           \
        float o;                                                                                   \
        iq_rows(TYPE, 1, w, a, 0, n, 1, &o);                                                       \
        return o;                                                                                  \
    }                                                                                              \
    static void panel4_##NAME(const void *w, const void *a, uint64_t stride, int64_t n,            \
                              float *out) {                                                        \
        iq_rows(TYPE, 1, w, a, stride, n, 4, out);                                                 \
    }

IQ_ENTRY_POINTS(iq2_xxs, QT_IQ2_XXS)
IQ_ENTRY_POINTS(iq2_xs, QT_IQ2_XS)
IQ_ENTRY_POINTS(iq2_s, QT_IQ2_S)
IQ_ENTRY_POINTS(iq3_xxs, QT_IQ3_XXS)
IQ_ENTRY_POINTS(iq3_s, QT_IQ3_S)
IQ_ENTRY_POINTS(iq1_s, QT_IQ1_S)
IQ_ENTRY_POINTS(iq1_m, QT_IQ1_M)

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

/* The single-row and four-row entry points of a panel kernel NAME##_prows (the same code
 * per row, as ENTRY_POINTS). */
#define PANEL_ENTRY_POINTS(NAME)                                                                   \
    static float panel_##NAME(const void *w, const void *a, int64_t n) {                           \
        float o;                                                                                   \
        NAME##_prows(w, a, 0, n, 1, &o);                                                           \
        return o;                                                                                  \
    }                                                                                              \
    static void panel4_##NAME(const void *w, const void *a, uint64_t stride, int64_t n,            \
                              float *out) {                                                        \
        NAME##_prows(w, a, stride, n, 4, out);                                                     \
    }

/* F32: x[i] * y[i] fused-multiply-added into lane i % 16 (four vectors), the lanes folded
 * pairwise (w = 8, 4, 2, 1), then the tail added one by one, unfused. */
static inline __attribute__((always_inline)) void
f32_prows(const void *w, const void *a, uint64_t stride, int64_t n, int nr, float *out) {
    const float *x = w;
    float32x4_t l[4][4];
    for (int r = 0; r < 4; r++)
        for (int k = 0; k < 4; k++)
            l[r][k] = vdupq_n_f32(0);
    const int64_t np = n & ~(int64_t)15;
    for (int64_t i = 0; i < np; i += 16)
        for (int k = 0; k < 4; k++) {
            const float32x4_t xv = vld1q_f32(x + i + 4 * k);
            for (int r = 0; r < nr; r++) {
                const float *y = (const float *)((const uint8_t *)a + r * stride);
                l[r][k] = vfmaq_f32(l[r][k], xv, vld1q_f32(y + i + 4 * k));
            }
        }
    for (int r = 0; r < nr; r++) {
        const float *y = (const float *)((const uint8_t *)a + r * stride);
        const float32x4_t c = vaddq_f32(vaddq_f32(l[r][0], l[r][2]), /* w = 8, then 4 */
                                        vaddq_f32(l[r][1], l[r][3]));
        const float32x2_t h = vadd_f32(vget_low_f32(c), vget_high_f32(c)); /* w = 2 */
        float sum = vget_lane_f32(h, 0) + vget_lane_f32(h, 1);             /* w = 1 */
        for (int64_t i = np; i < n; i++)
            sum += x[i] * y[i];
        out[r] = sum;
    }
}
PANEL_ENTRY_POINTS(f32)

/* IQ4_NL against Q8_0 (tinyBLAS): lane l of eight = fma(dw * dy, products 4l..4l+3, lane),
 * folded as ((l0+l4)+(l2+l6))+((l1+l5)+(l3+l7)). */
static inline __attribute__((always_inline)) void
iq4_nl_prows(const void *w, const void *a, uint64_t stride, int64_t n, int nr, float *out) {
    const block_iq4_nl *x = w;
    const int8x16_t tab = vld1q_s8(kvalues_iq4nl);
    float32x4_t acc[4][2];
    for (int r = 0; r < 4; r++)
        acc[r][0] = acc[r][1] = vdupq_n_f32(0);
    for (int64_t i = 0; i < n / 32; i++) {
        const uint8x16_t q = vld1q_u8(x[i].qs);
        const int8x16_t w0 = vqtbl1q_s8(tab, vandq_u8(q, vdupq_n_u8(15)));
        const int8x16_t w1 = vqtbl1q_s8(tab, vshrq_n_u8(q, 4));
        for (int r = 0; r < nr; r++) {
            const block_q8_0 *y = (const block_q8_0 *)((const uint8_t *)a + r * stride) + i;
            const float d = f16(x[i].d) * f16(y->d);
            acc[r][0] = vfmaq_n_f32(acc[r][0], vcvtq_f32_s32(quad_sums(w0, vld1q_s8(y->qs))), d);
            acc[r][1] =
                vfmaq_n_f32(acc[r][1], vcvtq_f32_s32(quad_sums(w1, vld1q_s8(y->qs + 16))), d);
        }
    }
    for (int r = 0; r < nr; r++) {
        const float32x4_t c = vaddq_f32(acc[r][0], acc[r][1]);
        const float32x2_t h = vadd_f32(vget_low_f32(c), vget_high_f32(c));
        out[r] = vget_lane_f32(h, 0) + vget_lane_f32(h, 1);
    }
}
PANEL_ENTRY_POINTS(iq4_nl)

/* IQ4_XS: per 256-weight block the exact integer sum of scale(ib) * (32-weight dot), then
 * acc = fma((float)isum, dw * dy, acc). */
static inline __attribute__((always_inline)) void
iq4_xs_prows(const void *w, const void *a, uint64_t stride, int64_t n, int nr, float *out) {
    const block_iq4_xs *x = w;
    const int8x16_t tab = vld1q_s8(kvalues_iq4nl);
    float acc[4] = {0, 0, 0, 0};
    for (int64_t i = 0; i < n / QK_K; i++) {
        int8x16_t wv[16];
        int sc[8];
        for (int ib = 0; ib < QK_K / 32; ib++) {
            const int lo = (x[i].scales_l[ib / 2] >> (4 * (ib % 2))) & 0xf;
            const int hi = (x[i].scales_h >> (2 * ib)) & 3;
            sc[ib] = (lo | hi << 4) - 32;
            const uint8x16_t q = vld1q_u8(x[i].qs + 16 * ib);
            wv[2 * ib] = vqtbl1q_s8(tab, vandq_u8(q, vdupq_n_u8(15)));
            wv[2 * ib + 1] = vqtbl1q_s8(tab, vshrq_n_u8(q, 4));
        }
        const float d_w = f16(x[i].d);
        for (int r = 0; r < nr; r++) {
            const block_q8_K *y = row_k(a, stride, r, i);
            int32_t isum = 0;
            for (int ib = 0; ib < QK_K / 32; ib++)
                isum += sc[ib] * sumi32(wv[2 * ib], wv[2 * ib + 1], y->qs + 32 * ib);
            acc[r] = fmaf((float)isum, d_w * y->d, acc[r]);
        }
    }
    for (int r = 0; r < nr; r++)
        out[r] = acc[r];
}
PANEL_ENTRY_POINTS(iq4_xs)

static qt_dot_fn neon_panel_table(uint32_t type) {
    switch (type) {
    case QT_F32: return panel_f32;
    case QT_IQ4_NL: return panel_iq4_nl;
    case QT_IQ4_XS: return panel_iq4_xs;
    case QT_IQ2_XXS: return panel_iq2_xxs;
    case QT_IQ2_XS: return panel_iq2_xs;
    case QT_IQ2_S: return panel_iq2_s;
    case QT_IQ3_XXS: return panel_iq3_xxs;
    case QT_IQ3_S: return panel_iq3_s;
    case QT_IQ1_S: return panel_iq1_s;
    case QT_IQ1_M: return panel_iq1_m;
    default: return NULL;
    }
}

/* The four-row forms of the panel kernels. */
static qt_dot4_fn neon_panel_table4(uint32_t type) {
    switch (type) {
    case QT_F32: return panel4_f32;
    case QT_IQ4_NL: return panel4_iq4_nl;
    case QT_IQ4_XS: return panel4_iq4_xs;
    case QT_IQ2_XXS: return panel4_iq2_xxs;
    case QT_IQ2_XS: return panel4_iq2_xs;
    case QT_IQ2_S: return panel4_iq2_s;
    case QT_IQ3_XXS: return panel4_iq3_xxs;
    case QT_IQ3_S: return panel4_iq3_s;
    case QT_IQ1_S: return panel4_iq1_s;
    case QT_IQ1_M: return panel4_iq1_m;
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
    case QT_F16: return dot_f16;
    case QT_BF16: return dot_bf16;
    case QT_IQ2_XXS: return dot_iq2_xxs;
    case QT_IQ2_XS: return dot_iq2_xs;
    case QT_IQ2_S: return dot_iq2_s;
    case QT_IQ3_XXS: return dot_iq3_xxs;
    case QT_IQ3_S: return dot_iq3_s;
    case QT_IQ1_S: return dot_iq1_s;
    case QT_IQ1_M: return dot_iq1_m;
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
    case QT_F16: return dot4_f16;
    case QT_BF16: return dot4_bf16;
    case QT_IQ2_XXS: return dot4_iq2_xxs;
    case QT_IQ2_XS: return dot4_iq2_xs;
    case QT_IQ2_S: return dot4_iq2_s;
    case QT_IQ3_XXS: return dot4_iq3_xxs;
    case QT_IQ3_S: return dot4_iq3_s;
    case QT_IQ1_S: return dot4_iq1_s;
    case QT_IQ1_M: return dot4_iq1_m;
    default: return NULL;
    }
}

#endif
