/* main.c — test runner: runs the cases that every tests/test_*.c registered
 * (with T_SUITE) before main, each in a forked child with a time limit, and
 * prints the summary line `N passed, N failed` (`, N skipped` when any) last;
 * exits 1 when anything failed.
 *
 *   test_petrel [SUBSTRING...]   run only the cases whose name contains one of them
 *
 * Isolation. Each case runs in its own process, in its own process group, with
 * stdin from /dev/null. A crash (a signal, an abort, a sanitizer report that
 * exits non-zero, an exit() from deep in the code) or a hang fails that case
 * alone — `FAIL name (why: signal 11, Segmentation fault)`, `FAIL name (why:
 * timed out after 300 s)` — and the run goes on. On timeout, and after every
 * case, the whole process group is killed (cases start `petrel serve` and
 * shell pipelines); on Linux the runner is a child subreaper, so what a killed
 * case left behind is reaped here rather than lingering as zombies.
 * The result comes back through a pipe, not the exit status alone: the child
 * writes one record (passed / failed / skipped + the skip reason) after the
 * case returned, and it counts only when the child then exits 0 — so a case
 * that exits early, or whose leak check at exit fails, is a failure.
 *
 * Time limit: PETREL_TEST_TIMEOUT seconds per case (default 300); a case
 * registered with T_ADD_TIMEOUT gets its own limit when that is longer.
 * Cases run one after another, never in parallel (they time themselves and
 * share the machine's cores).
 *
 * Hermetic files. One temp dir per run (/tmp/petrel-test-XXXXXX, removed at
 * exit), and in it a fresh case-N/ folder per case, removed when the case is
 * over: case-N/tmp is the case's t_tmpdir, empty at its start (every case is a
 * fresh fork, so a static counter naming files restarts at 0 and must not find
 * an earlier case's file there), case-N/usage its usage
 * statistics (t_usage_dir, also exported as PETREL_USAGE_DIR for the CLI) and
 * case-N/cache its XDG_CACHE_HOME (so `petrel` subprocesses put packs and
 * usage there, never in the user's cache or next to a fixture). The fixture
 * folders (tests/fixtures, $PETREL_FIXTURES, ../shared/fixtures, models) are
 * listed before and after the run; a file the run left there fails the run
 * (`FAIL fixtures_untouched`).
 *
 * Fixtures: t_fixture looks in tests/fixtures (the copy in the repository),
 * then $PETREL_FIXTURES, then ../shared/fixtures; t_need reports the case
 * skipped by the name of a file found in none of them.
 *
 * Self-test: with PETREL_TEST_SELFTEST=1 a few cases that pass, fail, skip,
 * crash, abort, exit early, hang and litter are registered too; the case
 * runner_isolates_cases runs this binary that way and checks the outcome. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#ifdef __linux__
#include <sys/prctl.h>
#endif

#include "test.h"

#define DEFAULT_TIMEOUT_S 300
#define REPO_FIXTURES "tests/fixtures"
#define SHARED_FIXTURES "../shared/fixtures"

typedef struct {
    const char *name;
    t_fn fn;
    int timeout_s; /* 0: the run's default */
} t_case;

static t_case cases[4096];
static int n_cases;
static char tmpdir[256];      /* the run's temp dir */
static const char *self_path; /* argv[0] */
static pid_t main_pid;

/* State of the running case (meaningful in the child only). */
static int cur_failed, cur_skipped;
static char cur_skip_why[400];
static char cur_tmp[320], cur_usage[320]; /* the case's folders (see the top) */

/* ===== Registration and the API of test.h ===== */

void t_add_timeout(const char *name, t_fn fn, int timeout_s) {
    if (n_cases == (int)(sizeof cases / sizeof cases[0])) {
        fprintf(stderr, "too many test cases\n");
        exit(2);
    }
    cases[n_cases].name = name;
    cases[n_cases].fn = fn;
    cases[n_cases].timeout_s = timeout_s;
    n_cases++;
}

void t_add(const char *name, t_fn fn) {
    t_add_timeout(name, fn, 0);
}

void t_fail_at(const char *file, int line, const char *fmt, ...) {
    va_list ap;
    fprintf(stderr, "  %s:%d: ", file, line);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    cur_failed++;
}

void t_skip(const char *why) {
    fprintf(stderr, "  skipped: %s\n", why);
    if (!cur_skipped) { /* the first reason is the one reported */
        size_t n = strlen(why) < sizeof cur_skip_why ? strlen(why) : sizeof cur_skip_why - 1;
        memcpy(cur_skip_why, why, n);
        cur_skip_why[n] = 0;
    }
    cur_skipped = 1;
}

