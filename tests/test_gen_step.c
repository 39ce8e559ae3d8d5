/* test_gen_step.c — several sessions generated at once (pt_gen_start + pt_gen_step) give what
 * each gives alone (pt_gen_run).
 *
 * On the demo model (glm-dsa with an MTP head: one generation drafts adaptively, another on
 * every token, so verify passes run beside plain steps) and on a Gemma 4 and a Qwen3-MoE fixture
 * (GQA, no head), three sessions with prompts of different lengths, greedy and sampled chains
 * (temperature, top-k, top-p, penalties, a logit bias), a stop string and different length limits,
 * so they end at different steps, are stepped together; then each runs alone on a fresh session.
 * Every generation's ids, text (emitted and in the result), end reason, token count and what its
 * session holds afterwards must be the same, and the step's count of running generations
 * must follow them.
 *
 * The contract's edges: a run started twice is refused; a generation listed twice in one step
 * (one session stepped twice) ends with PT_GEN_ERROR and a message while the others go on;
 * a step over generations that are not running returns 0 and changes nothing; clearing a
 * generation ends its run as interrupted. */
#include <stdlib.h>
#include <string.h>

#include "engine/gen.h"
#include "petrel.h"
#include "test.h"

#define DEMO_MODEL "models/petrel-demo-glm.gguf"
#define N_GENS 3
#define MAX_IDS 256

typedef struct capture {
    int32_t ids[MAX_IDS];
    int n_ids;
    pt_buf emitted;
} capture;

static void on_lp(void *ud, const pt_logprob *s, const pt_logprob *top, int n_top) {
    (void)top, (void)n_top;
    capture *c = ud;
    if (c->n_ids < MAX_IDS) c->ids[c->n_ids++] = s->id;
}

static int on_emit(void *ud, const char *s, size_t n) {
    capture *c = ud;
    return pt_buf_append(&c->emitted, s, n);
}

/* What one generation did, kept to compare. */
typedef struct outcome {
    capture cap;
    pt_gen_result r;
    int32_t held[1024];
    int n_held;
} outcome;

static void outcome_free(outcome *o) {
    pt_buf_free(&o->cap.emitted);
    pt_buf_free(&o->r.text);
}

/* The three generations' settings: prompt length, sampling, limit, stop strings, drafting. */
typedef struct gen_case {
    int n_prompt;
    pt_sampling sp;
    int max_tokens;
    const char *stop;
    int draft; /* drafting with the MTP head (where the model has one): 0 off, > 0 that many
                  drafts, adaptive; < 0: -draft drafts on every token, never backing off */
} gen_case;

static const pt_logit_bias BIAS[] = {{3, -100.0f}, {5, 2.5f}};

static void cases(gen_case c[N_GENS], const pt_engine *e) {
    memset(c, 0, sizeof(gen_case) * N_GENS);
    for (int i = 0; i < N_GENS; i++)
        pt_engine_sampling(e, &c[i].sp);
    c[0] = (gen_case){.n_prompt = 9, .sp = c[0].sp, .max_tokens = 40, .draft = 3};
    c[0].sp.temp = 0;
    c[1] = (gen_case){.n_prompt = 23, .sp = c[1].sp, .max_tokens = 25, .stop = "e t"};
    c[1].sp.temp = 0.9f, c[1].sp.top_k = 40, c[1].sp.top_p = 0.9f, c[1].sp.seed = 11;
    c[1].sp.logit_bias = BIAS, c[1].sp.n_logit_bias = 2;
    c[2] = (gen_case){.n_prompt = 16, .sp = c[2].sp, .max_tokens = 33, .draft = -2};
    c[2].sp.temp = 0.7f, c[2].sp.repeat_penalty = 1.3f, c[2].sp.presence_penalty = 0.4f;
    c[2].sp.seed = 5;
}

/* A prompt of n ids inside the vocabulary, different for each generation. */
static void prompt_of(int which, int n, int n_vocab, int32_t *out) {
    uint32_t x = 2654435761u * (uint32_t)(which + 1);
    for (int i = 0; i < n; i++) {
        x = x * 1103515245u + 12345u;
        out[i] = 3 + (int32_t)((x >> 8) % (uint32_t)(n_vocab - 3));
    }
}

/* Open a session and its generation for case c, prefill its prompt and start it. NULL on a
 * failure (reported). */
