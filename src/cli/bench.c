/* bench.c — `petrel bench`: prompt and decode speed, measured as llama.cpp's llama-bench
 * measures it, so that the two tools' figures compare directly.
 *
 *   petrel bench -m MODEL.gguf [-p 512[,4096]] [-n 128] [-d 0[,4096]] [-r 5] [-o md|jsonl]
 *
 * For every depth d of -d, every prompt length p of -p is a test "ppP" and every
 * generation length n of -n a test "tgN" ("@ dD" when d > 0). A test runs once
 * untimed (the warmup: the whole prompt, or one decode step; --no-warmup skips it),
 * then -r times: the session is cleared, d positions are evaluated untimed, then
 * the timed part, the p prompt tokens in one evaluation (in blocks of -b rows) or n
 * decode steps of one token each, the last row's logits computed every time. Tokens
 * are pseudo-random ids of the vocabulary (a fixed seed: the routing of a MoE pass
 * depends on them, so every run routes alike). A row reports tokens/s, mean and
 * standard deviation over the runs.
 *
 * The warmup matters most where memory is first touched slowly (virtual machines):
 * the first evaluation of a process writes its scratch and KV pages for the first
 * time. llama-bench excludes that the same way; `petrel generate` reports the cold
 * figure of one prompt.
 */
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "petrel.h"
#include "textcli.h"

#define BENCH_MAX_LIST 16

static void bench_usage(FILE *f) {
    fprintf(f,
            "usage: petrel bench [-m MODEL.gguf] [options]\n"
            "  -p, --n-prompt LIST     prompt lengths to time, comma-separated (default 512; 0:\n"
            "                          none)\n"
            "  -n, --n-gen LIST        decode lengths to time (default 128; 0: none)\n"
            "  -d, --n-depth LIST      positions already in the context before each test\n"
            "                          (default 0)\n"
            "  -r, --repetitions N     timed runs of each test (default 5)\n"
            "  --no-warmup             no untimed run before each test's timed ones\n"
            "  -o, --output FORMAT     md (a table, the default) or jsonl (one JSON object a\n"
            "                          test, with llama-bench's avg_ts / stddev_ts / samples_ts)\n"
            "  Tests are timed as llama.cpp's llama-bench times them: a warmup run, then per\n"
            "  run the context cleared, the depth evaluated untimed, the test timed.\n");
    tcli_usage(f);
}

/* "512,4096" into list[], each from lo to hi; the count, or -1 */
static int parse_list(const char *v, long lo, long hi, long *list) {
    int n = 0;
    const char *p = v;
    for (;;) {
        char *end = NULL;
        errno = 0;
        const long x = strtol(p, &end, 10);
        if (errno || end == p || x < lo || x > hi || n == BENCH_MAX_LIST) return -1;
        list[n++] = x;
        if (!*end) return n;
        if (*end != ',' || !end[1]) return -1;
        p = end + 1;
    }
}

typedef struct bench_ctx {
    pt_session *s;
    float *logits;
    int n_vocab;
    uint64_t rng;
} bench_ctx;

/* the next pseudo-random id of the vocabulary (xorshift64*) */
static int32_t next_id(bench_ctx *b) {
    b->rng ^= b->rng >> 12;
    b->rng ^= b->rng << 25;
    b->rng ^= b->rng >> 27;
    return (int32_t)((b->rng * 0x2545F4914F6CDD1DULL >> 33) % (uint64_t)b->n_vocab);
}

/* n prompt tokens in one evaluation; 0, or -1 with err */
static int eval_prompt(bench_ctx *b, int n, int32_t *ids, char *err, size_t len) {
    for (int i = 0; i < n; i++)
        ids[i] = next_id(b);
    return n ? pt_session_eval(b->s, ids, n, b->logits, 0, NULL, err, len) : 0;
}

/* n decode steps of one token each */
static int eval_gen(bench_ctx *b, int n, char *err, size_t len) {
    for (int i = 0; i < n; i++) {
        const int32_t id = next_id(b);
        if (pt_session_eval(b->s, &id, 1, b->logits, 0, NULL, err, len)) return -1;
    }
    return 0;
}

typedef struct bench_test {
    long p, n, d; /* one of p and n is 0 */
} bench_test;

