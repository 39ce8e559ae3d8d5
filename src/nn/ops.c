/* ops.c — norms, rotary embeddings, softmax, the attention dot and weighted
 * sum in ggml's lane order, activations, top-k (see ops.h). */
#include "ops.h"

#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>

#include "common.h"
#include "kernels/quant.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#endif

/* lanes[0] = sum of lanes[0..n) by the halving tree (n a power of two) */
static float fold_lanes(float *lanes, int n) {
    for (int w = n / 2; w >= 1; w /= 2)
        for (int l = 0; l < w; l++)
            lanes[l] += lanes[l + w];
    return lanes[0];
}

/* As ggml_compute_forward_rms_norm_f32: each square rounded to float, then
 * summed in double. */
static void rms_apply(const float *x, const float *w, float eps, int n, double sum, float *y) {
    const float mean = (float)(sum / n);
    const float scale = 1.0f / sqrtf(mean + eps);
    if (w)
        for (int i = 0; i < n; i++)
            y[i] = (x[i] * scale) * w[i];
    else
        for (int i = 0; i < n; i++)
            y[i] = x[i] * scale;
}

void nn_rms_norm(const float *x, const float *w, float eps, int n, float *y) {
    double sum = 0;
    for (int i = 0; i < n; i++)
        sum += (double)(x[i] * x[i]);
    rms_apply(x, w, eps, n, sum, y);
}

/* Four rows' sums advance together: four independent chains of double adds
 * instead of one (the chain's latency is what a row costs), each in its row's
 * order, so every row gets nn_rms_norm's bits. */
void nn_rms_norm_rows(const float *x, const float *w, float eps, int n, int rows, float *y) {
    int r = 0;
    for (; r + 4 <= rows; r += 4) {
        const float *x0 = x + (size_t)r * n, *x1 = x0 + n, *x2 = x1 + n, *x3 = x2 + n;
        double s0 = 0, s1 = 0, s2 = 0, s3 = 0;
        for (int i = 0; i < n; i++) {
            s0 += (double)(x0[i] * x0[i]);
            s1 += (double)(x1[i] * x1[i]);
            s2 += (double)(x2[i] * x2[i]);
            s3 += (double)(x3[i] * x3[i]);
        }
        const double sums[4] = {s0, s1, s2, s3};
        for (int k = 0; k < 4; k++)
            rms_apply(x + (size_t)(r + k) * n, w, eps, n, sums[k], y + (size_t)(r + k) * n);
    }
    for (; r < rows; r++)
        nn_rms_norm(x + (size_t)r * n, w, eps, n, y + (size_t)r * n);
}

/* As ggml_compute_forward_norm_f32 (AVX-512 build): the mean is the double
 * sum rounded to float, divided in float; the variance sums the squares of
 * whole chunks of 16 as a folded float sum each (ggml_vec_cvar_f32), the tail
 * one by one, in double. */
void nn_layer_norm(const float *x, const float *w, const float *b, float eps, int n, float *y) {
    double sum = 0;
    for (int i = 0; i < n; i++)
        sum += x[i];
    const float mean = (float)sum / (float)n;
    double var = 0;
    int i = 0;
    for (; i + 16 <= n; i += 16) {
        float sq[16];
        for (int l = 0; l < 16; l++) {
            y[i + l] = x[i + l] - mean;
            sq[l] = y[i + l] * y[i + l];
        }
        var += fold_lanes(sq, 16);
    }
    for (; i < n; i++) {
        y[i] = x[i] - mean;
        var += (double)(y[i] * y[i]);
    }
    const float scale = 1.0f / sqrtf((float)(var / n) + eps);
    for (i = 0; i < n; i++) {
        float v = y[i] * scale;
        if (w) v *= w[i];
        if (b) v += b[i];
        y[i] = v;
    }
}

static float corr_dim(int n_dims, int n_ctx_orig, float n_rot, float base) {
    return (float)n_dims * logf((float)n_ctx_orig / (n_rot * 2 * (float)M_PI)) / (2 * logf(base));
}

void nn_rope_yarn_corr_dims(int n_dims, int n_ctx_orig, float freq_base, float beta_fast,
                            float beta_slow, float dims[2]) {
    float start = floorf(corr_dim(n_dims, n_ctx_orig, beta_fast, freq_base));
    float end = ceilf(corr_dim(n_dims, n_ctx_orig, beta_slow, freq_base));
    dims[0] = start > 0 ? start : 0;
    dims[1] = end < (float)(n_dims - 1) ? end : (float)(n_dims - 1);
}