static pt_gen *start(pt_engine *e, int which, const gen_case *c, const pt_gen_opts *o, outcome *out,
                     pt_session **sess) {
    char err[512];
    int32_t prompt[64];
    const int nv =
        pt_vocab_size(e) < pt_engine_n_vocab(e) ? pt_vocab_size(e) : pt_engine_n_vocab(e);
    prompt_of(which, c->n_prompt, nv, prompt);
    pt_session_params sp = {.n_ctx = 512};
    *sess = pt_session_new(e, &sp, err, sizeof err);
    pt_gen *g = *sess ? pt_gen_new(*sess, &c->sp, err, sizeof err) : NULL;
    CHECKF(g, "%s", err);
    if (!g) return NULL;
    if (c->draft && pt_engine_has_mtp(e)) {
        CHECK(pt_gen_set_draft(g, abs(c->draft), err, sizeof err) == abs(c->draft));
        if (c->draft < 0) gen_set_draft_adaptive(g, 0);
    }
    CHECKF(pt_gen_prefill(g, prompt, c->n_prompt, NULL, err, sizeof err) == 0, "%s", err);
    CHECKF(pt_gen_start(g, o, on_emit, &out->cap, NULL, &out->r, err, sizeof err) == 0, "%s", err);
    return g;
}

static void keep_held(const pt_session *s, outcome *o) {
    o->n_held = pt_session_n_past(s);
    if (o->n_held > 1024) o->n_held = 1024;
    memcpy(o->held, pt_session_tokens(s), sizeof(int32_t) * (size_t)o->n_held);
}

static void same(const char *model, int i, const outcome *a, const outcome *b) {
    CHECKF(a->cap.n_ids == b->cap.n_ids &&
               !memcmp(a->cap.ids, b->cap.ids, sizeof(int32_t) * (size_t)a->cap.n_ids),
           "%s gen %d: ids differ stepped together (%d) and alone (%d)", model, i, a->cap.n_ids,
           b->cap.n_ids);
    CHECKF(a->r.reason == b->r.reason && a->r.n_tokens == b->r.n_tokens,
           "%s gen %d: reason %d/%d, tokens %d/%d", model, i, a->r.reason, b->r.reason,
           a->r.n_tokens, b->r.n_tokens);
    CHECKF(a->r.text.n == b->r.text.n && !memcmp(a->r.text.v, b->r.text.v, a->r.text.n),
           "%s gen %d: texts differ", model, i);
    CHECKF(a->cap.emitted.n == b->cap.emitted.n &&
               (!a->cap.emitted.n || !memcmp(a->cap.emitted.v, b->cap.emitted.v, a->cap.emitted.n)),
           "%s gen %d: emitted texts differ", model, i);
    CHECKF(a->cap.emitted.n == a->r.text.n, "%s gen %d: emitted %zu of %zu bytes", model, i,
           a->cap.emitted.n, a->r.text.n);
    CHECKF(a->n_held == b->n_held && !memcmp(a->held, b->held, sizeof(int32_t) * (size_t)a->n_held),
           "%s gen %d: the sessions hold %d / %d tokens", model, i, a->n_held, b->n_held);
}

/* The model opened (2 threads, the case's usage folder); NULL reported. */
static pt_engine *open_model(const char *model) {
    char err[512];
    pt_engine_params ep = {.model_path = model, .n_threads = 2, .usage_dir = t_usage_dir()};
    pt_engine *e = pt_engine_open(&ep, err, sizeof err);
    CHECKF(e, "%s", err);
    return e;
}

static void together_and_alone(const char *model) {
    char err[512];
    pt_engine *e = open_model(model);
    if (!e) return;
    gen_case c[N_GENS];
    cases(c, e);
    pt_gen_opts o[N_GENS];
    const char *stops[N_GENS][1];
    for (int i = 0; i < N_GENS; i++) {
        stops[i][0] = c[i].stop;
        o[i] = (pt_gen_opts){.max_tokens = c[i].max_tokens,
                             .stops = stops[i],
                             .n_stops = c[i].stop ? 1 : 0,
                             .ignore_eog = 1,
                             .n_top_logprobs = 2};
    }
    static outcome both[N_GENS], alone[N_GENS];
    memset(both, 0, sizeof both), memset(alone, 0, sizeof alone);
    pt_session *s[N_GENS] = {0};
    pt_gen *g[N_GENS] = {0};
    int ok = 1;
    for (int i = 0; i < N_GENS; i++) {
        o[i].on_logprob = on_lp, o[i].on_logprob_ud = &both[i].cap;
        ok &= (g[i] = start(e, i, &c[i], &o[i], &both[i], &s[i])) != NULL;
    }
    if (ok) {
        CHECK(pt_gen_start(g[0], &o[0], NULL, NULL, NULL, &both[0].r, err, sizeof err) == -1);
        int steps = 0, running, last = N_GENS;
        while ((running = pt_gen_step(g, N_GENS)) > 0 && steps < 1000) {
            CHECKF(running <= last, "%s: %d running after %d", model, running, last);
            int n = 0;
            for (int i = 0; i < N_GENS; i++)
                n += pt_gen_running(g[i]);
            CHECKF(n == running, "%s: step says %d running, the generations %d", model, running, n);
            last = running, steps++;
        }
        CHECK(pt_gen_step(g, N_GENS) == 0); /* nothing runs: nothing changes */
        for (int i = 0; i < N_GENS; i++) {
            CHECKF(both[i].r.reason != PT_GEN_ERROR, "%s gen %d: %s", model, i, pt_gen_error(g[i]));
            keep_held(s[i], &both[i]);
            pt_draft_stats ds;
            pt_gen_draft_stats(g[i], &ds);
            if (c[i].draft < 0 && pt_engine_has_mtp(e))
                CHECKF(ds.verify > 0 && ds.accepted > 0,
                       "%s gen %d: %llu verify passes, %llu drafts taken", model, i,
                       (unsigned long long)ds.verify, (unsigned long long)ds.accepted);
        }
    }
    for (int i = 0; i < N_GENS; i++) {
        pt_gen_free(g[i]), pt_session_free(s[i]);
        g[i] = NULL, s[i] = NULL;
    }
    for (int i = 0; ok && i < N_GENS; i++) {
        o[i].on_logprob_ud = &alone[i].cap;
        g[i] = start(e, i, &c[i], &o[i], &alone[i], &s[i]);
        if (!g[i]) break;
        while (pt_gen_step(&g[i], 1))
            ;
        keep_held(s[i], &alone[i]);
        same(model, i, &both[i], &alone[i]);
        pt_gen_free(g[i]), pt_session_free(s[i]);
    }
    /* the generations really differ, and the limits and stop string were reached */
    if (ok) {
        CHECKF(memcmp(both[0].cap.ids, both[2].cap.ids, sizeof(int32_t) * 8),
               "%s: two generations gave the same ids", model);
        CHECK(both[0].r.reason == PT_GEN_LENGTH && both[0].r.n_tokens == c[0].max_tokens);
        CHECK(both[2].r.reason == PT_GEN_LENGTH && both[2].r.n_tokens == c[2].max_tokens);
    }
    for (int i = 0; i < N_GENS; i++)
        outcome_free(&both[i]), outcome_free(&alone[i]);
    pt_engine_close(e);
}

