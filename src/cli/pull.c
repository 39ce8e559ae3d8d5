/* pull.c — `petrel pull REPO[:QUANT]` and `petrel list`: GGUF models from the Hugging Face
 * Hub into petrel's model cache (layout in hub.h), as llama.cpp's `-hf` names them.
 *
 *   petrel pull OWNER/NAME[:QUANT] [--pack|--no-pack] [-j N]
 *   petrel list
 *
 * What the Hub is asked (its public API): the repository's files,
 *   GET {HF_ENDPOINT}/api/models/OWNER/NAME/tree/main?recursive=true
 * (JSON entries {type, path, size, oid, lfs: {oid = SHA-256, size}}, further pages named by a
 * `Link: <URL>; rel="next"` header), then each file, GET
 * {HF_ENDPOINT}/OWNER/NAME/resolve/main/PATH, which answers 302 to a signed URL on a CDN host.
 * HF_TOKEN goes to the Hub as "Authorization: Bearer", never to the CDN (libcurl drops a custom
 * Authorization header on a redirect to another host; the signed URL is its own authorisation).
 *
 * Choosing files: QUANT is matched case-insensitively against the files' paths, bounded by
 * separators (Q4_K matches "x-Q4_K.gguf", not "x-Q4_K_M.gguf"); a split model's parts
 * NAME-0000i-of-0000N.gguf are one model and all are fetched; mmproj files are left out.
 * Without QUANT: Q4_K_M when there is one, else the only model. No match, or several: the
 * error lists what the repository has.
 *
 * Safety, the invariants the tests check (tests/test_pull.c):
 *   - bytes go to PATH.part (locked with flock against a second petrel) and are hashed as they
 *     are written; the file is renamed to PATH, after fsync, only when its size and SHA-256 are
 *     the listed ones. A wrong checksum deletes the .part (its bytes cannot be trusted, so
 *     resuming it would fail again) and says so.
 *   - a .part left by a cut connection, a crash or Ctrl-C is resumed with a range request,
 *     after re-hashing the bytes it holds; never restarted from zero silently: a server that
 *     ignores the range, or a .part longer than the file, is said on stderr before starting over.
 *   - a dropped connection is retried from where it stopped (6 tries in a row without progress,
 *     waiting 0.5 s, then twice as long each time).
 *   - the free disk space is checked before the first byte, with the numbers.
 * Parts download in parallel (-j, default 4 files at a time).
 */
#include <curl/curl.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <openssl/evp.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "front/helpers.h"
#include "hub.h"
#include "options.h"
#include "petrel.h"

#define HUB_MAX_LISTING (64L << 20) /* bytes of one page of the file listing */
#define HUB_MAX_PAGES 100
#define HUB_MAX_FILES 4096
#define HUB_MAX_PATH 1024 /* bytes of a path inside a repository */
#define HUB_TRIES 6       /* tries in a row without progress before giving up on a file */
#define HUB_EXIT_INTERRUPTED 130

/* "1.23 GiB": b bytes in a static ring of buffers (several per printf). */
static const char *fmt_bytes(double b) {
    static _Thread_local char ring[8][32];
    static _Thread_local int k;
    char *s = ring[k++ & 7];
    if (b >= 1024.0 * 1024 * 1024)
        snprintf(s, 32, "%.2f GiB", b / (1024.0 * 1024 * 1024));
    else if (b >= 1024.0 * 1024)
        snprintf(s, 32, "%.1f MiB", b / (1024.0 * 1024));
    else if (b >= 1024.0)
        snprintf(s, 32, "%.1f KiB", b / 1024.0);
    else
        snprintf(s, 32, "%.0f B", b);
    return s;
}

/* ===== The cache ===== */

int hub_models_dir(char *out, size_t cap) {
    const char *env = getenv("PETREL_CACHE"), *xdg = getenv("XDG_CACHE_HOME"),
               *home = getenv("HOME");
    int n;
    if (env && *env)
        n = snprintf(out, cap, "%s", env);
    else if (xdg && *xdg)
        n = snprintf(out, cap, "%s/petrel/models", xdg);
    else if (home && *home)
        n = snprintf(out, cap, "%s/.cache/petrel/models", home);
    else
        return -1;
    return n > 0 && (size_t)n < cap ? 0 : -1;
}

/* ===== REPO[:QUANT] ===== */

typedef struct hub_spec {
    char repo[200]; /* OWNER/NAME */
    char quant[100];
} hub_spec;

static int name_ok(const char *s, size_t n) {
    if (n == 0 || n > 96 || (n == 1 && s[0] == '.') || (n == 2 && s[0] == '.' && s[1] == '.'))
        return 0;
    for (size_t i = 0; i < n; i++)
        if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' && s[i] <= 'Z') ||
              (s[i] >= '0' && s[i] <= '9') || s[i] == '-' || s[i] == '_' || s[i] == '.'))
            return 0;
    return 1;
}

/* 0, or -1 with a message printed (a usage error). */
static int spec_parse(const char *s, hub_spec *sp) {
    memset(sp, 0, sizeof *sp);
    const char *colon = strchr(s, ':'), *slash = strchr(s, '/');
    size_t rlen = colon ? (size_t)(colon - s) : strlen(s);
    if (!slash || slash > s + rlen || !name_ok(s, (size_t)(slash - s)) ||
        !name_ok(slash + 1, rlen - (size_t)(slash - s) - 1) ||
        (colon && !name_ok(colon + 1, strlen(colon + 1)))) {
        fprintf(stderr,
                "petrel: '%s' is not a model on the Hub: expected OWNER/NAME[:QUANT], e.g. "
                "ggml-org/gemma-3-1b-it-GGUF:Q4_K_M (letters, digits, '-', '_', '.')\n",
                s);
        return -1;
    }
    memcpy(sp->repo, s, rlen);
    if (colon) snprintf(sp->quant, sizeof sp->quant, "%s", colon + 1);
    return 0;
}

/* ===== File names: split parts, quants ===== */

typedef struct hub_file {
    char *path;        /* in the repository, "/"-separated, checked by path_ok */
    int64_t size;      /* bytes */
    char sha256[65];   /* lfs.oid, lowercase hex; "" when the file is not in LFS */
    char git_sha1[41]; /* oid: the git blob hash, checked when there is no sha256 */
    int part, n_parts; /* NAME-0000i-of-0000N.gguf: i and N; 0, 0 when not split */
    size_t key_len;    /* bytes of path that name the model (the split suffix cut) */
} hub_file;

/* Set part, n_parts and key_len of f from its name. */
static void split_parse(hub_file *f) {
    const char *p = f->path;
    size_t n = strlen(p);
    f->part = f->n_parts = 0;
    f->key_len = n > 5 ? n - 5 : n; /* without ".gguf" */
    /* -00001-of-00003.gguf: 20 bytes */
    if (n < 20 + 1) return;
    const char *s = p + n - 20;
    for (int d = 0; d < 5; d++) /* exactly five digits each, no sign or space */
        if (s[1 + d] < '0' || s[1 + d] > '9' || s[10 + d] < '0' || s[10 + d] > '9') return;
    int i, k, used = 0;
    if (sscanf(s, "-%5d-of-%5d.gguf%n", &i, &k, &used) == 2 && used == 20 && i >= 1 && k >= 1 &&
        i <= k) {
        f->part = i, f->n_parts = k;
        f->key_len = n - 20;
    }
}

/* The quant a file's name ends with ("x-Q4_K_M.gguf": Q4_K_M; "x-UD-Q2_K_XL-00001-of-00002.gguf":
 * UD-Q2_K_XL), for lists and suggestions. */