static float yarn_ramp(float low, float high, int i0) {
    float y = ((float)(i0 / 2) - low) / fmaxf(0.001f, high - low);
    return 1.0f - fminf(1.0f, fmaxf(0.0f, y));
}

/* Angles and rotation are contracted the way llama.cpp's CPU build compiles
 * them (its rope is C++, built with floating-point contraction on; the
 * disassembly shows which products are fused): the YaRN mix and magnitude use
 * one fma each, and each rotated value fuses its x0 product:
 *   y0 = fma(x0, cos, -(x1 * sin)),  y1 = fma(x0, sin, x1 * cos).
 * Unfused, roped keys differ from llama.cpp's by up to ~20 ulp where the two
 * products nearly cancel. */
void nn_rope_cache(const nn_rope *r, int64_t pos, float *cs) {
    const float theta_scale = powf(r->freq_base, -2.0f / (float)r->n_dims);
    float theta = (float)pos;
    for (int i0 = 0; i0 < r->n_dims; i0 += 2) {
        const float ff = r->freq_factors ? r->freq_factors[i0 / 2] : 1.0f;
        const float extrap = theta / ff;
        const float interp = r->freq_scale * extrap;
        float t = interp, mscale = r->attn_factor;
        if (r->ext_factor != 0.0f) {
            float mix = yarn_ramp(r->corr_dims[0], r->corr_dims[1], i0) * r->ext_factor;
            t = fmaf(interp, 1 - mix, extrap * mix);
            mscale *= fmaf(0.1f, logf(1.0f / r->freq_scale), 1.0f);
        }
        cs[i0] = cosf(t) * mscale;
        cs[i0 + 1] = sinf(t) * mscale;
        theta *= theta_scale;
    }
}

void nn_rope_apply(const nn_rope *r, const float *cs, float *x) {
    const int half = r->n_dims / 2;
    for (int i = 0; i < half; i++) {
        const float c = cs[2 * i], s = cs[2 * i + 1];
        const int a = r->neox ? i : 2 * i;
        const int b = r->neox ? i + half : 2 * i + 1;
        const float x0 = x[a], x1 = x[b];
        x[a] = fmaf(x0, c, -(x1 * s));
        x[b] = fmaf(x0, s, x1 * c);
    }
}

/* ===== ggml's float lane order =====
 * llama.cpp's CPU attention (no flash attention) runs on three F32 kernels
 * whose rounding petrel reproduces, because a one-ulp difference in an
 * attention output can flip a later 8-bit activation rounding and move the
 * logits by 0.1 or more on the quantised fixtures:
 *   - scores: ggml_vec_dot_f32 (AVX-512): 4 x 16 float lanes, element i
 *     fused-multiply-added into lane i % 64 for the first n & ~63 elements,
 *     lanes folded pairwise, the rest added one by one (unfused);
 *   - softmax: ggml_soft_max_ext: scale, max, exp by ggml_v_expf in chunks of
 *     16 whose lanes are folded pairwise, chunk sums added in double;
 *   - weighted sum of values: mul_mat of the transposed values with the
 *     probabilities: llamafile's tinyBLAS for two or more query rows (16 lanes,
 *     key j into lane j % 16), ggml_vec_dot_f32 for one row (64 lanes).
 *     petrel takes the 16 lanes for every row, one alone too, so that a
 *     row's output does not depend on its batch (ARCHITECTURE.md, "One
 *     arithmetic"); a decode step thus differs from llama.cpp's by float
 *     rounding. The reduction runs over llama.cpp's whole KV window (a
 *     multiple of 256 cells); cells outside the causal/sparse mask carry
 *     probability 0 and add nothing, so a key's lane is its cell index, i.e.
 *     its position.
 * "Folded pairwise" is a halving tree, lane l += lane l + w for w = L/2 .. 1,
 * which is what _mm512_reduce_add_ps and GGML_F32x16_REDUCE compute. The dot
 * and the fused multiply-add of a row run on the F32 kernels of
 * kernels/quant.h (qt_f32_*): a scalar reference with fmaf and SIMD versions
 * that give the same bits, so they always take the fastest one the CPU has
 * (the --kernels cap, which exists to compare SIMD with scalar rounding, has
 * nothing to compare here). */

