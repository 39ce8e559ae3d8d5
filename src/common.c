/* common.c — error formatting, the always-on assertion, array growth, scratch
 * allocation, the monotonic clock and `mkdir -p` (see common.h). */
#include "common.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>

#include "os/os.h"
#include "petrel.h" /* PT_PATH_MAX */

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

/* Huge pages asked for under the whole 2 MiB pages inside [p, p + bytes) (a hint: ignored where
 * the system has no such request). */
static void hugepage_hint(void *p, size_t bytes) {
#ifdef MADV_HUGEPAGE
    const uintptr_t huge = OS_HUGE_PAGE, lo = ((uintptr_t)p + huge - 1) & ~(huge - 1),
                    hi = ((uintptr_t)p + bytes) & ~(huge - 1);
    if (hi > lo) (void)madvise((void *)lo, hi - lo, MADV_HUGEPAGE); /* failure is harmless */
#else
    (void)p;
    (void)bytes;
#endif
}

/* Scratch carries a header in the 64 bytes before it: where its memory came from. */
#define SCRATCH_HEAD 64
#define SCRATCH_MAGIC 0x7363726174636821ULL
typedef struct scratch_head {
    uint64_t magic;
    void *base; /* what calloc or mmap returned */
    size_t len; /* the mapping's length; 0: calloc'd */
} scratch_head;

void *pt_scratch_alloc(size_t bytes) {
    if (bytes > SIZE_MAX / 2) return NULL;
    uint8_t *data;
    scratch_head h = {SCRATCH_MAGIC, NULL, 0};
    if (bytes + SCRATCH_HEAD < OS_HUGE_PAGE) {
        if (!(h.base = calloc(1, bytes + SCRATCH_HEAD))) return NULL;
        data = (uint8_t *)h.base + SCRATCH_HEAD;
    } else {
        /* whole huge pages from a 2 MiB boundary, the header at its start: a fresh anonymous
         * mapping reads as zero and is paid for as it is first written */
        const size_t cap = (bytes + SCRATCH_HEAD + OS_HUGE_PAGE - 1) & ~(OS_HUGE_PAGE - 1);
        h.len = cap + OS_HUGE_PAGE;
        void *m = mmap(NULL, h.len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (m == MAP_FAILED) return NULL;
        h.base = m;
        uint8_t *a =
            (uint8_t *)(((uintptr_t)m + OS_HUGE_PAGE - 1) & ~(uintptr_t)(OS_HUGE_PAGE - 1));
        hugepage_hint(a, cap);
        data = a + SCRATCH_HEAD;
    }
    memcpy(data - SCRATCH_HEAD, &h, sizeof h);
    return data;
}

void pt_scratch_free(void *p) {
    if (!p) return;
    scratch_head h;
    memcpy(&h, (uint8_t *)p - SCRATCH_HEAD, sizeof h);
    PT_ASSERT(h.magic == SCRATCH_MAGIC); /* from pt_scratch_alloc, freed once */
    memset((uint8_t *)p - SCRATCH_HEAD, 0, sizeof h);
    if (h.len)
        munmap(h.base, h.len);
    else
        free(h.base);
}

float *pt_falloc(size_t n, int *fail) {
    float *p = NULL;
    if (n <= SIZE_MAX / sizeof(float)) p = (float *)pt_scratch_alloc((n ? n : 1) * sizeof(float));
    if (!p) *fail = 1;
    return p;
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
    char d[PT_PATH_MAX];
    if (snprintf(d, sizeof d, "%s", dir) >= (int)sizeof d) return errno = ENAMETOOLONG, -1;
    for (char *p = d + 1; *p; p++) {
        if (*p != '/') continue;
        *p = 0;
        if (mkdir(d, 0755) && errno != EEXIST) return -1;
        *p = '/';
    }
    return mkdir(d, 0755) && errno != EEXIST ? -1 : 0;
}
