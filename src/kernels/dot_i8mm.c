/* dot_i8mm.c — arm64 GEMM micro-kernels with the ARMv8.6 int8 matrix multiply (ISA level
 * QT_ISA_I8MM; compiled with -march=armv8.2-a+dotprod+i8mm, Makefile).
 *
 * smmla multiplies a 2 x 8 int8 block by the transpose of another 2 x 8 block into the four
 * int32 dot products of their rows: two weight rows against two activation rows at once.
 * The tile kernels (qt_tile_fn) take four weight rows and four activation rows per call:
 *   - Q8_0, Q4_0 and Q5_0 (the latter two decoded to int8) against Q8_0: per 32-weight
 *     block, 16 smmla give the sixteen exact integer block sums, and each (weight row,
 *     activation row) pair folds its sum into its own float as the scalar reference does;
 *   - Q4_K, Q5_K and Q6_K against Q8_K: the reference's eight integer lanes per 256-weight
 *     block from lane-major operands, the scaled weights as two digits (usmmla for the low
 *     byte, smmla for the high one), then the reference's eight float lanes per pair (the
 *     section's comment below).
 * Integer sums are exact in any order and the float steps are the reference's, one rounding
 * per operation (-ffp-contract=off), so every output is the one-row kernel's bits (every
 * arm64 level returns the scalar reference's: simd_tile_bit_identical, which also shows a
 * reassociated scale product failing). The dispatcher calls in here only after the CPU
 * announced i8mm (dispatch.c).
 */
#include <arm_neon.h>
#include <string.h>

#include "kernels/neon_shared.h"
#include "kernels/quant.h"
#include "kernels/quant_impl.h"

/* ===== 32-weight blocks against Q8_0 ===== */

/* Two rows' 8-byte chunk c (bytes 8c..8c+7) side by side: the 2 x 8 operand of smmla. */
static inline int8x16_t pair(const int8_t *r0, const int8_t *r1, int c) {
    return vcombine_s8(vld1_s8(r0 + 8 * c), vld1_s8(r1 + 8 * c));
}

/* Four blocks' fp16 scales as floats (exact, as qt_f16_to_f32). */
static inline float32x4_t scales4(const pt_f16 *s0, const pt_f16 *s1, const pt_f16 *s2,
                                  const pt_f16 *s3) {
    const uint16x4_t u = {*s0, *s1, *s2, *s3};
    return vcvt_f32_f16(vreinterpret_f16_u16(u));
}

/* The tile of a 32-weight type against Q8_0 activations. DECODE writes weight row k's
 * block i as 32 int8 weights into wq (weight j at wq[j], paired with activation byte j);
 * ACCUM is the term each (weight row, activation row) pair adds to its float sum per block,
 * from its integer sum s and the two blocks' scales dx and dy, in the scalar reference's
 * order: four pairs at a time, as smmla lays them out (vectors of s, dx, dy; one rounding
 * per operation, as the scalar code's). */
#define TILE_I8MM(NAME, XT, DECODE, ACCUM)                                                         \
    static void tile_##NAME(const void *w, uint64_t w_stride, const void *a, uint64_t a_stride,    \
                            int64_t n, float *out, int64_t ldo) {                                  \
        const XT *x[4];                                                                            \
        const block_q8_0 *y[4];                                                                    \
        for (int k = 0; k < 4; k++) {                                                              \
            x[k] = (const XT *)((const uint8_t *)w + (uint64_t)k * w_stride);                      \
            y[k] = (const block_q8_0 *)((const uint8_t *)a + (uint64_t)k * a_stride);              \
        }                                                                                          \
        float32x4_t sumv[2][2]; /* [wp][ap]: the sixteen float sums, laid out as acc */            \
        for (int wp = 0; wp < 2; wp++)                                                             \
            for (int ap = 0; ap < 2; ap++)                                                         \
                sumv[wp][ap] = vdupq_n_f32(0);                                                     \
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
            /* the scales laid out as acc: dxv[wp] = {dx of rows 2wp, 2wp, 2wp+1, 2wp+1},          \
             * dyv[ap] = {dy of rows 2ap, 2ap+1, 2ap, 2ap+1} */                                    \
            const float32x4_t dxs = scales4(&x[0][i].d, &x[1][i].d, &x[2][i].d, &x[3][i].d);       \
            const float32x4_t dys = scales4(&y[0][i].d, &y[1][i].d, &y[2][i].d, &y[3][i].d);       \
            const float32x4_t dxv[2] = {vzip1q_f32(dxs, dxs), vzip2q_f32(dxs, dxs)};               \
            const float32x4_t dyv[2] = {vcombine_f32(vget_low_f32(dys), vget_low_f32(dys)),        \
                                        vcombine_f32(vget_high_f32(dys), vget_high_f32(dys))};     \
            for (int wp = 0; wp < 2; wp++)                                                         \
                for (int ap = 0; ap < 2; ap++) {                                                   \
                    const float32x4_t s = vcvtq_f32_s32(acc[wp][ap]), dx = dxv[wp], dy = dyv[ap];  \
                    sumv[wp][ap] = vaddq_f32(sumv[wp][ap], ACCUM);                                 \
                }                                                                                  \
        }                                                                                          \
        for (int wp = 0; wp < 2; wp++)                                                             \
            for (int ap = 0; ap < 2; ap++) {                                                       \
                float sv[4];                                                                       \
                vst1q_f32(sv, sumv[wp][ap]);                                                       \
                for (int e = 0; e < 4; e++)                                                        \
                    out[(2 * ap + (e & 1)) * ldo + 2 * wp + (e >> 1)] = sv[e];                     \
            }                                                                                      \
    }

