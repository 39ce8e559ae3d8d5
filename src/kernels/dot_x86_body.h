/* dot_x86_body.h — 256-bit x86 dot-product kernels shared by dot_avx2.c and
 * dot_avx512.c.
 *
 * Included only by those two files, which are compiled with their own ISA
 * flags (see the Makefile); nothing else may include it. Before including it
 * the file defines two static inline accumulate primitives, the only place
 * where the two ISA levels differ:
 *
 *   dot_u8s8(acc, u, s)   acc[i] += sum of 4 products u8*s8 (lanes 4i..4i+3)
 *   dot_i16(acc, a, b)    acc[i] += a[2i]*b[2i] + a[2i+1]*b[2i+1]  (int16 -> int32)
 *
 * AVX2 builds them from vpmaddubsw/vpmaddwd/vpaddd; AVX-512 uses the VNNI
 * instructions vpdpbusd/vpdpwssd, which fuse the add (and never saturate).
 *
 * Exactness. Every kernel computes the integer part of each block exactly in
 * int32 lanes and only then converts to float, as the scalar reference does,
 * so results differ from qt_dot_ref only by float rounding (summation order).
 * vpmaddubsw saturates int16 pair sums; each use below keeps |u*s| pairs
 * under 32767: the unsigned operand is at most 63 (K-quants), 43 (IQ2 grid) or
 * 128 (|int8| via the sign trick) while activations produced by
 * qt_quantize_act_ref lie in [-127, 127].
 *
 * Layout facts used here are those of qtypes.h; the comments at each kernel
 * say which weight each lane holds.
 */
#ifndef PT_DOT_X86_BODY_H
#define PT_DOT_X86_BODY_H

#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "kernels/quant.h"
#include "kernels/quant_impl.h"

/* ===== Helpers ===== */

static inline float hsum_ps(__m256 v) {
    __m128 x = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    x = _mm_add_ps(x, _mm_movehl_ps(x, x));
    x = _mm_add_ss(x, _mm_movehdup_ps(x));
    return _mm_cvtss_f32(x);
}

static inline float f16(pt_f16 h) {
    return _cvtsh_ss(h);
}

/* An fp16 scale as 8 equal floats, converted in the vector unit: with both
 * factors of a scale product as vectors the product is one vmulps (the
 * compiler turns a product of two _mm256_set1_ps into a scalar multiply and a
 * broadcast, after two scalar conversions). The same product either way. */
static inline __m256 f16x8(pt_f16 h) {
    return _mm256_cvtph_ps(_mm_set1_epi16((short)h));
}

static inline __m256i loadu256(const void *p) {
    return _mm256_loadu_si256((const __m256i *)p);
}
static inline __m128i loadu128(const void *p) {
    return _mm_loadu_si128((const __m128i *)p);
}

/* Signed int8 x int8: |x| as unsigned bytes, y with x's sign moved onto it. */
static inline __m256i dot_s8s8(__m256i acc, __m256i x, __m256i y) {
    return dot_u8s8(acc, _mm256_sign_epi8(x, x), _mm256_sign_epi8(y, x));
}

/* 32 bits -> 32 bytes: byte k is 0xFF when bit k is set, else 0. */
static inline __m256i bits_to_bytes(uint32_t bits) {
    const __m256i shuf =
        _mm256_setr_epi64x(0, 0x0101010101010101, 0x0202020202020202, 0x0303030303030303);
    const __m256i bit = _mm256_set1_epi64x((int64_t)0x8040201008040201);
    __m256i v = _mm256_shuffle_epi8(_mm256_set1_epi32((int)bits), shuf);
    return _mm256_cmpeq_epi8(_mm256_and_si256(v, bit), bit);
}

/* 16 nibbles-bytes -> 32 bytes: low nibbles (weights 0..15), then high (16..31). At the
 * AVX-512 level the bytes are loaded into both halves and only the high half's 16-bit lanes
 * shifted (a masked shift): two operations instead of four. */
static inline __m256i nibbles32(const uint8_t *qs) {
#if defined(X86_BODY_TILES)
    const __m256i q = _mm256_broadcastsi128_si256(loadu128(qs));
    return _mm256_and_si256(_mm256_mask_srli_epi16(q, 0xFF00, q, 4), _mm256_set1_epi8(0x0f));
#else
    const __m128i m4 = _mm_set1_epi8(0x0f);
    __m128i q = loadu128(qs);
    return _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(q, 4), m4), _mm_and_si128(q, m4));
#endif
}

/* Per-group scales of a 256-weight block as int16 vpshufb sources: the 16
 * scale bytes sign- or zero-extended, groups 0..7 broadcast to both 128-bit
 * lanes in *lo and groups 8..15 in *hi. */
static inline void scales16_s8(__m128i sc, __m256i *lo, __m256i *hi) {
    *lo = _mm256_broadcastsi128_si256(_mm_cvtepi8_epi16(sc));
    *hi = _mm256_broadcastsi128_si256(_mm_cvtepi8_epi16(_mm_unpackhi_epi64(sc, sc)));
}
static inline void scales16_u8(__m128i sc, __m256i *lo, __m256i *hi) {
    *lo = _mm256_broadcastsi128_si256(_mm_cvtepu8_epi16(sc));
    *hi = _mm256_broadcastsi128_si256(_mm_cvtepu8_epi16(_mm_unpackhi_epi64(sc, sc)));
}

/* The int16 scales [s[2m] x8, s[2m+1] x8] of 32-weight chunk m (vpmaddubsw
 * lanes 0..7 hold weights 0..15 of the chunk, lanes 8..15 weights 16..31)
 * from the half returned by scales16_*: lo for m < 4, hi for m >= 4. */
static inline __m256i chunk_scales(__m256i half, int m) {
    const int k = 4 * (m & 3);
    const __m256i sel = _mm256_set_m128i(_mm_set1_epi16((short)((k + 3) << 8 | (k + 2))),
                                         _mm_set1_epi16((short)((k + 1) << 8 | k)));
    return _mm256_shuffle_epi8(half, sel);
}

/* Logical right shift of every byte by a run-time count (bits crossing into a
 * byte from its neighbour are masked off by the callers). */
static inline __m256i srl16(__m256i v, int k) {
    return _mm256_srl_epi16(v, _mm_cvtsi32_si128(k));
}

/* ===== Float types ===== */

/* F32 rows: ggml_vec_dot_f32's order for one activation row (f32_dot_ggml
 * below), tinyBLAS's 16-lane order for a batch (f32_panel16); both are the
 * reference's bits (quant_ref.c). */
static float f32_dot_ggml(const float *x, const float *y, int64_t n);

static float dot_f32(const void *w, const void *a, int64_t n) {
    return f32_dot_ggml(w, a, n);
}

/* 16 lanes as two 8-float vectors: fold 16 -> 8 adds them, then 8 -> 1 */
static float f32_panel16(const void *w, const void *a, int64_t n) {
    const float *x = w, *y = a;
    __m256 s0 = _mm256_setzero_ps(), s1 = s0;
    const int64_t np = n & ~(int64_t)15;
    for (int64_t i = 0; i < np; i += 16) {
        s0 = _mm256_fmadd_ps(_mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i), s0);
        s1 = _mm256_fmadd_ps(_mm256_loadu_ps(x + i + 8), _mm256_loadu_ps(y + i + 8), s1);
    }
    const __m256 s = _mm256_add_ps(s0, s1);
    __m128 v = _mm_add_ps(_mm256_castps256_ps128(s), _mm256_extractf128_ps(s, 1));
    v = _mm_add_ps(v, _mm_movehl_ps(v, v));
    v = _mm_add_ss(v, _mm_shuffle_ps(v, v, 1));
    float sum = _mm_cvtss_f32(v);
    for (int64_t i = np; i < n; i++)
        sum += x[i] * y[i];
    return sum;
}

static inline __m256 load_f16x8(const pt_f16 *p) {
    return _mm256_cvtph_ps(loadu128(p));
}

static float dot_f16(const void *w, const void *a, int64_t n) {
    const pt_f16 *x = w, *y = a;
    __m256 s0 = _mm256_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) {
        s0 = _mm256_fmadd_ps(load_f16x8(x + i), load_f16x8(y + i), s0);
        s1 = _mm256_fmadd_ps(load_f16x8(x + i + 8), load_f16x8(y + i + 8), s1);
        s2 = _mm256_fmadd_ps(load_f16x8(x + i + 16), load_f16x8(y + i + 16), s2);
        s3 = _mm256_fmadd_ps(load_f16x8(x + i + 24), load_f16x8(y + i + 24), s3);
    }
    for (; i + 8 <= n; i += 8)
        s0 = _mm256_fmadd_ps(load_f16x8(x + i), load_f16x8(y + i), s0);
    float sum = hsum_ps(_mm256_add_ps(_mm256_add_ps(s0, s1), _mm256_add_ps(s2, s3)));
    for (; i < n; i++)
        sum += f16(x[i]) * f16(y[i]);
    return sum;
}

/* dot_f16(w, q0) and dot_f16(w, q1) with the queries given as floats (fp16
 * values decoded, so every product is dot_f16's) and each row vector
 * converted once for both: the attention scores of two heads over one fp16
 * key row. Each output keeps dot_f16's accumulators and order. The AVX-512
 * level has its own on 512-bit vectors (dot_avx512.c). */
#if !defined(X86_BODY_TILES)
static void dot_f16_q2(const void *w, const float *q0, const float *q1, int64_t n, float *out) {
    const pt_f16 *x = w;
    __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0, b0 = a0, b1 = a0, b2 = a0, b3 = a0;
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) { /* named accumulators: they stay in registers */
        const __m256 k0 = load_f16x8(x + i), k1 = load_f16x8(x + i + 8),
                     k2 = load_f16x8(x + i + 16), k3 = load_f16x8(x + i + 24);
        a0 = _mm256_fmadd_ps(k0, _mm256_loadu_ps(q0 + i), a0);
        b0 = _mm256_fmadd_ps(k0, _mm256_loadu_ps(q1 + i), b0);
        a1 = _mm256_fmadd_ps(k1, _mm256_loadu_ps(q0 + i + 8), a1);
        b1 = _mm256_fmadd_ps(k1, _mm256_loadu_ps(q1 + i + 8), b1);
        a2 = _mm256_fmadd_ps(k2, _mm256_loadu_ps(q0 + i + 16), a2);
        b2 = _mm256_fmadd_ps(k2, _mm256_loadu_ps(q1 + i + 16), b2);
        a3 = _mm256_fmadd_ps(k3, _mm256_loadu_ps(q0 + i + 24), a3);
        b3 = _mm256_fmadd_ps(k3, _mm256_loadu_ps(q1 + i + 24), b3);
    }
    for (; i + 8 <= n; i += 8) {
        const __m256 k = load_f16x8(x + i);
        a0 = _mm256_fmadd_ps(k, _mm256_loadu_ps(q0 + i), a0);
        b0 = _mm256_fmadd_ps(k, _mm256_loadu_ps(q1 + i), b0);
    }
    float s0 = hsum_ps(_mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)));
    float s1 = hsum_ps(_mm256_add_ps(_mm256_add_ps(b0, b1), _mm256_add_ps(b2, b3)));
    for (; i < n; i++) {
        s0 += f16(x[i]) * q0[i];
        s1 += f16(x[i]) * q1[i];
    }
    out[0] = s0, out[1] = s1;
}
#endif

/* ===== 32-weight blocks against Q8_0 activations ===== */

/* The legacy kernels below share one shape: per block, 32 signed weight bytes
 * `wv` (lane j = weight j) and a float scale; two accumulators hide the FMA
 * latency when the data is in cache. */
#define LEGACY_LOOP(XT, DECODE, SCALE)                                                             \
    const XT *x = w;                                                                               \
    const block_q8_0 *y = a;                                                                       \
    const int64_t nb = n / 32;                                                                     \
    __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();                                 \
    int64_t i = 0;                                                                                 \
    for (; i + 2 <= nb; i += 2) {                                                                  \
        for (int u = 0; u < 2; u++) {                                                              \
            const XT *xb = &x[i + u];                                                              \
            __m256i wv = DECODE;                                                                   \
            __m256i p = dot_s8s8(_mm256_setzero_si256(), wv, loadu256(y[i + u].qs));               \
            __m256 d = _mm256_set1_ps((SCALE)*f16(y[i + u].d));                                    \
            if (u == 0)                                                                            \
                acc0 = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(p), acc0);                            \
            else                                                                                   \
                acc1 = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(p), acc1);                            \
        }                                                                                          \
    }                                                                                              \
    for (; i < nb; i++) {                                                                          \
        const XT *xb = &x[i];                                                                      \
        __m256i wv = DECODE;                                                                       \
        __m256i p = dot_s8s8(_mm256_setzero_si256(), wv, loadu256(y[i].qs));                       \
        __m256 d = _mm256_set1_ps((SCALE)*f16(y[i].d));                                            \
        acc0 = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(p), acc0);                                    \
    }                                                                                              \
    return hsum_ps(_mm256_add_ps(acc0, acc1));

/* One accumulator, blocks in order: llama.cpp's order for Q8_0 and Q4_0, and
 * for IQ4_NL in its batched (tinyBLAS) path, see qt_dot_panel_ref. SCALE8: the
 * block's weight scale as 8 equal floats (f16x8). */
#define LEGACY_LOOP1(XT, DECODE, SCALE8)                                                           \
    const XT *x = w;                                                                               \
    const block_q8_0 *y = a;                                                                       \
    __m256 acc = _mm256_setzero_ps();                                                              \
    for (int64_t i = 0; i < n / 32; i++) {                                                         \
        const XT *xb = &x[i];                                                                      \
        __m256i p = dot_s8s8(_mm256_setzero_si256(), DECODE, loadu256(y[i].qs));                   \
        acc = _mm256_fmadd_ps(_mm256_mul_ps(SCALE8, f16x8(y[i].d)), _mm256_cvtepi32_ps(p), acc);   \
    }                                                                                              \
    return hsum_ps(acc);

/* Q8_0, Q4_0 and Q5_0 use one accumulator: llama.cpp's x86 vec_dot and its
 * batched tinyBLAS path both do, so this order matches it for any row count
 * (two chains would differ from it in the last bit, enough to flip a later
 * activation rounding). */
static float dot_q8_0(const void *w, const void *a, int64_t n) {
    LEGACY_LOOP1(block_q8_0, loadu256(xb->qs), f16x8(xb->d))
}

/* Q4_0: weight = nibble - 8. */
static inline __m256i decode_q4_0(const block_q4_0 *b) {
    return _mm256_sub_epi8(nibbles32(b->qs), _mm256_set1_epi8(8));
}
static float dot_q4_0(const void *w, const void *a, int64_t n) {
    LEGACY_LOOP1(block_q4_0, decode_q4_0(xb), f16x8(xb->d))
}

/* Q5_0: weight = (nibble | bit << 4) - 16, bit j of qh for weight j. As a
 * byte that is nibble | 0xF0 when the bit is clear and nibble when set. */
