/* quant.h — the kernel interface for ggml tensor types: decode, activation
 * quantisation, dot products, and (for some types) weight quantisation.
 *
 * Correctness model: for every type there is ONE scalar reference implementation
 * (quant_ref.c, quant_iq.c). SIMD paths (dot_avx2.c, dot_avx512.c) are optional
 * accelerations that tests compare against the scalar reference; the dispatcher
 * picks the best one the CPU supports at run time.
 *
 * Activation scheme (the same as llama.cpp's CPU backend, so that petrel's
 * logits match the llama.cpp references to float rounding): before a dot
 * product with a quantised weight row, the float activations are converted to
 * the weight type's `act_type`:
 *   - Q8_K (per 256: float scale = max|x|/127 with the sign of the extreme
 *     value, round-to-nearest-even) for the K-quants and the 256-block IQ types;
 *   - Q8_0 (per 32: fp16 scale = amax/127) for Q4_0, Q5_0, Q8_0, IQ4_NL, MXFP4;
 *   - Q8_1 (Q8_0 plus fp16 d*sum) for Q4_1, Q5_1;
 *   - F16 for F16 weights, BF16 for BF16 weights, F32 (no conversion) for F32.
 * The error this adds is the 8-bit rounding of the activations: about 0.4% of
 * max|x| per element before averaging; the fixtures README measures its effect
 * on whole-model logits (cos >= 0.99 per row versus a float-activation engine).
 *
 * All lengths `n` are numbers of weights and must be multiples of the type's
 * block size; callers validate that once when binding tensors.
 */
#ifndef PT_QUANT_H
#define PT_QUANT_H

#include <stddef.h>
#include <stdint.h>

#include "qtypes.h"

/* ===== Scalar reference (the source of truth) ===== */

/* Decode n weights of `type` from src into dst. */
void qt_dequant_ref(uint32_t type, const void *src, float *dst, int64_t n);

/* Convert n float activations to act_type (QT_F32, QT_F16, QT_BF16, QT_Q8_0,
 * QT_Q8_1 or QT_Q8_K), writing qt_row_bytes(act_type, n) bytes to dst. */
void qt_quantize_act_ref(uint32_t act_type, const float *x, void *dst, int64_t n);
/* The same conversion, the fastest this CPU has (resolved once; thread-safe): the same bits
 * as qt_quantize_act_ref for every input (simd_quantize_act_bit_identical). */
typedef void (*qt_quantize_act_fn)(uint32_t act_type, const float *x, void *dst, int64_t n);
qt_quantize_act_fn qt_quantize_act_best(void);
qt_quantize_act_fn qt_quantize_act_avx2(void); /* dot_avx2.c; NULL elsewhere */

/* Dot product of n weights of `type` with n activations already converted to
 * qt_get(type)->act_type. Accumulation order follows ggml's generic code. */
float qt_dot_ref(uint32_t type, const void *w, const void *a, int64_t n);

/* Quantise n weights (a whole number of blocks) of float data to `type`.
 * Supported for the types listed by qt_can_quantize(). Not used on the hot
 * path: it serves tests, the GGUF writer and synthetic-model tools. */
int qt_can_quantize(uint32_t type);
void qt_quantize_ref(uint32_t type, const float *x, void *dst, int64_t n);

/* ===== Run-time dispatch ===== */

/* Levels are ordered within an architecture: x86-64 has AVX2 and AVX-512 (F+BW+VL+VNNI);
 * arm64 has NEON (ARMv8.0 Advanced SIMD), DOTPROD (ARMv8.2 sdot/udot) and I8MM (ARMv8.6
 * smmla). A level's number means one or the other by the build's architecture. */
enum { QT_ISA_SCALAR = 0, QT_ISA_AVX2 = 1, QT_ISA_AVX512 = 2 };
enum { QT_ISA_NEON = 1, QT_ISA_DOTPROD = 2, QT_ISA_I8MM = 3 };
#if defined(__aarch64__)
#define QT_ISA_TOP QT_ISA_I8MM
#else
#define QT_ISA_TOP QT_ISA_AVX512
#endif
/* The level's name ("scalar", "avx2", "avx512-vnni", "neon", "dotprod", "i8mm"). */
const char *qt_isa_name(int isa);

