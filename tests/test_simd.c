/* test_simd.c — the SIMD dot products (dot_avx2.c, dot_avx512.c) against the
 * scalar reference, and the run-time dispatcher (dispatch.c).
 *
 * For each ISA level the CPU supports and each type that level implements:
 * random valid weight blocks (fixed seeds) and activations quantised by
 * qt_quantize_act_ref, over lengths from one block to 7168 weights. A SIMD
 * result must equal qt_dot_ref to float rounding: |simd - ref| <= 1e-5 *
 * sum|w_i * a_i| (dequantised values). Integer parts are exact in both, so a
 * wrong bit in any weight shows up far above that bound. A level the CPU lacks
 * is reported as skipped, never as passed.
 *
 * arm64: the NEON and dotprod kernels follow the reference's float order
 * (dot_neon_body.h), so there the bound is zero: their bits must be the
 * reference's (memcmp). The levels are NEON, DOTPROD and I8MM; a level
 * without a kernel for a type falls back to the one below (dispatch.c).
 */
#if defined(__x86_64__)
#include <cpuid.h>
#endif
#if defined(__aarch64__) && defined(__linux__)
#include <sys/auxv.h>
#endif
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "kernels/quant.h"
#include "nn/matmul.h"
#include "qt_random.h"
#include "test.h"

/* Types that must have a kernel at every SIMD level the CPU supports. */
#if defined(__aarch64__)
static const uint32_t required[] = {QT_Q8_0,    QT_Q2_K,   QT_Q3_K,  QT_Q4_K,    QT_Q5_K,
                                    QT_Q6_K,    QT_Q4_0,   QT_Q4_1,  QT_Q5_0,    QT_Q5_1,
                                    QT_MXFP4,   QT_F16,    QT_BF16,  QT_IQ1_S,   QT_IQ1_M,
                                    QT_IQ2_XXS, QT_IQ2_XS, QT_IQ2_S, QT_IQ3_XXS, QT_IQ3_S};
#else
static const uint32_t required[] = {QT_Q8_0, QT_Q2_K, QT_Q4_K, QT_Q6_K, QT_IQ2_XXS};
#endif

static const char *isa_name(int isa) {
    return qt_isa_name(isa);
}

static unsigned f32_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

/* Compare f with qt_dot_ref for `trials` random rows of n weights of `type`.
 * Returns the number of mismatches (each reported). */
static int compare_row(uint32_t type, int isa, qt_dot_fn f, int64_t n, uint64_t seed, int trials) {
    const qt_traits *t = qt_get(type);
    uint64_t wbytes, abytes;
    if (qt_row_bytes(type, n, &wbytes) || qt_row_bytes((uint32_t)t->act_type, n, &abytes)) {
        t_fail_at(__FILE__, __LINE__, "%s: bad length %lld", t->name, (long long)n);
        return 1;
    }
    void *w = malloc(wbytes), *a = malloc(abytes);
    float *x = malloc((size_t)n * sizeof *x), *wd = malloc((size_t)n * sizeof *wd),
          *ad = malloc((size_t)n * sizeof *ad);
    int bad = 0;
    qr_rng r = {seed * 0x9E3779B97F4A7C15ULL + (uint64_t)type * 1000003u + (uint64_t)n};
    for (int k = 0; k < trials; k++) {
        qr_fill_weights(&r, type, w, n);
        qr_fill_acts(&r, x, n);
        qt_quantize_act_ref((uint32_t)t->act_type, x, a, n);
        const float ref = qt_dot_ref(type, w, a, n);
        const float got = f(w, a, n);
        qt_dequant_ref(type, w, wd, n);
        qt_dequant_ref((uint32_t)t->act_type, a, ad, n);
#if defined(__aarch64__)
        /* bit-identical: memcmp (a -0 against +0 fails; "to rounding" would hide a wrong lane) */
        const int same = memcmp(&got, &ref, sizeof got) == 0;
        const double tol = 0;
#else
        double mag = 0;
        for (int64_t i = 0; i < n; i++)
            mag += fabs((double)wd[i] * (double)ad[i]);
        const double tol = 1e-5 * mag;
        const int same = fabs((double)got - (double)ref) <= tol;
#endif
        if (!same || !isfinite(got)) {
            t_fail_at(__FILE__, __LINE__,
                      "%s %s n=%lld trial %d: simd %.9g (%08x), ref %.9g (%08x), tol %.3g", t->name,
                      isa_name(isa), (long long)n, k, (double)got, f32_bits(got), (double)ref,
                      f32_bits(ref), tol);
            bad++;
        }
    }
    free(w);
    free(a);
    free(x);
    free(wd);
    free(ad);
    return bad;
}

/* Every kernel of level `isa` against the reference; skipped when the CPU
 * lacks the level. */
static void check_level(int isa) {
    if (qt_isa_detect() < isa) {
        char why[96];
        snprintf(why, sizeof why, "CPU (or this build) has no %s", isa_name(isa));
        t_skip(why);
        return;
    }
    for (size_t i = 0; i < PT_ARRAY_LEN(required); i++)
        CHECKF(qt_dot_upto(required[i], isa) != qt_dot_impl(required[i], QT_ISA_SCALAR),
               "%s has no %s kernel (nor one below it)", qt_name(required[i]), isa_name(isa));
    int tested = 0;
    for (uint32_t type = 0; type < QT_COUNT; type++) {
        const qt_traits *t = qt_get(type);
        qt_dot_fn f = qt_dot_impl(type, isa);
        if (!t || t->act_type < 0 || !f) continue;
        tested++;
        if (t->block == 1) {
            /* float types: any length, including SIMD tails */
            const int64_t lens[] = {1, 7, 8, 31, 33, 100, 4096, 7168 + 5};
            for (size_t k = 0; k < PT_ARRAY_LEN(lens); k++)
                compare_row(type, isa, f, lens[k], k, 3);
        } else {
            const int64_t lens[] = {
                t->block, 2 * (int64_t)t->block, 3 * (int64_t)t->block, 9 * (int64_t)t->block, 4096,
                7168};
            for (size_t k = 0; k < PT_ARRAY_LEN(lens); k++)
                compare_row(type, isa, f, lens[k], k, lens[k] <= 4 * t->block ? 20 : 4);
        }
    }
    if (isa == QT_ISA_AVX2) CHECK(tested >= (int)PT_ARRAY_LEN(required)); /* or QT_ISA_NEON */
}