float nn_dot_f32(const float *x, const float *y, int n) {
    return qt_f32_best()->dot(x, y, n);
}
void nn_dot2_f32(const float *x, const float *y0, const float *y1, int n, float *out) {
    qt_f32_best()->dot2(x, y0, y1, n, out);
}

/* Lanes are zeroed on first touch and untouched lanes skipped in the fold (a
 * decode step with 20 keys touches 20 of 64 lanes): the same bits as zeroing
 * and folding all of them, since x + 0 is done explicitly where it matters. */
void nn_wsum_begin(float *acc, int lanes, int d, uint64_t *used) {
    (void)acc;
    (void)lanes;
    (void)d;
    *used = 0;
}

void nn_wsum_add(float *acc, int lanes, int d, int64_t key, float p, const float *row,
                 uint64_t *used) {
    const int lane = (int)(key % lanes);
    float *a = acc + (size_t)lane * (size_t)d;
    if (!(*used >> lane & 1)) {
        memset(a, 0, (size_t)d * sizeof(float));
        *used |= 1ull << lane;
    }
    qt_f32_best()->axpy(a, p, row, d);
}

/* A block's flags as bits: bit k % 64 of w[k / 64] is on[k] != 0 (k < nk). Eight flags at
 * a time: each byte's nonzero-ness into its low bit, then the eight low bits (at 8 i) into
 * one byte by a multiply whose partial products land on distinct bits (56 + i for byte i). */
static void on_bits(const unsigned char *on, int nk, uint64_t w[NN_WSUM_KEYS / 64]) {
    for (int i = 0; i < NN_WSUM_KEYS / 64; i++)
        w[i] = 0;
    int k = 0;
    for (; k + 8 <= nk; k += 8) {
        uint64_t x;
        memcpy(&x, on + k, 8);
        x |= x >> 4;
        x |= x >> 2;
        x |= x >> 1;
        x &= 0x0101010101010101ull;
        w[k / 64] |= (x * 0x0102040810204080ull >> 56) << (k % 64);
    }
    for (; k < nk; k++)
        w[k / 64] |= (uint64_t)(on[k] != 0) << (k % 64);
}

/* The lane loop of nn_wsum_add_keys_heads(_f16): rows of floats, or of halves when
 * axpyn16 is set. The block's keys that a head counts are a bit set; the heads whose sets
 * are equal (every head of a sparse or causal row, as a rule) share each lane's pass over
 * its rows, and a lane's keys are its set bits in increasing order (the lane is
 * (key0 + k) % lanes, lanes a power of two dividing 64: the bits k0, k0 + lanes, ... of
 * each word). */
static void wsum_keys_heads(int g, float *const *acc, int lanes, int d, int64_t key0, int nk,
                            const float *p, const unsigned char *on, const void *rows,
                            size_t stride, uint64_t *used, qt_f16_axpyn_fn axpyn16) {
    PT_ASSERT(nk <= NN_WSUM_KEYS && g <= NN_WSUM_HEADS && lanes >= 1 && lanes <= 64 &&
              !(lanes & (lanes - 1)));
    enum { W = NN_WSUM_KEYS / 64 };
    const qt_f32_axpyn_fn axpyn = qt_f32_axpyn_best();
    const size_t es = axpyn16 ? sizeof(pt_f16) : sizeof(float);
    uint64_t bits[NN_WSUM_HEADS][W], stride_bits = 0;
    for (int i = 0; i < 64; i += lanes)
        stride_bits |= 1ull << i;
    for (int h = 0; h < g; h++)
        on_bits(on + (size_t)h * NN_WSUM_KEYS, nk, bits[h]);
    int done[NN_WSUM_HEADS] = {0};
    for (int h = 0; h < g; h++) {
        if (done[h]) continue;
        /* the heads from h on that count the same keys */
        int hs[NN_WSUM_HEADS], nh = 0;
        for (int h2 = h; h2 < g; h2++)
            if (!done[h2] && !memcmp(bits[h2], bits[h], sizeof bits[h])) {
                done[h2] = 1;
                hs[nh++] = h2;
            }
        for (int k0 = 0; k0 < lanes && k0 < nk; k0++) {
            const void *x[NN_WSUM_KEYS];
            int ks[NN_WSUM_KEYS], m = 0;
            for (int i = 0; i < W; i++)
                for (uint64_t b = bits[h][i] & stride_bits << k0; b; b &= b - 1)
                    ks[m++] = 64 * i + __builtin_ctzll(b);
            if (!m) continue;
            const int lane = (int)((key0 + k0) % lanes);
            for (int i = 0; i < m; i++)
                x[i] = (const uint8_t *)rows + (size_t)ks[i] * stride * es;
            float a[NN_WSUM_HEADS * NN_WSUM_KEYS];
            float *accs[NN_WSUM_HEADS];
            for (int j = 0; j < nh; j++) {
                const float *ph = p + (size_t)hs[j] * NN_WSUM_KEYS;
                for (int i = 0; i < m; i++)
                    a[j * m + i] = ph[ks[i]];
                float *acc_l = acc[hs[j]] + (size_t)lane * (size_t)d;
                if (!(used[hs[j]] >> lane & 1)) {
                    memset(acc_l, 0, (size_t)d * sizeof(float));
                    used[hs[j]] |= 1ull << lane;
                }
                accs[j] = acc_l;
            }
            if (axpyn16)
                axpyn16(accs, nh, m, a, (const pt_f16 *const *)x, d);
            else
                axpyn(accs, nh, m, a, (const float *const *)x, d);
        }
    }
}