static inline __m256i decode_q5_0(const block_q5_0 *b) {
    uint32_t qh;
    memcpy(&qh, b->qh, 4);
#if defined(X86_BODY_TILES)
    /* the bits as a byte mask (AVX-512BW): nibble where set, nibble | 0xF0 where clear */
    const __m256i nib = nibbles32(b->qs);
    return _mm256_mask_blend_epi8((__mmask32)qh, _mm256_or_si256(nib, _mm256_set1_epi8((char)0xF0)),
                                  nib);
#else
    return _mm256_or_si256(nibbles32(b->qs),
                           _mm256_andnot_si256(bits_to_bytes(qh), _mm256_set1_epi8((char)0xF0)));
#endif
}
static float dot_q5_0(const void *w, const void *a, int64_t n) {
    LEGACY_LOOP1(block_q5_0, decode_q5_0(xb), f16x8(xb->d))
}

/* IQ4_NL / MXFP4: nibble -> int8 through a 16-entry table (vpshufb). */
static inline __m256i table16(const int8_t *t) {
    return _mm256_broadcastsi128_si256(loadu128(t));
}
static float dot_iq4_nl(const void *w, const void *a, int64_t n) {
    const __m256i tab = table16(kvalues_iq4nl);
    LEGACY_LOOP(block_iq4_nl, _mm256_shuffle_epi8(tab, nibbles32(xb->qs)), f16(xb->d))
}

static float dot_mxfp4(const void *w, const void *a, int64_t n) {
    const __m256i tab = table16(kvalues_mxfp4);
    LEGACY_LOOP(block_mxfp4, _mm256_shuffle_epi8(tab, nibbles32(xb->qs)), qt_e8m0_half(xb->e))
}

/* ===== K-quants against Q8_K activations ===== */

/* Q2_K. Weight 128h + 32j + l (h = 0,1; j = 0..3; l = 0..31) is bits 2j..2j+1
 * of qs[32h + l]; its 16-weight group g = 8h + 2j + l/16 has scale
 * scales[g] & 15 and min scales[g] >> 4: w = d*sc*q - dmin*min. */
/* Chunk j (weights 32j..32j+31 of a 128-weight half): 2-bit values of q at
 * bits 2j, times activations, times the chunk's two group scales. */
static inline __m256i q2k_chunk(__m256i sumi, __m256i q, const int8_t *q8, __m256i half, int j) {
    const __m256i v = _mm256_and_si256(srl16(q, 2 * j), _mm256_set1_epi8(3));
    return dot_i16(sumi, _mm256_maddubs_epi16(v, loadu256(q8 + 32 * j)), chunk_scales(half, j));
}

static float dot_q2_K(const void *w, const void *a, int64_t n) {
    const block_q2_K *x = w;
    const block_q8_K *y = a;
    const int64_t nb = n / QK_K;
    const __m128i m4 = _mm_set1_epi8(0x0f);
    __m256 acc = _mm256_setzero_ps();
    for (int64_t i = 0; i < nb; i++) {
        const __m128i raw = loadu128(x[i].scales);
        const __m128i sc = _mm_and_si128(raw, m4);
        const __m128i mn = _mm_and_si128(_mm_srli_epi16(raw, 4), m4);
        const __m256i pm = _mm256_madd_epi16(_mm256_cvtepu8_epi16(mn), loadu256(y[i].bsums));
        acc =
            _mm256_fmadd_ps(_mm256_set1_ps(-y[i].d * f16(x[i].dmin)), _mm256_cvtepi32_ps(pm), acc);
        __m256i lo, hi;
        scales16_u8(sc, &lo, &hi);
        const __m256i q0 = loadu256(x[i].qs), q1 = loadu256(x[i].qs + 32);
        const int8_t *q8 = y[i].qs;
        /* unrolled by hand so that shift counts and shuffle masks are constants */
        __m256i sumi = q2k_chunk(_mm256_setzero_si256(), q0, q8, lo, 0);
        sumi = q2k_chunk(sumi, q0, q8, lo, 1);
        sumi = q2k_chunk(sumi, q0, q8, lo, 2);
        sumi = q2k_chunk(sumi, q0, q8, lo, 3);
        sumi = q2k_chunk(sumi, q1, q8 + 128, hi, 0);
        sumi = q2k_chunk(sumi, q1, q8 + 128, hi, 1);
        sumi = q2k_chunk(sumi, q1, q8 + 128, hi, 2);
        sumi = q2k_chunk(sumi, q1, q8 + 128, hi, 3);
        acc = _mm256_fmadd_ps(_mm256_set1_ps(y[i].d * f16(x[i].d)), _mm256_cvtepi32_ps(sumi), acc);
    }
    return hsum_ps(acc);
}

/* Q3_K. Low 2 bits as Q2_K; the third bit of weight 128h + 32j + l is bit
 * 4h + j of hmask[l]; w = d * (sc - 32) * (q3 - 4), with the 16 6-bit scales
 * packed as: low nibbles in scales[0..7] (groups 0..7 low, 8..15 high nibble),
 * high 2 bits in scales[8..11] (group g: byte 8 + g%4, bits 2*(g/4)).
 * The "- 4" of a clear third bit is applied per weight, as ggml's x86 kernel
 * does: the int16 pair sums are low2 * q8 minus (4 where the bit is clear) *
 * q8. Taking it once per block from the Q8_K group sums instead gives the same
 * block total but other int32 lane totals, hence other float roundings when
 * the lanes are scaled by d (the Q3_K_M references drifted by 1.0 from it). */
static inline __m128i q3k_scales(const uint8_t *s) {
    uint32_t a0, a1, a2, r[4];
    memcpy(&a0, s, 4);
    memcpy(&a1, s + 4, 4);
    memcpy(&a2, s + 8, 4);
    r[0] = (a0 & 0x0f0f0f0f) | ((a2 & 0x03030303) << 4);
    r[1] = (a1 & 0x0f0f0f0f) | (((a2 >> 2) & 0x03030303) << 4);
    r[2] = ((a0 >> 4) & 0x0f0f0f0f) | (((a2 >> 4) & 0x03030303) << 4);
    r[3] = ((a1 >> 4) & 0x0f0f0f0f) | (((a2 >> 6) & 0x03030303) << 4);
    return _mm_sub_epi8(loadu128(r), _mm_set1_epi8(32));
}

/* Chunk j of a half, chunk m of the block: the low 2 bits (0..3) and the
 * subtrahend (4 where bit m of the hmask byte is clear, else 0). */
static inline __m256i q3k_low(__m256i q, int j) {
    return _mm256_and_si256(srl16(q, 2 * j), _mm256_set1_epi8(3));
}
static inline __m256i q3k_sub(__m256i hm, int m) {
    return _mm256_slli_epi16(_mm256_andnot_si256(srl16(hm, m), _mm256_set1_epi8(1)), 2);
}
/* int16 pair sums of v * q8 with v = low - sub in -4..3, as |v| times q8 with
 * v's sign: the same sums as ggml's low * q8 - sub * q8 (|sum| <= 2 * 4 * 127,
 * no saturation either way), one vpmaddubsw instead of two */
static inline __m256i q3k_pairs(__m256i v, __m256i av, __m256i q8) {
    return _mm256_maddubs_epi16(av, _mm256_sign_epi8(q8, v));
}

static inline __m256i q3k_chunk(__m256i sumi, __m256i q, __m256i hm, const int8_t *q8, __m256i half,
                                int j, int m) {
    const __m256i v = _mm256_sub_epi8(q3k_low(q, j), q3k_sub(hm, m));
    const __m256i p = q3k_pairs(v, _mm256_abs_epi8(v), loadu256(q8 + 32 * j));
    return dot_i16(sumi, p, chunk_scales(half, j));
}

static float dot_q3_K(const void *w, const void *a, int64_t n) {
    const block_q3_K *x = w;
    const block_q8_K *y = a;
    const int64_t nb = n / QK_K;
    __m256 acc = _mm256_setzero_ps();
    for (int64_t i = 0; i < nb; i++) {
        const __m128i sc = q3k_scales(x[i].scales);
        const __m256i hm = loadu256(x[i].hmask);
        __m256i lo, hi;
        scales16_s8(sc, &lo, &hi);
        const __m256i q0 = loadu256(x[i].qs), q1 = loadu256(x[i].qs + 32);
        const int8_t *q8 = y[i].qs;
        __m256i sumi = q3k_chunk(_mm256_setzero_si256(), q0, hm, q8, lo, 0, 0);
        sumi = q3k_chunk(sumi, q0, hm, q8, lo, 1, 1);
        sumi = q3k_chunk(sumi, q0, hm, q8, lo, 2, 2);
        sumi = q3k_chunk(sumi, q0, hm, q8, lo, 3, 3);
        sumi = q3k_chunk(sumi, q1, hm, q8 + 128, hi, 0, 4);
        sumi = q3k_chunk(sumi, q1, hm, q8 + 128, hi, 1, 5);
        sumi = q3k_chunk(sumi, q1, hm, q8 + 128, hi, 2, 6);
        sumi = q3k_chunk(sumi, q1, hm, q8 + 128, hi, 3, 7);
        acc = _mm256_fmadd_ps(_mm256_set1_ps(y[i].d * f16(x[i].d)), _mm256_cvtepi32_ps(sumi), acc);
    }
    return hsum_ps(acc);
}

/* Q4_K / Q5_K scales: 8 6-bit scales and 8 6-bit mins in 12 bytes. Scale k < 4
 * is s[k] & 63, min k < 4 is s[k+4] & 63; for k >= 4 the low 4 bits come from
 * s[k+4] (scale: low nibble, min: high nibble) and the top 2 bits from the top
 * of s[k-4] (scale) or s[k] (min). Returns bytes 0..7 scales, 8..15 mins. */
static inline __m128i k4_scales_mins(const uint8_t *s) {
    uint32_t u0, u1, u2, r[4];
    memcpy(&u0, s, 4);
    memcpy(&u1, s + 4, 4);
    memcpy(&u2, s + 8, 4);
    r[0] = u0 & 0x3f3f3f3f;
    r[1] = (u2 & 0x0f0f0f0f) | (((u0 >> 6) & 0x03030303) << 4);
    r[2] = u1 & 0x3f3f3f3f;
    r[3] = ((u2 >> 4) & 0x0f0f0f0f) | (((u1 >> 6) & 0x03030303) << 4);
    return loadu128(r);
}

/* Mins term of Q4_K/Q5_K: sum_k min[k] * (bsum[2k] + bsum[2k+1]) in 8 lanes. */
/* The eight int32 lanes' sum (exact). */
static inline int32_t k5_isum(__m256i v) {
    int32_t l[8];
    _mm256_storeu_si256((__m256i *)l, v);
    return ((l[0] + l[1]) + (l[2] + l[3])) + ((l[4] + l[5]) + (l[6] + l[7]));
}

static inline __m256i k4_mins_dot(__m128i scmn, const int16_t *bsums) {
    const __m128i dup = _mm_setr_epi8(8, 8, 9, 9, 10, 10, 11, 11, 12, 12, 13, 13, 14, 14, 15, 15);
    return _mm256_madd_epi16(_mm256_cvtepu8_epi16(_mm_shuffle_epi8(scmn, dup)), loadu256(bsums));
}

/* Q4_K. Weight 64c + l (c = 0..3, l = 0..31) is the low nibble of qs[32c + l]
 * with scale/min k = 2c; weight 64c + 32 + l is its high nibble, k = 2c + 1.
 * w = d * sc[k] * q - dmin * min[k]. */
static float dot_q4_K(const void *w, const void *a, int64_t n) {
    const block_q4_K *x = w;
    const block_q8_K *y = a;
    const int64_t nb = n / QK_K;
    const __m256i m4 = _mm256_set1_epi8(0x0f);
    /* the min terms go to their own 4 lanes, as in ggml's AVX2 kernel: lane j
     * accumulates dmin * (min[2j] * s[2j] + min[2j+1] * s[2j+1]), s[k] the
     * activation sum over the 32 weights of sub-block k; the two accumulators
     * meet only at the end, so the float rounding is ggml's */
    __m256 acc = _mm256_setzero_ps();
    __m128 acc_m = _mm_setzero_ps();
    for (int64_t i = 0; i < nb; i++) {
        const __m128i scmn = k4_scales_mins(x[i].scales);
        const __m128i q8s = _mm_hadd_epi16(_mm_loadu_si128((const __m128i *)y[i].bsums),
                                           _mm_loadu_si128((const __m128i *)(y[i].bsums + 8)));
        const __m128i pm = _mm_madd_epi16(_mm_cvtepu8_epi16(_mm_srli_si128(scmn, 8)), q8s);
        acc_m = _mm_fmadd_ps(_mm_set1_ps(-y[i].d * f16(x[i].dmin)), _mm_cvtepi32_ps(pm), acc_m);
        /* the 8 scales as int16 in both lanes; vpshufb broadcasts scale k */
        const __m256i sc16 = _mm256_broadcastsi128_si256(_mm_cvtepu8_epi16(scmn));
        __m256i sumi = _mm256_setzero_si256();
#pragma GCC unroll 4
        for (int c = 0; c < 4; c++) {
            const __m256i q = loadu256(x[i].qs + 32 * c);
            const int8_t *q8 = y[i].qs + 64 * c;
            const __m256i s0 =
                _mm256_shuffle_epi8(sc16, _mm256_set1_epi16((short)((4 * c + 1) << 8 | 4 * c)));
            const __m256i s1 = _mm256_shuffle_epi8(
                sc16, _mm256_set1_epi16((short)((4 * c + 3) << 8 | (4 * c + 2))));
            const __m256i p0 = _mm256_maddubs_epi16(_mm256_and_si256(q, m4), loadu256(q8));
            const __m256i p1 = _mm256_maddubs_epi16(_mm256_and_si256(_mm256_srli_epi16(q, 4), m4),
                                                    loadu256(q8 + 32));
            sumi = dot_i16(sumi, p0, s0);
            sumi = dot_i16(sumi, p1, s1);
        }
        acc = _mm256_fmadd_ps(_mm256_set1_ps(y[i].d * f16(x[i].d)), _mm256_cvtepi32_ps(sumi), acc);
    }
    acc_m = _mm_add_ps(acc_m, _mm_movehl_ps(acc_m, acc_m));
    acc_m = _mm_add_ss(acc_m, _mm_movehdup_ps(acc_m));
    return hsum_ps(acc) + _mm_cvtss_f32(acc_m);
}

/* Q5_K. As Q4_K, plus a fifth bit: weight 64c + l takes bit 2c of qh[l],
 * weight 64c + 32 + l bit 2c + 1. */
