/* test_refvec.c — checks petrel's kernels against reference vectors produced by
 * llama.cpp's own ggml code (tests/data/refvec/<TYPE>.bin; format and origin in
 * tests/data/refvec/README.md).
 *
 * For every weight type petrel decodes, one case `refvec_<TYPE>` checks:
 *   - qt_dequant_ref of ggml's quantised rows equals ggml's to_float BIT FOR BIT;
 *   - qt_quantize_act_ref of the float activations equals the bytes of ggml's
 *     CPU-backend activation quantiser bit for bit (for Q8_K: d, qs and bsums);
 *   - qt_dot_ref, and every SIMD level this CPU runs (qt_dot_impl(type, isa) for
 *     isa <= qt_isa_detect(), NULL entries skipped), given ggml's quantised
 *     activations, equals ggml's vec_dot to a relative 1e-5;
 *   - on x86, the matmul kernel of each block type that takes ggml's one-row
 *     order (all but the panel types, qt_has_panel), with its four-row
 *     kernel, equals ggml's vec_dot BIT FOR BIT: the vectors come from ggml's
 *     AVX-512 build, and a last-bit difference there is what the long-prompt
 *     references amplify (tests/data/exact: Q3_K's "- 4" taken per block
 *     instead of per weight cost the Q3_K_M mix a max |diff| of 1.0).
 *
 * Dot tolerance: |petrel - ggml| <= 1e-5 * D with D = max(|ggml|, S) where
 * S = sum_j |w_j * a_j| over the DEQUANTISED weights and activations (computed
 * in double). S is the natural scale of floating-point summation error: any
 * accumulation order of the n products differs from the exact sum by at most
 * about n * eps * S, and blocks whose terms cancel do not make the tolerance
 * collapse the way |dot| alone would (|dot| can be ~0 while S is not).
 * The max() with |ggml| only matters when S would be 0.
 *
 * A missing or malformed vector file is a failure, not a skip. Tests run from
 * the repository root, so the files are opened by relative path.
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/quant.h"
#include "test.h"

#define RV_DIR "tests/data/refvec/"
#define RV_TOL 1e-5

typedef struct {
    uint32_t type, act_type, rows, cols;
    uint64_t rb, arb; /* bytes of one weight row / of the activation row */
    float *w, *deq, *act, *dots;
    uint8_t *q, *aq;
} rv_file;