typedef float (*qt_dot_fn)(const void *w, const void *a, int64_t n);

/* Highest ISA level this CPU (and this build) supports. */
int qt_isa_detect(void);

/* The dot product for `type` at exactly ISA level `isa`, or NULL when that
 * level has no implementation for the type (the scalar level always has one
 * for every type whose act_type >= 0). */
qt_dot_fn qt_dot_impl(uint32_t type, int isa);

/* The fastest available dot product for `type` on this CPU. */
qt_dot_fn qt_dot_best(uint32_t type);

/* The fastest one at ISA level max_isa or below (max_isa < 0: qt_dot_best).
 * Lets a user or a test pin the kernels, e.g. to compare SIMD with scalar. */
qt_dot_fn qt_dot_upto(uint32_t type, int max_isa);

/* Four activation rows against one weight row: out[r] = dot(w, a + r * a_stride, n)
 * for r = 0..3, each bit-identical to the single-row kernel of the same ISA level
 * (every row keeps its own accumulators, in the same order); the weight blocks
 * are loaded and unpacked once for the four. For batched matmuls (prompts). */
typedef void (*qt_dot4_fn)(const void *w, const void *a, uint64_t a_stride, int64_t n, float *out);
/* The four-row kernel at exactly ISA level isa (NULL: none; the scalar level has none). */
qt_dot4_fn qt_dot4_impl(uint32_t type, int isa);
/* The four-row kernel of the level qt_dot_upto(type, max_isa) picks, or NULL. */
qt_dot4_fn qt_dot4_upto(uint32_t type, int max_isa);

/* Four weight rows against four activation rows: out[r * ldo + k] =
 * dot(w + k * w_stride, a + r * a_stride, n) for k, r = 0..3, each bit-identical
 * to the single-row kernel of the same ISA level (a GEMM micro-kernel: loads of
 * both operands shared across the tile, every output's float order unchanged). */
typedef void (*qt_tile_fn)(const void *w, uint64_t w_stride, const void *a, uint64_t a_stride,
                           int64_t n, float *out, int64_t ldo);
/* The tile kernel at exactly ISA level isa (NULL: none). */
qt_tile_fn qt_tile_impl(uint32_t type, int isa);

/* Panel order. llama.cpp's CPU backend computes a batched matmul of some types
 * in another float order than its single-row vec_dot:
 *   - the 256-weight IQ types (IQ1_S, IQ1_M, IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS,
 *     IQ3_S, IQ4_XS), through its IQ panel gemm: per block the exact integer
 *     sum(iscale * q * y), then acc = fma((float)isum, dfac * d8, acc) (dfac:
 *     the block scale times the type's constant 1/8, 1/4 or 1);
 *   - IQ4_NL, through llamafile's tinyBLAS: one 8-lane float accumulator over
 *     all blocks (fma(dw * dy, int lanes)), one horizontal sum at the end,
 *     where vec_dot alternates two accumulators;
 *   - F32, through tinyBLAS: one 16-float lane vector per output, folded
 *     pairwise, where vec_dot uses qt_f32_dot_ref's 64 lanes.
 * (Q8_0 and Q4_0 use one accumulator in both paths, so their ordinary kernels
 * are both.) qt_dot_panel_ref is the reference; NULL for other types. */
int qt_has_panel(uint32_t type); /* 1: the type has a panel order */
float qt_dot_panel_ref(uint32_t type, const void *w, const void *a, int64_t n);
qt_dot_fn qt_dot_panel_impl(uint32_t type, int isa);
/* The fastest panel kernel at ISA level max_isa or below (max_isa < 0: any). */
qt_dot_fn qt_dot_panel_upto(uint32_t type, int max_isa);