static void quant_label(const hub_file *f, char *out, size_t cap) {
    const char *p = f->path, *end = p + f->key_len, *s = end;
    while (s > p && s[-1] != '-' && s[-1] != '.' && s[-1] != '/')
        s--;
    /* Unsloth's dynamic quants: UD-Q4_K_XL is one label */
    if (s - p >= 4 && s[-1] == '-' && !strncasecmp(s - 3, "UD", 2) &&
        (s - 3 == p || s[-4] == '-' || s[-4] == '/' || s[-4] == '.'))
        s -= 3;
    snprintf(out, cap, "%.*s", (int)(end - s), s);
}

static int is_sep(char c) {
    return c == '-' || c == '.' || c == '/' || c == '_';
}

/* Does QUANT appear in the file's model name, bounded: before it the start or - . / _, after it
 * the end of the name or - . / (so Q4_K does not match Q4_K_M)? Case-insensitive. */
static int quant_match(const hub_file *f, const char *quant) {
    size_t q = strlen(quant), n = f->key_len;
    for (size_t i = 0; i + q <= n; i++) {
        if (strncasecmp(f->path + i, quant, q)) continue;
        if (i > 0 && !is_sep(f->path[i - 1])) continue;
        if (i + q < n && (!is_sep(f->path[i + q]) || f->path[i + q] == '_')) continue;
        return 1;
    }
    return 0;
}

static int is_gguf_model(const char *path) {
    size_t n = strlen(path);
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    return n > 5 && !strcasecmp(path + n - 5, ".gguf") && !strcasestr(base, "mmproj");
}

/* A path from the listing (hostile): relative, no empty, "." or ".." component, printable
 * ASCII without backslashes, short. */
static int path_ok(const char *p) {
    size_t n = strlen(p);
    if (n == 0 || n >= HUB_MAX_PATH || p[0] == '/') return 0;
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)p[i] < 0x20 || (unsigned char)p[i] > 0x7e || p[i] == '\\') return 0;
    const char *c = p;
    for (;;) {
        const char *e = strchr(c, '/');
        size_t l = e ? (size_t)(e - c) : strlen(c);
        if (l == 0 || (l == 1 && c[0] == '.') || (l == 2 && c[0] == '.' && c[1] == '.')) return 0;
        if (!e) break;
        c = e + 1;
    }
    return 1;
}

static int same_model(const hub_file *a, const hub_file *b) {
    return a->key_len == b->key_len && !memcmp(a->path, b->path, a->key_len);
}

/* The files of one model: their bytes, how many are complete and how many are .part files
 * (marked by scan_repo), and the path of the first part when it is complete. */
typedef struct model_sum {
    int64_t bytes;
    int parts, partial;
    const char *path0;
} model_sum;

/* When files[i] is the first file of its model among files[0..n): 1, with the model's sums. */
static int model_at(const hub_file *files, int n, int i, model_sum *m) {
    for (int j = 0; j < i; j++)
        if (same_model(&files[j], &files[i])) return 0;
    memset(m, 0, sizeof *m);
    for (int j = i; j < n; j++) {
        if (!same_model(&files[j], &files[i])) continue;
        const int part = files[j].sha256[0] == 'p';
        m->bytes += files[j].size;
        m->partial += part;
        m->parts += !part;
        if (!m->path0 && !part && files[j].part <= 1) m->path0 = files[j].path;
    }
    return 1;
}

/* Print the models of files[0..n) (one line each: its quant label, size and parts) to stderr. */
static void list_models(const char *repo, const hub_file *files, int n) {
    model_sum m;
    for (int i = 0; i < n; i++) {
        if (!model_at(files, n, i, &m)) continue;
        char label[128];
        quant_label(&files[i], label, sizeof label);
        fprintf(stderr, "  %s:%-14s %10s  %.*s%s", repo, label, fmt_bytes((double)m.bytes),
                (int)files[i].key_len, files[i].path, files[i].n_parts ? "" : ".gguf");
        if (files[i].n_parts) fprintf(stderr, " (%d of %d parts)", m.parts, files[i].n_parts);
        fputc('\n', stderr);
    }
}

/* Choose the model among files[0..n) (the repository's GGUF models): its files' indices into
 * pick (parts in order), their count returned; -1 with the error printed (what exists listed)
 * when nothing or several match, or parts are missing. `where` says what was searched. */
static int select_model(const char *repo, const char *quant, const hub_file *files, int n,
                        int *pick, const char *where, int quiet) {
    int cand = -1, ambiguous = 0;
    const char *want = *quant ? quant : "Q4_K_M";
    /* the first match, and whether another model matches too; an exact label beats a
     * bounded match (Q4_K_M picks "x-Q4_K_M" over "x-UD-Q4_K_M") */
    for (int pass = 0; pass < 2 && cand < 0; pass++)
        for (int i = 0; i < n; i++) {
            char label[128];
            quant_label(&files[i], label, sizeof label);
            if (pass == 0 ? strcasecmp(label, want) != 0 : !quant_match(&files[i], want)) continue;
            if (cand < 0)
                cand = i;
            else if (!same_model(&files[cand], &files[i]))
                ambiguous = 1;
        }
    if (cand < 0 && !*quant && n > 0) { /* no Q4_K_M: the only model, if there is one */
        cand = 0;
        for (int i = 1; i < n; i++)
            if (!same_model(&files[0], &files[i])) ambiguous = 1;
    }
    if (cand < 0 || ambiguous) {
        if (quiet) return -1;
        if (n == 0)
            fprintf(stderr, "petrel: %s has no GGUF model %s\n", repo, where);
        else if (cand < 0)
            fprintf(stderr, "petrel: %s has no model matching '%s' %s; it has:\n", repo, want,
                    where);
        else
            fprintf(stderr, "petrel: %s has several models %s%s%s; say which with %s:QUANT:\n",
                    repo, *quant ? "matching '" : "", quant, *quant ? "'" : where, repo);
        list_models(repo, files, n);
        return -1;
    }
    int np = 0, nparts = files[cand].n_parts ? files[cand].n_parts : 1;
    for (int p = 1; p <= nparts; p++) {
        int found = -1;
        for (int i = 0; i < n && found < 0; i++)
            if (same_model(&files[i], &files[cand]) &&
                (files[cand].n_parts ? files[i].part == p && files[i].n_parts == nparts : 1))
                found = i;
        if (found < 0) {
            if (!quiet)
                fprintf(stderr, "petrel: %s: part %d of %d of %.*s is missing %s\n", repo, p,
                        nparts, (int)files[cand].key_len, files[cand].path, where);
            return -1;
        }
        pick[np++] = found;
    }
    return np;
}

/* ===== HTTP ===== */

typedef struct hub_ctx {
    char endpoint[1024]; /* no trailing slash */
    const char *token;   /* HF_TOKEN or NULL */
    char models[PT_PATH_MAX];
    hub_spec spec;
} hub_ctx;

/* A reply of the Hub read whole (the file listing, a search), and the headers petrel reads. */
typedef struct membuf {
    pt_buf b;        /* the body (at most HUB_MAX_LISTING bytes) */
    char next[2048]; /* the Link header's rel="next" URL */
    char xerr[64];   /* X-Error-Code */
} membuf;

static size_t mem_write(char *p, size_t sz, size_t nm, void *u) {
    membuf *m = u;
    size_t n = sz * nm;
    if (m->b.n + n + 1 > (size_t)HUB_MAX_LISTING || pt_buf_append(&m->b, p, n)) return 0;
    return n;
}