/* The places a fixture is looked for, in order; returns how many were filled. */
static int fixture_dirs(const char *dirs[3]) {
    int n = 0;
    const char *env = getenv("PETREL_FIXTURES");
    dirs[n++] = REPO_FIXTURES;
    if (env && *env) dirs[n++] = env;
    dirs[n++] = SHARED_FIXTURES;
    return n;
}

const char *t_fixture(const char *name) {
    static char buf[4096];
    const char *dirs[3];
    int n = fixture_dirs(dirs);
    for (int i = 0; i < n; i++) {
        snprintf(buf, sizeof buf, "%s/%s", dirs[i], name);
        if (access(buf, F_OK) == 0) return buf;
    }
    /* found nowhere: name PETREL_FIXTURES (or the shared folder) in the caller's error */
    snprintf(buf, sizeof buf, "%s/%s", dirs[n == 3 ? 1 : n - 1], name);
    return buf;
}

const char *t_need(const char *name) {
    const char *p = t_fixture(name);
    if (access(p, F_OK) == 0) return p;
    char why[600];
    snprintf(why, sizeof why, "needs %s from %s (not shipped in %s)", name, SHARED_FIXTURES,
             REPO_FIXTURES);
    t_skip(why);
    return NULL;
}

const char *t_tmpdir(void) {
    return cur_tmp;
}

const char *t_usage_dir(void) {
    return cur_usage;
}

const char *t_self(void) {
    return self_path;
}

void *t_read_file(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *p = malloc((size_t)n + 1);
    if (p && fread(p, 1, (size_t)n, f) != (size_t)n) {
        free(p);
        p = NULL;
    }
    fclose(f);
    if (p) {
        p[n] = 0;
        if (len) *len = (size_t)n;
    }
    return p;
}

int t_write_file(const char *path, const void *data, size_t len) {
    FILE *f = fopen(path, "wb");
    if (!f) return -1;
    int ok = fwrite(data, 1, len, f) == len;
    return (fclose(f) == 0 && ok) ? 0 : -1;
}

int t_run(const char *cmd, char *out, size_t cap) {
    char full[8192];
    snprintf(full, sizeof full, "(%s) 2>&1", cmd);
    FILE *p = popen(full, "r");
    if (!p) return -1;
    size_t n = 0;
    int c;
    while ((c = fgetc(p)) != EOF)
        if (out && n + 1 < cap) out[n++] = (char)c;
    if (out && cap) out[n] = 0;
    int st = pclose(p);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128;
}

/* ===== Files: the temp dir and the fixture folders ===== */

static void rm_tree(const char *path) {
    DIR *d = opendir(path);
    if (d) {
        struct dirent *e;
        while ((e = readdir(d))) {
            if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
            char p[4096];
            snprintf(p, sizeof p, "%s/%s", path, e->d_name);
            rm_tree(p);
        }
        closedir(d);
        rmdir(path);
    } else {
        unlink(path);
    }
}

/* atexit: only the runner itself removes the temp dir, never a case's child. */
static void cleanup(void) {
    if (tmpdir[0] && getpid() == main_pid) rm_tree(tmpdir);
}

/* A listing of the fixture folders: every path one or two levels deep. */
typedef struct listing {
    char **path;
    int n, cap;
} listing;

static void list_add(listing *l, const char *p) {
    if (l->n == l->cap) {
        l->cap = l->cap ? 2 * l->cap : 256;
        l->path = realloc(l->path, (size_t)l->cap * sizeof *l->path);
    }
    l->path[l->n++] = strdup(p);
}

static void list_dir(listing *l, const char *dir, int depth) {
    DIR *d = opendir(dir);
    if (!d) return;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        char p[4096];
        snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
        list_add(l, p);
        struct stat st;
        if (depth > 0 && stat(p, &st) == 0 && S_ISDIR(st.st_mode)) list_dir(l, p, depth - 1);
    }
    closedir(d);
}

static void list_fixture_dirs(listing *l) {
    const char *dirs[3];
    int n = fixture_dirs(dirs);
    for (int i = 0; i < n; i++)
        list_dir(l, dirs[i], 1);
    list_dir(l, "models", 0); /* the demo model, opened by test_demo.c */
}

static int list_has(const listing *l, const char *p) {
    for (int i = 0; i < l->n; i++)
        if (!strcmp(l->path[i], p)) return 1;
    return 0;
}

static void list_free(listing *l) {
    for (int i = 0; i < l->n; i++)
        free(l->path[i]);
    free(l->path);
}

/* ===== Running one case ===== */