static float dot_q5_K(const void *w, const void *a, int64_t n) {
    const block_q5_K *x = w;
    const block_q8_K *y = a;
    const int64_t nb = n / QK_K;
    const __m256i m4 = _mm256_set1_epi8(0x0f), b4 = _mm256_set1_epi8(0x10);
    __m256 acc = _mm256_setzero_ps();
    float summs = 0.0f;
    for (int64_t i = 0; i < nb; i++) {
        const __m128i scmn = k4_scales_mins(x[i].scales);
        /* the mins term as ggml's x86 Q5_K: one float, fused multiply-add of the
         * block's integer total (not in the vector lanes as Q4_K does) */
        const __m256i pm = k4_mins_dot(scmn, y[i].bsums);
        summs = fmaf(-y[i].d * f16(x[i].dmin), (float)k5_isum(pm), summs);
        const __m256i sc16 = _mm256_broadcastsi128_si256(_mm_cvtepu8_epi16(scmn));
        const __m256i qh = loadu256(x[i].qh);
        __m256i sumi = _mm256_setzero_si256();
#pragma GCC unroll 4
        for (int c = 0; c < 4; c++) {
            const __m256i q = loadu256(x[i].qs + 32 * c);
            const __m256i hb = srl16(qh, 2 * c); /* bit 0: low half's bit, bit 1: high half's */
            const int8_t *q8 = y[i].qs + 64 * c;
            const __m256i s0 =
                _mm256_shuffle_epi8(sc16, _mm256_set1_epi16((short)((4 * c + 1) << 8 | 4 * c)));
            const __m256i s1 = _mm256_shuffle_epi8(
                sc16, _mm256_set1_epi16((short)((4 * c + 3) << 8 | (4 * c + 2))));
            const __m256i v0 = _mm256_or_si256(_mm256_and_si256(q, m4),
                                               _mm256_and_si256(_mm256_slli_epi16(hb, 4), b4));
            const __m256i v1 = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(q, 4), m4),
                                               _mm256_and_si256(_mm256_slli_epi16(hb, 3), b4));
            sumi = dot_i16(sumi, _mm256_maddubs_epi16(v0, loadu256(q8)), s0);
            sumi = dot_i16(sumi, _mm256_maddubs_epi16(v1, loadu256(q8 + 32)), s1);
        }
        acc = _mm256_fmadd_ps(_mm256_set1_ps(y[i].d * f16(x[i].d)), _mm256_cvtepi32_ps(sumi), acc);
    }
    return hsum_ps(acc) + summs;
}

/* Q6_K. Half h (0,1) uses ql[64h..64h+63] and qh[32h..32h+31]; for l = 0..31:
 *   weight 128h +      l: ql[64h + l]      & 15, qh bits 0..1
 *   weight 128h + 32 + l: ql[64h + 32 + l] & 15, qh bits 2..3
 *   weight 128h + 64 + l: ql[64h + l]      >> 4, qh bits 4..5
 *   weight 128h + 96 + l: ql[64h + 32 + l] >> 4, qh bits 6..7
 * (qh byte qh[32h + l]); w = d * scales[weight/16] * (q6 - 32). The "- 32"
 * is applied once per block through the Q8_K group sums. */
static float dot_q6_K(const void *w, const void *a, int64_t n) {
    const block_q6_K *x = w;
    const block_q8_K *y = a;
    const int64_t nb = n / QK_K;
    const __m256i m4 = _mm256_set1_epi8(0x0f), m3 = _mm256_set1_epi8(0x30);
    __m256 acc = _mm256_setzero_ps();
    for (int64_t i = 0; i < nb; i++) {
        const __m128i sc = loadu128(x[i].scales);
        const __m256i off = _mm256_madd_epi16(_mm256_cvtepi8_epi16(sc), loadu256(y[i].bsums));
        __m256i sumi = _mm256_sub_epi32(_mm256_setzero_si256(), _mm256_slli_epi32(off, 5));
        __m256i half[2];
        scales16_s8(sc, &half[0], &half[1]);
#pragma GCC unroll 2
        for (int h = 0; h < 2; h++) {
            const __m256i la = loadu256(x[i].ql + 64 * h);
            const __m256i lb = loadu256(x[i].ql + 64 * h + 32);
            const __m256i hq = loadu256(x[i].qh + 32 * h);
            const int8_t *q8 = y[i].qs + 128 * h;
            const __m256i v0 = _mm256_or_si256(_mm256_and_si256(la, m4),
                                               _mm256_and_si256(_mm256_slli_epi16(hq, 4), m3));
            const __m256i v1 = _mm256_or_si256(_mm256_and_si256(lb, m4),
                                               _mm256_and_si256(_mm256_slli_epi16(hq, 2), m3));
            const __m256i v2 = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(la, 4), m4),
                                               _mm256_and_si256(hq, m3));
            const __m256i v3 = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(lb, 4), m4),
                                               _mm256_and_si256(_mm256_srli_epi16(hq, 2), m3));
            sumi = dot_i16(sumi, _mm256_maddubs_epi16(v0, loadu256(q8)), chunk_scales(half[h], 0));
            sumi = dot_i16(sumi, _mm256_maddubs_epi16(v1, loadu256(q8 + 32)),
                           chunk_scales(half[h], 1));
            sumi = dot_i16(sumi, _mm256_maddubs_epi16(v2, loadu256(q8 + 64)),
                           chunk_scales(half[h], 2));
            sumi = dot_i16(sumi, _mm256_maddubs_epi16(v3, loadu256(q8 + 96)),
                           chunk_scales(half[h], 3));
        }
        acc = _mm256_fmadd_ps(_mm256_set1_ps(y[i].d * f16(x[i].d)), _mm256_cvtepi32_ps(sumi), acc);
    }
    return hsum_ps(acc);
}

/* ===== IQ types against Q8_K activations ===== */

/* Sign patterns of the IQ2/IQ3 types as vpsignb operands: entry i holds, for
 * j = 0..7, byte 0xFF (negate) when bit j of ksigns_iq2xs[i] is set, else
 * 0x01. ksigns_iq2xs[i] is i with bit 7 set to the parity of i (an even number
 * of negative weights per 8); the tests check this table against it through
 * the reference dot product. Built at compile time, so no init race. */
#define KS_PAR(i)                                                                                  \
    (((i) ^ ((i) >> 1) ^ ((i) >> 2) ^ ((i) >> 3) ^ ((i) >> 4) ^ ((i) >> 5) ^ ((i) >> 6)) & 1)
#define KS_B(i, j) ((uint64_t)(((((i) | KS_PAR(i) << 7) >> (j)) & 1) ? 0xFF : 0x01) << (8 * (j)))
#define KS_E(i)                                                                                    \
    (KS_B(i, 0) | KS_B(i, 1) | KS_B(i, 2) | KS_B(i, 3) | KS_B(i, 4) | KS_B(i, 5) | KS_B(i, 6) |    \
     KS_B(i, 7))
#define KS_E4(i) KS_E(i), KS_E((i) + 1), KS_E((i) + 2), KS_E((i) + 3)
#define KS_E16(i) KS_E4(i), KS_E4((i) + 4), KS_E4((i) + 8), KS_E4((i) + 12)
static const uint64_t iq2_signs_pm1[128] = {KS_E16(0),  KS_E16(16), KS_E16(32), KS_E16(48),
                                            KS_E16(64), KS_E16(80), KS_E16(96), KS_E16(112)};
#undef KS_PAR
#undef KS_B
#undef KS_E
#undef KS_E4
#undef KS_E16

/* IQ2_XXS. Per 32 weights 8 bytes: 4 indices into iq2xxs_grid (8 unsigned
 * levels each, byte j = weight j), then a 32-bit word with four 7-bit indices
 * into ksigns_iq2xs (bit j set: weight j negative) and a 4-bit scale s:
 * w = d * (2s + 1) / 8 * level * sign. The signs are moved onto the
 * activations so that vpmaddubsw sees unsigned levels (at most 43). */
static inline __m256i iq2xxs_sub(const uint8_t *qs, const int8_t *q8, __m256i sumi) {
    uint32_t g;
    memcpy(&g, qs + 4, 4);
    const __m256i grid =
        _mm256_set_epi64x((int64_t)iq2xxs_grid[qs[3]], (int64_t)iq2xxs_grid[qs[2]],
                          (int64_t)iq2xxs_grid[qs[1]], (int64_t)iq2xxs_grid[qs[0]]);
    const __m256i sg = _mm256_set_epi64x(
        (int64_t)iq2_signs_pm1[(g >> 21) & 127], (int64_t)iq2_signs_pm1[(g >> 14) & 127],
        (int64_t)iq2_signs_pm1[(g >> 7) & 127], (int64_t)iq2_signs_pm1[g & 127]);
    const __m256i p = _mm256_maddubs_epi16(grid, _mm256_sign_epi8(loadu256(q8), sg));
    return dot_i16(sumi, p, _mm256_set1_epi16((short)(2 * (g >> 28) + 1)));
}

/* Integer sum of one block, 8 lanes (scales applied, 1/8 not). */
static inline __m256i iq2xxs_block(const block_iq2_xxs *x, const block_q8_K *y) {
    const uint8_t *qs = (const uint8_t *)x->qs;
    const int8_t *q8 = y->qs;
    /* two chains so consecutive sub-blocks overlap */
    __m256i s0 = _mm256_setzero_si256(), s1 = _mm256_setzero_si256();
    for (int ib = 0; ib < QK_K / 32; ib += 2) {
        s0 = iq2xxs_sub(qs + 8 * ib, q8 + 32 * ib, s0);
        s1 = iq2xxs_sub(qs + 8 * ib + 8, q8 + 32 * ib + 32, s1);
    }
    return _mm256_add_epi32(s0, s1);
}

static float dot_iq2_xxs(const void *w, const void *a, int64_t n) {
    const block_iq2_xxs *x = w;
    const block_q8_K *y = a;
    const int64_t nb = n / QK_K;
    __m256 acc = _mm256_setzero_ps();
    for (int64_t i = 0; i < nb; i++)
        acc = _mm256_fmadd_ps(_mm256_set1_ps(f16(x[i].d) * y[i].d),
                              _mm256_cvtepi32_ps(iq2xxs_block(&x[i], &y[i])), acc);
    return 0.125f * hsum_ps(acc);
}

/* IQ4_XS. Sub-block ib (32 weights): qs[16ib + j] low nibble = weight j, high
 * nibble = weight j + 16, values through kvalues_iq4nl; 6-bit scale (offset
 * 32): low 4 bits in scales_l[ib/2] (nibble ib%2), top 2 in scales_h bits 2ib. */
static inline __m256i iq4xs_block(const block_iq4_xs *x, const block_q8_K *y, __m256i tab) {
    uint32_t sl;
    memcpy(&sl, x->scales_l, 4);
    const uint32_t sh = x->scales_h;
    __m256i sumi = _mm256_setzero_si256();
    for (int ib = 0; ib < QK_K / 32; ib++) {
        const int ls = (int)(((sl >> (4 * ib)) & 0xf) | ((sh >> (2 * ib)) & 3) << 4) - 32;
        const __m256i v = _mm256_shuffle_epi8(tab, nibbles32(x->qs + 16 * ib));
        const __m256i yv = loadu256(y->qs + 32 * ib);
        const __m256i p = _mm256_maddubs_epi16(_mm256_sign_epi8(v, v), _mm256_sign_epi8(yv, v));
        sumi = dot_i16(sumi, p, _mm256_set1_epi16((short)ls));
    }
    return sumi;
}

static float dot_iq4_xs(const void *w, const void *a, int64_t n) {
    const block_iq4_xs *x = w;
    const block_q8_K *y = a;
    const int64_t nb = n / QK_K;
    const __m256i tab = table16(kvalues_iq4nl);
    __m256 acc = _mm256_setzero_ps();
    for (int64_t i = 0; i < nb; i++)
        acc = _mm256_fmadd_ps(_mm256_set1_ps(f16(x[i].d) * y[i].d),
                              _mm256_cvtepi32_ps(iq4xs_block(&x[i], &y[i], tab)), acc);
    return hsum_ps(acc);
}

/* ===== Panel order (see qt_dot_panel in quant.h) =====
 * The same integer lanes, summed exactly, then one fma per block against the
 * block scale product; bit-identical to qt_dot_panel_ref. */

static inline int32_t hsum_epi32(__m256i v) {
    __m128i x = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    x = _mm_add_epi32(x, _mm_unpackhi_epi64(x, x));
    x = _mm_add_epi32(x, _mm_shuffle_epi32(x, 1));
    return _mm_cvtsi128_si32(x);
}

static float panel_iq2_xxs(const void *w, const void *a, int64_t n) {
    const block_iq2_xxs *x = w;
    const block_q8_K *y = a;
    float acc = 0.0f;
    for (int64_t i = 0; i < n / QK_K; i++)
        acc = fmaf((float)hsum_epi32(iq2xxs_block(&x[i], &y[i])), (f16(x[i].d) * 0.125f) * y[i].d,
                   acc);
    return acc;
}

static float panel_iq4_xs(const void *w, const void *a, int64_t n) {
    const block_iq4_xs *x = w;
    const block_q8_K *y = a;
    const __m256i tab = table16(kvalues_iq4nl);
    float acc = 0.0f;
    for (int64_t i = 0; i < n / QK_K; i++)
        acc = fmaf((float)hsum_epi32(iq4xs_block(&x[i], &y[i], tab)), f16(x[i].d) * y[i].d, acc);
    return acc;
}

static float panel_iq4_nl(const void *w, const void *a, int64_t n) {
    const __m256i tab = table16(kvalues_iq4nl);
    LEGACY_LOOP1(block_iq4_nl, _mm256_shuffle_epi8(tab, nibbles32(xb->qs)), f16x8(xb->d))
}

static qt_dot_fn x86_panel_table(uint32_t type) {
    switch (type) {
    case QT_F32: return f32_panel16;
    case QT_IQ4_NL: return panel_iq4_nl;
    case QT_IQ2_XXS: return panel_iq2_xxs;
    case QT_IQ4_XS: return panel_iq4_xs;
    default: return NULL;
    }
}

/* ===== F32 kernels in ggml's lane order (quant.h) =====
 * 64 lanes as eight 8-float vectors: lane l lives in acc[l / 8], element l % 8.
 * The pairwise fold w = 32, 16, 8 adds whole vectors (acc[k] += acc[k + w/8]);
 * w = 4, 2, 1 fold inside acc[0]. The unfused tail relies on this file being
 * compiled without floating-point contraction (-std=c11). */

static float f32_dot_ggml(const float *x, const float *y, int64_t n) {
    __m256 acc[8];
    for (int k = 0; k < 8; k++)
        acc[k] = _mm256_setzero_ps();
    const int64_t np = n & ~(int64_t)63;
    for (int64_t i = 0; i < np; i += 64)
        for (int k = 0; k < 8; k++)
            acc[k] = _mm256_fmadd_ps(_mm256_loadu_ps(x + i + 8 * k), _mm256_loadu_ps(y + i + 8 * k),
                                     acc[k]);
    for (int k = 0; k < 4; k++)
        acc[k] = _mm256_add_ps(acc[k], acc[k + 4]);
    for (int k = 0; k < 2; k++)
        acc[k] = _mm256_add_ps(acc[k], acc[k + 2]);
    const __m256 a = _mm256_add_ps(acc[0], acc[1]);
    __m128 v = _mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
    v = _mm_add_ps(v, _mm_movehl_ps(v, v));
    v = _mm_add_ss(v, _mm_shuffle_ps(v, v, 1));
    float sum = _mm_cvtss_f32(v);
    for (int64_t i = np; i < n; i++)
        sum += x[i] * y[i];
    return sum;
}