/* Copy header `name`'s value (trimmed) into out when line is that header. */
static int header_value(const char *line, size_t n, const char *name, char *out, size_t cap) {
    size_t k = strlen(name);
    if (n <= k || strncasecmp(line, name, k) || line[k] != ':') return 0;
    const char *v = line + k + 1, *e = line + n;
    while (v < e && (*v == ' ' || *v == '\t'))
        v++;
    while (e > v && (e[-1] == '\r' || e[-1] == '\n' || e[-1] == ' '))
        e--;
    snprintf(out, cap, "%.*s", (int)(e - v), v);
    return 1;
}

static size_t mem_header(char *p, size_t sz, size_t nm, void *u) {
    membuf *b = u;
    size_t n = sz * nm;
    char v[2048];
    if (header_value(p, n, "X-Error-Code", b->xerr, sizeof b->xerr)) return n;
    if (header_value(p, n, "Link", v, sizeof v)) {
        /* <URL>; rel="next" (possibly among others, comma-separated) */
        for (char *s = strchr(v, '<'); s; s = strchr(s + 1, '<')) {
            char *e = strchr(s, '>');
            if (!e) break;
            if (strstr(e, "rel=\"next\"") &&
                (!strchr(e, ',') || strstr(e, "rel=\"next\"") < strchr(e, ','))) {
                snprintf(b->next, sizeof b->next, "%.*s", (int)(e - s - 1), s + 1);
                break;
            }
        }
    }
    return n;
}

/* An easy handle for url with petrel's defaults; *hdrs holds the Authorization header (the Hub
 * only: libcurl does not send custom auth headers to another host after a redirect). */
static CURL *easy_new(const hub_ctx *hc, const char *url, struct curl_slist **hdrs) {
    CURL *c = curl_easy_init();
    if (!c) return NULL;
    *hdrs = NULL;
    if (hc->token) {
        char h[PT_FILE_PATH_MAX];
        snprintf(h, sizeof h, "Authorization: Bearer %s", hc->token);
        *hdrs = curl_slist_append(NULL, h);
    }
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, *hdrs);
    curl_easy_setopt(c, CURLOPT_USERAGENT, "petrel/" PETREL_VERSION);
    curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 1L);
    curl_easy_setopt(c, CURLOPT_MAXREDIRS, 10L);
#if LIBCURL_VERSION_NUM >= 0x075500 /* 7.85: the string form; the bit mask is deprecated */
    curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(c, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
#else
    curl_easy_setopt(c, CURLOPT_PROTOCOLS, (long)(CURLPROTO_HTTP | CURLPROTO_HTTPS));
    curl_easy_setopt(c, CURLOPT_REDIR_PROTOCOLS, (long)(CURLPROTO_HTTP | CURLPROTO_HTTPS));
#endif
    curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT, 30L);
    /* a stalled transfer (under 1 KiB/s for a minute) is a failed try, retried */
    curl_easy_setopt(c, CURLOPT_LOW_SPEED_LIMIT, 1024L);
    curl_easy_setopt(c, CURLOPT_LOW_SPEED_TIME, 60L);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_TCP_KEEPALIVE, 1L);
    return c;
}

/* An error status of the Hub in words: what it means for this repository and what to do. */
static void explain_status(const hub_ctx *hc, long status, const char *xerr, const char *file) {
    const char *repo = hc->spec.repo;
    if (status == 401 && !strcmp(xerr, "RepoNotFound"))
        status = 404; /* the Hub answers 401 for a repository it will not admit exists */
    if (status == 401) {
        if (hc->token)
            cli_error("%s: %s refused HF_TOKEN (401): the token is invalid or expired; make a "
                      "new one at https://huggingface.co/settings/tokens",
                      repo, hc->endpoint);
        else
            cli_error("%s is gated or private (401): it needs a Hugging Face token; set HF_TOKEN "
                      "to a token (https://huggingface.co/settings/tokens) of an account that "
                      "was granted access at %s/%s",
                      repo, hc->endpoint, repo);
    } else if (status == 403) {
        cli_error("%s: access refused (403): the account of HF_TOKEN has not been granted this "
                  "repository; accept its conditions at %s/%s, or use a token with read access",
                  repo, hc->endpoint, repo);
    } else if (status == 404 && file && strcmp(xerr, "RepoNotFound")) {
        cli_error("%s: %s is not in the repository any more (404): run `petrel pull %s` again to "
                  "list what it has",
                  repo, file, repo);
    } else if (status == 404) {
        cli_error("%s: no such repository on %s (404)%s", repo, hc->endpoint,
                  hc->token ? "" : " (a private one needs HF_TOKEN)");
    } else {
        cli_error("%s: %s answered HTTP %ld%s%s", repo, hc->endpoint, status, file ? " for " : "",
                  file ? file : "");
    }
}

static int hex_ok(const char *s, size_t n) {
    if (strlen(s) != n) return 0;
    for (size_t i = 0; i < n; i++)
        if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f'))) return 0;
    return 1;
}

/* After a 404 for the repository: the Hub's model search (GET /api/models?search=NAME
 * &filter=gguf&limit=10) for repositories whose name contains NAME, listed on stderr. */
static void suggest_repos(const hub_ctx *hc) {
    const char *name = strchr(hc->spec.repo, '/') + 1;
    char url[2048];
    snprintf(url, sizeof url, "%s/api/models?search=%s&filter=gguf&limit=10", hc->endpoint, name);
    membuf b = {0};
    struct curl_slist *h;
    CURL *c = easy_new(hc, url, &h);
    if (!c) return;
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, mem_write);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &b);
    CURLcode rc = curl_easy_perform(c);
    long status = 0;
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
    curl_easy_cleanup(c);
    curl_slist_free_all(h);
    json_t *a = rc == CURLE_OK && status == 200 && b.b.v ? json_loads(b.b.v, 0, NULL) : NULL;
    pt_buf_free(&b.b);
    size_t i, shown = 0;
    json_t *e;
    json_array_foreach(a, i, e) {
        const char *id = json_string_value(json_object_get(e, "id"));
        if (!id) id = json_string_value(json_object_get(e, "modelId"));
        if (!id || !strchr(id, '/') || !name_ok(id, strcspn(id, "/")) ||
            !name_ok(strchr(id, '/') + 1, strlen(strchr(id, '/') + 1)))
            continue; /* hostile or odd: not printed */
        if (!shown++)
            fprintf(stderr, "petrel: GGUF repositories on %s whose name contains '%s':\n",
                    hc->endpoint, name);
        fprintf(stderr, "  %s\n", id);
    }
    if (json_is_array(a) && !shown)
        fprintf(stderr, "petrel: no GGUF repository on %s has '%s' in its name\n", hc->endpoint,
                name);
    json_decref(a);
}

