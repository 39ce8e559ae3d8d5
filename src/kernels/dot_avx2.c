/* dot_avx2.c — AVX2 + FMA + F16C dot products (ISA level QT_ISA_AVX2).
 *
 * The kernels live in dot_x86_body.h, shared with dot_avx512.c; this file only
 * supplies the two integer multiply-accumulate primitives, built from
 * vpmaddubsw (u8 x s8 -> saturating int16 pairs), vpmaddwd and vpaddd. The
 * callers keep every int16 pair sum below saturation (see the body's header
 * comment). Compiled with -mavx2 -mfma -mf16c only; the dispatcher calls in
 * here after checking the CPU. It also holds the activation quantisers (one set, for the
 * AVX2 and AVX-512 levels).
 */
#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "kernels/quant.h"

static inline __m256i dot_u8s8(__m256i acc, __m256i u, __m256i s) {
    return _mm256_add_epi32(acc,
                            _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1)));
}

static inline __m256i dot_i16(__m256i acc, __m256i a, __m256i b) {
    return _mm256_add_epi32(acc, _mm256_madd_epi16(a, b));
}

#include "kernels/dot_x86_body.h"

const qt_f32_kernels *qt_f32_avx2(void) {
    return &x86_f32_kernels;
}

qt_dot_fn qt_dot_avx2(uint32_t type) {
    return x86_body_table(type);
}

qt_dot4_fn qt_dot4_avx2(uint32_t type) {
    return x86_dot4_table(type);
}

qt_dot_fn qt_dot_panel_avx2(uint32_t type) {
    return x86_panel_table(type);
}

qt_tile_fn qt_tile_avx2(uint32_t type) {
    return x86_tile_table(type);
}

qt_f32_axpyn_fn qt_f32_axpyn_avx2(void) {
    return f32_axpyn;
}

qt_f16_axpyn_fn qt_f16_axpyn_avx2(void) {
    return f16_axpyn;
}

qt_f16_dot2_fn qt_f16_dot2_avx2(void) {
    return dot_f16_q2;
}

/* ===== Activation quantisation =====
 * Q8_0, Q8_1 and Q8_K rows with qt_quantize_act_ref's bits: the same amax (max is exact in any
 * order; vmaxps(|x|, acc) keeps acc for a NaN x as fmaxf does), the same scalar scale, the
 * same float products, and vcvtps2dq under the default rounding (nearest, ties to even) for
 * ggml's nearest_int, exact for |v| < 2^22 (here |v| <= 127.x). Where the reference's clamps
 * and NaN handling differ from the instruction's (a NaN converts to INT_MIN), the lanes are
 * fixed up to the reference's result. A block whose amax is infinite goes to the reference. */

static inline __m256 abs8(__m256 v) {
    return _mm256_andnot_ps(_mm256_set1_ps(-0.0f), v);
}

static inline float hmax8(__m256 v) {
    __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    m = _mm_max_ps(m, _mm_movehl_ps(m, m));
    m = _mm_max_ss(m, _mm_shuffle_ps(m, m, 1));
    return _mm_cvtss_f32(m);
}

static inline int hsum8i(__m256i v) {
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4e));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xb1));
    return _mm_cvtsi128_si32(s);
}

/* 32 int32 lanes (four vectors, in order) to 32 int8 in order (each in [-128, 127]). */
static inline void pack32(const __m256i q[4], int8_t *out) {
    const __m256i w =
        _mm256_packs_epi16(_mm256_packs_epi32(q[0], q[1]), _mm256_packs_epi32(q[2], q[3]));
    const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
    _mm256_storeu_si256((__m256i *)out, _mm256_permutevar8x32_epi32(w, order));
}

/* One Q8_0 / Q8_1 block (32 values); 0, or -1 when amax is infinite (the caller runs the
 * reference). qround(v, -128, 127): a NaN or v <= -128 gives -128, v > 127 gives 127. */
static int q8_block(const float *x, int8_t *qs, pt_f16 *d_out, pt_f16 *s_out) {
    __m256 v[4], m = _mm256_setzero_ps();
    for (int i = 0; i < 4; i++) {
        v[i] = _mm256_loadu_ps(x + 8 * i);
        m = _mm256_max_ps(abs8(v[i]), m);
    }
    const float amax = hmax8(m);
    if (!(amax < INFINITY)) return -1;
    const float d = amax / 127.0f;
    const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
    const __m256 vid = _mm256_set1_ps(id);
    const __m256i lo = _mm256_set1_epi32(-128), hi = _mm256_set1_epi32(127);
    __m256i q[4], sum = _mm256_setzero_si256();
    for (int i = 0; i < 4; i++) {
        /* INT_MIN (NaN, or out of range below) clamps to -128, as qround */
        q[i] = _mm256_min_epi32(_mm256_max_epi32(_mm256_cvtps_epi32(_mm256_mul_ps(v[i], vid)), lo),
                                hi);
        sum = _mm256_add_epi32(sum, q[i]);
    }
    pack32(q, qs);
    *d_out = qt_f32_to_f16(d);
    if (s_out) *s_out = qt_f32_to_f16(d * (float)hsum8i(sum));
    return 0;
}

