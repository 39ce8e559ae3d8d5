/* test_runner.c — the test runner checked by itself (see tests/main.c).
 *
 * runner_isolates_cases runs this very binary on the self-test cases below,
 * which are registered only when PETREL_TEST_SELFTEST=1 (so an ordinary run
 * never sees them), with a 2 s time limit, and checks what the runner made of
 * them: a pass, a failed CHECK, a missing fixture reported skipped by name, a
 * SIGSEGV, an abort, an exit() in the middle of a case, a hang (whose own
 * subprocess must die with it), a file left in a fixture folder, and two cases
 * that each find their temp and usage folders empty. The run must end with the summary
 * line and exit 1; every failure is one FAIL line with its reason.
 * fixtures_match_checksums checks the repository's copy of the fixtures
 * (tests/fixtures) against its SHA256SUMS: a checkout that altered them (end of
 * line conversion, a large-file pointer instead of the file) fails here, once,
 * rather than as a puzzle in every model test. */
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common.h"
#include "test.h"

/* ===== Self-test cases (PETREL_TEST_SELFTEST=1 only) ===== */

static const char *selftest_dir(void) {
    const char *d = getenv("PETREL_TEST_SELFTEST_DIR");
    return d && *d ? d : t_tmpdir();
}

static void no_core(void) {
    struct rlimit rl = {0, 0};
    setrlimit(RLIMIT_CORE, &rl); /* a deliberate crash leaves no core file behind */
}

static void selftest_pass(void) {
    CHECK(1 + 1 == 2);
}

static void selftest_fail(void) {
    CHECKF(0, "a deliberate failure");
}

static void selftest_skip(void) {
    if (!t_need("no-such-fixture.gguf")) return;
    CHECKF(0, "t_need found a fixture that does not exist");
}

static void selftest_segv(void) {
    no_core();
    raise(SIGSEGV);
}

static void selftest_abort(void) {
    no_core();
    abort();
}

static void selftest_exit(void) {
    exit(0);
}

/* Starts a subprocess (as the serve tests start `petrel serve`), in the case's group;
 * records its pid, then never returns. */
static void selftest_hang(void) {
    pid_t pid = fork();
    if (pid == 0) {
        for (;;)
            pause();
    }
    char path[600], line[32];
    snprintf(path, sizeof path, "%s/hang.pid", selftest_dir());
    int n = snprintf(line, sizeof line, "%d\n", (int)pid);
    t_write_file(path, line, (size_t)n);
    for (;;)
        pause();
}

/* Leaves a file in the fixture folder PETREL_FIXTURES names. */
static void selftest_litter(void) {
    const char *fx = getenv("PETREL_FIXTURES");
    CHECK(fx && *fx);
    if (!fx) return;
    char path[600];
    snprintf(path, sizeof path, "%s/litter.usage", fx);
    CHECK(t_write_file(path, "x", 1) == 0);
}

/* Each case's temp and usage folders exist and are empty, and the CLI is told
 * them; leaves a file in each for the next case to not find. */
static void fresh_dirs(void) {
    const char *u = t_usage_dir(), *env = getenv("PETREL_USAGE_DIR"),
               *xdg = getenv("XDG_CACHE_HOME");
    char root[512]; /* the case's folder: t_tmpdir's parent */
    snprintf(root, sizeof root, "%s", t_tmpdir());
    char *slash = strrchr(root, '/');
    if (slash) *slash = 0;
    CHECKF(strstr(root, "/case-"), "t_tmpdir %s is not a case's folder", t_tmpdir());
    CHECKF(env && !strcmp(env, u), "PETREL_USAGE_DIR %s, usage dir %s", env ? env : "(unset)", u);
    CHECKF(!strncmp(u, root, strlen(root)), "usage dir %s outside %s", u, root);
    CHECKF(xdg && !strncmp(xdg, root, strlen(root)), "XDG_CACHE_HOME %s outside %s",
           xdg ? xdg : "(unset)", root);
    const char *dirs[] = {u, t_tmpdir()};
    for (int i = 0; i < 2; i++) {
        char path[600], cmd[700], out[256];
        struct stat st;
        CHECKF(stat(dirs[i], &st) == 0 && S_ISDIR(st.st_mode), "no folder %s", dirs[i]);
        snprintf(cmd, sizeof cmd, "ls -A %s", dirs[i]);
        CHECK(t_run(cmd, out, sizeof out) == 0);
        CHECKF(out[0] == 0, "%s not empty: %s", dirs[i], out);
        snprintf(path, sizeof path, "%s/model.gguf.usage", dirs[i]);
        CHECK(t_write_file(path, "x", 1) == 0);
    }
}

static void selftest_fresh_a(void) {
    fresh_dirs();
}
static void selftest_fresh_b(void) {
    fresh_dirs();
}

/* ===== The check ===== */

