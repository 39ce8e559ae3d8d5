/* dot_neon.c — ARMv8.0 Advanced SIMD dot products (ISA level QT_ISA_NEON).
 *
 * The kernels live in dot_neon_body.h, shared with dot_dotprod.c; compiled for the
 * arm64 baseline (every ARMv8-A CPU has NEON), so the dispatcher needs no check.
 */
#include "kernels/dot_neon_body.h"

qt_dot_fn qt_dot_neon(uint32_t type) {
    return neon_table(type);
}

qt_dot_fn qt_dot_panel_neon(uint32_t type) {
    return neon_panel_table(type);
}

qt_dot4_fn qt_dot4_panel_neon(uint32_t type) {
    return neon_panel_table4(type);
}

qt_dot4_fn qt_dot4_neon(uint32_t type) {
    return neon_table4(type);
}

const qt_f32_kernels *qt_f32_neon(void) {
    return &neon_f32;
}