static void simd_avx2_matches_ref(void) {
    check_level(QT_ISA_AVX2);
}
static void simd_avx512_matches_ref(void) {
    check_level(QT_ISA_AVX512);
}
#if defined(__aarch64__)
static void simd_i8mm_matches_ref(void) {
    check_level(QT_ISA_I8MM);
}
#endif

/* The scalar level is qt_dot_ref itself, for every type with a dot product. */
static void simd_scalar_level_is_ref(void) {
    for (uint32_t type = 0; type < QT_COUNT; type++) {
        const qt_traits *t = qt_get(type);
        qt_dot_fn f = qt_dot_impl(type, QT_ISA_SCALAR);
        if (!t || t->act_type < 0) {
            CHECKF(f == NULL, "type %u has no dot product but a scalar kernel", type);
            continue;
        }
        CHECKF(f != NULL, "%s has no scalar kernel", t->name);
        if (!f) continue;
        const int64_t n = t->block == 1 ? 300 : 4 * (int64_t)t->block;
        uint64_t wbytes = 0, abytes = 0;
        CHECK(qt_row_bytes(type, n, &wbytes) == 0 &&
              qt_row_bytes((uint32_t)t->act_type, n, &abytes) == 0);
        void *w = malloc(wbytes), *a = malloc(abytes);
        float *x = malloc((size_t)n * sizeof *x);
        qr_rng r = {12345 + type};
        qr_fill_weights(&r, type, w, n);
        qr_fill_acts(&r, x, n);
        qt_quantize_act_ref((uint32_t)t->act_type, x, a, n);
        float ref = qt_dot_ref(type, w, a, n), got = f(w, a, n);
        CHECKF(memcmp(&ref, &got, sizeof ref) == 0, "%s scalar level %.9g != qt_dot_ref %.9g",
               t->name, (double)got, (double)ref);
        free(w);
        free(a);
        free(x);
    }
}

/* Batched-order kernels: every level bit-identical to qt_dot_panel_ref (the
 * integer part is exact and the float steps are the same), and the panel order
 * within float rounding of the single-row reference. */
static void simd_panel_matches_ref(void) {
    const int top = qt_isa_detect();
    for (uint32_t type = 0; type < QT_COUNT; type++) {
        if (!qt_has_panel(type)) {
            for (int isa = QT_ISA_SCALAR; isa <= QT_ISA_AVX512; isa++)
                CHECKF(qt_dot_panel_impl(type, isa) == NULL,
                       "%s has a panel kernel but no panel order", qt_name(type));
            continue;
        }
        const qt_traits *t = qt_get(type);
        CHECKF(qt_dot_panel_impl(type, QT_ISA_SCALAR) != NULL, "%s has no scalar panel kernel",
               t->name);
        const int64_t n = 4 * (int64_t)(t->block < QK_K ? QK_K : t->block);
        uint64_t wbytes = 0, abytes = 0;
        CHECK(qt_row_bytes(type, n, &wbytes) == 0 &&
              qt_row_bytes((uint32_t)t->act_type, n, &abytes) == 0);
        void *w = malloc(wbytes), *a = malloc(abytes);
        float *x = malloc((size_t)n * sizeof *x);
        qr_rng r = {777 + type};
        for (int k = 0; k < 50; k++) {
            qr_fill_weights(&r, type, w, n);
            qr_fill_acts(&r, x, n);
            qt_quantize_act_ref((uint32_t)t->act_type, x, a, n);
            const float ref = qt_dot_panel_ref(type, w, a, n), one = qt_dot_ref(type, w, a, n);
            if (!isfinite(one)) continue; /* random fp16 scales can be inf/NaN */
            CHECKF(fabs((double)ref - (double)one) <= 1e-5 * (fabs((double)one) + 1.0),
                   "%s panel %.9g vs single-row %.9g", t->name, (double)ref, (double)one);
            for (int isa = QT_ISA_SCALAR; isa <= top; isa++) {
                qt_dot_fn f = qt_dot_panel_impl(type, isa);
                if (!f) continue;
                const float got = f(w, a, n);
                CHECKF(memcmp(&got, &ref, sizeof got) == 0, "%s %s panel %.9g != reference %.9g",
                       t->name, isa_name(isa), (double)got, (double)ref);
            }
        }
        free(w);
        free(a);
        free(x);
    }
}

/* Each row of the four-row kernel f4 against the single-row kernel f (memcmp), at every
 * length of lens, three trials of random weights and four activation rows `pad` bytes
 * apart beyond a row (seeded by seed, the type and the length). */
static void dot4_vs_dot(qt_dot4_fn f4, qt_dot_fn f, uint32_t type, int isa, const int64_t *lens,
                        size_t n_lens, uint64_t seed, uint64_t pad, const char *what) {
    const qt_traits *t = qt_get(type);
    for (size_t k = 0; k < n_lens; k++) {
        const int64_t n = lens[k];
        uint64_t wbytes = 0, abytes = 0;
        CHECK(qt_row_bytes(type, n, &wbytes) == 0 &&
              qt_row_bytes((uint32_t)t->act_type, n, &abytes) == 0);
        const uint64_t stride = abytes + pad;
        uint8_t *w = malloc(wbytes), *a = calloc(4, stride);
        float *x = malloc((size_t)n * sizeof *x);
        qr_rng r = {seed + type * 131 + (uint64_t)n};
        for (int trial = 0; trial < 3; trial++) {
            qr_fill_weights(&r, type, w, n);
            for (int row = 0; row < 4; row++) {
                qr_fill_acts(&r, x, n);
                qt_quantize_act_ref((uint32_t)t->act_type, x, a + row * stride, n);
            }
            float got[4];
            f4(w, a, stride, n, got);
            for (int row = 0; row < 4; row++) {
                const float one = f(w, a + row * stride, n);
                CHECKF(memcmp(&one, &got[row], sizeof one) == 0,
                       "%s %s n=%lld row %d: %s %.9g, single %.9g", t->name, isa_name(isa),
                       (long long)n, row, what, (double)got[row], (double)one);
            }
        }
        free(w);
        free(a);
        free(x);
    }
}

/* The four-row kernels return, for each activation row, the bits of the
 * single-row kernel of their level (a stride wider than a row, lengths of one
 * block to 7168 weights); qt_dot4_upto follows qt_dot_upto's level. */