/* Q8_0: the weights as stored; sumf += sumi * (dx * dy). */
TILE_I8MM(q8_0, block_q8_0, memcpy(wq[k], xb->qs, 32), vmulq_f32(s, vmulq_f32(dx, dy)))

/* Q4_0: weight j = low nibble of qs[j] - 8, weight j + 16 = high nibble - 8;
 * sumf += sumi * dx * dy (left to right). */
TILE_I8MM(
    q4_0, block_q4_0,
    do {
        const uint8x16_t q = vld1q_u8(xb->qs);
        vst1q_s8(wq[k], vsubq_s8(vreinterpretq_s8_u8(vandq_u8(q, vdupq_n_u8(15))), vdupq_n_s8(8)));
        vst1q_s8(wq[k] + 16, vsubq_s8(vreinterpretq_s8_u8(vshrq_n_u8(q, 4)), vdupq_n_s8(8)));
    } while (0),
    vmulq_f32(vmulq_f32(s, dx), dy))

/* Q5_0: weight = (nibble | bit << 4) - 16; sumf += (dx * dy) * sumi. */
TILE_I8MM(
    q5_0, block_q5_0,
    do {
        int8x16_t w0;
        int8x16_t w1; /* (one declaration each: a comma would split the macro argument) */
        q5_weights(xb->qs, xb->qh, &w0, &w1);
        vst1q_s8(wq[k], vsubq_s8(w0, vdupq_n_s8(16)));
        vst1q_s8(wq[k] + 16, vsubq_s8(w1, vdupq_n_s8(16)));
    } while (0),
    vmulq_f32(vmulq_f32(dx, dy), s))

/* ===== K-quants against Q8_K =====
 *
 * The reference keeps eight integer lanes per 256-weight block: lane l sums, over the
 * weights p with p % 8 == l, scale(p) * weight(p) * activation(p) (Q4_K/Q5_K: one scale
 * per 32 weights, Q6_K: per 16), and each lane then goes into its own float lane
 * (lanes[l] += d * acc[l]). smmla adds eight neighbouring products, which the lanes keep
 * apart, so the tile feeds it lane-major operands: the 8 bytes of one smmla row are
 * positions 64c + 8t + l, t = 0..7, of chunk c (the 32 positions of lane l are four such
 * rows). Along a lane the scale changes every 4 (Q6_K: 2) bytes, so it cannot stay outside
 * the sum: the weights are multiplied by their scales first. The scaled weight sw
 * (|sw| <= 63 * 31 for Q4_K/Q5_K, <= 128 * 32 for Q6_K) does not fit a byte, so it goes in
 * as two digits, sw = 256 hi + lo: lo, the unsigned low byte, through usmmla (unsigned x
 * signed), hi, the signed high byte (|hi| <= 16), through smmla, and each lane sum is
 * lo_sum + 256 hi_sum, exact in int32 (|lane sum| <= 32 * 4096 * 128 = 2^24). The float
 * steps per block are then the single-row kernel's (k45_rows, q6k_rows in dot_neon_body.h):
 * lanes[l] += (d_x * d_y) * acc[l], the min term sumf -= (dmin_x * d_y) * sumi, and at the end
 * sumf + lanes 0..7 in order. */

