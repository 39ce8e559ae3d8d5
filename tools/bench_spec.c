/* bench_spec.c — drafting with the MTP head, measured side by side in one run (`make bench`,
 * bench/spec.sh). For a model and an expert-cache setting:
 *
 *   ceiling   a greedy run without drafting is recorded, then replayed as the draft source
 *             (pt_gen_set_draft_replay: 100% acceptance) at draft lengths 1..4: decode tok/s
 *             and routed-expert bytes read per generated token against no drafting;
 *   failure   the model's own MTP head with the default settings (draft 3, adaptive) against
 *             --draft 0: the cost when drafts are rejected (a random head);
 *   real      the MTP head, never backing off: acceptance and tokens per forward at greedy and
 *             at temperature 0.7.
 *
 *   bench_spec MODEL [expert_slots (0: automatic)] [n_gen] [threads]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
    printf("%-34s %9s %8s %14s %9s %8s\n", "", "tok/s", "x", "MB read/token", "accepted",
           "tok/fwd");
    printf("%-34s %9.2f %8.2f %14.2f %9s %8.2f\n", "no drafting", r0.tok_s, 1.0,
           r0.bytes_per_tok / 1e6, "-", 1.0);
    for (int k = 1; k <= 4; k++) {
        pt_gen_set_draft(g, k, err, sizeof err);
        pt_gen_set_draft_replay(g, base.v, base.n);
        if (run(g, e, prompt, np, n_gen, &got, &r)) return 1;
        char name[64];
        snprintf(name, sizeof name, "ceiling (replay), draft %d", k);
        printf("%-34s %9.2f %8.2f %14.2f %8.1f%% %8.2f%s\n", name, r.tok_s, r.tok_s / r0.tok_s,
               r.bytes_per_tok / 1e6, 100 * r.acc, r.tpf,
               got.n == base.n && !memcmp(got.v, base.v, sizeof(int32_t) * (size_t)got.n)
                   ? ""
                   : "  OUTPUT DIFFERS");
        pt_gen_set_draft_replay(g, NULL, 0);
    }
    pt_gen_set_draft(g, 3, err, sizeof err);
    if (run(g, e, prompt, np, n_gen, &got, &r)) return 1;
    printf("%-34s %9.2f %8.2f %14.2f %8.1f%% %8.2f\n", "MTP head, default (3, adaptive)", r.tok_s,
           r.tok_s / r0.tok_s, r.bytes_per_tok / 1e6, 100 * r.acc, r.tpf);
    pt_gen_set_draft_adaptive(g, 0);
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