/* Runs test t: the warmup, then reps timed runs into ts[] (tokens/s). 0, or -1 with err. */
static int run_test(bench_ctx *b, const bench_test *t, int reps, int warmup, int32_t *ids,
                    double *ts, char *err, size_t len) {
    b->rng = 0x9E3779B97F4A7C15ULL; /* every test sees the same ids */
    if (warmup) {
        pt_session_truncate(b->s, 0);
        if (t->p ? eval_prompt(b, (int)t->p, ids, err, len) : eval_gen(b, 1, err, len)) return -1;
    }
    for (int r = 0; r < reps; r++) {
        pt_session_truncate(b->s, 0);
        if (eval_prompt(b, (int)t->d, ids, err, len)) return -1;
        const double t0 = pt_now();
        if (t->p ? eval_prompt(b, (int)t->p, ids, err, len) : eval_gen(b, (int)t->n, err, len))
            return -1;
        const double dt = pt_now() - t0;
        ts[r] = (double)(t->p ? t->p : t->n) / (dt > 1e-9 ? dt : 1e-9);
    }
    return 0;
}

static void test_name(const bench_test *t, char *out, size_t cap) {
    const int k = snprintf(out, cap, "%s%ld", t->p ? "pp" : "tg", t->p ? t->p : t->n);
    if (t->d && k > 0 && (size_t)k < cap) snprintf(out + k, cap - (size_t)k, " @ d%ld", t->d);
}