/* ===== The matmul kernels: one arithmetic per type =====
 * What the engine's matmuls (nn/matmul.c) use for a weight row of `type`, at
 * ISA level max_isa or below: the panel order where the type has one, else
 * the ordinary kernel; and a four-row kernel bit-identical to that one (NULL:
 * none, rows go one at a time). The choice is a function of the type alone,
 * never of how many activation rows a matmul has nor of which tensor the row
 * belongs to: that is what makes a position's logits independent of the batch
 * it was evaluated in (ARCHITECTURE.md, "One arithmetic"). llama.cpp switches
 * order with the row count; petrel takes its batched order for every row:
 * the order of the prompt pass the fixture references were made with, which
 * kept every fixture closer to them than the single-row order did
 * (ARCHITECTURE.md gives the figures). */
qt_dot_fn qt_mm_dot_upto(uint32_t type, int max_isa);
qt_dot4_fn qt_mm_dot4_upto(uint32_t type, int max_isa);
/* The tile kernel of the level qt_mm_dot_upto picks, or NULL. */
qt_tile_fn qt_mm_tile_upto(uint32_t type, int max_isa);

/* The eight-weight-row form of qt_mm_tile_upto's tile kernel for `type` (out[r * ldo + k] for
 * k = 0..7, each the bits of the four-row tile), or NULL: none. */
qt_tile_fn qt_mm_tile8_upto(uint32_t type, int max_isa);

/* Activation panels: a matmul's converted activation rows, four at a time, laid out once more
 * for tile kernels that read them as they use them (Q4_K: each 32-byte chunk twice, the
 * block's pair sums and scales ready for its vector operations; Q8_0: two rows' blocks side
 * by side with their bias corrections and float scales), so that what a tile would rebuild
 * from the converted rows in each of its calls is built once per matmul. row writes row r
 * (0..3) of a group's panel from the converted row a of n values; a group's panel takes
 * block_bytes per block_values values. tile and tile8 are the type's tiles (qt_mm_tile_upto,
 * qt_mm_tile8_upto) on a panel of their four activation rows, the same bits; NULL: that tile
 * reads the converted rows. */
typedef void (*qt_panel_row_fn)(const void *a, int64_t n, int r, void *panel);
typedef void (*qt_ptile_fn)(const void *w, uint64_t w_stride, const void *panel, int64_t n,
                            float *out, int64_t ldo);
typedef struct qt_ptile {
    qt_ptile_fn tile, tile8;
    qt_panel_row_fn row;
    uint32_t block_values, block_bytes;
} qt_ptile;
/* 1: the type has panel tiles at that level (*p); 0: none. */
int qt_mm_ptile_upto(uint32_t type, int max_isa, qt_ptile *p);

/* gemv: QT_GEMV_ROWS weight rows against one activation row (a decode step's matmul):
 * out[k] = dot(w + k * w_stride, a, n), each bit-identical to qt_mm_dot_upto's single-row
 * kernel; the rows' float chains run side by side. NULL: none at that level. */
#define QT_GEMV_ROWS 4
typedef void (*qt_gemv_fn)(const void *w, uint64_t w_stride, const void *a, int64_t n, float *out);
qt_gemv_fn qt_mm_gemv_upto(uint32_t type, int max_isa);

/* Widening: a weight row of n weights of `type` written as Q8_0 blocks (each block's fp16
 * scale and the 32 signed weight bytes the type's kernels decode), so that a matmul with many
 * activation rows decodes a weight block once rather than once per tile call. On a widened
 * row the Q8_0 tile of qt_mm_tile_upto's level computes the bits the type's own tile does
 * (the legacy tiles differ only in how they decode the weight bytes). NULL: the type has no
 * widening at that level. */
typedef void (*qt_widen_fn)(const void *w, int64_t n, void *out);
qt_widen_fn qt_mm_widen_upto(uint32_t type, int max_isa);

