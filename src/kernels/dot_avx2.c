/* dot_avx2.c — AVX2 + FMA + F16C dot products (ISA level QT_ISA_AVX2).
 *
 * The kernels live in dot_x86_body.h, shared with dot_avx512.c; this file only
 * supplies the two integer multiply-accumulate primitives, built from
 * vpmaddubsw (u8 x s8 -> saturating int16 pairs), vpmaddwd and vpaddd. The
 * callers keep every int16 pair sum below saturation (see the body's header
 * comment). Compiled with -mavx2 -mfma -mf16c only; the dispatcher calls in
 * here after checking the CPU.
 */
#include <immintrin.h>

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
