/* test_spec.c — drafting with the MTP head (src/engine/spec.c) is lossless.
 *
 * Greedy: on every fixture that has an MTP head (glm-dsa-rq2k, -iq2, -iq3; the deepseek2
 * fixtures have none) and on the demo model, resident (draft lengths 1, 3, 4) and with the
 * routed experts streamed through 2 cache slots per layer (length 3), 256 generated tokens
 * are the same ids with drafting (never backing off) as without, the session holds the
 * same tokens afterwards (no rejected draft left in the cache), and drafts were really made
 * and some accepted.
 *
 * Sampling: with temperature, top-k, top-p, min-p, penalties and a logit bias, the same seed
 * gives the same ids with and without drafting (the drafts are one-hot, so speculative
 * sampling reduces to "draw from the final distribution, accept iff it is the draft", which
 * spends the same random numbers as plain decoding).
 *
 * Adaptive (spec_adaptive_probes, the default mode): the same ids again; a verify pass runs
 * only after a probe hit: the demo model's head hits and drafts, the random head of
 * glm-dsa-rq2k never does and no verify pass runs.
 *
 * Statistically (spec_chi_square): on a vocabulary cut to 6 tokens by logit biases, the
 * distribution of the 2nd..4th sampled tokens over 3000 seeds with drafting against 3000
 * other seeds without, two-sample chi-square at a false-failure rate of 1e-6 per token
 * position. The same harness fed a deliberately biased speculative sampler (a draft accepted
 * with probability p(d), and on rejection a fresh draw from p instead of from p without d)
 * must fail it. */
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "engine/gen.h"
#include "petrel.h"
#include "test.h"

#define DEMO_MODEL "models/petrel-demo-glm.gguf"
#define N_GEN 256

typedef struct ids_out {
    int32_t v[1024];
    int n;
} ids_out;

static void on_lp(void *ud, const pt_logprob *s, const pt_logprob *top, int n_top) {
    (void)top, (void)n_top;
    ids_out *o = ud;
    if (o->n < 1024) o->v[o->n++] = s->id;
}

static int prompt_tokens(const char *ref_name, int32_t *out, int cap) {
    json_t *ref = json_load_file(t_fixture(ref_name), 0, NULL);
    if (!ref) return 0;
    json_t *ids = json_object_get(json_array_get(json_object_get(ref, "prompts"), 0), "tokens");
    int n = 0;
    for (size_t i = 0; i < json_array_size(ids) && n < cap; i++)
        out[n++] = (int32_t)json_integer_value(json_array_get(ids, i));
    json_decref(ref);
    return n;
}

/* A case's prompt: the first prompt of reference ref_name, or (ref_name NULL) a line of
 * English tokenized by e's model. Returns the number of ids (at most cap). */
static int case_prompt(pt_engine *e, const char *ref_name, int32_t *out, int cap) {
    if (ref_name) return prompt_tokens(ref_name, out, cap);
    char err[256];
    int np = 0;
    pt_ids ids = {0};
    const char *text = "In the beginning God created the heaven and the earth.";
    if (!pt_tokenize(e, text, strlen(text), PT_TOKENIZE_ADD_SPECIAL, &ids, err, sizeof err))
        for (size_t i = 0; i < ids.n && np < cap; i++)
            out[np++] = ids.v[i];
    pt_ids_free(&ids);
    return np;
}

/* Prefill + run n_gen tokens on g; ids into out. 0 or -1. */
static int run_gen(pt_gen *g, const int32_t *prompt, int np, int n_gen, ids_out *out) {
    char err[512];
    out->n = 0;
    pt_gen_opts o = {
        .max_tokens = n_gen, .ignore_eog = 1, .on_logprob = on_lp, .on_logprob_ud = out};
    pt_gen_result r = {0};
    int rc = pt_gen_prefill(g, prompt, np, NULL, err, sizeof err) < 0 ||
             pt_gen_run(g, &o, NULL, NULL, NULL, &r, err, sizeof err);
    if (rc) t_fail_at(__FILE__, __LINE__, "%s", err);
    pt_buf_free(&r.text);
    return rc ? -1 : 0;
}

typedef struct model_case {
    const char *path, *ref;
} model_case;

