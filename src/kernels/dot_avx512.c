/* dot_avx512.c — AVX-512 (F, BW, VL, VNNI) dot products (ISA level
 * QT_ISA_AVX512).
 *
 * The kernels are those of dot_x86_body.h with the VNNI instructions as the
 * integer multiply-accumulate primitives: vpdpbusd (u8 x s8, four products
 * summed into int32, no saturation) and vpdpwssd (int16 pairs into int32),
 * each replacing a two- or three-instruction AVX2 sequence. The one- and
 * four-row kernels run on 256-bit vectors (AVX512VL encodings), one kernel body
 * for both ISA levels; the 4 x 4 tiles a prompt's matmuls use (this level
 * only) put two pairs' 256-bit lanes in one 512-bit vector, and so do the gemv
 * kernels a decode step's matmuls use (two weight rows); the panel tiles
 * (qt_ptile: Q4_K's tile, Q8_0's eight-row tile) read their activations from a
 * panel the matmul builds once (dot_x86_body.h). Compiled with the
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

int qt_ptile_avx512(uint32_t type, qt_ptile *p) {
    if (type == QT_Q4_K)
        *p = (qt_ptile){ptile_q4_K, NULL, panel_row_q8_K, QK_K, PANEL_BLOCK};
    else if (type == QT_Q8_0)
        *p = (qt_ptile){NULL, ptile8_q8_0, panel_row_q8_0, 32, PANEL8_BLOCK};
    else
        return 0;
    return 1;
}

qt_gemv_fn qt_gemv_avx512(uint32_t type) {
    return x86_gemv_table(type);
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

/* The sums hsum_ps(v_k) for eight 256-bit vectors v_0..v_7 given as z[p] =
 * v_2p | v_2p+1, side by side: lane k of the result is v_k's, every add
 * pairing the same two values as hsum_ps does on one (lanes i and i + 4, then
 * i and i + 2, then 0 and 1). */
static inline __m256 hsum8_pairs(const __m512 z[4]) {
    /* low 128 + high 128 of each: v_0..v_3 in r0's four lanes, v_4..v_7 in r1's */
    const __m512 r0 = _mm512_add_ps(_mm512_shuffle_f32x4(z[0], z[1], 0x88),
                                    _mm512_shuffle_f32x4(z[0], z[1], 0xDD));
    const __m512 r1 = _mm512_add_ps(_mm512_shuffle_f32x4(z[2], z[3], 0x88),
                                    _mm512_shuffle_f32x4(z[2], z[3], 0xDD));
    /* element e + element e + 2, then element 0 + element 1: lane k holds v_k, v_k+4 */
    const __m512 s = _mm512_add_ps(_mm512_shuffle_ps(r0, r1, _MM_SHUFFLE(1, 0, 1, 0)),
                                   _mm512_shuffle_ps(r0, r1, _MM_SHUFFLE(3, 2, 3, 2)));
    const __m512 f = _mm512_add_ps(_mm512_shuffle_ps(s, s, _MM_SHUFFLE(2, 0, 2, 0)),
                                   _mm512_shuffle_ps(s, s, _MM_SHUFFLE(3, 1, 3, 1)));
    const __m512i order = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 0, 0, 0, 0, 0, 0, 0, 0);
    return _mm512_castps512_ps256(_mm512_permutexvar_ps(order, f));
}

/* [w0.lo + w0.hi | w1.lo + w1.hi]: the sums of two 512-bit vectors' 256-bit
 * halves, two outputs in one vector (hsum8_pairs' input) */
static inline __m512 fold_pair(__m512 w0, __m512 w1) {
    return _mm512_add_ps(_mm512_shuffle_f32x4(w0, w1, 0x44), _mm512_shuffle_f32x4(w0, w1, 0xEE));
}

/* dot_f16_qn's fold for eight heads, four heads' vectors at a time instead of
 * one: lane h of the result is head h's hsum_ps((s0 + s1) + (s2 + s3)), every
 * add pairing the same two values as the one-head fold (a = s0 | s1,
 * b = s2 | s3). */
