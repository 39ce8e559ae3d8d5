/* dot_i8mm.c — arm64 GEMM micro-kernels with the ARMv8.6 int8 matrix multiply (ISA level
 * QT_ISA_I8MM; compiled with -march=armv8.2-a+dotprod+i8mm, Makefile).
 *
 * smmla multiplies a 2 x 8 int8 block by the transpose of another 2 x 8 block into the four
 * int32 dot products of their rows: two weight rows against two activation rows at once.
 * The tile kernel (qt_tile_fn) takes four weight rows and four activation rows of Q8_0 per
 * call: per 32-weight block, 16 smmla give the sixteen exact integer block sums, and each
 * (weight row, activation row) pair then folds its sum into its own float exactly as the
 * scalar reference does (sumf += sumi * (dx * dy), block by block). Integer sums are exact in
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

/* Two rows' 8-byte chunk c side by side: the 2 x 8 operand of smmla. */
static inline int8x16_t pair(const block_q8_0 *r0, const block_q8_0 *r1, int c) {
    return vcombine_s8(vld1_s8(r0->qs + 8 * c), vld1_s8(r1->qs + 8 * c));
}

static void tile_q8_0(const void *w, uint64_t w_stride, const void *a, uint64_t a_stride, int64_t n,
                      float *out, int64_t ldo) {
    const block_q8_0 *x[4], *y[4];
    for (int k = 0; k < 4; k++) {
        x[k] = (const block_q8_0 *)((const uint8_t *)w + (uint64_t)k * w_stride);
        y[k] = (const block_q8_0 *)((const uint8_t *)a + (uint64_t)k * a_stride);
    }
    float sumf[4][4] = {{0}}; /* [activation row][weight row] */
    for (int64_t i = 0; i < n / 32; i++) {
        /* acc[wp][ap]: weight rows 2wp, 2wp+1 against activation rows 2ap, 2ap+1, as
         * {w0·a0, w0·a1, w1·a0, w1·a1} */
        int32x4_t acc[2][2];
        for (int wp = 0; wp < 2; wp++)
            for (int ap = 0; ap < 2; ap++)
                acc[wp][ap] = vdupq_n_s32(0);
        for (int c = 0; c < 4; c++) {
            const int8x16_t wv[2] = {pair(&x[0][i], &x[1][i], c), pair(&x[2][i], &x[3][i], c)};
            const int8x16_t av[2] = {pair(&y[0][i], &y[1][i], c), pair(&y[2][i], &y[3][i], c)};
            for (int wp = 0; wp < 2; wp++)
                for (int ap = 0; ap < 2; ap++)
                    acc[wp][ap] = vmmlaq_s32(acc[wp][ap], wv[wp], av[ap]);
        }
        float dx[4], dy[4];
        for (int k = 0; k < 4; k++) {
            dx[k] = f16_i8mm(x[k][i].d);
            dy[k] = f16_i8mm(y[k][i].d);
        }
        for (int wp = 0; wp < 2; wp++)
            for (int ap = 0; ap < 2; ap++) {
                int32_t s[4];
                vst1q_s32(s, acc[wp][ap]);
                for (int e = 0; e < 4; e++) {
                    const int kw = 2 * wp + (e >> 1), ka = 2 * ap + (e & 1);
                    sumf[ka][kw] += (float)s[e] * (dx[kw] * dy[ka]);
                }
            }
    }
    for (int r = 0; r < 4; r++)
        for (int k = 0; k < 4; k++)
            out[r * ldo + k] = sumf[r][k];
}

qt_tile_fn qt_tile_i8mm(uint32_t type) {
    return type == QT_Q8_0 ? tile_q8_0 : NULL;
}