static const model_case MODELS[] = {
    {"glm-dsa-rq2k.gguf", "glm-dsa-rq2k.ref.json"},
    {"glm-dsa-iq2.gguf", "glm-dsa-iq2.ref.json"},
    {"glm-dsa-iq3.gguf", "glm-dsa-iq3.ref.json"},
    {"deepseek2-q8_0.gguf", "deepseek2-q8_0.ref.json"},
    {"deepseek2-rq2k.gguf", "deepseek2-rq2k.ref.json"},
    {DEMO_MODEL, NULL},
};

static pt_engine *open_model(const char *path, int slots, char *err, size_t len) {
    pt_engine_params ep = {
        .model_path = path, .n_threads = 2, .usage_dir = t_usage_dir(), .expert_slots = slots};
    return pt_engine_open(&ep, err, len);
}

/* One model, resident or streamed: drafting at lengths 1, 3, 4 against no drafting. */
static void lossless_on(const model_case *mc, int slots, const pt_sampling *smp, int *n_mtp) {
    char err[512];
    const char *path = mc->ref ? t_fixture(mc->path) : mc->path;
    pt_engine *e = open_model(path, slots, err, sizeof err);
    CHECKF(e, "%s", err);
    if (!e) return;
    if (!pt_engine_has_mtp(e)) {
        pt_engine_close(e);
        return;
    }
    (*n_mtp)++;
    int32_t prompt[256];
    const int np = case_prompt(e, mc->ref, prompt, 64);
    CHECKF(np > 0, "%s: no prompt", path);
    pt_session_params sp = {.n_ctx = np + N_GEN + 8, .n_batch = 16};
    pt_session *s = pt_session_new(e, &sp, err, sizeof err);
    pt_gen *g = s ? pt_gen_new(s, smp, err, sizeof err) : NULL;
    CHECKF(g, "%s", err);
    static ids_out base, got;
    if (g && np > 0 && !run_gen(g, prompt, np, N_GEN, &base)) {
        CHECK(base.n == N_GEN);
        const int np_base = pt_session_n_past(s);
        /* resident: lengths 1, 3, 4; streamed: 3 (the suite's time) */
        const int lens[] = {3, 1, 4};
        for (int li = 0; li < (slots ? 1 : 3); li++) {
            CHECK(pt_gen_set_draft(g, lens[li], err, sizeof err) == lens[li]);
            gen_set_draft_adaptive(g, 0);
            pt_gen_clear(g);
            CHECK(pt_gen_set_sampling(g, smp, err, sizeof err) == 0); /* the seed's stream anew */
            if (run_gen(g, prompt, np, N_GEN, &got)) break;
            pt_draft_stats ds;
            pt_gen_draft_stats(g, &ds);
            int same = got.n == base.n && !memcmp(got.v, base.v, sizeof(int32_t) * (size_t)got.n);
            int at = 0;
            while (at < got.n && at < base.n && got.v[at] == base.v[at])
                at++;
            CHECKF(same, "%s slots %d temp %g draft %d: token %d differs (%d vs %d)", path, slots,
                   smp->temp, lens[li], at, at < got.n ? got.v[at] : -1,
                   at < base.n ? base.v[at] : -1);
            CHECKF(pt_session_n_past(s) == np_base,
                   "%s draft %d: the session holds %d positions, %d without drafting", path,
                   lens[li], pt_session_n_past(s), np_base);
            CHECKF(ds.verify > 0 && ds.drafted >= ds.verify && ds.tokens == (uint64_t)N_GEN - 1,
                   "%s draft %d: %llu verify passes, %llu drafted, %llu tokens", path, lens[li],
                   (unsigned long long)ds.verify, (unsigned long long)ds.drafted,
                   (unsigned long long)ds.tokens);
            if (!strcmp(path, DEMO_MODEL) && smp->temp <= 0)
                CHECKF(ds.accepted > 0, "%s: the demo model's MTP head never drafted right", path);
            if (getenv("PETREL_TEST_VERBOSE"))
                fprintf(stderr, "%s slots %d temp %g draft %d: %.1f%% accepted, %.2f tok/fwd\n",
                        path, slots, smp->temp, lens[li],
                        100.0 * (double)ds.accepted / (double)(ds.drafted ? ds.drafted : 1),
                        (double)ds.tokens / (double)(ds.verify + ds.plain));
        }
        /* a second turn reusing the drafted run's cache continues as a fresh session would */
        ids_out again;
        int32_t *turn2 = malloc(sizeof(int32_t) * (size_t)(np + 40));
        memcpy(turn2, prompt, sizeof(int32_t) * (size_t)np);
        memcpy(turn2 + np, base.v, sizeof(int32_t) * 40);
        pt_session_params sp2 = {.n_ctx = np + 40 + 40, .n_batch = 16};
        pt_session *s2 = pt_session_new(e, &sp2, err, sizeof err);
        pt_gen *g2 = s2 ? pt_gen_new(s2, smp, err, sizeof err) : NULL;
        if (g2 && !run_gen(g2, turn2, np + 40, 32, &base)) {
            CHECK(pt_gen_set_sampling(g, smp, err, sizeof err) == 0);
            const int cached = pt_gen_prefill(g, turn2, np + 40, NULL, err, sizeof err);
            CHECKF(cached == np + 40 - 1 || cached == np + 39, "%s: %d reused", path, cached);
            if (!run_gen(g, turn2, np + 40, 32, &again))
                CHECKF(again.n == base.n &&
                           !memcmp(again.v, base.v, sizeof(int32_t) * (size_t)again.n),
                       "%s: the turn after a drafted run differs from a fresh session's", path);
        }
        pt_gen_free(g2);
        pt_session_free(s2);
        free(turn2);
    }
    pt_gen_free(g);
    pt_session_free(s);
    pt_engine_close(e);
}