static inline __m256 fold8_f16(const __m512 *a, const __m512 *b) {
    __m512 z[4];
#pragma GCC unroll 4
    for (int p = 0; p < 4; p++) {
        /* [s0 + s1 | s0' + s1'] + [s2 + s3 | s2' + s3'] of heads 2p, 2p + 1 */
        z[p] = _mm512_add_ps(fold_pair(a[2 * p], a[2 * p + 1]), fold_pair(b[2 * p], b[2 * p + 1]));
    }
    return hsum8_pairs(z);
}

/* Rows ahead of the one being scored whose lines are requested (one line per step of 32
 * values: a row of n values is requested over the row before it is scored) */
#define DOT8_AHEAD 4

/* The eight queries q + h * qs (dot_f16_qn, N = 8) over the rows w[0 .. nw): out[8 i + h].
 * When n is a multiple of 32 the accumulators stay in registers from row to row and the
 * eight folds run as one (fold8_f16); each row DOT8_AHEAD ahead is requested line by line
 * as the current one is scored (KV rows of one head lie a whole cache row apart, beyond
 * what the hardware prefetchers follow). */
static void dot_f16_q8(const void *const *w, int nw, const float *q, int64_t qs, int64_t n,
                       float *out) {
    const float *qh[8];
    for (int h = 0; h < 8; h++)
        qh[h] = q + h * qs;
    if (n % 32) {
        for (int r = 0; r < nw; r++)
            dot_f16_qn(w[r], qh, 8, n, out + 8 * r);
        return;
    }
    for (int r = 0; r < nw; r++) {
        const pt_f16 *x = w[r];
        const char *ahead = r + DOT8_AHEAD < nw ? (const char *)w[r + DOT8_AHEAD] : NULL;
        __m512 a[8], b[8];
#pragma GCC unroll 8
        for (int h = 0; h < 8; h++)
            a[h] = b[h] = _mm512_setzero_ps();
        for (int64_t i = 0; i < n; i += 32) {
            if (ahead) _mm_prefetch(ahead + 2 * i, _MM_HINT_T0);
            const __m512 k0 = _mm512_cvtph_ps(loadu256(x + i)),
                         k1 = _mm512_cvtph_ps(loadu256(x + i + 16));
#pragma GCC unroll 8
            for (int h = 0; h < 8; h++) {
                a[h] = _mm512_fmadd_ps(k0, _mm512_loadu_ps(qh[h] + i), a[h]);
                b[h] = _mm512_fmadd_ps(k1, _mm512_loadu_ps(qh[h] + i + 16), b[h]);
            }
        }
        _mm256_storeu_ps(out + 8 * r, fold8_f16(a, b));
    }
}

qt_f16_dot8_fn qt_f16_dot8_avx512(void) {
    return dot_f16_q8;
}

/* f32_dot_ggml(x, y + k * ys, n) for k = 0..3 up to the last fold, x loaded
 * once for the four: a 512-bit accumulator holds two of its eight 256-bit ones
 * over 16 consecutive values (acc0 | acc1, ..., acc6 | acc7), so the fold
 * acc[k] += acc[k + 4], then acc[k] += acc[k + 2] is w[k] = (z0 + z2) +
 * (z1 + z3), whose halves are acc0 and acc1: its sum is f32_dot_ggml's
 * hsum_ps(acc0 + acc1) before the tail. np is a multiple of 64. */
