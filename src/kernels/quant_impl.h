/* quant_impl.h — internal split of the scalar reference between files.
 *
 * quant_ref.c owns the public dispatchers (qt_dequant_ref, qt_dot_ref,
 * qt_quantize_act_ref, qt_quantize_ref) and the float, legacy and K-quant
 * types. quant_iq.c owns the IQ types and MXFP4 and exposes them here.
 */
#ifndef PT_QUANT_IMPL_H
#define PT_QUANT_IMPL_H

#include <stdint.h>
#include <string.h>

/* 1 when quant_iq.c implements `type` (IQ1_S, IQ1_M, IQ2_XXS, IQ2_XS, IQ2_S,
 * IQ3_XXS, IQ3_S, IQ4_NL, IQ4_XS, MXFP4). */
int iq_handles(uint32_t type);
/* Decode n weights (whole blocks) of an IQ/MXFP4 type. */
void iq_dequant(uint32_t type, const void *src, float *dst, int64_t n);
/* Dot with activations in the type's act_type (Q8_K, or Q8_0 for IQ4_NL/MXFP4). */
float iq_dot(uint32_t type, const void *w, const void *a, int64_t n);
/* Panel-order dot (see qt_dot_panel_ref in quant.h) and whether a type has one. */
int iq_has_panel(uint32_t type);
float iq_dot_panel(uint32_t type, const void *w, const void *a, int64_t n);

/* Grids and tables of the IQ types (data, transcribed from ggml's spec). */
extern const uint64_t iq2xxs_grid[256];
extern const uint64_t iq2xs_grid[512];
extern const uint64_t iq2s_grid[1024];
extern const uint32_t iq3xxs_grid[256];
extern const uint32_t iq3s_grid[512];
extern const uint64_t iq1s_grid[2048];
extern const uint8_t ksigns_iq2xs[128];
extern const int8_t kvalues_iq4nl[16];
extern const int8_t kvalues_mxfp4[16];

/* MXFP4's E8M0 exponent e means 2^(e-127). kvalues_mxfp4 holds the E2M1 values doubled (so
 * they are integers), so the decode scale is half of that: 2^(e-128). e = 0 and 1 give the
 * subnormals 2^-128 and 2^-127; e = 255 (NaN in the OCP spec) gives 2^127, as ggml does.
 * Built from bits, so exact; the one definition every kernel uses. */
static inline float qt_e8m0_half(uint8_t e) {
    uint32_t bits = e < 2 ? (uint32_t)0x00200000u << e : (uint32_t)(e - 1) << 23;
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

#endif