static void simd_dot4_bit_identical(void) {
#if defined(__aarch64__)
    const uint32_t want4[] = {QT_Q4_0,    QT_Q5_0,   QT_Q8_0,  QT_Q2_K,    QT_Q3_K,  QT_Q4_K,
                              QT_Q5_K,    QT_Q6_K,   QT_F16,   QT_BF16,    QT_IQ1_S, QT_IQ1_M,
                              QT_IQ2_XXS, QT_IQ2_XS, QT_IQ2_S, QT_IQ3_XXS, QT_IQ3_S};
#else
    const uint32_t want4[] = {QT_Q4_0, QT_Q5_0, QT_Q8_0, QT_MXFP4, QT_Q2_K,
                              QT_Q3_K, QT_Q4_K, QT_Q5_K, QT_Q6_K};
#endif
    int tested = 0;
    for (int isa = QT_ISA_SCALAR; isa <= qt_isa_detect(); isa++) {
        for (uint32_t type = 0; type < QT_COUNT; type++) {
            const qt_traits *t = qt_get(type);
            qt_dot4_fn f4 = qt_dot4_impl(type, isa);
            if (isa == QT_ISA_SCALAR)
                CHECKF(f4 == NULL, "%s has a scalar four-row kernel", qt_name(type));
            if (!f4) continue;
            qt_dot_fn f = qt_dot_impl(type, isa);
            CHECKF(f != NULL, "%s %s: a four-row kernel without a single-row one", t->name,
                   isa_name(isa));
            if (!f) continue;
            tested++;
            const int64_t lens[] = {t->block, 2 * (int64_t)t->block, 9 * (int64_t)t->block, 4096,
                                    7168};
            dot4_vs_dot(f4, f, type, isa, lens, PT_ARRAY_LEN(lens), 0xD074, 96, "four-row");
        }
    }
    for (size_t i = 0; i < PT_ARRAY_LEN(want4); i++)
        for (int isa = QT_ISA_AVX2; isa <= qt_isa_detect(); isa++)
            CHECKF(qt_dot4_upto(want4[i], isa) != NULL, "%s has no %s four-row kernel",
                   qt_name(want4[i]), isa_name(isa));
    for (int lim = -1; lim <= qt_isa_detect(); lim++) {
        int lvl = -1;
        for (int isa = lim < 0 ? qt_isa_detect() : lim; isa >= QT_ISA_SCALAR && lvl < 0; isa--)
            if (qt_dot_impl(QT_Q4_K, isa)) lvl = isa;
        CHECK(qt_dot_upto(QT_Q4_K, lim) == qt_dot_impl(QT_Q4_K, lvl));
        CHECK(qt_dot4_upto(QT_Q4_K, lim) == qt_dot4_impl(QT_Q4_K, lvl));
    }
    if (!tested) t_skip("no SIMD level on this CPU");
}

/* Reverses the order of the nb blocks of bs bytes at p (a block's weights and
 * scale stay together: the dot product's terms are the same, summed in the
 * opposite block order). */
static void reverse_blocks(uint8_t *p, int64_t nb, uint64_t bs) {
    uint8_t tmp[512];
    for (int64_t i = 0, j = nb - 1; i < j; i++, j--) {
        memcpy(tmp, p + (uint64_t)i * bs, bs);
        memcpy(p + (uint64_t)i * bs, p + (uint64_t)j * bs, bs);
        memcpy(p + (uint64_t)j * bs, tmp, bs);
    }
}

/* The 4 x 4 tile kernels (qt_tile_fn) return, for every (weight row,
 * activation row) pair, the bits of the single-row kernel of their level
 * (strides wider than a row, lengths of one block to 7168 weights, an output
 * stride wider than 4); qt_mm_tile_upto follows qt_mm_dot_upto's level. And
 * memcmp does see a reordered float sum: for every type with a tile, the same
 * terms summed in the opposite block order (blocks reversed in both operands)
 * differ in some output, so a tile kernel that folded its lanes or blocks in
 * another order would fail here. (The random K-quant blocks carry scales and mins
 * up to 63 (Q6_K: +-128), so their lane sums are large and a reassociated scale
 * product, d_x * (d_y * sum) for (d_x * d_y) * sum, rounds differently: it fails.) */
/* Where the matmul has panel tiles for `type` at level isa (qt_mm_ptile_upto), they return
 * the tile's outputs got (ldo apart) on a panel of the four activation rows at a (as apart)
 * written by its panel writer: the four-row one on the weight rows at w (ws apart), the
 * eight-row one on those rows twice. 1 when the type has them. */
static int ptile_matches(uint32_t type, int isa, const uint8_t *w, uint64_t ws, const uint8_t *a,
                         uint64_t as, int64_t n, const float *got, int64_t ldo) {
    qt_ptile p;
    if (!qt_mm_ptile_upto(type, isa, &p)) return 0;
    CHECK(p.row != NULL && (p.tile || p.tile8));
    uint8_t *panel = malloc((size_t)(n / p.block_values) * p.block_bytes);
    uint8_t *w8 = malloc(8 * (size_t)ws);
    memcpy(w8, w, 4 * (size_t)ws);
    memcpy(w8 + 4 * ws, w, 4 * (size_t)ws);
    for (int row = 0; row < 4; row++)
        p.row(a + row * as, n, row, panel);
    float pgot[4 * 8];
    for (int eight = 0; eight < 2; eight++) {
        const qt_ptile_fn f = eight ? p.tile8 : p.tile;
        if (!f) continue;
        f(eight ? w8 : w, ws, panel, n, pgot, 8);
        for (int row = 0; row < 4; row++)
            for (int kw = 0; kw < (eight ? 8 : 4); kw++)
                CHECKF(memcmp(&pgot[row * 8 + kw], &got[row * ldo + kw % 4], sizeof(float)) == 0,
                       "%s %s n=%lld weight row %d act row %d: panel tile%s %.9g, tile %.9g",
                       qt_name(type), isa_name(isa), (long long)n, kw, row, eight ? "8" : "",
                       (double)pgot[row * 8 + kw], (double)got[row * ldo + kw % 4]);
    }
    free(panel);
    free(w8);
    return 1;
}