void nn_wsum_add_keys_heads(int g, float *const *acc, int lanes, int d, int64_t key0, int nk,
                            const float *p, const unsigned char *on, const float *rows,
                            size_t stride, uint64_t *used) {
    wsum_keys_heads(g, acc, lanes, d, key0, nk, p, on, rows, stride, used, NULL);
}

void nn_wsum_add_keys_heads_f16(int g, float *const *acc, int lanes, int d, int64_t key0, int nk,
                                const float *p, const unsigned char *on, const uint16_t *rows,
                                size_t stride, uint64_t *used) {
    wsum_keys_heads(g, acc, lanes, d, key0, nk, p, on, rows, stride, used, qt_f16_axpyn_best());
}

void nn_wsum_add_keys(float *acc, int lanes, int d, int64_t key0, int nk, const float *p,
                      const unsigned char *on, const float *rows, size_t stride, uint64_t *used) {
    nn_wsum_add_keys_heads(1, &acc, lanes, d, key0, nk, p, on, rows, stride, used);
}

void nn_wsum_end(float *acc, int lanes, int d, float *out, uint64_t used) {
    void (*const axpy)(float *, float, const float *, int64_t) = qt_f32_best()->axpy;
    for (int w = lanes / 2; w >= 1; w /= 2)
        for (int l = 0; l < w; l++) {
            const int ua = used >> l & 1, ub = used >> (l + w) & 1;
            if (!ua && !ub) continue; /* 0 + 0 */
            float *a = acc + (size_t)l * (size_t)d;
            const float *b = acc + (size_t)(l + w) * (size_t)d;
            if (ua && ub)
                axpy(a, 1.0f, b, d); /* fma(1, b, a): 1 * b is exact, so a + b's one rounding */
            else if (ua)
                for (int i = 0; i < d; i++)
                    a[i] += 0.0f; /* as with a zeroed lane: -0 becomes +0 */
            else
                for (int i = 0; i < d; i++)
                    a[i] = 0.0f + b[i];
            used |= 1ull << l;
        }
    if (used & 1)
        memcpy(out, acc, (size_t)d * sizeof(float));
    else
        memset(out, 0, (size_t)d * sizeof(float));
}

/* x * 2^k with one rounding, as vscalefps does (|k| <= 192): a power of two
 * taken in two exact steps when 2^k itself is not a normal float. */
static inline float scale2(float x, int k) {
    if (k > 127) {
        x *= 0x1p100f;
        k -= 100;
    } else if (k < -126) {
        x *= 0x1p-100f;
        k += 100;
    }
    float p;
    const uint32_t bits = (uint32_t)(k + 127) << 23;
    memcpy(&p, &bits, sizeof p);
    return x * p;
}

/* ggml_v_expf (the AVX-512 flavour), one lane: exp(x) = 2^n * p(b) with
 * n = round(x / ln 2) by the 1.5 * 2^23 trick, b = x - n ln 2 in two parts, p
 * a degree-5 polynomial; |n| > 192 saturates to 0 or inf. Within about an ulp
 * of expf, but not always the same bits. Inlined so that a caller compiled for
 * FMA (swiglu_fma) gets the instruction instead of a call per fmaf. */