/* The vectors of f32_axpy and the value sums (f32_axpyn): each element's chain
 * of fused multiply-adds is its own, so the vector width does not change a
 * bit; 16 floats at the AVX-512 level (glm-dsa 4096-token prompt: f32_axpyn
 * 14.8% of the time with 8). */
#if defined(__AVX512F__)
#define AXW 16
typedef __m512 axv;
#define axv_set1 _mm512_set1_ps
#define axv_load _mm512_loadu_ps
#define axv_store _mm512_storeu_ps
#define axv_fma _mm512_fmadd_ps
#else
#define AXW 8
typedef __m256 axv;
#define axv_set1 _mm256_set1_ps
#define axv_load _mm256_loadu_ps
#define axv_store _mm256_storeu_ps
#define axv_fma _mm256_fmadd_ps
#endif
/* AXW floats of row x from element i: f16 rows (a constant once inlined) are
 * converted exactly on the load. */
static inline __attribute__((always_inline)) axv axv_row(const void *x, int64_t i, const int f16) {
#if defined(__AVX512F__)
    if (f16) return _mm512_cvtph_ps(loadu256((const uint16_t *)x + i));
#else
    if (f16) return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)((const uint16_t *)x + i)));
#endif
    return axv_load((const float *)x + i);
}
static inline __attribute__((always_inline)) float row_at(const void *x, int64_t i, const int f16) {
    return f16 ? qt_f16_to_f32(((const pt_f16 *)x)[i]) : ((const float *)x)[i];
}

static void f32_axpy(float *acc, float a, const float *x, int64_t n) {
    const axv va = axv_set1(a);
    int64_t i = 0;
    for (; i + AXW <= n; i += AXW)
        axv_store(acc + i, axv_fma(va, axv_load(x + i), axv_load(acc + i)));
    for (; i < n; i++)
        acc[i] = fmaf(a, x[i], acc[i]);
}

/* f32_dot_ggml of x with y0 and with y1: each x block is loaded once for both
 * (the attention scores of a query against two keys); per output the same
 * lanes, fold and tail as f32_dot_ggml. 16 accumulators: with AVX2's 16
 * registers that would spill, so there it is two calls. */
static void f32_dot2_ggml(const float *x, const float *y0, const float *y1, int64_t n, float *out) {
#if defined(__AVX512VL__)
    __m256 a0[8], a1[8];
    for (int k = 0; k < 8; k++)
        a0[k] = a1[k] = _mm256_setzero_ps();
    const int64_t np = n & ~(int64_t)63;
    for (int64_t i = 0; i < np; i += 64)
        for (int k = 0; k < 8; k++) {
            const __m256 xv = _mm256_loadu_ps(x + i + 8 * k);
            a0[k] = _mm256_fmadd_ps(xv, _mm256_loadu_ps(y0 + i + 8 * k), a0[k]);
            a1[k] = _mm256_fmadd_ps(xv, _mm256_loadu_ps(y1 + i + 8 * k), a1[k]);
        }
    __m256 *accs[2] = {a0, a1};
    const float *ys[2] = {y0, y1};
    for (int r = 0; r < 2; r++) {
        __m256 *acc = accs[r];
        for (int k = 0; k < 4; k++)
            acc[k] = _mm256_add_ps(acc[k], acc[k + 4]);
        for (int k = 0; k < 2; k++)
            acc[k] = _mm256_add_ps(acc[k], acc[k + 2]);
        const __m256 a = _mm256_add_ps(acc[0], acc[1]);
        __m128 v = _mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
        v = _mm_add_ps(v, _mm_movehl_ps(v, v));
        v = _mm_add_ss(v, _mm_shuffle_ps(v, v, 1));
        float sum = _mm_cvtss_f32(v);
        for (int64_t i = np; i < n; i++)
            sum += x[i] * ys[r][i];
        out[r] = sum;
    }
#else
    out[0] = f32_dot_ggml(x, y0, n);
    out[1] = f32_dot_ggml(x, y1, n);
#endif
}

/* qt_f32_axpyn_fn: m axpys, each AXW-float chunk of acc loaded once, its m
 * fused multiply-adds chained in k order, stored once (f32_axpy's operations).
 * M rows at a time with their factors broadcast once, two chunks per step;
 * more than 8 rows go in groups of 8, each group's chain continuing the one
 * before, so every element sees the same fmas in the same order. */
static inline __attribute__((always_inline)) void
axpyn_m(float *acc, const int M, const float *a, const void *const *x, int64_t n, const int f16) {
    axv av[8];
    for (int k = 0; k < M; k++)
        av[k] = axv_set1(a[k]);
    int64_t i = 0;
    for (; i + 2 * AXW <= n; i += 2 * AXW) {
        axv v0 = axv_load(acc + i), v1 = axv_load(acc + i + AXW);
        for (int k = 0; k < M; k++) {
            v0 = axv_fma(av[k], axv_row(x[k], i, f16), v0);
            v1 = axv_fma(av[k], axv_row(x[k], i + AXW, f16), v1);
        }
        axv_store(acc + i, v0);
        axv_store(acc + i + AXW, v1);
    }
    for (; i + AXW <= n; i += AXW) {
        axv v = axv_load(acc + i);
        for (int k = 0; k < M; k++)
            v = axv_fma(av[k], axv_row(x[k], i, f16), v);
        axv_store(acc + i, v);
    }
    for (; i < n; i++) {
        float v = acc[i];
        for (int k = 0; k < M; k++)
            v = fmaf(a[k], row_at(x[k], i, f16), v);
        acc[i] = v;
    }
}

/* H heads over the same M rows (M <= 4): each AXW-float chunk of a row loaded once for the H
 * heads' chains (head h's factors at a + h * as), each head's chunk of acc loaded and
 * stored once. H chains in flight hide the FMA latency with one chunk per step. */
static inline __attribute__((always_inline)) void axpyn_hm(float *const *acc, const int H,
                                                           const int M, const float *a, int64_t as,
                                                           const void *const *x, int64_t n,
                                                           const int f16) {
    /* the pointers in locals: stores through acc cannot change them */
    float *ap[4];
    const void *xp[4];
#pragma GCC unroll 4
    for (int h = 0; h < H; h++)
        ap[h] = acc[h];
#pragma GCC unroll 4
    for (int k = 0; k < M; k++)
        xp[k] = x[k];
    axv av[4][4];
#pragma GCC unroll 4
    for (int h = 0; h < H; h++)
#pragma GCC unroll 4
        for (int k = 0; k < M; k++)
            av[h][k] = axv_set1(a[h * as + k]);
    int64_t i = 0;
    for (; i + AXW <= n; i += AXW) {
        axv v[4];
#pragma GCC unroll 4
        for (int h = 0; h < H; h++)
            v[h] = axv_load(ap[h] + i);
#pragma GCC unroll 4
        for (int k = 0; k < M; k++) {
            const axv xv = axv_row(xp[k], i, f16);
#pragma GCC unroll 4
            for (int h = 0; h < H; h++)
                v[h] = axv_fma(av[h][k], xv, v[h]);
        }
#pragma GCC unroll 4
        for (int h = 0; h < H; h++)
            axv_store(ap[h] + i, v[h]);
    }
    for (; i < n; i++)
        for (int h = 0; h < H; h++) {
            float v = ap[h][i];
            for (int k = 0; k < M; k++)
                v = fmaf(a[h * as + k], row_at(xp[k], i, f16), v);
            ap[h][i] = v;
        }
}

/* Heads per pass: the factors stay in registers (AVX-512's 32 of them hold four heads'). */
#if defined(__AVX512VL__)
#define AXPYN_HEADS 4
#else
#define AXPYN_HEADS 2
#endif

static inline __attribute__((always_inline)) void axpyn_any(float *const *acc, int nh, int m,
                                                            const float *a, const void *const *x,
                                                            int64_t n, const int f16) {
    if (nh == 1) {
        for (int k0 = 0; k0 < m; k0 += 8) {
            const float *as = a + k0;
            const void *const *xs = x + k0;
            switch (m - k0 < 8 ? m - k0 : 8) {
            case 1: axpyn_m(acc[0], 1, as, xs, n, f16); break;
            case 2: axpyn_m(acc[0], 2, as, xs, n, f16); break;
            case 3: axpyn_m(acc[0], 3, as, xs, n, f16); break;
            case 4: axpyn_m(acc[0], 4, as, xs, n, f16); break;
            case 5: axpyn_m(acc[0], 5, as, xs, n, f16); break;
            case 6: axpyn_m(acc[0], 6, as, xs, n, f16); break;
            case 7: axpyn_m(acc[0], 7, as, xs, n, f16); break;
            default: axpyn_m(acc[0], 8, as, xs, n, f16); break;
            }
        }
        return;
    }
    /* rows in groups of 4, each group's chains continuing the one before through acc */
    for (int h0 = 0; h0 < nh; h0 += AXPYN_HEADS) {
        const int H = nh - h0 < AXPYN_HEADS ? nh - h0 : AXPYN_HEADS;
        for (int k0 = 0; k0 < m; k0 += 4) {
            const int M = m - k0 < 4 ? m - k0 : 4;
            const float *as = a + (int64_t)h0 * m + k0;
            const void *const *xs = x + k0;
            float *const *ac = acc + h0;
#define AXPYN_HM(HH)                                                                               \
    switch (M) {                                                                                   \
    case 1: axpyn_hm(ac, HH, 1, as, m, xs, n, f16); break;                                         \
    case 2: axpyn_hm(ac, HH, 2, as, m, xs, n, f16); break;                                         \
    case 3: axpyn_hm(ac, HH, 3, as, m, xs, n, f16); break;                                         \
    default: axpyn_hm(ac, HH, 4, as, m, xs, n, f16); break;                                        \
    }
            if (H == 1) {
                AXPYN_HM(1)
            } else if (H == 2) {
                AXPYN_HM(2)
#if AXPYN_HEADS == 4
            } else if (H == 3) {
                AXPYN_HM(3)
            } else {
                AXPYN_HM(4)
#endif
            }
#undef AXPYN_HM
        }
    }
}

/* qt_f32_axpyn_fn, and the same over fp16 rows (qt_f16_axpyn_fn) */
static void f32_axpyn(float *const *acc, int nh, int m, const float *a, const float *const *x,
                      int64_t n) {
    axpyn_any(acc, nh, m, a, (const void *const *)x, n, 0);
}
static void f16_axpyn(float *const *acc, int nh, int m, const float *a, const pt_f16 *const *x,
                      int64_t n) {
    axpyn_any(acc, nh, m, a, (const void *const *)x, n, 1);
}
#undef AXPYN_HEADS
#undef AXW
#undef axv_set1
#undef axv_load
#undef axv_store
#undef axv_fma

static const qt_f32_kernels x86_f32_kernels = {f32_dot_ggml, f32_axpy, f32_dot2_ggml};

/* ===== Four activation rows at once (batched matmuls) =====
 *
 * out[r] = dot(w, a + r * as, n) for r = 0..3, each bit-identical to the
 * single-row kernel above: row r keeps its own accumulators and receives the
 * same float operations in the same order; what the four share is the integer
 * work on the weights (loads, nibble/bit unpacking, scale shuffles), which is
 * most of a K-quant kernel. The row loops have a constant trip count and are
 * unrolled, so the accumulators stay in registers. */
#define NR4 4
#define ROWS4(T, a, as, y)                                                                         \
    const T *y[NR4];                                                                               \
    for (int r = 0; r < NR4; r++)                                                                  \
    y[r] = (const T *)((const uint8_t *)(a) + (uint64_t)r * (as))

/* sumi[r] += the 32 weight bytes v times bytes [off, off + 32) of row r's
 * activation block, in int16 pairs scaled by cs (one K-quant chunk). */
static inline void chunk4(__m256i *sumi, __m256i v, __m256i cs, const block_q8_K *const *y,
                          int64_t i, int off) {
#pragma GCC unroll 4
    for (int r = 0; r < NR4; r++)
        sumi[r] = dot_i16(sumi[r], _mm256_maddubs_epi16(v, loadu256(y[r][i].qs + off)), cs);
}

/* Two chunks in a row's order: the low-nibble chunk at off, then the high one
 * at off + 32 (Q4_K, Q5_K: sumi[r] += lo part, then += hi part). */
static inline void chunk4x2(__m256i *sumi, __m256i v0, __m256i s0, __m256i v1, __m256i s1,
                            const block_q8_K *const *y, int64_t i, int off) {
#pragma GCC unroll 4
    for (int r = 0; r < NR4; r++) {
        sumi[r] = dot_i16(sumi[r], _mm256_maddubs_epi16(v0, loadu256(y[r][i].qs + off)), s0);
        sumi[r] = dot_i16(sumi[r], _mm256_maddubs_epi16(v1, loadu256(y[r][i].qs + off + 32)), s1);
    }
}

/* One Q4_K block against four activation rows' Q8_K blocks i: sumi[r] += its four 64-weight
 * chunks (low nibbles scaled by scale 2c, high nibbles by 2c + 1); scmn from k4_scales_mins. */
static inline void q4k_chunks4(__m256i *sumi, const uint8_t *qs, __m128i scmn,
                               const block_q8_K *const *y, int64_t i) {
    const __m256i m4 = _mm256_set1_epi8(0x0f);
    const __m256i sc16 = _mm256_broadcastsi128_si256(_mm_cvtepu8_epi16(scmn));
#pragma GCC unroll 4
    for (int c = 0; c < 4; c++) {
        const __m256i q = loadu256(qs + 32 * c);
        const __m256i lo = _mm256_and_si256(q, m4),
                      hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), m4);
        const __m256i s0 =
            _mm256_shuffle_epi8(sc16, _mm256_set1_epi16((short)((4 * c + 1) << 8 | 4 * c)));
        const __m256i s1 =
            _mm256_shuffle_epi8(sc16, _mm256_set1_epi16((short)((4 * c + 3) << 8 | (4 * c + 2))));
        chunk4x2(sumi, lo, s0, hi, s1, y, i, 64 * c);
    }
}

/* The end of a K-quant block: acc[r] += (y_r.d * d) * sumi[r]. */
static inline void block_end4(__m256 *acc, const __m256i *sumi, const block_q8_K *const *y,
                              int64_t i, float d) {
#pragma GCC unroll 4
    for (int r = 0; r < NR4; r++)
        acc[r] =
            _mm256_fmadd_ps(_mm256_set1_ps(y[r][i].d * d), _mm256_cvtepi32_ps(sumi[r]), acc[r]);
}