static void simd_tile_bit_identical(void) {
    int tested = 0, ptiled = 0;
    for (int isa = QT_ISA_SCALAR; isa <= qt_isa_detect(); isa++) {
        for (uint32_t type = 0; type < QT_COUNT; type++) {
            const qt_traits *t = qt_get(type);
            qt_tile_fn ft = qt_tile_impl(type, isa);
            if (isa == QT_ISA_SCALAR)
                CHECKF(ft == NULL, "%s has a scalar tile kernel", qt_name(type));
            if (!ft) continue;
            /* the one-row kernel the level runs (arm64's i8mm level has none of its own) */
            qt_dot_fn f = qt_dot_upto(type, isa);
            CHECKF(f != NULL, "%s %s: a tile kernel without a single-row one", t->name,
                   isa_name(isa));
            if (!f) continue;
            tested++;
            int reorder_seen = 0;
            CHECK(qt_mm_tile_upto(type, isa) == ft);
            const int64_t lens[] = {t->block, 2 * (int64_t)t->block, 9 * (int64_t)t->block, 4096,
                                    7168};
            for (size_t k = 0; k < PT_ARRAY_LEN(lens); k++) {
                const int64_t n = lens[k], nb = n / t->block;
                uint64_t wbytes = 0, abytes = 0;
                CHECK(qt_row_bytes(type, n, &wbytes) == 0 &&
                      qt_row_bytes((uint32_t)t->act_type, n, &abytes) == 0);
                const uint64_t ws = wbytes + 64, as = abytes + 96;
                const int64_t ldo = 7;
                uint8_t *w = calloc(4, ws), *a = calloc(4, as);
                float *x = malloc((size_t)n * sizeof *x);
                qr_rng r = {0x711E + type * 131 + (uint64_t)n};
                for (int trial = 0; trial < 4; trial++) {
                    for (int kw = 0; kw < 4; kw++)
                        qr_fill_weights(&r, type, w + kw * ws, n);
                    for (int row = 0; row < 4; row++) {
                        /* the last trial's activation row r is weight row r dequantised:
                         * the block sums are then as large as the type allows, so a
                         * product of the sum with one scale at a time rounds (random rows'
                         * sums are small enough that sum * d_x is often exact) */
                        if (trial == 3)
                            qt_dequant_ref(type, w + row * ws, x, n);
                        else
                            qr_fill_acts(&r, x, n);
                        qt_quantize_act_ref((uint32_t)t->act_type, x, a + row * as, n);
                    }
                    float got[4 * 7];
                    ft(w, ws, a, as, n, got, ldo);
                    for (int row = 0; row < 4; row++)
                        for (int kw = 0; kw < 4; kw++) {
                            const float one = f(w + kw * ws, a + row * as, n);
                            CHECKF(memcmp(&one, &got[row * ldo + kw], sizeof one) == 0,
                                   "%s %s n=%lld weight row %d act row %d: tile %.9g, single %.9g",
                                   t->name, isa_name(isa), (long long)n, kw, row,
                                   (double)got[row * ldo + kw], (double)one);
                        }
                    ptiled += ptile_matches(type, isa, w, ws, a, as, n, got, ldo);
                    if (nb < 9) continue;
                    for (int kw = 0; kw < 4; kw++)
                        reverse_blocks(w + kw * ws, nb, wbytes / (uint64_t)nb);
                    for (int row = 0; row < 4; row++)
                        reverse_blocks(a + row * as, nb, abytes / (uint64_t)nb);
                    float rev[4 * 7];
                    ft(w, ws, a, as, n, rev, ldo);
                    for (int row = 0; row < 4; row++)
                        for (int kw = 0; kw < 4; kw++)
                            reorder_seen += memcmp(&rev[row * ldo + kw], &got[row * ldo + kw],
                                                   sizeof(float)) != 0;
                }
                free(w);
                free(a);
                free(x);
            }
            CHECKF(reorder_seen > 0, "%s %s: reversing the block order never changed a bit",
                   t->name, isa_name(isa));
        }
    }
#if defined(__x86_64__)
    if (qt_isa_detect() >= QT_ISA_AVX512) {
        CHECK(qt_tile_impl(QT_Q8_0, QT_ISA_AVX512) != NULL);
        CHECK(qt_tile_impl(QT_Q4_K, QT_ISA_AVX512) != NULL); /* a K-quant tile is covered too */
        qt_ptile p;
        CHECK(ptiled > 0 && qt_mm_ptile_upto(QT_Q4_K, QT_ISA_AVX512, &p) &&
              qt_mm_ptile_upto(QT_Q8_0, QT_ISA_AVX512, &p)); /* and the panel tiles */
    }
#else
    CHECK(ptiled == 0); /* the panel tiles are the AVX-512 level's */
#endif
#if defined(__aarch64__)
    static const uint32_t i8mm_tiles[] = {QT_Q8_0, QT_Q4_0, QT_Q5_0, QT_Q4_K, QT_Q5_K, QT_Q6_K};
    if (qt_isa_detect() >= QT_ISA_I8MM)
        for (size_t k = 0; k < PT_ARRAY_LEN(i8mm_tiles); k++)
            CHECKF(qt_tile_impl(i8mm_tiles[k], QT_ISA_I8MM) != NULL, "%s has no i8mm tile",
                   qt_name(i8mm_tiles[k]));
#endif
    if (!tested) {
        t_skip("no tile kernel on this CPU");
        return;
    }
}

/* The gemv kernels (qt_mm_gemv_upto: QT_GEMV_ROWS weight rows against one
 * activation row; AVX-512, two rows to a register) return the bits of the
 * one-row kernel qt_mm_dot_upto picks at the same limit, for lengths of one
 * block to 7168 weights and a row stride wider than a row. The last trial's
 * activation is a weight row dequantised, so the block sums are as large as the
 * type allows. */
static void simd_gemv_bit_identical(void) {
    int tested = 0;
    for (int isa = QT_ISA_SCALAR; isa <= qt_isa_detect(); isa++)
        for (uint32_t type = 0; type < QT_COUNT; type++) {
            const qt_gemv_fn fg = qt_mm_gemv_upto(type, isa);
            if (!fg) continue;
            const qt_dot_fn f = qt_mm_dot_upto(type, isa);
            const qt_traits *t = qt_get(type);
            tested++;
            const int64_t lens[] = {t->block, 2 * (int64_t)t->block, 9 * (int64_t)t->block, 4096,
                                    7168};
            for (size_t k = 0; k < PT_ARRAY_LEN(lens); k++) {
                const int64_t n = lens[k];
                uint64_t wbytes = 0, abytes = 0;
                CHECK(qt_row_bytes(type, n, &wbytes) == 0 &&
                      qt_row_bytes((uint32_t)t->act_type, n, &abytes) == 0);
                const uint64_t ws = wbytes + 64;
                uint8_t *w = calloc(QT_GEMV_ROWS, ws), *a = calloc(1, abytes);
                float *x = malloc((size_t)n * sizeof *x);
                qr_rng r = {0x63E7 + type * 131 + (uint64_t)n};
                for (int trial = 0; trial < 4; trial++) {
                    for (int kw = 0; kw < QT_GEMV_ROWS; kw++)
                        qr_fill_weights(&r, type, w + kw * ws, n);
                    if (trial == 3)
                        qt_dequant_ref(type, w, x, n);
                    else
                        qr_fill_acts(&r, x, n);
                    qt_quantize_act_ref((uint32_t)t->act_type, x, a, n);
                    float got[QT_GEMV_ROWS];
                    fg(w, ws, a, n, got);
                    for (int kw = 0; kw < QT_GEMV_ROWS; kw++) {
                        const float one = f(w + kw * ws, a, n);
                        CHECKF(memcmp(&one, &got[kw], sizeof one) == 0,
                               "%s %s n=%lld weight row %d: gemv %.9g, single %.9g", t->name,
                               isa_name(isa), (long long)n, kw, (double)got[kw], (double)one);
                    }
                }
                free(w);
                free(a);
                free(x);
            }
        }
#if defined(__x86_64__)
    if (qt_isa_detect() >= QT_ISA_AVX512) { /* legacy and K-quant gemvs are both covered */
        CHECK(qt_mm_gemv_upto(QT_Q5_0, QT_ISA_AVX512) != NULL);
        CHECK(qt_mm_gemv_upto(QT_Q4_K, QT_ISA_AVX512) != NULL);
    }
#endif
    if (!tested) t_skip("no gemv kernel on this CPU");
}