/* Add the GGUF models of one page of the listing (a JSON array) to files. 0, or -1 printed. */
static int parse_listing(const hub_ctx *hc, const char *text, hub_file *files, int *n) {
    json_error_t je;
    json_t *a = json_loads(text, 0, &je);
    if (!json_is_array(a)) {
        json_decref(a);
        return cli_error("%s: the file listing from %s is not a JSON array (%s)", hc->spec.repo,
                         hc->endpoint, je.text),
               -1;
    }
    size_t i;
    json_t *e;
    json_array_foreach(a, i, e) {
        const char *type = json_string_value(json_object_get(e, "type"));
        const char *path = json_string_value(json_object_get(e, "path"));
        if (!type || strcmp(type, "file") || !path || !is_gguf_model(path)) continue;
        if (!path_ok(path)) {
            fprintf(stderr, "petrel: %s: skipping a file with an unusable path in the listing\n",
                    hc->spec.repo);
            continue;
        }
        if (*n >= HUB_MAX_FILES) break;
        hub_file f = {0};
        json_t *lfs = json_object_get(e, "lfs");
        json_t *size = json_object_get(lfs ? lfs : e, "size");
        const char *sha = json_string_value(json_object_get(lfs, "oid"));
        const char *oid = json_string_value(json_object_get(e, "oid"));
        if (!json_is_integer(size) || json_integer_value(size) < 0 ||
            (lfs ? !sha || !hex_ok(sha, 64) : !oid || !hex_ok(oid, 40))) {
            fprintf(stderr,
                    "petrel: %s: %s has no usable size or checksum in the listing; skipping it\n",
                    hc->spec.repo, path);
            continue;
        }
        f.size = json_integer_value(size);
        if (lfs)
            memcpy(f.sha256, sha, 64);
        else
            memcpy(f.git_sha1, oid, 40);
        f.path = strdup(path);
        if (!f.path) break;
        split_parse(&f);
        files[(*n)++] = f;
    }
    json_decref(a);
    return 0;
}

/* The repository's GGUF files from the Hub (every page). Returns their count, or -1 printed. */
static int fetch_listing(const hub_ctx *hc, hub_file *files) {
    char url[4096];
    snprintf(url, sizeof url, "%s/api/models/%s/tree/main?recursive=true", hc->endpoint,
             hc->spec.repo);
    int n = 0;
    for (int page = 0; page < HUB_MAX_PAGES; page++) {
        membuf b = {0};
        struct curl_slist *h;
        CURL *c = easy_new(hc, url, &h);
        if (!c) return cli_error("out of memory"), -1;
        char cerr[CURL_ERROR_SIZE] = "";
        curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, mem_write);
        curl_easy_setopt(c, CURLOPT_WRITEDATA, &b);
        curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, mem_header);
        curl_easy_setopt(c, CURLOPT_HEADERDATA, &b);
        curl_easy_setopt(c, CURLOPT_ERRORBUFFER, cerr);
        CURLcode rc = curl_easy_perform(c);
        long status = 0;
        curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
        curl_easy_cleanup(c);
        curl_slist_free_all(h);
        if (rc != CURLE_OK) {
            pt_buf_free(&b.b);
            cli_error("%s: cannot list the repository's files at %s: %s", hc->spec.repo, url,
                      *cerr ? cerr : curl_easy_strerror(rc));
            return -1;
        }
        if (status != 200) {
            pt_buf_free(&b.b);
            explain_status(hc, status, b.xerr, NULL);
            if (status == 404 || (status == 401 && !strcmp(b.xerr, "RepoNotFound")))
                suggest_repos(hc);
            return -1;
        }
        int bad = parse_listing(hc, b.b.v ? b.b.v : "", files, &n);
        pt_buf_free(&b.b);
        if (bad) return -1;
        /* the next page, only on the same endpoint */
        size_t el = strlen(hc->endpoint);
        if (!*b.next || strncmp(b.next, hc->endpoint, el) || (b.next[el] && b.next[el] != '/'))
            return n;
        snprintf(url, sizeof url, "%s", b.next);
    }
    return n;
}

/* ===== Downloading one file ===== */

static volatile sig_atomic_t pull_interrupted;
static int pull_tty; /* the progress bar is drawn on stderr: set before the workers start */

/* Before a line on stderr while the bar may be drawn: clear the bar's line (it is redrawn at
 * the next tick), so that the line does not start in the middle of it. */
static void clear_bar(void) {
    if (pull_tty) fputs("\r\033[K", stderr);
}

static void on_sigint(int sig) {
    (void)sig;
    pull_interrupted = 1;
}

static int interrupted(void) {
    return __atomic_load_n(&pull_interrupted, __ATOMIC_RELAXED) != 0;
}

enum { JOB_TODO, JOB_DONE, JOB_FAILED, JOB_INTERRUPTED };

typedef struct job {
    const hub_ctx *hc;
    const hub_file *f;
    char dest[PT_PATH_MAX];
    char part[PT_PATH_MAX + 8];
    int64_t have;  /* bytes in .part, hashed; written by the worker, read by the progress */
    int64_t start; /* bytes that were there when this run began */
    int fd;
    EVP_MD_CTX *md;
    int state;
    /* the try in flight */
    long status;        /* HTTP status of the last response (redirects included) */
    int body_ok;        /* the final response is the file's bytes, from offset `have` */
    int write_failed;   /* errno of a failed write, 0 */
    int too_long;       /* the server sent more bytes than the listed size */
    char xerr[64];      /* X-Error-Code */
    int64_t range_from; /* the Content-Range start of a 206, -1 */
} job;

static int hash_init(job *j) {
    j->md = EVP_MD_CTX_new();
    if (!j->md) return -1;
    if (*j->f->sha256) return EVP_DigestInit_ex(j->md, EVP_sha256(), NULL) == 1 ? 0 : -1;
    /* not in LFS: the git blob hash, SHA-1 of "blob SIZE\0" then the bytes */
    char hdr[48];
    int n = snprintf(hdr, sizeof hdr, "blob %lld", (long long)j->f->size);
    return EVP_DigestInit_ex(j->md, EVP_sha1(), NULL) == 1 &&
                   EVP_DigestUpdate(j->md, hdr, (size_t)n + 1) == 1
               ? 0
               : -1;
}

static size_t job_header(char *p, size_t sz, size_t nm, void *u) {
    job *j = u;
    size_t n = sz * nm;
    char v[256];
    if (n >= 5 && !strncmp(p, "HTTP/", 5)) { /* a new response (after a redirect too) */
        const char *sp = memchr(p, ' ', n);
        j->status = sp ? strtol(sp + 1, NULL, 10) : 0;
        j->range_from = -1;
        j->xerr[0] = 0;
    } else if (header_value(p, n, "X-Error-Code", j->xerr, sizeof j->xerr)) {
    } else if (header_value(p, n, "Content-Range", v, sizeof v)) {
        long long a, b, t;
        if (sscanf(v, "bytes %lld-%lld/%lld", &a, &b, &t) == 3) {
            j->range_from = a;
            if (t != j->f->size) j->range_from = -2; /* another file than the listed one */
        }
    }
    return n;
}

static size_t job_write(char *p, size_t sz, size_t nm, void *u) {
    job *j = u;
    size_t n = sz * nm;
    if (!j->body_ok) {
        /* the first bytes of the body: are they the file's, from where the .part ends? */
        if (j->status == 200 && j->have == 0)
            j->body_ok = 1;
        else if (j->status == 206 && j->range_from == j->have)
            j->body_ok = 1;
        else
            return 0; /* an error page, or bytes from elsewhere: not written */
    }
    if (j->have + (int64_t)n > j->f->size) { /* more than the listed size */
        j->too_long = 1;
        return 0;
    }
    for (size_t off = 0; off < n;) {
        ssize_t w = pwrite(j->fd, p + off, n - off, j->have + (int64_t)off);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) {
            j->write_failed = w < 0 ? errno : EIO;
            return 0;
        }
        off += (size_t)w;
    }
    EVP_DigestUpdate(j->md, p, n);
    __atomic_store_n(&j->have, j->have + (int64_t)n, __ATOMIC_RELAXED);
    return n;
}

static int job_progress(void *u, curl_off_t dt, curl_off_t dn, curl_off_t ut, curl_off_t un) {
    (void)u, (void)dt, (void)dn, (void)ut, (void)un;
    return interrupted(); /* nonzero aborts the transfer: Ctrl-C */
}

