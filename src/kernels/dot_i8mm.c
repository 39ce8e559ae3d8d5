/* dot_i8mm.c — arm64 GEMM micro-kernels with the ARMv8.6 int8 matrix multiply (ISA level
 * QT_ISA_I8MM; compiled with -march=armv8.2-a+dotprod+i8mm, Makefile).
 *
 * smmla multiplies a 2 x 8 int8 block by the transpose of another 2 x 8 block into the four
 * int32 dot products of their rows: two weight rows against two activation rows at once.
 * The tile kernels (qt_tile_fn) take four weight rows (Q8_0, or Q4_0 decoded to int8) and
 * four Q8_0 activation rows per call: per 32-weight block, 16 smmla give the sixteen exact
 * integer block sums, and each (weight row, activation row) pair then folds its sum into its
 * own float exactly as the scalar reference does, block by block. Integer sums are exact in
 * any order, so every output is the one-row kernel's bits (every arm64 level returns the
 * scalar reference's: simd_tile_bit_identical). The dispatcher calls in here only after the
 * CPU announced i8mm (dispatch.c).
 */
#include <arm_neon.h>
#include <string.h>

#include "kernels/quant.h"
#include "kernels/quant_impl.h"

static inline float f16_i8mm(pt_f16 h) {
    __fp16 v;
    memcpy(&v, &h, sizeof v);
    return (float)v; /* exact, as qt_f16_to_f32 */
}

/* Two rows' 8-byte chunk c (bytes 8c..8c+7) side by side: the 2 x 8 operand of smmla. */
static inline int8x16_t pair(const int8_t *r0, const int8_t *r1, int c) {
    return vcombine_s8(vld1_s8(r0 + 8 * c), vld1_s8(r1 + 8 * c));
}

/* The tile of a 32-weight type against Q8_0 activations. DECODE writes weight row k's
 * block i as 32 int8 weights into wq (weight j at wq[j], paired with activation byte j);
 * ACCUM folds the integer sum s of (weight row kw, activation row ka) into sumf[ka][kw] with
 * dx and dy, the two blocks' scales, in the scalar reference's order. */
#define TILE_I8MM(NAME, XT, DECODE, ACCUM)                                                         \
    static void tile_##NAME(const void *w, uint64_t w_stride, const void *a, uint64_t a_stride,    \
                            int64_t n, float *out, int64_t ldo) {                                  \
        const XT *x[4];                                                                            \
        const block_q8_0 *y[4];                                                                    \
        for (int k = 0; k < 4; k++) {                                                              \
            x[k] = (const XT *)((const uint8_t *)w + (uint64_t)k * w_stride);                      \
            y[k] = (const block_q8_0 *)((const uint8_t *)a + (uint64_t)k * a_stride);              \
        }                                                                                          \
        float sumf[4][4] = {{0}}; /* [activation row][weight row] */                               \
        for (int64_t i = 0; i < n / 32; i++) {                                                     \
            int8_t wq[4][32];                                                                      \
            for (int k = 0; k < 4; k++) {                                                          \
                const XT *xb = &x[k][i];                                                           \
                DECODE;                                                                            \
            }                                                                                      \
            /* acc[wp][ap]: weight rows 2wp, 2wp+1 against activation rows 2ap, 2ap+1, as          \
             * {w0·a0, w0·a1, w1·a0, w1·a1} */                                                 \
            int32x4_t acc[2][2];                                                                   \
            for (int wp = 0; wp < 2; wp++)                                                         \
                for (int ap = 0; ap < 2; ap++)                                                     \
                    acc[wp][ap] = vdupq_n_s32(0);                                                  \
            for (int c = 0; c < 4; c++) {                                                          \
                const int8x16_t wv[2] = {pair(wq[0], wq[1], c), pair(wq[2], wq[3], c)};            \
                const int8x16_t av[2] = {pair(y[0][i].qs, y[1][i].qs, c),                          \
                                         pair(y[2][i].qs, y[3][i].qs, c)};                         \
                for (int wp = 0; wp < 2; wp++)                                                     \
                    for (int ap = 0; ap < 2; ap++)                                                 \
                        acc[wp][ap] = vmmlaq_s32(acc[wp][ap], wv[wp], av[ap]);                     \
            }                                                                                      \
            for (int wp = 0; wp < 2; wp++)                                                         \
                for (int ap = 0; ap < 2; ap++) {                                                   \
                    int32_t sv[4];                                                                 \
                    vst1q_s32(sv, acc[wp][ap]);                                                    \
                    for (int e = 0; e < 4; e++) {                                                  \
                        const int kw = 2 * wp + (e >> 1), ka = 2 * ap + (e & 1);                   \
                        const float s = (float)sv[e], dx = f16_i8mm(x[kw][i].d),                   \
                                    dy = f16_i8mm(y[ka][i].d);                                     \
                        ACCUM;                                                                     \
                    }                                                                              \
                }                                                                                  \
        }                                                                                          \
        for (int r = 0; r < 4; r++)                                                                \
            for (int k = 0; k < 4; k++)                                                            \
                out[r * ldo + k] = sumf[r][k];                                                     \
    }

/* Q8_0: the weights as stored; sumf += sumi * (dx * dy). */
TILE_I8MM(q8_0, block_q8_0, memcpy(wq[k], xb->qs, 32), sumf[ka][kw] += s * (dx * dy))

/* Q4_0: weight j = low nibble of qs[j] - 8, weight j + 16 = high nibble - 8;
 * sumf += sumi * dx * dy (left to right). */
TILE_I8MM(
    q4_0, block_q4_0,
    do {
        const uint8x16_t q = vld1q_u8(xb->qs);
        vst1q_s8(wq[k], vsubq_s8(vreinterpretq_s8_u8(vandq_u8(q, vdupq_n_u8(15))), vdupq_n_s8(8)));
        vst1q_s8(wq[k] + 16, vsubq_s8(vreinterpretq_s8_u8(vshrq_n_u8(q, 4)), vdupq_n_s8(8)));
    } while (0),
    sumf[ka][kw] += s * dx * dy)

qt_tile_fn qt_tile_i8mm(uint32_t type) {
    switch (type) {
    case QT_Q8_0: return tile_q8_0;
    case QT_Q4_0: return tile_q4_0;
    default: return NULL;
    }
}
