/* dot_dotprod.c — arm64 dot products with the ARMv8.2 dot-product instructions (ISA
 * level QT_ISA_DOTPROD).
 *
 * The kernels of dot_neon_body.h compiled with -march=armv8.2-a+dotprod (Makefile):
 * the block sums of Q8_0/Q4_0/Q5_0/MXFP4, Q4_1/Q5_1's four-weight lane sums, Q2_K's
 * 16-weight group sums and the lattice IQ types' 16-weight sums use sdot. Those
 * are exact integer sums, so every kernel returns the NEON level's bits (and the
 * scalar reference's). The K-quants with eight integer lanes (Q3_K..Q6_K) keep
 * NEON's widening multiplies: sdot adds four neighbouring weights, which the
 * reference's lanes (weight index mod 8) keep apart, and F16/BF16 have no integer part. The
 * dispatcher calls in here only after the CPU announced dotprod (dispatch.c).
 */
#include "kernels/dot_neon_body.h"

qt_dot_fn qt_dot_dotprod(uint32_t type) {
    switch (type) {
    case QT_Q8_0:
    case QT_Q4_0:
    case QT_Q5_0:
    case QT_Q4_1:
    case QT_Q5_1:
    case QT_MXFP4:
    case QT_Q2_K:
    case QT_IQ2_XXS:
    case QT_IQ2_XS:
    case QT_IQ2_S:
    case QT_IQ3_XXS:
    case QT_IQ3_S:
    case QT_IQ1_S:
    case QT_IQ1_M: return neon_table(type);
    default: return NULL; /* the NEON level's kernel serves */
    }
}

/* IQ4_NL, IQ4_XS and the lattice IQ types: their integer sums with sdot; F32 is NEON's. */
qt_dot_fn qt_dot_panel_dotprod(uint32_t type) {
    return type != QT_F32 ? neon_panel_table(type) : NULL;
}

qt_dot4_fn qt_dot4_panel_dotprod(uint32_t type) {
    return qt_dot_panel_dotprod(type) ? neon_panel_table4(type) : NULL;
}

qt_dot4_fn qt_dot4_dotprod(uint32_t type) {
    return qt_dot_dotprod(type) ? neon_table4(type) : NULL;
}
