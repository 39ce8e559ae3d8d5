/* test_pull.c — `petrel pull`, `petrel list` and `-hf` against a fake Hugging Face Hub
 * (tests/hub/fakehub.mjs, plain Node: the Hub's listing and resolve routes on one port, the CDN
 * it redirects to on another, with faults on demand). Each case builds its repositories in its
 * temporary folder and uses a cache of its own there (PETREL_CACHE), so nothing is written
 * outside it. What the cases hold to: the downloaded files are byte-identical to the served
 * ones; nothing corrupt ever appears under a final name; a partial download resumes with a
 * range request (the fake Hub's request log shows it) and never restarts from zero silently.
 * Needs Node (20+, as the server tests); PETREL_SKIP_NODE=1 skips these cases by name. */
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "test.h"

static char out[1 << 16];

static const char *bin(void) {
    const char *b = getenv("PETREL_BIN");
    return b && *b ? b : "build/petrel";
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* ===== The fake Hub ===== */

typedef struct hub {
    pid_t pid;
    int api;          /* port of the Hub (listing, resolve) */
    char root[2048];  /* ROOT: repos/ and log.txt */
    char cache[2100]; /* PETREL_CACHE of the case */
    char env[4500];   /* "HF_ENDPOINT=... PETREL_CACHE=..." for the commands */
} hub;

/* Start the fake Hub over ROOT = the case's temp dir. 0, or -1 (case failed or skipped). */
static int hub_up(hub *h) {
    memset(h, 0, sizeof *h);
    const char *skip = getenv("PETREL_SKIP_NODE");
    if (skip && *skip == '1') {
        t_skip("PETREL_SKIP_NODE=1: the fake Hub needs node");
        return -1;
    }
    snprintf(h->root, sizeof h->root, "%s/hub", t_tmpdir());
    snprintf(h->cache, sizeof h->cache, "%s/cache", t_tmpdir());
    mkdir(h->root, 0755);
    char repos[2100], ports[2100];
    snprintf(repos, sizeof repos, "%s/repos", h->root);
    mkdir(repos, 0755);
    snprintf(ports, sizeof ports, "%s/ports", h->root);
    fflush(NULL);
    h->pid = fork();
    if (h->pid < 0) return -1;
    if (h->pid == 0) {
        if (!freopen(ports, "w", stdout)) _exit(127);
        execlp("node", "node", "tests/hub/fakehub.mjs", h->root, (char *)NULL);
        _exit(127);
    }
    double t0 = now_s();
    while (now_s() - t0 < 20) {
        char *p = t_read_file(ports, NULL);
        const char *a = p ? strstr(p, "\"api\":") : NULL;
        if (a) h->api = atoi(a + 6);
        free(p);
        if (h->api > 0) break;
        int st;
        if (waitpid(h->pid, &st, WNOHANG) == h->pid) {
            h->pid = 0;
            t_fail_at(__FILE__, __LINE__, "the fake Hub did not start: is node (20+) installed?");
            return -1;
        }
        usleep(20 * 1000);
    }
    CHECKF(h->api > 0, "the fake Hub gave no port");
    /* no HF_TOKEN of the developer's own, no real endpoint */
    snprintf(h->env, sizeof h->env,
             "env -u HF_TOKEN HF_ENDPOINT=http://127.0.0.1:%d PETREL_CACHE=%s "
             "PETREL_USAGE_DIR=%s",
             h->api, h->cache, t_usage_dir());
    return h->api > 0 ? 0 : -1;
}

static void hub_down(hub *h) {
    if (h->pid <= 0) return;
    kill(h->pid, SIGTERM);
    int st;
    waitpid(h->pid, &st, 0);
    h->pid = 0;
}

/* Run `petrel ARGS` with the hub's environment (extra: more VAR=VALUE first); stdout and
 * stderr in `out`. */
static int pet(const hub *h, const char *extra, const char *args) {
    char cmd[8000];
    snprintf(cmd, sizeof cmd, "%s %s %s %s < /dev/null", h->env, extra ? extra : "", bin(), args);
    return t_run(cmd, out, sizeof out);
}

/* Deterministic bytes (xorshift), different per seed. */
static unsigned char *make_bytes(size_t n, uint64_t seed) {
    unsigned char *b = malloc(n);
    uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
    for (size_t i = 0; i < n; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        b[i] = (unsigned char)(x >> 24);
    }
    return b;
}

/* mkdir -p of path's folder, then write the file. */
static int put(const char *path, const void *data, size_t n) {
    char d[4096];
    snprintf(d, sizeof d, "%s", path);
    for (char *p = d + 1; *p; p++)
        if (*p == '/') {
            *p = 0;
            mkdir(d, 0755);
            *p = '/';
        }
    return t_write_file(path, data, n);
}

/* A file of the fake repository OWNER/NAME with n deterministic bytes. */
static void repo_file(const hub *h, const char *repo, const char *path, size_t n, uint64_t seed) {
    char p[4096];
    snprintf(p, sizeof p, "%s/repos/%s/%s", h->root, repo, path);
    unsigned char *b = make_bytes(n, seed);
    CHECK(put(p, b, n) == 0);
    free(b);
}

static void repo_config(const hub *h, const char *repo, const char *json) {
    char p[4096];
    snprintf(p, sizeof p, "%s/repos/%s.json", h->root, repo);
    CHECK(put(p, json, strlen(json)) == 0);
}

/* The cached copy of repo/path is byte-identical to the served one. */
static int same_as_served(const hub *h, const char *repo, const char *path) {
    char a[4096], b[4096];
    snprintf(a, sizeof a, "%s/repos/%s/%s", h->root, repo, path);
    snprintf(b, sizeof b, "%s/%s/%s", h->cache, repo, path);
    size_t na = 0, nb = 0;
    char *x = t_read_file(a, &na), *y = t_read_file(b, &nb);
    int same = x && y && na == nb && !memcmp(x, y, na);
    free(x);
    free(y);
    return same;
}

static int exists(const char *fmt_dir, const char *repo, const char *path, const char *suffix) {
    char p[4096];
    struct stat st;
    snprintf(p, sizeof p, "%s/%s/%s%s", fmt_dir, repo, path, suffix);
    return stat(p, &st) == 0;
}

static char *hub_log(const hub *h) {
    char p[4096];
    snprintf(p, sizeof p, "%s/log.txt", h->root);
    char *l = t_read_file(p, NULL);
    return l ? l : strdup("");
}

static int count(const char *hay, const char *needle) {
    int n = 0;
    for (const char *p = hay; (p = strstr(p, needle)); p++)
        n++;
    return n;
}

/* ===== Cases ===== */

/* A split model in a subfolder (three parts, fetched in parallel), next to another quant and
 * an mmproj file, listed two entries a page: exactly the three parts arrive, identical, through
 * the redirect, without the token reaching the CDN; `list` shows the model; a second pull
 * finds it complete and downloads nothing. */
static void pull_split_parts(void) {
    hub h;
    if (hub_up(&h)) return;
    const char *repo = "acme/Big-GGUF";
    const char *parts[3] = {"Q4_K_M/Big-Q4_K_M-00001-of-00003.gguf",
                            "Q4_K_M/Big-Q4_K_M-00002-of-00003.gguf",
                            "Q4_K_M/Big-Q4_K_M-00003-of-00003.gguf"};
    for (int i = 0; i < 3; i++)
        repo_file(&h, repo, parts[i], 1500000 + 1000 * (size_t)i, 10 + (uint64_t)i);
    repo_file(&h, repo, "Big-Q8_0.gguf", 300000, 20);
    repo_file(&h, repo, "mmproj-Big-Q4_K_M.gguf", 1000, 21);
    repo_file(&h, repo, "README.md", 100, 22);
    repo_config(&h, repo, "{\"page\": 2}");
    int rc = pet(&h, "HF_TOKEN=tok", "pull acme/Big-GGUF:q4_k_m -j 3");
    CHECKF(rc == 0, "pull: %d %s", rc, out);
    CHECK_STR_CONTAINS(out, "Big-Q4_K_M-00001-of-00003.gguf\n"); /* the path on stdout */
    for (int i = 0; i < 3; i++) {
        CHECKF(same_as_served(&h, repo, parts[i]), "%s differs", parts[i]);
        CHECK(!exists(h.cache, repo, parts[i], ".part"));
    }
    CHECK(!exists(h.cache, repo, "Big-Q8_0.gguf", ""));
    CHECK(!exists(h.cache, repo, "mmproj-Big-Q4_K_M.gguf", ""));
    char *log = hub_log(&h);
    CHECKF(count(log, "api GET /api/models/acme/Big-GGUF/tree/main") >= 3, "pages: %s", log);
    CHECKF(count(log, "status=302") == 3 && count(log, "cdn GET") == 3, "log: %s", log);
    for (const char *l = log; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL) {
        const char *e = strchr(l, '\n');
        int len = e ? (int)(e - l) : (int)strlen(l);
        CHECKF(strncmp(l, "cdn", 3) || !memmem(l, (size_t)len, "auth=yes", 8),
               "the token went to the CDN: %.*s", len, l);
    }
    CHECK(!strstr(log, "status=400"));
    free(log);
    CHECK(pet(&h, NULL, "list 2>&1") == 0);
    CHECK_STR_CONTAINS(out, "acme/Big-GGUF:Q4_K_M");
    CHECK_STR_CONTAINS(out, "(split)");
    CHECK_STR_CONTAINS(out, "4.3 MiB");
    /* again: nothing to download */
    CHECK(pet(&h, NULL, "pull acme/Big-GGUF:Q4_K_M") == 0);
    CHECK_STR_CONTAINS(out, "already in the cache");
    log = hub_log(&h);
    CHECK(count(log, "cdn GET") == 3);
    free(log);
    hub_down(&h);
}

/* The CDN answers 503 once, then cuts the connection twice in the middle of the file: the
 * download goes on from where it stopped, with range requests, and the result is identical. */
static void pull_resumes_after_cut(void) {
    hub h;
    if (hub_up(&h)) return;
    repo_file(&h, "acme/cut", "m-Q2_K.gguf", 2000000, 30);
    /* a 503 first, then two cuts */
    repo_config(&h, "acme/cut", "{\"cut\": 500000, \"cuts\": 3, \"errors\": 1}");
    int rc = pet(&h, NULL, "pull acme/cut");
    CHECKF(rc == 0, "pull: %d %s", rc, out);
    CHECK_STR_CONTAINS(out, "transfer stopped at 0 B of 1.9 MiB (HTTP 503)");
    CHECK_STR_CONTAINS(out, "transfer stopped at 488.3 KiB of 1.9 MiB");
    CHECK(same_as_served(&h, "acme/cut", "m-Q2_K.gguf"));
    CHECK(!exists(h.cache, "acme/cut", "m-Q2_K.gguf", ".part"));
    char *log = hub_log(&h);
    CHECKF(strstr(log, "range=bytes=500000- auth=no status=206") &&
               strstr(log, "range=bytes=1000000- auth=no status=206"),
           "log: %s", log);
    free(log);
    hub_down(&h);
}

/* A .part left by an earlier run: resumed with a range request after its bytes are
 * re-hashed (said on stderr), identical in the end. A .part whose bytes are wrong ends in a
 * checksum error, with nothing under the final name and the bad .part gone. A server that
 * ignores the range: said, then started over, identical. */
static void pull_resumes_partial_file(void) {
    hub h;
    if (hub_up(&h)) return;
    const size_t n = 1200000, cut = 700000;
    repo_file(&h, "acme/part", "m-Q4_0.gguf", n, 40);
    unsigned char *good = make_bytes(n, 40);
    char part[4096];
    snprintf(part, sizeof part, "%s/acme/part/m-Q4_0.gguf.part", h.cache);
    CHECK(put(part, good, cut) == 0);
    int rc = pet(&h, NULL, "pull acme/part:Q4_0");
    CHECKF(rc == 0, "pull: %d %s", rc, out);
    CHECK_STR_CONTAINS(out, "resuming m-Q4_0.gguf at 683.6 KiB");
    CHECK(same_as_served(&h, "acme/part", "m-Q4_0.gguf"));
    char *log = hub_log(&h);
    CHECKF(strstr(log, "range=bytes=700000- auth=no status=206") && count(log, "cdn GET") == 1,
           "log: %s", log);
    free(log);

    /* wrong bytes in the .part: caught by the checksum, never saved */
    char final[4096];
    snprintf(final, sizeof final, "%s/acme/part/m-Q4_0.gguf", h.cache);
    CHECK(unlink(final) == 0);
    good[10] ^= 1;
    CHECK(put(part, good, cut) == 0);
    rc = pet(&h, NULL, "pull acme/part:Q4_0");
    CHECKF(rc == 1, "pull: %d %s", rc, out);
    CHECK_STR_CONTAINS(out, "checksum mismatch");
    CHECK(access(final, F_OK) != 0 && access(part, F_OK) != 0);
    /* the next run starts afresh and succeeds */
    CHECK(pet(&h, NULL, "pull acme/part:Q4_0") == 0);
    CHECK(same_as_served(&h, "acme/part", "m-Q4_0.gguf"));

    /* a server that ignores Range: said loudly, then the whole file */
    repo_file(&h, "acme/norange", "m-Q4_0.gguf", n, 41);
    repo_config(&h, "acme/norange", "{\"norange\": true}");
    unsigned char *other = make_bytes(n, 41);
    snprintf(part, sizeof part, "%s/acme/norange/m-Q4_0.gguf.part", h.cache);
    CHECK(put(part, other, cut) == 0);
    rc = pet(&h, NULL, "pull acme/norange");
    CHECKF(rc == 0, "pull: %d %s", rc, out);
    CHECK_STR_CONTAINS(out, "ignored the request to resume");
    CHECK(same_as_served(&h, "acme/norange", "m-Q4_0.gguf"));
    free(other);
    free(good);
    hub_down(&h);
}

/* The listing gives a wrong SHA-256: the download fails naming both sums, and nothing is left
 * under the final name (nor a .part to resume into the same failure). */
static void pull_wrong_checksum(void) {
    hub h;
    if (hub_up(&h)) return;
    repo_file(&h, "acme/bad", "m-Q8_0.gguf", 400000, 50);
    repo_config(&h, "acme/bad", "{\"badsum\": [\"m-Q8_0.gguf\"]}");
    int rc = pet(&h, NULL, "pull acme/bad");
    CHECKF(rc == 1, "pull: %d %s", rc, out);
    CHECK_STR_CONTAINS(out, "checksum mismatch: the Hub lists SHA-256 0000000000");
    CHECK(!exists(h.cache, "acme/bad", "m-Q8_0.gguf", ""));
    CHECK(!exists(h.cache, "acme/bad", "m-Q8_0.gguf", ".part"));
    hub_down(&h);
}

/* Errors in words: a gated repository without a token (401) and with a wrong one (403), then
 * with the right one; an unknown repository (404); an unknown quant and several models without
 * one (both list what exists); a malformed name (usage, 2); too little disk space (the numbers,
 * before any byte). */
static void pull_errors_explained(void) {
    hub h;
    if (hub_up(&h)) return;
    repo_file(&h, "acme/gated", "g-Q4_K_M.gguf", 100000, 60);
    repo_config(&h, "acme/gated", "{\"token\": \"sekrit\"}");
    CHECK(pet(&h, NULL, "pull acme/gated") == 1);
    CHECK_STR_CONTAINS(out, "is gated or private (401)");
    CHECK_STR_CONTAINS(out, "set HF_TOKEN");
    CHECK(pet(&h, "HF_TOKEN=wrong", "pull acme/gated") == 1);
    CHECK_STR_CONTAINS(out, "access refused (403)");
    CHECK(pet(&h, "HF_TOKEN=sekrit", "pull acme/gated") == 0);
    CHECK(same_as_served(&h, "acme/gated", "g-Q4_K_M.gguf"));

    CHECK(pet(&h, NULL, "pull acme/nothing-here") == 1);
    CHECK_STR_CONTAINS(out, "acme/nothing-here: no such repository");
    CHECK_STR_CONTAINS(out, "(404)");
    CHECK_STR_CONTAINS(out, "no GGUF repository on"); /* the search found nothing similar */
    repo_file(&h, "acme/Tiny-GGUF", "t-Q4_K_M.gguf", 1000, 67);
    CHECK(pet(&h, NULL, "pull someone/tiny") == 1);
    CHECK_STR_CONTAINS(out, "whose name contains 'tiny':\n  acme/Tiny-GGUF\n");

    repo_file(&h, "acme/two", "t-Q4_K_S.gguf", 1000, 61);
    repo_file(&h, "acme/two", "t-IQ2_XXS-00001-of-00002.gguf", 1000, 62);
    repo_file(&h, "acme/two", "t-IQ2_XXS-00002-of-00002.gguf", 1000, 63);
    CHECK(pet(&h, NULL, "pull acme/two:Q5_K_M") == 1);
    CHECK_STR_CONTAINS(out, "has no model matching 'Q5_K_M'");
    CHECK_STR_CONTAINS(out, "acme/two:Q4_K_S");
    CHECK_STR_CONTAINS(out, "acme/two:IQ2_XXS");
    CHECK_STR_CONTAINS(out, "(2 of 2 parts)");
    CHECK(pet(&h, NULL, "pull acme/two") == 1); /* no Q4_K_M, two models: which? */
    CHECK_STR_CONTAINS(out, "has several models");
    CHECK(pet(&h, NULL, "pull acme/two:iq2_xxs") == 0);
    CHECK(same_as_served(&h, "acme/two", "t-IQ2_XXS-00002-of-00002.gguf"));
    /* a split model with a part missing on the Hub */
    repo_file(&h, "acme/holes", "h-Q4_K_M-00001-of-00003.gguf", 1000, 64);
    repo_file(&h, "acme/holes", "h-Q4_K_M-00003-of-00003.gguf", 1000, 65);
    CHECK(pet(&h, NULL, "pull acme/holes") == 1);
    CHECK_STR_CONTAINS(out, "part 2 of 3");

    CHECK(pet(&h, NULL, "pull not-a-repo") == 2);
    CHECK_STR_CONTAINS(out, "expected OWNER/NAME[:QUANT]");
    CHECK(pet(&h, NULL, "pull ../../etc:passwd") == 2);

    repo_file(&h, "acme/huge", "x-Q4_K_M.gguf", 1000, 66);
    repo_config(&h, "acme/huge", "{\"size\": {\"x-Q4_K_M.gguf\": 1000000000000000}}");
    CHECK(pet(&h, NULL, "pull acme/huge") == 1);
    CHECK_STR_CONTAINS(out, "not enough disk space");
    CHECK_STR_CONTAINS(out, "the download needs 931322.57 GiB more");
    char *log = hub_log(&h);
    CHECK(!strstr(log, "acme/huge/resolve"));
    free(log);
    hub_down(&h);
}

/* A second pull of a file being downloaded is refused (the .part's lock). Ctrl-C in the middle
 * of a slow download: status 130, the bytes kept in the .part (nothing
 * under the final name); the next pull resumes from there with a range request. */
static void pull_interrupt_resumes(void) {
    hub h;
    if (hub_up(&h)) return;
    repo_file(&h, "acme/slow", "s-Q4_K_M.gguf", 3000000, 70);
    repo_config(&h, "acme/slow", "{\"rate\": 500000}");
    char cmd[16384], errf[4096], part[4096], final[4096];
    snprintf(errf, sizeof errf, "%s/pull.err", t_tmpdir());
    snprintf(part, sizeof part, "%s/acme/slow/s-Q4_K_M.gguf.part", h.cache);
    snprintf(final, sizeof final, "%s/acme/slow/s-Q4_K_M.gguf", h.cache);
    snprintf(cmd, sizeof cmd, "exec %s %s pull acme/slow > %s 2>&1 < /dev/null", h.env, bin(),
             errf);
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
        _exit(127);
    }
    double t0 = now_s();
    struct stat st;
    while (now_s() - t0 < 20 && !(stat(part, &st) == 0 && st.st_size >= 400000))
        usleep(20 * 1000);
    CHECKF(stat(part, &st) == 0 && st.st_size >= 400000, "no progress");
    /* a second petrel on the same file is refused, the first one goes on */
    CHECK(pet(&h, NULL, "pull acme/slow") == 1);
    CHECK_STR_CONTAINS(out, "is being downloaded by another petrel");
    kill(pid, SIGINT);
    int ws;
    waitpid(pid, &ws, 0);
    char *e = t_read_file(errf, NULL);
    CHECKF(WIFEXITED(ws) && WEXITSTATUS(ws) == 130, "status %d: %s", ws, e ? e : "");
    CHECK_STR_CONTAINS(e, "interrupted: what was downloaded is kept");
    free(e);
    CHECK(access(final, F_OK) != 0);
    CHECK(stat(part, &st) == 0 && st.st_size >= 400000 && st.st_size < 3000000);
    long long kept = (long long)st.st_size;
    CHECK(pet(&h, NULL, "list") == 0);
    CHECK_STR_CONTAINS(out, "acme/slow:Q4_K_M");
    CHECK_STR_CONTAINS(out, "incomplete: 0 of 1 file complete; `petrel pull acme/slow:Q4_K_M` "
                            "resumes it");
    repo_config(&h, "acme/slow", "{}");
    int rc = pet(&h, NULL, "pull acme/slow");
    CHECKF(rc == 0, "pull: %d %s", rc, out);
    CHECK(same_as_served(&h, "acme/slow", "s-Q4_K_M.gguf"));
    char want[128];
    snprintf(want, sizeof want, "range=bytes=%lld- auth=no status=206", kept);
    char *log = hub_log(&h);
    CHECKF(strstr(log, want) != NULL, "expected %s in %s", want, log);
    free(log);
    hub_down(&h);
}

