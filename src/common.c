/* common.c — error formatting, the always-on assertion, array growth, the monotonic
 * clock and `mkdir -p` (see common.h). */
#include "common.h"

#include <errno.h>
#include <stdlib.h>
#include <sys/stat.h>
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

int pt_mkdirs(const char *dir) {
    char d[4096];
    if (snprintf(d, sizeof d, "%s", dir) >= (int)sizeof d) return errno = ENAMETOOLONG, -1;
    for (char *p = d + 1; *p; p++) {
        if (*p != '/') continue;
        *p = 0;
        if (mkdir(d, 0755) && errno != EEXIST) return -1;
        *p = '/';
    }
    return mkdir(d, 0755) && errno != EEXIST ? -1 : 0;
}
