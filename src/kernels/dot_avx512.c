/* dot_avx512.c — AVX-512 (F, BW, VL, VNNI) dot products (ISA level
 * QT_ISA_AVX512).
 *
 * The kernels are those of dot_x86_body.h with the VNNI instructions as the
 * integer multiply-accumulate primitives: vpdpbusd (u8 x s8, four products
 * summed into int32, no saturation) and vpdpwssd (int16 pairs into int32),
 * each replacing a two- or three-instruction AVX2 sequence. The one- and
 * four-row kernels run on 256-bit vectors (AVX512VL encodings), one kernel body
 * for both ISA levels; the 4 x 4 tiles a prompt's matmuls use (this level
 * only) put two pairs' 256-bit lanes in one 512-bit vector. Compiled with the
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

qt_f32_axpyn_fn qt_f32_axpyn_avx512(void) {
    return f32_axpyn;
}

qt_f16_dot2_fn qt_f16_dot2_avx512(void) {
    return dot_f16_q2;
}
