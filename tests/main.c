/* main.c — test runner: runs the cases that every tests/test_*.c registered
 * (with T_SUITE) before main, prints the
 * summary line `N passed, N failed` last, exits 1 when anything failed.
 * Usage: test_petrel [SUBSTRING]  (run only cases whose name contains it). */
#include <dirent.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <unistd.h>

#include "test.h"

typedef struct {
    const char *name;
    t_fn fn;
} t_case;

static t_case cases[4096];
static int n_cases;
static int cur_failed, cur_skipped;
static char tmpdir[256];

void t_add(const char *name, t_fn fn) {
    if (n_cases == (int)(sizeof cases / sizeof cases[0])) {
        fprintf(stderr, "too many test cases\n");
        exit(2);
    }
    cases[n_cases].name = name;
    cases[n_cases].fn = fn;
    n_cases++;
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
    cur_skipped = 1;
}

const char *t_fixture(const char *name) {
    static char buf[4096];
    const char *dir = getenv("PETREL_FIXTURES");
    snprintf(buf, sizeof buf, "%s/%s", dir && *dir ? dir : "../shared/fixtures", name);
    return buf;
}

const char *t_tmpdir(void) { return tmpdir; }

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

static void cleanup(void) {
    if (tmpdir[0]) rm_tree(tmpdir);
}

static double now_s(void) {
    struct timeval tv;
    gettimeofday(&tv, NULL);
    return tv.tv_sec + tv.tv_usec * 1e-6;
}

int main(int argc, char **argv) {
    const char *filter = argc > 1 ? argv[1] : NULL;
    snprintf(tmpdir, sizeof tmpdir, "/tmp/petrel-test-XXXXXX");
    if (!mkdtemp(tmpdir)) {
        perror("mkdtemp");
        return 2;
    }
    atexit(cleanup);
    /* socket tests write to servers that may have closed the connection:
     * that must be an error the test sees, not a signal that kills the run */
    signal(SIGPIPE, SIG_IGN);
    /* files the engine derives from models (usage statistics, packs in the
     * cache dir) go to the test's own folder, never the user's cache */
    char cache[300];
    snprintf(cache, sizeof cache, "%s/cache", tmpdir);
    setenv("XDG_CACHE_HOME", cache, 1);
    int passed = 0, failed = 0, skipped = 0;
    for (int i = 0; i < n_cases; i++) {
        if (filter && !strstr(cases[i].name, filter)) continue;
        cur_failed = 0;
        cur_skipped = 0;
        double t0 = now_s();
        cases[i].fn();
        double dt = now_s() - t0;
        if (cur_failed) {
            failed++;
            fprintf(stderr, "FAIL %s (%.2fs)\n", cases[i].name, dt);
        } else if (cur_skipped) {
            skipped++;
            fprintf(stderr, "skip %s\n", cases[i].name);
        } else {
            passed++;
            fprintf(stderr, "ok   %s (%.2fs)\n", cases[i].name, dt);
        }
    }
    fflush(stderr);
    if (skipped)
        printf("%d passed, %d failed, %d skipped\n", passed, failed, skipped);
    else
        printf("%d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}
