/* test_structure.c — the code's shape as ARCHITECTURE.md draws it.
 *
 * 1. structure_layers: every #include of every file under src/ against the order of the layers
 *    that ARCHITECTURE.md writes (its "Layers" section, the first fenced block: one layer a
 *    line, top first, folders on one line are siblings). The rules, as the document states
 *    them: a file includes its own folder's headers, the public headers (include/, for their
 *    types) and the headers of folders on lower lines; never a folder above it or beside it;
 *    the folders above include/ (the front ends) nothing below include/, and their headers
 *    only what the front ends share (the line just above include/). Headers a folder
 *    holds are resolved the way the compiler's -Isrc and -Iinclude would; a quoted include that
 *    names no file, a path with "..", a folder with C files that the document does not place,
 *    are failures too. Each offending line is named (file:line, the include, the two folders).
 *    The checker is checked on a sample that breaks each rule.
 * 2. structure_function_length: no function of the front ends (src/cli, src/server, src/front)
 *    is longer than FN_MAX lines, signature to closing brace (the files are clang-formatted: a
 *    definition starts at column 0 and its body ends with a lone "}").
 *
 * Run from the repository root: build/test_petrel structure_ */
#include <dirent.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "test.h"

#define MAX_LAYERS 24
#define MAX_SIBLINGS 4
#define FN_MAX 150

typedef struct layers {
    char dir[MAX_LAYERS][MAX_SIBLINGS][64]; /* folder paths ("src/cli", "include", "src") */
    int n_dir[MAX_LAYERS];
    int n;
    int wall; /* the line of include/ */
} layers;

