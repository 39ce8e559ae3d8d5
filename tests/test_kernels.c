/* test_kernels.c — tests of the scalar reference kernels (quant_ref.c, qtraits.c):
 * weight quantise/decode round trips with error bounds, activation quantisation
 * properties (Q8_0, Q8_1, Q8_K), dot products against a double-precision dot of
 * the decoded operands, exhaustive fp16/bf16 conversion checks, and row sizes.
 *
 * Bit-exactness against ggml is checked elsewhere (tests/test_refvec.c, against
 * tensors quantised by llama.cpp); these tests pin down the properties the
 * reference must have whatever its inputs. All randomness is a fixed-seed PRNG.
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "kernels/quant.h"
#include "test.h"

/* ===== Helpers ===== */

typedef struct {
    uint64_t s;
} krng;

static uint64_t krng_next(krng *r) { /* splitmix64 */
    uint64_t z = (r->s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static double krng_unif(krng *r) {
    return (double)(krng_next(r) >> 11) * 0x1p-53;
}

static float krng_gauss(krng *r) { /* Box-Muller */
    double u1 = 1.0 - krng_unif(r), u2 = krng_unif(r);
    return (float)(sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2));
}

static void fill_gauss(krng *r, float *x, int64_t n, float sigma) {
    for (int64_t i = 0; i < n; i++)
        x[i] = sigma * krng_gauss(r);
}

static void *row_alloc(uint32_t type, int64_t n) {
    uint64_t bytes = 0;
    if (qt_row_bytes(type, n, &bytes) != 0) return NULL;
    return calloc(1, (size_t)bytes + 1);
}

/* sqrt(sum (x-y)^2 / sum x^2) */
static double rel_rms(const float *x, const float *y, int64_t n) {
    double e = 0.0, s = 0.0;
    for (int64_t i = 0; i < n; i++) {
        e += ((double)x[i] - y[i]) * ((double)x[i] - y[i]);
        s += (double)x[i] * x[i];
    }
    return s > 0.0 ? sqrt(e / s) : 0.0;
}

static int f16_is_nan(pt_f16 h) {
    return (h & 0x7c00) == 0x7c00 && (h & 0x3ff) != 0;
}

/* ===== Row sizes ===== */

static void test_kernels_row_bytes(void) {
    uint64_t b = 0;
    CHECK(qt_row_bytes(QT_Q4_K, 512, &b) == 0 && b == 288);
    CHECK(qt_row_bytes(QT_Q8_0, 64, &b) == 0 && b == 68);
    CHECK(qt_row_bytes(QT_F16, 3, &b) == 0 && b == 6);
    CHECK(qt_row_bytes(QT_Q8_K, 256, &b) == 0 && b == 292);
    CHECK(qt_row_bytes(QT_Q4_K, 255, &b) == -1); /* not a whole super-block */
    CHECK(qt_row_bytes(QT_Q4_K, 384, &b) == -1);
    CHECK(qt_row_bytes(QT_Q8_0, 33, &b) == -1);
    CHECK(qt_row_bytes(QT_Q4_0, -32, &b) == -1);
    CHECK(qt_row_bytes(4, 32, &b) == -1); /* removed Q4_2 id: unknown */
    CHECK(qt_row_bytes(999, 32, &b) == -1);
    CHECK(qt_row_bytes(QT_F32, INT64_MAX, &b) == -1); /* 4 * 2^63 overflows u64 */
}

/* ===== fp16 / bf16 ===== */

/* Independent value of a half: (-1)^s * 2^(e-15) * (1 + m/1024), subnormals m * 2^-24. */
static double f16_value(uint16_t h) {
    int s = h >> 15, e = (h >> 10) & 0x1f, m = h & 0x3ff;
    double v = e == 0 ? ldexp(m, -24) : ldexp(1024 + m, e - 25);
    if (e == 0x1f) v = m ? NAN : INFINITY;
    return s ? -v : v;
}

static void test_kernels_f16_exhaustive(void) {
    int bad_val = 0, bad_rt = 0;
    for (uint32_t h = 0; h < 65536; h++) {
        float f = qt_f16_to_f32((pt_f16)h);
        double ref = f16_value((uint16_t)h);
        if (f16_is_nan((pt_f16)h)) {
            if (!isnan(f) || !!signbit(f) != !!(h & 0x8000)) bad_val++;
            pt_f16 back = qt_f32_to_f16(f);
            if (!f16_is_nan(back) || (back & 0x8000) != (h & 0x8000)) bad_rt++;
            continue;
        }
        if ((double)f != ref || !!signbit(f) != !!(h & 0x8000)) bad_val++;
        if (qt_f32_to_f16(f) != h) bad_rt++;
    }
    CHECKF(bad_val == 0, "%d halves decode to the wrong float", bad_val);
    CHECKF(bad_rt == 0, "%d halves do not round-trip f16->f32->f16", bad_rt);

    /* round to nearest, ties to even */
    CHECK(qt_f32_to_f16(1.0f + 0x1p-11f) == 0x3c00);            /* tie, 1.0 is even */
    CHECK(qt_f32_to_f16(1.0f + 3 * 0x1p-11f) == 0x3c02);        /* tie, rounds up to even */
    CHECK(qt_f32_to_f16(1.0f + 0x1p-11f + 0x1p-20f) == 0x3c01); /* just above the tie */
    CHECK(qt_f32_to_f16(-1.0f - 0x1p-11f) == 0xbc00);
    CHECK(qt_f32_to_f16(65504.0f) == 0x7bff);
    CHECK(qt_f32_to_f16(65519.996f) == 0x7bff); /* below the tie with infinity */
    CHECK(qt_f32_to_f16(65520.0f) == 0x7c00);   /* tie: rounds to "even" = inf */
    CHECK(qt_f32_to_f16(1e10f) == 0x7c00);
    CHECK(qt_f32_to_f16(-INFINITY) == 0xfc00);
    CHECK(f16_is_nan(qt_f32_to_f16(NAN)));
    CHECK(qt_f32_to_f16(0x1p-25f) == 0x0000); /* tie between 0 and the smallest subnormal */
    CHECK(qt_f32_to_f16(0x1p-25f * 1.0001f) == 0x0001);
    CHECK(qt_f32_to_f16(3 * 0x1p-25f) == 0x0002); /* tie between 1 and 2 ulps: even */
    CHECK(qt_f32_to_f16(1023.5f * 0x1p-24f) ==
          0x0400); /* largest subnormal tie carries into normal */
    CHECK(qt_f32_to_f16(-0.0f) == 0x8000);
}

static void test_kernels_bf16_exhaustive(void) {
    int bad_val = 0, bad_rt = 0;
    for (uint32_t h = 0; h < 65536; h++) {
        float f = qt_bf16_to_f32((pt_bf16)h);
        uint32_t bits;
        memcpy(&bits, &f, 4);
        if (bits != h << 16) bad_val++;
        pt_bf16 back = qt_f32_to_bf16(f);
        int is_nan = (h & 0x7f80) == 0x7f80 && (h & 0x7f);
        if (is_nan ? !((back & 0x7f80) == 0x7f80 && (back & 0x7f)) : back != h) bad_rt++;
    }
    CHECKF(bad_val == 0, "%d bf16 values decode wrongly", bad_val);
    CHECKF(bad_rt == 0, "%d bf16 values do not round-trip", bad_rt);
    CHECK(qt_f32_to_bf16(1.0f + 0x1p-8f) == 0x3f80);     /* tie to even */
    CHECK(qt_f32_to_bf16(1.0f + 3 * 0x1p-8f) == 0x3f82); /* tie to even, upwards */
    CHECK(qt_f32_to_bf16(1.0f + 0x1p-8f + 0x1p-20f) == 0x3f81);
    uint32_t snan = 0x7f800001u; /* a NaN whose payload sits only in the dropped bits */
    float fs;
    memcpy(&fs, &snan, 4);
    pt_bf16 q = qt_f32_to_bf16(fs);
    CHECK((q & 0x7f80) == 0x7f80 && (q & 0x7f) != 0); /* still NaN, not infinity */
}

/* ===== Weight round trips ===== */

/* Error bounds, derived from the grid spacing: uniform rounding with step D
 * leaves an RMS error of D/sqrt(12). For Gaussian groups of 16/32 the extreme is
 * ~2-2.5 sigma, so D ~ 2.2/nmax sigma (symmetric) or ~4.4/nmax sigma (affine),
 * plus the loss from quantised group scales; e.g. Q4_K: 4.4/15/sqrt(12) = 0.085,
 * measured 0.071 (the least-squares search beats plain min/max). The bound is
 * about 1.4-2x what quant_ref.c measures (Q2_K 0.27, Q3_K 0.144, Q4_K 0.071,
 * Q5_K 0.036, Q6_K 0.017, Q4_0 0.081, Q8_0 0.0054) so that a regression in the
 * quantiser's search fails. The floor is Shannon's rate-distortion limit for a Gaussian source,
 * rel RMS >= 2^-R at R bits per weight: no quantiser can beat it, so a result
 * below it means the test measured nothing (e.g. the data was not quantised). */
typedef struct {
    uint32_t type;
    double bound; /* max rel RMS error */
    double bpw;   /* bits per weight, for the floor */
} rt_case;

static const rt_case rt_cases[] = {
    {QT_F16, 1e-3, 16.0},    {QT_BF16, 5e-3, 16.0}, {QT_Q8_0, 0.01, 8.5}, {QT_Q4_0, 0.12, 4.5},
    {QT_Q4_1, 0.10, 5.0},    {QT_Q5_0, 0.06, 5.5},  {QT_Q5_1, 0.05, 6.0}, {QT_Q2_K, 0.40, 2.625},
    {QT_Q3_K, 0.20, 3.4375}, {QT_Q4_K, 0.10, 4.5},  {QT_Q5_K, 0.05, 5.5}, {QT_Q6_K, 0.025, 6.5625},
};

static double rt_bound(uint32_t type) {
    for (size_t c = 0; c < PT_ARRAY_LEN(rt_cases); c++)
        if (rt_cases[c].type == type) return rt_cases[c].bound;
    return 1.0;
}

static void test_kernels_roundtrip(void) {
    enum { N = 16384 };
    float *x = malloc(N * sizeof *x), *y = malloc(N * sizeof *y);
    const float sigmas[2] = {1.0f, 0.02f}; /* unit scale and a typical weight scale */
    for (size_t c = 0; c < PT_ARRAY_LEN(rt_cases); c++) {
        const rt_case *rc = &rt_cases[c];
        CHECKF(qt_can_quantize(rc->type), "%s should be quantisable", qt_name(rc->type));
        void *q = row_alloc(rc->type, N);
        for (int si = 0; si < 2; si++) {
            krng r = {1234 + c};
            fill_gauss(&r, x, N, sigmas[si]);
            qt_quantize_ref(rc->type, x, q, N);
            qt_dequant_ref(rc->type, q, y, N);
            double e = rel_rms(x, y, N), floor = pow(2.0, -rc->bpw);
            CHECKF(e < rc->bound && e > floor,
                   "%s sigma %g: rel RMS %.5f, expected in (%.5f, %.4f)", qt_name(rc->type),
                   sigmas[si], e, floor, rc->bound);
        }
        /* an all-zero row decodes to zeros */
        memset(x, 0, N * sizeof *x);
        qt_quantize_ref(rc->type, x, q, N);
        qt_dequant_ref(rc->type, q, y, N);
        int nz = 0;
        for (int i = 0; i < N; i++)
            nz += y[i] != 0.0f;
        CHECKF(nz == 0, "%s: zero row decodes to %d non-zeros", qt_name(rc->type), nz);
        free(q);
    }
    /* F32 is exact */
    krng r = {99};
    fill_gauss(&r, x, N, 1.0f);
    void *q = row_alloc(QT_F32, N);
    qt_quantize_ref(QT_F32, x, q, N);
    qt_dequant_ref(QT_F32, q, y, N);
    CHECK(memcmp(x, y, N * sizeof *x) == 0);
    free(q);
    CHECK(!qt_can_quantize(QT_Q8_K) && !qt_can_quantize(QT_IQ2_XXS) && !qt_can_quantize(QT_I8));
    free(x);
    free(y);
}

/* Groups with an offset and outliers: the affine types must follow the offset,
 * and an outlier must not wreck the rest of its super-block beyond the bound. */
static void test_kernels_roundtrip_offset(void) {
    enum { N = 4096 };
    float x[N], y[N];
    const uint32_t types[] = {QT_Q4_1, QT_Q5_1, QT_Q2_K, QT_Q4_K, QT_Q5_K};
    const double bounds[] = {0.05, 0.025, 0.25, 0.05, 0.03};
    for (size_t t = 0; t < PT_ARRAY_LEN(types); t++) {
        krng r = {77};
        for (int i = 0; i < N; i++)
            x[i] = 3.0f + 0.5f * krng_gauss(&r); /* rel error measured on x */
        void *q = row_alloc(types[t], N);
        qt_quantize_ref(types[t], x, q, N);
        qt_dequant_ref(types[t], q, y, N);
        double e = rel_rms(x, y, N);
        CHECKF(e < bounds[t], "%s with offset: rel RMS %.5f >= %.3f", qt_name(types[t]), e,
               bounds[t]);
        free(q);
    }
}

/* ===== Activation quantisation ===== */

static void test_kernels_act_q8_k(void) {
    enum { NB = 4, N = NB * QK_K };
    float x[N], y[N];
    krng r = {5};
    fill_gauss(&r, x, N, 1.0f);
    x[17] = 9.0f;         /* block 0: positive extreme -> d < 0 */
    x[QK_K + 3] = -9.0f;  /* block 1: negative extreme -> d > 0 */
    x[QK_K + 200] = 9.0f; /* same |x| later in the block: the first one decides */
    for (int i = 2 * QK_K; i < 3 * QK_K; i++)
        x[i] = 0.0f; /* block 2: all zero */
    block_q8_K q[NB];
    memset(q, 0x55, sizeof q); /* garbage that must be overwritten */
    qt_quantize_act_ref(QT_Q8_K, x, q, N);

    CHECK(q[0].d < 0.0f && q[0].qs[17] == -127);
    CHECK(q[1].d > 0.0f && q[1].qs[3] == -127);
    CHECK(q[1].qs[200] == 127);
    CHECK(fabsf(q[0].d * -127.0f - 9.0f) <= 9.0f * 1e-6f);
    CHECK(q[2].d == 0.0f);
    int bad_bsum = 0, bad_rec = 0, nonzero = 0;
    for (int b = 0; b < NB; b++) {
        for (int j = 0; j < QK_K / 16; j++) {
            int s = 0;
            for (int l = 0; l < 16; l++)
                s += q[b].qs[16 * j + l];
            bad_bsum += s != q[b].bsums[j];
        }
        for (int l = 0; l < QK_K; l++) {
            float rec = q[b].d * q[b].qs[l];
            /* round to nearest: within half a step (plus float slack) */
            if (fabsf(rec - x[b * QK_K + l]) > fabsf(q[b].d) * 0.5f * (1.0f + 1e-5f) + 1e-7f)
                bad_rec++;
            if (b == 2) nonzero += q[b].qs[l] != 0 || q[b].bsums[l / 16] != 0;
        }
    }
    CHECKF(bad_bsum == 0, "%d Q8_K bsums differ from the sums of qs", bad_bsum);
    CHECKF(bad_rec == 0, "%d Q8_K values off by more than d/2", bad_rec);
    CHECK(nonzero == 0);
    qt_dequant_ref(QT_Q8_K, q, y, N);
    CHECK(y[17] == q[0].d * -127.0f);

    /* Ties round to even (ggml's nearest_int), not away from zero: with the
     * extreme at -127 the scale is exactly 1. */
    float t[QK_K] = {0};
    t[0] = -127.0f;
    t[1] = 2.5f;
    t[2] = 3.5f;
    t[3] = -2.5f;
    t[4] = 0.5f;
    block_q8_K qt;
    qt_quantize_act_ref(QT_Q8_K, t, &qt, QK_K);
    CHECK(qt.d == 1.0f && qt.qs[0] == -127);
    CHECK(qt.qs[1] == 2 && qt.qs[2] == 4 && qt.qs[3] == -2 && qt.qs[4] == 0);
}

static void test_kernels_act_q8_0_q8_1(void) {
    enum { NB = 8, N = NB * 32 };
    float x[N];
    krng r = {6};
    fill_gauss(&r, x, N, 0.7f);
    for (int i = 64; i < 96; i++)
        x[i] = 0.0f; /* block 2: zero */
    block_q8_0 a[NB];
    block_q8_1 b[NB];
    qt_quantize_act_ref(QT_Q8_0, x, a, N);
    qt_quantize_act_ref(QT_Q8_1, x, b, N);
    int bad = 0;
    for (int i = 0; i < NB; i++) {
        float amax = 0.0f;
        for (int j = 0; j < 32; j++)
            amax = fmaxf(amax, fabsf(x[32 * i + j]));
        const float d = amax / 127.0f;
        CHECK(a[i].d == qt_f32_to_f16(d) && b[i].d == a[i].d);
        CHECK(memcmp(a[i].qs, b[i].qs, 32) == 0);
        int sum = 0;
        for (int j = 0; j < 32; j++) {
            sum += b[i].qs[j];
            /* q from the unrounded 127/amax; d is then rounded to fp16 (rel 2^-11) */
            float rec = qt_f16_to_f32(a[i].d) * a[i].qs[j];
            if (fabsf(rec - x[32 * i + j]) > d * (0.5f + 127.0f * 0x1p-11f) + 1e-7f) bad++;
        }
        CHECK(b[i].s == qt_f32_to_f16(d * (float)sum));
    }
    CHECKF(bad == 0, "%d Q8_0 values reconstruct badly", bad);
    CHECK(a[2].d == 0 && b[2].s == 0 && a[2].qs[5] == 0);

    /* ties to even (x86 _mm256_round_ps), amax = 127 gives a multiplier of 1 */
    float t[32] = {0};
    t[0] = 127.0f;
    t[1] = 2.5f;
    t[2] = -3.5f;
    t[3] = 1.5f;
    block_q8_0 qt;
    qt_quantize_act_ref(QT_Q8_0, t, &qt, 32);
    CHECK(qt.qs[0] == 127 && qt.qs[1] == 2 && qt.qs[2] == -4 && qt.qs[3] == 2);
}

static void test_kernels_act_float(void) {
    float x[64], y[64];
    krng r = {8};
    fill_gauss(&r, x, 64, 3.0f);
    pt_f16 h[64];
    pt_bf16 bh[64];
    qt_quantize_act_ref(QT_F16, x, h, 64);
    qt_quantize_act_ref(QT_BF16, x, bh, 64);
    int bad = 0;
    for (int i = 0; i < 64; i++)
        bad += h[i] != qt_f32_to_f16(x[i]) || bh[i] != qt_f32_to_bf16(x[i]);
    CHECK(bad == 0);
    qt_quantize_act_ref(QT_F32, x, y, 64);
    CHECK(memcmp(x, y, sizeof x) == 0);
}

/* ===== Dot products ===== */

/* qt_dot_ref must equal the exact dot of the decoded weights and the decoded
 * activations, up to float accumulation: |err| <= 1e-5 * sum |w_i a_i|.
 * Q4_1/Q5_1 are the one place where the dot does not use decoded activations:
 * the min term uses Q8_1's s = fp16(d * sum q), not d16 * sum q; the reference
 * adds that difference, m * (s - d16 * sum q) per block, explicitly. */
static void test_kernels_dot_vs_dequant(void) {
    enum { N = 4096 };
    const uint32_t types[] = {QT_F32,  QT_F16,  QT_BF16, QT_Q4_0, QT_Q4_1, QT_Q5_0, QT_Q5_1,
                              QT_Q8_0, QT_Q2_K, QT_Q3_K, QT_Q4_K, QT_Q5_K, QT_Q6_K};
    float *x = malloc(N * sizeof *x), *a = malloc(N * sizeof *a);
    float *wd = malloc(N * sizeof *wd), *ad = malloc(N * sizeof *ad);
    for (size_t t = 0; t < PT_ARRAY_LEN(types); t++) {
        const uint32_t type = types[t];
        const uint32_t act = (uint32_t)qt_get(type)->act_type;
        krng r = {4242 + t};
        fill_gauss(&r, x, N, 0.05f);
        fill_gauss(&r, a, N, 2.0f);
        for (int i = 0; i < N; i += 97)
            a[i] *= 8.0f; /* some outliers, as real activations have */
        void *wq = row_alloc(type, N), *aq = row_alloc(act, N);
        qt_quantize_ref(type, x, wq, N);
        qt_quantize_act_ref(act, a, aq, N);
        qt_dequant_ref(type, wq, wd, N);
        qt_dequant_ref(act, aq, ad, N);
        double ref = 0.0, mag = 0.0, exact = 0.0, emag = 0.0;
        for (int i = 0; i < N; i++) {
            ref += (double)wd[i] * ad[i];
            mag += fabs((double)wd[i] * ad[i]);
            exact += (double)x[i] * a[i];
            emag += fabs((double)x[i] * a[i]);
        }
        if (type == QT_Q4_1 || type == QT_Q5_1) {
            for (int b = 0; b < N / 32; b++) {
                const block_q8_1 *ab = (const block_q8_1 *)aq + b;
                /* m sits right after d in both block_q4_1 and block_q5_1 */
                const pt_f16 m =
                    type == QT_Q4_1 ? ((const block_q4_1 *)wq)[b].m : ((const block_q5_1 *)wq)[b].m;
                int sum = 0;
                for (int j = 0; j < 32; j++)
                    sum += ab->qs[j];
                ref += (double)qt_f16_to_f32(m) *
                       ((double)qt_f16_to_f32(ab->s) - (double)qt_f16_to_f32(ab->d) * sum);
            }
        }
        const float got = qt_dot_ref(type, wq, aq, N);
        CHECKF(fabs(got - ref) <= 1e-5 * mag, "%s: dot %.9g, dequantised dot %.9g (tolerance %.3g)",
               qt_name(type), got, ref, 1e-5 * mag);
        /* And it is close to the float dot of the unquantised data, a check that
         * both sides did not go wrong in the same way. With relative RMS errors
         * e_w, e_a the dot error is ~ sqrt(N) (e_w + e_a) rms(w) rms(a), and
         * sum|w a| ~ 0.64 N rms(w) rms(a); allow 6 standard deviations. */
        const double ew = type == QT_F32 ? 0.0 : rt_bound(type), ea = act == QT_F32 ? 0.0 : 0.01;
        const double tol = 6.0 * (ew + ea) * emag / (0.64 * sqrt((double)N)) + 1e-6 * emag;
        CHECKF(fabs(got - exact) <= tol, "%s: dot %.6g far from float dot %.6g (tolerance %.3g)",
               qt_name(type), got, exact, tol);
        free(wq);
        free(aq);
    }
    free(x);
    free(a);
    free(wd);
    free(ad);
}

/* The K-quant dots on all-zero activations give exactly zero (the Q8_K zero
 * block has d = 0 and zero bsums, so the min term cannot leak garbage). */
static void test_kernels_dot_zero_act(void) {
    float x[QK_K], z[QK_K] = {0};
    krng r = {3};
    fill_gauss(&r, x, QK_K, 1.0f);
    const uint32_t types[] = {QT_Q2_K, QT_Q3_K, QT_Q4_K, QT_Q5_K, QT_Q6_K};
    for (size_t t = 0; t < PT_ARRAY_LEN(types); t++) {
        void *wq = row_alloc(types[t], QK_K);
        block_q8_K a;
        memset(&a, 0x7f, sizeof a);
        qt_quantize_ref(types[t], x, wq, QK_K);
        qt_quantize_act_ref(QT_Q8_K, z, &a, QK_K);
        CHECKF(qt_dot_ref(types[t], wq, &a, QK_K) == 0.0f, "%s", qt_name(types[t]));
        free(wq);
    }
}

/* Layout spot checks that do not depend on the quantiser: hand-built blocks. */
static void test_kernels_dequant_layout(void) {
    float y[QK_K];
    { /* Q4_0: low nibble is weight j, high nibble weight j+16 */
        block_q4_0 b = {qt_f32_to_f16(0.5f), {0}};
        for (int j = 0; j < 16; j++)
            b.qs[j] = 0x88; /* all zero */
        b.qs[3] = 0x8f;     /* w3 = 7 */
        b.qs[5] = 0x08;     /* w21 = -8 */
        qt_dequant_ref(QT_Q4_0, &b, y, 32);
        CHECK(y[3] == 3.5f && y[21] == -4.0f && y[0] == 0.0f && y[19] == 0.0f);
    }
    { /* Q5_0: qh bit j is the 5th bit of weight j */
        block_q5_0 b = {qt_f32_to_f16(1.0f), {0}, {0}};
        b.qh[0] = 0x01; /* w0: 16 + 0 - 16 = 0 */
        b.qh[3] = 0x80; /* w31: 16 + 0 - 16 = 0 */
        qt_dequant_ref(QT_Q5_0, &b, y, 32);
        CHECK(y[0] == 0.0f && y[31] == 0.0f && y[1] == -16.0f && y[16] == -16.0f);
    }
    { /* Q4_K: sub-block 5 (weights 160..191) with scale 3, min 0; others zero */
        block_q4_K b;
        memset(&b, 0, sizeof b);
        b.d = qt_f32_to_f16(1.0f);
        b.dmin = qt_f32_to_f16(1.0f);
        uint8_t ls[8] = {0, 0, 0, 0, 0, 3 + 16, 0, 0}, lm[8] = {0, 0, 0, 0, 0, 0, 0, 33};
        /* packing as the format defines it, spelled out for sub-blocks 5 and 7 */
        b.scales[9] = (uint8_t)(ls[5] & 0x0f);         /* low 4 bits of scale 5 */
        b.scales[1] = (uint8_t)((ls[5] >> 4) << 6);    /* top 2 bits in byte 5-4 */
        b.scales[11] = (uint8_t)((lm[7] & 0x0f) << 4); /* low 4 bits of min 7 */
        b.scales[7] = (uint8_t)((lm[7] >> 4) << 6);    /* top 2 bits of min 7 */
        b.qs[64 + 2] = 0x50; /* chunk 2 high nibble -> weight 128 + 32 + 2 = 162 is 5 */
        qt_dequant_ref(QT_Q4_K, &b, y, QK_K);
        CHECK(y[162] == 19.0f * 5.0f && y[161] == 0.0f);
        CHECK(y[224] == -33.0f && y[255] == -33.0f && y[223] == 0.0f);
    }
    { /* Q6_K: weight 96 + l is the high nibble of ql[32 + l] with qh bits 6..7 */
        block_q6_K b;
        memset(&b, 0, sizeof b);
        b.d = qt_f32_to_f16(1.0f);
        for (int j = 0; j < 16; j++)
            b.scales[j] = 1;
        for (int j = 0; j < 128; j++)
            b.ql[j] = 0;
        memset(b.qh, 0xaa, sizeof b.qh); /* every weight's high bits = 2 -> 32 -> 0 */
        b.ql[32 + 4] = 0x70;             /* weight 100: 7 + 32 - 32 = 7 */
        b.scales[6] = -2;                /* weights 96..111 */
        qt_dequant_ref(QT_Q6_K, &b, y, QK_K);
        CHECK(y[100] == -14.0f && y[4] == 0.0f && y[36] == 0.0f && y[68] == 0.0f);
    }
    { /* Q3_K: scale 10 = bits in byte 2 (high nibble) and byte 10 (bits 4..5);
       * weight 160 + l has its 2 bits at shift 2 in qs[32 + l], hmask bit 5 */
        block_q3_K b;
        memset(&b, 0, sizeof b);
        b.d = qt_f32_to_f16(1.0f);
        for (int j = 0; j < 32; j++)
            b.hmask[j] = 0xff; /* no -4 anywhere */
        for (int j = 0; j < 8; j++)
            b.scales[j] = 0; /* low bits 0 ... */
        for (int j = 8; j < 12; j++)
            b.scales[j] = 0xaa; /* ... high bits 2: scales = 32 - 32 = 0 */
        /* scale 10 := 32 + 5 = 37 = 0b100101: low 4 bits 5, high 2 bits 2 */
        b.scales[2] |= 5 << 4;
        b.qs[32 + 3] = 3 << 2;   /* weight 128 + 32 + 3 = 163 -> q = 3 */
        b.hmask[4] &= ~(1 << 5); /* weight 164: -4 */
        qt_dequant_ref(QT_Q3_K, &b, y, QK_K);
        CHECK(y[163] == 15.0f && y[164] == -20.0f && y[160] == 0.0f);
        CHECK(y[3] == 0.0f && y[176] == 0.0f); /* another sub-block, scale 0 */
    }
}

/* qt_quantize_act_best (the AVX2 quantisers on x86) gives qt_quantize_act_ref's bytes for
 * Q8_0, Q8_1 and Q8_K rows: Gaussian rows at several scales, rounding ties (x = k + 0.5
 * with amax 127, so the scale is 1), a largest magnitude that is negative or shared by +a
 * and -a (Q8_K takes the first), all-zero blocks, tiny and huge values, NaN and infinite
 * entries. Skipped on a CPU without them. */
static void test_kernels_quantize_act_best(void) {
    enum { N = 1024 };
    static float x[N];
    static uint8_t a[N * 2], b[N * 2];
    const uint32_t types[] = {QT_Q8_0, QT_Q8_1, QT_Q8_K, QT_F16};
    if (qt_quantize_act_best() == qt_quantize_act_ref) {
        t_skip("no SIMD activation quantiser on this CPU (the reference is used)");
        return;
    }
    krng r = {77};
    int bad = 0, rows = 0;
    for (int pat = 0; pat < 12; pat++)
        for (int rep = 0; rep < 40; rep++) {
            const float scale = pat == 1 ? 1e-30f : pat == 2 ? 1e30f : (float)(1 + rep);
            for (int i = 0; i < N; i++)
                x[i] = krng_gauss(&r) * scale;
            if (pat == 3) /* ties: amax 127 makes the scale 1, and k + 0.5 rounds to even */
                for (int i = 0; i < N; i++)
                    x[i] = i % 32 == 0 ? 127.0f : (float)((int)(krng_unif(&r) * 250) - 125) + 0.5f;
            if (pat == 4) /* the largest magnitude negative, shared by +a later */
                for (int i = 0; i < N; i += 32) {
                    x[i + 5] = -40.0f * scale;
                    x[i + 20] = 40.0f * scale;
                }
            if (pat == 5) memset(x + 256 * (rep % 4), 0, 256 * sizeof(float)); /* a zero block */
            if (pat == 6) x[(rep * 37) % N] = NAN;
            if (pat == 7) x[(rep * 53) % N] = rep & 1 ? INFINITY : -INFINITY;
            if (pat == 8) /* values just past +-127.5 after scaling, and exact halves */
                for (int i = 0; i < N; i++)
                    x[i] = (i % 3 ? 63.5f : -127.0f) + (float)(i % 7) * 0.25f;
            if (pat == 9)
                for (int i = 0; i < N; i++)
                    x[i] = -0.0f;
            if (pat == 10) x[(rep * 11) % N] = -NAN;
            if (pat == 11) /* denormals beside normal values */
                for (int i = 0; i < N; i += 2)
                    x[i] = 1e-40f * (float)(i % 5);
            for (size_t ti = 0; ti < sizeof types / sizeof types[0]; ti++) {
                uint64_t bytes = 0;
                CHECK(qt_row_bytes(types[ti], N, &bytes) == 0 && bytes <= sizeof a);
                memset(a, 0xa5, bytes);
                memset(b, 0x5a, bytes);
                qt_quantize_act_ref(types[ti], x, a, N);
                qt_quantize_act_best()(types[ti], x, b, N);
                rows++;
                if (memcmp(a, b, bytes) && bad++ < 5) {
                    size_t at = 0; /* bytes fits a[] (checked above) */
                    while (at < bytes && a[at] == b[at])
                        at++;
                    t_fail_at(__FILE__, __LINE__, "type %u pattern %d rep %d: byte %zu differs",
                              types[ti], pat, rep, at);
                }
            }
        }
    CHECKF(bad == 0, "%d of %d rows differ", bad, rows);
}

T_SUITE(kernels) {
    T_ADD(test_kernels_quantize_act_best);
    T_ADD(test_kernels_row_bytes);
    T_ADD(test_kernels_f16_exhaustive);
    T_ADD(test_kernels_bf16_exhaustive);
    T_ADD(test_kernels_roundtrip);
    T_ADD(test_kernels_roundtrip_offset);
    T_ADD(test_kernels_act_q8_k);
    T_ADD(test_kernels_act_q8_0_q8_1);
    T_ADD(test_kernels_act_float);
    T_ADD(test_kernels_dot_vs_dequant);
    T_ADD(test_kernels_dot_zero_act);
    T_ADD(test_kernels_dequant_layout);
}