static uint32_t rd_u32(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* Copy n little-endian f32 values out of the file (malloc'd, aligned). */
static float *rd_f32(const uint8_t *p, uint64_t n) {
    float *out = malloc(n * sizeof(float) + 1);
    for (uint64_t i = 0; i < n; i++) {
        uint32_t u = rd_u32(p + 4 * i);
        memcpy(&out[i], &u, 4);
    }
    return out;
}

static uint8_t *rd_bytes(const uint8_t *p, uint64_t n) {
    uint8_t *out = malloc(n + 1);
    memcpy(out, p, n);
    return out;
}

static void rv_free(rv_file *f) {
    free(f->w);
    free(f->deq);
    free(f->act);
    free(f->dots);
    free(f->q);
    free(f->aq);
}

/* Load and validate one vector file. Returns 0, or -1 after reporting a failure. */
static int rv_load(const char *name, rv_file *f) {
    char path[256];
    snprintf(path, sizeof path, RV_DIR "%s.bin", name);
    memset(f, 0, sizeof *f);
    size_t len = 0;
    uint8_t *buf = t_read_file(path, &len);
    CHECKF(buf != NULL, "%s: missing reference vector file (run from the repo root)", path);
    if (!buf) return -1;
    int ok = 0;
    if (len < 24 || memcmp(buf, "PTRV", 4) != 0 || rd_u32(buf + 4) != 1) {
        CHECKF(0, "%s: bad magic or version", path);
        goto out;
    }
    f->type = rd_u32(buf + 8);
    f->act_type = rd_u32(buf + 12);
    f->rows = rd_u32(buf + 16);
    f->cols = rd_u32(buf + 20);
    const qt_traits *t = qt_get(f->type);
    CHECKF(t && strcmp(t->name, name) == 0, "%s: file holds type %u (%s), expected %s", path,
           f->type, qt_name(f->type), name);
    if (!t || strcmp(t->name, name) != 0) goto out;
    CHECKF((uint32_t)t->act_type == f->act_type,
           "%s: ggml's vec_dot_type is %u (%s) but petrel's act_type is %d (%s)", path, f->act_type,
           qt_name(f->act_type), t->act_type, qt_name((uint32_t)t->act_type));
    if (f->rows == 0 || f->rows > 64 || f->cols == 0 || f->cols > 65536 ||
        qt_row_bytes(f->type, f->cols, &f->rb) != 0 ||
        qt_row_bytes(f->act_type, f->cols, &f->arb) != 0) {
        CHECKF(0, "%s: bad shape %u x %u for %s / %s", path, f->rows, f->cols, name,
               qt_name(f->act_type));
        goto out;
    }
    uint64_t n = (uint64_t)f->rows * f->cols;
    uint64_t want = 24 + 4 * n + f->rows * f->rb + 4 * n + 4ull * f->cols + f->arb + 4ull * f->rows;
    if (len != want) {
        CHECKF(0, "%s: size %zu, expected %llu", path, len, (unsigned long long)want);
        goto out;
    }
    const uint8_t *p = buf + 24;
    f->w = rd_f32(p, n), p += 4 * n;
    f->q = rd_bytes(p, f->rows * f->rb), p += f->rows * f->rb;
    f->deq = rd_f32(p, n), p += 4 * n;
    f->act = rd_f32(p, f->cols), p += 4ull * f->cols;
    f->aq = rd_bytes(p, f->arb), p += f->arb;
    f->dots = rd_f32(p, f->rows);
    ok = 1;
out:
    free(buf);
    return ok ? 0 : -1;
}

static uint32_t f32_bits(float x) {
    uint32_t u;
    memcpy(&u, &x, 4);
    return u;
}

/* Float value of activation j of the quantised activation row (for the
 * tolerance scale only; decoded here so the scale does not depend on petrel). */
static double act_value(const rv_file *f, uint32_t j) {
    const uint8_t *a = f->aq;
    switch (f->act_type) {
    case QT_F32: {
        float v;
        memcpy(&v, a + 4 * j, 4);
        return v;
    }
    case QT_F16: {
        pt_f16 h;
        memcpy(&h, a + 2 * j, 2);
        return qt_f16_to_f32(h);
    }
    case QT_BF16: {
        pt_bf16 h;
        memcpy(&h, a + 2 * j, 2);
        return qt_bf16_to_f32(h);
    }
    case QT_Q8_0: {
        block_q8_0 b;
        memcpy(&b, a + sizeof b * (j / 32), sizeof b);
        return (double)qt_f16_to_f32(b.d) * b.qs[j % 32];
    }
    case QT_Q8_1: {
        block_q8_1 b;
        memcpy(&b, a + sizeof b * (j / 32), sizeof b);
        return (double)qt_f16_to_f32(b.d) * b.qs[j % 32];
    }
    case QT_Q8_K: {
        block_q8_K b;
        memcpy(&b, a + sizeof b * (j / QK_K), sizeof b);
        return (double)b.d * b.qs[j % QK_K];
    }
    }
    return NAN;
}

/* Where byte `off` of an activation row of act_type lies, for messages. */
static void act_field(uint32_t at, uint64_t off, char *out, size_t cap) {
    switch (at) {
    case QT_Q8_0: {
        uint64_t b = off / 34, o = off % 34;
        if (o < 2)
            snprintf(out, cap, "block %llu field d", (unsigned long long)b);
        else
            snprintf(out, cap, "block %llu qs[%llu] (weight %llu)", (unsigned long long)b,
                     (unsigned long long)(o - 2), (unsigned long long)(b * 32 + o - 2));
        return;
    }
    case QT_Q8_1: {
        uint64_t b = off / 36, o = off % 36;
        if (o < 2)
            snprintf(out, cap, "block %llu field d", (unsigned long long)b);
        else if (o < 4)
            snprintf(out, cap, "block %llu field s (d*sum)", (unsigned long long)b);
        else
            snprintf(out, cap, "block %llu qs[%llu] (weight %llu)", (unsigned long long)b,
                     (unsigned long long)(o - 4), (unsigned long long)(b * 32 + o - 4));
        return;
    }
    case QT_Q8_K: {
        uint64_t b = off / 292, o = off % 292;
        if (o < 4)
            snprintf(out, cap, "block %llu field d", (unsigned long long)b);
        else if (o < 260)
            snprintf(out, cap, "block %llu qs[%llu] (weight %llu)", (unsigned long long)b,
                     (unsigned long long)(o - 4), (unsigned long long)(b * 256 + o - 4));
        else
            snprintf(out, cap, "block %llu bsums[%llu]", (unsigned long long)b,
                     (unsigned long long)((o - 260) / 2));
        return;
    }
    default: {
        int es = at == QT_F32 ? 4 : 2;
        snprintf(out, cap, "element %llu", (unsigned long long)(off / (uint64_t)es));
        return;
    }
    }
}

static void check_dequant(const rv_file *f, const char *name) {
    uint64_t n = (uint64_t)f->rows * f->cols;
    float *got = malloc(n * sizeof(float));
    for (uint32_t r = 0; r < f->rows; r++)
        qt_dequant_ref(f->type, f->q + r * f->rb, got + (uint64_t)r * f->cols, f->cols);
    uint64_t bad = 0, first = 0;
    for (uint64_t i = 0; i < n; i++)
        if (f32_bits(got[i]) != f32_bits(f->deq[i]) && bad++ == 0) first = i;
    CHECKF(bad == 0,
           "%s dequant: %llu of %llu values differ from ggml; first at row %llu col %llu: "
           "petrel %.9g (0x%08x) ggml %.9g (0x%08x)",
           name, (unsigned long long)bad, (unsigned long long)n,
           (unsigned long long)(first / f->cols), (unsigned long long)(first % f->cols),
           (double)got[first], f32_bits(got[first]), (double)f->deq[first],
           f32_bits(f->deq[first]));
    free(got);
}

static void check_act(const rv_file *f, const char *name) {
    uint8_t *got = calloc(1, f->arb + 1);
    qt_quantize_act_ref(f->act_type, f->act, got, f->cols);
    uint64_t bad = 0, first = 0;
    for (uint64_t i = 0; i < f->arb; i++)
        if (got[i] != f->aq[i] && bad++ == 0) first = i;
    if (bad) {
        char where[96];
        act_field(f->act_type, first, where, sizeof where);
        CHECKF(0,
               "%s act %s: %llu of %llu bytes differ from ggml; first at byte %llu (%s): "
               "petrel 0x%02x ggml 0x%02x",
               name, qt_name(f->act_type), (unsigned long long)bad, (unsigned long long)f->arb,
               (unsigned long long)first, where, got[first], f->aq[first]);
    }
    free(got);
}

static void check_dot(const rv_file *f, const char *name, const char *impl, qt_dot_fn fn) {
    for (uint32_t r = 0; r < f->rows; r++) {
        double s = 0;
        for (uint32_t j = 0; j < f->cols; j++)
            s += fabs((double)f->deq[(uint64_t)r * f->cols + j] * act_value(f, j));
        double ref = f->dots[r];
        double denom = fmax(fabs(ref), s);
        float got = fn ? fn(f->q + r * f->rb, f->aq, f->cols)
                       : qt_dot_ref(f->type, f->q + r * f->rb, f->aq, f->cols);
        double err = fabs((double)got - ref);
        CHECKF(err <= RV_TOL * denom || (denom == 0 && got == 0),
               "%s dot (%s) row %u: petrel %.9g ggml %.9g |diff| %.3g = %.3g of scale %.6g "
               "(tolerance %.0e)",
               name, impl, r, (double)got, ref, err, denom > 0 ? err / denom : INFINITY, denom,
               RV_TOL);
    }
}

/* x86: qt_mm_dot_upto and qt_mm_dot4_upto (four copies of the activation row)
 * at the best level give ggml's vec_dot bits for the types in its order. */
static void check_dot_bits(const rv_file *f, const char *name) {
#if defined(__x86_64__)
    /* F16 and BF16 are left out: llama.cpp multiplies a batch of them by tinyBLAS,
     * not by vec_dot */
    if (qt_has_panel(f->type) || f->type == QT_F16 || f->type == QT_BF16 ||
        qt_isa_detect() < QT_ISA_AVX2)
        return;
    qt_dot_fn fn = qt_mm_dot_upto(f->type, -1);
    qt_dot4_fn fn4 = qt_mm_dot4_upto(f->type, -1);
    uint8_t *a4 = malloc(4 * f->arb);
    for (int k = 0; k < 4; k++)
        memcpy(a4 + k * f->arb, f->aq, f->arb);
    for (uint32_t r = 0; r < f->rows; r++) {
        const float got = fn(f->q + r * f->rb, f->aq, f->cols);
        CHECKF(f32_bits(got) == f32_bits(f->dots[r]),
               "%s dot row %u: petrel %.9g (0x%08x), ggml's x86 vec_dot %.9g (0x%08x): not "
               "ggml's order",
               name, r, (double)got, f32_bits(got), (double)f->dots[r], f32_bits(f->dots[r]));
        if (!fn4) continue;
        float out[4];
        fn4(f->q + r * f->rb, a4, f->arb, f->cols, out);
        for (int k = 0; k < 4; k++)
            CHECKF(f32_bits(out[k]) == f32_bits(f->dots[r]),
                   "%s four-row dot row %u, copy %d: petrel %.9g, ggml %.9g", name, r, k,
                   (double)out[k], (double)f->dots[r]);
    }
    free(a4);
#else
    (void)f;
    (void)name;
#endif
}

static void check_type(const char *name) {
    rv_file f;
    if (rv_load(name, &f) != 0) {
        rv_free(&f);
        return;
    }
    check_dequant(&f, name);
    check_act(&f, name);
    check_dot(&f, name, "qt_dot_ref", NULL);
    static const char *isa_names[] = {"scalar", "avx2", "avx512"};
    int top = qt_isa_detect();
    for (int isa = QT_ISA_SCALAR; isa <= top && isa <= QT_ISA_AVX512; isa++) {
        qt_dot_fn fn = qt_dot_impl(f.type, isa);
        if (isa == QT_ISA_SCALAR) CHECKF(fn != NULL, "%s: qt_dot_impl(scalar) is NULL", name);
        if (fn) check_dot(&f, name, isa_names[isa], fn);
    }
    check_dot_bits(&f, name);
    rv_free(&f);
}

#define RV_CASE(NAME)                                                                              \
    static void refvec_##NAME(void) {                                                              \
        check_type(#NAME);                                                                         \
    }
RV_CASE(F16)
RV_CASE(BF16)
RV_CASE(Q4_0)
RV_CASE(Q4_1)
RV_CASE(Q5_0)
RV_CASE(Q5_1)
RV_CASE(Q8_0)
RV_CASE(Q2_K)
RV_CASE(Q3_K)
RV_CASE(Q4_K)
RV_CASE(Q5_K)
RV_CASE(Q6_K)
RV_CASE(IQ2_XXS)
RV_CASE(IQ2_XS)
RV_CASE(IQ2_S)
RV_CASE(IQ3_XXS)
RV_CASE(IQ3_S)
RV_CASE(IQ1_S)
RV_CASE(IQ1_M)
RV_CASE(IQ4_NL)
RV_CASE(IQ4_XS)
RV_CASE(MXFP4)

T_SUITE(refvec) {
    T_ADD(refvec_F16);
    T_ADD(refvec_BF16);
    T_ADD(refvec_Q4_0);
    T_ADD(refvec_Q4_1);
    T_ADD(refvec_Q5_0);
    T_ADD(refvec_Q5_1);
    T_ADD(refvec_Q8_0);
    T_ADD(refvec_Q2_K);
    T_ADD(refvec_Q3_K);
    T_ADD(refvec_Q4_K);
    T_ADD(refvec_Q5_K);
    T_ADD(refvec_Q6_K);
    T_ADD(refvec_IQ2_XXS);
    T_ADD(refvec_IQ2_XS);
    T_ADD(refvec_IQ2_S);
    T_ADD(refvec_IQ3_XXS);
    T_ADD(refvec_IQ3_S);
    T_ADD(refvec_IQ1_S);
    T_ADD(refvec_IQ1_M);
    T_ADD(refvec_IQ4_NL);
    T_ADD(refvec_IQ4_XS);
    T_ADD(refvec_MXFP4);
}