/* The loops over a block's chunks, lane pairs, row pairs and tile entries below are short and
 * fixed: unrolled (#pragma GCC unroll, which clang reads too), their indices become register
 * names and offsets rather than address arithmetic (GCC's -O2 keeps them as loops otherwise). */

/* Byte i of lane pair lp's gather from 64 bytes: byte 8 (i % 8) + 2 lp + i / 8, i.e. lane
 * 2lp's eight bytes of the chunk, then lane 2lp + 1's. */
static const uint8_t lane_gather[4][16] = {
    {0, 8, 16, 24, 32, 40, 48, 56, 1, 9, 17, 25, 33, 41, 49, 57},
    {2, 10, 18, 26, 34, 42, 50, 58, 3, 11, 19, 27, 35, 43, 51, 59},
    {4, 12, 20, 28, 36, 44, 52, 60, 5, 13, 21, 29, 37, 45, 53, 61},
    {6, 14, 22, 30, 38, 46, 54, 62, 7, 15, 23, 31, 39, 47, 55, 63},
};

/* smmla operands of one block, lane-major: op[c][lp][h] holds two rows' eight bytes of lane
 * 2lp + h in chunk c (positions 64c + 8t + 2lp + h, t = 0..7), the first row's then the
 * second's. Weight rows are paired 0-1 and 2-3 (as digits), activation rows likewise. */
typedef uint8x16_t k_ops[4][4][2]; /* [chunk][lane pair][lane in pair] */

/* The two rows' lane pair gathers g0, g1 side by side (op[0]: lane 2lp, op[1]: 2lp + 1). */
static inline void k_side_by_side(uint8x16_t g0, uint8x16_t g1, uint8x16_t *op) {
    const uint64x2_t a = vreinterpretq_u64_u8(g0), b = vreinterpretq_u64_u8(g1);
    op[0] = vreinterpretq_u8_u64(vzip1q_u64(a, b));
    op[1] = vreinterpretq_u8_u64(vzip2q_u64(a, b));
}

/* Two weight rows (wv[r]: row r's 256 weights in order, wv[r][g] = weights 16g..16g+15;
 * sc[r][g]: their scale) scaled and split into digits, as operands: lo (the unsigned low
 * bytes) and hi (the signed high bytes). */
static inline __attribute__((always_inline)) void
k_weight_pair(const int8x16_t (*wv)[16], const int8_t (*sc)[16], k_ops lo, k_ops hi) {
#pragma GCC unroll 16
    for (int c = 0; c < 4; c++) {
        uint8x16x4_t dl[2], dh[2];
#pragma GCC unroll 16
        for (int r = 0; r < 2; r++)
#pragma GCC unroll 16
            for (int k = 0; k < 4; k++) {
                const int8x16_t wk = wv[r][4 * c + k], s = vdupq_n_s8(sc[r][4 * c + k]);
                const uint8x16_t p0 =
                    vreinterpretq_u8_s16(vmull_s8(vget_low_s8(wk), vget_low_s8(s)));
                const uint8x16_t p1 = vreinterpretq_u8_s16(vmull_high_s8(wk, s));
                dl[r].val[k] = vuzp1q_u8(p0, p1); /* little-endian: even bytes are the low */
                dh[r].val[k] = vuzp2q_u8(p0, p1);
            }
#pragma GCC unroll 16
        for (int lp = 0; lp < 4; lp++) {
            const uint8x16_t g = vld1q_u8(lane_gather[lp]);
            k_side_by_side(vqtbl4q_u8(dl[0], g), vqtbl4q_u8(dl[1], g), lo[c][lp]);
            k_side_by_side(vqtbl4q_u8(dh[0], g), vqtbl4q_u8(dh[1], g), hi[c][lp]);
        }
    }
}