/* -hf on generate: the demo model served as a repository is pulled, then generates exactly
 * what -m gives; a second run takes it from the cache with the Hub gone; -m with -hf is a
 * usage error. */
static void pull_hf_flag(void) {
    hub h;
    if (hub_up(&h)) return;
    size_t n = 0;
    char *demo = t_read_file("models/petrel-demo-glm.gguf", &n);
    CHECK(demo != NULL);
    if (!demo) return hub_down(&h);
    char p[4096];
    snprintf(p, sizeof p, "%s/repos/acme/demo-GGUF/petrel-demo-Q8_0.gguf", h.root);
    CHECK(put(p, demo, n) == 0);
    free(demo);
    const char *gen = "generate -p 'In the beginning' -n 12 --greedy --quiet";
    char args[1024], want[sizeof out];
    snprintf(args, sizeof args, "%s -m models/petrel-demo-glm.gguf 2>/dev/null", gen);
    CHECK(pet(&h, NULL, args) == 0);
    snprintf(want, sizeof want, "%s", out);
    CHECK(strlen(want) > 10);
    snprintf(args, sizeof args, "%s -hf acme/demo-GGUF:Q8_0 2>/dev/null", gen);
    CHECK(pet(&h, NULL, args) == 0);
    CHECKF(!strcmp(out, want), "-hf gave '%s', -m '%s'", out, want);
    CHECK(same_as_served(&h, "acme/demo-GGUF", "petrel-demo-Q8_0.gguf"));
    hub_down(&h);
    /* the Hub is gone: the cache serves */
    snprintf(args, sizeof args, "%s -hf acme/demo-GGUF 2>/dev/null", gen);
    CHECK(pet(&h, NULL, args) == 0);
    CHECKF(!strcmp(out, want), "cached -hf gave '%s'", out);
    snprintf(args, sizeof args, "%s -hf acme/demo-GGUF -m models/petrel-demo-glm.gguf", gen);
    CHECK(pet(&h, NULL, args) == 2);
    CHECK_STR_CONTAINS(out, "-m and -hf contradict each other");
    /* not in the cache, and the Hub unreachable: an error naming it */
    CHECK(pet(&h, NULL, "generate -p hi -hf acme/other") == 1);
    CHECK_STR_CONTAINS(out, "cannot list the repository's files");
}