static void spec_greedy_lossless(void) {
    pt_sampling greedy;
    pt_sampling_default(&greedy);
    greedy.temp = 0;
    int n_mtp = 0;
    for (size_t i = 0; i < sizeof MODELS / sizeof MODELS[0]; i++)
        for (int slots = 0; slots <= 2; slots += 2)
            lossless_on(&MODELS[i], slots, &greedy, &n_mtp);
    CHECKF(n_mtp >= 4, "only %d model runs had an MTP head", n_mtp);
}

static void spec_sampling_same_per_seed(void) {
    static const pt_logit_bias bias[] = {{5, 2.0f}, {7, -100.0f}, {11, -1.5f}};
    pt_sampling smp;
    pt_sampling_default(&smp);
    smp.temp = 0.8f;
    smp.top_k = 40;
    smp.top_p = 0.9f;
    smp.min_p = 0.02f;
    smp.repeat_penalty = 1.1f;
    smp.frequency_penalty = 0.1f;
    smp.presence_penalty = 0.2f;
    smp.logit_bias = bias;
    smp.n_logit_bias = 3;
    int n_mtp = 0;
    for (uint64_t seed = 1; seed <= 2; seed++) {
        smp.seed = seed;
        lossless_on(&MODELS[0], 0, &smp, &n_mtp);
        lossless_on(&MODELS[sizeof MODELS / sizeof MODELS[0] - 1], 2, &smp, &n_mtp);
    }
    CHECKF(n_mtp == 4, "%d runs had an MTP head", n_mtp);
}

/* Adaptive drafting (the default) gives the same ids, and risks a verify pass only on a head
 * that has just drafted right (a probe hit): on the demo model, whose head drafts right about
 * half the time, probes hit and drafting starts; on glm-dsa-rq2k, whose head is random, the
 * probes miss and no verify pass runs, so a useless head costs its probes' MTP rows only. */