static void dot4_q8_0(const void *w, const void *a, uint64_t as, int64_t n, float *out) {
    const block_q8_0 *x = w;
    ROWS4(block_q8_0, a, as, y);
    __m256 acc[NR4];
    for (int r = 0; r < NR4; r++)
        acc[r] = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / 32; i++) {
        const __m256i wv = loadu256(x[i].qs), wa = _mm256_sign_epi8(wv, wv);
        const float dx = f16(x[i].d);
#pragma GCC unroll 4
        for (int r = 0; r < NR4; r++) {
            const __m256i p =
                dot_u8s8(_mm256_setzero_si256(), wa, _mm256_sign_epi8(loadu256(y[r][i].qs), wv));
            acc[r] =
                _mm256_fmadd_ps(_mm256_set1_ps(dx * f16(y[r][i].d)), _mm256_cvtepi32_ps(p), acc[r]);
        }
    }
    for (int r = 0; r < NR4; r++)
        out[r] = hsum_ps(acc[r]);
}

/* The legacy shapes of LEGACY_LOOP (NACC 2: blocks alternate between two
 * accumulators, an odd last block goes to the first) and LEGACY_LOOP1 (NACC 1). */
#define LEGACY4_STEP(i, A)                                                                         \
    do {                                                                                           \
        const XT4 *xb = &x[i];                                                                     \
        const __m256i wv = DECODE4, wa = _mm256_sign_epi8(wv, wv);                                 \
        const float dx = SCALE4;                                                                   \
        _Pragma("GCC unroll 4") for (int r = 0; r < NR4; r++) {                                    \
            const __m256i p =                                                                      \
                dot_u8s8(_mm256_setzero_si256(), wa, _mm256_sign_epi8(loadu256(y[r][i].qs), wv));  \
            A[r] =                                                                                 \
                _mm256_fmadd_ps(_mm256_set1_ps(dx * f16(y[r][i].d)), _mm256_cvtepi32_ps(p), A[r]); \
        }                                                                                          \
    } while (0)
#define LEGACY4_BODY(NACC)                                                                         \
    const XT4 *x = w;                                                                              \
    ROWS4(block_q8_0, a, as, y);                                                                   \
    const int64_t nb = n / 32;                                                                     \
    __m256 acc0[NR4], acc1[NR4];                                                                   \
    for (int r = 0; r < NR4; r++)                                                                  \
        acc0[r] = acc1[r] = _mm256_setzero_ps();                                                   \
    int64_t i = 0;                                                                                 \
    for (; (NACC) == 2 && i + 2 <= nb; i += 2) {                                                   \
        LEGACY4_STEP(i, acc0);                                                                     \
        LEGACY4_STEP(i + 1, acc1);                                                                 \
    }                                                                                              \
    for (; i < nb; i++)                                                                            \
        LEGACY4_STEP(i, acc0);                                                                     \
    for (int r = 0; r < NR4; r++)                                                                  \
    out[r] = hsum_ps((NACC) == 2 ? _mm256_add_ps(acc0[r], acc1[r]) : acc0[r])

static void dot4_q4_0(const void *w, const void *a, uint64_t as, int64_t n, float *out) {
#define XT4 block_q4_0
#define DECODE4 decode_q4_0(xb)
#define SCALE4 f16(xb->d)
    LEGACY4_BODY(1);
#undef XT4
#undef DECODE4
#undef SCALE4
}

static void dot4_q5_0(const void *w, const void *a, uint64_t as, int64_t n, float *out) {
#define XT4 block_q5_0
#define DECODE4 decode_q5_0(xb)
#define SCALE4 f16(xb->d)
    LEGACY4_BODY(1);
#undef XT4
#undef DECODE4
#undef SCALE4
}

static void dot4_mxfp4(const void *w, const void *a, uint64_t as, int64_t n, float *out) {
    const __m256i tab = table16(kvalues_mxfp4);
#define XT4 block_mxfp4
#define DECODE4 _mm256_shuffle_epi8(tab, nibbles32(xb->qs))
#define SCALE4 qt_e8m0_half(xb->e)
    LEGACY4_BODY(2);
#undef XT4
#undef DECODE4
#undef SCALE4
}

static void dot4_q2_K(const void *w, const void *a, uint64_t as, int64_t n, float *out) {
    const block_q2_K *x = w;
    ROWS4(block_q8_K, a, as, y);
    const __m128i m4 = _mm_set1_epi8(0x0f);
    __m256 acc[NR4];
    for (int r = 0; r < NR4; r++)
        acc[r] = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / QK_K; i++) {
        const __m128i raw = loadu128(x[i].scales);
        const __m128i sc = _mm_and_si128(raw, m4);
        const __m256i mn = _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(raw, 4), m4));
        const float dmin = f16(x[i].dmin), d = f16(x[i].d);
        __m256i sumi[NR4];
#pragma GCC unroll 4
        for (int r = 0; r < NR4; r++) {
            const __m256i pm = _mm256_madd_epi16(mn, loadu256(y[r][i].bsums));
            acc[r] =
                _mm256_fmadd_ps(_mm256_set1_ps(-y[r][i].d * dmin), _mm256_cvtepi32_ps(pm), acc[r]);
            sumi[r] = _mm256_setzero_si256();
        }
        __m256i half[2];
        scales16_u8(sc, &half[0], &half[1]);
#pragma GCC unroll 2
        for (int h = 0; h < 2; h++) {
            const __m256i q = loadu256(x[i].qs + 32 * h);
#pragma GCC unroll 4
            for (int j = 0; j < 4; j++) {
                const __m256i v = _mm256_and_si256(srl16(q, 2 * j), _mm256_set1_epi8(3));
                const __m256i cs = chunk_scales(half[h], j);
                chunk4(sumi, v, cs, y, i, 128 * h + 32 * j);
            }
        }
        block_end4(acc, sumi, y, i, d);
    }
    for (int r = 0; r < NR4; r++)
        out[r] = hsum_ps(acc[r]);
}

static void dot4_q3_K(const void *w, const void *a, uint64_t as, int64_t n, float *out) {
    const block_q3_K *x = w;
    ROWS4(block_q8_K, a, as, y);
    __m256 acc[NR4];
    for (int r = 0; r < NR4; r++)
        acc[r] = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / QK_K; i++) {
        const __m128i sc = q3k_scales(x[i].scales);
        const __m256i hm = loadu256(x[i].hmask);
        const float d = f16(x[i].d);
        __m256i sumi[NR4];
        for (int r = 0; r < NR4; r++)
            sumi[r] = _mm256_setzero_si256();
        __m256i half[2];
        scales16_s8(sc, &half[0], &half[1]);
#pragma GCC unroll 2
        for (int h = 0; h < 2; h++) {
            const __m256i q = loadu256(x[i].qs + 32 * h);
#pragma GCC unroll 4
            for (int j = 0; j < 4; j++) {
                const __m256i v = _mm256_sub_epi8(q3k_low(q, j), q3k_sub(hm, 4 * h + j));
                const __m256i av = _mm256_abs_epi8(v), cs = chunk_scales(half[h], j);
                const int off = 128 * h + 32 * j;
#pragma GCC unroll 4
                for (int r = 0; r < NR4; r++)
                    sumi[r] = dot_i16(sumi[r], q3k_pairs(v, av, loadu256(y[r][i].qs + off)), cs);
            }
        }
        block_end4(acc, sumi, y, i, d);
    }
    for (int r = 0; r < NR4; r++)
        out[r] = hsum_ps(acc[r]);
}

static void dot4_q5_K(const void *w, const void *a, uint64_t as, int64_t n, float *out) {
    const block_q5_K *x = w;
    ROWS4(block_q8_K, a, as, y);
    const __m256i m4 = _mm256_set1_epi8(0x0f), b4 = _mm256_set1_epi8(0x10);
    __m256 acc[NR4];
    float summs[NR4] = {0};
    for (int r = 0; r < NR4; r++)
        acc[r] = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / QK_K; i++) {
        const __m128i scmn = k4_scales_mins(x[i].scales);
        const float dmin = f16(x[i].dmin), d = f16(x[i].d);
        __m256i sumi[NR4];
#pragma GCC unroll 4
        for (int r = 0; r < NR4; r++) {
            const __m256i pm = k4_mins_dot(scmn, y[r][i].bsums);
            summs[r] = fmaf(-y[r][i].d * dmin, (float)k5_isum(pm), summs[r]);
            sumi[r] = _mm256_setzero_si256();
        }
        const __m256i sc16 = _mm256_broadcastsi128_si256(_mm_cvtepu8_epi16(scmn));
        const __m256i qh = loadu256(x[i].qh);
#pragma GCC unroll 4
        for (int c = 0; c < 4; c++) {
            const __m256i q = loadu256(x[i].qs + 32 * c);
            const __m256i hb = srl16(qh, 2 * c);
            const __m256i s0 =
                _mm256_shuffle_epi8(sc16, _mm256_set1_epi16((short)((4 * c + 1) << 8 | 4 * c)));
            const __m256i s1 = _mm256_shuffle_epi8(
                sc16, _mm256_set1_epi16((short)((4 * c + 3) << 8 | (4 * c + 2))));
            const __m256i v0 = _mm256_or_si256(_mm256_and_si256(q, m4),
                                               _mm256_and_si256(_mm256_slli_epi16(hb, 4), b4));
            const __m256i v1 = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(q, 4), m4),
                                               _mm256_and_si256(_mm256_slli_epi16(hb, 3), b4));
            chunk4x2(sumi, v0, s0, v1, s1, y, i, 64 * c);
        }
        block_end4(acc, sumi, y, i, d);
    }
    for (int r = 0; r < NR4; r++)
        out[r] = hsum_ps(acc[r]) + summs[r];
}

static void dot4_q4_K(const void *w, const void *a, uint64_t as, int64_t n, float *out) {
    const block_q4_K *x = w;
    ROWS4(block_q8_K, a, as, y);
    __m256 acc[NR4];
    __m128 acc_m[NR4];
    for (int r = 0; r < NR4; r++)
        acc[r] = _mm256_setzero_ps(), acc_m[r] = _mm_setzero_ps();
    for (int64_t i = 0; i < n / QK_K; i++) {
        const __m128i scmn = k4_scales_mins(x[i].scales);
        const __m128i mins = _mm_cvtepu8_epi16(_mm_srli_si128(scmn, 8));
        const float dmin = f16(x[i].dmin), d = f16(x[i].d);
        __m256i sumi[NR4];
#pragma GCC unroll 4
        for (int r = 0; r < NR4; r++) {
            const __m128i q8s =
                _mm_hadd_epi16(_mm_loadu_si128((const __m128i *)y[r][i].bsums),
                               _mm_loadu_si128((const __m128i *)(y[r][i].bsums + 8)));
            const __m128i pm = _mm_madd_epi16(mins, q8s);
            acc_m[r] = _mm_fmadd_ps(_mm_set1_ps(-y[r][i].d * dmin), _mm_cvtepi32_ps(pm), acc_m[r]);
            sumi[r] = _mm256_setzero_si256();
        }
        q4k_chunks4(sumi, x[i].qs, scmn, y, i);
        block_end4(acc, sumi, y, i, d);
    }
    for (int r = 0; r < NR4; r++) {
        __m128 m = _mm_add_ps(acc_m[r], _mm_movehl_ps(acc_m[r], acc_m[r]));
        m = _mm_add_ss(m, _mm_movehdup_ps(m));
        out[r] = hsum_ps(acc[r]) + _mm_cvtss_f32(m);
    }
}

static void dot4_q6_K(const void *w, const void *a, uint64_t as, int64_t n, float *out) {
    const block_q6_K *x = w;
    ROWS4(block_q8_K, a, as, y);
    const __m256i m4 = _mm256_set1_epi8(0x0f), m3 = _mm256_set1_epi8(0x30);
    __m256 acc[NR4];
    for (int r = 0; r < NR4; r++)
        acc[r] = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / QK_K; i++) {
        const __m128i sc = loadu128(x[i].scales);
        const __m256i sc16 = _mm256_cvtepi8_epi16(sc);
        const float d = f16(x[i].d);
        __m256i sumi[NR4];
#pragma GCC unroll 4
        for (int r = 0; r < NR4; r++)
            sumi[r] = _mm256_sub_epi32(
                _mm256_setzero_si256(),
                _mm256_slli_epi32(_mm256_madd_epi16(sc16, loadu256(y[r][i].bsums)), 5));
        __m256i half[2];
        scales16_s8(sc, &half[0], &half[1]);
#pragma GCC unroll 2
        for (int h = 0; h < 2; h++) {
            const __m256i la = loadu256(x[i].ql + 64 * h), lb = loadu256(x[i].ql + 64 * h + 32);
            const __m256i hq = loadu256(x[i].qh + 32 * h);
            const __m256i v[4] = {_mm256_or_si256(_mm256_and_si256(la, m4),
                                                  _mm256_and_si256(_mm256_slli_epi16(hq, 4), m3)),
                                  _mm256_or_si256(_mm256_and_si256(lb, m4),
                                                  _mm256_and_si256(_mm256_slli_epi16(hq, 2), m3)),
                                  _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(la, 4), m4),
                                                  _mm256_and_si256(hq, m3)),
                                  _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(lb, 4), m4),
                                                  _mm256_and_si256(_mm256_srli_epi16(hq, 2), m3))};
#pragma GCC unroll 4
            for (int k = 0; k < 4; k++) {
                const __m256i cs = chunk_scales(half[h], k);
                chunk4(sumi, v[k], cs, y, i, 128 * h + 32 * k);
            }
        }
        block_end4(acc, sumi, y, i, d);
    }
    for (int r = 0; r < NR4; r++)
        out[r] = hsum_ps(acc[r]);
}

/* ===== Four weight rows x four activation rows (VNNI level only) =====
 *
 * out[r * ldo + k] = dot(w + k * ws, a + r * as, n) for k, r = 0..3, each
 * bit-identical to this level's single-row kernel: pair (k, r) keeps its own
 * 8-lane float accumulator and receives, per block, the same integer lanes, the
 * same scale product and the same FMA, in block order; the final fold is
 * hsum_ps. What the 16 pairs share is loads: an activation block is loaded and
 * biased once for four weight rows, a weight block once for four activation rows.
 * 512-bit vectors. Two pairs' 8-lane values go side by side in one 512-bit
 * register (pair_si512, pair_ps512), so one instruction does the two 256-bit
 * operations of the single-row kernel, lane for lane: the legacy types pair two
 * activation rows against one weight block, the K-quants two weight rows
 * against one activation chunk (act2). On the Zen 5 machine measured
 * (bench/RESULTS.md, 2026-12-04) this ran 1.2-1.4x the 256-bit tiles.
 * Integer lanes. vpdpbusd multiplies unsigned by signed bytes; the weight
 * byte w is fed as w + 128 (xor 0x80) and the activation block's 128 * sum(a)
 * per lane (formed once per block for the four weight rows) subtracted first,
 * so every lane is exactly sum(a * w) over its four weights, the integer the
 * single-row kernel's sign trick produces (integer addition is exact: any
 * route to the lane's value gives the same float). Biasing the weights rather
 * than the activations saves each weight block its own correction: 12
 * operations a weight block instead of 14. Only
 * vpdpbusd (no saturation) makes the bias trick exact, hence VNNI only; the
 * AVX2 level keeps the four-row kernels. */