/* On a terminal (a pty from script(1)): the progress bar, redrawn in place with bytes, rate and
 * ETA; a retry's line clears it first; then the offer to pack, answered yes, writes the pack.
 * Without a terminal: no question, the command to run instead; --pack packs without asking. */
static void pull_terminal_and_pack(void) {
    hub h;
    if (hub_up(&h)) return;
    size_t n = 0;
    char *demo = t_read_file("models/petrel-demo-glm.gguf", &n);
    CHECK(demo != NULL);
    if (!demo) return hub_down(&h);
    char p[4096], xpack[4096];
    snprintf(p, sizeof p, "%s/repos/acme/demo-GGUF/petrel-demo-Q8_0.gguf", h.root);
    CHECK(put(p, demo, n) == 0);
    snprintf(p, sizeof p, "%s/repos/acme/demo2-GGUF/petrel-demo-Q8_0.gguf", h.root);
    CHECK(put(p, demo, n) == 0);
    free(demo);
    repo_config(&h, "acme/demo-GGUF", "{\"rate\": 8000000, \"errors\": 1}");
    snprintf(xpack, sizeof xpack, "%s/acme/demo-GGUF/petrel-demo-Q8_0.gguf.xpack", h.cache);
    if (t_run("command -v script", NULL, 0) == 0) {
        char cmd[8000];
        snprintf(cmd, sizeof cmd,
                 "printf 'y\\n' | %s script -qec '%s pull acme/demo-GGUF' /dev/null", h.env, bin());
        int rc = t_run(cmd, out, sizeof out);
        CHECKF(rc == 0, "pull on a pty: %d %s", rc, out);
        CHECK_STR_CONTAINS(out, "\r\033[K[####");
        CHECK_STR_CONTAINS(out, " / 12.0 MiB  ");
        CHECK_STR_CONTAINS(out, "/s  ETA 0:00:0");
        CHECK_STR_CONTAINS(out, "\r\033[Kpetrel: petrel-demo-Q8_0.gguf: transfer stopped");
        CHECK_STR_CONTAINS(out, "write the expert pack now");
        CHECK(access(xpack, F_OK) == 0);
        CHECK(same_as_served(&h, "acme/demo-GGUF", "petrel-demo-Q8_0.gguf"));
    }
    snprintf(xpack, sizeof xpack, "%s/acme/demo2-GGUF/petrel-demo-Q8_0.gguf.xpack", h.cache);
    CHECK(pet(&h, NULL, "pull acme/demo2-GGUF") == 0);
    CHECK(!strstr(out, "\033[K"));
    CHECK(!strstr(out, "write the expert pack now"));
    CHECK_STR_CONTAINS(out, "pack them once: petrel pack ");
    CHECK(access(xpack, F_OK) != 0);
    CHECK(pet(&h, NULL, "pull acme/demo2-GGUF --pack") == 0);
    CHECK_STR_CONTAINS(out, "already in the cache");
    CHECK(access(xpack, F_OK) == 0);
    CHECK(pet(&h, NULL, "pull acme/demo2-GGUF --pack --no-pack") == 2);
    hub_down(&h);
}

