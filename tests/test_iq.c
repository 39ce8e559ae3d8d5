/* test_iq.c — tests of the scalar IQ / MXFP4 reference (quant_iq.c, iq_grids.c).
 *
 * Three kinds of check:
 *   - the tables: a position-sensitive hash of every grid and value table,
 *     with the expected values computed from ggml's specification header, so
 *     a dropped, duplicated or transposed entry is caught;
 *   - hand-decoded blocks: one block per type with chosen indices, sign bits
 *     and scales whose expected weights are worked out from the format by
 *     hand (bit positions, nibble order, scale formulas, the E8M0 exponent);
 *   - consistency: iq_dot on pseudo-random blocks equals a float64 dot of
 *     iq_dequant's weights with the dequantised activations.
 * The comparison with llama.cpp's own decodes (fixtures/metrics.json) lives
 * with the GGUF fixture tests.
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/quant.h"
#include "kernels/quant_impl.h"
#include "test.h"

static const uint32_t all_types[] = {QT_IQ2_XXS, QT_IQ2_XS, QT_IQ2_S,  QT_IQ3_XXS, QT_IQ3_S,
                                     QT_IQ1_S,   QT_IQ1_M,  QT_IQ4_NL, QT_IQ4_XS,  QT_MXFP4};
#define N_TYPES (sizeof all_types / sizeof all_types[0])

/* ===== Helpers ===== */

static uint64_t rng_state;
static uint32_t rng(void) { /* xorshift64 */
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (uint32_t)(rng_state >> 16);
}
static float rng_unit(void) {
    return (float)(rng() % 2000001) / 1000000.0f - 1.0f;
}

