/* dispatch.c — run-time choice of the dot-product kernel for each type.
 *
 * ISA levels: scalar (the reference in quant_ref.c / quant_iq.c, always
 * present); on x86-64 AVX2 (dot_avx2.c) and AVX-512 F+BW+VL+VNNI (dot_avx512.c);
 * on arm64 NEON (dot_neon.c), dotprod (dot_dotprod.c) and i8mm (dot_i8mm.c: the tile kernels
 * of matmuls for Q8_0, Q4_0, Q5_0, Q4_K, Q5_K and Q6_K; its one-row kernels are the level
 * below's). The SIMD files are compiled
 * with their own ISA flags and only for their architecture (Makefile); this file is compiled for
 * the baseline ISA and must not call into them before qt_isa_detect has confirmed the CPU supports
 * that level.
 *
 * qt_dot_best resolves every type once (pthread_once, so concurrent first
 * calls from worker threads are safe) and afterwards is a table lookup.
 */
#include <math.h>
#include <pthread.h>

#include "kernels/quant.h"

/* ===== Scalar level ===== */

/* One wrapper per type so the scalar level is a plain qt_dot_fn like the SIMD
 * ones; the type switch inside qt_dot_ref runs once per row, not per block. */
#define SCALAR_DOT(T)                                                                              \
    static float scalar_##T(const void *w, const void *a, int64_t n) {                             \
        return qt_dot_ref(QT_##T, w, a, n);                                                        \
    }
SCALAR_DOT(F32)
SCALAR_DOT(F16)
SCALAR_DOT(BF16)
SCALAR_DOT(Q4_0)
SCALAR_DOT(Q4_1)
SCALAR_DOT(Q5_0)
SCALAR_DOT(Q5_1)
SCALAR_DOT(Q8_0)
SCALAR_DOT(Q2_K)
SCALAR_DOT(Q3_K)
SCALAR_DOT(Q4_K)
SCALAR_DOT(Q5_K)
SCALAR_DOT(Q6_K)
SCALAR_DOT(IQ2_XXS)
SCALAR_DOT(IQ2_XS)
SCALAR_DOT(IQ3_XXS)
SCALAR_DOT(IQ1_S)
SCALAR_DOT(IQ4_NL)
SCALAR_DOT(IQ3_S)
SCALAR_DOT(IQ2_S)
SCALAR_DOT(IQ4_XS)
SCALAR_DOT(IQ1_M)
SCALAR_DOT(MXFP4)

/* Indexed by type id; NULL where the type has no dot product (act_type < 0). */
static const qt_dot_fn scalar_table[QT_COUNT] = {
#define E(T) [QT_##T] = scalar_##T
    E(F32),   E(F16),    E(BF16),  E(Q4_0),  E(Q4_1),   E(Q5_0),    E(Q5_1),   E(Q8_0),
    E(Q2_K),  E(Q3_K),   E(Q4_K),  E(Q5_K),  E(Q6_K),   E(IQ2_XXS), E(IQ2_XS), E(IQ3_XXS),
    E(IQ1_S), E(IQ4_NL), E(IQ3_S), E(IQ2_S), E(IQ4_XS), E(IQ1_M),   E(MXFP4),
#undef E
};

/* ===== CPU detection ===== */

#if defined(__x86_64__)

#include <cpuid.h>

/* F16C (CPUID leaf 1, ECX bit 29): clang 14's __builtin_cpu_supports does not
 * know the name. Every AVX2 CPU made has it, but the kernels rely on it, so
 * check rather than assume. */
static int has_f16c(void) {
    unsigned a, b, c, d;
    return __get_cpuid(1, &a, &b, &c, &d) && (c & bit_F16C);
}

/* AVX2 level: the kernels also use FMA and F16C (fp16 scales). AVX-512 level:
 * F, BW, VL for the 256-bit EVEX encodings and VNNI for vpdpbusd/vpdpwssd.
 * __builtin_cpu_supports also checks that the OS saves the wider registers. */
