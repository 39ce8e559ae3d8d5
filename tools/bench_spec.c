/* bench_spec.c — drafting with the MTP head, measured side by side in one run (`make bench`,
 * bench/spec.sh). For a model and an expert-cache setting:
 *
 *   ceiling   a greedy run without drafting is recorded, then replayed as the draft source
 *             (gen_set_draft_replay: 100% acceptance) at draft lengths 1..4: decode tok/s
 *             and routed-expert bytes read per generated token against no drafting;
 *   failure   the model's own MTP head with the default settings (draft 3, adaptive) against
 *             --draft 0: the cost when drafts are rejected (a random head);
 *   real      the MTP head, never backing off: acceptance and tokens per forward at greedy and
 *             at temperature 0.7.
 *
 * Every ceiling and failure run sits between two runs without drafting, and its ratio is taken
 * against those two: a streamed model's decode follows the disk, whose rate on a shared host
 * drifts by 10-20% over the minutes this takes (2026-12-06: the same build read 0.91x for the
 * failure case with the configurations in turn, 0.98x against the runs beside it).
 *
 *   bench_spec MODEL [expert_slots (0: automatic)] [n_gen] [threads]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/gen.h"
#include "petrel.h"

typedef struct rec {
    int32_t v[4096];
    int n;
} rec;

static void on_lp(void *ud, const pt_logprob *s, const pt_logprob *top, int n_top) {
    (void)top, (void)n_top;
    rec *r = ud;
    if (r->n < 4096) r->v[r->n++] = s->id;
}

typedef struct result {
    double tok_s, bytes_per_tok, acc, tpf;
} result;

static int run(pt_gen *g, pt_engine *e, const int32_t *prompt, int np, int n_gen, rec *out,
               result *res) {
    char err[512];
    pt_gen_opts o = {
        .max_tokens = n_gen, .ignore_eog = 1, .on_logprob = on_lp, .on_logprob_ud = out};
    pt_gen_result r = {0};
    out->n = 0;
    pt_gen_clear(g);
    if (pt_gen_prefill(g, prompt, np, NULL, err, sizeof err) < 0) {
        fprintf(stderr, "bench_spec: %s\n", err);
        return -1;
    }
    pt_stats s0, s1;
    pt_engine_stats(e, &s0);
    if (pt_gen_run(g, &o, NULL, NULL, NULL, &r, err, sizeof err)) {
        fprintf(stderr, "bench_spec: %s\n", err);
        return -1;
    }
    pt_engine_stats(e, &s1);
    pt_draft_stats ds;
    pt_gen_draft_stats(g, &ds);
    res->tok_s = r.n_tokens > 1 ? (r.n_tokens - 1) / (r.t_end - r.t_first) : 0;
    res->bytes_per_tok = r.n_tokens ? (double)(s1.bytes_read - s0.bytes_read) / r.n_tokens : 0;
    res->acc = ds.drafted ? (double)ds.accepted / (double)ds.drafted : 0;
    res->tpf = ds.verify + ds.plain ? (double)ds.tokens / (double)(ds.verify + ds.plain) : 1;
    pt_buf_free(&r.text);
    return 0;
}

/* the median of n values (n <= 32) */
static double median(const double *x, int n) {
    double v[32];
    for (int i = 0; i < n; i++) {
        int j = i;
        for (; j > 0 && v[j - 1] > x[i]; j--)
            v[j] = v[j - 1];
        v[j] = x[i];
    }
    return v[n / 2];
}