static void put_u16(uint8_t *p, uint32_t v) {
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
}
static void put_u32(uint8_t *p, uint32_t v) {
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

/* FNV-1a over the entries (each masked to its width), in order. */
static uint64_t table_hash(const void *tab, int n, int width) {
    uint64_t h = 1469598103934665603ull;
    for (int i = 0; i < n; i++) {
        uint64_t v;
        switch (width) {
        case 8: v = ((const uint8_t *)tab)[i]; break;
        case 32: v = ((const uint32_t *)tab)[i]; break;
        default: v = ((const uint64_t *)tab)[i]; break;
        }
        h = (h ^ v) * 1099511628211ull;
    }
    return h;
}

/* Decode one block of `type` and compare weights [from, from+cnt) with want. */
static void check_decode(uint32_t type, const void *blk, int from, int cnt, const float *want) {
    float y[QK_K];
    iq_dequant(type, blk, y, qt_get(type)->block);
    for (int j = 0; j < cnt; j++)
        CHECKF(y[from + j] == want[j], "%s weight %d: got %.9g, want %.9g", qt_name(type), from + j,
               (double)y[from + j], (double)want[j]);
}

/* Fill n weights' worth of blocks with pseudo-random bytes, then give every
 * block a valid, moderate scale (fp16 in [2^-6, 2^-1) or an E8M0 near 1). */
static void random_blocks(uint32_t type, uint8_t *buf, int64_t n) {
    const qt_traits *t = qt_get(type);
    int64_t nb = n / t->block;
    for (int64_t i = 0; i < nb * t->bytes; i++)
        buf[i] = (uint8_t)rng();
    for (int64_t i = 0; i < nb; i++) {
        uint8_t *b = buf + i * t->bytes;
        uint32_t h = qt_f32_to_f16((0.015625f + 0.5f * (float)(rng() % 1000) / 1000.0f) *
                                   (rng() & 1 ? -1.0f : 1.0f));
        if (type == QT_MXFP4) {
            b[0] = (uint8_t)(120 + rng() % 12);
        } else if (type == QT_IQ1_M) { /* top nibble of each 16-bit scale word */
            for (int k = 0; k < 4; k++)
                b[48 + 2 * k + 1] =
                    (uint8_t)((b[48 + 2 * k + 1] & 0x0f) | ((h >> (4 * k)) & 0xf) << 4);
        } else {
            put_u16(b, h);
        }
    }
}

/* ===== Cases ===== */

static void iq_handles_types(void) {
    for (size_t i = 0; i < N_TYPES; i++)
        CHECKF(iq_handles(all_types[i]), "%s", qt_name(all_types[i]));
    CHECK(!iq_handles(QT_Q4_K));
    CHECK(!iq_handles(QT_Q8_0));
    CHECK(!iq_handles(QT_F32));
}

static void iq_tables_match_spec(void) {
    /* Hashes of ggml-common.h's tables, computed from that header. */
    CHECK(table_hash(iq2xxs_grid, 256, 64) == 0xb5c65adf794765a6ull);
    CHECK(table_hash(iq2xs_grid, 512, 64) == 0xc171de346ccb1d28ull);
    CHECK(table_hash(iq2s_grid, 1024, 64) == 0x9409009efd27970full);
    CHECK(table_hash(iq3xxs_grid, 256, 32) == 0x3954ad6db4114c21ull);
    CHECK(table_hash(iq3s_grid, 512, 32) == 0x8502332b23186735ull);
    CHECK(table_hash(iq1s_grid, 2048, 64) == 0x0e7e18ad07f1a08bull);
    CHECK(table_hash(ksigns_iq2xs, 128, 8) == 0x100b4e510a867c83ull);
    CHECK(table_hash(kvalues_iq4nl, 16, 8) == 0xe2d85aa4e6e5c6d7ull);
    CHECK(table_hash(kvalues_mxfp4, 16, 8) == 0x84792dcb1926edbbull);
    /* ksigns: the low 7 bits are the index, bit 7 makes the popcount even. */
    for (int i = 0; i < 128; i++) {
        CHECK((ksigns_iq2xs[i] & 127) == i);
        CHECK(__builtin_popcount(ksigns_iq2xs[i]) % 2 == 0);
    }
}

static void iq2_xxs_hand_decode(void) {
    uint8_t b[66] = {0};
    put_u16(b, 0x3c00); /* d = 1 */
    /* sub-block 0: group 0 uses grid[1], sign pattern 65, scale 3 */
    b[2] = 1;
    put_u32(b + 6, 65u | 3u << 28);
    /* grid[1] = 0x080808080808082b: byte 0 = 43, the rest 8; ksigns[65] = 0x41:
     * weights 0 and 6 negative; db = (0.5 + 3) / 4 = 0.875. */
    const float g0[8] = {-37.625f, 7, 7, 7, 7, 7, -7, 7};
    check_decode(QT_IQ2_XXS, b, 0, 8, g0);
    const float g1[8] = {7, 7, 7, 7, 7, 7, 7, 7}; /* grid[0], no signs, same scale */
    check_decode(QT_IQ2_XXS, b, 8, 8, g1);
    const float last[8] = {1, 1, 1, 1, 1, 1, 1, 1}; /* scale 0: (0.5 / 4) * 8 */
    check_decode(QT_IQ2_XXS, b, 248, 8, last);
}

static void iq2_xs_hand_decode(void) {
    uint8_t b[74] = {0};
    put_u16(b, 0x4000); /* d = 2 */
    /* group 0 (first half of sub-block 0): index 301, sign pattern 66 (ksigns
     * 66 = 0x42: weights 1 and 6, the top bit of the 7-bit field in use) */
    put_u16(b + 2, 301u | 66u << 9);
    b[66] = 0x45; /* sub-block 0: low scale 5 (weights 0..15), high 4 (16..31) */
    /* grid[301] = 0x1908190808192b19 -> 25 43 25 8 8 25 8 25; db = 2 * 5.5 / 4 = 2.75 */
    const float want[8] = {25 * 2.75f, -43 * 2.75f, 25 * 2.75f, 8 * 2.75f,
                           8 * 2.75f,  25 * 2.75f,  -8 * 2.75f, 25 * 2.75f};
    check_decode(QT_IQ2_XS, b, 0, 8, want);
    const float hi[2] = {8 * 2.25f, 8 * 2.25f}; /* grid[0] under scale 4: 2 * 4.5 / 4 */
    check_decode(QT_IQ2_XS, b, 24, 2, hi);
}

static void iq2_s_hand_decode(void) {
    uint8_t b[82] = {0};
    put_u16(b, 0x3800); /* d = 0.5 */
    /* group 3 of sub-block 0: index 700 = 0x2bc -> qs 0xbc, qh bits 6..7 = 2 */
    b[2 + 3] = 0xbc;
    b[2 + 64] = 2 << 6;
    b[2 + 32 + 3] = 0x81; /* explicit signs: weights 0 and 7 */
    b[2 + 64 + 8] = 0x20; /* sub-block 0: scale 0 (weights 0..15), 2 (16..31) */
    /* grid[700] = 0x1919082b2b080808 -> 8 8 8 43 43 8 25 25; db = 0.5 * 2.5 / 4 */
    const float s = 0.3125f;
    const float want[8] = {-8 * s, 8 * s, 8 * s, 43 * s, 43 * s, 8 * s, 25 * s, -25 * s};
    check_decode(QT_IQ2_S, b, 24, 8, want);
}

static void iq3_xxs_hand_decode(void) {
    uint8_t b[98] = {0};
    put_u16(b, 0x4000);                 /* d = 2 */
    b[2 + 0] = 255;                     /* grid[255] = 0x3e341c04 -> 4 28 52 62 (weights 0..3) */
    b[2 + 1] = 1;                       /* grid[1] = 0x04040414 -> 20 4 4 4 (weights 4..7) */
    put_u32(b + 2 + 64, 3u | 1u << 28); /* sign pattern 3 (weights 0, 1), scale 1 */
    /* db = 2 * 1.5 / 2 = 1.5 */
    const float want[8] = {-6, -42, 78, 93, 30, 6, 6, 6};
    check_decode(QT_IQ3_XXS, b, 0, 8, want);
}

static void iq3_s_hand_decode(void) {
    uint8_t b[110] = {0};
    put_u16(b, 0x3c00); /* d = 1 */
    /* Sub-block 1 (qh[1] = 0x09): group 0 indices 0xff | bit 0 -> 511 and
     * 0x00 | bit 1 -> 0; group 1 indices 0x00 | bit 2 -> 0 and 0x00 | bit 3 -> 256. */
    b[2 + 8] = 0xff;
    b[2 + 64 + 1] = 0x09;
    b[2 + 64 + 8 + 4] = 0x10;  /* signs of sub-block 1, group 0: weight 4 */
    b[2 + 64 + 8 + 32] = 0x20; /* scales: sub-block 0 -> 0, sub-block 1 -> 2: db = 5 */
    /* grid[511] = 0x0f0f0101 -> 1 1 15 15; grid[0] = 0x01010101;
     * grid[256] = 0x05090507 -> 7 5 9 5 */
    const float g0[8] = {5, 5, 75, 75, -5, 5, 5, 5};
    check_decode(QT_IQ3_S, b, 32, 8, g0);
    const float g1[8] = {5, 5, 5, 5, 35, 25, 45, 25};
    check_decode(QT_IQ3_S, b, 40, 8, g1);
    const float sb0[4] = {1, 1, 1, 1}; /* grid[0] under db = 1 */
    check_decode(QT_IQ3_S, b, 0, 4, sb0);
}

static void iq1_s_hand_decode(void) {
    uint8_t b[50] = {0};
    put_u16(b, 0x3c00); /* d = 1 */
    /* sub-block 2, group 1: index 1500 = 0x5dc -> qs 0xdc, qh bits 3..5 = 5;
     * qh bits 12..14 = 2 (dl = 5), bit 15: negative shift */
    b[2 + 8 + 1] = 0xdc;
    put_u16(b + 2 + 32 + 2 * 2, 5u << 3 | 2u << 12 | 0x8000u);
    /* grid[1500] = 0x01ff00ff00ffff00 -> 0 -1 -1 0 -1 0 -1 1; w = 5 * (g - 1/8) */
    const float want[8] = {-0.625f, -5.625f, -5.625f, -0.625f, -5.625f, -0.625f, -5.625f, 4.375f};
    check_decode(QT_IQ1_S, b, 72, 8, want);
}

static void iq1_m_hand_decode(void) {
    uint8_t b[56] = {0};
    /* d = 0.5 = fp16 0x3800: nibbles (low first) 0, 0, 8, 3 in the top nibbles
     * of the four scale words; word 0 also holds sub-block 1's scales at bits
     * 6..8 (= 3, first 16 weights) and 9..11 (= 1, last 16). */
    put_u16(b + 48, 3u << 6 | 1u << 9);
    put_u16(b + 52, 0x8000);
    put_u16(b + 54, 0x3000);
    /* group 6 (sub-block 1, third group -> second scale, ls = 3): index 530 =
     * 0x212: qs 0x12, qh[3] low nibble: index bits 2, shift sign bit 3 set */
    b[6] = 0x12;
    b[32 + 3] = 0x0a;
    /* grid[530] = 0xff010000ff01ff00 -> 0 -1 1 -1 0 0 1 -1; w = 1.5 * (g - 1/8) */
    const float want[8] = {-0.1875f, -1.6875f, 1.3125f, -1.6875f,
                           -0.1875f, -0.1875f, 1.3125f, -1.6875f};
    check_decode(QT_IQ1_M, b, 48, 8, want);
    /* group 4 (first scale of sub-block 1, ls = 7): grid[0] = all -1, shift +1/8 */
    const float g4[2] = {3.5f * -0.875f, 3.5f * -0.875f};
    check_decode(QT_IQ1_M, b, 32, 2, g4);
}

static void iq4_nl_hand_decode(void) {
    uint8_t b[18];
    put_u16(b, 0x4000);      /* d = 2 */
    memset(b + 2, 0x88, 16); /* value index 8 -> +1 */
    b[2 + 3] = 0xf0;         /* weight 3: index 0 (-127); weight 19: index 15 (113) */
    float y[32];
    iq_dequant(QT_IQ4_NL, b, y, 32);
    CHECK(y[3] == -254.0f);
    CHECK(y[19] == 226.0f);
    CHECK(y[0] == 2.0f && y[31] == 2.0f);
}

static void iq4_xs_hand_decode(void) {
    uint8_t b[136] = {0};
    put_u16(b, 0x3800);       /* d = 0.5 */
    put_u16(b + 2, 2u << 10); /* scales_h: sub-block 5 high bits = 2 */
    b[4 + 2] = 0x70;          /* scales_l: sub-block 5 low bits = 7 -> 39 - 32 = 7 */
    b[8 + 16 * 5] = 0x1f;     /* weight 160: index 15 (113); weight 176: index 1 (-104) */
    float y[QK_K];
    iq_dequant(QT_IQ4_XS, b, y, QK_K);
    CHECK(y[160] == 395.5f);
    CHECK(y[176] == -364.0f);
    CHECK(y[161] == 0.5f * 7 * -127); /* index 0 */
    CHECK(y[0] == 0.5f * -32 * -127); /* sub-block 0: scale bits 0 -> -32 */
}

static void iq_mxfp4_hand_decode(void) {
    /* e = 127 is a scale of 1: weights are the plain E2M1 values. */
    uint8_t b[17] = {127};
    b[1] = 0xf7; /* weight 0: code 7 = +6; weight 16: code 15 = -6 */
    b[2] = 0x91; /* weight 1: code 1 = +0.5; weight 17: code 9 = -0.5 */
    b[3] = 0x5a; /* weight 2: code 10 = -1; weight 18: code 5 = +3 */
    float y[32];
    iq_dequant(QT_MXFP4, b, y, 32);
    CHECK(y[0] == 6.0f && y[16] == -6.0f);
    CHECK(y[1] == 0.5f && y[17] == -0.5f);
    CHECK(y[2] == -1.0f && y[18] == 3.0f);
    CHECK(y[4] == 0.0f);
    /* Every exponent, subnormal and extreme ones included: code 2 = 1.0. */
    for (int e = 0; e < 256; e++) {
        b[0] = (uint8_t)e;
        memset(b + 1, 0x22, 16);
        iq_dequant(QT_MXFP4, b, y, 32);
        float want = ldexpf(1.0f, e - 127);
        CHECKF(y[0] == want && y[31] == want, "e=%d: %g, want %g", e, (double)y[0], (double)want);
    }
}

/* iq_dot equals the float64 dot of the decoded weights and activations. */
static void iq_dot_matches_dequant(void) {
    const int64_t n = 4 * QK_K;
    uint8_t *w = malloc(4 * 136 * 8);
    uint8_t *a = malloc(4 * 292 * 8);
    float *x = malloc(n * sizeof *x), *wf = malloc(n * sizeof *wf), *xa = malloc(n * sizeof *xa);
    CHECK(w && a && x && wf && xa);
    if (!(w && a && x && wf && xa)) goto out;
    rng_state = 0x9e3779b97f4a7c15ull;
    for (size_t ti = 0; ti < N_TYPES; ti++) {
        const uint32_t type = all_types[ti];
        const uint32_t act = (uint32_t)qt_get(type)->act_type;
        for (int rep = 0; rep < 8; rep++) {
            random_blocks(type, w, n);
            for (int64_t i = 0; i < n; i++)
                x[i] = rng_unit() * (rep % 2 ? 3.0f : 0.1f);
            qt_quantize_act_ref(act, x, a, n);
            qt_dequant_ref(act, a, xa, n);
            iq_dequant(type, w, wf, n);
            double ref = 0, mag = 0;
            for (int64_t i = 0; i < n; i++) {
                ref += (double)wf[i] * xa[i];
                mag += fabs((double)wf[i] * xa[i]);
            }
            double got = iq_dot(type, w, a, n);
            CHECKF(fabs(got - ref) <= 1e-5 * mag + 1e-30,
                   "%s rep %d: dot %.9g, float64 %.9g (sum |.| %.3g)", qt_name(type), rep, got, ref,
                   mag);
        }
    }
out:
    free(w);
    free(a);
    free(x);
    free(wf);
    free(xa);
}

/* A block decodes the same alone and inside a longer row. */
static void iq_rows_are_blockwise(void) {
    rng_state = 12345;
    uint8_t w[3 * 136];
    float row[3 * QK_K], one[QK_K];
    for (size_t ti = 0; ti < N_TYPES; ti++) {
        const uint32_t type = all_types[ti];
        const qt_traits *t = qt_get(type);
        const int64_t n = 3 * t->block;
        random_blocks(type, w, n);
        iq_dequant(type, w, row, n);
        iq_dequant(type, w + 2 * t->bytes, one, t->block);
        CHECKF(memcmp(row + 2 * t->block, one, (size_t)t->block * sizeof(float)) == 0, "%s",
               t->name);
    }
}

T_SUITE(iq) {
    T_ADD(iq_handles_types);
    T_ADD(iq_tables_match_spec);
    T_ADD(iq2_xxs_hand_decode);
    T_ADD(iq2_xs_hand_decode);
    T_ADD(iq2_s_hand_decode);
    T_ADD(iq3_xxs_hand_decode);
    T_ADD(iq3_s_hand_decode);
    T_ADD(iq1_s_hand_decode);
    T_ADD(iq1_m_hand_decode);
    T_ADD(iq4_nl_hand_decode);
    T_ADD(iq4_xs_hand_decode);
    T_ADD(iq_mxfp4_hand_decode);
    T_ADD(iq_dot_matches_dequant);
    T_ADD(iq_rows_are_blockwise);
}
