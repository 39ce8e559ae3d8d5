/* quant_ref.c — scalar reference kernels for the float, legacy (Q4_0 … Q8_1) and
 * K-quant (Q2_K … Q8_K) ggml types: decode, activation quantisation, dot
 * products and weight quantisation. It also owns the public dispatchers of the
 * scalar reference and hands IQ types and MXFP4 to quant_iq.c.
 *
 * What must match ggml bit for bit, and why:
 *   - decoding (qt_dequant_ref) follows ggml's dequantize_row_* arithmetic, in
 *     the same order of float operations, so a decoded tensor equals ggml's;
 *   - activation quantisation (qt_quantize_act_ref) reproduces what llama.cpp's
 *     x86 CPU backend (AVX2 build) feeds its dot products: Q8_0/Q8_1 use
 *     d = amax/127 and q = round-half-even(x * (127/amax)); Q8_K keeps the sign
 *     of the extreme value in d and rounds half to even (ggml's nearest_int);
 *   - dot products follow the structure of ggml's generic vec_dot_*: exact
 *     integer sums per sub-block, then float scaling and accumulation in the same
 *     order. SIMD paths regroup the float sums, so they agree to float rounding.
 * One caveat: ggml is usually compiled with floating-point contraction allowed,
 * so an `a*b + c` there may be a fused multiply-add; petrel is built as ISO C11
 * (no contraction), so such expressions can differ in the last bit.
 *
 * The weight quantisers are NOT llama-quantize: they are our own least-squares
 * searches, sound but not bit-identical. They serve tests and synthetic models.
 *
 * Non-goals: speed (dispatch.c and the SIMD files own the hot path).
 */
#include <math.h>
#include <string.h>

#include "common.h"
#include "kernels/quant.h"
#include "kernels/quant_impl.h"

static inline float f16(pt_f16 h) {
    return qt_f16_to_f32(h);
}

/* Round to nearest, ties to even, for |v| < 2^22. Adding 1.5 * 2^23 pushes the
 * fraction out of the mantissa with the FPU's default rounding (ties to even);
 * the integer is left in the low mantissa bits. This is ggml's nearest_int, and
 * the activation quantisers must round exactly like it. */
static inline int nearest_int(float v) {
    float t = v + 12582912.0f;
    int32_t i;
    memcpy(&i, &t, sizeof i);
    return (i & 0x007fffff) - 0x00400000;
}

/* Round v to the nearest integer in [lo, hi]; clamps first so that huge, infinite
 * or NaN inputs (NaN gives lo) never reach nearest_int's limited range. */
static inline int qround(float v, int lo, int hi) {
    if (!(v > (float)lo)) return lo;
    if (v > (float)hi) return hi;
    return nearest_int(v);
}

/* The 5th bits of Q5_0/Q5_1, assembled byte by byte so the file's little-endian
 * order is honoured on any host. */