static volatile sig_atomic_t stop_signal; /* SIGINT/SIGTERM received by the runner */
static volatile pid_t cur_child;

static void on_stop(int sig) {
    stop_signal = sig;
    if (cur_child > 0) kill(-cur_child, SIGKILL);
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int mkdir_p(const char *path) {
    char p[512];
    snprintf(p, sizeof p, "%s", path);
    for (char *s = p + 1; *s; s++)
        if (*s == '/') {
            *s = 0;
            mkdir(p, 0755);
            *s = '/';
        }
    return mkdir(p, 0755) == 0 || errno == EEXIST ? 0 : -1;
}

/* In the child: run case i, send "P", "F" or "S<reason>" up the pipe, exit 0
 * (normally, so sanitizer leak checks run and can still fail the case). */
static void child_run(int i, int wfd) {
    setpgid(0, 0);
    signal(SIGINT, SIG_DFL);
    signal(SIGTERM, SIG_DFL);
    int nul = open("/dev/null", O_RDONLY);
    if (nul >= 0) dup2(nul, 0), close(nul);
    char cache[400];
    snprintf(cur_tmp, sizeof cur_tmp, "%s/case-%d/tmp", tmpdir, i);
    snprintf(cur_usage, sizeof cur_usage, "%s/case-%d/usage", tmpdir, i);
    snprintf(cache, sizeof cache, "%s/case-%d/cache", tmpdir, i);
    mkdir_p(cur_tmp);
    mkdir_p(cur_usage);
    mkdir_p(cache);
    setenv("PETREL_USAGE_DIR", cur_usage, 1);
    setenv("XDG_CACHE_HOME", cache, 1);
    cases[i].fn();
    char rec[sizeof cur_skip_why + 1];
    int n;
    if (cur_failed)
        n = snprintf(rec, sizeof rec, "F");
    else if (cur_skipped)
        n = snprintf(rec, sizeof rec, "S%s", cur_skip_why);
    else
        n = snprintf(rec, sizeof rec, "P");
    fflush(NULL);
    if (write(wfd, rec, (size_t)n) != n) _exit(3);
    close(wfd);
    exit(0);
}

/* Kill what is left of a case's process group, reap whatever was reparented
 * to the runner. */
static void kill_group(pid_t pgid) {
    kill(-pgid, SIGKILL);
    while (waitpid(-1, NULL, WNOHANG) > 0) {
    }
}

typedef enum { R_PASS, R_FAIL, R_SKIP } result;

/* Run case i in a child within its time limit. Fills why (the reason of a
 * crash, a hang or a skip) and returns the result. */
static result run_case(int i, int limit_s, char *why, size_t why_len) {
    why[0] = 0;
    int fds[2];
    if (pipe(fds) != 0) {
        snprintf(why, why_len, "why: pipe: %s", strerror(errno));
        return R_FAIL;
    }
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) {
        snprintf(why, why_len, "why: fork: %s", strerror(errno));
        close(fds[0]);
        close(fds[1]);
        return R_FAIL;
    }
    if (pid == 0) {
        close(fds[0]);
        fcntl(fds[1], F_SETFD, FD_CLOEXEC); /* what the case execs does not hold it */
        child_run(i, fds[1]);
    }
    close(fds[1]);
    setpgid(pid, pid); /* also here: no window in which a kill of the group misses it */
    cur_child = pid;
    const double t0 = now_s();
    int status = 0, timed_out = 0;
    long nap_us = 1000; /* polls: 1 ms, doubling to 20 ms (short cases cost ~nothing) */
    for (;;) {
        siginfo_t si;
        memset(&si, 0, sizeof si);
        /* WNOWAIT: the group is killed before the leader is reaped, so its id
         * cannot have been reused by then */
        if (waitid(P_PID, (id_t)pid, &si, WEXITED | WNOHANG | WNOWAIT) == 0 && si.si_pid == pid)
            break;
        if (stop_signal || now_s() - t0 > limit_s) {
            timed_out = !stop_signal;
            kill(-pid, SIGKILL);
            break;
        }
        usleep((useconds_t)nap_us);
        if (nap_us < 20000) nap_us *= 2;
    }
    kill(-pid, SIGKILL);
    waitpid(pid, &status, 0);
    kill_group(pid);
    cur_child = 0;
    char dir[320];
    snprintf(dir, sizeof dir, "%s/case-%d", tmpdir, i);
    rm_tree(dir);
    char rec[512];
    fcntl(fds[0], F_SETFL, O_NONBLOCK);
    ssize_t n = read(fds[0], rec, sizeof rec - 1);
    close(fds[0]);
    rec[n > 0 ? n : 0] = 0;
    if (timed_out) {
        snprintf(why, why_len, "why: timed out after %d s", limit_s);
        return R_FAIL;
    }
    if (stop_signal) {
        snprintf(why, why_len, "why: the run was interrupted");
        return R_FAIL;
    }
    if (WIFSIGNALED(status)) {
        snprintf(why, why_len, "why: signal %d, %s", WTERMSIG(status), strsignal(WTERMSIG(status)));
        return R_FAIL;
    }
    if (n <= 0) {
        snprintf(why, why_len, "why: exit status %d before the case returned", WEXITSTATUS(status));
        return R_FAIL;
    }
    if (WEXITSTATUS(status) != 0) {
        snprintf(why, why_len, "why: exit status %d after the case returned (a sanitizer report?)",
                 WEXITSTATUS(status));
        return R_FAIL;
    }
    if (rec[0] == 'S') {
        snprintf(why, why_len, "%s", rec + 1);
        return R_SKIP;
    }
    return rec[0] == 'P' ? R_PASS : R_FAIL;
}