/* Two Q8_K rows' 256 activations as operands. */
static inline __attribute__((always_inline)) void k_act_pair(const int8_t *q0, const int8_t *q1,
                                                             k_ops op) {
#pragma GCC unroll 16
    for (int c = 0; c < 4; c++) {
        const uint8x16x4_t t0 = vld1q_u8_x4((const uint8_t *)q0 + 64 * c);
        const uint8x16x4_t t1 = vld1q_u8_x4((const uint8_t *)q1 + 64 * c);
#pragma GCC unroll 16
        for (int lp = 0; lp < 4; lp++) {
            const uint8x16_t g = vld1q_u8(lane_gather[lp]);
            k_side_by_side(vqtbl4q_u8(t0, g), vqtbl4q_u8(t1, g), op[c][lp]);
        }
    }
}

/* The tile's integer lane sums of one block: s[wp][ap][l] = lane l of weight rows 2wp, 2wp+1
 * against activation rows 2ap, 2ap+1, as smmla lays them out ({w0·a0, w0·a1, w1·a0, w1·a1}):
 * lo_sum + 256 hi_sum. */
static inline __attribute__((always_inline)) void k_lane_sums(k_ops *wlo, k_ops *whi, k_ops *act,
                                                              int32_t s[2][2][8][4]) {
#pragma GCC unroll 16
    for (int lp = 0; lp < 4; lp++)
#pragma GCC unroll 16
        for (int h = 0; h < 2; h++) {
            int32x4_t lo[2][2], hi[2][2]; /* [wp][ap] */
#pragma GCC unroll 16
            for (int wp = 0; wp < 2; wp++)
#pragma GCC unroll 16
                for (int ap = 0; ap < 2; ap++)
                    lo[wp][ap] = hi[wp][ap] = vdupq_n_s32(0);
#pragma GCC unroll 16
            for (int c = 0; c < 4; c++)
#pragma GCC unroll 16
                for (int wp = 0; wp < 2; wp++)
#pragma GCC unroll 16
                    for (int ap = 0; ap < 2; ap++) {
                        const int8x16_t y = vreinterpretq_s8_u8(act[ap][c][lp][h]);
                        lo[wp][ap] = vusmmlaq_s32(lo[wp][ap], wlo[wp][c][lp][h], y);
                        hi[wp][ap] =
                            vmmlaq_s32(hi[wp][ap], vreinterpretq_s8_u8(whi[wp][c][lp][h]), y);
                    }
#pragma GCC unroll 16
            for (int wp = 0; wp < 2; wp++)
#pragma GCC unroll 16
                for (int ap = 0; ap < 2; ap++)
                    vst1q_s32(s[wp][ap][2 * lp + h], vmlaq_n_s32(lo[wp][ap], hi[wp][ap], 256));
        }
}