/* Sleep s seconds unless interrupted. */
static void nap(double s) {
    for (double t = 0; t < s && !interrupted(); t += 0.1) {
        struct timespec ts = {0, 100 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
}

static void job_fail(job *j, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void job_fail(job *j, const char *fmt, ...) {
    va_list ap;
    char m[1024];
    va_start(ap, fmt);
    vsnprintf(m, sizeof m, fmt, ap);
    va_end(ap);
    clear_bar();
    cli_error("%s: %s", j->f->path, m);
    j->state = JOB_FAILED;
}

/* Start the .part over from zero (its bytes are not a prefix of the file). */
static int job_restart(job *j) {
    if (ftruncate(j->fd, 0) != 0) return -1;
    j->have = 0;
    j->start = 0;
    EVP_MD_CTX_free(j->md);
    j->md = NULL;
    return hash_init(j);
}

/* Hash the bytes already in the .part (a resumed download). 0, 1 when interrupted (Ctrl-C),
 * or -1 (errno). */
static int hash_existing(job *j) {
    static const size_t chunk = 4 << 20;
    char *buf = malloc(chunk);
    if (!buf) return -1;
    int64_t off = 0;
    while (off < j->have) {
        if (interrupted()) {
            free(buf);
            return 1;
        }
        size_t want = j->have - off < (int64_t)chunk ? (size_t)(j->have - off) : chunk;
        ssize_t r = pread(j->fd, buf, want, off);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) {
            free(buf);
            if (r == 0) errno = EIO;
            return -1;
        }
        EVP_DigestUpdate(j->md, buf, (size_t)r);
        off += r;
    }
    free(buf);
    return 0;
}

static int fsync_dir_of(const char *path) {
    char d[PT_PATH_MAX];
    snprintf(d, sizeof d, "%s", path);
    char *s = strrchr(d, '/');
    if (s) *s = 0;
    int fd = open(s ? d : ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return -1;
    int r = fsync(fd);
    close(fd);
    return r;
}

/* The bytes are all there: check them, then give them the final name. */
static void job_finish(job *j) {
    unsigned char d[EVP_MAX_MD_SIZE];
    unsigned dn = 0;
    char hex[2 * EVP_MAX_MD_SIZE + 1];
    EVP_DigestFinal_ex(j->md, d, &dn);
    for (unsigned i = 0; i < dn; i++)
        snprintf(hex + 2 * i, 3, "%02x", d[i]);
    const char *want = *j->f->sha256 ? j->f->sha256 : j->f->git_sha1;
    if (strcmp(hex, want)) {
        unlink(j->part);
        job_fail(j,
                 "checksum mismatch: the Hub lists %s %s, the %s downloaded hash to %s; "
                 "deleted them (nothing was saved under %s); run the command again to download "
                 "it anew",
                 *j->f->sha256 ? "SHA-256" : "git SHA-1", want, fmt_bytes((double)j->have), hex,
                 j->dest);
        return;
    }
    if (fsync(j->fd) != 0 || rename(j->part, j->dest) != 0 || fsync_dir_of(j->dest) != 0) {
        job_fail(j, "cannot save %s: %s", j->dest, strerror(errno));
        return;
    }
    j->state = JOB_DONE;
}

static void job_run(job *j) {
    const hub_file *f = j->f;
    j->fd = open(j->part, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (j->fd < 0) return job_fail(j, "cannot open %s: %s", j->part, strerror(errno));
    if (flock(j->fd, LOCK_EX | LOCK_NB) != 0)
        return job_fail(j, "%s is being downloaded by another petrel (it holds the lock on %s)",
                        j->dest, j->part);
    struct stat st;
    if (stat(j->dest, &st) == 0 && st.st_size == f->size) {
        /* another petrel finished it while this one was planning */
        unlink(j->part);
        j->have = f->size;
        j->state = JOB_DONE;
        return;
    }
    if (fstat(j->fd, &st) != 0 || hash_init(j) != 0)
        return job_fail(j, "cannot read %s: %s", j->part, strerror(errno));
    j->have = st.st_size;
    if (j->have > f->size) {
        clear_bar();
        fprintf(stderr,
                "petrel: %s holds %s, more than the file's %s: it is not a part of this file; "
                "starting it over from zero\n",
                j->part, fmt_bytes((double)j->have), fmt_bytes((double)f->size));
        if (job_restart(j)) return job_fail(j, "cannot truncate %s: %s", j->part, strerror(errno));
    } else if (j->have > 0) {
        clear_bar();
        fprintf(stderr, "petrel: resuming %s at %s of %s (checking the bytes already there)\n",
                f->path, fmt_bytes((double)j->have), fmt_bytes((double)f->size));
        int hr = hash_existing(j);
        if (hr < 0) return job_fail(j, "cannot read %s: %s", j->part, strerror(errno));
        if (hr > 0) {
            j->state = JOB_INTERRUPTED;
            return;
        }
    }
    j->start = j->have;
    char url[4096];
    snprintf(url, sizeof url, "%s/%s/resolve/main/%s", j->hc->endpoint, j->hc->spec.repo, f->path);
    int fails = 0;
    while (j->have < f->size && !interrupted()) {
        struct curl_slist *h;
        CURL *c = easy_new(j->hc, url, &h);
        if (!c) return job_fail(j, "out of memory");
        char cerr[CURL_ERROR_SIZE] = "";
        int64_t before = j->have;
        j->status = 0, j->body_ok = 0, j->write_failed = 0, j->too_long = 0, j->range_from = -1;
        curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, job_write);
        curl_easy_setopt(c, CURLOPT_WRITEDATA, j);
        curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, job_header);
        curl_easy_setopt(c, CURLOPT_HEADERDATA, j);
        curl_easy_setopt(c, CURLOPT_XFERINFOFUNCTION, job_progress);
        curl_easy_setopt(c, CURLOPT_NOPROGRESS, 0L);
        curl_easy_setopt(c, CURLOPT_ERRORBUFFER, cerr);
        if (j->have > 0) curl_easy_setopt(c, CURLOPT_RESUME_FROM_LARGE, (curl_off_t)j->have);
        CURLcode rc = curl_easy_perform(c);
        curl_easy_cleanup(c);
        curl_slist_free_all(h);
        if (interrupted()) break;
        if (j->write_failed)
            return job_fail(j, "cannot write %s: %s", j->part, strerror(j->write_failed));
        if (j->have == f->size) break;
        if (j->status == 401 || j->status == 403 || j->status == 404) {
            clear_bar();
            explain_status(j->hc, j->status, j->xerr, f->path);
            j->state = JOB_FAILED;
            return;
        }
        if (j->status == 416 || j->range_from == -2 || j->too_long ||
            (j->status == 200 && rc == CURLE_OK && before == 0))
            return job_fail(j,
                            "the server's file is not the %s one the listing names (HTTP %ld, "
                            "%s received); nothing was saved under %s",
                            fmt_bytes((double)f->size), j->status, fmt_bytes((double)j->have),
                            j->dest);
        if (before > 0 && (rc == CURLE_RANGE_ERROR || j->status == 200)) {
            /* said, never silent: the range was ignored, so only a restart can go on */
            clear_bar();
            fprintf(stderr,
                    "petrel: %s: the server ignored the request to resume at %s and sent the "
                    "whole file; starting it over from zero\n",
                    f->path, fmt_bytes((double)before));
            if (job_restart(j))
                return job_fail(j, "cannot truncate %s: %s", j->part, strerror(errno));
            continue;
        }
        fails = j->have > before ? 1 : fails + 1;
        char why[CURL_ERROR_SIZE + 32];
        if (j->status >= 400 || (j->status > 0 && j->status < 200))
            snprintf(why, sizeof why, "HTTP %ld", j->status);
        else
            snprintf(why, sizeof why, "%s",
                     *cerr            ? cerr
                     : rc != CURLE_OK ? curl_easy_strerror(rc)
                                      : "the connection closed early");
        if (fails >= HUB_TRIES)
            return job_fail(j,
                            "giving up after %d tries in a row without progress (%s); "
                            "%s of %s kept in %s: run the command again to resume",
                            fails, why, fmt_bytes((double)j->have), fmt_bytes((double)f->size),
                            j->part);
        double wait = 0.5 * (double)(1 << (fails - 1));
        clear_bar();
        fprintf(stderr, "petrel: %s: transfer stopped at %s of %s (%s); resuming in %.1f s\n",
                f->path, fmt_bytes((double)j->have), fmt_bytes((double)f->size), why, wait);
        nap(wait);
    }
    if (j->have < f->size) { /* interrupted: the .part stays for the next run */
        fsync(j->fd);
        j->state = JOB_INTERRUPTED;
        return;
    }
    job_finish(j);
}

/* ===== Many files at once, and the progress line ===== */

typedef struct pool {
    job **q;      /* the files to download */
    int n, next;  /* how many; the next one a worker takes */
    int done;     /* finished (done, failed or interrupted), under mu */
    int64_t base; /* bytes of the model's files that were complete already */
    pthread_mutex_t mu;
} pool;

/* Bytes of the model there now (start: when each job began). */
static int64_t progress_bytes(pool *p, int start) {
    int64_t b = p->base;
    for (int i = 0; i < p->n; i++)
        b += start ? __atomic_load_n(&p->q[i]->start, __ATOMIC_RELAXED)
                   : __atomic_load_n(&p->q[i]->have, __ATOMIC_RELAXED);
    return b;
}

static void *worker(void *u) {
    pool *p = u;
    for (;;) {
        pthread_mutex_lock(&p->mu);
        int i = p->next < p->n ? p->next++ : -1;
        pthread_mutex_unlock(&p->mu);
        if (i < 0) return NULL;
        job *j = p->q[i];
        job_run(j);
        if (j->fd >= 0) close(j->fd); /* releases the flock */
        j->fd = -1;
        EVP_MD_CTX_free(j->md);
        j->md = NULL;
        pthread_mutex_lock(&p->mu);
        p->done++;
        pthread_mutex_unlock(&p->mu);
    }
}

/* One progress report. On a terminal, a bar redrawn in place; otherwise a line at every 10%. */
static void show_progress(pool *p, int64_t total, int64_t start, double t0, int tty, int *step,
                          int final) {
    int64_t have = progress_bytes(p, 0);
    double dt = pt_now() - t0, rate = dt > 0.2 ? (double)(have - start) / dt : 0;
    double pct = total > 0 ? 100.0 * (double)have / (double)total : 100.0;
    char eta[32] = "--:--";
    if (rate > 0 && have < total) {
        long s = (long)((double)(total - have) / rate);
        snprintf(eta, sizeof eta, "%ld:%02ld:%02ld", s / 3600, s / 60 % 60, s % 60);
    }
    if (tty) {
        char bar[31];
        int fill = (int)(pct * 30 / 100);
        for (int i = 0; i < 30; i++)
            bar[i] = i < fill ? '#' : '.';
        bar[30] = 0;
        fprintf(stderr, "\r\033[K[%s] %5.1f%%  %s / %s  %s/s  ETA %s", bar, pct,
                fmt_bytes((double)have), fmt_bytes((double)total), fmt_bytes(rate), eta);
        if (final) fputc('\n', stderr);
    } else if ((int)(pct / 10) > *step || final) {
        *step = (int)(pct / 10);
        fprintf(stderr, "petrel: pull %3.0f%%: %s of %s, %s/s, ETA %s\n", pct,
                fmt_bytes((double)have), fmt_bytes((double)total), fmt_bytes(rate), eta);
    }
    fflush(stderr);
}

/* Free space of the file system that holds path (or its nearest existing folder). */
static int64_t free_bytes(const char *path) {
    char d[PT_PATH_MAX];
    snprintf(d, sizeof d, "%s", path);
    struct statvfs sv;
    while (statvfs(d, &sv) != 0) {
        char *s = strrchr(d, '/');
        if (!s || s == d) return -1;
        *s = 0;
    }
    return (int64_t)sv.f_bavail * (int64_t)sv.f_frsize;
}

typedef struct pull_opts {
    int jobs;  /* files at a time */
    int quiet; /* no progress */
} pull_opts;

/* The Hub to ask (HF_ENDPOINT, HF_TOKEN) and the cache to fill, for spec. 0, or the exit
 * status with the message printed. */
static int hub_setup(hub_ctx *hc, const char *spec) {
    memset(hc, 0, sizeof *hc);
    if (spec_parse(spec, &hc->spec)) return CLI_USAGE;
    if (hub_models_dir(hc->models, sizeof hc->models))
        return cli_error("no folder for the model cache: set PETREL_CACHE, XDG_CACHE_HOME or "
                         "HOME");
    const char *ep = getenv("HF_ENDPOINT");
    snprintf(hc->endpoint, sizeof hc->endpoint, "%s", ep && *ep ? ep : HUB_DEFAULT_ENDPOINT);
    for (size_t l = strlen(hc->endpoint); l > 0 && hc->endpoint[l - 1] == '/'; l--)
        hc->endpoint[l - 1] = 0;
    const char *tok = getenv("HF_TOKEN");
    hc->token = tok && *tok ? tok : NULL;
    return 0;
}

/* What the chosen files need: the bytes in all, already here (complete files and .parts),
 * still to fetch, and the files still to fetch. */
typedef struct pull_plan {
    int64_t total, have, need;
    int todo;
} pull_plan;

/* A job for each of the np picked files (its paths, what of it is here; folders made). 0, or
 * -1 with the message printed. */
static int plan_jobs(const hub_ctx *hc, const hub_file *files, const int *pick, int np, job *jobs,
                     pull_plan *pp) {
    memset(pp, 0, sizeof *pp);
    for (int k = 0; k < np; k++) {
        job *j = &jobs[k];
        j->hc = hc, j->f = &files[pick[k]], j->fd = -1;
        if (snprintf(j->dest, sizeof j->dest, "%s/%s/%s", hc->models, hc->spec.repo, j->f->path) >=
            (int)sizeof j->dest)
            return cli_error("%s/%s/%s: path too long", hc->models, hc->spec.repo, j->f->path), -1;
        snprintf(j->part, sizeof j->part, "%s.part", j->dest);
        pp->total += j->f->size;
        struct stat st;
        if (stat(j->dest, &st) == 0 && st.st_size == j->f->size) {
            j->state = JOB_DONE; /* saved under its final name only after its check */
            j->have = j->start = j->f->size;
            pp->have += j->f->size;
            continue;
        }
        pp->todo++;
        int64_t part = stat(j->part, &st) == 0 && st.st_size <= j->f->size ? st.st_size : 0;
        pp->have += part;
        pp->need += j->f->size - part;
        j->have = j->start = part;
        if (fe_mkdirs_for(j->dest) != 0)
            return cli_error("cannot create the folder of %s: %s", j->dest, strerror(errno)), -1;
    }
    return 0;
}

/* Download the jobs not done yet, po->jobs files at a time, with the progress on stderr until
 * the last one ends; Ctrl-C (or SIGTERM) stops the transfers and keeps the .part files. CLI_OK,
 * CLI_ERROR (a file failed, its message printed) or HUB_EXIT_INTERRUPTED; *got and *secs: the
 * bytes fetched and the time it took. */
static int download(job *jobs, int np, int64_t total, const pull_opts *po, int64_t *got,
                    double *secs) {
    struct sigaction sa, old_int, old_term;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_sigint;
    sigemptyset(&sa.sa_mask);
    pull_interrupted = 0;
    sigaction(SIGINT, &sa, &old_int);
    sigaction(SIGTERM, &sa, &old_term);
    job *q[HUB_MAX_FILES];
    int64_t base = 0; /* bytes of the files already complete */
    int nq = 0;
    for (int k = 0; k < np; k++)
        if (jobs[k].state == JOB_DONE)
            base += jobs[k].f->size;
        else
            q[nq++] = &jobs[k];
    pull_tty = !po->quiet && isatty(2);
    pool w = {q, nq, 0, 0, base, PTHREAD_MUTEX_INITIALIZER};
    pthread_t th[16];
    int started = 0, nw = po->jobs < nq ? po->jobs : nq;
    for (; started < nw && started < 16; started++)
        if (pthread_create(&th[started], NULL, worker, &w) != 0) break;
    if (!started) worker(&w);
    const double t0 = pt_now();
    int step = -1, tty = pull_tty;
    int64_t start = progress_bytes(&w, 1);
    for (;;) {
        pthread_mutex_lock(&w.mu);
        int d = w.done;
        pthread_mutex_unlock(&w.mu);
        if (d == nq) break;
        if (!po->quiet) show_progress(&w, total, start, t0, tty, &step, 0);
        struct timespec ts = {0, tty ? 200 * 1000 * 1000 : 250 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    for (int k = 0; k < started; k++)
        pthread_join(th[k], NULL);
    if (!po->quiet) show_progress(&w, total, start, t0, tty, &step, 1);
    sigaction(SIGINT, &old_int, NULL);
    sigaction(SIGTERM, &old_term, NULL);
    int failed = 0, intr = 0;
    *got = 0;
    for (int k = 0; k < nq; k++) {
        failed += q[k]->state == JOB_FAILED;
        intr += q[k]->state == JOB_INTERRUPTED;
        *got += q[k]->have - q[k]->start;
    }
    *secs = pt_now() - t0;
    return failed ? CLI_ERROR : intr ? HUB_EXIT_INTERRUPTED : CLI_OK;
}

/* Fetch the picked files that are not in the cache yet (after checking the disk's free
 * space), saying what happens on stderr. CLI_OK, CLI_ERROR or HUB_EXIT_INTERRUPTED. */
static int fetch_model(const hub_ctx *hc, const char *spec, const hub_file *files, const int *pick,
                       int np, job *jobs, const pull_opts *po) {
    pull_plan pp;
    if (plan_jobs(hc, files, pick, np, jobs, &pp)) return CLI_ERROR;
    char label[128];
    quant_label(&files[pick[0]], label, sizeof label);
    const char *repo = hc->spec.repo;
    if (!pp.todo) {
        fprintf(stderr, "petrel: %s:%s is already in the cache (%s, %d file%s)\n", repo, label,
                fmt_bytes((double)pp.total), np, np > 1 ? "s" : "");
        return CLI_OK;
    }
    int64_t fb = free_bytes(jobs[0].dest);
    if (fb >= 0 && fb < pp.need)
        return cli_error("not enough disk space in %s/%s: the download needs %s more (%s in all, "
                         "%s already here) but %s is free",
                         hc->models, repo, fmt_bytes((double)pp.need), fmt_bytes((double)pp.total),
                         fmt_bytes((double)pp.have), fmt_bytes((double)fb));
    fprintf(stderr, "petrel: pulling %s:%s: %d file%s, %s (%s already here) into %s/%s\n", repo,
            label, np, np > 1 ? "s" : "", fmt_bytes((double)pp.total), fmt_bytes((double)pp.have),
            hc->models, repo);
    int64_t got;
    double dt;
    const int rc = download(jobs, np, pp.total, po, &got, &dt);
    if (rc == HUB_EXIT_INTERRUPTED)
        cli_error("interrupted: what was downloaded is kept in the .part files under %s/%s; "
                  "run `petrel pull %s` again to resume",
                  hc->models, repo, spec);
    else if (rc == CLI_OK)
        fprintf(stderr, "petrel: downloaded %s in %.1f s (%s/s); every file's %s checked\n",
                fmt_bytes((double)got), dt, fmt_bytes(dt > 0 ? (double)got / dt : 0),
                *files[pick[0]].sha256 ? "SHA-256" : "checksum");
    return rc;
}

/* Pull spec into the cache; the model's first file into path. CLI_OK, CLI_ERROR, CLI_USAGE or
 * HUB_EXIT_INTERRUPTED, everything said on stderr. */
static int pull(const char *spec, const pull_opts *po, char *path, size_t cap) {
    hub_ctx hc;
    int rc = hub_setup(&hc, spec);
    if (rc) return rc;
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK)
        return cli_error("cannot initialise libcurl");
    hub_file *files = calloc(HUB_MAX_FILES, sizeof *files);
    job *jobs = NULL;
    int n = -1, np = -1, pick[HUB_MAX_FILES];
    rc = CLI_ERROR;
    if (!files) {
        cli_error("out of memory");
    } else {
        fprintf(stderr, "petrel: listing %s on %s\n", hc.spec.repo, hc.endpoint);
        n = fetch_listing(&hc, files);
    }
    if (n >= 0) {
        char where[1200];
        snprintf(where, sizeof where, "on %s", hc.endpoint);
        np = select_model(hc.spec.repo, hc.spec.quant, files, n, pick, where, 0);
    }
    if (np > 0 && !(jobs = calloc((size_t)np, sizeof *jobs))) cli_error("out of memory");
    if (jobs) rc = fetch_model(&hc, spec, files, pick, np, jobs, po);
    if (rc == CLI_OK) snprintf(path, cap, "%s", jobs[0].dest);
    for (int i = 0; i < (n > 0 ? n : 0); i++)
        free(files[i].path);
    free(files);
    free(jobs);
    curl_global_cleanup();
    return rc;
}

/* ===== What the cache holds ===== */

/* The files under dir (recursively; rel is their path below the repository folder) into
 * files: complete GGUF models, and with parts set, .part files as well (size: bytes there). */
static void scan_repo(const char *dir, const char *rel, hub_file *files, int *n, int parts) {
    DIR *d = opendir(dir);
    if (!d) return;
    struct dirent *e;
    while ((e = readdir(d)) && *n < HUB_MAX_FILES) {
        if (e->d_name[0] == '.') continue;
        char full[PT_PATH_MAX], r[PT_PATH_MAX];
        snprintf(full, sizeof full, "%s/%s", dir, e->d_name);
        snprintf(r, sizeof r, "%s%s%s", rel, *rel ? "/" : "", e->d_name);
        struct stat st;
        if (stat(full, &st) != 0) continue;
        if (S_ISDIR(st.st_mode)) {
            scan_repo(full, r, files, n, parts);
            continue;
        }
        size_t l = strlen(r);
        int is_part = l > 5 && !strcmp(r + l - 5, ".part");
        if (is_part) {
            if (!parts) continue;
            r[l - 5] = 0;
        }
        if (!S_ISREG(st.st_mode) || !is_gguf_model(r)) continue;
        hub_file f = {0};
        f.path = strdup(r);
        if (!f.path) break;
        f.size = st.st_size;
        split_parse(&f);
        f.sha256[0] = is_part ? 'p' : 0; /* marks a .part: no checksum is known here */
        files[(*n)++] = f;
    }
    closedir(d);
}

static int cmp_file(const void *a, const void *b) {
    return strcmp(((const hub_file *)a)->path, ((const hub_file *)b)->path);
}

int hub_model_path(const char *spec, char *path, size_t cap) {
    hub_spec sp;
    char models[PT_PATH_MAX], dir[PT_PATH_MAX + 256];
    if (spec_parse(spec, &sp)) return CLI_USAGE;
    if (hub_models_dir(models, sizeof models) == 0) {
        snprintf(dir, sizeof dir, "%s/%s", models, sp.repo);
        hub_file *files = calloc(HUB_MAX_FILES, sizeof *files);
        if (!files) return cli_error("out of memory");
        int n = 0, pick[64];
        scan_repo(dir, "", files, &n, 0);
        qsort(files, (size_t)n, sizeof *files, cmp_file);
        int np = n ? select_model(sp.repo, sp.quant, files, n, pick, "in the cache", 1) : -1;
        /* a split model of more than 64 parts is not looked up here; pull checks it */
        if (np > 0 && np <= 64 &&
            (size_t)snprintf(path, cap, "%s/%s", dir, files[pick[0]].path) >= cap)
            np = -1; /* longer than a path can be: pulled (and refused) below */
        for (int i = 0; i < n; i++)
            free(files[i].path);
        free(files);
        if (np > 0 && np <= 64) return CLI_OK;
    }
    fprintf(stderr, "petrel: %s is not in the model cache yet: pulling it\n", spec);
    pull_opts po = {PULL_DEFAULT_JOBS, 0};
    int rc = pull(spec, &po, path, cap);
    if (rc == CLI_OK)
        fprintf(stderr,
                "petrel: to stream its experts faster and checked, pack them once: "
                "petrel pack %s\n",
                path);
    return rc;
}

/* The models of one repository folder of the cache, a line each on stdout (incomplete ones
 * marked); their count and bytes added to *n_models and *all. */
static void list_repo(const char *rdir, const char *repo, hub_file *files, int *n_models,
                      int64_t *all) {
    int n = 0;
    scan_repo(rdir, "", files, &n, 1);
    qsort(files, (size_t)n, sizeof *files, cmp_file);
    model_sum m;
    for (int i = 0; i < n; i++) {
        if (!model_at(files, n, i, &m)) continue;
        const int np = files[i].n_parts ? files[i].n_parts : 1;
        char label[128], spec[800];
        quant_label(&files[i], label, sizeof label);
        snprintf(spec, sizeof spec, "%s:%s", repo, label);
        *all += m.bytes;
        (*n_models)++;
        if (m.parts == np && !m.partial)
            printf("%-50s %10s  %s/%s%s\n", spec, fmt_bytes((double)m.bytes), rdir, m.path0,
                   np > 1 ? " (split)" : "");
        else
            printf("%-50s %10s  incomplete: %d of %d file%s complete; `petrel pull %s` "
                   "resumes it\n",
                   spec, fmt_bytes((double)m.bytes), m.parts, np, np > 1 ? "s" : "", spec);
    }
    for (int i = 0; i < n; i++)
        free(files[i].path);
}

int cmd_list(int argc, char **argv) {
    int status;
    if (cli_parse("list", argc, argv, NULL, NULL, &status)) return status;
    char models[PT_PATH_MAX];
    if (hub_models_dir(models, sizeof models))
        return cli_error("no folder for the model cache: set PETREL_CACHE, XDG_CACHE_HOME or "
                         "HOME");
    hub_file *files = calloc(HUB_MAX_FILES, sizeof *files);
    if (!files) return cli_error("out of memory");
    int n_models = 0;
    int64_t all = 0;
    DIR *od = opendir(models);
    struct dirent *oe;
    while (od && (oe = readdir(od))) {
        if (oe->d_name[0] == '.') continue;
        char odir[PT_PATH_MAX + 256];
        snprintf(odir, sizeof odir, "%s/%s", models, oe->d_name);
        DIR *rd = opendir(odir);
        struct dirent *re;
        while (rd && (re = readdir(rd))) {
            if (re->d_name[0] == '.') continue;
            char rdir[PT_PATH_MAX + 512], repo[600];
            snprintf(rdir, sizeof rdir, "%s/%s", odir, re->d_name);
            snprintf(repo, sizeof repo, "%s/%s", oe->d_name, re->d_name);
            list_repo(rdir, repo, files, &n_models, &all);
        }
        if (rd) closedir(rd);
    }
    if (od) closedir(od);
    free(files);
    if (!n_models)
        fprintf(stderr, "petrel: no models in %s (`petrel pull OWNER/NAME:QUANT` adds one)\n",
                models);
    else
        fprintf(stderr, "petrel: %d model%s, %s in %s\n", n_models, n_models > 1 ? "s" : "",
                fmt_bytes((double)all), models);
    return CLI_OK;
}

/* pull's options. */
typedef struct pull_args {
    const char *spec; /* OWNER/NAME[:QUANT] */
    int pack;         /* --pack 1, --no-pack 0; -1: ask */
    pull_opts po;
} pull_args;

static int pull_option(void *ud, const cli_args *a, const cli_val *v) {
    pull_args *pa = ud;
    (void)a;
    if (v->id == OPT_ARG) pa->spec = v->s;
    if (v->id == OPT_JOBS) pa->po.jobs = (int)v->n;
    if (v->id != OPT_WRITE_PACK && v->id != OPT_NO_WRITE_PACK) return 0;
    const int want = v->id == OPT_WRITE_PACK;
    if (pa->pack >= 0 && pa->pack != want)
        return fprintf(stderr, "petrel pull: --pack and --no-pack contradict each other: give "
                               "one\n"),
               -1;
    pa->pack = want;
    return 0;
}

int cmd_pull(int argc, char **argv) {
    pull_args pa = {.pack = -1, .po = {PULL_DEFAULT_JOBS, 0}};
    int status;
    if (cli_parse("pull", argc, argv, pull_option, &pa, &status)) return status;
    if (!pa.spec) return cli_usage_error("pull", "which model? (OWNER/NAME[:QUANT])");
    const char *spec = pa.spec;
    const pull_opts po = pa.po;
    int pack = pa.pack;
    char path[PT_PATH_MAX + 1100];
    int rc = pull(spec, &po, path, sizeof path);
    if (rc != CLI_OK) return rc;
    printf("%s\n", path);
    fflush(stdout);
    char xpack[sizeof path + 8];
    snprintf(xpack, sizeof xpack, "%s.xpack", path);
    if (pack == 0 || (pack < 0 && access(xpack, F_OK) == 0)) return CLI_OK;
    if (pack < 0 && isatty(0) && isatty(2)) {
        fprintf(stderr, "petrel: write the expert pack now (faster, checked expert reads when the "
                        "model is larger than memory; as large as the experts)? [y/N] ");
        char ans[16] = "";
        if (fgets(ans, sizeof ans, stdin)) pack = ans[0] == 'y' || ans[0] == 'Y';
    }
    if (pack <= 0) {
        fprintf(stderr,
                "petrel: to stream its experts faster and checked, pack them once: "
                "petrel pack %s\n",
                path);
        return CLI_OK;
    }
    char *pargv[] = {"pack", path, NULL};
    return cmd_pack(2, pargv);
}
