/* dot_avx512.c — AVX-512 (F, BW, VL, VNNI) dot products (ISA level
 * QT_ISA_AVX512).
 *
 * The kernels are those of dot_x86_body.h with the VNNI instructions as the
 * integer multiply-accumulate primitives: vpdpbusd (u8 x s8, four products
 * summed into int32, no saturation) and vpdpwssd (int16 pairs into int32),
 * each replacing a two- or three-instruction AVX2 sequence. The one- and
 * four-row kernels run on 256-bit vectors (AVX512VL encodings), one kernel body
 * for both ISA levels; the 4 x 4 tiles a prompt's matmuls use (this level
 * only) put two pairs' 256-bit lanes in one 512-bit vector. Compiled with the
 * AVX-512 flags only; the dispatcher calls in here after checking the CPU.
 */
#include <immintrin.h>

#include "kernels/quant.h"

static inline __m256i dot_u8s8(__m256i acc, __m256i u, __m256i s) {
    return _mm256_dpbusd_epi32(acc, u, s);
}

static inline __m256i dot_i16(__m256i acc, __m256i a, __m256i b) {
    return _mm256_dpwssd_epi32(acc, a, b);
}

/* vpdpbusd never saturates: the 4 x 4 tile kernels' bias trick is exact */
#define X86_BODY_TILES 1
#include "kernels/dot_x86_body.h"

const qt_f32_kernels *qt_f32_avx512(void) {
    return &x86_f32_kernels;
}

qt_dot_fn qt_dot_avx512(uint32_t type) {
    return x86_body_table(type);
}

qt_dot4_fn qt_dot4_avx512(uint32_t type) {
    return x86_dot4_table(type);
}

qt_dot_fn qt_dot_panel_avx512(uint32_t type) {
    return x86_panel_table(type);
}

qt_tile_fn qt_tile_avx512(uint32_t type) {
    return x86_tile_table(type);
}

qt_widen_fn qt_widen_avx512(uint32_t type) {
    return x86_widen_table(type);
}

qt_tile_fn qt_tile8_avx512(uint32_t type) {
    return type == QT_Q8_0 ? tile8_q8_0 : NULL;
}

qt_f32_axpyn_fn qt_f32_axpyn_avx512(void) {
    return f32_axpyn;
}

qt_f16_axpyn_fn qt_f16_axpyn_avx512(void) {
    return f16_axpyn;
}

/* dot_f16(w, q[h]) for the N queries q[h], each as dot_f16_q2 computes one: a
 * 512-bit accumulator holds two of dot_f16's 256-bit ones over 16 consecutive
 * values (s0 | s1, s2 | s3), so each 512-bit FMA is the two 256-bit FMAs of
 * dot_f16, and the fold adds s0 + s1 and s2 + s3 as it does. A row chunk is
 * converted once for the N heads. */
static inline __attribute__((always_inline)) void dot_f16_qn(const pt_f16 *x, const float *const *q,
                                                             int N, int64_t n, float *out) {
    __m512 a[8], b[8];
    for (int h = 0; h < N; h++)
        a[h] = b[h] = _mm512_setzero_ps();
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) {
        const __m512 k0 = _mm512_cvtph_ps(loadu256(x + i)),
                     k1 = _mm512_cvtph_ps(loadu256(x + i + 16));
#pragma GCC unroll 8
        for (int h = 0; h < N; h++) {
            a[h] = _mm512_fmadd_ps(k0, _mm512_loadu_ps(q[h] + i), a[h]);
            b[h] = _mm512_fmadd_ps(k1, _mm512_loadu_ps(q[h] + i + 16), b[h]);
        }
    }
    for (int h = 0; h < N; h++) {
        const float *qh = q[h];
        __m256 s0 = _mm512_castps512_ps256(a[h]), s1 = _mm512_extractf32x8_ps(a[h], 1),
               s2 = _mm512_castps512_ps256(b[h]), s3 = _mm512_extractf32x8_ps(b[h], 1);
        int64_t j = i;
        for (; j + 8 <= n; j += 8)
            s0 = _mm256_fmadd_ps(load_f16x8(x + j), _mm256_loadu_ps(qh + j), s0);
        float sum = hsum_ps(_mm256_add_ps(_mm256_add_ps(s0, s1), _mm256_add_ps(s2, s3)));
        for (; j < n; j++)
            sum += f16(x[j]) * qh[j];
        out[h] = sum;
    }
}

/* dot_f16_q2 on 512-bit vectors (dot_f16_qn, N = 2): the same bits. */
static void dot_f16_q2_512(const void *w, const float *q0, const float *q1, int64_t n, float *out) {
    const float *q[2] = {q0, q1};
    dot_f16_qn(w, q, 2, n, out);
}

qt_f16_dot2_fn qt_f16_dot2_avx512(void) {
    return dot_f16_q2_512;
}

/* The eight queries q + h * qs (dot_f16_qn, N = 8). */
static void dot_f16_q8(const void *w, const float *q, int64_t qs, int64_t n, float *out) {
    const float *qh[8];
    for (int h = 0; h < 8; h++)
        qh[h] = q + h * qs;
    dot_f16_qn(w, qh, 8, n, out);
}

qt_f16_dot8_fn qt_f16_dot8_avx512(void) {
    return dot_f16_q8;
}

/* f32_dot_ggml(x, y + k * ys, n) for k = 0..3, x loaded once for the four: a
 * 512-bit accumulator holds two of its eight 256-bit ones over 16 consecutive
 * values (acc0 | acc1, ..., acc6 | acc7), so the fold acc[k] += acc[k + 4],
 * then acc[k] += acc[k + 2], then acc0 + acc1 is (z0 + z2) + (z1 + z3) and its
 * halves' sum, the same adds. */
static void f32_dot4_ggml(const float *x, const float *y, int64_t ys, int64_t n, float *out) {
    __m512 z[4][4];
    for (int k = 0; k < 4; k++)
        for (int c = 0; c < 4; c++)
            z[k][c] = _mm512_setzero_ps();
    const int64_t np = n & ~(int64_t)63;
    for (int64_t i = 0; i < np; i += 64)
#pragma GCC unroll 4
        for (int c = 0; c < 4; c++) {
            const __m512 xv = _mm512_loadu_ps(x + i + 16 * c);
#pragma GCC unroll 4
            for (int k = 0; k < 4; k++)
                z[k][c] = _mm512_fmadd_ps(xv, _mm512_loadu_ps(y + k * ys + i + 16 * c), z[k][c]);
        }
    for (int k = 0; k < 4; k++) {
        const __m512 w =
            _mm512_add_ps(_mm512_add_ps(z[k][0], z[k][2]), _mm512_add_ps(z[k][1], z[k][3]));
        const __m256 a = _mm256_add_ps(_mm512_castps512_ps256(w), _mm512_extractf32x8_ps(w, 1));
        __m128 v = _mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
        v = _mm_add_ps(v, _mm_movehl_ps(v, v));
        v = _mm_add_ss(v, _mm_shuffle_ps(v, v, 1));
        float sum = _mm_cvtss_f32(v);
        for (int64_t i = np; i < n; i++)
            sum += x[i] * y[k * ys + i];
        out[k] = sum;
    }
}

qt_f32_dot4_fn qt_f32_dot4_avx512(void) {
    return f32_dot4_ggml;
}