int cmd_bench(int argc, char **argv) {
    tcli_opts o;
    tcli_opts_init(&o);
    long pl[BENCH_MAX_LIST] = {512}, nl[BENCH_MAX_LIST] = {128}, dl[BENCH_MAX_LIST] = {0};
    int np = 1, nn = 1, nd = 1, warmup = 1, jsonl = 0;
    long reps = 5;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            bench_usage(stdout);
            return CLI_OK;
        }
        if (!strcmp(a, "--no-warmup")) {
            warmup = 0;
            continue;
        }
        const int is_p = !strcmp(a, "-p") || !strcmp(a, "--n-prompt"),
                  is_n = !strcmp(a, "-n") || !strcmp(a, "--n-gen"),
                  is_d = !strcmp(a, "-d") || !strcmp(a, "--n-depth"),
                  is_r = !strcmp(a, "-r") || !strcmp(a, "--repetitions"),
                  is_o = !strcmp(a, "-o") || !strcmp(a, "--output");
        if (is_p || is_n || is_d || is_r || is_o) {
            if (!v) {
                fprintf(stderr, "petrel bench: %s needs a value\n", a);
                return CLI_USAGE;
            }
            i++;
            const char *want = NULL;
            if (is_p && (np = parse_list(v, 0, 1 << 24, pl)) < 0)
                want = "comma-separated integers from 0 to 16777216 (at most 16)";
            else if (is_n && (nn = parse_list(v, 0, 1 << 24, nl)) < 0)
                want = "comma-separated integers from 0 to 16777216 (at most 16)";
            else if (is_d && (nd = parse_list(v, 0, 1 << 24, dl)) < 0)
                want = "comma-separated integers from 0 to 16777216 (at most 16)";
            else if (is_r) {
                char *end = NULL;
                errno = 0;
                reps = strtol(v, &end, 10);
                if (errno || end == v || *end || reps < 1 || reps > 1000)
                    want = "an integer from 1 to 1000";
            } else if (is_o) {
                if (!strcmp(v, "md"))
                    jsonl = 0;
                else if (!strcmp(v, "jsonl"))
                    jsonl = 1;
                else
                    want = "md or jsonl";
            }
            if (want) {
                fprintf(stderr, "petrel bench: invalid value '%s' for %s: expected %s\n", v, a,
                        want);
                return CLI_USAGE;
            }
            continue;
        }
        const int r = tcli_parse("bench", argc, argv, &i, &o);
        if (r < 0) return CLI_USAGE;
        if (r == 0) {
            fprintf(stderr, "petrel bench: unknown option '%s'\n", a);
            bench_usage(stderr);
            return CLI_USAGE;
        }
    }
    /* the tests, in llama-bench's order: per depth, the prompts, then the decodes */
    bench_test tests[BENCH_MAX_LIST * 2 * BENCH_MAX_LIST]; /* depths x (prompts + decodes) */
    int nt = 0;
    long most = 1;
    for (int k = 0; k < nd; k++) {
        for (int j = 0; j < np; j++)
            if (pl[j]) tests[nt++] = (bench_test){.p = pl[j], .d = dl[k]};
        for (int j = 0; j < nn; j++)
            if (nl[j]) tests[nt++] = (bench_test){.n = nl[j], .d = dl[k]};
    }
    for (int k = 0; k < nt; k++) {
        const long need = tests[k].d + tests[k].p + tests[k].n + 1;
        if (need > most) most = need;
    }
    if (!nt) {
        fprintf(stderr, "petrel bench: nothing to time: every -p and -n is 0\n");
        return CLI_USAGE;
    }
    if (o.n_ctx && o.n_ctx < most) {
        fprintf(stderr, "petrel bench: -c %ld is too small: the longest test needs %ld positions\n",
                o.n_ctx, most);
        return CLI_USAGE;
    }
    const int mrc = tcli_resolve_model(&o, "bench");
    if (mrc) return mrc;

    char err[512];
    pt_engine_params ep = o.ep;
    ep.model_path = o.model;
    ep.n_threads = (int)o.threads;
    ep.kernels = o.kernels;
    ep.n_ctx = (int)(o.n_ctx ? o.n_ctx : most);
    pt_engine *e = pt_engine_open(&ep, err, sizeof err);
    if (!e) return cli_error("%s", err);
    fprintf(stderr, "petrel: %s\n", pt_engine_plan(e));
    const pt_session_params sp = {.n_ctx = ep.n_ctx, .n_batch = (int)o.n_batch};
    bench_ctx b = {.n_vocab = pt_engine_n_vocab(e)};
    b.s = pt_session_new(e, &sp, err, sizeof err);
    b.logits = malloc((size_t)b.n_vocab * sizeof(float));
    int32_t *ids = malloc((size_t)most * sizeof(int32_t));
    double *ts = malloc((size_t)reps * sizeof(double));
    int rc = CLI_OK;
    if (!b.s) {
        rc = cli_error("%s", err);
        goto done;
    }
    if (!b.logits || !ids || !ts) {
        rc = cli_error("out of memory");
        goto done;
    }
    const char *base = strrchr(o.model, '/');
    base = base ? base + 1 : o.model;
    FILE *mf = fopen(o.model, "rb");
    double gib = 0;
    if (mf && fseek(mf, 0, SEEK_END) == 0) gib = (double)ftell(mf) / (1u << 30);
    if (mf) fclose(mf);
    if (!jsonl) {
        printf("| model | size | threads | test | t/s |\n");
        printf("| --- | ---: | ---: | ---: | ---: |\n");
        fflush(stdout);
    }
    for (int k = 0; k < nt; k++) {
        const bench_test *t = &tests[k];
        if (run_test(&b, t, (int)reps, warmup, ids, ts, err, sizeof err)) {
            rc = cli_error("%s", err);
            goto done;
        }
        double mean = 0, var = 0;
        for (long r = 0; r < reps; r++)
            mean += ts[r] / (double)reps;
        for (long r = 0; r < reps; r++)
            var += (ts[r] - mean) * (ts[r] - mean);
        const double sd = reps > 1 ? sqrt(var / (double)(reps - 1)) : 0;
        char name[64];
        test_name(t, name, sizeof name);
        if (jsonl) {
            json_t *samples = json_array();
            for (long r = 0; r < reps; r++)
                json_array_append_new(samples, json_real(ts[r]));
            json_t *row = json_pack("{s:s, s:s, s:i, s:I, s:I, s:I, s:s, s:f, s:f, s:o}", "model",
                                    base, "arch", pt_engine_arch(e), "n_threads",
                                    pt_engine_n_threads(e), "n_prompt", (json_int_t)t->p, "n_gen",
                                    (json_int_t)t->n, "n_depth", (json_int_t)t->d, "test", name,
                                    "avg_ts", mean, "stddev_ts", sd, "samples_ts", samples);
            char *line = row ? json_dumps(row, JSON_COMPACT | JSON_ENSURE_ASCII) : NULL;
            json_decref(row);
            if (!line) {
                rc = cli_error("out of memory");
                goto done;
            }
            printf("%s\n", line);
            free(line);
        } else {
            printf("| %s %s | %.2f GiB | %d | %s | %.2f ± %.2f |\n", pt_engine_arch(e), base, gib,
                   pt_engine_n_threads(e), name, mean, sd);
        }
        if (fflush(stdout) != 0) {
            rc = cli_error("cannot write output");
            goto done;
        }
    }
done:
    free(ts);
    free(ids);
    free(b.logits);
    pt_session_free(b.s);
    pt_engine_close(e);
    return rc;
}