static inline __attribute__((always_inline)) float expf_ggml(float x) {
    const float r = 0x1.8p23f;
    const float z = fmaf(x, 0x1.715476p+0f, r);
    const float n = z - r;
    const float b = fmaf(-n, 0x1.7f7d1cp-20f, fmaf(-n, 0x1.62e4p-1f, x));
    if (fabsf(n) > 192.0f) return n <= 0.0f ? 0.0f : INFINITY;
    const float u = b * b;
    const float j = fmaf(
        fmaf(fmaf(0x1.0e4020p-7f, b, 0x1.573e2ep-5f), u, fmaf(0x1.555e66p-3f, b, 0x1.fffdb6p-2f)),
        u, fmaf(0x1.ffffecp-1f, b, 1.0f));
    return scale2(j, (int)n);
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
/* expf_ggml's fmaf as one instruction where the CPU has it (a libm call per
 * fmaf otherwise: 35 ns an element instead of 8) */
static int fma_ok, avx512_ok;
static pthread_once_t fma_once = PTHREAD_ONCE_INIT;
static void fma_init(void) {
    fma_ok = qt_isa_detect() >= QT_ISA_AVX2; /* the AVX2 level includes FMA (dispatch.c) */
    avx512_ok = qt_isa_detect() >= QT_ISA_AVX512;
}
#endif

/* ggml_soft_max_ext's exponentials: whole chunks of 16 through expf_ggml with
 * a folded float sum per chunk, summed in double; the count done is returned. */
static inline __attribute__((always_inline)) int softmax_exp16(float *x, int n, float max,
                                                               double *sum) {
    int i = 0;
    for (; i + 16 <= n; i += 16) {
        float lanes[16];
        for (int l = 0; l < 16; l++)
            lanes[l] = x[i + l] = expf_ggml(x[i + l] - max);
        *sum += fold_lanes(lanes, 16);
    }
    return i;
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
__attribute__((target("fma"))) static int softmax_exp16_fma(float *x, int n, float max,
                                                            double *sum) {
    return softmax_exp16(x, n, max, sum);
}

/* softmax_exp16 sixteen lanes at a time: expf_ggml's operations as vector
 * instructions (each rounds as the scalar one does; vscalefps is scale2), and
 * the halving fold as the same adds. */
__attribute__((target("avx512f"))) static int softmax_exp16_avx512(float *x, int n, float max,
                                                                   double *sum) {
    const __m512 r = _mm512_set1_ps(0x1.8p23f), vmax = _mm512_set1_ps(max);
    int i = 0;
    for (; i + 16 <= n; i += 16) {
        const __m512 v = _mm512_sub_ps(_mm512_loadu_ps(x + i), vmax);
        const __m512 z = _mm512_fmadd_ps(v, _mm512_set1_ps(0x1.715476p+0f), r);
        const __m512 k = _mm512_sub_ps(z, r);
        const __m512 b = _mm512_fnmadd_ps(k, _mm512_set1_ps(0x1.7f7d1cp-20f),
                                          _mm512_fnmadd_ps(k, _mm512_set1_ps(0x1.62e4p-1f), v));
        const __m512 u = _mm512_mul_ps(b, b);
        const __m512 p = _mm512_fmadd_ps(
            _mm512_fmadd_ps(
                _mm512_fmadd_ps(_mm512_set1_ps(0x1.0e4020p-7f), b, _mm512_set1_ps(0x1.573e2ep-5f)),
                u,
                _mm512_fmadd_ps(_mm512_set1_ps(0x1.555e66p-3f), b, _mm512_set1_ps(0x1.fffdb6p-2f))),
            u, _mm512_fmadd_ps(_mm512_set1_ps(0x1.ffffecp-1f), b, _mm512_set1_ps(1.0f)));
        const __mmask16 big =
            _mm512_cmp_ps_mask(_mm512_abs_ps(k), _mm512_set1_ps(192.0f), _CMP_GT_OQ);
        const __mmask16 pos = _mm512_cmp_ps_mask(k, _mm512_setzero_ps(), _CMP_NLE_UQ);
        const __m512 e = _mm512_mask_mov_ps(_mm512_scalef_ps(p, k), big,
                                            _mm512_maskz_mov_ps(pos, _mm512_set1_ps(INFINITY)));
        _mm512_storeu_ps(x + i, e);
        const __m256 h =
            _mm256_add_ps(_mm512_castps512_ps256(e),
                          _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(e), 1)));
        __m128 q = _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
        q = _mm_add_ps(q, _mm_movehl_ps(q, q));
        q = _mm_add_ss(q, _mm_shuffle_ps(q, q, 1));
        *sum += _mm_cvtss_f32(q);
    }
    return i;
}