static int env_timeout(void) {
    const char *s = getenv("PETREL_TEST_TIMEOUT");
    if (!s || !*s) return DEFAULT_TIMEOUT_S;
    char *end;
    long v = strtol(s, &end, 10);
    if (*end || v < 1 || v > 1000000) {
        fprintf(stderr, "PETREL_TEST_TIMEOUT=%s: expected a number of seconds, using %d\n", s,
                DEFAULT_TIMEOUT_S);
        return DEFAULT_TIMEOUT_S;
    }
    return (int)v;
}

/* Whether case `name` is selected: no filter selects every case, else a case whose name
 * contains one of the substrings. */
static int selected(const char *name, int n_filter, char **filter) {
    if (n_filter == 0) return 1;
    for (int i = 0; i < n_filter; i++)
        if (strstr(name, filter[i])) return 1;
    return 0;
}

int main(int argc, char **argv) {
    main_pid = getpid();
    snprintf(tmpdir, sizeof tmpdir, "/tmp/petrel-test-XXXXXX");
    if (!mkdtemp(tmpdir)) {
        perror("mkdtemp");
        return 2;
    }
    atexit(cleanup);
    /* socket tests write to servers that may have closed the connection:
     * that must be an error the test sees, not a signal that kills the run */
    signal(SIGPIPE, SIG_IGN);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_stop;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
#ifdef __linux__
    /* orphans of a killed case (a server whose parent died) come to the runner to be reaped */
    prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
#endif
    self_path = argv[0];
    /* nothing a case does may reach the user's cache (child_run narrows this per case) */
    char cache[300];
    snprintf(cache, sizeof cache, "%s/cache", tmpdir);
    setenv("XDG_CACHE_HOME", cache, 1);
    const int default_limit = env_timeout();
    listing before = {0};
    list_fixture_dirs(&before);
    int passed = 0, failed = 0, skipped = 0;
    for (int i = 0; i < n_cases && !stop_signal; i++) {
        if (!selected(cases[i].name, argc - 1, argv + 1)) continue;
        const int limit = cases[i].timeout_s > default_limit ? cases[i].timeout_s : default_limit;
        char why[600];
        double t0 = now_s();
        result r = run_case(i, limit, why, sizeof why);
        double dt = now_s() - t0;
        if (r == R_FAIL) {
            failed++;
            if (why[0])
                fprintf(stderr, "FAIL %s (%s)\n", cases[i].name, why);
            else
                fprintf(stderr, "FAIL %s (%.2fs)\n", cases[i].name, dt);
        } else if (r == R_SKIP) {
            skipped++;
            fprintf(stderr, "skip %s: %s\n", cases[i].name, why);
        } else {
            passed++;
            fprintf(stderr, "ok   %s (%.2fs)\n", cases[i].name, dt);
        }
    }
    /* the run must leave the fixture folders as it found them */
    listing after = {0};
    list_fixture_dirs(&after);
    int litter = 0;
    for (int i = 0; i < after.n; i++)
        if (!list_has(&before, after.path[i])) {
            fprintf(stderr, "FAIL fixtures_untouched (why: the run left %s)\n", after.path[i]);
            litter = 1;
        }
    failed += litter;
    list_free(&before);
    list_free(&after);
    fflush(stderr);
    if (stop_signal) fprintf(stderr, "interrupted by signal %d\n", (int)stop_signal);
    if (skipped)
        printf("%d passed, %d failed, %d skipped\n", passed, failed, skipped);
    else
        printf("%d passed, %d failed\n", passed, failed);
    return failed || stop_signal ? 1 : 0;
}
