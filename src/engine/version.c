/* version.c — the library version reported by pt_version(), and what the build holds
 * (pt_build_info: its kernels, the CPU's choice among them, its read back-ends). */
#include <pthread.h>
#include <stdio.h>

#include "kernels/quant.h"
#include "petrel.h"

const char *pt_version(void) {
    return PETREL_VERSION;
}

static char build_info[512];
static pthread_once_t build_once = PTHREAD_ONCE_INIT;

static void build_info_make(void) {
    int isa = qt_isa_detect();
#if defined(__x86_64__)
    const char *kernels = "scalar avx2 avx512-vnni (AVX-512 F+BW+VL+VNNI)";
#elif defined(__aarch64__)
    const char *kernels = "scalar neon dotprod i8mm (ARMv8.0 NEON, ARMv8.2 dotprod, ARMv8.6 i8mm)";
#else
    const char *kernels = "scalar";
#endif
#ifdef PT_HAVE_URING
    const char *io = "io_uring (O_DIRECT where the file system allows it), pread pool";
#else
    const char *io = "pread pool (built without liburing)";
#endif
    snprintf(build_info, sizeof build_info,
             "kernels: %s; this CPU: %s\n"
             "expert reads: %s; checked with XXH3 per record\n"
             "build: %s, %s%s\n",
             kernels, qt_isa_name(isa), io,
#if defined(__OPTIMIZE__)
             "optimised",
#else
             "not optimised",
#endif
#if defined(__SANITIZE_ADDRESS__)
             "AddressSanitizer",
#else
             "no sanitizer",
#endif
#if defined(__AVX2__)
             ", compiled for -march with AVX2 (build/native)"
#else
             ""
#endif
    );
}

const char *pt_build_info(void) {
    pthread_once(&build_once, build_info_make);
    return build_info;
}