static double median_tok_s(const result *r, int n) {
    double v[32];
    for (int i = 0; i < n; i++)
        v[i] = r[i].tok_s;
    return median(v, n);
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: bench_spec MODEL [expert_slots] [n_gen] [threads]\n");
        return 2;
    }
    const int slots = argc > 2 ? atoi(argv[2]) : 0;
    const int n_gen = argc > 3 ? atoi(argv[3]) : 64;
    const int threads = argc > 4 ? atoi(argv[4]) : 0;
    char err[512];
    pt_engine_params ep = {.model_path = argv[1],
                           .n_threads = threads,
                           .expert_slots = slots,
                           .no_pin = 1,
                           .usage_dir = "/tmp"};
    pt_engine *e = pt_engine_open(&ep, err, sizeof err);
    if (!e) {
        fprintf(stderr, "bench_spec: %s\n", err);
        return 1;
    }
    printf("model %s: %s\n", argv[1], pt_engine_plan(e));
    if (!pt_engine_has_mtp(e)) {
        printf("no MTP head\n");
        return 0;
    }
    int32_t prompt[32];
    const int np = 32;
    for (int i = 0; i < np; i++)
        prompt[i] = 100 + (i * 37) % 400;
    pt_session_params sp = {.n_ctx = np + n_gen + 32, .n_batch = 64};
    pt_session *s = pt_session_new(e, &sp, err, sizeof err);
    pt_sampling smp;
    pt_sampling_default(&smp);
    smp.temp = 0;
    pt_gen *g = s ? pt_gen_new(s, &smp, err, sizeof err) : NULL;
    if (!g) {
        fprintf(stderr, "bench_spec: %s\n", err);
        return 1;
    }
    static rec base, got;
    result r0, r;
    run(g, e, prompt, np, n_gen, &base, &r0); /* warm-up */
    if (run(g, e, prompt, np, n_gen, &base, &r0)) return 1;
    /* the ceiling at lengths 1-4 and the head at its defaults, each run between two runs
     * without drafting (a fresh drafting state each run, as a new `petrel generate` has):
     * P C1 P C2 ... C5 P, REPS times. A configuration's ratio in a round is its tok/s over the
     * mean of the two plain runs beside it, so a disk whose speed drifts over the minutes of
     * the benchmark moves both sides of each ratio alike; the medians over the rounds are
     * printed. */
    enum { REPS = 3, NCFG = 6 };
    static const char *names[NCFG] = {"no drafting",
                                      "ceiling (replay), draft 1",
                                      "ceiling (replay), draft 2",
                                      "ceiling (replay), draft 3",
                                      "ceiling (replay), draft 4",
                                      "MTP head, default (3, adaptive)"};
    result res[NCFG][REPS], plain_runs[REPS][NCFG];
    double ratio[NCFG][REPS];
    int differs[NCFG] = {0};
    for (int rep = 0; rep < REPS; rep++) {
        for (int c = 0; c < NCFG; c++) {
            if (c) {
                const int k = c <= 4 ? c : 3;
                if (pt_gen_set_draft(g, k, err, sizeof err) != k) {
                    fprintf(stderr, "bench_spec: %s\n", err);
                    return 1;
                }
                if (c <= 4) gen_set_draft_replay(g, base.v, base.n);
                if (run(g, e, prompt, np, n_gen, &got, &res[c][rep])) return 1;
                differs[c] |=
                    got.n != base.n || memcmp(got.v, base.v, sizeof(int32_t) * (size_t)got.n);
            }
            /* the plain run after configuration c (before c + 1) */
            pt_gen_set_draft(g, 0, err, sizeof err);
            if (run(g, e, prompt, np, n_gen, &got, &plain_runs[rep][c])) return 1;
            differs[0] |= got.n != base.n || memcmp(got.v, base.v, sizeof(int32_t) * (size_t)got.n);
        }
        res[0][rep] = plain_runs[rep][NCFG - 1];
        ratio[0][rep] = 1.0;
        for (int c = 1; c < NCFG; c++)
            ratio[c][rep] = res[c][rep].tok_s /
                            (0.5 * (plain_runs[rep][c - 1].tok_s + plain_runs[rep][c].tok_s));
    }
    printf("%-34s %9s %8s %14s %9s %8s   (medians of %d rounds; x: against the plain runs "
           "beside each)\n",
           "", "tok/s", "x", "MB read/token", "accepted", "tok/fwd", REPS);
    result all_plain[REPS * NCFG];
    for (int rep = 0; rep < REPS; rep++)
        for (int c = 0; c < NCFG; c++)
            all_plain[rep * NCFG + c] = plain_runs[rep][c];
    const double plain = median_tok_s(all_plain, REPS * NCFG);
    for (int c = 0; c < NCFG; c++) {
        const double t = c ? median_tok_s(res[c], REPS) : plain;
        const double x = median(ratio[c], REPS);
        const result *m = &res[c][REPS - 1];
        char acc[16] = "-";
        if (c) snprintf(acc, sizeof acc, "%.1f%%", 100 * m->acc);
        printf("%-34s %9.2f %8.2f %14.2f %9s %8.2f%s\n", names[c], t, x, m->bytes_per_tok / 1e6,
               acc, c ? m->tpf : 1.0, differs[c] ? "  OUTPUT DIFFERS" : "");
    }
    r0.tok_s = plain;
    pt_gen_set_draft(g, 3, err, sizeof err);
    gen_set_draft_adaptive(g, 0);
    if (run(g, e, prompt, np, n_gen, &got, &r)) return 1;
    printf("%-34s %9.2f %8.2f %14.2f %8.1f%% %8.2f\n", "MTP head, draft 3 fixed, greedy", r.tok_s,
           r.tok_s / r0.tok_s, r.bytes_per_tok / 1e6, 100 * r.acc, r.tpf);
    smp.temp = 0.7f;
    smp.seed = 7;
    pt_gen_set_sampling(g, &smp, err, sizeof err);
    if (run(g, e, prompt, np, n_gen, &got, &r)) return 1;
    printf("%-34s %9.2f %8.2f %14.2f %8.1f%% %8.2f\n", "MTP head, draft 3 fixed, temp 0.7", r.tok_s,
           r.tok_s / r0.tok_s, r.bytes_per_tok / 1e6, 100 * r.acc, r.tpf);
    pt_gen_free(g);
    pt_session_free(s);
    pt_engine_close(e);
    return 0;
}