static int is_file(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

/* The layer order from ARCHITECTURE.md's text: 0, or -1 with why in err. */
static int parse_layers(const char *doc, layers *L, char *err, size_t cap) {
    memset(L, 0, sizeof *L);
    L->wall = -1;
    const char *sec = strstr(doc, "\n## Layers");
    const char *open = sec ? strstr(sec, "\n```") : NULL;
    const char *body = open ? strchr(open + 1, '\n') : NULL;
    const char *end = body ? strstr(body, "\n```") : NULL;
    if (!end) return snprintf(err, cap, "no fenced block in a \"## Layers\" section"), -1;
    for (const char *l = body + 1; l < end;) {
        const char *e = memchr(l, '\n', (size_t)(end - l));
        if (!e) e = end;
        const char *p = l;
        int k = 0;
        for (;;) {
            while (p < e && *p == ' ')
                p++;
            size_t w = 0;
            while (p + w < e && p[w] != ' ')
                w++;
            const int folder =
                w > 1 && p[w - 1] == '/' && (!strncmp(p, "src/", 4) || !strncmp(p, "include/", 8));
            if (!folder) break;
            if (k == 0 && L->n == MAX_LAYERS) return snprintf(err, cap, "too many layers"), -1;
            if (k == MAX_SIBLINGS || w - 1 >= 64)
                return snprintf(err, cap, "a layer line too long: %.*s", (int)(e - l), l), -1;
            memcpy(L->dir[L->n][k], p, w - 1); /* without the slash */
            if (!strcmp(L->dir[L->n][k], "include")) L->wall = L->n;
            k++;
            p += w;
        }
        if (k) L->n_dir[L->n++] = k;
        l = e + 1;
    }
    if (L->wall < 0) return snprintf(err, cap, "the layers do not place include/"), -1;
    return 0;
}

/* The line of folder dir, or -1 when the document does not place it. */
static int layer_of(const layers *L, const char *dir) {
    for (int i = 0; i < L->n; i++)
        for (int k = 0; k < L->n_dir[i]; k++)
            if (!strcmp(L->dir[i][k], dir)) return i;
    return -1;
}

static void dir_of(const char *path, char *out, size_t cap) {
    const char *s = strrchr(path, '/');
    const size_t n = s ? (size_t)(s - path) : strlen(path);
    snprintf(out, cap, "%.*s", (int)(n < cap ? n : cap - 1), path);
}

/* The folder a quoted include of a file in dir names: 1 with it in out, 0 when it names no
 * file of the tree (a system or third-party header when written <...>). */
static int resolve(const char *dir, const char *inc, char *out, size_t cap) {
    char p[1024];
    const char *roots[] = {dir, "src", "include"};
    for (size_t i = 0; i < 3; i++) {
        snprintf(p, sizeof p, "%s/%s", roots[i], inc);
        if (is_file(p)) {
            dir_of(p, out, cap);
            return 1;
        }
    }
    return 0;
}

static void report_line(char *report, size_t cap, const char *path, int line, char open,
                        const char *inc, const char *why) {
    size_t used = strlen(report);
    if (used + 1 < cap)
        snprintf(report + used, cap - used, "%s:%d: #include %c%s%c: %s\n", path, line, open, inc,
                 open == '<' ? '>' : '"', why);
}

/* Whether a file in folder dir (a header: header) may include a header of folder to; why not
 * into why. */
static int allowed(const layers *L, const char *dir, int header, const char *to, char *why,
                   size_t cap) {
    if (!strcmp(dir, to) || !strcmp(to, "include")) return 1;
    const int a = layer_of(L, dir), b = layer_of(L, to);
    if (b < 0) return snprintf(why, cap, "%s is not in ARCHITECTURE.md's layers", to), 0;
    if (b < a) return snprintf(why, cap, "%s may not include %s, a layer above it", dir, to), 0;
    if (b == a) return snprintf(why, cap, "%s may not include %s, a layer beside it", dir, to), 0;
    if (a < L->wall && b > L->wall)
        return snprintf(why, cap,
                        "%s is a front end: it sees the public headers, never %s below them", dir,
                        to),
               0;
    if (header && b < L->wall - 1)
        return snprintf(why, cap,
                        "a header of the front end %s includes the front end %s (only what they "
                        "share, the line above include/, and the public headers)",
                        dir, to),
               0;
    return 1;
}

/* Check the includes of one file's text (path, in folder dir); each offending line goes into
 * report. Returns how many. */
static int check_text(const layers *L, const char *path, const char *dir, const char *text,
                      char *report, size_t cap) {
    int bad = 0, line = 1;
    for (const char *l = text; *l; line++) {
        const char *e = strchr(l, '\n');
        size_t n = e ? (size_t)(e - l) : strlen(l);
        const char *p = l, *end = l + n;
        while (p < end && (*p == ' ' || *p == '\t'))
            p++;
        if (p < end && *p == '#') {
            p++;
            while (p < end && (*p == ' ' || *p == '\t'))
                p++;
            if ((size_t)(end - p) > 7 && !strncmp(p, "include", 7)) {
                p += 7;
                while (p < end && (*p == ' ' || *p == '\t'))
                    p++;
                char open = p < end ? *p : 0, close = open == '"' ? '"' : '>';
                const char *q =
                    open && p + 1 < end ? memchr(p + 1, close, (size_t)(end - p - 1)) : NULL;
                char inc[512] = "", to[256], why[2048];
                if ((open == '"' || open == '<') && q && (size_t)(q - p - 1) < sizeof inc) {
                    memcpy(inc, p + 1, (size_t)(q - p - 1));
                    inc[q - p - 1] = 0;
                }
                const char *fail = NULL;
                if (!inc[0])
                    fail = "a computed include";
                else if (strstr(inc, ".."))
                    fail = "a path through \"..\"";
                else if (!resolve(dir, inc, to, sizeof to))
                    fail = open == '"' ? "names no file of the tree" : NULL;
                else if (!allowed(L, dir, path[strlen(path) - 1] == 'h', to, why, sizeof why))
                    fail = why;
                if (fail) {
                    bad++;
                    report_line(report, cap, path, line, open ? open : '?', inc, fail);
                }
            }
        }
        l += n + (e ? 1 : 0);
    }
    return bad;
}

/* Every .c and .h under folder, recursively: fn(path, its folder) for each. */
typedef void (*file_fn)(const char *path, const char *dir, void *ud);
static int walk(const char *folder, file_fn fn, void *ud) {
    DIR *d = opendir(folder);
    if (!d) return -1;
    struct dirent *ent;
    int n = 0;
    while ((ent = readdir(d))) {
        if (ent->d_name[0] == '.') continue;
        char p[1024];
        snprintf(p, sizeof p, "%s/%s", folder, ent->d_name);
        struct stat st;
        if (stat(p, &st)) continue;
        size_t k = strlen(ent->d_name);
        if (S_ISDIR(st.st_mode)) {
            int m = walk(p, fn, ud);
            n += m > 0 ? m : 0;
        } else if (k > 2 && ent->d_name[k - 2] == '.' &&
                   (ent->d_name[k - 1] == 'c' || ent->d_name[k - 1] == 'h')) {
            fn(p, folder, ud);
            n++;
        }
    }
    closedir(d);
    return n;
}

typedef struct layer_run {
    const layers *L;
    char report[16384];
    int bad;
} layer_run;

static void check_file(const char *path, const char *dir, void *ud) {
    layer_run *r = ud;
    if (layer_of(r->L, dir) < 0) {
        size_t used = strlen(r->report);
        snprintf(r->report + used, sizeof r->report - used,
                 "%s: its folder %s is not in ARCHITECTURE.md's layers\n", path, dir);
        r->bad++;
        return;
    }
    char *text = t_read_file(path, NULL);
    CHECKF(text, "%s: cannot read", path);
    if (text) r->bad += check_text(r->L, path, dir, text, r->report, sizeof r->report);
    free(text);
}

static void structure_layers(void) {
    char *doc = t_read_file("ARCHITECTURE.md", NULL);
    CHECKF(doc, "ARCHITECTURE.md: cannot read (run the tests from the repository root)");
    if (!doc) return;
    static layers L;
    char err[256];
    const int parsed = parse_layers(doc, &L, err, sizeof err);
    free(doc);
    CHECKF(parsed == 0, "ARCHITECTURE.md: %s", err);
    if (parsed) return;
    CHECKF(L.n >= 10 && layer_of(&L, "src/engine") > L.wall && layer_of(&L, "src/cli") < L.wall,
           "ARCHITECTURE.md's layers: %d lines, engine on %d, cli on %d, include/ on %d", L.n,
           layer_of(&L, "src/engine"), layer_of(&L, "src/cli"), L.wall);
    static layer_run run;
    run.L = &L;
    const int files = walk("src", check_file, &run);
    CHECKF(files >= 100, "only %d source files under src/", files);
    CHECKF(run.bad == 0, "%d includes against the layers of ARCHITECTURE.md:\n%s", run.bad,
           run.report);
    /* the checker itself: each rule caught, however the include is written; allowed ones pass */
    char r2[4096] = "";
    const char *text_sample =
        "#include <stdio.h>\n#include <jansson.h>\n#include \"petrel.h\"\n#include \"grammar.h\"\n"
        "#include \"format/gguf.h\"\n#include \"engine/session.h\"\n  #  include "
        "\"model/family.h\"\n"
        "#include <engine/gen.h>\n#include \"common.h\"\n#include \"../engine/gen.c\"\n"
        "#include \"no/such.h\"\n";
    CHECK(check_text(&L, "t.c", "src/text", text_sample, r2, sizeof r2) == 5);
    CHECK_STR_CONTAINS(r2, "t.c:6: #include \"engine/session.h\": src/text may not include "
                           "src/engine, a layer above it");
    CHECK_STR_CONTAINS(r2, "t.c:7: #include \"model/family.h\": src/text may not include "
                           "src/model, a layer beside it");
    CHECK_STR_CONTAINS(r2, "t.c:8: #include <engine/gen.h>");
    CHECK_STR_CONTAINS(r2, "t.c:10: #include \"../engine/gen.c\": a path through");
    CHECK_STR_CONTAINS(r2, "t.c:11: #include \"no/such.h\": names no file");
    r2[0] = 0;
    const char *cli_sample = "#include \"front/front.h\"\n#include \"server/server.h\"\n"
                             "#include \"cli.h\"\n#include \"petrel_tools.h\"\n"
                             "#include \"engine/decoder.h\"\n#include \"common.h\"\n";
    CHECK(check_text(&L, "c.c", "src/cli", cli_sample, r2, sizeof r2) == 2);
    CHECK_STR_CONTAINS(r2, "c.c:5: #include \"engine/decoder.h\": src/cli is a front end");
    CHECK_STR_CONTAINS(r2, "c.c:6: #include \"common.h\": src/cli is a front end");
    r2[0] = 0;
    CHECK(check_text(&L, "c.h", "src/cli", cli_sample, r2, sizeof r2) == 3);
    CHECK_STR_CONTAINS(r2, "c.h:2: #include \"server/server.h\": a header of the front end");
    r2[0] = 0;
    CHECK(check_text(&L, "s.c", "src/server", "#include \"cli/cli.h\"\n", r2, sizeof r2) == 1);
    CHECK_STR_CONTAINS(r2, "src/server may not include src/cli, a layer above it");
}

/* ===== Function length ===== */

typedef struct len_run {
    char report[8192];
    int bad, functions;
} len_run;

static int is_label(const char *l, size_t n) {
    size_t i = 0;
    while (i < n && (l[i] == '_' || (l[i] >= 'a' && l[i] <= 'z') || (l[i] >= '0' && l[i] <= '9')))
        i++;
    return i > 0 && i + 1 == n && l[i] == ':';
}

/* The functions of one clang-formatted file longer than FN_MAX lines into r. */
static void function_lengths(const char *path, const char *text, len_run *r) {
    int line = 1, start = 0;
    char name[128] = "";
    for (const char *l = text; *l; line++) {
        const char *e = strchr(l, '\n');
        size_t n = e ? (size_t)(e - l) : strlen(l);
        const int ident = n && (*l == '_' || (*l >= 'a' && *l <= 'z') || (*l >= 'A' && *l <= 'Z'));
        if (ident && !is_label(l, n) && memchr(l, '(', n)) {
            start = line;
            const char *paren = memchr(l, '(', n), *b = paren;
            while (b > l && (b[-1] == '_' || (b[-1] >= 'a' && b[-1] <= 'z') ||
                             (b[-1] >= 'A' && b[-1] <= 'Z') || (b[-1] >= '0' && b[-1] <= '9')))
                b--;
            snprintf(name, sizeof name, "%.*s", (int)(paren - b), b);
        } else if (n == 1 && *l == '}' && start) {
            r->functions++;
            const int len = line - start + 1;
            if (len > FN_MAX) {
                size_t used = strlen(r->report);
                snprintf(r->report + used, sizeof r->report - used, "%s:%d: %s is %d lines\n", path,
                         start, name, len);
                r->bad++;
            }
            start = 0;
        }
        l += n + (e ? 1 : 0);
    }
}

static void length_file(const char *path, const char *dir, void *ud) {
    (void)dir;
    char *text = t_read_file(path, NULL);
    CHECKF(text, "%s: cannot read", path);
    if (text) function_lengths(path, text, ud);
    free(text);
}

static void structure_function_length(void) {
    static len_run run;
    const char *dirs[] = {"src/cli", "src/server", "src/front"};
    for (size_t i = 0; i < 3; i++)
        CHECKF(walk(dirs[i], length_file, &run) > 0, "%s: no sources", dirs[i]);
    CHECKF(run.functions > 100, "only %d functions found", run.functions);
    CHECKF(run.bad == 0, "%d front-end functions over %d lines:\n%s", run.bad, FN_MAX, run.report);
    /* the counter itself: a label, a nested brace and a long signature */
    len_run r = {0};
    char sample[8192] = "static int\nf(int a,\n  int b) {\n";
    for (int i = 0; i < FN_MAX; i++)
        strcat(sample, i == 3 ? "out:\n" : "    x;\n");
    strcat(sample, "}\nint g(void) {\n    if (x) {\n    }\n}\n");
    function_lengths("s.c", sample, &r);
    CHECK(r.functions == 2 && r.bad == 1);
    CHECK_STR_CONTAINS(r.report, "s.c:2: f is 153 lines");
}

T_SUITE(structure) {
    T_ADD(structure_layers);
    T_ADD(structure_function_length);
}