/* The matmul driver (mm_run, nn/matmul.c) over batches of 2, 3, 4, 7, 10, 16
 * and 37 activation rows on 2 threads: every output row is the bits of that row
 * run alone, whichever kernel took it (tile, the K-quant tiles' four-row first
 * group, four-row leftovers past a multiple of 4 weight rows, the last two or
 * three activation rows padded to four through the tile (widened too, at 10),
 * a last single row one by one, Q4_0 and Q5_0 tiles widened to Q8_0
 * blocks from 8 rows on where the level has widening, Q8_0's eight-weight-row
 * tile where it has one). 203 weight rows span
 * several of the driver's weight tiles. */
static void simd_mm_run_rows_match_one_row(void) {
    const uint32_t types[] = {QT_Q8_0, QT_Q4_0, QT_Q5_0, QT_Q4_K, QT_Q6_K, QT_Q2_K};
    const int64_t n_in = 512, n_out = 203;
    const int batches[] = {2, 3, 4, 7, 10, 16, 37};
    enum { MAXR = 37 };
    tp_pool *pool = tp_new(2);
    mm_ctx mc;
    CHECK(pool != NULL);
    if (!pool) return;
    CHECK(mm_ctx_init(&mc, pool, -1, MAXR, n_in) == 0);
    float *x = malloc((size_t)MAXR * n_in * sizeof *x);
    float *yb = malloc((size_t)MAXR * n_out * sizeof *yb), *y1 = malloc((size_t)n_out * sizeof *y1);
    for (size_t ti = 0; ti < PT_ARRAY_LEN(types); ti++) {
        uint64_t rb = 0;
        CHECK(qt_row_bytes(types[ti], n_in, &rb) == 0);
        uint8_t *wd = malloc((size_t)(rb * (uint64_t)n_out));
        qr_rng r = {0x3A11 + types[ti]};
        qr_fill_weights(&r, types[ti], wd, n_out * n_in);
        for (int k = 0; k < MAXR; k++)
            qr_fill_acts(&r, x + (size_t)k * n_in, n_in);
        const mm_weight w = {types[ti], n_in, n_out, rb, wd};
        for (size_t bi = 0; bi < PT_ARRAY_LEN(batches); bi++) {
            mm_run(&mc, &w, x, batches[bi], yb, n_out);
            for (int t = 0; t < batches[bi]; t++) {
                mm_run(&mc, &w, x + (size_t)t * n_in, 1, y1, n_out);
                for (int64_t o = 0; o < n_out; o++)
                    CHECKF(memcmp(&yb[(size_t)t * n_out + o], &y1[o], sizeof *y1) == 0,
                           "%s batch %d row %d output %lld: %.9g in the batch, %.9g alone",
                           qt_name(types[ti]), batches[bi], t, (long long)o,
                           (double)yb[(size_t)t * n_out + o], (double)y1[o]);
            }
        }
        free(wd);
    }
    free(x);
    free(yb);
    free(y1);
    mm_ctx_free(&mc);
    tp_free(pool);
}

static void mm_panels_case(const uint32_t *types) {
    const int64_t n_in = 768, n_out = 37;
    enum { ROWS = 23, NT = 3 };
    tp_pool *pool = tp_new(2);
    mm_ctx big, small;
    CHECK(pool != NULL);
    if (!pool) return;
    CHECK(mm_ctx_init(&big, pool, -1, ROWS, n_in) == 0);
    CHECK(mm_ctx_init(&small, pool, -1, 12, n_in) == 0);
    float *x = malloc((size_t)ROWS * n_in * sizeof *x), *y1 = malloc((size_t)n_out * sizeof *y1);
    float *y[NT];
    uint8_t *wd[NT];
    mm_weight w[NT];
    qr_rng r = {0x9A7E1};
    for (int i = 0; i < NT; i++) {
        uint64_t rb = 0;
        CHECK(qt_row_bytes(types[i], n_in, &rb) == 0);
        wd[i] = malloc((size_t)(rb * (uint64_t)n_out));
        qr_fill_weights(&r, types[i], wd[i], n_out * n_in);
        w[i] = (mm_weight){types[i], n_in, n_out, rb, wd[i]};
        y[i] = malloc((size_t)ROWS * n_out * sizeof *y[i]);
    }
    for (int k = 0; k < ROWS; k++)
        qr_fill_acts(&r, x + (size_t)k * n_in, n_in);
    for (int c = 0; c < 2; c++) {
        mm_task tasks[NT];
        for (int i = 0; i < NT; i++)
            tasks[i] = (mm_task){&w[i], x, n_in, y[i], n_out};
        mm_run_many(c ? &small : &big, tasks, NT, ROWS);
        for (int i = 0; i < NT; i++)
            for (int t = 0; t < ROWS; t++) {
                mm_run(&big, &w[i], x + (size_t)t * n_in, 1, y1, n_out);
                for (int64_t o = 0; o < n_out; o++)
                    CHECKF(memcmp(&y[i][(size_t)t * n_out + o], &y1[o], sizeof *y1) == 0,
                           "%s context %s task %d row %d output %lld: %.9g in the batch, %.9g "
                           "alone",
                           qt_name(types[i]), c ? "small" : "big", i, t, (long long)o,
                           (double)y[i][(size_t)t * n_out + o], (double)y1[o]);
            }
    }
    for (int i = 0; i < NT; i++) {
        free(wd[i]);
        free(y[i]);
    }
    free(x);
    free(y1);
    mm_ctx_free(&big);
    mm_ctx_free(&small);
    tp_free(pool);
}
/* The matmul's panels (qt_mm_ptile_upto): a conversion that several tasks share (gate and up
 * read the same rows) carries the panel when any of them has panel tiles (a Q6_K task
 * converts and the two Q4_K tasks after it read the panel; Q4_0 and Q5_0 rows widened to
 * Q8_0 blocks read the Q8_0 panel, as Q8_0 rows do), and a context too small for the batch
 * runs it in passes of whole groups, each with its own panels: every output row is the bits
 * of that row run alone. */