/* `petrel --version` names the kernels and features; the demo model is the default of the
 * commands that take -m. */
static void cli_version_and_defaults(void) {
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "%s --version", bin());
    CHECK(t_run(cmd, out, sizeof out) == 0);
    CHECK_STR_CONTAINS(out, "petrel 0.");
    CHECK_STR_CONTAINS(out, "kernels: scalar");
    CHECK_STR_CONTAINS(out, "this CPU: ");
    CHECK_STR_CONTAINS(out, "libcurl");
    CHECK_STR_CONTAINS(out, "default model: ");
    snprintf(cmd, sizeof cmd, "%s tokenize -p 'And God said' 2>&1", bin());
    CHECK(t_run(cmd, out, sizeof out) == 0);
    snprintf(cmd, sizeof cmd, "%s inspect 2>&1", bin());
    CHECK(t_run(cmd, out, sizeof out) == 0);
    CHECK_STR_CONTAINS(out, "glm-dsa");
    snprintf(cmd, sizeof cmd, "PETREL_USAGE_DIR=%s %s generate -p 'And God said' -n 4 --quiet",
             t_usage_dir(), bin());
    CHECK(t_run(cmd, out, sizeof out) == 0);
    snprintf(cmd, sizeof cmd, "echo 100 | %s detokenize 2>&1", bin());
    CHECK(t_run(cmd, out, sizeof out) == 0);
}

T_SUITE(pull) {
    T_ADD(pull_split_parts);
    T_ADD(pull_resumes_after_cut);
    T_ADD(pull_resumes_partial_file);
    T_ADD(pull_wrong_checksum);
    T_ADD(pull_errors_explained);
    T_ADD(pull_interrupt_resumes);
    T_ADD(pull_hf_flag);
    T_ADD(pull_terminal_and_pack);
    T_ADD(cli_version_and_defaults);
}