static void adaptive_on(const char *path, int expect_hits) {
    char err[512];
    pt_engine *e = open_model(path, 0, err, sizeof err);
    CHECKF(e, "%s", err);
    if (!e) return;
    int32_t prompt[64];
    const int np = case_prompt(e, expect_hits ? NULL : "glm-dsa-rq2k.ref.json", prompt, 64);
    pt_sampling greedy;
    pt_sampling_default(&greedy);
    greedy.temp = 0;
    pt_session_params sp = {.n_ctx = np + N_GEN + 8, .n_batch = 16};
    pt_session *s = pt_session_new(e, &sp, err, sizeof err);
    pt_gen *g = s ? pt_gen_new(s, &greedy, err, sizeof err) : NULL;
    CHECKF(g && np > 0, "%s: %s", path, err);
    static ids_out base, got;
    if (g && np > 0 && !run_gen(g, prompt, np, N_GEN, &base)) {
        CHECK(pt_gen_set_draft(g, 3, err, sizeof err) == 3); /* adaptive: the default */
        pt_gen_clear(g);
        if (!run_gen(g, prompt, np, N_GEN, &got)) {
            pt_draft_stats ds;
            pt_gen_draft_stats(g, &ds);
            CHECKF(got.n == base.n && !memcmp(got.v, base.v, sizeof(int32_t) * (size_t)got.n),
                   "%s: adaptive drafting changed the ids", path);
            CHECKF(ds.probes >= 2 && ds.probe_hits <= ds.probes, "%s: %llu probes, %llu hits", path,
                   (unsigned long long)ds.probes, (unsigned long long)ds.probe_hits);
            CHECKF(ds.verify == 0 || ds.probe_hits > 0,
                   "%s: %llu verify passes without a probe hit", path,
                   (unsigned long long)ds.verify);
            CHECKF(ds.plain + ds.accepted + ds.verify == ds.tokens,
                   "%s: %llu plain + %llu accepted + %llu verified != %llu tokens", path,
                   (unsigned long long)ds.plain, (unsigned long long)ds.accepted,
                   (unsigned long long)ds.verify, (unsigned long long)ds.tokens);
            if (expect_hits)
                CHECKF(ds.probe_hits > 0 && ds.verify > 0,
                       "%s: %llu of %llu probes hit, %llu verify passes", path,
                       (unsigned long long)ds.probe_hits, (unsigned long long)ds.probes,
                       (unsigned long long)ds.verify);
            else
                CHECKF(ds.probe_hits == 0 && ds.verify == 0 && ds.backoffs >= 2,
                       "%s (a random head): %llu probe hits, %llu verify passes, %llu back-offs",
                       path, (unsigned long long)ds.probe_hits, (unsigned long long)ds.verify,
                       (unsigned long long)ds.backoffs);
            if (getenv("PETREL_TEST_VERBOSE"))
                fprintf(stderr,
                        "%s adaptive: %llu probes (%llu hits), %llu verify, %llu plain, %llu "
                        "back-offs, %llu of %llu drafts accepted\n",
                        path, (unsigned long long)ds.probes, (unsigned long long)ds.probe_hits,
                        (unsigned long long)ds.verify, (unsigned long long)ds.plain,
                        (unsigned long long)ds.backoffs, (unsigned long long)ds.accepted,
                        (unsigned long long)ds.drafted);
        }
    }
    pt_gen_free(g);
    pt_session_free(s);
    pt_engine_close(e);
}

static void spec_adaptive_probes(void) {
    adaptive_on(DEMO_MODEL, 1);
    const char *rq = t_need("glm-dsa-rq2k.gguf");
    char path[1024];
    if (rq && snprintf(path, sizeof path, "%s", rq) < (int)sizeof path) adaptive_on(path, 0);
}

/* ===== The statistical test ===== */

#define CHI_SEEDS 3000
#define CHI_K 6 /* tokens left in the vocabulary */
#define CHI_POS 3

/* Upper 1e-6 quantile of chi-square with df = CHI_K - 1 = 5 (from the regularised gamma
 * function: P(X > 35.89) = 1.0e-6 for 5 degrees of freedom). */
#define CHI_CRIT_DF5 35.89

/* Two-sample chi-square statistic over categories with any count. */
static double chi2_two(const double *a, const double *b, int k, int *df) {
    double na = 0, nb = 0, x = 0;
    for (int i = 0; i < k; i++)
        na += a[i], nb += b[i];
    int used = 0;
    for (int i = 0; i < k; i++) {
        const double t = a[i] + b[i];
        if (t <= 0) continue;
        used++;
        const double ea = t * na / (na + nb), eb = t * nb / (na + nb);
        x += (a[i] - ea) * (a[i] - ea) / ea + (b[i] - eb) * (b[i] - eb) / eb;
    }
    *df = used - 1;
    return x;
}

/* A wrong speculative sampler, outside the library: from the model's logits of each row,
 * restricted to the allowed tokens at temperature 1, accept the MTP-free draft "the most
 * likely token" with probability p(d), else draw again from p (not from p without d). */
static int biased_next(const float *logits, const int32_t *allowed, int k, uint64_t *rng) {
    double p[CHI_K], mx = -1e30, sum = 0;
    int best = 0;
    for (int i = 0; i < k; i++)
        if (logits[allowed[i]] > mx) mx = logits[allowed[i]], best = i;
    for (int i = 0; i < k; i++)
        sum += p[i] = exp(logits[allowed[i]] - mx);
    for (int i = 0; i < k; i++)
        p[i] /= sum;
    *rng = *rng * 6364136223846793005ull + 1442695040888963407ull;
    double u = (double)(*rng >> 11) * 0x1.0p-53;
    if (u < p[best]) return allowed[best];
    *rng = *rng * 6364136223846793005ull + 1442695040888963407ull;
    u = (double)(*rng >> 11) * 0x1.0p-53;
    for (int i = 0; i < k; i++)
        if ((u -= p[i]) < 0) return allowed[i];
    return allowed[k - 1];
}