static void simd_mm_panels_match_one_row(void) {
    static const uint32_t k_types[3] = {QT_Q6_K, QT_Q4_K, QT_Q4_K};
    static const uint32_t legacy[3] = {QT_Q4_0, QT_Q5_0, QT_Q8_0};
    mm_panels_case(k_types);
    mm_panels_case(legacy);
}

/* The matmul pair (qt_mm_dot_upto, qt_mm_dot4_upto): wherever a type has a four-row
 * kernel for matmuls, every row is the bits of the single-row matmul kernel of the same
 * level, for every type and level (the panel types included: arm64's lattice IQ types
 * have four-row panel kernels, as F32, IQ4_NL and IQ4_XS do there). This is what keeps a prompt's
 * rows equal to decode's. */
static void simd_mm_dot4_matches_mm_dot(void) {
    int tested = 0;
    for (int isa = QT_ISA_SCALAR; isa <= qt_isa_detect(); isa++) {
        for (uint32_t type = 0; type < QT_COUNT; type++) {
            const qt_traits *t = qt_get(type);
            if (!t || t->act_type < 0) continue;
            qt_dot4_fn f4 = qt_mm_dot4_upto(type, isa);
            qt_dot_fn f = qt_mm_dot_upto(type, isa);
            if (!f4) continue;
            tested++;
            const int64_t lens[] = {t->block, 9 * (int64_t)t->block, 4096};
            dot4_vs_dot(f4, f, type, isa, lens, PT_ARRAY_LEN(lens), 0x3D4, 32, "matmul four-row");
        }
    }
#if defined(__aarch64__)
    /* every panel type (F32, IQ4_NL and the 256-weight IQ types) has SIMD kernels of both
     * shapes at every arm64 level */
    for (uint32_t type = 0; type < QT_COUNT; type++)
        for (int isa = QT_ISA_NEON; isa <= qt_isa_detect() && qt_has_panel(type); isa++) {
            CHECKF(qt_mm_dot4_upto(type, isa) != NULL, "%s has no %s four-row panel kernel",
                   qt_name(type), isa_name(isa));
            CHECKF(qt_mm_dot_upto(type, isa) != qt_dot_panel_impl(type, QT_ISA_SCALAR),
                   "%s: the %s matmul kernel is the scalar panel reference", qt_name(type),
                   isa_name(isa));
        }
#endif
    if (!tested) t_skip("no four-row kernel on this CPU");
}

/* Detection agrees with the CPU, and qt_dot_best really picks SIMD: a test
 * that silently fell back to the scalar path would otherwise pass. */
static void simd_dispatch_picks_best(void) {
    const int top = qt_isa_detect();
    CHECK(top >= QT_ISA_SCALAR && top <= QT_ISA_TOP);
#if defined(__x86_64__)
    __builtin_cpu_init();
    unsigned a, b, c, d;
    const int f16c = __get_cpuid(1, &a, &b, &c, &d) && (c & bit_F16C);
    const int has_avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && f16c;
    const int has_512 = has_avx2 && __builtin_cpu_supports("avx512f") &&
                        __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
                        __builtin_cpu_supports("avx512vnni");
    CHECK(top == (has_512 ? QT_ISA_AVX512 : has_avx2 ? QT_ISA_AVX2 : QT_ISA_SCALAR));
    if (has_avx2) {
        CHECK(qt_dot_best(QT_Q4_K) != NULL);
        CHECKF(qt_dot_best(QT_Q4_K) != qt_dot_impl(QT_Q4_K, QT_ISA_SCALAR),
               "qt_dot_best(Q4_K) is the scalar kernel on a CPU with AVX2");
    }
#elif defined(__aarch64__) && defined(__linux__)
    const int dp = (getauxval(AT_HWCAP) & (1ul << 20)) != 0, /* HWCAP_ASIMDDP */
        mm = (getauxval(AT_HWCAP2) & (1ul << 13)) != 0;      /* HWCAP2_I8MM */
    CHECK(top == (!dp ? QT_ISA_NEON : mm ? QT_ISA_I8MM : QT_ISA_DOTPROD));
    CHECKF(qt_dot_best(QT_Q4_K) == qt_dot_impl(QT_Q4_K, QT_ISA_NEON),
           "qt_dot_best(Q4_K) is not the NEON kernel");
    if (dp)
        CHECKF(qt_dot_best(QT_Q8_0) == qt_dot_impl(QT_Q8_0, QT_ISA_DOTPROD),
               "qt_dot_best(Q8_0) is not the dotprod kernel on a CPU with dotprod");
    CHECK(qt_dot_avx2(QT_Q4_K) == NULL && qt_dot_avx512(QT_Q4_K) == NULL);
#else
    CHECK(top == QT_ISA_SCALAR);
    CHECK(qt_dot_avx2(QT_Q4_K) == NULL && qt_dot_avx512(QT_Q4_K) == NULL);
#endif
    for (uint32_t type = 0; type < QT_COUNT; type++) {
        qt_dot_fn want = NULL;
        for (int isa = top; isa >= QT_ISA_SCALAR && !want; isa--)
            want = qt_dot_impl(type, isa);
        CHECKF(qt_dot_best(type) == want, "qt_dot_best(%s) is not the highest available level",
               qt_name(type));
    }
    CHECK(qt_dot_best(QT_Q8_K) == NULL); /* activation-only type: no dot */
    CHECK(qt_dot_best(QT_COUNT) == NULL);
    CHECK(qt_dot_impl(QT_Q4_K, QT_ISA_TOP + 1) == NULL);
    CHECK(qt_dot_impl(QT_COUNT + 7, QT_ISA_SCALAR) == NULL);
}

