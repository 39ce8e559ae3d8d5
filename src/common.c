/* common.c — error formatting, the always-on assertion, array growth and the
 * monotonic clock (see common.h). */
#include "common.h"

#include <stdlib.h>
#include <time.h>

int pt_errf(pt_err *err, const char *fmt, ...) {
    if (err) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err->msg, sizeof err->msg, fmt, ap);
        va_end(ap);
    }
    return -1;
}

void pt_assert_fail(const char *file, int line, const char *expr) {
    fprintf(stderr, "petrel: internal error at %s:%d: assertion '%s' failed\n", file, line, expr);
    abort();
}

int pt_grow(void **p, size_t *cap, size_t need, size_t elem) {
    if (need <= *cap) return 0;
    size_t c = *cap ? *cap : 64;
    while (c < need) {
        if (c > SIZE_MAX / 2) return -1;
        c *= 2;
    }
    size_t bytes;
    if (__builtin_mul_overflow(c, elem, &bytes)) return -1;
    void *q = realloc(*p, bytes);
    if (!q) return -1;
    *p = q;
    *cap = c;
    return 0;
}

double pt_now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}
