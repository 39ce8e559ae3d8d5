/* common.c — error formatting and the always-on assertion (see common.h). */
#include "common.h"

#include <stdlib.h>

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