static inline uint32_t load_u32le(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* Q4_K/Q5_K pack 8 six-bit scales and 8 six-bit mins into 12 bytes: sub-blocks
 * 0..3 keep theirs in the low 6 bits of bytes 0..3 (scale) and 4..7 (min);
 * sub-blocks 4..7 keep their low 4 bits in bytes 8..11 and their top 2 bits in
 * the spare top bits of bytes 0..7. */
static inline void k4_scale_min(int j, const uint8_t *q, int *sc, int *mn) {
    if (j < 4) {
        *sc = q[j] & 63;
        *mn = q[j + 4] & 63;
    } else {
        *sc = (q[j + 4] & 0x0f) | ((q[j - 4] >> 6) << 4);
        *mn = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
    }
}

static void k4_pack_scale_min(uint8_t q[12], const uint8_t ls[8], const uint8_t lm[8]) {
    memset(q, 0, 12);
    for (int j = 0; j < 8; j++) {
        if (j < 4) {
            q[j] = ls[j];
            q[j + 4] = lm[j];
        } else {
            q[j + 4] = (uint8_t)((ls[j] & 0x0f) | ((lm[j] & 0x0f) << 4));
            q[j - 4] |= (uint8_t)((ls[j] >> 4) << 6);
            q[j] |= (uint8_t)((lm[j] >> 4) << 6);
        }
    }
}

/* Q3_K packs 16 six-bit scales (stored +32) into 12 bytes: low 4 bits of scale j
 * in byte j (j < 8, low nibble) or byte j-8 (high nibble); top 2 bits in byte
 * 8 + j%4 at bit 2*(j/4). Returns the signed scale. */
static inline int q3k_scale(int j, const uint8_t *q) {
    int lo = j < 8 ? (q[j] & 0x0f) : (q[j - 8] >> 4);
    int hi = (q[8 + j % 4] >> (2 * (j / 4))) & 3;
    return (lo | hi << 4) - 32;
}

/* ===== Decoding ===== */

static void dq_q4_0(const block_q4_0 *b, float *y, int64_t nb) {
    for (int64_t i = 0; i < nb; i++, y += QK4_0) {
        const float d = f16(b[i].d);
        for (int j = 0; j < QK4_0 / 2; j++) {
            y[j] = ((b[i].qs[j] & 0x0f) - 8) * d;
            y[j + QK4_0 / 2] = ((b[i].qs[j] >> 4) - 8) * d;
        }
    }
}

static void dq_q4_1(const block_q4_1 *b, float *y, int64_t nb) {
    for (int64_t i = 0; i < nb; i++, y += QK4_1) {
        const float d = f16(b[i].d), m = f16(b[i].m);
        for (int j = 0; j < QK4_1 / 2; j++) {
            y[j] = (b[i].qs[j] & 0x0f) * d + m;
            y[j + QK4_1 / 2] = (b[i].qs[j] >> 4) * d + m;
        }
    }
}

static void dq_q5_0(const block_q5_0 *b, float *y, int64_t nb) {
    for (int64_t i = 0; i < nb; i++, y += QK5_0) {
        const float d = f16(b[i].d);
        const uint32_t qh = load_u32le(b[i].qh);
        for (int j = 0; j < QK5_0 / 2; j++) {
            int h0 = (qh >> j) & 1, h1 = (qh >> (j + 16)) & 1;
            y[j] = (((b[i].qs[j] & 0x0f) | h0 << 4) - 16) * d;
            y[j + QK5_0 / 2] = (((b[i].qs[j] >> 4) | h1 << 4) - 16) * d;
        }
    }
}

static void dq_q5_1(const block_q5_1 *b, float *y, int64_t nb) {
    for (int64_t i = 0; i < nb; i++, y += QK5_1) {
        const float d = f16(b[i].d), m = f16(b[i].m);
        const uint32_t qh = load_u32le(b[i].qh);
        for (int j = 0; j < QK5_1 / 2; j++) {
            int h0 = (qh >> j) & 1, h1 = (qh >> (j + 16)) & 1;
            y[j] = ((b[i].qs[j] & 0x0f) | h0 << 4) * d + m;
            y[j + QK5_1 / 2] = ((b[i].qs[j] >> 4) | h1 << 4) * d + m;
        }
    }
}

static void dq_q8_0(const block_q8_0 *b, float *y, int64_t nb) {
    for (int64_t i = 0; i < nb; i++, y += QK8_0) {
        const float d = f16(b[i].d);
        for (int j = 0; j < QK8_0; j++)
            y[j] = b[i].qs[j] * d;
    }
}

static void dq_q8_1(const block_q8_1 *b, float *y, int64_t nb) {
    for (int64_t i = 0; i < nb; i++, y += QK8_1) {
        const float d = f16(b[i].d);
        for (int j = 0; j < QK8_1; j++)
            y[j] = b[i].qs[j] * d;
    }
}

/* Q2_K, Q3_K: each 128-weight half uses 32 bytes of qs; weight 128h + 32g + l
 * sits in bits 2g..2g+1 of qs[32h + l]. Sub-blocks are 16 consecutive weights. */
static void dq_q2_k(const block_q2_K *b, float *y, int64_t nb) {
    for (int64_t i = 0; i < nb; i++) {
        const float d = f16(b[i].d), dmin = f16(b[i].dmin);
        const uint8_t *q = b[i].qs;
        int is = 0;
        for (int h = 0; h < 2; h++, q += 32) {
            for (int g = 0; g < 4; g++) {
                for (int half = 0; half < 2; half++) {
                    const uint8_t sc = b[i].scales[is++];
                    const float dl = d * (sc & 0x0f), ml = dmin * (sc >> 4);
                    const uint8_t *qq = q + 16 * half;
                    for (int l = 0; l < 16; l++)
                        *y++ = dl * ((qq[l] >> (2 * g)) & 3) - ml;
                }
            }
        }
    }
}

/* Q3_K: the third bit of weight p is bit p/32 of hmask[p % 32]; a clear bit
 * means "subtract 4" (values -4..3). */
static void dq_q3_k(const block_q3_K *b, float *y, int64_t nb) {
    for (int64_t i = 0; i < nb; i++) {
        const float d = f16(b[i].d);
        const uint8_t *q = b[i].qs;
        int is = 0;
        for (int h = 0; h < 2; h++, q += 32) {
            for (int g = 0; g < 4; g++) {
                const uint8_t m = (uint8_t)(1u << (4 * h + g));
                for (int half = 0; half < 2; half++) {
                    const float dl = d * q3k_scale(is++, b[i].scales);
                    for (int l = 16 * half; l < 16 * half + 16; l++) {
                        int v = ((q[l] >> (2 * g)) & 3) - ((b[i].hmask[l] & m) ? 0 : 4);
                        *y++ = dl * v;
                    }
                }
            }
        }
    }
}

/* Q4_K, Q5_K: each 64-weight chunk c uses qs[32c .. 32c+31]: low nibbles are
 * sub-block 2c, high nibbles sub-block 2c+1; Q5_K's 5th bits are bits 2c and
 * 2c+1 of qh[l]. */
static void dq_q4_k(const block_q4_K *b, float *y, int64_t nb) {
    for (int64_t i = 0; i < nb; i++) {
        const float d = f16(b[i].d), dmin = f16(b[i].dmin);
        const uint8_t *q = b[i].qs;
        for (int c = 0; c < 4; c++, q += 32) {
            int sc, mn;
            k4_scale_min(2 * c, b[i].scales, &sc, &mn);
            const float d1 = d * sc, m1 = dmin * mn;
            k4_scale_min(2 * c + 1, b[i].scales, &sc, &mn);
            const float d2 = d * sc, m2 = dmin * mn;
            for (int l = 0; l < 32; l++)
                *y++ = d1 * (q[l] & 0x0f) - m1;
            for (int l = 0; l < 32; l++)
                *y++ = d2 * (q[l] >> 4) - m2;
        }
    }
}

static void dq_q5_k(const block_q5_K *b, float *y, int64_t nb) {
    for (int64_t i = 0; i < nb; i++) {
        const float d = f16(b[i].d), dmin = f16(b[i].dmin);
        const uint8_t *q = b[i].qs, *qh = b[i].qh;
        for (int c = 0; c < 4; c++, q += 32) {
            int sc, mn;
            k4_scale_min(2 * c, b[i].scales, &sc, &mn);
            const float d1 = d * sc, m1 = dmin * mn;
            k4_scale_min(2 * c + 1, b[i].scales, &sc, &mn);
            const float d2 = d * sc, m2 = dmin * mn;
            const uint8_t u1 = (uint8_t)(1u << (2 * c)), u2 = (uint8_t)(2u << (2 * c));
            for (int l = 0; l < 32; l++)
                *y++ = d1 * ((q[l] & 0x0f) + ((qh[l] & u1) ? 16 : 0)) - m1;
            for (int l = 0; l < 32; l++)
                *y++ = d2 * ((q[l] >> 4) + ((qh[l] & u2) ? 16 : 0)) - m2;
        }
    }
}

/* Q6_K: per 128-weight half, ql holds 64 bytes and qh 32; weight l + 32k
 * (k = 0..3) takes nibble (k/2) of ql[l + 32*(k%2)] and bits 2k..2k+1 of qh[l]. */
static void dq_q6_k(const block_q6_K *b, float *y, int64_t nb) {
    for (int64_t i = 0; i < nb; i++) {
        const float d = f16(b[i].d);
        const uint8_t *ql = b[i].ql, *qh = b[i].qh;
        const int8_t *sc = b[i].scales;
        for (int h = 0; h < 2; h++, y += 128, ql += 64, qh += 32, sc += 8) {
            for (int l = 0; l < 32; l++) {
                const int is = l / 16;
                const int q1 = ((ql[l] & 0x0f) | ((qh[l] >> 0) & 3) << 4) - 32;
                const int q2 = ((ql[l + 32] & 0x0f) | ((qh[l] >> 2) & 3) << 4) - 32;
                const int q3 = ((ql[l] >> 4) | ((qh[l] >> 4) & 3) << 4) - 32;
                const int q4 = ((ql[l + 32] >> 4) | ((qh[l] >> 6) & 3) << 4) - 32;
                y[l] = d * sc[is] * q1;
                y[l + 32] = d * sc[is + 2] * q2;
                y[l + 64] = d * sc[is + 4] * q3;
                y[l + 96] = d * sc[is + 6] * q4;
            }
        }
    }
}

static void dq_q8_k(const block_q8_K *b, float *y, int64_t nb) {
    for (int64_t i = 0; i < nb; i++, y += QK_K)
        for (int j = 0; j < QK_K; j++)
            y[j] = b[i].qs[j] * b[i].d;
}

void qt_dequant_ref(uint32_t type, const void *src, float *dst, int64_t n) {
    const qt_traits *t = qt_get(type);
    PT_ASSERT(t && t->decodes && n >= 0 && n % t->block == 0);
    if (iq_handles(type)) {
        iq_dequant(type, src, dst, n);
        return;
    }
    const int64_t nb = n / t->block;
    switch (type) {
    case QT_F32: memcpy(dst, src, (size_t)n * sizeof(float)); break;
    case QT_F16:
        for (int64_t i = 0; i < n; i++)
            dst[i] = qt_f16_to_f32(((const pt_f16 *)src)[i]);
        break;
    case QT_BF16:
        for (int64_t i = 0; i < n; i++)
            dst[i] = qt_bf16_to_f32(((const pt_bf16 *)src)[i]);
        break;
    case QT_Q4_0: dq_q4_0(src, dst, nb); break;
    case QT_Q4_1: dq_q4_1(src, dst, nb); break;
    case QT_Q5_0: dq_q5_0(src, dst, nb); break;
    case QT_Q5_1: dq_q5_1(src, dst, nb); break;
    case QT_Q8_0: dq_q8_0(src, dst, nb); break;
    case QT_Q8_1: dq_q8_1(src, dst, nb); break;
    case QT_Q2_K: dq_q2_k(src, dst, nb); break;
    case QT_Q3_K: dq_q3_k(src, dst, nb); break;
    case QT_Q4_K: dq_q4_k(src, dst, nb); break;
    case QT_Q5_K: dq_q5_k(src, dst, nb); break;
    case QT_Q6_K: dq_q6_k(src, dst, nb); break;
    case QT_Q8_K: dq_q8_k(src, dst, nb); break;
    default: pt_assert_fail(__FILE__, __LINE__, "qt_dequant_ref: no decoder for this type");
    }
}

/* ===== Activation quantisation ===== */

/* Q8_0 and Q8_1 as llama.cpp's AVX2 quantize_row_q8_0/q8_1: the multiplier is
 * 127/amax (not 1/d, which differs in the last bit) and _mm256_round_ps rounds
 * half to even; the int8 pack saturates. Q8_1's s is fp16(d * sum(q)) with the
 * unrounded float d. `s` may be NULL (Q8_0). */
static void q8_block_x86(const float *x, int8_t *qs, pt_f16 *d_out, pt_f16 *s_out) {
    float amax = 0.0f;
    for (int j = 0; j < 32; j++)
        amax = fmaxf(amax, fabsf(x[j]));
    const float d = amax / 127.0f;
    const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
    int sum = 0;
    for (int j = 0; j < 32; j++) {
        int v = qround(x[j] * id, -128, 127);
        qs[j] = (int8_t)v;
        sum += v;
    }
    *d_out = qt_f32_to_f16(d);
    if (s_out) *s_out = qt_f32_to_f16(d * (float)sum);
}

/* Q8_K as ggml's quantize_row_q8_K_ref (which the x86 backend calls): the
 * extreme value (first one in index order) maps to -127, so d = max/-127 has
 * the opposite sign of that value; bsums feed the K-quant min terms. */
static void q8k_block(const float *x, block_q8_K *y) {
    float amax = 0.0f, max = 0.0f;
    for (int j = 0; j < QK_K; j++) {
        float ax = fabsf(x[j]);
        if (ax > amax) {
            amax = ax;
            max = x[j];
        }
    }
    if (amax == 0.0f) {
        memset(y, 0, sizeof *y);
        return;
    }
    const float iscale = -127.0f / max;
    for (int j = 0; j < QK_K; j++) {
        int v = nearest_int(iscale * x[j]);
        y->qs[j] = (int8_t)(v < 127 ? v : 127);
    }
    for (int j = 0; j < QK_K / 16; j++) {
        int sum = 0;
        for (int l = 0; l < 16; l++)
            sum += y->qs[16 * j + l];
        y->bsums[j] = (int16_t)sum;
    }
    y->d = 1.0f / iscale;
}

void qt_quantize_act_ref(uint32_t act_type, const float *x, void *dst, int64_t n) {
    const qt_traits *t = qt_get(act_type);
    PT_ASSERT(t && n >= 0 && n % t->block == 0);
    const int64_t nb = n / t->block;
    switch (act_type) {
    case QT_F32: memcpy(dst, x, (size_t)n * sizeof(float)); break;
    case QT_F16:
        for (int64_t i = 0; i < n; i++)
            ((pt_f16 *)dst)[i] = qt_f32_to_f16(x[i]);
        break;
    case QT_BF16:
        for (int64_t i = 0; i < n; i++)
            ((pt_bf16 *)dst)[i] = qt_f32_to_bf16(x[i]);
        break;
    case QT_Q8_0: {
        block_q8_0 *y = dst;
        for (int64_t i = 0; i < nb; i++)
            q8_block_x86(x + 32 * i, y[i].qs, &y[i].d, NULL);
        break;
    }
    case QT_Q8_1: {
        block_q8_1 *y = dst;
        for (int64_t i = 0; i < nb; i++)
            q8_block_x86(x + 32 * i, y[i].qs, &y[i].d, &y[i].s);
        break;
    }
    case QT_Q8_K: {
        block_q8_K *y = dst;
        for (int64_t i = 0; i < nb; i++)
            q8k_block(x + QK_K * i, &y[i]);
        break;
    }
    default: pt_assert_fail(__FILE__, __LINE__, "qt_quantize_act_ref: not an activation type");
    }
}

/* ===== Dot products ===== */

/* F32: llama.cpp's single-row order, ggml_vec_dot_f32 (qt_f32_dot_ref); its
 * batches go through tinyBLAS instead (f32_panel below, which is what the
 * engine's matmuls use for F32 rows, see qt_mm_dot_upto). F16/BF16: float
 * products summed sequentially in float (llama.cpp accumulates these in float
 * lanes too, grouped differently). */
static float dot_f32(const float *w, const float *a, int64_t n) {
    return qt_f32_dot_ref(w, a, n);
}

static float dot_f16(const pt_f16 *w, const pt_f16 *a, int64_t n) {
    float s = 0.0f;
    for (int64_t i = 0; i < n; i++)
        s += qt_f16_to_f32(w[i]) * qt_f16_to_f32(a[i]);
    return s;
}

static float dot_bf16(const pt_bf16 *w, const pt_bf16 *a, int64_t n) {
    float s = 0.0f;
    for (int64_t i = 0; i < n; i++)
        s += qt_bf16_to_f32(w[i]) * qt_bf16_to_f32(a[i]);
    return s;
}

static float dot_q4_0(const block_q4_0 *x, const block_q8_0 *y, int64_t nb) {
    float sumf = 0.0f;
    for (int64_t i = 0; i < nb; i++) {
        int sumi = 0;
        for (int j = 0; j < 16; j++) {
            sumi += ((x[i].qs[j] & 0x0f) - 8) * y[i].qs[j];
            sumi += ((x[i].qs[j] >> 4) - 8) * y[i].qs[j + 16];
        }
        sumf += sumi * f16(x[i].d) * f16(y[i].d);
    }
    return sumf;
}

/* Q4_1/Q5_1: the min term uses the activation block's s = d*sum(q), which is
 * why their activations are Q8_1. */
/* Q4_1 / Q5_1 in the order of ggml's x86 (AVX2) vec_dot, which llama.cpp's CPU
 * backend uses for every row count (no batched kernel takes these types): the
 * integer products of weights 4l..4l+3 summed into lane l of 8, each lane
 * fused-multiply-added with d_x * d_y per block, the lanes folded as
 * hsum_float_8; the offsets m * s accumulated apart by fused multiply-adds in
 * one float (the compiler contracts ggml's `summs += m * s`) and added last. */
static float q1_fold8(const float *a) {
    return ((a[0] + a[4]) + (a[2] + a[6])) + ((a[1] + a[5]) + (a[3] + a[7]));
}

static float dot_q4_1(const block_q4_1 *x, const block_q8_1 *y, int64_t nb) {
    float acc[8] = {0}, summs = 0.0f;
    for (int64_t i = 0; i < nb; i++) {
        summs = fmaf(f16(x[i].m), f16(y[i].s), summs);
        const float dd = f16(x[i].d) * f16(y[i].d);
        for (int l = 0; l < 8; l++) {
            int sumi = 0;
            for (int b = 4 * l; b < 4 * l + 4; b++)
                sumi += (b < 16 ? x[i].qs[b] & 0x0f : x[i].qs[b - 16] >> 4) * y[i].qs[b];
            acc[l] = fmaf((float)sumi, dd, acc[l]);
        }
    }
    return q1_fold8(acc) + summs;
}

static float dot_q5_0(const block_q5_0 *x, const block_q8_0 *y, int64_t nb) {
    float sumf = 0.0f;
    for (int64_t i = 0; i < nb; i++) {
        const uint32_t qh = load_u32le(x[i].qh);
        int sumi = 0;
        for (int j = 0; j < 16; j++) {
            int h0 = (qh >> j) & 1, h1 = (qh >> (j + 16)) & 1;
            sumi += (((x[i].qs[j] & 0x0f) | h0 << 4) - 16) * y[i].qs[j];
            sumi += (((x[i].qs[j] >> 4) | h1 << 4) - 16) * y[i].qs[j + 16];
        }
        sumf += (f16(x[i].d) * f16(y[i].d)) * sumi;
    }
    return sumf;
}

static float dot_q5_1(const block_q5_1 *x, const block_q8_1 *y, int64_t nb) {
    float acc[8] = {0}, summs = 0.0f;
    for (int64_t i = 0; i < nb; i++) {
        summs = fmaf(f16(x[i].m), f16(y[i].s), summs);
        const uint32_t qh = load_u32le(x[i].qh);
        const float dd = f16(x[i].d) * f16(y[i].d);
        for (int l = 0; l < 8; l++) {
            int sumi = 0;
            for (int b = 4 * l; b < 4 * l + 4; b++) {
                const int lo = b < 16 ? x[i].qs[b] & 0x0f : x[i].qs[b - 16] >> 4;
                sumi += (lo | (int)((qh >> b) & 1) << 4) * y[i].qs[b];
            }
            acc[l] = fmaf((float)sumi, dd, acc[l]);
        }
    }
    return q1_fold8(acc) + summs;
}

static float dot_q8_0(const block_q8_0 *x, const block_q8_0 *y, int64_t nb) {
    float sumf = 0.0f;
    for (int64_t i = 0; i < nb; i++) {
        int sumi = 0;
        for (int j = 0; j < 32; j++)
            sumi += x[i].qs[j] * y[i].qs[j];
        sumf += sumi * (f16(x[i].d) * f16(y[i].d));
    }
    return sumf;
}

/* Q2_K: the min term is dmin * sum_j(min_j * bsum_j), taken from Q8_K's bsums. */
static float dot_q2_k(const block_q2_K *x, const block_q8_K *y, int64_t nb) {
    float sumf = 0.0f;
    for (int64_t i = 0; i < nb; i++) {
        const uint8_t *sc = x[i].scales;
        int summs = 0;
        for (int j = 0; j < 16; j++)
            summs += y[i].bsums[j] * (sc[j] >> 4);
        const float dall = y[i].d * f16(x[i].d);
        const float dmin = y[i].d * f16(x[i].dmin);
        const uint8_t *q2 = x[i].qs;
        const int8_t *q8 = y[i].qs;
        int isum = 0, is = 0;
        for (int h = 0; h < 2; h++, q2 += 32) {
            for (int g = 0; g < 4; g++, q8 += 32) {
                for (int half = 0; half < 2; half++) {
                    int isuml = 0;
                    for (int l = 16 * half; l < 16 * half + 16; l++)
                        isuml += q8[l] * ((q2[l] >> (2 * g)) & 3);
                    isum += (sc[is++] & 0x0f) * isuml;
                }
            }
        }
        sumf += dall * isum - dmin * summs;
    }
    return sumf;
}

/* Q3_K, Q4_K, Q5_K, Q6_K: ggml's generic code keeps 8 integer lanes (weight
 * index mod 8) per super-block, scales each lane by d into 8 float lanes that
 * live across super-blocks, and adds the lanes at the end (after the K4 min
 * terms). Integer sums are exact in any order, so only that float structure is
 * reproduced here: lane[p % 8] += scale(p/16 or p/32) * w[p] * a[p]. */
static float lanes_sum(float init, const float lanes[8]) {
    float s = init;
    for (int l = 0; l < 8; l++)
        s += lanes[l];
    return s;
}

static float dot_q3_k(const block_q3_K *x, const block_q8_K *y, int64_t nb) {
    float lanes[8] = {0};
    for (int64_t i = 0; i < nb; i++) {
        int32_t acc[8] = {0};
        const uint8_t *q = x[i].qs;
        const int8_t *q8 = y[i].qs;
        int p = 0;
        for (int h = 0; h < 2; h++, q += 32) {
            for (int g = 0; g < 4; g++) {
                const uint8_t m = (uint8_t)(1u << (4 * h + g));
                for (int l = 0; l < 32; l++, p++) {
                    int v = ((q[l] >> (2 * g)) & 3) - ((x[i].hmask[l] & m) ? 0 : 4);
                    acc[p % 8] += q3k_scale(p / 16, x[i].scales) * (v * q8[p]);
                }
            }
        }
        const float d = f16(x[i].d) * y[i].d;
        for (int l = 0; l < 8; l++)
            lanes[l] += d * acc[l];
    }
    return lanes_sum(0.0f, lanes);
}

static float dot_q4_k(const block_q4_K *x, const block_q8_K *y, int64_t nb) {
    float lanes[8] = {0}, sumf = 0.0f;
    for (int64_t i = 0; i < nb; i++) {
        int sc[8], mn[8];
        for (int j = 0; j < 8; j++)
            k4_scale_min(j, x[i].scales, &sc[j], &mn[j]);
        int sumi = 0;
        for (int j = 0; j < 16; j++)
            sumi += y[i].bsums[j] * mn[j / 2];
        int32_t acc[8] = {0};
        const uint8_t *q = x[i].qs;
        const int8_t *q8 = y[i].qs;
        int p = 0;
        for (int c = 0; c < 4; c++, q += 32) {
            for (int l = 0; l < 32; l++, p++)
                acc[p % 8] += sc[2 * c] * ((q[l] & 0x0f) * q8[p]);
            for (int l = 0; l < 32; l++, p++)
                acc[p % 8] += sc[2 * c + 1] * ((q[l] >> 4) * q8[p]);
        }
        const float d = f16(x[i].d) * y[i].d;
        for (int l = 0; l < 8; l++)
            lanes[l] += d * acc[l];
        const float dmin = f16(x[i].dmin) * y[i].d;
        sumf -= dmin * sumi;
    }
    return lanes_sum(sumf, lanes);
}

static float dot_q5_k(const block_q5_K *x, const block_q8_K *y, int64_t nb) {
    float lanes[8] = {0}, sumf = 0.0f;
    for (int64_t i = 0; i < nb; i++) {
        int sc[8], mn[8];
        for (int j = 0; j < 8; j++)
            k4_scale_min(j, x[i].scales, &sc[j], &mn[j]);
        int sumi = 0;
        for (int j = 0; j < 16; j++)
            sumi += y[i].bsums[j] * mn[j / 2];
        int32_t acc[8] = {0};
        const uint8_t *q = x[i].qs, *qh = x[i].qh;
        const int8_t *q8 = y[i].qs;
        int p = 0;
        for (int c = 0; c < 4; c++, q += 32) {
            const uint8_t u1 = (uint8_t)(1u << (2 * c)), u2 = (uint8_t)(2u << (2 * c));
            for (int l = 0; l < 32; l++, p++) {
                int v = (q[l] & 0x0f) + ((qh[l] & u1) ? 16 : 0);
                acc[p % 8] += sc[2 * c] * (v * q8[p]);
            }
            for (int l = 0; l < 32; l++, p++) {
                int v = (q[l] >> 4) + ((qh[l] & u2) ? 16 : 0);
                acc[p % 8] += sc[2 * c + 1] * (v * q8[p]);
            }
        }
        const float d = f16(x[i].d) * y[i].d;
        for (int l = 0; l < 8; l++)
            lanes[l] += d * acc[l];
        const float dmin = f16(x[i].dmin) * y[i].d;
        sumf -= dmin * sumi;
    }
    return lanes_sum(sumf, lanes);
}

static float dot_q6_k(const block_q6_K *x, const block_q8_K *y, int64_t nb) {
    float lanes[8] = {0};
    for (int64_t i = 0; i < nb; i++) {
        int32_t acc[8] = {0};
        const uint8_t *ql = x[i].ql, *qh = x[i].qh;
        const int8_t *q8 = y[i].qs;
        for (int h = 0; h < 2; h++, ql += 64, qh += 32) {
            for (int l = 0; l < 32; l++) {
                const int v[4] = {
                    ((ql[l] & 0x0f) | ((qh[l] >> 0) & 3) << 4) - 32,
                    ((ql[l + 32] & 0x0f) | ((qh[l] >> 2) & 3) << 4) - 32,
                    ((ql[l] >> 4) | ((qh[l] >> 4) & 3) << 4) - 32,
                    ((ql[l + 32] >> 4) | ((qh[l] >> 6) & 3) << 4) - 32,
                };
                for (int k = 0; k < 4; k++) {
                    const int p = 128 * h + 32 * k + l;
                    acc[p % 8] += x[i].scales[p / 16] * (v[k] * q8[p]);
                }
            }
        }
        const float d = f16(x[i].d) * y[i].d;
        for (int l = 0; l < 8; l++)
            lanes[l] += d * acc[l];
    }
    return lanes_sum(0.0f, lanes);
}

/* ===== F32 kernels in ggml's lane order (quant.h) ===== */

float qt_f32_dot_ref(const float *x, const float *y, int64_t n) {
    float lanes[64] = {0};
    const int64_t np = n & ~(int64_t)63;
    for (int64_t i = 0; i < np; i += 64)
        for (int l = 0; l < 64; l++)
            lanes[l] = fmaf(x[i + l], y[i + l], lanes[l]);
    for (int w = 32; w >= 1; w /= 2)
        for (int l = 0; l < w; l++)
            lanes[l] += lanes[l + w];
    float sum = lanes[0];
    for (int64_t i = np; i < n; i++)
        sum += x[i] * y[i];
    return sum;
}

void qt_f32_axpy_ref(float *acc, float a, const float *x, int64_t n) {
    for (int64_t i = 0; i < n; i++)
        acc[i] = fmaf(a, x[i], acc[i]);
}

void qt_f32_dot2_ref(const float *x, const float *y0, const float *y1, int64_t n, float *out) {
    out[0] = qt_f32_dot_ref(x, y0, n);
    out[1] = qt_f32_dot_ref(x, y1, n);
}

float qt_dot_ref(uint32_t type, const void *w, const void *a, int64_t n) {
    const qt_traits *t = qt_get(type);
    PT_ASSERT(t && t->act_type >= 0 && n >= 0 && n % t->block == 0);
    if (iq_handles(type)) return iq_dot(type, w, a, n);
    const int64_t nb = n / t->block;
    switch (type) {
    case QT_F32: return dot_f32(w, a, n);
    case QT_F16: return dot_f16(w, a, n);
    case QT_BF16: return dot_bf16(w, a, n);
    case QT_Q4_0: return dot_q4_0(w, a, nb);
    case QT_Q4_1: return dot_q4_1(w, a, nb);
    case QT_Q5_0: return dot_q5_0(w, a, nb);
    case QT_Q5_1: return dot_q5_1(w, a, nb);
    case QT_Q8_0: return dot_q8_0(w, a, nb);
    case QT_Q2_K: return dot_q2_k(w, a, nb);
    case QT_Q3_K: return dot_q3_k(w, a, nb);
    case QT_Q4_K: return dot_q4_k(w, a, nb);
    case QT_Q5_K: return dot_q5_k(w, a, nb);
    case QT_Q6_K: return dot_q6_k(w, a, nb);
    default: pt_assert_fail(__FILE__, __LINE__, "qt_dot_ref: no dot product for this type");
    }
}

int qt_has_panel(uint32_t type) {
    return type == QT_IQ4_NL || type == QT_F32 || iq_has_panel(type);
}

/* tinyBLAS order for IQ4_NL against Q8_0: 8 float lanes, lane l accumulating
 * fma(dw * dy, sum of products 4l..4l+3, lane) over the blocks, then the
 * 8 -> 4 -> 2 -> 1 horizontal sum of the SIMD kernels. */
static float iq4_nl_panel(const block_iq4_nl *b, const block_q8_0 *y, int64_t nb) {
    float lane[8] = {0};
    for (int64_t i = 0; i < nb; i++) {
        int8_t q[32];
        for (int j = 0; j < 16; j++) {
            q[j] = kvalues_iq4nl[b[i].qs[j] & 0xf];
            q[j + 16] = kvalues_iq4nl[b[i].qs[j] >> 4];
        }
        const float d = qt_f16_to_f32(b[i].d) * qt_f16_to_f32(y[i].d);
        for (int l = 0; l < 8; l++) {
            int32_t s = 0;
            for (int k = 4 * l; k < 4 * l + 4; k++)
                s += q[k] * y[i].qs[k];
            lane[l] = fmaf(d, (float)s, lane[l]);
        }
    }
    float x[4];
    for (int l = 0; l < 4; l++)
        x[l] = lane[l] + lane[l + 4];
    return (x[0] + x[2]) + (x[1] + x[3]);
}

/* tinyBLAS order for F32 (AVX-512: one 16-float vector per output): x[i] *
 * y[i] fused-multiply-added into lane i % 16, the lanes folded pairwise
 * (_mm512_reduce_add_ps). llamafile takes a length that is a multiple of 16
 * only; any other tail is added one by one here. */
static float f32_panel(const float *x, const float *y, int64_t n) {
    float lane[16] = {0};
    const int64_t np = n & ~(int64_t)15;
    for (int64_t i = 0; i < np; i += 16)
        for (int l = 0; l < 16; l++)
            lane[l] = fmaf(x[i + l], y[i + l], lane[l]);
    for (int w = 8; w >= 1; w /= 2)
        for (int l = 0; l < w; l++)
            lane[l] += lane[l + w];
    float sum = lane[0];
    for (int64_t i = np; i < n; i++)
        sum += x[i] * y[i];
    return sum;
}

float qt_dot_panel_ref(uint32_t type, const void *w, const void *a, int64_t n) {
    PT_ASSERT(qt_has_panel(type) && n >= 0);
    if (type == QT_IQ4_NL) return iq4_nl_panel(w, a, n / QK4_NL);
    if (type == QT_F32) return f32_panel(w, a, n);
    PT_ASSERT(n % QK_K == 0);
    return iq_dot_panel(type, w, a, n);
}

/* ===== Weight quantisation =====
 *
 * Two least-squares fits do the work. Both try a few grid spacings around the
 * obvious one (extreme value on the last level) and, for each, solve for the
 * scale (and offset) that minimise the squared error given the rounded levels;
 * the best candidate wins. The super-block scales of the K-quants are then
 * quantised, and the weights re-rounded against the scales actually stored, so
 * the decoder sees the levels that best fit what it will multiply them by.
 */

/* Symmetric fit: x ≈ s * L with L in [-nmax, nmax-1]. The extreme value goes to
 * -nmax (via a negative grid step) because that side has the extra level. The
 * spacings tried are nmax ± 0.9 in steps of 0.1. Returns s (0 for an all-zero
 * group, with L = 0). */
static float fit_sym(int n, int nmax, const float *x, int8_t *L) {
    float amax = 0.0f, max = 0.0f;
    for (int i = 0; i < n; i++)
        if (fabsf(x[i]) > amax) {
            amax = fabsf(x[i]);
            max = x[i];
        }
    for (int i = 0; i < n; i++)
        L[i] = 0;
    if (!(amax > 1e-30f) || !isfinite(amax)) return 0.0f;
    int8_t cand[32]; /* n <= 32 */
    double best = -1.0;
    float scale = 0.0f;
    for (int is = -9; is <= 9; is++) {
        const float iscale = -((float)nmax + 0.1f * (float)is) / max;
        double slx = 0.0, sl2 = 0.0;
        for (int i = 0; i < n; i++) {
            int l = qround(iscale * x[i], -nmax, nmax - 1);
            cand[i] = (int8_t)l;
            slx += (double)x[i] * l;
            sl2 += (double)l * l;
        }
        /* error = sum x^2 - slx^2/sl2, so maximise slx^2/sl2 */
        if (sl2 > 0.0 && slx * slx / sl2 > best) {
            best = slx * slx / sl2;
            scale = (float)(slx / sl2);
            for (int i = 0; i < n; i++)
                L[i] = cand[i];
        }
    }
    return scale;
}

/* Affine fit: x ≈ s * L + m with L in [0, nmax], s >= 0. With nonpos_min the
 * offset is kept <= 0 because the K-quants store it as an unsigned "min" that is
 * subtracted. Tries nstep+1 spacings nmax + rmin + rdelta*k over [min, max].
 * Returns s and writes m. */
static float fit_affine(int n, int nmax, const float *x, uint8_t *L, float *m_out, int nonpos_min,
                        float rmin, float rdelta, int nstep) {
    float min = x[0], max = x[0];
    double sx = 0.0, sx2 = 0.0;
    for (int i = 0; i < n; i++) {
        min = fminf(min, x[i]);
        max = fmaxf(max, x[i]);
        sx += x[i];
        sx2 += (double)x[i] * x[i];
    }
    if (nonpos_min && min > 0.0f) min = 0.0f;
    for (int i = 0; i < n; i++)
        L[i] = 0;
    if (!(max > min) || !isfinite(max - min)) {
        *m_out = isfinite(min) ? min : 0.0f;
        return 0.0f;
    }
    uint8_t cand[32]; /* n <= 32 */
    double best_err = INFINITY;
    float best_s = (max - min) / nmax, best_m = min;
    for (int k = -1; k <= nstep; k++) {
        /* k = -1 is the plain min/max grid */
        const float steps = k < 0 ? (float)nmax : (float)nmax + rmin + rdelta * (float)k;
        const float iscale = steps / (max - min);
        double sl = 0.0, sl2 = 0.0, sxl = 0.0;
        for (int i = 0; i < n; i++) {
            int l = qround(iscale * (x[i] - min), 0, nmax);
            cand[i] = (uint8_t)l;
            sl += l;
            sl2 += (double)l * l;
            sxl += (double)x[i] * l;
        }
        const double D = n * sl2 - sl * sl;
        if (!(D > 0.0)) continue;
        double s = (n * sxl - sx * sl) / D;
        double m = (sl2 * sx - sl * sxl) / D;
        if (nonpos_min && m > 0.0) {
            m = 0.0;
            s = sxl / sl2;
        }
        if (s < 0.0) continue;
        /* sum (s*l + m - x)^2 expanded, so no second pass over x is needed */
        const double err =
            s * s * sl2 + 2.0 * s * m * sl + n * m * m - 2.0 * s * sxl - 2.0 * m * sx + sx2;
        if (err < best_err) {
            best_err = err;
            best_s = (float)s;
            best_m = (float)m;
            for (int i = 0; i < n; i++)
                L[i] = cand[i];
        }
    }
    *m_out = best_m;
    return best_s;
}

static inline float f16_round(float v) {
    return qt_f16_to_f32(qt_f32_to_f16(v));
}

static void qz_q8_0(const float *x, block_q8_0 *y, int64_t nb) {
    for (int64_t i = 0; i < nb; i++)
        q8_block_x86(x + 32 * i, y[i].qs, &y[i].d, NULL);
}

/* Q4_0 / Q5_0: symmetric 32-groups; levels re-rounded against the fp16 scale. */
static void qz_sym32(const float *x, uint8_t *qs, uint8_t *qh4, pt_f16 *d_out, int nmax) {
    int8_t L[32];
    const float s = fit_sym(32, nmax, x, L);
    *d_out = qt_f32_to_f16(s);
    const float d = qt_f16_to_f32(*d_out);
    if (d != 0.0f)
        for (int j = 0; j < 32; j++)
            L[j] = (int8_t)qround(x[j] / d, -nmax, nmax - 1);
    uint32_t qh = 0;
    for (int j = 0; j < 16; j++) {
        int a = L[j] + nmax, b = L[j + 16] + nmax;
        qs[j] = (uint8_t)((a & 0x0f) | (b & 0x0f) << 4);
        qh |= (uint32_t)(a >> 4) << j | (uint32_t)(b >> 4) << (j + 16);
    }
    if (qh4)
        for (int k = 0; k < 4; k++)
            qh4[k] = (uint8_t)(qh >> (8 * k));
}

/* Q4_1 / Q5_1: affine 32-groups with a free (signed) offset. */
static void qz_affine32(const float *x, uint8_t *qs, uint8_t *qh4, pt_f16 *d_out, pt_f16 *m_out,
                        int nmax) {
    uint8_t L[32];
    float m;
    const float s = fit_affine(32, nmax, x, L, &m, 0, -1.0f, 0.1f, 20);
    *d_out = qt_f32_to_f16(s);
    *m_out = qt_f32_to_f16(m);
    const float d = qt_f16_to_f32(*d_out), mq = qt_f16_to_f32(*m_out);
    if (d != 0.0f)
        for (int j = 0; j < 32; j++)
            L[j] = (uint8_t)qround((x[j] - mq) / d, 0, nmax);
    uint32_t qh = 0;
    for (int j = 0; j < 16; j++) {
        qs[j] = (uint8_t)((L[j] & 0x0f) | (L[j + 16] & 0x0f) << 4);
        qh |= (uint32_t)(L[j] >> 4) << j | (uint32_t)(L[j + 16] >> 4) << (j + 16);
    }
    if (qh4)
        for (int k = 0; k < 4; k++)
            qh4[k] = (uint8_t)(qh >> (8 * k));
}

/* Shared by Q2_K (16 groups of 16, 4-bit scale/min codes) and Q4_K/Q5_K
 * (8 groups of 32, 6-bit codes): fit every group, quantise the group scales and
 * mins against their maxima, then re-round the weights. Outputs the codes, the
 * fp16 super-scales and L (0..nmax per weight). */
static void qz_kaffine(const float *x, int ngroups, int gsize, int nmax, int code_max, uint8_t *ls,
                       uint8_t *lm, pt_f16 *d_out, pt_f16 *dmin_out, uint8_t *L, float rmin,
                       float rdelta, int nstep) {
    float scales[16], mins[16], max_scale = 0.0f, max_min = 0.0f;
    for (int j = 0; j < ngroups; j++) {
        float m;
        scales[j] =
            fit_affine(gsize, nmax, x + gsize * j, L + gsize * j, &m, 1, rmin, rdelta, nstep);
        mins[j] = -m; /* >= 0 */
        max_scale = fmaxf(max_scale, scales[j]);
        max_min = fmaxf(max_min, mins[j]);
    }
    *d_out = qt_f32_to_f16(max_scale / code_max);
    *dmin_out = qt_f32_to_f16(max_min / code_max);
    const float d = qt_f16_to_f32(*d_out), dmin = qt_f16_to_f32(*dmin_out);
    for (int j = 0; j < ngroups; j++) {
        ls[j] = (uint8_t)(d > 0.0f ? qround(scales[j] / d, 0, code_max) : 0);
        lm[j] = (uint8_t)(dmin > 0.0f ? qround(mins[j] / dmin, 0, code_max) : 0);
        const float dd = d * ls[j], dm = dmin * lm[j];
        if (dd == 0.0f) continue; /* every level decodes to -dm: keep the fit's */
        for (int l = 0; l < gsize; l++)
            L[gsize * j + l] = (uint8_t)qround((x[gsize * j + l] + dm) / dd, 0, nmax);
    }
}

/* 2-bit fields of Q2_K/Q3_K: weight 128h + 32g + l -> bits 2g of qs[32h + l]. */
static void pack_2bit(const uint8_t *L, uint8_t *qs) {
    for (int h = 0; h < 2; h++)
        for (int l = 0; l < 32; l++) {
            const uint8_t *p = L + 128 * h + l;
            qs[32 * h + l] =
                (uint8_t)((p[0] & 3) | (p[32] & 3) << 2 | (p[64] & 3) << 4 | (p[96] & 3) << 6);
        }
}

static void qz_q2_k(const float *x, block_q2_K *y, int64_t nb) {
    for (int64_t i = 0; i < nb; i++, x += QK_K) {
        uint8_t L[QK_K], ls[16], lm[16];
        qz_kaffine(x, 16, 16, 3, 15, ls, lm, &y[i].d, &y[i].dmin, L, -0.5f, 0.1f, 15);
        for (int j = 0; j < 16; j++)
            y[i].scales[j] = (uint8_t)(ls[j] | lm[j] << 4);
        pack_2bit(L, y[i].qs);
    }
}

static void qz_q4_k(const float *x, block_q4_K *y, int64_t nb) {
    for (int64_t i = 0; i < nb; i++, x += QK_K) {
        uint8_t L[QK_K], ls[8], lm[8];
        qz_kaffine(x, 8, 32, 15, 63, ls, lm, &y[i].d, &y[i].dmin, L, -1.0f, 0.1f, 20);
        k4_pack_scale_min(y[i].scales, ls, lm);
        for (int c = 0; c < 4; c++)
            for (int l = 0; l < 32; l++)
                y[i].qs[32 * c + l] = (uint8_t)(L[64 * c + l] | L[64 * c + 32 + l] << 4);
    }
}

static void qz_q5_k(const float *x, block_q5_K *y, int64_t nb) {
    for (int64_t i = 0; i < nb; i++, x += QK_K) {
        uint8_t L[QK_K], ls[8], lm[8];
        qz_kaffine(x, 8, 32, 31, 63, ls, lm, &y[i].d, &y[i].dmin, L, -0.5f, 0.1f, 15);
        k4_pack_scale_min(y[i].scales, ls, lm);
        memset(y[i].qh, 0, sizeof y[i].qh);
        for (int c = 0; c < 4; c++)
            for (int l = 0; l < 32; l++) {
                const int a = L[64 * c + l], b = L[64 * c + 32 + l];
                y[i].qs[32 * c + l] = (uint8_t)((a & 0x0f) | (b & 0x0f) << 4);
                y[i].qh[l] |= (uint8_t)((a >> 4) << (2 * c) | (b >> 4) << (2 * c + 1));
            }
    }
}

/* Symmetric K-quants (Q3_K: 6-bit signed group scales, Q6_K: int8): fit the 16
 * groups, quantise their scales against the one of largest magnitude (mapped to
 * the negative end, which has the extra code), re-round the weights. */
static float qz_ksym(const float *x, int nmax, int code_neg, int code_pos, int *sc, int8_t *L) {
    float scales[16], max_scale = 0.0f, amax = 0.0f;
    for (int j = 0; j < 16; j++) {
        scales[j] = fit_sym(16, nmax, x + 16 * j, L + 16 * j);
        if (fabsf(scales[j]) > amax) {
            amax = fabsf(scales[j]);
            max_scale = scales[j];
        }
    }
    if (!(amax > 0.0f)) {
        for (int j = 0; j < 16; j++)
            sc[j] = 0;
        memset(L, 0, QK_K);
        return 0.0f;
    }
    const float iscale = -(float)code_neg / max_scale;
    const float d = f16_round(1.0f / iscale);
    for (int j = 0; j < 16; j++) {
        sc[j] = qround(iscale * scales[j], -code_neg, code_pos);
        const float dd = d * sc[j];
        if (dd == 0.0f) continue;
        for (int l = 0; l < 16; l++)
            L[16 * j + l] = (int8_t)qround(x[16 * j + l] / dd, -nmax, nmax - 1);
    }
    return 1.0f / iscale;
}

static void qz_q3_k(const float *x, block_q3_K *y, int64_t nb) {
    for (int64_t i = 0; i < nb; i++, x += QK_K) {
        int8_t L[QK_K];
        int sc[16];
        y[i].d = qt_f32_to_f16(qz_ksym(x, 4, 32, 31, sc, L));
        memset(y[i].scales, 0, sizeof y[i].scales);
        for (int j = 0; j < 16; j++) {
            const int c = sc[j] + 32;
            if (j < 8)
                y[i].scales[j] |= (uint8_t)(c & 0x0f);
            else
                y[i].scales[j - 8] |= (uint8_t)((c & 0x0f) << 4);
            y[i].scales[8 + j % 4] |= (uint8_t)((c >> 4) << (2 * (j / 4)));
        }
        uint8_t U[QK_K];
        memset(y[i].hmask, 0, sizeof y[i].hmask);
        for (int p = 0; p < QK_K; p++) {
            const int u = L[p] + 4; /* 0..7 */
            if (u > 3) y[i].hmask[p % 32] |= (uint8_t)(1u << (p / 32));
            U[p] = (uint8_t)(u & 3);
        }
        pack_2bit(U, y[i].qs);
    }
}

static void qz_q6_k(const float *x, block_q6_K *y, int64_t nb) {
    for (int64_t i = 0; i < nb; i++, x += QK_K) {
        int8_t L[QK_K];
        int sc[16];
        y[i].d = qt_f32_to_f16(qz_ksym(x, 32, 128, 127, sc, L));
        for (int j = 0; j < 16; j++)
            y[i].scales[j] = (int8_t)sc[j];
        for (int h = 0; h < 2; h++)
            for (int l = 0; l < 32; l++) {
                const int8_t *p = L + 128 * h + l;
                const int u0 = p[0] + 32, u1 = p[32] + 32, u2 = p[64] + 32, u3 = p[96] + 32;
                y[i].ql[64 * h + l] = (uint8_t)((u0 & 0x0f) | (u2 & 0x0f) << 4);
                y[i].ql[64 * h + l + 32] = (uint8_t)((u1 & 0x0f) | (u3 & 0x0f) << 4);
                y[i].qh[32 * h + l] =
                    (uint8_t)((u0 >> 4) | (u1 >> 4) << 2 | (u2 >> 4) << 4 | (u3 >> 4) << 6);
            }
    }
}

int qt_can_quantize(uint32_t type) {
    switch (type) {
    case QT_F32:
    case QT_F16:
    case QT_BF16:
    case QT_Q4_0:
    case QT_Q4_1:
    case QT_Q5_0:
    case QT_Q5_1:
    case QT_Q8_0:
    case QT_Q2_K:
    case QT_Q3_K:
    case QT_Q4_K:
    case QT_Q5_K:
    case QT_Q6_K: return 1;
    default: return 0;
    }
}

void qt_quantize_ref(uint32_t type, const float *x, void *dst, int64_t n) {
    const qt_traits *t = qt_get(type);
    PT_ASSERT(t && qt_can_quantize(type) && n >= 0 && n % t->block == 0);
    const int64_t nb = n / t->block;
    switch (type) {
    case QT_F32:
    case QT_F16:
    case QT_BF16: qt_quantize_act_ref(type, x, dst, n); break;
    case QT_Q8_0: qz_q8_0(x, dst, nb); break;
    case QT_Q4_0: {
        block_q4_0 *y = dst;
        for (int64_t i = 0; i < nb; i++)
            qz_sym32(x + 32 * i, y[i].qs, NULL, &y[i].d, 8);
        break;
    }
    case QT_Q5_0: {
        block_q5_0 *y = dst;
        for (int64_t i = 0; i < nb; i++)
            qz_sym32(x + 32 * i, y[i].qs, y[i].qh, &y[i].d, 16);
        break;
    }
    case QT_Q4_1: {
        block_q4_1 *y = dst;
        for (int64_t i = 0; i < nb; i++)
            qz_affine32(x + 32 * i, y[i].qs, NULL, &y[i].d, &y[i].m, 15);
        break;
    }
    case QT_Q5_1: {
        block_q5_1 *y = dst;
        for (int64_t i = 0; i < nb; i++)
            qz_affine32(x + 32 * i, y[i].qs, y[i].qh, &y[i].d, &y[i].m, 31);
        break;
    }
    case QT_Q2_K: qz_q2_k(x, dst, nb); break;
    case QT_Q3_K: qz_q3_k(x, dst, nb); break;
    case QT_Q4_K: qz_q4_k(x, dst, nb); break;
    case QT_Q5_K: qz_q5_k(x, dst, nb); break;
    case QT_Q6_K: qz_q6_k(x, dst, nb); break;
    default: pt_assert_fail(__FILE__, __LINE__, "qt_quantize_ref: unsupported type");
    }
}