#if defined(X86_BODY_TILES)
#define NT4 4

/* Two pairs' 8-lane values side by side in one 512-bit vector: the low half
 * is one pair's, the high half the other's, and every 512-bit operation below
 * is the two 256-bit operations of the single-row kernel, lane for lane. */
static inline __m512i pair_si512(__m256i lo, __m256i hi) {
    return _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
}
static inline __m512 pair_ps512(__m256 lo, __m256 hi) {
    return _mm512_insertf32x8(_mm512_castps256_ps512(lo), hi, 1);
}
/* chunk_scales of two rows' halves side by side (pair_si512 of scales16_*). */
static inline __m512i chunk_scales512(__m512i half, int m) {
    const int k = 4 * (m & 3);
    const __m256i sel = _mm256_set_m128i(_mm_set1_epi16((short)((k + 3) << 8 | (k + 2))),
                                         _mm_set1_epi16((short)((k + 1) << 8 | k)));
    return _mm512_shuffle_epi8(half, _mm512_broadcast_i64x4(sel));
}
/* An activation chunk of 32 bytes in both halves. */
static inline __m512i act2(const int8_t *q8) {
    return _mm512_broadcast_i64x4(loadu256(q8));
}
/* Q4_K/Q5_K chunk c of two weight rows against nr activation rows: sumi[r]
 * += the low-nibble part (v0, scale 2c) then the high one (v1, scale 2c + 1);
 * sc16: both rows' int16 scales (pair_si512). q8[r]: row r's 256 activation
 * bytes of the block, or with dup its 512 of a panel (each 32-byte chunk
 * twice, loaded as it is used: one load, no broadcast). The tiles' helpers take the
 * activation row count nr: 4 for a tile, 1 for a gemv (a constant where they
 * are inlined, so the loops unroll). */
static inline void chunk2x512(__m512i *sumi, __m512i v0, __m512i v1, __m512i sc16, int c,
                              const int8_t *const *q8, int dup, int nr) {
    const __m512i s0 =
        _mm512_shuffle_epi8(sc16, _mm512_set1_epi16((short)((4 * c + 1) << 8 | 4 * c)));
    const __m512i s1 =
        _mm512_shuffle_epi8(sc16, _mm512_set1_epi16((short)((4 * c + 3) << 8 | (4 * c + 2))));
#pragma GCC unroll 4
    for (int r = 0; r < nr; r++) {
        const int8_t *p = q8[r] + (dup ? 128 : 64) * c;
        const __m512i a0 = dup ? _mm512_loadu_si512(p) : act2(p);
        const __m512i a1 = dup ? _mm512_loadu_si512(p + 64) : act2(p + 32);
        sumi[r] = _mm512_dpwssd_epi32(sumi[r], _mm512_maddubs_epi16(v0, a0), s0);
        sumi[r] = _mm512_dpwssd_epi32(sumi[r], _mm512_maddubs_epi16(v1, a1), s1);
    }
}
/* The end of a K-quant block for weight rows 2g and 2g + 1 (d: their scales,
 * pair_ps512): acc[r] += (dy[r] * d) * sumi[r], the single-row kernel's FMA
 * (dy[r]: activation row r's block scale). */
static inline void block_end512d(__m512 *acc, const __m512i *sumi, const float *dy, __m512 d,
                                 int nr) {
#pragma GCC unroll 4
    for (int r = 0; r < nr; r++)
        acc[r] = _mm512_fmadd_ps(_mm512_mul_ps(_mm512_set1_ps(dy[r]), d),
                                 _mm512_cvtepi32_ps(sumi[r]), acc[r]);
}
/* block_end512d with the scales of block i of the Q8_K rows y */
static inline void block_end512(__m512 *acc, const __m512i *sumi, const block_q8_K *const *y,
                                int64_t i, __m512 d, int nr) {
    float dy[NR4];
    for (int r = 0; r < nr; r++)
        dy[r] = y[r][i].d;
    block_end512d(acc, sumi, dy, d, nr);
}
/* A K-quant tile's accumulators (weight rows 2g, 2g + 1 in the halves of
 * acc[g][r]) zeroed. */
static inline void zero512(__m512 acc[2][4]) {
    for (int g = 0; g < 2; g++)
        for (int r = 0; r < 4; r++)
            acc[g][r] = _mm512_setzero_ps();
}
/* out[r * ldo + k] = the fold of pair (k, r)'s lanes (weight rows 2g, 2g + 1 in
 * the halves of acc[g][r]), plus add[k][r] when add is not NULL; r < nr. */
static inline void tile_out512(__m512 acc[2][4], const float add[4][4], float *out, int64_t ldo,
                               int nr) {
    for (int k = 0; k < 4; k++)
        for (int r = 0; r < nr; r++) {
            const __m512 v = acc[k / 2][r];
            const float f =
                hsum_ps(k & 1 ? _mm512_extractf32x8_ps(v, 1) : _mm512_castps512_ps256(v));
            out[r * ldo + k] = add ? f + add[k][r] : f;
        }
}

/* The bias trick's correction for activation vector sa (pair_si512 of two rows' blocks):
 * -128 * the sum of each lane's four activation bytes. */
static inline __m512i legacy_neg(__m512i bias, __m512i sa) {
    return _mm512_sub_epi32(_mm512_setzero_si512(),
                            _mm512_dpbusd_epi32(_mm512_setzero_si512(), bias, sa));
}
/* A Q8_0 panel's block (PANEL8_BLOCK bytes for four activation rows, 32 values): for
 * h = 0, 1 at 64 * h rows 2h and 2h + 1's bytes side by side (the tile's sa[h]), at
 * PANEL8_NEG + 64 * h their correction (na[h]), at PANEL8_DY + 64 * h their scales as
 * floats, eight each (dy[h]). */
#define PANEL8_NEG 128
#define PANEL8_DY 256
#define PANEL8_BLOCK 384
/* qt_panel_row_fn of the Q8_0 activation rows: writes half h = r / 2 of r's pair */
static void panel_row_q8_0(const void *a, int64_t n, int r, void *panel) {
    const block_q8_0 *y = a;
    const int h = r / 2, side = r % 2;
    const __m512i bias = _mm512_set1_epi8((char)0x80);
    for (int64_t i = 0; i < n / 32; i++) {
        uint8_t *pb = (uint8_t *)panel + (uint64_t)i * PANEL8_BLOCK;
        memcpy(pb + 64 * h + 32 * side, y[i].qs, 32);
        /* each lane's correction from this row's bytes alone (the other half's lanes are
         * the other row's, written with it) */
        const __m512i na = legacy_neg(bias, _mm512_broadcast_i64x4(loadu256(y[i].qs)));
        memcpy(pb + PANEL8_NEG + 64 * h + 32 * side, (const uint8_t *)&na, 32);
        const __m256 d = f16x8(y[i].d);
        memcpy(pb + PANEL8_DY + 64 * h + 32 * side, &d, 32);
    }
}

/* One 32-weight block type with one accumulator (LEGACY_LOOP1's order): XT the
 * block, DECODE(xb) its 32 signed weight bytes, xb->d its fp16 scale. Pairs
 * (k, 2h) and (k, 2h + 1) share a 512-bit accumulator (pair_ps512): the two
 * activation rows' blocks side by side, the weight block in both halves. NT
 * weight rows (4, or 8 for tile8_q8_0: 16 accumulators, and an activation
 * block's loads and bias sums shared by twice the rows). */
#define TILE_LEGACY_NT(NAME, XT, DECODE, NT, PANEL)                                                \
    static void NAME(const void *w, uint64_t ws, const void *a, uint64_t as, int64_t n,            \
                     float *out, int64_t ldo) {                                                    \
        const XT *x[NT];                                                                           \
        for (int k = 0; k < NT; k++)                                                               \
            x[k] = (const XT *)((const uint8_t *)w + (uint64_t)k * ws);                            \
        ROWS4(block_q8_0, a, as, y);                                                               \
        (void)y;                                                                                   \
        const __m512i bias = _mm512_set1_epi8((char)0x80);                                         \
        __m512 acc[NT][NR4 / 2];                                                                   \
        for (int k = 0; k < NT; k++)                                                               \
            for (int h = 0; h < NR4 / 2; h++)                                                      \
                acc[k][h] = _mm512_setzero_ps();                                                   \
        for (int64_t i = 0; i < n / 32; i++) {                                                     \
            __m512i sa[NR4 / 2], na[NR4 / 2];                                                      \
            __m512 dy[NR4 / 2];                                                                    \
            _Pragma("GCC unroll 2") for (int h = 0; h < NR4 / 2; h++) {                            \
                if (PANEL) {                                                                       \
                    const uint8_t *pb = (const uint8_t *)a + (uint64_t)i * PANEL8_BLOCK;           \
                    sa[h] = _mm512_loadu_si512(pb + 64 * h);                                       \
                    na[h] = _mm512_loadu_si512(pb + PANEL8_NEG + 64 * h);                          \
                    dy[h] = _mm512_loadu_ps(pb + PANEL8_DY + 64 * h);                              \
                    continue;                                                                      \
                }                                                                                  \
                sa[h] = pair_si512(loadu256(y[2 * h][i].qs), loadu256(y[2 * h + 1][i].qs));        \
                na[h] = legacy_neg(bias, sa[h]);                                                   \
                dy[h] = pair_ps512(f16x8(y[2 * h][i].d), f16x8(y[2 * h + 1][i].d));                \
            }                                                                                      \
            _Pragma("GCC unroll 8") for (int k = 0; k < NT; k++) {                                 \
                const XT *xb = &x[k][i];                                                           \
                const __m256i wv8 = DECODE;                                                        \
                const __m512i wu = _mm512_xor_si512(_mm512_broadcast_i64x4(wv8), bias);            \
                const __m512 dx = _mm512_cvtph_ps(_mm256_set1_epi16((short)xb->d));                \
                _Pragma("GCC unroll 2") for (int h = 0; h < NR4 / 2; h++) {                        \
                    const __m512i p = _mm512_dpbusd_epi32(na[h], wu, sa[h]);                       \
                    acc[k][h] = _mm512_fmadd_ps(_mm512_mul_ps(dx, dy[h]), _mm512_cvtepi32_ps(p),   \
                                                acc[k][h]);                                        \
                }                                                                                  \
            }                                                                                      \
        }                                                                                          \
        for (int k = 0; k < NT; k++)                                                               \
            for (int h = 0; h < NR4 / 2; h++) {                                                    \
                out[2 * h * ldo + k] = hsum_ps(_mm512_castps512_ps256(acc[k][h]));                 \
                out[(2 * h + 1) * ldo + k] = hsum_ps(_mm512_extractf32x8_ps(acc[k][h], 1));        \
            }                                                                                      \
    }

#define TILE_LEGACY1(NAME, XT, DECODE) TILE_LEGACY_NT(NAME, XT, DECODE, NT4, 0)

TILE_LEGACY1(tile_q8_0, block_q8_0, loadu256(xb->qs))
TILE_LEGACY1(tile_q4_0, block_q4_0, decode_q4_0(xb))
TILE_LEGACY1(tile_q5_0, block_q5_0, decode_q5_0(xb))
/* tile_q8_0 over eight weight rows (qt_mm_tile8_upto) */
TILE_LEGACY_NT(tile8_q8_0, block_q8_0, loadu256(xb->qs), 8, 0)
/* tile8_q8_0 on a panel of its four activation rows (a: the panel, as unused) */
TILE_LEGACY_NT(tile8_q8_0_panel, block_q8_0, loadu256(xb->qs), 8, 1)
static void ptile8_q8_0(const void *w, uint64_t ws, const void *panel, int64_t n, float *out,
                        int64_t ldo) {
    tile8_q8_0_panel(w, ws, panel, 0, n, out, ldo);
}

/* ----- gemv: weight rows against one activation row (a decode step's matmul) -----
 * qt_gemv_fn: QT_GEMV_ROWS weight rows against one activation row, each output
 * the single-row kernel's bits. The single-row legacy kernels carry one FMA
 * chain from block to block (llama.cpp's order), so a row runs at the chain's
 * latency; here two weight rows share a 512-bit vector (one in each half, the
 * activation block in both) and the rows' chains are independent. Each lane gets
 * the tile's integers (the bias trick, the same exact sums as the sign trick)
 * and the single-row kernel's float operations: (dx * dy) * sum + acc, then
 * hsum_ps of its half.
 *
 * Rows streamed from memory: the rows' streams are short (a row is a few KB) and
 * side by side, which the hardware prefetchers follow poorly (Zen 5, 64 MB of
 * Q5_0 rows: 16 GB/s a row at a time, 6 as four side by side). So a gemv call
 * prefetches a group's worth of bytes (its rows' bytes) further on, in step with
 * its block loop: rows are stored one after another, as a matmul's are, so the
 * calls' sweeps tile the matrix. The distance is one group, but at least
 * GEMV_AHEAD_MIN bytes: a group of short rows is too near to hide
 * the memory's latency (Q5_0 rows of 704 weights, as Gemma 4's expert down
 * projections, streamed: 17-21 GB/s a group ahead, 28-30 at 8 KB; 2048-weight
 * rows the same at both). __builtin_prefetch, because GCC 12 dropped
 * _mm_prefetch from the inlined K-quant bodies. */
#define GEMV_AHEAD_MIN 8192
static inline void gemv_sweep(const void *w, uint64_t ws, int64_t i, uint64_t block_bytes) {
    const uint64_t group = QT_GEMV_ROWS * ws;
    const char *p = (const char *)w + (group > GEMV_AHEAD_MIN ? group : GEMV_AHEAD_MIN) +
                    (uint64_t)i * QT_GEMV_ROWS * block_bytes;
    for (uint64_t b = 0; b < QT_GEMV_ROWS * block_bytes; b += 64)
        __builtin_prefetch(p + b, 0, 3);
}
/* Two weight rows' blocks decoded into one 512-bit vector, row a's 32 weight bytes in the
 * low half and row b's in the high one, already biased (each byte + 128, the bias trick's
 * unsigned operand): pair_si512(DECODE(a), DECODE(b)) ^ 0x80, in fewer operations. */