int qt_isa_detect(void) {
    __builtin_cpu_init();
    if (!__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma") || !has_f16c())
        return QT_ISA_SCALAR;
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512vnni"))
        return QT_ISA_AVX512;
    return QT_ISA_AVX2;
}

#elif defined(__aarch64__)

#if defined(__linux__)
#include <sys/auxv.h>
#ifndef HWCAP_ASIMDDP
#define HWCAP_ASIMDDP (1 << 20)
#endif
#ifndef HWCAP2_I8MM
#define HWCAP2_I8MM (1 << 13)
#endif
#elif defined(__APPLE__)
#include <sys/sysctl.h>
/* 1 when sysctl NAME reads as a non-zero integer (absent: 0). */
static int sysctl_flag(const char *name) {
    int v = 0;
    size_t len = sizeof v;
    return sysctlbyname(name, &v, &len, NULL, 0) == 0 && v != 0;
}
#endif

/* NEON (Advanced SIMD) is part of every ARMv8-A CPU; dotprod (FEAT_DotProd) and i8mm
 * (FEAT_I8MM) are announced by the kernel: Linux's AT_HWCAP/AT_HWCAP2 bits, macOS's
 * hw.optional.arm.FEAT_* sysctls (unverified here: no Darwin machine). qemu-user forwards
 * the bits of its -cpu model, which is how make test-arm64 forces each level. */
int qt_isa_detect(void) {
#if defined(__linux__)
    const unsigned long hw = getauxval(AT_HWCAP), hw2 = getauxval(AT_HWCAP2);
    const int dotprod = (hw & HWCAP_ASIMDDP) != 0, i8mm = (hw2 & HWCAP2_I8MM) != 0;
#elif defined(__APPLE__)
    const int dotprod = sysctl_flag("hw.optional.arm.FEAT_DotProd"),
              i8mm = sysctl_flag("hw.optional.arm.FEAT_I8MM");
#else
    const int dotprod = 0, i8mm = 0;
#endif
    if (!dotprod) return QT_ISA_NEON;
    return i8mm ? QT_ISA_I8MM : QT_ISA_DOTPROD;
}
qt_dot_fn qt_dot_avx2(uint32_t type) {
    (void)type;
    return NULL;
}
qt_dot_fn qt_dot_avx512(uint32_t type) {
    (void)type;
    return NULL;
}
qt_dot_fn qt_dot_panel_avx2(uint32_t type) {
    (void)type;
    return NULL;
}
qt_dot_fn qt_dot_panel_avx512(uint32_t type) {
    (void)type;
    return NULL;
}
qt_dot4_fn qt_dot4_avx2(uint32_t type) {
    (void)type;
    return NULL;
}
qt_dot4_fn qt_dot4_avx512(uint32_t type) {
    (void)type;
    return NULL;
}
qt_tile_fn qt_tile_avx2(uint32_t type) {
    (void)type;
    return NULL;
}
qt_tile_fn qt_tile_avx512(uint32_t type) {
    (void)type;
    return NULL;
}
qt_widen_fn qt_widen_avx512(uint32_t type) {
    (void)type;
    return NULL;
}
qt_tile_fn qt_tile8_avx512(uint32_t type) {
    (void)type;
    return NULL;
}
int qt_ptile_avx512(uint32_t type, qt_ptile *p) {
    (void)type;
    (void)p;
    return 0;
}
qt_gemv_fn qt_gemv_avx512(uint32_t type) {
    (void)type;
    return NULL;
}
const qt_f32_kernels *qt_f32_avx2(void) {
    return NULL;
}
const qt_f32_kernels *qt_f32_avx512(void) {
    return NULL;
}
qt_f32_axpyn_fn qt_f32_axpyn_avx2(void) {
    return NULL;
}
qt_f16_axpyn_fn qt_f16_axpyn_avx2(void) {
    return NULL;
}
qt_quantize_act_fn qt_quantize_act_avx2(void) {
    return NULL;
}
qt_f32_axpyn_fn qt_f32_axpyn_avx512(void) {
    return NULL;
}
qt_f16_axpyn_fn qt_f16_axpyn_avx512(void) {
    return NULL;
}
qt_f16_dot2_fn qt_f16_dot2_avx2(void) {
    return NULL;
}
qt_f16_dot2_fn qt_f16_dot2_avx512(void) {
    return NULL;
}
qt_f16_dot8_fn qt_f16_dot8_avx512(void) {
    return NULL;
}
qt_f32_dot8_fn qt_f32_dot8_avx512(void) {
    return NULL;
}

#else

/* Other architectures: the scalar reference only. */
int qt_isa_detect(void) {
    return QT_ISA_SCALAR;
}
qt_dot_fn qt_dot_avx2(uint32_t type) {
    (void)type;
    return NULL;
}
qt_dot_fn qt_dot_avx512(uint32_t type) {
    (void)type;
    return NULL;
}
qt_dot_fn qt_dot_panel_avx2(uint32_t type) {
    (void)type;
    return NULL;
}
qt_dot_fn qt_dot_panel_avx512(uint32_t type) {
    (void)type;
    return NULL;
}
qt_dot4_fn qt_dot4_avx2(uint32_t type) {
    (void)type;
    return NULL;
}
qt_dot4_fn qt_dot4_avx512(uint32_t type) {
    (void)type;
    return NULL;
}
qt_tile_fn qt_tile_avx2(uint32_t type) {
    (void)type;
    return NULL;
}
qt_tile_fn qt_tile_avx512(uint32_t type) {
    (void)type;
    return NULL;
}
qt_widen_fn qt_widen_avx512(uint32_t type) {
    (void)type;
    return NULL;
}
qt_tile_fn qt_tile8_avx512(uint32_t type) {
    (void)type;
    return NULL;
}
int qt_ptile_avx512(uint32_t type, qt_ptile *p) {
    (void)type;
    (void)p;
    return 0;
}
qt_gemv_fn qt_gemv_avx512(uint32_t type) {
    (void)type;
    return NULL;
}
const qt_f32_kernels *qt_f32_avx2(void) {
    return NULL;
}
const qt_f32_kernels *qt_f32_avx512(void) {
    return NULL;
}
qt_f32_axpyn_fn qt_f32_axpyn_avx2(void) {
    return NULL;
}
qt_f16_axpyn_fn qt_f16_axpyn_avx2(void) {
    return NULL;
}
qt_quantize_act_fn qt_quantize_act_avx2(void) {
    return NULL;
}
qt_f32_axpyn_fn qt_f32_axpyn_avx512(void) {
    return NULL;
}
qt_f16_axpyn_fn qt_f16_axpyn_avx512(void) {
    return NULL;
}
qt_f16_dot2_fn qt_f16_dot2_avx2(void) {
    return NULL;
}
qt_f16_dot2_fn qt_f16_dot2_avx512(void) {
    return NULL;
}
qt_f16_dot8_fn qt_f16_dot8_avx512(void) {
    return NULL;
}
qt_f32_dot8_fn qt_f32_dot8_avx512(void) {
    return NULL;
}

#endif

#if !defined(__aarch64__)
/* The arm64 tables exist only in arm64 builds (dot_neon.c, dot_dotprod.c). */
qt_dot_fn qt_dot_neon(uint32_t type) {
    (void)type;
    return NULL;
}
qt_dot4_fn qt_dot4_neon(uint32_t type) {
    (void)type;
    return NULL;
}
qt_dot_fn qt_dot_dotprod(uint32_t type) {
    (void)type;
    return NULL;
}
qt_dot4_fn qt_dot4_dotprod(uint32_t type) {
    (void)type;
    return NULL;
}
const qt_f32_kernels *qt_f32_neon(void) {
    return NULL;
}
#endif

const char *qt_isa_name(int isa) {
#if defined(__aarch64__)
    static const char *names[] = {"scalar", "neon", "dotprod", "i8mm"};
#else
    static const char *names[] = {"scalar", "avx2", "avx512-vnni"};
#endif
    return isa >= 0 && isa <= QT_ISA_TOP ? names[isa] : "none";
}

/* ===== Public entry points ===== */

/* Does not check that the CPU supports `isa`: callers (tests, benchmarks) ask
 * qt_isa_detect first; qt_dot_best does. */
qt_dot_fn qt_dot_impl(uint32_t type, int isa) {
    if (type >= QT_COUNT) return NULL;
#if defined(__aarch64__)
    switch (isa) {
    case QT_ISA_SCALAR: return scalar_table[type];
    case QT_ISA_NEON: return qt_dot_neon(type);
    case QT_ISA_DOTPROD: return qt_dot_dotprod(type);
    default: return NULL; /* I8MM: no kernel of its own yet, the level below serves */
    }
#else
    switch (isa) {
    case QT_ISA_SCALAR: return scalar_table[type];
    case QT_ISA_AVX2: return qt_dot_avx2(type);
    case QT_ISA_AVX512: return qt_dot_avx512(type);
    default: return NULL;
    }
#endif
}

static qt_dot_fn best_table[QT_COUNT];
static int best_top; /* qt_isa_detect(), once: CPUID traps to the hypervisor in a VM */
static pthread_once_t best_once = PTHREAD_ONCE_INIT;

/* Highest supported level that has a kernel for each type; scalar otherwise. */
static void best_init(void) {
    const int top = best_top = qt_isa_detect();
    for (uint32_t t = 0; t < QT_COUNT; t++) {
        qt_dot_fn f = NULL;
        for (int isa = top; isa >= QT_ISA_SCALAR && !f; isa--)
            f = qt_dot_impl(t, isa);
        best_table[t] = f;
    }
}

qt_dot_fn qt_dot_best(uint32_t type) {
    pthread_once(&best_once, best_init);
    return type < QT_COUNT ? best_table[type] : NULL;
}

static int isa_top(void) {
    pthread_once(&best_once, best_init);
    return best_top;
}

qt_dot_fn qt_dot_upto(uint32_t type, int max_isa) {
    if (max_isa < 0) return qt_dot_best(type);
    const int top = isa_top();
    for (int isa = max_isa < top ? max_isa : top; isa >= QT_ISA_SCALAR; isa--) {
        qt_dot_fn f = qt_dot_impl(type, isa);
        if (f) return f;
    }
    return NULL;
}

qt_dot4_fn qt_dot4_impl(uint32_t type, int isa) {
    if (type >= QT_COUNT) return NULL;
#if defined(__aarch64__)
    switch (isa) {
    case QT_ISA_NEON: return qt_dot4_neon(type);
    case QT_ISA_DOTPROD: return qt_dot4_dotprod(type);
    default: return NULL;
    }
#else
    switch (isa) {
    case QT_ISA_AVX2: return qt_dot4_avx2(type);
    case QT_ISA_AVX512: return qt_dot4_avx512(type);
    default: return NULL;
    }
#endif
}

qt_dot4_fn qt_dot4_upto(uint32_t type, int max_isa) {
    const int top = isa_top();
    for (int isa = max_isa < 0 || max_isa > top ? top : max_isa; isa >= QT_ISA_SCALAR; isa--)
        if (qt_dot_impl(type, isa))
            return qt_dot4_impl(type, isa); /* the level qt_dot_upto picks */
    return NULL;
}

qt_tile_fn qt_tile_impl(uint32_t type, int isa) {
    if (type >= QT_COUNT) return NULL;
#if defined(__aarch64__)
    return isa == QT_ISA_I8MM ? qt_tile_i8mm(type) : NULL; /* smmla: dot_i8mm.c */
#endif
    switch (isa) {
    case QT_ISA_AVX2: return qt_tile_avx2(type);
    case QT_ISA_AVX512: return qt_tile_avx512(type);
    default: return NULL;
    }
}

/* ===== The matmul kernels (quant.h) ===== */

qt_dot_fn qt_mm_dot_upto(uint32_t type, int max_isa) {
    return qt_has_panel(type) ? qt_dot_panel_upto(type, max_isa) : qt_dot_upto(type, max_isa);
}

qt_dot4_fn qt_mm_dot4_upto(uint32_t type, int max_isa) {
    if (!qt_has_panel(type)) return qt_dot4_upto(type, max_isa);
#if defined(__aarch64__)
    /* the four-row form of the panel kernel qt_dot_panel_upto picks */
    const int top = isa_top();
    for (int isa = max_isa < 0 || max_isa > top ? top : max_isa; isa > QT_ISA_SCALAR; isa--)
        if (qt_dot_panel_impl(type, isa))
            return isa == QT_ISA_NEON ? qt_dot4_panel_neon(type) : qt_dot4_panel_dotprod(type);
#endif
    return NULL; /* x86: the panel kernels have no four-row forms */
}

qt_tile_fn qt_mm_tile_upto(uint32_t type, int max_isa) {
    if (qt_has_panel(type)) return NULL;
    const int top = isa_top();
#if defined(__aarch64__)
    /* every arm64 level computes the scalar reference's bits, so the i8mm tile kernel
     * matches whichever level's one-row kernel qt_mm_dot_upto picks */
    if (top >= QT_ISA_I8MM && (max_isa < 0 || max_isa >= QT_ISA_I8MM))
        return qt_tile_impl(type, QT_ISA_I8MM);
    return NULL;
#endif
    for (int isa = max_isa < 0 || max_isa > top ? top : max_isa; isa >= QT_ISA_SCALAR; isa--)
        if (qt_dot_impl(type, isa))
            return qt_tile_impl(type, isa); /* the level qt_dot_upto picks */
    return NULL;
}

/* 1: the matmul tile of `type` is the AVX-512 level's, the level of the eight-row tile and of
 * the widenings */
static int mm_tile_avx512(uint32_t type, int max_isa) {
    const qt_tile_fn t = qt_mm_tile_upto(type, max_isa);
    return t && t == qt_tile_impl(type, QT_ISA_AVX512);
}

qt_tile_fn qt_mm_tile8_upto(uint32_t type, int max_isa) {
    return mm_tile_avx512(type, max_isa) ? qt_tile8_avx512(type) : NULL;
}

int qt_mm_ptile_upto(uint32_t type, int max_isa, qt_ptile *p) {
    return mm_tile_avx512(type, max_isa) && qt_ptile_avx512(type, p);
}

qt_gemv_fn qt_mm_gemv_upto(uint32_t type, int max_isa) {
    /* the tiles' level: its one-row kernel is the one the gemv's lanes repeat */
    return mm_tile_avx512(type, max_isa) ? qt_gemv_avx512(type) : NULL;
}

qt_widen_fn qt_mm_widen_upto(uint32_t type, int max_isa) {
    /* the widened rows run that level's Q8_0 tile, the type's twin */
    return mm_tile_avx512(type, max_isa) && mm_tile_avx512(QT_Q8_0, max_isa) ? qt_widen_avx512(type)
                                                                             : NULL;
}

/* ===== F32 kernels in ggml's lane order ===== */

static const qt_f32_kernels f32_scalar = {qt_f32_dot_ref, qt_f32_axpy_ref, qt_f32_dot2_ref};

const qt_f32_kernels *qt_f32_impl(int isa) {
#if defined(__aarch64__)
    /* the F32 order has no integer part: NEON's kernels serve every arm64 level */
    return isa == QT_ISA_SCALAR ? &f32_scalar : isa <= QT_ISA_TOP ? qt_f32_neon() : NULL;
#else
    switch (isa) {
    case QT_ISA_SCALAR: return &f32_scalar;
    case QT_ISA_AVX2: return qt_f32_avx2();
    case QT_ISA_AVX512: return qt_f32_avx512();
    default: return NULL;
    }
#endif
}

static const qt_f32_kernels *f32_best;
static pthread_once_t f32_once = PTHREAD_ONCE_INIT;

static void f32_init(void) {
    for (int isa = qt_isa_detect(); isa >= QT_ISA_SCALAR && !f32_best; isa--)
        f32_best = qt_f32_impl(isa);
}

const qt_f32_kernels *qt_f32_best(void) {
    pthread_once(&f32_once, f32_init);
    return f32_best;
}

void qt_f32_axpyn_ref(float *const *acc, int nh, int m, const float *a, const float *const *x,
                      int64_t n) {
    for (int h = 0; h < nh; h++)
        for (int64_t i = 0; i < n; i++) {
            float v = acc[h][i];
            for (int k = 0; k < m; k++)
                v = fmaf(a[(int64_t)h * m + k], x[k][i], v);
            acc[h][i] = v;
        }
}

void qt_f16_axpyn_ref(float *const *acc, int nh, int m, const float *a, const pt_f16 *const *x,
                      int64_t n) {
    for (int h = 0; h < nh; h++)
        for (int64_t i = 0; i < n; i++) {
            float v = acc[h][i];
            for (int k = 0; k < m; k++)
                v = fmaf(a[(int64_t)h * m + k], qt_f16_to_f32(x[k][i]), v);
            acc[h][i] = v;
        }
}

/* the value-sum kernels over float and over fp16 rows, from one level */
static qt_f32_axpyn_fn axpyn_best;
static qt_f16_axpyn_fn axpyn16_best;
static pthread_once_t axpyn_once = PTHREAD_ONCE_INIT;

static void axpyn_init(void) {
    const int top = qt_isa_detect();
#if !defined(__aarch64__) /* the level numbers mean NEON/dotprod there: the portable ones */
    if (top >= QT_ISA_AVX512) {
        axpyn_best = qt_f32_axpyn_avx512();
        axpyn16_best = qt_f16_axpyn_avx512();
    } else if (top >= QT_ISA_AVX2) {
        axpyn_best = qt_f32_axpyn_avx2();
        axpyn16_best = qt_f16_axpyn_avx2();
    }
#endif
    (void)top;
    if (!axpyn_best) axpyn_best = qt_f32_axpyn_ref;
    if (!axpyn16_best) axpyn16_best = qt_f16_axpyn_ref;
}

qt_f32_axpyn_fn qt_f32_axpyn_best(void) {
    pthread_once(&axpyn_once, axpyn_init);
    return axpyn_best;
}

qt_f16_axpyn_fn qt_f16_axpyn_best(void) {
    pthread_once(&axpyn_once, axpyn_init);
    return axpyn16_best;
}

/* the level qt_dot_best's F16 kernel comes from, so the bits are its; the
 * eight-head and four-key kernels exist at the AVX-512 level only. Looked up
 * once: qt_isa_detect runs cpuid, which a virtual machine traps. */
static qt_f16_dot2_fn f16_dot2_best;
static qt_f16_dot8_fn f16_dot8_best;
static qt_f32_dot8_fn f32_dot8_best;
static pthread_once_t f16_dot2_once = PTHREAD_ONCE_INIT;

static void f16_dot2_init(void) {
    const int top = qt_isa_detect();
#if !defined(__aarch64__)
    f16_dot2_best = top >= QT_ISA_AVX512 ? qt_f16_dot2_avx512()
                    : top >= QT_ISA_AVX2 ? qt_f16_dot2_avx2()
                                         : NULL;
    if (top >= QT_ISA_AVX512) {
        f16_dot8_best = qt_f16_dot8_avx512();
        f32_dot8_best = qt_f32_dot8_avx512();
    }
#else
    (void)top;
#endif
}

qt_f16_dot2_fn qt_f16_dot2_best(void) {
    pthread_once(&f16_dot2_once, f16_dot2_init);
    return f16_dot2_best;
}

qt_f16_dot8_fn qt_f16_dot8_best(void) {
    pthread_once(&f16_dot2_once, f16_dot2_init);
    return f16_dot8_best;
}

qt_f32_dot8_fn qt_f32_dot8_best(void) {
    pthread_once(&f16_dot2_once, f16_dot2_init);
    return f32_dot8_best;
}

static qt_quantize_act_fn act_best;
static pthread_once_t act_once = PTHREAD_ONCE_INIT;

static void act_init(void) {
    if (qt_isa_detect() >= QT_ISA_AVX2) act_best = qt_quantize_act_avx2(); /* NULL off x86 */
    if (!act_best) act_best = qt_quantize_act_ref;
}

qt_quantize_act_fn qt_quantize_act_best(void) {
    pthread_once(&act_once, act_init);
    return act_best;
}

/* ===== Panel order ===== */

static float panel_scalar(uint32_t type, const void *w, const void *a, int64_t n) {
    return qt_dot_panel_ref(type, w, a, n);
}
#define PANEL_DOT(T)                                                                               \
    static float panel_##T(const void *w, const void *a, int64_t n) {                              \
        return panel_scalar(QT_##T, w, a, n);                                                      \
    }
PANEL_DOT(IQ2_XXS)
PANEL_DOT(IQ2_XS)
PANEL_DOT(IQ2_S)
PANEL_DOT(IQ3_XXS)
PANEL_DOT(IQ3_S)
PANEL_DOT(IQ1_S)
PANEL_DOT(IQ1_M)
PANEL_DOT(IQ4_XS)
PANEL_DOT(IQ4_NL)
PANEL_DOT(F32)
#undef PANEL_DOT

static const qt_dot_fn panel_scalar_table[QT_COUNT] = {
#define E(T) [QT_##T] = panel_##T
    E(IQ2_XXS), E(IQ2_XS), E(IQ2_S),  E(IQ3_XXS), E(IQ3_S),
    E(IQ1_S),   E(IQ1_M),  E(IQ4_XS), E(IQ4_NL),  E(F32),
#undef E
};

qt_dot_fn qt_dot_panel_impl(uint32_t type, int isa) {
    if (type >= QT_COUNT) return NULL;
#if defined(__aarch64__)
    switch (isa) {
    case QT_ISA_SCALAR: return panel_scalar_table[type];
    case QT_ISA_NEON: return qt_dot_panel_neon(type);
    case QT_ISA_DOTPROD: return qt_dot_panel_dotprod(type);
    default: return NULL;
    }
#else
    switch (isa) {
    case QT_ISA_SCALAR: return panel_scalar_table[type];
    case QT_ISA_AVX2: return qt_dot_panel_avx2(type);
    case QT_ISA_AVX512: return qt_dot_panel_avx512(type);
    default: return NULL;
    }
#endif
}

qt_dot_fn qt_dot_panel_upto(uint32_t type, int max_isa) {
    const int top = isa_top();
    for (int isa = max_isa < 0 || max_isa > top ? top : max_isa; isa >= QT_ISA_SCALAR; isa--) {
        qt_dot_fn f = qt_dot_panel_impl(type, isa);
        if (f) return f;
    }
    return NULL;
}
