/* test.h — petrel's tiny test framework.
 *
 * Each tests/test_*.c file has one `T_SUITE(name) { T_ADD(case); ... }` block
 * that registers its cases before main runs (a constructor, so no central list
 * needs editing); tests/main.c runs the cases (optionally filtered by a substring given on the
 * command line), each in a forked child with a time limit, and ends with the
 * summary line `N passed, N failed` (`, N skipped` when any).
 * A case fails when any CHECK in it fails (CHECK does not abort the case), when
 * it crashes, exits or outlives its time limit. A case that could not run some
 * of its checks for want of a fixture (t_need) is reported skipped with the
 * file's name, unless a check that did run failed.
 */
#ifndef PT_TEST_H
#define PT_TEST_H

#include <stdio.h>
#include <string.h>

typedef void (*t_fn)(void);

void t_add(const char *name, t_fn fn);
/* Register a case that may need more than the run's per-case limit (seconds). */
void t_add_timeout(const char *name, t_fn fn, int timeout_s);
void t_fail_at(const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
void t_skip(const char *why); /* mark the running case skipped (counts neither way) */

/* Path of a fixture file or folder: the first of tests/fixtures/NAME (the copy
 * in the repository; paths are relative to the repository root, where make
 * runs the tests), $PETREL_FIXTURES/NAME, ../shared/fixtures/NAME that exists;
 * when none does, the $PETREL_FIXTURES one (else the shared one), for the
 * error message. Returns a static buffer valid until the next call. */
const char *t_fixture(const char *name);
/* t_fixture for a file the case cannot do without: its path when it exists;
 * otherwise the case is marked skipped ("needs NAME from ../shared/fixtures")
 * and NULL is returned, and the caller skips what needed it. */
const char *t_need(const char *name);
/* A fresh, empty temporary directory for the running case (removed after it). */
const char *t_tmpdir(void);
/* This case's own folder for expert usage statistics: pass it as
 * pt_engine_params.usage_dir so that nothing is written next to a model
 * (the CLI gets it as PETREL_USAGE_DIR). Empty at the start of each case. */
const char *t_usage_dir(void);
/* Path of this test binary as it was started (argv[0]; the working directory
 * is the runner's). */
const char *t_self(void);
/* Read a whole file; *len receives its size. Returns malloc'd data or NULL. */
void *t_read_file(const char *path, size_t *len);
/* Write a whole file; returns 0 on success. */
int t_write_file(const char *path, const void *data, size_t len);
/* Run a shell command, capture stdout+stderr (truncated to cap), return exit status. */
int t_run(const char *cmd, char *out, size_t cap);

#define T_ADD(fn) t_add(#fn, fn)
#define T_ADD_TIMEOUT(fn, seconds) t_add_timeout(#fn, fn, seconds)
#define T_SUITE(name) __attribute__((constructor)) static void t_register_##name(void)

#define CHECK(cond)                                                                                \
    do {                                                                                           \
        if (!(cond)) t_fail_at(__FILE__, __LINE__, "CHECK failed: %s", #cond);                     \
    } while (0)

#define CHECKF(cond, ...)                                                                          \
    do {                                                                                           \
        if (!(cond)) t_fail_at(__FILE__, __LINE__, __VA_ARGS__);                                   \
    } while (0)

#define CHECK_STR_CONTAINS(hay, needle)                                                            \
    do {                                                                                           \
        const char *h_ = (hay), *n_ = (needle);                                                    \
        if (!h_ || !strstr(h_, n_))                                                                \
            t_fail_at(__FILE__, __LINE__, "expected \"%s\" in \"%s\"", n_, h_ ? h_ : "(null)");    \
    } while (0)

#endif