static inline __m512i nibbles32x2(const uint8_t *qa, const uint8_t *qb) {
    const __m512i q =
        _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_broadcastsi128_si256(loadu128(qa))),
                           _mm256_broadcastsi128_si256(loadu128(qb)), 1);
    return _mm512_and_si512(_mm512_mask_srli_epi16(q, 0xFF00FF00, q, 4), _mm512_set1_epi8(0x0f));
}
static inline __m512i gemv2_q8_0(const block_q8_0 *a, const block_q8_0 *b) {
    return _mm512_xor_si512(pair_si512(loadu256(a->qs), loadu256(b->qs)),
                            _mm512_set1_epi8((char)0x80));
}
/* Q4_0: (nibble - 8) + 128 */
static inline __m512i gemv2_q4_0(const block_q4_0 *a, const block_q4_0 *b) {
    return _mm512_add_epi8(nibbles32x2(a->qs, b->qs), _mm512_set1_epi8(120));
}
/* Q5_0: a set fifth bit makes the nibble's byte nibble ^ 0x80 (nibble + 128), a clear one
 * (nibble | 0xF0) ^ 0x80 = nibble | 0x70 (nibble - 16 + 128) */
static inline __m512i gemv2_q5_0(const block_q5_0 *a, const block_q5_0 *b) {
    uint32_t ha, hb;
    memcpy(&ha, a->qh, 4);
    memcpy(&hb, b->qh, 4);
    const __m512i top = _mm512_mask_mov_epi8(_mm512_set1_epi8(0x70),
                                             _cvtu64_mask64((uint64_t)ha | (uint64_t)hb << 32),
                                             _mm512_set1_epi8((char)0x80));
    return _mm512_or_si512(nibbles32x2(a->qs, b->qs), top);
}
/* Two fp16 scales as 8 equal floats each, a's in the low half (pair_ps512 of f16x8). */
static inline __m512 f16x8x2(pt_f16 a, pt_f16 b) {
    return _mm512_cvtph_ps(_mm256_set_m128i(_mm_set1_epi16((short)b), _mm_set1_epi16((short)a)));
}
#define GEMV_LEGACY(NAME, XT, DECODE2)                                                             \
    static void NAME(const void *w, uint64_t ws, const void *a, int64_t n, float *out) {           \
        const XT *x[QT_GEMV_ROWS];                                                                 \
        for (int k = 0; k < QT_GEMV_ROWS; k++)                                                     \
            x[k] = (const XT *)((const uint8_t *)w + (uint64_t)k * ws);                            \
        const block_q8_0 *y = a;                                                                   \
        const __m512i bias = _mm512_set1_epi8((char)0x80);                                         \
        __m512 acc[QT_GEMV_ROWS / 2];                                                              \
        for (int g = 0; g < QT_GEMV_ROWS / 2; g++)                                                 \
            acc[g] = _mm512_setzero_ps();                                                          \
        for (int64_t i = 0; i < n / 32; i++) {                                                     \
            const __m512i sa = _mm512_broadcast_i64x4(loadu256(y[i].qs));                          \
            const __m512i na = _mm512_sub_epi32(                                                   \
                _mm512_setzero_si512(), _mm512_dpbusd_epi32(_mm512_setzero_si512(), bias, sa));    \
            const __m512 dy = _mm512_cvtph_ps(_mm256_set1_epi16((short)y[i].d));                   \
            gemv_sweep(w, ws, i, sizeof(XT));                                                      \
            _Pragma("GCC unroll 4") for (int g = 0; g < QT_GEMV_ROWS / 2; g++) {                   \
                const XT *xb0 = &x[2 * g][i], *xb1 = &x[2 * g + 1][i];                             \
                const __m512i wu = DECODE2(xb0, xb1);                                              \
                const __m512 dx = f16x8x2(xb0->d, xb1->d);                                         \
                const __m512i p = _mm512_dpbusd_epi32(na, wu, sa);                                 \
                acc[g] = _mm512_fmadd_ps(_mm512_mul_ps(dx, dy), _mm512_cvtepi32_ps(p), acc[g]);    \
            }                                                                                      \
        }                                                                                          \
        for (int g = 0; g < QT_GEMV_ROWS / 2; g++) {                                               \
            out[2 * g] = hsum_ps(_mm512_castps512_ps256(acc[g]));                                  \
            out[2 * g + 1] = hsum_ps(_mm512_extractf32x8_ps(acc[g], 1));                           \
        }                                                                                          \
    }
GEMV_LEGACY(gemv_q8_0, block_q8_0, gemv2_q8_0)
GEMV_LEGACY(gemv_q4_0, block_q4_0, gemv2_q4_0)
GEMV_LEGACY(gemv_q5_0, block_q5_0, gemv2_q5_0)

/* A K-quant tile's body for nr activation rows (4: the tile; 1: the gemv, TILE_AND_GEMV_K
 * below), inlined into both so that its row loops unroll for the constant nr. */
#define TILE_NR(T)                                                                                 \
    static inline __attribute__((always_inline)) void tile_##T##_nr(                               \
        const void *w, uint64_t ws, const void *a, uint64_t as, int64_t n, float *out,             \
        int64_t ldo, const int nr)

/* ----- K-quant tiles -----
 * Q4_K: pair (k, r) gets the single-row kernel's own integer operations on
 * each 32-weight chunk (vpmaddubsw of the nibbles and activations, vpdpwssd by
 * the chunk's scale) and its float operations per block, in its order; weight
 * rows 2g and 2g + 1 share the 512-bit vectors, the activation chunk is in both
 * halves. The scale products y.d * d and -y.d * dmin are formed as vector
 * products of broadcasts (f16x8), the same products as the single-row kernel's
 * scalar ones. The 256-bit K-quant tiles ran below the four-row kernels on
 * rows streamed from memory on a Zen 4 machine, so mm_run gave each weight
 * tile's first activation group to the four-row kernel; the 512-bit tiles on
 * the Zen 5 one run ahead of it there too (Q2_K 159 -> 205 GFLOP/s, Q4_K
 * 126-164 -> 128-171 on 75 MB of rows), and every group takes the tile. Tried
 * on Zen 4 and dropped:
 * four-byte sums by vpdpbusd packed two chunks to an int32 lane (int16 halves)
 * for a single vpdpwssd, the same lanes with a multiply-add fewer per two
 * chunks (on Zen 5 too: 170-195 against 172-202 GFLOP/s, 2026-12-06). */

/* A Q8_K panel's block (PANEL_BLOCK bytes for four activation rows): row r's 256 bytes
 * at PANEL_ROW * r, each 32-byte chunk twice; at PANEL_SUMS the rows' eight pair sums of
 * bsums (int16, row r in 128-bit lane r); at PANEL_NDY their negated scales (row r's in
 * lanes 4r..4r+3); at PANEL_DY their scales. */
#define PANEL_BLOCK 2240
#define PANEL_ROW 512
#define PANEL_SUMS 2048
#define PANEL_NDY 2112
#define PANEL_DY 2176
_Static_assert(PANEL_DY + 4 * sizeof(float) <= PANEL_BLOCK, "a panel block holds its parts");

/* qt_panel_row_fn of the Q8_K activation rows */
static void panel_row_q8_K(const void *a, int64_t n, int r, void *panel) {
    const block_q8_K *y = a;
    for (int64_t i = 0; i < n / QK_K; i++) {
        uint8_t *pb = (uint8_t *)panel + (uint64_t)i * PANEL_BLOCK;
        for (int c = 0; c < QK_K / 32; c++) {
            memcpy(pb + PANEL_ROW * r + 64 * c, y[i].qs + 32 * c, 32);
            memcpy(pb + PANEL_ROW * r + 64 * c + 32, y[i].qs + 32 * c, 32);
        }
        int16_t sums[8];
        for (int j = 0; j < 8; j++)
            sums[j] = (int16_t)(y[i].bsums[2 * j] + y[i].bsums[2 * j + 1]);
        memcpy(pb + PANEL_SUMS + 16 * r, sums, sizeof sums);
        const float nd[4] = {-y[i].d, -y[i].d, -y[i].d, -y[i].d};
        memcpy(pb + PANEL_NDY + 16 * r, nd, sizeof nd);
        memcpy(pb + PANEL_DY + 4 * r, &y[i].d, sizeof y[i].d);
    }
}

/* Q4_K's body also reads its four activation rows from a panel (from_panel: a is
 * the panel, the ptile's; panel_row_q8_K above writes it): per block, each row's 256 bytes with
 * every 32-byte chunk twice (chunk2x512's dup), the rows' pair sums of bsums in
 * the 128-bit lanes of one vector, the negated scales four times each in
 * another, and the scales: what the tile would otherwise build from the Q8_K
 * rows in every call (a broadcast load per chunk, a horizontal add per row, a
 * permute), built once per matmul. The same numbers, so the same bits. */
static inline __attribute__((always_inline)) void tile_q4_K_nr(const void *w, uint64_t ws,
                                                               const void *a, uint64_t as,
                                                               int64_t n, float *out, int64_t ldo,
                                                               const int nr, const int from_panel) {
    ROWS4(block_q4_K, w, ws, x);
    ROWS4(block_q8_K, a, as, y);
    const __m512i m4 = _mm512_set1_epi8(0x0f);
    __m512 acc[NT4 / 2][NR4]; /* weight rows 2g (low half) and 2g + 1 (high half) */
    /* the mins terms: the single-row kernel's 4-lane accumulator of pair (k, r) in
     * 128-bit lane r of acc_m[k], so one 512-bit operation is its operation for four
     * activation rows */
    __m512 acc_m[NT4];
    zero512(acc);
    for (int k = 0; k < NT4; k++)
        acc_m[k] = _mm512_setzero_ps();
    for (int64_t i = 0; i < n / QK_K; i++) {
        if (nr == 1) gemv_sweep(w, ws, i, sizeof(block_q4_K));
        __m512i q8s4;
        __m512 ndy4;
        const int8_t *q8[NR4];
        float dy[NR4];
        if (from_panel) {
            const uint8_t *pb = (const uint8_t *)a + (uint64_t)i * PANEL_BLOCK;
            q8s4 = _mm512_loadu_si512(pb + PANEL_SUMS);
            ndy4 = _mm512_loadu_ps(pb + PANEL_NDY);
            memcpy(dy, pb + PANEL_DY, sizeof dy);
            for (int r = 0; r < NR4; r++)
                q8[r] = (const int8_t *)pb + PANEL_ROW * r;
        } else {
            __m128i q8s[NR4];
            for (int r = 0; r < NR4; r++) /* a gemv's row once, in every lane */
                q8s[r] = r < nr
                             ? _mm_hadd_epi16(loadu128(y[r][i].bsums), loadu128(y[r][i].bsums + 8))
                             : q8s[0];
            q8s4 = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_set_m128i(q8s[1], q8s[0])),
                                      _mm256_set_m128i(q8s[3], q8s[2]), 1);
            ndy4 = _mm512_permutexvar_ps(
                _mm512_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3),
                _mm512_castps128_ps512(
                    _mm_setr_ps(-y[0][i].d, -y[1][i].d, -y[2][i].d, -y[3][i].d)));
            for (int r = 0; r < NR4; r++) {
                q8[r] = y[r][i].qs;
                dy[r] = y[r][i].d;
            }
        }
#pragma GCC unroll 2
        for (int g = 0; g < NT4 / 2; g++) {
            const block_q4_K *xa = &x[2 * g][i], *xb = &x[2 * g + 1][i];
            const __m128i scmn[2] = {k4_scales_mins(xa->scales), k4_scales_mins(xb->scales)};
            const pt_f16 dmin[2] = {xa->dmin, xb->dmin};
#pragma GCC unroll 2
            for (int u = 0; u < 2; u++) {
                const __m512i mins =
                    _mm512_broadcast_i32x4(_mm_cvtepu8_epi16(_mm_srli_si128(scmn[u], 8)));
                const __m512i pm = _mm512_madd_epi16(mins, q8s4);
                const __m512 dm = _mm512_cvtph_ps(_mm256_set1_epi16((short)dmin[u]));
                acc_m[2 * g + u] = _mm512_fmadd_ps(_mm512_mul_ps(ndy4, dm), _mm512_cvtepi32_ps(pm),
                                                   acc_m[2 * g + u]);
            }
            const __m512 d = pair_ps512(f16x8(xa->d), f16x8(xb->d));
            const __m512i sc16 =
                pair_si512(_mm256_broadcastsi128_si256(_mm_cvtepu8_epi16(scmn[0])),
                           _mm256_broadcastsi128_si256(_mm_cvtepu8_epi16(scmn[1])));
            __m512i sumi[NR4];
            for (int r = 0; r < nr; r++)
                sumi[r] = _mm512_setzero_si512();
#pragma GCC unroll 4
            for (int c = 0; c < 4; c++) {
                const __m512i q = pair_si512(loadu256(xa->qs + 32 * c), loadu256(xb->qs + 32 * c));
                chunk2x512(sumi, _mm512_and_si512(q, m4),
                           _mm512_and_si512(_mm512_srli_epi16(q, 4), m4), sc16, c, q8, from_panel,
                           nr);
            }
            block_end512d(acc[g], sumi, dy, d, nr);
        }
    }
    float mins[NT4][NR4];
    for (int k = 0; k < NT4; k++) {
        float lanes[16];
        _mm512_storeu_ps(lanes, acc_m[k]);
        for (int r = 0; r < NR4; r++) {
            __m128 m = _mm_loadu_ps(lanes + 4 * r);
            m = _mm_add_ps(m, _mm_movehl_ps(m, m));
            m = _mm_add_ss(m, _mm_movehdup_ps(m));
            mins[k][r] = _mm_cvtss_f32(m);
        }
    }
    tile_out512(acc, (const float(*)[NR4])mins, out, ldo, nr);
}

/* Q2_K: as tile_q4_K, two weight rows to a 512-bit vector (g: rows 2g, 2g + 1)
 * and each activation chunk in both halves; per pair the single-row kernel's
 * mins FMA, then its chunks' vpmaddubsw / vpdpwssd lanes, then its block FMA. */
TILE_NR(q2_K) {
    ROWS4(block_q2_K, w, ws, x);
    ROWS4(block_q8_K, a, as, y);
    const __m128i m4 = _mm_set1_epi8(0x0f);
    const __m512i m3 = _mm512_set1_epi8(3);
    __m512 acc[NT4 / 2][NR4];
    zero512(acc);
    for (int64_t i = 0; i < n / QK_K; i++) {
        if (nr == 1) gemv_sweep(w, ws, i, sizeof(block_q2_K));
#pragma GCC unroll 2
        for (int g = 0; g < NT4 / 2; g++) {
            const block_q2_K *xa = &x[2 * g][i], *xb = &x[2 * g + 1][i];
            const __m128i raw_a = loadu128(xa->scales), raw_b = loadu128(xb->scales);
            const __m512i mn =
                pair_si512(_mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(raw_a, 4), m4)),
                           _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(raw_b, 4), m4)));
            const __m512 dmin = pair_ps512(f16x8(xa->dmin), f16x8(xb->dmin));
            const __m512 d = pair_ps512(f16x8(xa->d), f16x8(xb->d));
            __m512i sumi[NR4];
