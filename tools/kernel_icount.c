/* kernel_icount.c — one call of one dot-product kernel, for counting the instructions a
 * kernel executes per block under an emulator (bench/arm64_icount.sh runs it under
 * qemu-aarch64 -singlestep and counts the executed instructions).
 *
 * Usage: kernel_icount TYPE LEVEL SHAPE NBLOCKS
 *   TYPE: a ggml type name (Q8_0, IQ2_XXS, F16 ...); LEVEL: scalar, neon, dotprod (an ISA
 *   level number also works); SHAPE: dot (qt_dot_upto: the single-row order), mm (the
 *   engine's matmul kernel, qt_mm_dot_upto: the panel order where the type has one),
 *   mm4 (its four-row form, qt_mm_dot4_upto) or tile (four weight rows against four
 *   activation rows, qt_mm_tile_upto); NBLOCKS: 1..16 blocks of the type (F32/F16/BF16: of
 *   256 weights).
 * Everything but the one kernel call does the same work whatever NBLOCKS is (16 blocks of
 * weights and four activation rows are always made), so the difference of two runs'
 * counts divided by the difference of NBLOCKS is the kernel's cost per block.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../tests/qt_random.h"
#include "kernels/quant.h"

#define MAX_BLOCKS 16

static int parse_level(const char *s) {
    if (!strcmp(s, "scalar")) return QT_ISA_SCALAR;
#if defined(__aarch64__)
    if (!strcmp(s, "neon")) return QT_ISA_NEON;
    if (!strcmp(s, "dotprod")) return QT_ISA_DOTPROD;
    if (!strcmp(s, "i8mm")) return QT_ISA_I8MM;
#else
    if (!strcmp(s, "avx2")) return QT_ISA_AVX2;
    if (!strcmp(s, "avx512")) return QT_ISA_AVX512;
#endif
    char *end;
    const long v = strtol(s, &end, 10);
    return *s && !*end && v >= 0 && v <= QT_ISA_TOP ? (int)v : -1;
}

int main(int argc, char **argv) {
    if (argc != 5) {
        fprintf(stderr, "usage: kernel_icount TYPE LEVEL dot|mm|mm4|tile NBLOCKS\n");
        return 2;
    }
    uint32_t type = QT_COUNT;
    for (uint32_t t = 0; t < QT_COUNT; t++)
        if (qt_get(t) && !strcmp(qt_name(t), argv[1])) type = t;
    const int level = parse_level(argv[2]);
    const char *shape = argv[3];
    const int nb = atoi(argv[4]);
    if (type == QT_COUNT || qt_get(type)->act_type < 0) {
        fprintf(stderr, "kernel_icount: '%s' is not a type with a dot product\n", argv[1]);
        return 2;
    }
    if (level < 0 || level > qt_isa_detect()) {
        fprintf(stderr, "kernel_icount: level '%s' is unknown or not on this CPU\n", argv[2]);
        return 2;
    }
    if (nb < 1 || nb > MAX_BLOCKS) {
        fprintf(stderr, "kernel_icount: NBLOCKS must be 1..%d, not '%s'\n", MAX_BLOCKS, argv[4]);
        return 2;
    }
    const qt_traits *t = qt_get(type);
    const int64_t block = t->block == 1 ? QK_K : t->block;
    const int64_t nmax = MAX_BLOCKS * block, n = nb * block;
    uint64_t wbytes = 0, abytes = 0;
    if (qt_row_bytes(type, nmax, &wbytes) || qt_row_bytes((uint32_t)t->act_type, nmax, &abytes)) {
        fprintf(stderr, "kernel_icount: %s: no row size\n", argv[1]);
        return 2;
    }
    uint8_t *w = malloc(4 * wbytes), *a = malloc(4 * abytes);
    float *x = malloc((size_t)nmax * sizeof *x);
    if (!w || !a || !x) {
        fprintf(stderr, "kernel_icount: out of memory\n");
        return 1;
    }
    qr_rng r = {42};
    for (int row = 0; row < 4; row++)
        qr_fill_weights(&r, type, w + row * wbytes, nmax);
    for (int row = 0; row < 4; row++) {
        qr_fill_acts(&r, x, nmax);
        qt_quantize_act_ref((uint32_t)t->act_type, x, a + row * abytes, nmax);
    }
    float out[16] = {0};
    if (!strcmp(shape, "tile")) {
        qt_tile_fn ft = qt_mm_tile_upto(type, level);
        if (!ft) {
            fprintf(stderr, "kernel_icount: %s has no tile kernel at %s\n", argv[1], argv[2]);
            return 3;
        }
        ft(w, wbytes, a, abytes, n, out, 4);
    } else if (!strcmp(shape, "mm4")) {
        qt_dot4_fn f4 = qt_mm_dot4_upto(type, level);
        if (!f4) {
            fprintf(stderr, "kernel_icount: %s has no four-row kernel at %s\n", argv[1], argv[2]);
            return 3;
        }
        f4(w, a, abytes, n, out);
    } else if (!strcmp(shape, "mm") || !strcmp(shape, "dot")) {
        qt_dot_fn f = !strcmp(shape, "mm") ? qt_mm_dot_upto(type, level) : qt_dot_upto(type, level);
        if (level > QT_ISA_SCALAR && (f == qt_dot_impl(type, QT_ISA_SCALAR) ||
                                      f == qt_dot_panel_impl(type, QT_ISA_SCALAR))) {
            fprintf(stderr, "kernel_icount: %s has no %s kernel at %s (the scalar one serves)\n",
                    argv[1], shape, argv[2]);
            return 3;
        }
        out[0] = f(w, a, n);
    } else {
        fprintf(stderr, "kernel_icount: shape '%s' is not dot, mm, mm4 or tile\n", shape);
        return 2;
    }
    printf("%s %s %s %d: %.9g %.9g %.9g %.9g\n", argv[1], argv[2], shape, nb, (double)out[0],
           (double)out[1], (double)out[2], (double)out[3]);
    free(w);
    free(a);
    free(x);
    return 0;
}