/* SIMD tables, filled by dot_avx2.c / dot_avx512.c (NULL entries: none). */
qt_dot_fn qt_dot_avx2(uint32_t type);
qt_dot_fn qt_dot_avx512(uint32_t type);
qt_dot_fn qt_dot_panel_avx2(uint32_t type);
qt_dot_fn qt_dot_panel_avx512(uint32_t type);
qt_dot4_fn qt_dot4_avx2(uint32_t type);
qt_dot4_fn qt_dot4_avx512(uint32_t type);
qt_tile_fn qt_tile_avx2(uint32_t type);
qt_tile_fn qt_tile_avx512(uint32_t type);
qt_widen_fn qt_widen_avx512(uint32_t type);
qt_tile_fn qt_tile8_avx512(uint32_t type);
int qt_ptile_avx512(uint32_t type, qt_ptile *p);
qt_gemv_fn qt_gemv_avx512(uint32_t type);

/* arm64 tables (dot_neon.c, dot_dotprod.c; NULL entries: none). */
qt_dot_fn qt_dot_neon(uint32_t type);
qt_dot4_fn qt_dot4_neon(uint32_t type);
qt_dot_fn qt_dot_dotprod(uint32_t type);
qt_dot4_fn qt_dot4_dotprod(uint32_t type);
qt_dot_fn qt_dot_panel_neon(uint32_t type);
qt_dot_fn qt_dot_panel_dotprod(uint32_t type);
/* Four-row forms of the panel kernels, bit-identical per row (NULL: none); qt_mm_dot4_upto
 * returns them on arm64 (x86's panel kernels have none). */
qt_dot4_fn qt_dot4_panel_neon(uint32_t type);
qt_dot4_fn qt_dot4_panel_dotprod(uint32_t type);
/* The i8mm level's tile kernels (dot_i8mm.c, smmla: Q8_0, Q4_0, Q5_0, Q4_K, Q5_K, Q6_K; NULL:
 * none). */
qt_tile_fn qt_tile_i8mm(uint32_t type);

/* ===== F32 kernels in ggml's lane order =====
 * The attention arithmetic behind nn/ops.c (nn_dot_f32, nn_wsum_add), which
 * explains the order and why it matters. dot: ggml_vec_dot_f32's AVX-512
 * order: x[i] * y[i] fused-multiply-added into lane i % 64 for the first
 * n & ~63 elements, the 64 lanes folded pairwise (lane l += lane l + w for
 * w = 32, 16, ..., 1), then the remaining products added one by one, unfused.
 * axpy: acc[i] = fma(a, x[i], acc[i]). Fused multiply-adds are exact and the
 * order is fixed, so every ISA level returns the same bits (test_simd checks). */
typedef struct qt_f32_kernels {
    float (*dot)(const float *x, const float *y, int64_t n);
    void (*axpy)(float *acc, float a, const float *x, int64_t n);
    /* out[0] = dot(x, y0), out[1] = dot(x, y1), the same bits as two dot calls */
    void (*dot2)(const float *x, const float *y0, const float *y1, int64_t n, float *out);
} qt_f32_kernels;
float qt_f32_dot_ref(const float *x, const float *y, int64_t n);
void qt_f32_axpy_ref(float *acc, float a, const float *x, int64_t n);
void qt_f32_dot2_ref(const float *x, const float *y0, const float *y1, int64_t n, float *out);
/* The kernels at exactly ISA level isa (NULL: none), and the fastest this CPU
 * has (resolved once; thread-safe). */
const qt_f32_kernels *qt_f32_impl(int isa);
const qt_f32_kernels *qt_f32_best(void);
const qt_f32_kernels *qt_f32_avx2(void); /* dot_avx2.c / dot_avx512.c */
const qt_f32_kernels *qt_f32_avx512(void);
const qt_f32_kernels *qt_f32_neon(void); /* dot_neon.c */
/* m axpy calls in one pass over acc, for nh heads over the same m rows: for
 * each head h, acc[h][i] = fma(a[h * m + k], x[k][i], acc[h][i]) for
 * k = 0..m-1 in that order, each element's chain kept in a register, so acc
 * is loaded and stored once instead of m times and a row is loaded once for
 * several heads. The same bits as the nh * m axpy calls (the same fused
 * multiply-adds in the same order). The attention's weighted value sums
 * (nn_wsum_add_keys_heads) use it for the keys that share a lane. */
