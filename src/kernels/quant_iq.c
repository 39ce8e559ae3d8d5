/* quant_iq.c — scalar reference decode and dot products of the IQ types
 * (IQ1_S, IQ1_M, IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S, IQ4_NL, IQ4_XS) and
 * of MXFP4.
 *
 * Contract: iq_dequant is bit-exact with ggml's dequantize_row_* and iq_dot
 * equals ggml's generic vec_dot_*_q8_K / vec_dot_*_q8_0 to float rounding, so
 * that petrel's logits can be compared with llama.cpp's. The integer parts of
 * the dot products may be summed in any order (they are exact); the float
 * operations below are done in ggml's order, and this file must be compiled
 * without FP contraction (-std=c11 implies -ffp-contract=off on GCC).
 *
 * Structure. The five lattice types (IQ2_*, IQ3_*) and the two IQ1 types are
 * first unpacked, one 256-weight super-block at a time, into a common form:
 * signed integer levels per weight, an odd integer multiplier per 16 weights
 * and (IQ1 only) a sign of the ±1/8 shift per 8 weights. Decode and dot then
 * share one loop per family. A level times a scale is the same float as
 * ggml's "scale * grid * ±1" because negation commutes with rounding, and
 * ggml's "d * (0.5 + s) * 0.25" equals "d * (2s + 1) * 0.125" exactly (a
 * product scaled by two rounds to twice the rounded product).
 *
 * Non-goals: speed (SIMD lives in dot_avx2.c / dot_avx512.c and is tested
 * against this file) and quantisation to these types.
 */
#include <math.h>
#include <string.h>

#include "kernels/quant.h"
#include "kernels/quant_impl.h"

/* ===== Small helpers ===== */