static void gen_step_same_as_alone(void) {
    together_and_alone(DEMO_MODEL);
    const char *gemma = t_need("gemma4-q4_k_m.gguf");
    if (gemma) together_and_alone(gemma);
    const char *qwen = t_need("qwen3moe-q4_k_m.gguf");
    if (qwen) together_and_alone(qwen);
}

/* One session stepped twice in one call: that generation fails, the other goes on. */
static void gen_step_refusals(void) {
    const char *model = t_need("qwen3moe-q4_k_m.gguf");
    if (!model) return;
    char err[512];
    pt_engine *e = open_model(model);
    if (!e) return;
    gen_case c[N_GENS];
    cases(c, e);
    pt_gen_opts o = {.max_tokens = 8, .ignore_eog = 1};
    static outcome out[2];
    memset(out, 0, sizeof out);
    pt_session *s[2] = {0};
    pt_gen *g[2] = {0};
    for (int i = 0; i < 2; i++)
        g[i] = start(e, i, &c[0], &o, &out[i], &s[i]);
    if (g[0] && g[1]) {
        pt_gen *twice[3] = {g[0], g[1], g[0]};
        CHECK(pt_gen_step(twice, 3) == 1);
        CHECK(!pt_gen_running(g[0]) && out[0].r.reason == PT_GEN_ERROR);
        CHECKF(strstr(pt_gen_error(g[0]), "one session"), "%s", pt_gen_error(g[0]));
        CHECK(pt_gen_running(g[1]));
        while (pt_gen_step(g, 2))
            ;
        CHECK(out[1].r.reason == PT_GEN_LENGTH && out[1].r.n_tokens == 8);
        CHECK(!strcmp(pt_gen_error(g[1]), ""));
        /* what changes a generation ends its run first, as interrupted */
        char e2[512];
        int32_t again[4] = {5, 6, 7, 8};
        CHECK(pt_gen_prefill(g[0], again, 4, NULL, e2, sizeof e2) >= 0);
        CHECK(pt_gen_start(g[0], &o, NULL, NULL, NULL, &out[0].r, e2, sizeof e2) == 0);
        CHECK(pt_gen_step(&g[0], 1) == 1 && out[0].r.n_tokens == 1);
        pt_gen_clear(g[0]);
        CHECK(!pt_gen_running(g[0]) && out[0].r.reason == PT_GEN_INTERRUPT);
        CHECK(pt_gen_step(&g[0], 1) == 0 && out[0].r.n_tokens == 1);
        /* a run of a generation whose logits were used: nothing was prefilled */
        pt_gen_result r = {0};
        CHECK(pt_gen_run(g[1], &o, NULL, NULL, NULL, &r, err, sizeof err) == -1);
        CHECKF(strstr(err, "nothing was prefilled"), "%s", err);
        pt_buf_free(&r.text);
    }
    for (int i = 0; i < 2; i++) {
        pt_gen_free(g[i]), pt_session_free(s[i]);
        outcome_free(&out[i]);
    }
    pt_engine_close(e);
}

T_SUITE(gen_step) {
    T_ADD_TIMEOUT(gen_step_same_as_alone, 300);
    T_ADD(gen_step_refusals);
}
