/* common.h — small helpers shared by every module of petrel.
 *
 * The error type: library code never exits; a function that can fail takes a
 * `pt_err *` and returns -1 (or NULL) after writing one human-readable line into
 * it with pt_errf(). Callers decide what to do (the CLI prints it and exits 1).
 * Messages name the file, the offending value and what was expected.
 */
#ifndef PT_COMMON_H
#define PT_COMMON_H

#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

typedef struct pt_err {
    char msg[512]; /* one line, no trailing newline; empty when no error */
} pt_err;

/* Write a printf-style message into err (when err is not NULL). Always returns -1
 * so that `return pt_errf(err, ...)` reads naturally. */
int pt_errf(pt_err *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Always-on invariant check: prints the location and aborts. For programming
 * errors only, never for bad input (bad input gets a pt_err). */
#define PT_ASSERT(cond)                                                                            \
    do {                                                                                           \
        if (!(cond)) pt_assert_fail(__FILE__, __LINE__, #cond);                                    \
    } while (0)
void pt_assert_fail(const char *file, int line, const char *expr) __attribute__((noreturn));

/* Overflow-checked arithmetic on sizes: return 0 on success, -1 on overflow. */
static inline int pt_mul_u64(uint64_t a, uint64_t b, uint64_t *out) {
    return __builtin_mul_overflow(a, b, out) ? -1 : 0;
}
static inline int pt_add_u64(uint64_t a, uint64_t b, uint64_t *out) {
    return __builtin_add_overflow(a, b, out) ? -1 : 0;
}

/* Round x up to a multiple of align (align a power of two). */
static inline uint64_t pt_align_up(uint64_t x, uint64_t align) {
    return (x + align - 1) & ~(align - 1);
}

/* Whether a caller's stop flag (pt_session_sync, pt_gen_*: may be NULL) is set. The flag is a
 * sig_atomic_t that a signal handler or another thread sets; the read is an atomic load so that
 * a flag set from a thread (the server's connection side) is not a data race. */
static inline int pt_stop_requested(const volatile sig_atomic_t *stop) {
    return stop && __atomic_load_n(stop, __ATOMIC_RELAXED);
}

/* Zeroed scratch of `bytes` bytes (at least one), 16-byte aligned, freed with pt_scratch_free
 * (free() refuses it: a header precedes it). From 2 MiB on it is a fresh anonymous mapping of
 * whole huge pages where the system gives them on request (MADV_HUGEPAGE), still paid for
 * as it is first written: scratch first written in 4 KiB pages costs a fault a page, and on a
 * VM such a fault runs ~12 us (0.3 GB/s of first touch, against 3-16 GB/s for huge pages the
 * host already backs), which a process's first prompt paid (~19k faults for a 512-token
 * prompt of the glm-dsa bench model). NULL when out of memory. */
void *pt_scratch_alloc(size_t bytes);
void pt_scratch_free(void *p); /* NULL is fine */

/* pt_scratch_alloc of n floats (at least one); sets *fail on failure so a state constructor
 * can allocate everything and check once. */
float *pt_falloc(size_t n, int *fail);

/* Make room for `need` elements of `elem` bytes in the growable array *p of
 * capacity *cap (elements): the capacity doubles from 64 until it holds `need`,
 * so n appends cost O(n). Returns 0, or -1 on out of memory or size overflow
 * (then *p and *cap are unchanged). The one growth policy of the library's
 * growable arrays (token ids, byte buffers, tokenizer scratch, GGUF writer). */
int pt_grow(void **p, size_t *cap, size_t need, size_t elem);

/* Seconds on the monotonic clock (CLOCK_MONOTONIC): for intervals only, its
 * zero is arbitrary. */
double pt_now_s(void);

/* Create the folder dir and any missing parents (mode 0755), as `mkdir -p`. Returns 0 when
 * it exists afterwards, or -1 with errno set (ENAMETOOLONG past 4095 bytes). */
int pt_mkdirs(const char *dir);

#define PT_ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))
#define PT_MIN(a, b) ((a) < (b) ? (a) : (b))
#define PT_MAX(a, b) ((a) > (b) ? (a) : (b))

#endif