/* State letter of process pid ('R', 'S', 'Z', ...), or 0 when there is none. */
static char proc_state(int pid) {
    if (access("/proc/self/stat", F_OK) != 0) return kill(pid, 0) == 0 ? 'R' : 0; /* no /proc */
    char path[64], s[1024];
    snprintf(path, sizeof path, "/proc/%d/stat", pid);
    /* read, not t_read_file: /proc files report size 0 */
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    const size_t n = fread(s, 1, sizeof s - 1, f);
    fclose(f);
    s[n] = 0;
    const char *p = strrchr(s, ')');
    return p && p[1] == ' ' ? p[2] : '?';
}

static void runner_isolates_cases(void) {
    const char *self = t_self();
    char dir[600], fx[700];
    snprintf(dir, sizeof dir, "%s/selftest", t_tmpdir());
    snprintf(fx, sizeof fx, "%s/fx", dir);
    mkdir(dir, 0755);
    mkdir(fx, 0755);
    char cmd[4096];
    static char out[1 << 16];
    snprintf(cmd, sizeof cmd,
             "PETREL_TEST_SELFTEST=1 PETREL_TEST_TIMEOUT=2 PETREL_TEST_SELFTEST_DIR=%s "
             "PETREL_FIXTURES=%s "
             "%s selftest_",
             dir, fx, self);
    const int rc = t_run(cmd, out, sizeof out);
    CHECKF(rc == 1, "exit status %d, expected 1:\n%s", rc, out);
    CHECK_STR_CONTAINS(out, "ok   selftest_pass (");
    CHECK_STR_CONTAINS(out, "a deliberate failure");
    CHECK_STR_CONTAINS(out, "FAIL selftest_fail (");
    CHECK_STR_CONTAINS(out,
                       "skip selftest_skip: needs no-such-fixture.gguf from ../shared/fixtures");
    CHECK_STR_CONTAINS(out, "FAIL selftest_segv (why: "); /* signal 11, or ASan's exit status */
    CHECK_STR_CONTAINS(out, "FAIL selftest_abort (why: signal 6");
    CHECK_STR_CONTAINS(out, "FAIL selftest_exit (why: exit status 0 before the case returned)");
    CHECK_STR_CONTAINS(out, "FAIL selftest_hang (why: timed out after 2 s)");
    CHECK_STR_CONTAINS(out, "ok   selftest_litter (");
    CHECK_STR_CONTAINS(out, "FAIL fixtures_untouched (why: the run left");
    CHECK_STR_CONTAINS(out, "fx/litter.usage)");
    CHECK_STR_CONTAINS(out, "ok   selftest_fresh_a (");
    CHECK_STR_CONTAINS(out, "ok   selftest_fresh_b (");
    /* the summary is the last line */
    const char *want = "4 passed, 6 failed, 1 skipped\n";
    const size_t len = strlen(out), wl = strlen(want);
    CHECKF(len >= wl && !strcmp(out + len - wl, want), "last line is not \"%.*s\":\n%s",
           (int)wl - 1, want, out);
    /* the hung case's subprocess was killed with it */
    char path[700];
    snprintf(path, sizeof path, "%s/hang.pid", dir);
    char *pid = t_read_file(path, NULL);
    CHECKF(pid, "the hang case did not record its subprocess");
    if (pid) {
        char st = proc_state(atoi(pid));
        for (int i = 0; i < 50 && st && st != 'Z'; i++) {
            usleep(100 * 1000);
            st = proc_state(atoi(pid));
        }
        CHECKF(!st || st == 'Z', "the hung case's subprocess %s is still alive (state %c)", pid,
               st);
        if (st && st != 'Z') kill(atoi(pid), SIGKILL);
        free(pid);
    }
}

/* ===== The repository's fixtures ===== */

static void fixtures_match_checksums(void) {
    static char out[1 << 14];
    int rc = t_run("cd tests/fixtures && if command -v sha256sum >/dev/null; then sha256sum "
                   "--quiet -c SHA256SUMS; "
                   "else shasum -a 256 --quiet -c SHA256SUMS; fi",
                   out, sizeof out);
    CHECKF(rc == 0, "tests/fixtures differs from its SHA256SUMS (exit %d):\n%s", rc, out);
    /* every file listed is there: 125 lines for the copy described in tests/fixtures/ABOUT.md */
    size_t len;
    char *sums = t_read_file("tests/fixtures/SHA256SUMS", &len);
    CHECK(sums != NULL);
    int lines = 0;
    for (size_t i = 0; sums && i < len; i++)
        lines += sums[i] == '\n';
    CHECKF(lines >= 125, "SHA256SUMS lists %d files", lines);
    free(sums);
}

T_SUITE(runner) {
    T_ADD(runner_isolates_cases);
    T_ADD(fixtures_match_checksums);
    const char *self = getenv("PETREL_TEST_SELFTEST");
    if (!self || strcmp(self, "1")) return;
    T_ADD(selftest_pass);
    T_ADD(selftest_fail);
    T_ADD(selftest_skip);
    T_ADD(selftest_segv);
    T_ADD(selftest_abort);
    T_ADD(selftest_exit);
    T_ADD(selftest_litter);
    T_ADD(selftest_fresh_a);
    T_ADD(selftest_fresh_b);
    T_ADD(selftest_hang);
}