static void spec_chi_square(void) {
    char err[512];
    pt_engine *e = open_model(DEMO_MODEL, 0, err, sizeof err);
    CHECKF(e, "%s", err);
    if (!e) return;
    const int nv = pt_engine_n_vocab(e);
    /* six allowed tokens, every other banned by a -100 bias */
    const int32_t allowed[CHI_K] = {100, 200, 300, 400, 500, 600};
    pt_logit_bias *bias = malloc(sizeof *bias * (size_t)nv);
    int nb = 0;
    for (int t = 0; t < nv; t++) {
        int ok = 0;
        for (int i = 0; i < CHI_K; i++)
            ok |= allowed[i] == t;
        if (!ok) bias[nb++] = (pt_logit_bias){t, -100.0f};
    }
    pt_sampling smp;
    pt_sampling_default(&smp);
    smp.temp = 1.0f;
    smp.top_p = 1.0f;
    smp.logit_bias = bias;
    smp.n_logit_bias = nb;
    const int32_t prompt[] = {1, 100, 300, 200};
    const int np = 4;
    pt_session_params sp = {.n_ctx = 32, .n_batch = 8};
    pt_session *s = pt_session_new(e, &sp, err, sizeof err);
    pt_gen *g = s ? pt_gen_new(s, &smp, err, sizeof err) : NULL;
    CHECKF(g, "%s", err);
    static double cnt[3][CHI_POS][CHI_K]; /* plain, drafted, biased */
    ids_out out;
    for (int mode = 0; mode < 2 && g; mode++) {
        CHECK(pt_gen_set_draft(g, mode ? 3 : 0, err, sizeof err) == (mode ? 3 : 0));
        if (mode) gen_set_draft_adaptive(g, 0);
        for (int sd = 0; sd < CHI_SEEDS; sd++) {
            smp.seed = (uint64_t)(mode * CHI_SEEDS + sd) * 2654435761u + 17;
            pt_gen_set_sampling(g, &smp, err, sizeof err);
            if (run_gen(g, prompt, np, CHI_POS + 1, &out)) break;
            for (int p = 0; p < CHI_POS; p++)
                for (int i = 0; i < CHI_K; i++)
                    cnt[mode][p][i] += out.v[p + 1] == allowed[i];
        }
    }
    /* the biased sampler, on the model's own logits */
    float *lg = malloc(sizeof(float) * (size_t)nv);
    uint64_t rng = 12345;
    for (int sd = 0; sd < CHI_SEEDS && g; sd++) {
        int32_t seq[8];
        memcpy(seq, prompt, sizeof prompt);
        int n = np;
        pt_session_truncate(s, 0);
        if (pt_session_eval(s, seq, n, lg, 0, NULL, err, sizeof err)) break;
        for (int p = 0; p <= CHI_POS; p++) {
            const int32_t t = biased_next(lg, allowed, CHI_K, &rng);
            if (p > 0)
                for (int i = 0; i < CHI_K; i++)
                    cnt[2][p - 1][i] += t == allowed[i];
            seq[n++] = t;
            if (pt_session_eval(s, &t, 1, lg, 0, NULL, err, sizeof err)) break;
        }
    }
    int biased_fails = 0;
    for (int p = 0; p < CHI_POS; p++) {
        int df = 0, df2 = 0;
        const double x = chi2_two(cnt[0][p], cnt[1][p], CHI_K, &df);
        const double xb = chi2_two(cnt[0][p], cnt[2][p], CHI_K, &df2);
        /* df < 5 only makes the 1e-6 quantile smaller: the df-5 critical value is conservative */
        CHECKF(x < CHI_CRIT_DF5,
               "position %d: chi-square %.2f (df %d) >= %.2f: drafting changed "
               "the distribution",
               p + 1, x, df, CHI_CRIT_DF5);
        biased_fails += xb >= CHI_CRIT_DF5;
        if (getenv("PETREL_TEST_VERBOSE"))
            fprintf(stderr, "position %d: chi2 drafted %.2f, biased %.2f (df %d/%d)\n", p + 1, x,
                    xb, df, df2);
    }
    CHECKF(biased_fails > 0, "the biased sampler passed the chi-square test: it has no power");
    free(lg);
    free(bias);
    pt_gen_free(g);
    pt_session_free(s);
    pt_engine_close(e);
}