/* The F32 kernels in ggml's lane order (qt_f32_*) return the reference's
 * bits exactly at every level: the order is fixed and fused multiply-adds are
 * exact, so "to float rounding" would hide a wrong lane. Lengths cover a tail
 * only (n < 64), whole 64-blocks, and blocks plus a tail (160 = the MLA score
 * row of the fixtures, 576 = GLM-5's). */
static void simd_f32_kernels_bit_identical(void) {
    const int top = qt_isa_detect();
    const int64_t lens[] = {1, 7, 32, 63, 64, 65, 128, 160, 255, 576, 4096};
    float *x = malloc(4096 * sizeof *x), *y = malloc(4096 * sizeof *y),
          *a = malloc(4096 * sizeof *a), *b = malloc(4096 * sizeof *b);
    uint64_t st = 12345;
    for (int i = 0; i < 4096; i++) {
        /* mixed signs and magnitudes, so that the order shows in the bits */
        st = st * 6364136223846793005ULL + 1442695040888963407ULL;
        x[i] = (float)((int64_t)(st >> 33) % 2001 - 1000) * ldexpf(1.0f, (int)(st >> 20 & 15) - 12);
        st = st * 6364136223846793005ULL + 1442695040888963407ULL;
        y[i] = (float)((int64_t)(st >> 33) % 2001 - 1000) / 997.0f;
    }
    int tested = 0;
    for (int isa = QT_ISA_AVX2; isa <= top; isa++) {
        const qt_f32_kernels *k = qt_f32_impl(isa);
        CHECKF(k != NULL, "%s: no F32 kernels", isa_name(isa));
        if (!k) continue;
        tested++;
        for (size_t i = 0; i < PT_ARRAY_LEN(lens); i++) {
            const float want = qt_f32_dot_ref(x, y, lens[i]), got = k->dot(x, y, lens[i]);
            CHECKF(memcmp(&want, &got, sizeof want) == 0, "%s dot n=%lld: %.9g, reference %.9g",
                   isa_name(isa), (long long)lens[i], got, want);
            for (int j = 0; j < 4096; j++)
                a[j] = b[j] = x[(j * 7) % 4096];
            float two[2];
            k->dot2(x, y, x + 7, lens[i] < 4096 - 7 ? lens[i] : 4096 - 7, two);
            const int64_t n2 = lens[i] < 4096 - 7 ? lens[i] : 4096 - 7;
            const float w0 = qt_f32_dot_ref(x, y, n2), w1 = qt_f32_dot_ref(x, x + 7, n2);
            CHECKF(memcmp(&w0, &two[0], sizeof w0) == 0 && memcmp(&w1, &two[1], sizeof w1) == 0,
                   "%s dot2 n=%lld: %.9g %.9g, reference %.9g %.9g", isa_name(isa), (long long)n2,
                   two[0], two[1], w0, w1);
            qt_f32_axpy_ref(a, 0.3f, y, lens[i]);
            k->axpy(b, 0.3f, y, lens[i]);
            CHECKF(memcmp(a, b, 4096 * sizeof *a) == 0, "%s axpy n=%lld differs", isa_name(isa),
                   (long long)lens[i]);
        }
#if defined(__x86_64__)
        /* x86 only (arm64 has no pair kernel: MLA keeps the per-head dot there).
         * Two heads' fp16 scores over one row, against the level's F16 dot per head */
        const qt_f16_dot2_fn d2 = isa >= QT_ISA_AVX512 ? qt_f16_dot2_avx512() : qt_f16_dot2_avx2();
        const qt_dot_fn d16 = qt_dot_impl(QT_F16, isa);
        CHECKF(d2 && d16, "%s: no fp16 dot", isa_name(isa));
        for (size_t i = 0; d2 && d16 && i < PT_ARRAY_LEN(lens); i++) {
            const int64_t n = lens[i] < 1024 ? lens[i] : 1024;
            pt_f16 w16[1024], q16[2][1024];
            float qf[2][1024], got[2];
            for (int64_t e = 0; e < n; e++) {
                w16[e] = qt_f32_to_f16(x[e]);
                for (int h = 0; h < 2; h++) {
                    q16[h][e] = qt_f32_to_f16(y[(e * (h + 3)) % 4096]);
                    qf[h][e] = qt_f16_to_f32(q16[h][e]);
                }
            }
            d2(w16, qf[0], qf[1], n, got);
            for (int h = 0; h < 2; h++) {
                const float want = d16(w16, q16[h], n);
                CHECKF(memcmp(&want, &got[h], sizeof want) == 0,
                       "%s fp16 dot2 head %d n=%lld: %.9g, dot %.9g", isa_name(isa), h,
                       (long long)n, got[h], want);
            }
        }
        /* eight rows against one vector (AVX-512 only), each against the level's dot */
        const qt_f32_dot8_fn f8 = isa >= QT_ISA_AVX512 ? qt_f32_dot8_avx512() : NULL;
        CHECKF((f8 != NULL) == (isa >= QT_ISA_AVX512), "%s: f32 dot8 presence", isa_name(isa));
        for (size_t i = 0; f8 && i < PT_ARRAY_LEN(lens); i++) {
            const int64_t n = lens[i] < 1024 ? lens[i] : 1024, ys = (4096 - 1024) / 7;
            float got[16];
            const float *x1 = y + 4096 - 1024; /* the second head */
            f8(x, x1, y, ys, n, got);
            for (int r = 0; r < 16; r++) {
                const float want = k->dot(r < 8 ? x : x1, y + (r % 8) * ys, n);
                CHECKF(memcmp(&want, &got[r], sizeof want) == 0,
                       "%s f32 dot8 head %d row %d n=%lld: %.9g, dot %.9g", isa_name(isa), r / 8,
                       r % 8, (long long)n, got[r], want);
            }
        }
        /* eight heads at once (AVX-512 only), each against the F16 dot per head */
        const qt_f16_dot8_fn d8 = isa >= QT_ISA_AVX512 ? qt_f16_dot8_avx512() : NULL;
        CHECKF((d8 != NULL) == (isa >= QT_ISA_AVX512), "%s: fp16 dot8 presence", isa_name(isa));
        for (size_t i = 0; d8 && d16 && i < PT_ARRAY_LEN(lens); i++) {
            const int64_t n = lens[i] < 1024 ? lens[i] : 1024;
            static pt_f16 w16[1024 + 4], q16[8][1024];
            static float qf[8][1024];
            float got[8];
            for (int64_t e = 0; e < n; e++) {
                w16[e] = qt_f32_to_f16(x[e]);
                for (int h = 0; h < 8; h++) {
                    q16[h][e] = qt_f32_to_f16(y[(e * (h + 3)) % 4096]);
                    qf[h][e] = qt_f16_to_f32(q16[h][e]);
                }
            }
            for (int64_t e = n; e < n + 4; e++)
                w16[e] = qt_f32_to_f16(x[e]);
            /* five rows: row r is w16 shifted by r values (n = 32 k runs the path that
             * keeps the accumulators in registers and folds the eight heads at once) */
            const void *rows[5];
            float got5[8 * 5];
            for (int r = 0; r < 5; r++)
                rows[r] = w16 + r;
            d8(rows, 1, qf[0], 1024, n, got);
            d8(rows, 5, qf[0], 1024, n, got5);
            for (int h = 0; h < 8; h++) {
                const float want = d16(w16, q16[h], n);
                CHECKF(memcmp(&want, &got[h], sizeof want) == 0,
                       "%s fp16 dot8 head %d n=%lld: %.9g, dot %.9g", isa_name(isa), h,
                       (long long)n, got[h], want);
                for (int r = 0; r < 5; r++) {
                    const float want5 = d16(w16 + r, q16[h], n);
                    CHECKF(memcmp(&want5, &got5[8 * r + h], sizeof want5) == 0,
                           "%s fp16 dot8 row %d of 5, head %d n=%lld: %.9g, dot %.9g",
                           isa_name(isa), r, h, (long long)n, got5[8 * r + h], want5);
                }
            }
        }
        /* m rows at once (weighted sums) for nh heads: 1..19 rows, so that groups of 4 and 8
         * and every remainder run, 1..5 heads (passes of 2 and 4 and what is left), each
         * head against the reference's fma chain */
        const qt_f32_axpyn_fn axpyn =
            isa >= QT_ISA_AVX512 ? qt_f32_axpyn_avx512() : qt_f32_axpyn_avx2();
        CHECKF(axpyn != NULL, "%s: no axpyn", isa_name(isa));
        const qt_f16_axpyn_fn axpyn16 =
            isa >= QT_ISA_AVX512 ? qt_f16_axpyn_avx512() : qt_f16_axpyn_avx2();
        CHECKF(axpyn16 != NULL, "%s: no fp16 axpyn", isa_name(isa));
        float *ha = malloc(5 * 4096 * sizeof *ha), *hb = malloc(5 * 4096 * sizeof *hb);
        pt_f16 *x16 = malloc(4096 * sizeof *x16);
        float *x16f = malloc(4096 * sizeof *x16f);
        for (int j = 0; j < 4096; j++) {
            x16[j] = qt_f32_to_f16(x[j]);
            x16f[j] = qt_f16_to_f32(x16[j]);
        }
        for (int nh = 1; axpyn && axpyn16 && nh <= 5; nh++)
            for (int m = 1; m <= 19; m++)
                for (size_t i = 0; i < PT_ARRAY_LEN(lens); i++) {
                    const int64_t n = lens[i] < 4096 - 19 * 5 ? lens[i] : 4096 - 19 * 5;
                    float f[5 * 19];
                    const float *xs[19];
                    float *pa[5], *pb[5];
                    for (int r = 0; r < m; r++)
                        xs[r] = x + 5 * r; /* overlapping, misaligned rows */
                    for (int h = 0; h < nh; h++) {
                        for (int r = 0; r < m; r++)
                            f[h * m + r] = y[(r * 131 + m + 977 * h) % 4096];
                        pa[h] = ha + (size_t)h * 4096 + h; /* misaligned lanes too */
                        pb[h] = hb + (size_t)h * 4096 + h;
                    }
                    for (int j = 0; j < 5 * 4096; j++)
                        ha[j] = hb[j] = y[(j * 3) % 4096];
                    qt_f32_axpyn_ref(pa, nh, m, f, xs, n);
                    axpyn(pb, nh, m, f, xs, n);
                    CHECKF(memcmp(ha, hb, 5 * 4096 * sizeof *ha) == 0,
                           "%s axpyn nh=%d m=%d n=%lld differs", isa_name(isa), nh, m,
                           (long long)n);
                    /* the same over fp16 rows (converted as loaded): against the
                     * reference, and against the float rows they convert to */
                    const pt_f16 *hs[19];
                    const float *hf[19];
                    for (int r = 0; r < m; r++) {
                        hs[r] = x16 + 3 * r;
                        hf[r] = x16f + 3 * r;
                    }
                    for (int j = 0; j < 5 * 4096; j++)
                        ha[j] = hb[j] = y[(j * 5) % 4096];
                    qt_f32_axpyn_ref(pa, nh, m, f, hf, n);
                    axpyn16(pb, nh, m, f, hs, n);
                    CHECKF(memcmp(ha, hb, 5 * 4096 * sizeof *ha) == 0,
                           "%s fp16 axpyn nh=%d m=%d n=%lld differs", isa_name(isa), nh, m,
                           (long long)n);
                    for (int j = 0; j < 5 * 4096; j++)
                        ha[j] = y[(j * 5) % 4096];
                    qt_f16_axpyn_ref(pa, nh, m, f, hs, n);
                    CHECKF(memcmp(ha, hb, 5 * 4096 * sizeof *ha) == 0,
                           "fp16 axpyn reference nh=%d m=%d n=%lld differs", nh, m, (long long)n);
                }
        free(ha);
        free(hb);
        free(x16);
        free(x16f);
#endif
    }
    CHECK(qt_f32_best() == qt_f32_impl(top));
    CHECK(qt_f32_impl(QT_ISA_SCALAR)->dot == qt_f32_dot_ref);
    if (!tested) t_skip("no SIMD level on this CPU");
    free(x);
    free(y);
    free(a);
    free(b);
}

T_SUITE(simd) {
    T_ADD(simd_f32_kernels_bit_identical);
    T_ADD(simd_scalar_level_is_ref);
    T_ADD(simd_panel_matches_ref);
    T_ADD(simd_dot4_bit_identical);
    T_ADD(simd_tile_bit_identical);
    T_ADD(simd_gemv_bit_identical);
    T_ADD(simd_mm_run_rows_match_one_row);
    T_ADD(simd_mm_panels_match_one_row);
    T_ADD(simd_mm_dot4_matches_mm_dot);
    T_ADD(simd_dispatch_picks_best);
    T_ADD(simd_avx2_matches_ref);
    T_ADD(simd_avx512_matches_ref);
#if defined(__aarch64__)
    T_ADD(simd_i8mm_matches_ref);
#endif
}