/* x[i] *= scale over whole chunks of 16, and their maximum (a NaN is never it, as in the
 * scalar loop: vmaxps returns its second operand, the running maximum, then; which zero
 * is the maximum does not matter to x - max). Returns the count done. */
__attribute__((target("avx512f"))) static int softmax_scale_max_avx512(float *x, int n, float scale,
                                                                       float *max) {
    const __m512 s = _mm512_set1_ps(scale);
    __m512 m = _mm512_set1_ps(-INFINITY);
    int i = 0;
    for (; i + 16 <= n; i += 16) {
        const __m512 v = _mm512_mul_ps(_mm512_loadu_ps(x + i), s);
        _mm512_storeu_ps(x + i, v);
        m = _mm512_max_ps(v, m);
    }
    float lanes[16];
    _mm512_storeu_ps(lanes, m);
    for (int l = 0; l < 16; l++)
        if (lanes[l] > *max) *max = lanes[l];
    return i;
}

/* x[i] *= inv over whole chunks of 16; returns the count done. */
__attribute__((target("avx512f"))) static int softmax_mul_avx512(float *x, int n, float inv) {
    const __m512 v = _mm512_set1_ps(inv);
    int i = 0;
    for (; i + 16 <= n; i += 16)
        _mm512_storeu_ps(x + i, _mm512_mul_ps(_mm512_loadu_ps(x + i), v));
    return i;
}
#endif

/* ggml_soft_max_ext order: the chunks of 16 (softmax_exp16), the tail
 * through expf; sums in double. vec = 0: scalar code throughout, whatever the CPU
 * (the reference the vector code is tested against). The scaling, the maximum and the
 * final multiply are elementwise (or order-free) in vectors too. */
static void softmax(float *x, int n, float scale, int vec) {
    float max = -INFINITY;
    int i = 0;
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
    pthread_once(&fma_once, fma_init);
    if (vec && avx512_ok) i = softmax_scale_max_avx512(x, n, scale, &max);
#endif
    for (; i < n; i++) {
        x[i] *= scale;
        if (x[i] > max) max = x[i];
    }
    double sum = 0;
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
    if (vec && avx512_ok)
        i = softmax_exp16_avx512(x, n, max, &sum);
    else if (fma_ok)
        i = softmax_exp16_fma(x, n, max, &sum);
    else
        i = softmax_exp16(x, n, max, &sum);
#else
    (void)vec;
    i = softmax_exp16(x, n, max, &sum);
#endif
    for (; i < n; i++) {
        x[i] = expf(x[i] - max);
        sum += x[i];
    }
    const float inv = (float)(1.0 / sum);
    i = 0;
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
    if (vec && avx512_ok) i = softmax_mul_avx512(x, n, inv);
#endif
    for (; i < n; i++)
        x[i] *= inv;
}

void nn_softmax(float *x, int n, float scale) {
    softmax(x, n, scale, 1);
}