static inline __attribute__((always_inline)) void dot4_fold(const float *x, const float *y,
                                                            int64_t ys, int64_t np, __m512 w[4]) {
    __m512 z[4][4];
    for (int k = 0; k < 4; k++)
        for (int c = 0; c < 4; c++)
            z[k][c] = _mm512_setzero_ps();
    for (int64_t i = 0; i < np; i += 64)
#pragma GCC unroll 4
        for (int c = 0; c < 4; c++) {
            const __m512 xv = _mm512_loadu_ps(x + i + 16 * c);
#pragma GCC unroll 4
            for (int k = 0; k < 4; k++)
                z[k][c] = _mm512_fmadd_ps(xv, _mm512_loadu_ps(y + k * ys + i + 16 * c), z[k][c]);
        }
    for (int k = 0; k < 4; k++)
        w[k] = _mm512_add_ps(_mm512_add_ps(z[k][0], z[k][2]), _mm512_add_ps(z[k][1], z[k][3]));
}

/* f32_dot_ggml(x, y + k * ys, n) for k = 0..7 (a query head of the DSA indexer
 * against eight keys): two dot4_folds, then the eight sums side by side
 * (hsum8_pairs), then each tail as f32_dot_ggml's. */
static void f32_dot8_any(const float *x, const float *y, int64_t ys, int64_t n, float *out) {
    const int64_t np = n & ~(int64_t)63;
    __m512 w[8], z[4];
    dot4_fold(x, y, ys, np, w);
    dot4_fold(x, y + 4 * ys, ys, np, w + 4);
    for (int p = 0; p < 4; p++)
        z[p] = fold_pair(w[2 * p], w[2 * p + 1]);
    _mm256_storeu_ps(out, hsum8_pairs(z));
    for (int k = 0; k < 8; k++)
        for (int64_t i = np; i < n; i++)
            out[k] += x[i] * y[k * ys + i];
}

/* qt_f32_dot8_fn: f32_dot8_any for the query heads x0 (out[0..8)) and x1
 * (out[8..16)). At n = 128 (the indexer head of GLM-5 and DeepSeek-V3) both
 * heads stay in registers and each key is loaded once for the two: a lane's
 * chain is f32_dot_ggml's two fused multiply-adds (onto zero, then the second
 * 64 values), the fold and the sums as dot4_fold and hsum8_pairs. */
static void f32_dot8_ggml(const float *x0, const float *x1, const float *y, int64_t ys, int64_t n,
                          float *out) {
    if (n != 128) {
        f32_dot8_any(x0, y, ys, n, out);
        f32_dot8_any(x1, y, ys, n, out + 8);
        return;
    }
    __m512 a[8], b[8], za[4], zb[4], wa[2], wb[2];
    const __m512 zero = _mm512_setzero_ps();
#pragma GCC unroll 8
    for (int c = 0; c < 8; c++) {
        a[c] = _mm512_loadu_ps(x0 + 16 * c);
        b[c] = _mm512_loadu_ps(x1 + 16 * c);
    }
#pragma GCC unroll 8
    for (int k = 0; k < 8; k++) {
        const float *yk = y + k * ys;
        __m512 ta[4], tb[4];
#pragma GCC unroll 4
        for (int c = 0; c < 4; c++) {
            const __m512 y0 = _mm512_loadu_ps(yk + 16 * c), y1 = _mm512_loadu_ps(yk + 64 + 16 * c);
            ta[c] = _mm512_fmadd_ps(a[4 + c], y1, _mm512_fmadd_ps(a[c], y0, zero));
            tb[c] = _mm512_fmadd_ps(b[4 + c], y1, _mm512_fmadd_ps(b[c], y0, zero));
        }
        wa[k & 1] = _mm512_add_ps(_mm512_add_ps(ta[0], ta[2]), _mm512_add_ps(ta[1], ta[3]));
        wb[k & 1] = _mm512_add_ps(_mm512_add_ps(tb[0], tb[2]), _mm512_add_ps(tb[1], tb[3]));
        if (k & 1) {
            za[k / 2] = fold_pair(wa[0], wa[1]);
            zb[k / 2] = fold_pair(wb[0], wb[1]);
        }
    }
    _mm256_storeu_ps(out, hsum8_pairs(za));
    _mm256_storeu_ps(out + 8, hsum8_pairs(zb));
}

qt_f32_dot8_fn qt_f32_dot8_avx512(void) {
    return f32_dot8_ggml;
}