typedef void (*qt_f32_axpyn_fn)(float *const *acc, int nh, int m, const float *a,
                                const float *const *x, int64_t n);
qt_f32_axpyn_fn qt_f32_axpyn_best(void);
void qt_f32_axpyn_ref(float *const *acc, int nh, int m, const float *a, const float *const *x,
                      int64_t n);
qt_f32_axpyn_fn qt_f32_axpyn_avx2(void); /* dot_avx2.c / dot_avx512.c; NULL elsewhere */
qt_f32_axpyn_fn qt_f32_axpyn_avx512(void);
/* qt_f32_axpyn_fn over fp16 rows, each value converted exactly (qt_f16_to_f32)
 * as it is loaded: the bits of converting the rows first, without the f32 copy
 * (the attention's fp16 value rows). */
typedef void (*qt_f16_axpyn_fn)(float *const *acc, int nh, int m, const float *a,
                                const pt_f16 *const *x, int64_t n);
qt_f16_axpyn_fn qt_f16_axpyn_best(void);
void qt_f16_axpyn_ref(float *const *acc, int nh, int m, const float *a, const pt_f16 *const *x,
                      int64_t n);
qt_f16_axpyn_fn qt_f16_axpyn_avx2(void); /* dot_avx2.c / dot_avx512.c; NULL elsewhere */
qt_f16_axpyn_fn qt_f16_axpyn_avx512(void);
/* Two heads' scores over one fp16 row: out[h] = qt_dot_best()(QT_F16)(w, the
 * fp16 query whose decoded values are q_h), the same bits, the row converted
 * once for both (mla.c's fp16 cache). NULL where the level has none: then
 * the caller uses the dot product per head. */
typedef void (*qt_f16_dot2_fn)(const void *w, const float *q0, const float *q1, int64_t n,
                               float *out);
qt_f16_dot2_fn qt_f16_dot2_best(void);
qt_f16_dot2_fn qt_f16_dot2_avx2(void); /* dot_avx2.c / dot_avx512.c; NULL elsewhere */
qt_f16_dot2_fn qt_f16_dot2_avx512(void);
/* Eight heads' scores over nw fp16 rows: out[8 i + h] = the F16 dot of w[i]
 * with the fp16 query whose decoded values are q + h * qs, the same bits, each
 * row converted once for all eight (attn.c's and mla.c's fp16 caches). AVX-512
 * only; NULL elsewhere. */
typedef void (*qt_f16_dot8_fn)(const void *const *w, int nw, const float *q, int64_t qs, int64_t n,
                               float *out);
qt_f16_dot8_fn qt_f16_dot8_best(void);
qt_f16_dot8_fn qt_f16_dot8_avx512(void); /* dot_avx512.c; NULL elsewhere */
/* out[k] = qt_f32_best()->dot(x0, y + k * ys, n) and out[8 + k] = the same of
 * x1, for k = 0..7, the same bits (two query heads of the DSA indexer against
 * eight keys, each key loaded once for both where n = 128). AVX-512 only;
 * NULL elsewhere. */
typedef void (*qt_f32_dot8_fn)(const float *x0, const float *x1, const float *y, int64_t ys,
                               int64_t n, float *out);
qt_f32_dot8_fn qt_f32_dot8_best(void);
qt_f32_dot8_fn qt_f32_dot8_avx512(void); /* dot_avx512.c; NULL elsewhere */

/* ===== fp16 / bf16 helpers (exact IEEE conversions, no F16C needed) ===== */

float qt_f16_to_f32(pt_f16 h);
pt_f16 qt_f32_to_f16(float f); /* round to nearest even */
float qt_bf16_to_f32(pt_bf16 h);
pt_bf16 qt_f32_to_bf16(float f); /* round to nearest even, NaN kept quiet */

#endif