static void spec_refusals(void) {
    char err[512];
    pt_engine *e = open_model(t_fixture("qwen3moe-rq2k.gguf"), 0, err, sizeof err);
    CHECKF(e, "%s", err);
    if (!e) return;
    pt_sampling smp;
    pt_sampling_default(&smp);
    pt_session *s = pt_session_new(e, &(pt_session_params){.n_ctx = 64}, err, sizeof err);
    pt_gen *g = s ? pt_gen_new(s, &smp, err, sizeof err) : NULL;
    CHECK(g);
    if (g) {
        CHECK(pt_gen_set_draft(g, 2, err, sizeof err) == -1);
        CHECK_STR_CONTAINS(err, "qwen3moe");
        CHECK(pt_gen_set_draft(g, 0, err, sizeof err) == 0);
    }
    pt_gen_free(g);
    pt_session_free(s);
    pt_engine_close(e);
    e = open_model(DEMO_MODEL, 0, err, sizeof err);
    s = e ? pt_session_new(e, &(pt_session_params){.n_ctx = 8}, err, sizeof err) : NULL;
    g = s ? pt_gen_new(s, &smp, err, sizeof err) : NULL;
    CHECK(g);
    if (g) {
        CHECK(pt_gen_set_draft(g, 100, err, sizeof err) == 6); /* n_ctx - 2 */
        CHECK(pt_gen_draft(g) == 6);
    }
    pt_gen_free(g);
    pt_session_free(s);
    pt_engine_close(e);
}

/* ===== The CLI ===== */

static char cli_out[1 << 16];

static int cli(const char *args) {
    const char *b = getenv("PETREL_BIN");
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "%s %s 2>&1 >/dev/null", b && *b ? b : "build/petrel", args);
    return t_run(cmd, cli_out, sizeof cli_out);
}

/* --draft: the statistics line shows it; a model without an MTP head with --draft N is an
 * error naming the model; too long a draft is clamped with a warning; a bad value exits 2. */
static void spec_cli_flags(void) {
    char args[1024];
    CHECK(cli("generate -p 'In the beginning' -n 24 --greedy -t 2 --draft 2") == 0);
    CHECK_STR_CONTAINS(cli_out, "| draft 2: ");
    CHECK_STR_CONTAINS(cli_out, "tok/forward]");
    CHECK(cli("generate -p 'In the beginning' -n 4 --greedy -t 2 --draft 0") == 0);
    CHECK(!strstr(cli_out, "draft"));
    CHECK(cli("generate -p 'In the beginning' -n 4 --greedy -t 2 --draft 40") == 0);
    CHECK_STR_CONTAINS(cli_out, "warning: --draft 40 clamped to 16");
    CHECK(cli("generate -p 'In the beginning' -n 4 --greedy -t 2 -c 8 --draft 9") == 0);
    CHECK_STR_CONTAINS(cli_out, "clamped to 6");
    CHECK(cli("generate -p x --draft -1") == 2);
    CHECK_STR_CONTAINS(cli_out, "--draft");
    CHECK(cli("generate -p x --draft lots") == 2);
    snprintf(args, sizeof args, "generate -m %s --tokens 1,2,3 -n 2 --draft 2",
             t_fixture("qwen3moe-rq2k.gguf"));
    const int rc = cli(args);
    CHECK(rc == 1);
    CHECK_STR_CONTAINS(cli_out, "qwen3moe-rq2k.gguf");
    CHECK_STR_CONTAINS(cli_out, "no NextN/MTP head");
    /* without --draft, a model without a head simply does not draft */
    snprintf(args, sizeof args, "generate -m %s --tokens 1,2,3 -n 2",
             t_fixture("qwen3moe-rq2k.gguf"));
    CHECK(cli(args) == 0);
}

T_SUITE(spec) {
    T_ADD(spec_cli_flags);
    T_ADD_TIMEOUT(spec_greedy_lossless, 600);
    T_ADD_TIMEOUT(spec_sampling_same_per_seed, 300);
    T_ADD_TIMEOUT(spec_chi_square, 600);
    T_ADD_TIMEOUT(spec_adaptive_probes, 300);
    T_ADD(spec_refusals);
}
