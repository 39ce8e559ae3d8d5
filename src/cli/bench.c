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
#include "options.h"
#include "petrel.h"
#include "textcli.h"

#define BENCH_MAX_LIST 16

/* "512,4096" into list[], each in the option's range; the count, or -1 */
static int parse_list(const cli_opt *o, const char *v, long *list) {
    int n = 0;
    const char *p = v;
    for (;;) {
        char *end = NULL;
        errno = 0;
        const long x = strtol(p, &end, 10);
        if (errno || end == p || x < o->lo || x > o->hi || n == BENCH_MAX_LIST) return -1;
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

/* bench's own options and the tests they make. */
typedef struct bench_args {
    tcli_opts *o; /* the model and engine options */
    long pl[BENCH_MAX_LIST], nl[BENCH_MAX_LIST], dl[BENCH_MAX_LIST]; /* -p, -n, -d */
    int np, nn, nd;
    long reps; /* -r */
    int warmup, jsonl;
    bench_test tests[BENCH_MAX_LIST * 2 * BENCH_MAX_LIST]; /* depths x (prompts + decodes) */
    int nt;
    long most; /* positions the longest test needs */
} bench_args;

static int bench_option(void *ud, const cli_args *a, const cli_val *v) {
    bench_args *b = ud;
    switch (v->id) {
    case OPT_N_PROMPT:
        return (b->np = parse_list(v->opt, v->s, b->pl)) < 0 ? cli_bad_value(a, v) : 0;
    case OPT_N_GEN: return (b->nn = parse_list(v->opt, v->s, b->nl)) < 0 ? cli_bad_value(a, v) : 0;
    case OPT_N_DEPTH:
        return (b->nd = parse_list(v->opt, v->s, b->dl)) < 0 ? cli_bad_value(a, v) : 0;
    case OPT_REPETITIONS: b->reps = (long)v->n; return 0;
    case OPT_NO_WARMUP: b->warmup = 0; return 0;
    case OPT_OUTPUT: b->jsonl = v->n == 1; return 0; /* md|jsonl */
    default: return tcli_option(b->o, a, v);
    }
}

/* The tests, in llama-bench's order: per depth, the prompts, then the decodes. 0, or -1 with
 * the message printed (nothing to time, -c too small). */
static int make_tests(bench_args *b, const tcli_opts *o) {
    b->nt = 0, b->most = 1;
    for (int k = 0; k < b->nd; k++) {
        for (int j = 0; j < b->np; j++)
            if (b->pl[j]) b->tests[b->nt++] = (bench_test){.p = b->pl[j], .d = b->dl[k]};
        for (int j = 0; j < b->nn; j++)
            if (b->nl[j]) b->tests[b->nt++] = (bench_test){.n = b->nl[j], .d = b->dl[k]};
    }
    for (int k = 0; k < b->nt; k++) {
        const long need = b->tests[k].d + b->tests[k].p + b->tests[k].n + 1;
        if (need > b->most) b->most = need;
    }
    if (!b->nt) return fprintf(stderr, "petrel bench: nothing to time: every -p and -n is 0\n"), -1;
    if (o->n_ctx && o->n_ctx < b->most)
        return fprintf(stderr,
                       "petrel bench: -c %ld is too small: the longest test needs %ld positions\n",
                       o->n_ctx, b->most),
               -1;
    return 0;
}

/* One test's row: a markdown line, or with -o jsonl a JSON object. 0, or -1 out of memory. */
static int print_row(const bench_args *b, pt_engine *e, const char *model, double gib,
                     const bench_test *t, const double *ts) {
    const long reps = b->reps;
    double mean = 0, var = 0;
    for (long r = 0; r < reps; r++)
        mean += ts[r] / (double)reps;
    for (long r = 0; r < reps; r++)
        var += (ts[r] - mean) * (ts[r] - mean);
    const double sd = reps > 1 ? sqrt(var / (double)(reps - 1)) : 0;
    char name[64];
    test_name(t, name, sizeof name);
    if (!b->jsonl) {
        printf("| %s %s | %.2f GiB | %d | %s | %.2f ± %.2f |\n", pt_engine_arch(e), model, gib,
               pt_engine_n_threads(e), name, mean, sd);
        return 0;
    }
    json_t *samples = json_array();
    for (long r = 0; r < reps; r++)
        json_array_append_new(samples, json_real(ts[r]));
    json_t *row =
        json_pack("{s:s, s:s, s:i, s:I, s:I, s:I, s:s, s:f, s:f, s:o}", "model", model, "arch",
                  pt_engine_arch(e), "n_threads", pt_engine_n_threads(e), "n_prompt",
                  (json_int_t)t->p, "n_gen", (json_int_t)t->n, "n_depth", (json_int_t)t->d, "test",
                  name, "avg_ts", mean, "stddev_ts", sd, "samples_ts", samples);
    char *line = row ? json_dumps(row, JSON_COMPACT | JSON_ENSURE_ASCII) : NULL;
    json_decref(row);
    if (!line) return -1;
    printf("%s\n", line);
    free(line);
    return 0;
}

/* Every test on the opened engine, a row each on stdout: the exit status. */
static int run_tests(const bench_args *b, pt_engine *e, const tcli_opts *o) {
    char err[512];
    const pt_session_params sp = {.n_ctx = (int)(o->n_ctx ? o->n_ctx : b->most),
                                  .n_batch = (int)o->n_batch};
    bench_ctx c = {.n_vocab = pt_engine_n_vocab(e)};
    c.s = pt_session_new(e, &sp, err, sizeof err);
    c.logits = malloc((size_t)c.n_vocab * sizeof(float));
    int32_t *ids = malloc((size_t)b->most * sizeof(int32_t));
    double *ts = malloc((size_t)b->reps * sizeof(double));
    int rc = !c.s                       ? cli_error("%s", err)
             : !c.logits || !ids || !ts ? cli_error("out of memory")
                                        : CLI_OK;
    const char *model = strrchr(o->model, '/');
    model = model ? model + 1 : o->model;
    FILE *mf = rc ? NULL : fopen(o->model, "rb");
    double gib = 0;
    if (mf && fseek(mf, 0, SEEK_END) == 0) gib = (double)ftell(mf) / (1u << 30);
    if (mf) fclose(mf);
    if (!rc && !b->jsonl) {
        printf("| model | size | threads | test | t/s |\n");
        printf("| --- | ---: | ---: | ---: | ---: |\n");
        fflush(stdout);
    }
    for (int k = 0; k < b->nt && !rc; k++) {
        if (run_test(&c, &b->tests[k], (int)b->reps, b->warmup, ids, ts, err, sizeof err))
            rc = cli_error("%s", err);
        else if (print_row(b, e, model, gib, &b->tests[k], ts))
            rc = cli_error("out of memory");
        else if (fflush(stdout) != 0)
            rc = cli_error("cannot write output");
    }
    free(ts);
    free(ids);
    free(c.logits);
    pt_session_free(c.s);
    return rc;
}

int cmd_bench(int argc, char **argv) {
    tcli_opts o;
    tcli_opts_init(&o);
    bench_args b = {.o = &o,
                    .pl = {BENCH_DEFAULT_PROMPT},
                    .nl = {BENCH_DEFAULT_GEN},
                    .dl = {BENCH_DEFAULT_DEPTH},
                    .np = 1,
                    .nn = 1,
                    .nd = 1,
                    .reps = BENCH_DEFAULT_REPS,
                    .warmup = 1};
    int status;
    if (cli_parse("bench", argc, argv, bench_option, &b, &status)) return status;
    if (make_tests(&b, &o)) return CLI_USAGE;
    const int mrc = tcli_resolve_model(&o, "bench");
    if (mrc) return mrc;
    char err[512];
    pt_engine_params ep = tcli_engine_params(&o);
    ep.n_ctx = (int)(o.n_ctx ? o.n_ctx : b.most);
    pt_engine *e = pt_engine_open(&ep, err, sizeof err);
    if (!e) return cli_error("%s", err);
    fprintf(stderr, "petrel: %s\n", pt_engine_plan(e));
    const int rc = run_tests(&b, e, &o);
    pt_engine_close(e);
    return rc;
}