/* One Q8_K block (256 values); 0, or -1 when amax is infinite. The scale comes from the
 * first value of the largest magnitude; nearest_int(iscale * x) then min(., 127), no lower
 * clamp (|iscale * x| <= 127.x), and a NaN x gives 0 (nearest_int's result for it). */
static int q8k_block(const float *x, block_q8_K *y) {
    __m256 m = _mm256_setzero_ps();
    for (int i = 0; i < QK_K / 8; i++)
        m = _mm256_max_ps(abs8(_mm256_loadu_ps(x + 8 * i)), m);
    const float amax = hmax8(m);
    if (!(amax < INFINITY)) return -1;
    if (amax == 0.0f) {
        memset(y, 0, sizeof *y);
        return 0;
    }
    int j = 0;
    while (fabsf(x[j]) != amax)
        j++;
    const float iscale = -127.0f / x[j];
    const __m256 vis = _mm256_set1_ps(iscale);
    const __m256i hi = _mm256_set1_epi32(127);
    for (int b = 0; b < QK_K / 32; b++) {
        __m256i q[4];
        for (int i = 0; i < 4; i++) {
            const __m256 v = _mm256_mul_ps(vis, _mm256_loadu_ps(x + 32 * b + 8 * i));
            const __m256i nan = _mm256_castps_si256(_mm256_cmp_ps(v, v, _CMP_UNORD_Q));
            q[i] = _mm256_andnot_si256(nan, _mm256_min_epi32(_mm256_cvtps_epi32(v), hi));
        }
        pack32(q, y->qs + 32 * b);
        y->bsums[2 * b] = (int16_t)hsum8i(_mm256_add_epi32(q[0], q[1]));
        y->bsums[2 * b + 1] = (int16_t)hsum8i(_mm256_add_epi32(q[2], q[3]));
    }
    y->d = 1.0f / iscale;
    return 0;
}

static void quantize_act(uint32_t act_type, const float *x, void *dst, int64_t n) {
    switch (act_type) {
    case QT_Q8_0:
    case QT_Q8_1: {
        const int one = act_type == QT_Q8_1;
        const size_t bs = one ? sizeof(block_q8_1) : sizeof(block_q8_0);
        for (int64_t i = 0; i < n / 32; i++) {
            uint8_t *b = (uint8_t *)dst + (size_t)i * bs;
            int rc = one ? q8_block(x + 32 * i, ((block_q8_1 *)b)->qs, &((block_q8_1 *)b)->d,
                                    &((block_q8_1 *)b)->s)
                         : q8_block(x + 32 * i, ((block_q8_0 *)b)->qs, &((block_q8_0 *)b)->d, NULL);
            if (rc) qt_quantize_act_ref(act_type, x + 32 * i, b, 32);
        }
        break;
    }
    case QT_Q8_K:
        for (int64_t i = 0; i < n / QK_K; i++)
            if (q8k_block(x + QK_K * i, (block_q8_K *)dst + i))
                qt_quantize_act_ref(act_type, x + QK_K * i, (block_q8_K *)dst + i, QK_K);
        break;
    case QT_F16: { /* F16C rounds to nearest even as qt_f32_to_f16 does; NaNs go to it */
        pt_f16 *h = dst;
        int64_t i = 0;
        for (; i + 8 <= n; i += 8) {
            const __m256 v = _mm256_loadu_ps(x + i);
            if (_mm256_movemask_ps(_mm256_cmp_ps(v, v, _CMP_UNORD_Q)))
                qt_quantize_act_ref(act_type, x + i, h + i, 8);
            else
                _mm_storeu_si128((__m128i *)(h + i),
                                 _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
        }
        if (i < n) qt_quantize_act_ref(act_type, x + i, h + i, n - i);
        break;
    }
    default: qt_quantize_act_ref(act_type, x, dst, n);
    }
}

qt_quantize_act_fn qt_quantize_act_avx2(void) {
    return quantize_act;
}