void nn_softmax_scalar(float *x, int n, float scale) {
    softmax(x, n, scale, 0);
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
/* nn_weights_on sixteen at a time (the flags: the compare's mask as dwords of 0 or 1,
 * narrowed to bytes); returns the count done. */
__attribute__((target("avx512f"))) static int weights_on_avx512(const float *p, int n, float *pk,
                                                                unsigned char *on) {
    const __m512 zero = _mm512_setzero_ps();
    const __m512i one = _mm512_set1_epi32(1);
    int k = 0;
    for (; k + 16 <= n; k += 16) {
        const __m512 v = _mm512_add_ps(_mm512_loadu_ps(p + k), zero);
        _mm512_storeu_ps(pk + k, v);
        const __mmask16 m = _mm512_cmp_ps_mask(v, zero, _CMP_NEQ_UQ);
        _mm_storeu_si128((__m128i *)(on + k), _mm512_cvtepi32_epi8(_mm512_maskz_mov_epi32(m, one)));
    }
    return k;
}
#endif

void nn_weights_on(const float *p, int n, float *pk, unsigned char *on) {
    int k = 0;
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
    pthread_once(&fma_once, fma_init);
    if (avx512_ok) k = weights_on_avx512(p, n, pk, on);
#endif
    for (; k < n; k++) {
        pk[k] = p[k] + 0.0f;
        on[k] = pk[k] != 0.0f;
    }
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
/* The eight keys in one vector: vmaxps(d, 0) is d > 0 ? d : 0 (0 for a NaN, +0 for -0). */
__attribute__((target("avx"))) static void relu_wsum8_avx(const float *d, const float *w, int nh,
                                                          float sc[8]) {
    const __m256 zero = _mm256_setzero_ps();
    __m256 s = _mm256_loadu_ps(sc);
    for (int h = 0; h < nh; h++)
        s = _mm256_add_ps(s, _mm256_mul_ps(_mm256_max_ps(_mm256_loadu_ps(d + 8 * h), zero),
                                           _mm256_set1_ps(w[h])));
    _mm256_storeu_ps(sc, s);
}
#endif

void nn_relu_wsum8(const float *d, const float *w, int nh, float sc[8]) {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
    pthread_once(&fma_once, fma_init);
    if (fma_ok) {
        relu_wsum8_avx(d, w, nh, sc);
        return;
    }
#endif
    for (int h = 0; h < nh; h++)
        for (int k = 0; k < 8; k++) {
            const float v = d[8 * h + k];
            sc[k] += (v > 0 ? v : 0) * w[h];
        }
}

float nn_silu(float x) {
    return x / (1.0f + expf(-x));
}

/* llama.cpp's SwiGLU (ggml_vec_swiglu_f32, per row): ggml_v_silu on whole
 * chunks of 16, ggml_silu_f32 (expf) on the tail. The two exps differ in the
 * last bit now and then, which is enough to flip a later 8-bit activation
 * rounding (a Q4_0 glm-dsa mix moved by 0.03 at one row from it). */
static inline __attribute__((always_inline)) void swiglu_ggml(float *g, const float *u, int64_t n) {
    for (int64_t i = 0; i < n; i++)
        g[i] = g[i] / (1.0f + expf_ggml(0.0f - g[i])) * u[i];
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
/* The same arithmetic with fmaf as one instruction (fma_ok). */
__attribute__((target("fma"))) static void swiglu_fma(float *g, const float *u, int64_t n) {
    swiglu_ggml(g, u, n);
}
#endif

void nn_swiglu_row(float *g, const float *u, int64_t n) {
    const int64_t nv = n & ~(int64_t)15;
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
    pthread_once(&fma_once, fma_init);
    if (fma_ok)
        swiglu_fma(g, u, nv);
    else
        swiglu_ggml(g, u, nv);
#else
    swiglu_ggml(g, u, nv);
#endif
    for (int64_t i = nv; i < n; i++)
        g[i] = nn_silu(g[i]) * u[i];
}

float nn_sigmoid(float x) {
    return 1.0f / (1.0f + expf(-x));
}

/* a ranks above b: larger value, ties broken by the lower index */
static int ranks_above(const float *x, int a, int b) {
    return x[a] > x[b] || (x[a] == x[b] && a < b);
}

static void sift_down(const float *x, int *h, int n, int i) {
    /* min-heap on rank: h[0] is the weakest of the kept entries */
    for (;;) {
        int l = 2 * i + 1, r = l + 1, m = i;
        if (l < n && ranks_above(x, h[m], h[l])) m = l;
        if (r < n && ranks_above(x, h[m], h[r])) m = r;
        if (m == i) return;
        int t = h[i];
        h[i] = h[m];
        h[m] = t;
        i = m;
    }
}

void nn_top_k(const float *x, int n, int k, int *idx) {
    /* O(n log k) with a heap of the k best so far: DSA selects 2048 of up to
     * a million keys per query, so a quadratic selection would not do. */
    if (k <= 0) return;
    for (int i = 0; i < k; i++)
        idx[i] = i;
    for (int i = k / 2 - 1; i >= 0; i--)
        sift_down(x, idx, k, i);
    for (int i = k; i < n; i++)
        if (ranks_above(x, i, idx[0])) {
            idx[0] = i;
            sift_down(x, idx, k, 0);
        }
    /* heap-sort into descending rank */
    for (int end = k - 1; end > 0; end--) {
        int t = idx[0];
        idx[0] = idx[end];
        idx[end] = t;
        sift_down(x, idx, end, 0);
    }
}