/* The tile of Q4_K, Q5_K or Q6_K (type: a constant in each caller, so the branches fold). */
static inline __attribute__((always_inline)) void tile_k(uint32_t type, const void *w,
                                                         uint64_t w_stride, const void *a,
                                                         uint64_t a_stride, int64_t n, float *out,
                                                         int64_t ldo) {
    const size_t bs = type == QT_Q6_K   ? sizeof(block_q6_K)
                      : type == QT_Q5_K ? sizeof(block_q5_K)
                                        : sizeof(block_q4_K);
    const uint8_t *x[4];
    const block_q8_K *y[4];
#pragma GCC unroll 16
    for (int k = 0; k < 4; k++) {
        x[k] = (const uint8_t *)w + (uint64_t)k * w_stride;
        y[k] = (const block_q8_K *)((const uint8_t *)a + (uint64_t)k * a_stride);
    }
    float32x4_t lanes[4][4][2]; /* [activation row][weight row]: the reference's float lanes */
    float sumf[4][4] = {{0}};   /* [activation row][weight row]: the min term (Q4_K/Q5_K) */
#pragma GCC unroll 16
    for (int r = 0; r < 4; r++)
#pragma GCC unroll 16
        for (int k = 0; k < 4; k++)
            lanes[r][k][0] = lanes[r][k][1] = vdupq_n_f32(0);
    for (int64_t i = 0; i < n / QK_K; i++) {
        int8x16_t wv[4][16];
        int8_t sc16[4][16];
        int16x8_t mn[4]; /* Q4_K/Q5_K: the eight mins of each weight row */
        float dx[4], dminx[4];
        for (int k = 0; k < 4; k++) {
            const uint8_t *blk = x[k] + (size_t)i * bs;
            if (type == QT_Q6_K) {
                const block_q6_K *b = (const block_q6_K *)blk;
                q6k_weights(b, wv[k]);
                memcpy(sc16[k], b->scales, sizeof sc16[k]);
                dx[k] = f16(b->d);
                dminx[k] = 0;
            } else {
                /* block_q4_K and block_q5_K share d, dmin and scales at the front */
                const block_q4_K *b = (const block_q4_K *)blk;
                const block_q5_K *b5 = (const block_q5_K *)blk;
                int sc, m;
                int16_t m8[8];
                for (int j = 0; j < 8; j++) {
                    k4_scale_min(j, b->scales, &sc, &m);
                    sc16[k][2 * j] = sc16[k][2 * j + 1] = (int8_t)sc;
                    m8[j] = (int16_t)m;
                }
                mn[k] = vld1q_s16(m8);
                if (type == QT_Q5_K)
                    k45_weights(b5->qs, b5->qh, wv[k]);
                else
                    k45_weights(b->qs, NULL, wv[k]);
                dx[k] = f16(b->d);
                dminx[k] = f16(b->dmin);
            }
        }
        k_ops wlo[2], whi[2], act[2];
        for (int p = 0; p < 2; p++) {
            k_weight_pair(wv + 2 * p, sc16 + 2 * p, wlo[p], whi[p]);
            k_act_pair(y[2 * p][i].qs, y[2 * p + 1][i].qs, act[p]);
        }
        int32_t s[2][2][8][4];
        k_lane_sums(wlo, whi, act, s);
        int16x8_t b8[4]; /* Q4_K/Q5_K: each activation row's sums of 32 (the mins' groups) */
        if (type != QT_Q6_K)
            for (int r = 0; r < 4; r++)
                b8[r] = vpaddq_s16(vld1q_s16(y[r][i].bsums), vld1q_s16(y[r][i].bsums + 8));
#pragma GCC unroll 16
        for (int wp = 0; wp < 2; wp++)
#pragma GCC unroll 16
            for (int ap = 0; ap < 2; ap++) {
                /* q[0].val[e]: lanes 0-3 of pair e, q[1].val[e]: lanes 4-7 */
                const int32x4x4_t q[2] = {vld4q_s32(s[wp][ap][0]), vld4q_s32(s[wp][ap][4])};
#pragma GCC unroll 16
                for (int e = 0; e < 4; e++) {
                    const int kw = 2 * wp + (e >> 1), ka = 2 * ap + (e & 1);
                    lanes_add(lanes[ka][kw], q[0].val[e], q[1].val[e], dx[kw] * y[ka][i].d);
                    if (type == QT_Q6_K) continue;
                    const int32_t sumi = vaddvq_s32(vmlal_high_s16(
                        vmull_s16(vget_low_s16(b8[ka]), vget_low_s16(mn[kw])), b8[ka], mn[kw]));
                    sumf[ka][kw] -= (dminx[kw] * y[ka][i].d) * (float)sumi;
                }
            }
    }
#pragma GCC unroll 16
    for (int r = 0; r < 4; r++)
#pragma GCC unroll 16
        for (int k = 0; k < 4; k++)
            out[r * ldo + k] = lanes_sum(sumf[r][k], lanes[r][k]);
}

static void tile_q4_k(const void *w, uint64_t w_stride, const void *a, uint64_t a_stride, int64_t n,
                      float *out, int64_t ldo) {
    tile_k(QT_Q4_K, w, w_stride, a, a_stride, n, out, ldo);
}
static void tile_q5_k(const void *w, uint64_t w_stride, const void *a, uint64_t a_stride, int64_t n,
                      float *out, int64_t ldo) {
    tile_k(QT_Q5_K, w, w_stride, a, a_stride, n, out, ldo);
}
static void tile_q6_k(const void *w, uint64_t w_stride, const void *a, uint64_t a_stride, int64_t n,
                      float *out, int64_t ldo) {
    tile_k(QT_Q6_K, w, w_stride, a, a_stride, n, out, ldo);
}

qt_tile_fn qt_tile_i8mm(uint32_t type) {
    switch (type) {
    case QT_Q8_0: return tile_q8_0;
    case QT_Q4_0: return tile_q4_0;
    case QT_Q5_0: return tile_q5_0;
    case QT_Q4_K: return tile_q4_k;
    case QT_Q5_K: return tile_q5_k;
    case QT_Q6_K: return tile_q6_k;
    default: return NULL;
    }
}