/* Little-endian loads: the blocks are on-disk bytes. */
static inline uint32_t ld_u16(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8;
}
static inline uint32_t ld_u32(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* Byte j (0 = least significant) of a grid entry: weight j of its group. */
static inline int grid_byte(uint64_t entry, int j) {
    return (int)((entry >> (8 * j)) & 0xff);
}

/* Signed byte j of an IQ1 grid entry (values -1, 0, +1 stored as 0xff, 0, 1). */
static inline int grid_sbyte(uint64_t entry, int j) {
    return (int)(int8_t)grid_byte(entry, j);
}

/* Set bit j of an 8-bit sign mask: weight j of its group is negative. */
static inline int sign_of(uint32_t mask, int j) {
    return (mask >> j) & 1 ? -1 : 1;
}

/* ===== Unpacked form of one 256-weight super-block ===== */

typedef struct {
    float d;          /* super-block scale (fp16 decoded) */
    int8_t q[QK_K];   /* signed level per weight: grid value with its sign applied */
    uint8_t ls[16];   /* odd multiplier 2s+1 per 16 weights */
    int8_t dsign[32]; /* IQ1 only: sign (+1/-1) of the 1/8 shift per 8 weights */
} iq_unpacked;

/* Fill 8 levels from an unsigned grid entry and an 8-bit sign mask. */
static void put8_signed(int8_t *q, uint64_t entry, uint32_t signs) {
    for (int j = 0; j < 8; j++)
        q[j] = (int8_t)(sign_of(signs, j) * grid_byte(entry, j));
}

/* Two 4-weight IQ3 grid entries make one group of 8 under one sign mask. */
static void put8_signed_pair(int8_t *q, uint32_t lo, uint32_t hi, uint32_t signs) {
    put8_signed(q, (uint64_t)lo | (uint64_t)hi << 32, signs);
}

/* IQ2_XXS: per 32 weights 8 bytes: 4 grid indices (one byte each), then a
 * 32-bit word holding four 7-bit sign-pattern indices (bits 0..27) and the
 * 4-bit scale (bits 28..31). */
static void unpack_iq2_xxs(const void *blk, iq_unpacked *u) {
    const block_iq2_xxs *b = blk;
    const uint8_t *qs = (const uint8_t *)b->qs;
    u->d = qt_f16_to_f32(b->d);
    for (int ib = 0; ib < QK_K / 32; ib++, qs += 8) {
        uint32_t aux = ld_u32(qs + 4);
        for (int l = 0; l < 4; l++)
            put8_signed(u->q + 32 * ib + 8 * l, iq2xxs_grid[qs[l]],
                        ksigns_iq2xs[(aux >> (7 * l)) & 127]);
        u->ls[2 * ib] = u->ls[2 * ib + 1] = (uint8_t)(2 * (aux >> 28) + 1);
    }
}

/* IQ2_XS: per 8 weights a 16-bit word: 9-bit grid index, 7-bit sign index;
 * per 32 weights a byte of two 4-bit scales (low: first 16, high: last 16). */
static void unpack_iq2_xs(const void *blk, iq_unpacked *u) {
    const block_iq2_xs *b = blk;
    const uint8_t *qs = (const uint8_t *)b->qs;
    u->d = qt_f16_to_f32(b->d);
    for (int g = 0; g < QK_K / 8; g++) {
        uint32_t w = ld_u16(qs + 2 * g);
        put8_signed(u->q + 8 * g, iq2xs_grid[w & 511], ksigns_iq2xs[w >> 9]);
    }
    for (int ib = 0; ib < QK_K / 32; ib++) {
        u->ls[2 * ib] = (uint8_t)(2 * (b->scales[ib] & 0xf) + 1);
        u->ls[2 * ib + 1] = (uint8_t)(2 * (b->scales[ib] >> 4) + 1);
    }
}

/* IQ2_S: 10-bit grid index = qs byte | 2 bits of qh (2 bits per 8 weights,
 * 8 per 32); explicit 8-bit sign masks in the second half of qs; scales as
 * IQ2_XS. */
static void unpack_iq2_s(const void *blk, iq_unpacked *u) {
    const block_iq2_s *b = blk;
    const uint8_t *signs = b->qs + QK_K / 8;
    u->d = qt_f16_to_f32(b->d);
    for (int g = 0; g < QK_K / 8; g++) {
        int ib = g / 4, l = g % 4;
        uint32_t idx = b->qs[g] | ((uint32_t)(b->qh[ib] >> (2 * l)) & 3) << 8;
        put8_signed(u->q + 8 * g, iq2s_grid[idx], signs[g]);
    }
    for (int ib = 0; ib < QK_K / 32; ib++) {
        u->ls[2 * ib] = (uint8_t)(2 * (b->scales[ib] & 0xf) + 1);
        u->ls[2 * ib + 1] = (uint8_t)(2 * (b->scales[ib] >> 4) + 1);
    }
}

/* IQ3_XXS: 64 one-byte indices into the 4-weight grid, then per 32 weights a
 * 32-bit word laid out as in IQ2_XXS (four 7-bit sign indices, 4-bit scale). */
static void unpack_iq3_xxs(const void *blk, iq_unpacked *u) {
    const block_iq3_xxs *b = blk;
    const uint8_t *qs = b->qs;
    const uint8_t *gas = b->qs + QK_K / 4;
    u->d = qt_f16_to_f32(b->d);
    for (int ib = 0; ib < QK_K / 32; ib++) {
        uint32_t aux = ld_u32(gas + 4 * ib);
        for (int l = 0; l < 4; l++) {
            const uint8_t *p = qs + 8 * ib + 2 * l;
            put8_signed_pair(u->q + 32 * ib + 8 * l, iq3xxs_grid[p[0]], iq3xxs_grid[p[1]],
                             ksigns_iq2xs[(aux >> (7 * l)) & 127]);
        }
        u->ls[2 * ib] = u->ls[2 * ib + 1] = (uint8_t)(2 * (aux >> 28) + 1);
    }
}

/* IQ3_S: 9-bit indices into the 4-weight grid: qs byte | one qh bit (bit k of
 * qh[ib] for the k-th index of sub-block ib); explicit sign bytes per 8
 * weights; one 4-bit scale per 32 weights (low nibble: even sub-block). */
static void unpack_iq3_s(const void *blk, iq_unpacked *u) {
    const block_iq3_s *b = blk;
    u->d = qt_f16_to_f32(b->d);
    for (int ib = 0; ib < QK_K / 32; ib++) {
        const uint8_t *qs = b->qs + 8 * ib;
        uint32_t qh = b->qh[ib];
        for (int l = 0; l < 4; l++) {
            uint32_t i0 = qs[2 * l] | ((qh >> (2 * l)) & 1) << 8;
            uint32_t i1 = qs[2 * l + 1] | ((qh >> (2 * l + 1)) & 1) << 8;
            put8_signed_pair(u->q + 32 * ib + 8 * l, iq3s_grid[i0], iq3s_grid[i1],
                             b->signs[4 * ib + l]);
        }
        uint32_t s = (b->scales[ib / 2] >> (4 * (ib % 2))) & 0xf;
        u->ls[2 * ib] = u->ls[2 * ib + 1] = (uint8_t)(2 * s + 1);
    }
}

/* IQ1_S: 11-bit indices into the ternary grid: qs byte | 3 bits of qh[ib]
 * (bits 3l..3l+2); qh bits 12..14: the scale, bit 15: sign of the shift. */
static void unpack_iq1_s(const void *blk, iq_unpacked *u) {
    const block_iq1_s *b = blk;
    u->d = qt_f16_to_f32(b->d);
    for (int ib = 0; ib < QK_K / 32; ib++) {
        uint32_t qh = b->qh[ib];
        for (int l = 0; l < 4; l++) {
            uint32_t idx = b->qs[4 * ib + l] | ((qh >> (3 * l)) & 7) << 8;
            for (int j = 0; j < 8; j++)
                u->q[32 * ib + 8 * l + j] = (int8_t)grid_sbyte(iq1s_grid[idx], j);
            u->dsign[4 * ib + l] = (int8_t)(qh & 0x8000 ? -1 : 1);
        }
        u->ls[2 * ib] = u->ls[2 * ib + 1] = (uint8_t)(2 * ((qh >> 12) & 7) + 1);
    }
}

/* The fp16 super-block scale of IQ1_M, spread over the top nibbles of the
 * four 16-bit scale words (word k holds bits 4k..4k+3). */
static float iq1_m_scale(const block_iq1_m *b) {
    uint32_t bits = 0;
    for (int k = 0; k < 4; k++)
        bits |= (ld_u16(b->scales + 2 * k) >> 12) << (4 * k);
    return qt_f16_to_f32((pt_f16)bits);
}

/* IQ1_M: per 8 weights a qs byte plus a qh nibble (3 index bits, then the
 * shift sign in bit 3); per 16 weights a 3-bit scale, four to a 16-bit word
 * (word ib/2, bits 6*(ib%2) .. +5 for sub-block ib). */
static void unpack_iq1_m(const void *blk, iq_unpacked *u) {
    const block_iq1_m *b = blk;
    u->d = iq1_m_scale(b);
    for (int g = 0; g < QK_K / 8; g++) {
        uint32_t nib = (b->qh[g / 2] >> (4 * (g % 2))) & 0xf;
        uint32_t idx = b->qs[g] | (nib & 7) << 8;
        for (int j = 0; j < 8; j++)
            u->q[8 * g + j] = (int8_t)grid_sbyte(iq1s_grid[idx], j);
        u->dsign[g] = (int8_t)(nib & 8 ? -1 : 1);
    }
    for (int ib = 0; ib < QK_K / 32; ib++) {
        uint32_t sc = ld_u16(b->scales + 2 * (ib / 2)) >> (6 * (ib % 2));
        u->ls[2 * ib] = (uint8_t)(2 * (sc & 7) + 1);
        u->ls[2 * ib + 1] = (uint8_t)(2 * ((sc >> 3) & 7) + 1);
    }
}

/* ===== Lattice family (IQ2_*, IQ3_*): w = d * ls * post * q ===== */

typedef void (*unpack_fn)(const void *blk, iq_unpacked *u);

typedef struct {
    unpack_fn unpack;
    size_t bytes; /* bytes per super-block */
    float post;   /* constant factor: 1/8 for IQ2_*, 1/4 for IQ3_XXS, 1 for IQ3_S */
} lattice_type;

static void lattice_dequant(const lattice_type *t, const uint8_t *src, float *dst, int64_t nb) {
    iq_unpacked u;
    for (int64_t i = 0; i < nb; i++, src += t->bytes, dst += QK_K) {
        t->unpack(src, &u);
        for (int k = 0; k < 16; k++) {
            const float db = u.d * (float)u.ls[k] * t->post;
            for (int j = 0; j < 16; j++)
                dst[16 * k + j] = db * (float)u.q[16 * k + j];
        }
    }
}

static float lattice_dot(const lattice_type *t, const uint8_t *w, const block_q8_K *a, int64_t nb) {
    iq_unpacked u;
    float sumf = 0.0f;
    for (int64_t i = 0; i < nb; i++, w += t->bytes) {
        t->unpack(w, &u);
        int32_t bsum = 0;
        for (int k = 0; k < 16; k++) {
            int32_t s = 0;
            for (int j = 0; j < 16; j++)
                s += u.q[16 * k + j] * a[i].qs[16 * k + j];
            bsum += s * u.ls[k];
        }
        sumf += u.d * a[i].d * (float)bsum;
    }
    return t->post * sumf;
}

/* ===== IQ1 family: w = d * ls * (q ± 1/8) ===== */

#define IQ1_DELTA 0.125f /* ggml's IQ1S_DELTA == IQ1M_DELTA */

static void iq1_dequant(unpack_fn unpack, size_t bytes, const uint8_t *src, float *dst,
                        int64_t nb) {
    iq_unpacked u;
    for (int64_t i = 0; i < nb; i++, src += bytes, dst += QK_K) {
        unpack(src, &u);
        for (int g = 0; g < QK_K / 8; g++) {
            const float dl = u.d * (float)u.ls[g / 2];
            const float delta = u.dsign[g] < 0 ? -IQ1_DELTA : IQ1_DELTA;
            for (int j = 0; j < 8; j++)
                dst[8 * g + j] = dl * ((float)u.q[8 * g + j] + delta);
        }
    }
}

/* IQ1_S takes the activation sums of the shift term from the Q8_K bsums (its
 * shift sign is constant over 32 weights); IQ1_M sums the activations per 8
 * itself. Both are what ggml's generic code does. */
static float iq1_dot(unpack_fn unpack, size_t bytes, int use_bsums, const uint8_t *w,
                     const block_q8_K *a, int64_t nb) {
    iq_unpacked u;
    float sumf = 0.0f;
    for (int64_t i = 0; i < nb; i++, w += bytes) {
        unpack(w, &u);
        const int8_t *q8 = a[i].qs;
        int32_t sumi = 0, sumi_delta = 0;
        for (int k = 0; k < 16; k++) {
            int32_t s = 0, sd = 0;
            for (int j = 0; j < 16; j++)
                s += u.q[16 * k + j] * q8[16 * k + j];
            if (use_bsums) {
                sd = u.dsign[2 * k] * a[i].bsums[k];
            } else {
                for (int h = 0; h < 2; h++) {
                    int32_t s8 = 0;
                    for (int j = 0; j < 8; j++)
                        s8 += q8[16 * k + 8 * h + j];
                    sd += u.dsign[2 * k + h] * s8;
                }
            }
            sumi += u.ls[k] * s;
            sumi_delta += u.ls[k] * sd;
        }
        sumf += u.d * a[i].d * ((float)sumi + IQ1_DELTA * (float)sumi_delta);
    }
    return sumf;
}

/* ===== IQ4_XS: 6-bit signed scale per 32 weights, non-linear 4-bit values ===== */

/* Scale of sub-block ib: 4 low bits from scales_l, 2 high bits from scales_h,
 * stored with an offset of 32. */
static int iq4_xs_scale(const block_iq4_xs *b, int ib) {
    int lo = (b->scales_l[ib / 2] >> (4 * (ib % 2))) & 0xf;
    int hi = (b->scales_h >> (2 * ib)) & 3;
    return (lo | hi << 4) - 32;
}

static void iq4_xs_dequant(const block_iq4_xs *b, float *dst, int64_t nb) {
    for (int64_t i = 0; i < nb; i++, b++) {
        const float d = qt_f16_to_f32(b->d);
        for (int ib = 0; ib < QK_K / 32; ib++, dst += 32) {
            const float dl = d * (float)iq4_xs_scale(b, ib);
            const uint8_t *qs = b->qs + 16 * ib;
            for (int j = 0; j < 16; j++) {
                dst[j] = dl * (float)kvalues_iq4nl[qs[j] & 0xf];
                dst[j + 16] = dl * (float)kvalues_iq4nl[qs[j] >> 4];
            }
        }
    }
}

static float iq4_xs_dot(const block_iq4_xs *b, const block_q8_K *a, int64_t nb) {
    float sumf = 0.0f;
    for (int64_t i = 0; i < nb; i++) {
        const float d4d8 = qt_f16_to_f32(b[i].d) * a[i].d;
        for (int ib = 0; ib < QK_K / 32; ib++) {
            const uint8_t *qs = b[i].qs + 16 * ib;
            const int8_t *q8 = a[i].qs + 32 * ib;
            int32_t s = 0;
            for (int j = 0; j < 16; j++)
                s += q8[j] * kvalues_iq4nl[qs[j] & 0xf] + q8[j + 16] * kvalues_iq4nl[qs[j] >> 4];
            sumf += d4d8 * (float)iq4_xs_scale(&b[i], ib) * (float)s;
        }
    }
    return sumf;
}

/* ===== 32-weight non-linear types: IQ4_NL and MXFP4 ===== */

/* Both are a scale and 16 bytes of nibbles indexing a 16-entry int8 table
 * (low nibble: weight j, high nibble: weight j+16); they differ only in how
 * the scale is stored. */
static void nl32_dequant(const int8_t *table, float d, const uint8_t *qs, float *dst) {
    for (int j = 0; j < 16; j++) {
        dst[j] = d * (float)table[qs[j] & 0xf];
        dst[j + 16] = d * (float)table[qs[j] >> 4];
    }
}

static int32_t nl32_dot(const int8_t *table, const uint8_t *qs, const int8_t *q8) {
    int32_t s = 0;
    for (int j = 0; j < 16; j++)
        s += q8[j] * table[qs[j] & 0xf] + q8[j + 16] * table[qs[j] >> 4];
    return s;
}

/* ===== Public entry points (see quant_impl.h) ===== */

static const lattice_type *lattice_for(uint32_t type) {
    static const lattice_type iq2_xxs = {unpack_iq2_xxs, sizeof(block_iq2_xxs), 0.125f};
    static const lattice_type iq2_xs = {unpack_iq2_xs, sizeof(block_iq2_xs), 0.125f};
    static const lattice_type iq2_s = {unpack_iq2_s, sizeof(block_iq2_s), 0.125f};
    static const lattice_type iq3_xxs = {unpack_iq3_xxs, sizeof(block_iq3_xxs), 0.25f};
    static const lattice_type iq3_s = {unpack_iq3_s, sizeof(block_iq3_s), 1.0f};
    switch (type) {
    case QT_IQ2_XXS: return &iq2_xxs;
    case QT_IQ2_XS: return &iq2_xs;
    case QT_IQ2_S: return &iq2_s;
    case QT_IQ3_XXS: return &iq3_xxs;
    case QT_IQ3_S: return &iq3_s;
    default: return NULL;
    }
}

int iq_handles(uint32_t type) {
    switch (type) {
    case QT_IQ2_XXS:
    case QT_IQ2_XS:
    case QT_IQ2_S:
    case QT_IQ3_XXS:
    case QT_IQ3_S:
    case QT_IQ1_S:
    case QT_IQ1_M:
    case QT_IQ4_NL:
    case QT_IQ4_XS:
    case QT_MXFP4: return 1;
    default: return 0;
    }
}

/* n must be a whole number of blocks (callers validate once at bind time);
 * an unhandled type decodes to zeros rather than reading src. */
void iq_dequant(uint32_t type, const void *src, float *dst, int64_t n) {
    const lattice_type *lt = lattice_for(type);
    if (lt) {
        lattice_dequant(lt, src, dst, n / QK_K);
        return;
    }
    switch (type) {
    case QT_IQ1_S: iq1_dequant(unpack_iq1_s, sizeof(block_iq1_s), src, dst, n / QK_K); return;
    case QT_IQ1_M: iq1_dequant(unpack_iq1_m, sizeof(block_iq1_m), src, dst, n / QK_K); return;
    case QT_IQ4_XS: iq4_xs_dequant(src, dst, n / QK_K); return;
    case QT_IQ4_NL: {
        const block_iq4_nl *b = src;
        for (int64_t i = 0; i < n / QK4_NL; i++)
            nl32_dequant(kvalues_iq4nl, qt_f16_to_f32(b[i].d), b[i].qs, dst + QK4_NL * i);
        return;
    }
    case QT_MXFP4: {
        const block_mxfp4 *b = src;
        for (int64_t i = 0; i < n / QK_MXFP4; i++)
            nl32_dequant(kvalues_mxfp4, qt_e8m0_half(b[i].e), b[i].qs, dst + QK_MXFP4 * i);
        return;
    }
    default: memset(dst, 0, (size_t)n * sizeof *dst); return;
    }
}

/* Panel order (see quant_impl.h): per 256-weight block the exact integer
 * sum(iscale * q * y), then acc = fma((float)isum, dfac * d8, acc), where
 * dfac is the block scale with the type's constant factor folded in. Only the
 * block scale product and one fma per block round, so this is also the most
 * accurate order. */
static float iq4_xs_dot_panel(const block_iq4_xs *b, const block_q8_K *a, int64_t nb) {
    float sumf = 0.0f;
    for (int64_t i = 0; i < nb; i++) {
        int32_t isum = 0;
        for (int ib = 0; ib < QK_K / 32; ib++)
            isum += iq4_xs_scale(&b[i], ib) *
                    nl32_dot(kvalues_iq4nl, b[i].qs + 16 * ib, a[i].qs + 32 * ib);
        sumf = fmaf((float)isum, qt_f16_to_f32(b[i].d) * a[i].d, sumf);
    }
    return sumf;
}

static float lattice_dot_panel(const lattice_type *t, const uint8_t *w, const block_q8_K *a,
                               int64_t nb) {
    iq_unpacked u;
    float sumf = 0.0f;
    for (int64_t i = 0; i < nb; i++, w += t->bytes) {
        t->unpack(w, &u);
        int32_t isum = 0;
        for (int k = 0; k < 16; k++) {
            int32_t s = 0;
            for (int j = 0; j < 16; j++)
                s += u.q[16 * k + j] * a[i].qs[16 * k + j];
            isum += s * u.ls[k];
        }
        sumf = fmaf((float)isum, (u.d * t->post) * a[i].d, sumf);
    }
    return sumf;
}

/* IQ1: the weights are d/8 * ls * (8q ± 1), so the whole block is one integer
 * 8 * sum(ls q y) + sum(ls ± y) against d/8. Integer sums are exact in any
 * order, so IQ1_S (one delta sign per 16 weights) takes its sum(± y) from the
 * Q8_K block sums, as the single-row dot does. */
static float iq1_dot_panel(unpack_fn unpack, size_t bytes, int use_bsums, const uint8_t *w,
                           const block_q8_K *a, int64_t nb) {
    iq_unpacked u;
    float sumf = 0.0f;
    for (int64_t i = 0; i < nb; i++, w += bytes) {
        unpack(w, &u);
        const int8_t *q8 = a[i].qs;
        int32_t isum = 0;
        for (int k = 0; k < 16; k++) {
            int32_t sq = 0, sd = 0;
            for (int j = 0; j < 16; j++)
                sq += u.q[16 * k + j] * q8[16 * k + j];
            if (use_bsums) {
                sd = u.dsign[2 * k] * a[i].bsums[k];
            } else {
                for (int h = 0; h < 2; h++) {
                    int32_t s8 = 0;
                    for (int j = 0; j < 8; j++)
                        s8 += q8[16 * k + 8 * h + j];
                    sd += u.dsign[2 * k + h] * s8;
                }
            }
            isum += u.ls[k] * (8 * sq + sd);
        }
        sumf = fmaf((float)isum, (u.d * IQ1_DELTA) * a[i].d, sumf);
    }
    return sumf;
}

int iq_has_panel(uint32_t type) {
    switch (type) {
    case QT_IQ2_XXS:
    case QT_IQ2_XS:
    case QT_IQ2_S:
    case QT_IQ3_XXS:
    case QT_IQ3_S:
    case QT_IQ1_S:
    case QT_IQ1_M:
    case QT_IQ4_XS: return 1;
    default: return 0;
    }
}

float iq_dot_panel(uint32_t type, const void *w, const void *a, int64_t n) {
    const lattice_type *lt = lattice_for(type);
    if (lt) return lattice_dot_panel(lt, w, a, n / QK_K);
    switch (type) {
    case QT_IQ1_S: return iq1_dot_panel(unpack_iq1_s, sizeof(block_iq1_s), 1, w, a, n / QK_K);
    case QT_IQ1_M: return iq1_dot_panel(unpack_iq1_m, sizeof(block_iq1_m), 0, w, a, n / QK_K);
    case QT_IQ4_XS: return iq4_xs_dot_panel(w, a, n / QK_K);
    default: return 0.0f;
    }
}

/* `a` holds the activations in the type's act_type: Q8_K blocks for the
 * 256-weight types, Q8_0 blocks for IQ4_NL and MXFP4. Unhandled types give 0. */
float iq_dot(uint32_t type, const void *w, const void *a, int64_t n) {
    const lattice_type *lt = lattice_for(type);
    if (lt) return lattice_dot(lt, w, a, n / QK_K);
    switch (type) {
    case QT_IQ1_S: return iq1_dot(unpack_iq1_s, sizeof(block_iq1_s), 1, w, a, n / QK_K);
    case QT_IQ1_M: return iq1_dot(unpack_iq1_m, sizeof(block_iq1_m), 0, w, a, n / QK_K);
    case QT_IQ4_XS: return iq4_xs_dot(w, a, n / QK_K);
    case QT_IQ4_NL: {
        const block_iq4_nl *b = w;
        const block_q8_0 *y = a;
        float sumf = 0.0f;
        for (int64_t i = 0; i < n / QK4_NL; i++) {
            const float d = qt_f16_to_f32(y[i].d) * qt_f16_to_f32(b[i].d);
            sumf += d * (float)nl32_dot(kvalues_iq4nl, b[i].qs, y[i].qs);
        }
        return sumf;
    }
    case QT_MXFP4: {
        const block_mxfp4 *b = w;
        const block_q8_0 *y = a;
        float sumf = 0.0f;
        for (int64_t i = 0; i < n / QK_MXFP4; i++) {
            const float d = qt_f16_to_f32(y[i].d) * qt_e8m0_half(b[i].e);
            sumf += d * (float)nl32_dot(kvalues_mxfp4, b[i].qs, y[i].qs);
        }
        return sumf;
    }
    default: return 0.0f;
    }
}