#pragma GCC unroll 4
            for (int r = 0; r < nr; r++) {
                const __m512i pm =
                    _mm512_madd_epi16(mn, _mm512_broadcast_i64x4(loadu256(y[r][i].bsums)));
                acc[g][r] = _mm512_fmadd_ps(_mm512_mul_ps(_mm512_set1_ps(-y[r][i].d), dmin),
                                            _mm512_cvtepi32_ps(pm), acc[g][r]);
                sumi[r] = _mm512_setzero_si512();
            }
            __m256i half_a[2], half_b[2];
            scales16_u8(_mm_and_si128(raw_a, m4), &half_a[0], &half_a[1]);
            scales16_u8(_mm_and_si128(raw_b, m4), &half_b[0], &half_b[1]);
#pragma GCC unroll 2
            for (int h = 0; h < 2; h++) {
                const __m512i half = pair_si512(half_a[h], half_b[h]);
                const __m512i q = pair_si512(loadu256(xa->qs + 32 * h), loadu256(xb->qs + 32 * h));
#pragma GCC unroll 4
                for (int j = 0; j < 4; j++) {
                    const __m512i v =
                        _mm512_and_si512(_mm512_srl_epi16(q, _mm_cvtsi32_si128(2 * j)), m3);
                    const __m512i cs = chunk_scales512(half, j);
#pragma GCC unroll 4
                    for (int r = 0; r < nr; r++)
                        sumi[r] = _mm512_dpwssd_epi32(
                            sumi[r], _mm512_maddubs_epi16(v, act2(y[r][i].qs + 128 * h + 32 * j)),
                            cs);
                }
            }
            block_end512(acc[g], sumi, y, i, d, nr);
        }
    }
    tile_out512(acc, NULL, out, ldo, nr);
}

/* Q6_K: as tile_q2_K; per pair the single-row kernel's offset term (-32 *
 * sum of scale x group sum) as the lanes' start, its four chunks per half and
 * its block FMA. */
TILE_NR(q6_K) {
    ROWS4(block_q6_K, w, ws, x);
    ROWS4(block_q8_K, a, as, y);
    const __m512i m4 = _mm512_set1_epi8(0x0f), m3 = _mm512_set1_epi8(0x30);
    __m512 acc[NT4 / 2][NR4];
    zero512(acc);
    for (int64_t i = 0; i < n / QK_K; i++) {
        if (nr == 1) gemv_sweep(w, ws, i, sizeof(block_q6_K));
#pragma GCC unroll 2
        for (int g = 0; g < NT4 / 2; g++) {
            const block_q6_K *xa = &x[2 * g][i], *xb = &x[2 * g + 1][i];
            const __m128i sc_a = loadu128(xa->scales), sc_b = loadu128(xb->scales);
            const __m512i sc16 = pair_si512(_mm256_cvtepi8_epi16(sc_a), _mm256_cvtepi8_epi16(sc_b));
            const __m512 d = pair_ps512(f16x8(xa->d), f16x8(xb->d));
            __m512i sumi[NR4];
#pragma GCC unroll 4
            for (int r = 0; r < nr; r++)
                sumi[r] = _mm512_sub_epi32(
                    _mm512_setzero_si512(),
                    _mm512_slli_epi32(
                        _mm512_madd_epi16(sc16, _mm512_broadcast_i64x4(loadu256(y[r][i].bsums))),
                        5));
            __m256i half_a[2], half_b[2];
            scales16_s8(sc_a, &half_a[0], &half_a[1]);
            scales16_s8(sc_b, &half_b[0], &half_b[1]);
#pragma GCC unroll 2
            for (int h = 0; h < 2; h++) {
                const __m512i half = pair_si512(half_a[h], half_b[h]);
                const __m512i la = pair_si512(loadu256(xa->ql + 64 * h), loadu256(xb->ql + 64 * h));
                const __m512i lb =
                    pair_si512(loadu256(xa->ql + 64 * h + 32), loadu256(xb->ql + 64 * h + 32));
                const __m512i hq = pair_si512(loadu256(xa->qh + 32 * h), loadu256(xb->qh + 32 * h));
                const __m512i v[4] = {
                    _mm512_or_si512(_mm512_and_si512(la, m4),
                                    _mm512_and_si512(_mm512_slli_epi16(hq, 4), m3)),
                    _mm512_or_si512(_mm512_and_si512(lb, m4),
                                    _mm512_and_si512(_mm512_slli_epi16(hq, 2), m3)),
                    _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(la, 4), m4),
                                    _mm512_and_si512(hq, m3)),
                    _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(lb, 4), m4),
                                    _mm512_and_si512(_mm512_srli_epi16(hq, 2), m3))};
#pragma GCC unroll 4
                for (int k = 0; k < 4; k++) {
                    const __m512i cs = chunk_scales512(half, k);
#pragma GCC unroll 4
                    for (int r = 0; r < nr; r++)
                        sumi[r] = _mm512_dpwssd_epi32(
                            sumi[r],
                            _mm512_maddubs_epi16(v[k], act2(y[r][i].qs + 128 * h + 32 * k)), cs);
                }
            }
            block_end512(acc[g], sumi, y, i, d, nr);
        }
    }
    tile_out512(acc, NULL, out, ldo, nr);
}

/* Q5_K: as tile_q4_K with the fifth bit. The mins term is the single-row
 * kernel's one float per pair, fmaf(-y.d * dmin, total, summs): here lane r of
 * summs[k] for the four activation rows at once, the same single rounding; the
 * block's integer total by another route (vpmaddwd of the mins and the
 * activation's pair sums, then horizontal adds), the same integer. */
TILE_NR(q5_K) {
    ROWS4(block_q5_K, w, ws, x);
    ROWS4(block_q8_K, a, as, y);
    const __m512i m4 = _mm512_set1_epi8(0x0f), b4 = _mm512_set1_epi8(0x10);
    __m512 acc[NT4 / 2][NR4];
    __m128 summs[NT4]; /* lane r: pair (k, r) */
    zero512(acc);
    for (int k = 0; k < NT4; k++)
        summs[k] = _mm_setzero_ps();
    for (int64_t i = 0; i < n / QK_K; i++) {
        if (nr == 1) gemv_sweep(w, ws, i, sizeof(block_q5_K));
        __m128i q8s[NR4];
        for (int r = 0; r < NR4; r++) /* a gemv's row once, in every lane */
            q8s[r] = r < nr ? _mm_hadd_epi16(loadu128(y[r][i].bsums), loadu128(y[r][i].bsums + 8))
                            : q8s[0];
        const __m128 ndy = _mm_setr_ps(-y[0][i].d, -y[1][i].d, -y[2][i].d, -y[3][i].d);
        const int8_t *q8[NR4];
        for (int r = 0; r < NR4; r++)
            q8[r] = y[r][i].qs;
#pragma GCC unroll 2
        for (int g = 0; g < NT4 / 2; g++) {
            const block_q5_K *xa = &x[2 * g][i], *xb = &x[2 * g + 1][i];
            const __m128i scmn[2] = {k4_scales_mins(xa->scales), k4_scales_mins(xb->scales)};
            const pt_f16 dmin[2] = {xa->dmin, xb->dmin};
#pragma GCC unroll 2
            for (int u = 0; u < 2; u++) {
                const __m128i mins = _mm_cvtepu8_epi16(_mm_srli_si128(scmn[u], 8));
                const __m128i tot = _mm_hadd_epi32(
                    _mm_hadd_epi32(_mm_madd_epi16(mins, q8s[0]), _mm_madd_epi16(mins, q8s[1])),
                    _mm_hadd_epi32(_mm_madd_epi16(mins, q8s[2]), _mm_madd_epi16(mins, q8s[3])));
                summs[2 * g + u] =
                    _mm_fmadd_ps(_mm_mul_ps(ndy, _mm256_castps256_ps128(f16x8(dmin[u]))),
                                 _mm_cvtepi32_ps(tot), summs[2 * g + u]);
            }
            const __m512 d = pair_ps512(f16x8(xa->d), f16x8(xb->d));
            const __m512i sc16 =
                pair_si512(_mm256_broadcastsi128_si256(_mm_cvtepu8_epi16(scmn[0])),
                           _mm256_broadcastsi128_si256(_mm_cvtepu8_epi16(scmn[1])));
            const __m512i qh = pair_si512(loadu256(xa->qh), loadu256(xb->qh));
            __m512i sumi[NR4];
            for (int r = 0; r < nr; r++)
                sumi[r] = _mm512_setzero_si512();
#pragma GCC unroll 4
            for (int c = 0; c < 4; c++) {
                const __m512i q = pair_si512(loadu256(xa->qs + 32 * c), loadu256(xb->qs + 32 * c));
                const __m512i hb = _mm512_srl_epi16(qh, _mm_cvtsi32_si128(2 * c));
                const __m512i v0 = _mm512_or_si512(_mm512_and_si512(q, m4),
                                                   _mm512_and_si512(_mm512_slli_epi16(hb, 4), b4));
                const __m512i v1 = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(q, 4), m4),
                                                   _mm512_and_si512(_mm512_slli_epi16(hb, 3), b4));
                chunk2x512(sumi, v0, v1, sc16, c, q8, 0, nr);
            }
            block_end512(acc[g], sumi, y, i, d, nr);
        }
    }
    float sm[NT4][NR4];
    for (int k = 0; k < NT4; k++)
        _mm_storeu_ps(sm[k], summs[k]);
    tile_out512(acc, (const float(*)[NR4])sm, out, ldo, nr);
}

static void tile_q4_K(const void *w, uint64_t ws, const void *a, uint64_t as, int64_t n, float *out,
                      int64_t ldo) {
    tile_q4_K_nr(w, ws, a, as, n, out, ldo, NR4, 0);
}
static void gemv_q4_K(const void *w, uint64_t ws, const void *a, int64_t n, float *out) {
    tile_q4_K_nr(w, ws, a, 0, n, out, 0, 1, 0);
}
/* qt_ptile_fn: tile_q4_K on a panel of its four activation rows */
static void ptile_q4_K(const void *w, uint64_t ws, const void *panel, int64_t n, float *out,
                       int64_t ldo) {
    tile_q4_K_nr(w, ws, panel, 0, n, out, ldo, NR4, 1);
}

/* Each K-quant type's tile (nr = 4 activation rows) and gemv (nr = 1: the
 * activation row at stride 0, so the four-lane mins terms see it four times
 * and lane 0 is the row's) from its one body. */
#define TILE_AND_GEMV_K(T)                                                                         \
    static void tile_##T(const void *w, uint64_t ws, const void *a, uint64_t as, int64_t n,        \
                         float *out, int64_t ldo) {                                                \
        tile_##T##_nr(w, ws, a, as, n, out, ldo, NR4);                                             \
    }                                                                                              \
    static void gemv_##T(const void *w, uint64_t ws, const void *a, int64_t n, float *out) {       \
        tile_##T##_nr(w, ws, a, 0, n, out, 0, 1);                                                  \
    }
TILE_AND_GEMV_K(q2_K)
TILE_AND_GEMV_K(q5_K)
TILE_AND_GEMV_K(q6_K)
#endif

#if defined(X86_BODY_TILES)
/* A legacy row widened to Q8_0 blocks (qt_widen_fn): each block's scale and DECODE's bytes,
 * the ones TILE_LEGACY1 would decode in every call. */
#define WIDEN_LEGACY(NAME, XT, DECODE)                                                             \
    static void NAME(const void *w, int64_t n, void *out) {                                        \
        const XT *x = w;                                                                           \
        block_q8_0 *o = out;                                                                       \
        for (int64_t i = 0; i < n / 32; i++) {                                                     \
            const XT *xb = &x[i];                                                                  \
            _mm256_storeu_si256((__m256i *)(void *)o[i].qs, DECODE);                               \
            o[i].d = xb->d;                                                                        \
        }                                                                                          \
    }
WIDEN_LEGACY(widen_q4_0, block_q4_0, decode_q4_0(xb))
WIDEN_LEGACY(widen_q5_0, block_q5_0, decode_q5_0(xb))

/* The widening of `type` to Q8_0 blocks for tile_q8_0, or NULL (none). */
static qt_widen_fn x86_widen_table(uint32_t type) {
    switch (type) {
    case QT_Q4_0: return widen_q4_0;
    case QT_Q5_0: return widen_q5_0;
    default: return NULL;
    }
}
#endif

/* The 4 x 4 tile kernel for `type`, or NULL (none at this level). */
static qt_tile_fn x86_tile_table(uint32_t type) {
#if defined(X86_BODY_TILES)
    switch (type) {
    case QT_Q8_0: return tile_q8_0;
    case QT_Q4_0: return tile_q4_0;
    case QT_Q5_0: return tile_q5_0;
    case QT_Q2_K: return tile_q2_K;
    case QT_Q4_K: return tile_q4_K;
    case QT_Q5_K: return tile_q5_K;
    case QT_Q6_K: return tile_q6_K;
    default: return NULL;
    }
#else
    (void)type;
    return NULL;
#endif
}

#if defined(X86_BODY_TILES)
/* The gemv kernel for `type`, or NULL (none at this level). */
static qt_gemv_fn x86_gemv_table(uint32_t type) {
    switch (type) {
    case QT_Q8_0: return gemv_q8_0;
    case QT_Q4_0: return gemv_q4_0;
    case QT_Q5_0: return gemv_q5_0;
    case QT_Q2_K: return gemv_q2_K;
    case QT_Q4_K: return gemv_q4_K;
    case QT_Q5_K: return gemv_q5_K;
    case QT_Q6_K: return gemv_q6_K;
    default: return NULL;
    }
}
#endif

/* The four-row kernel for `type`, or NULL (the caller runs the single-row one four times). */
static qt_dot4_fn x86_dot4_table(uint32_t type) {
    switch (type) {
    case QT_Q4_0: return dot4_q4_0;
    case QT_Q5_0: return dot4_q5_0;
    case QT_Q8_0: return dot4_q8_0;
    case QT_MXFP4: return dot4_mxfp4;
    case QT_Q2_K: return dot4_q2_K;
    case QT_Q3_K: return dot4_q3_K;
    case QT_Q4_K: return dot4_q4_K;
    case QT_Q5_K: return dot4_q5_K;
    case QT_Q6_K: return dot4_q6_K;
    default: return NULL;
    }
}

/* ===== Table ===== */

/* The kernel for `type`, or NULL when this file has none. */
static qt_dot_fn x86_body_table(uint32_t type) {
    switch (type) {
    case QT_F32: return dot_f32;
    case QT_F16: return dot_f16;
    case QT_Q4_0: return dot_q4_0;
    case QT_Q5_0: return dot_q5_0;
    case QT_Q8_0: return dot_q8_0;
    case QT_IQ4_NL: return dot_iq4_nl;
    case QT_MXFP4: return dot_mxfp4;
    case QT_Q2_K: return dot_q2_K;
    case QT_Q3_K: return dot_q3_K;
    case QT_Q4_K: return dot_q4_K;
    case QT_Q5_K: return dot_q5_K;
    case QT_Q6_K: return dot_q6_K;
    case QT_IQ2_XXS: return dot_iq2_xxs;
    case QT_IQ4_XS: return dot_iq4_xs;
    default: return NULL;
    }
}

#endif
