/* test_session.c — the session owns its token history: pt_session_sync makes
 * it hold exactly a token sequence, reusing the longest prefix its cache can
 * serve, and says how many positions it reused.
 *
 * The request pattern that once broke Gemma 4 in `petrel serve` (which calls
 * pt_session_sync through pt_gen_prefill): a long first request, then a second
 * one sharing only a short prefix, so the sliding-window rings no longer hold
 * the keys the prefix's window needs. For every fixture family the second
 * request's logits must be bit-identical to evaluating it in a fresh session,
 * and the reuse count must equal the positions really kept. glm-dsa also
 * checks that its NextN/MTP positions follow the trunk's truncation.
 */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "engine/session.h"
#include "petrel.h"
#include "test.h"

/* Token ids of prompt k of a fixture's ref.json; returns the count (0 on error). */
static int prompt_tokens(const char *ref_name, int k, int32_t *out, int cap) {
    json_t *ref = json_load_file(t_fixture(ref_name), 0, NULL);
    if (!ref) return 0;
    json_t *ids =
        json_object_get(json_array_get(json_object_get(ref, "prompts"), (size_t)k - 1), "tokens");
    int n = 0;
    for (size_t i = 0; i < json_array_size(ids) && n < cap; i++)
        out[n++] = (int32_t)json_integer_value(json_array_get(ids, i));
    json_decref(ref);
    return n;
}

typedef struct fam {
    const char *model, *ref;
    int expect_reuse; /* positions the second request can reuse; -1: the shared prefix */
} fam;

/* Sliding-window layers keep window + batch - 1 positions: after 40 tokens
 * the gemma4 rings (window 16, batch 4) start at position 21, so position 3's
 * window is gone and nothing can be reused. */
static const fam FAMS[] = {
    {"glm-dsa-rq2k.gguf", "glm-dsa-rq2k.ref.json", -1},
    {"deepseek2-q8_0.gguf", "deepseek2-q8_0.ref.json", -1},
    {"gemma4-rq2k.gguf", "gemma4-rq2k.ref.json", 0},
    {"qwen3moe-rq2k.gguf", "qwen3moe-rq2k.ref.json", -1},
};

static pt_engine *open_fixture(const char *model, char *err, size_t len) {
    pt_engine_params ep = {
        .model_path = t_fixture(model), .n_threads = 2, .usage_dir = t_usage_dir()};
    return pt_engine_open(&ep, err, len);
}

static void session_sync_reuses_only_what_it_can(void) {
    for (size_t f = 0; f < sizeof FAMS / sizeof FAMS[0]; f++) {
        const fam *fm = &FAMS[f];
        char err[512];
        int32_t first[256], second[256];
        const int n1 = prompt_tokens(fm->ref, 2, first, 256);
        const int n0 = prompt_tokens(fm->ref, 1, second + 3, 200);
        CHECKF(n1 > 30 && n0 > 0, "%s: prompts not found", fm->ref);
        if (n1 <= 30 || n0 <= 0) continue;
        /* second request: the first 3 tokens of the first, then prompt 1 */
        memcpy(second, first, 3 * sizeof *first);
        const int n2 = n0 + 3, shared = 3;
        pt_engine *e = open_fixture(fm->model, err, sizeof err);
        CHECKF(e, "%s", err);
        if (!e) continue;
        const int nv = pt_engine_n_vocab(e);
        float *a = malloc(sizeof(float) * (size_t)nv), *b = malloc(sizeof(float) * (size_t)nv);
        pt_session_params sp = {.n_ctx = 64, .n_batch = 4};
        pt_session *s = pt_session_new(e, &sp, err, sizeof err);
        pt_session *fresh = pt_session_new(e, &sp, err, sizeof err);
        CHECK(s && fresh);
        if (s && fresh) {
            CHECK(pt_session_sync(s, first, n1, a, NULL, err, sizeof err) == 0);
            CHECK(pt_session_n_past(s) == n1 &&
                  !memcmp(pt_session_tokens(s), first, sizeof(int32_t) * n1));
            const int reused = pt_session_sync(s, second, n2, a, NULL, err, sizeof err);
            const int expect = fm->expect_reuse < 0 ? shared : fm->expect_reuse;
            CHECKF(reused == expect, "%s: reused %d positions, expected %d", fm->model, reused,
                   expect);
            CHECK(pt_session_n_past(s) == n2 &&
                  !memcmp(pt_session_tokens(s), second, sizeof(int32_t) * n2));
            CHECK(pt_session_sync(fresh, second, n2, b, NULL, err, sizeof err) == 0);
            CHECKF(!memcmp(a, b, sizeof(float) * (size_t)nv),
                   "%s: logits after reuse differ from a fresh session", fm->model);
            /* the same sequence again: everything but the last token is reused, and
             * that token is evaluated alone (as a fresh session doing the same) */
            CHECK(pt_session_sync(s, second, n2, a, NULL, err, sizeof err) == n2 - 1);
            CHECK(pt_session_sync(fresh, second, n2 - 1, NULL, NULL, err, sizeof err) == n2 - 1);
            CHECK(pt_session_eval(fresh, second + n2 - 1, 1, b, 0, NULL, err, sizeof err) == 0);
            CHECK(!memcmp(a, b, sizeof(float) * (size_t)nv));
            /* without logits nothing needs evaluating */
            CHECK(pt_session_sync(s, second, n2, NULL, NULL, err, sizeof err) == n2);
        }
        free(a);
        free(b);
        pt_session_free(s);
        pt_session_free(fresh);
        pt_engine_close(e);
    }
}

/* Truncation reports what it kept; a truncation the rings cannot serve keeps nothing. */
static void session_truncate_reports_kept(void) {
    char err[512];
    int32_t toks[256];
    const int n = prompt_tokens("gemma4-rq2k.ref.json", 2, toks, 256);
    pt_engine *e = open_fixture("gemma4-rq2k.gguf", err, sizeof err);
    CHECKF(e, "%s", err);
    if (!e || n < 30) return;
    pt_session_params sp = {.n_ctx = 64, .n_batch = 4};
    pt_session *s = pt_session_new(e, &sp, err, sizeof err);
    CHECK(pt_session_eval(s, toks, n, NULL, 0, NULL, err, sizeof err) == 0);
    CHECK(pt_session_truncate(s, n - 2) == n - 2);
    CHECK(pt_session_truncate(s, 10) == 0);
    CHECK(pt_session_n_past(s) == 0);
    pt_session_free(s);
    pt_engine_close(e);
}

/* A sync that fails part-way (a token outside the vocabulary) changes nothing;
 * an empty or too long sequence is refused with a message. */
static void session_sync_refusals(void) {
    char err[512];
    pt_engine *e = open_fixture("qwen3moe-rq2k.gguf", err, sizeof err);
    CHECKF(e, "%s", err);
    if (!e) return;
    pt_session_params sp = {.n_ctx = 8, .n_batch = 4};
    pt_session *s = pt_session_new(e, &sp, err, sizeof err);
    const int32_t ok[3] = {1, 2, 3}, bad[3] = {1, 2, 1 << 20}, long_[9] = {0};
    CHECK(pt_session_sync(s, ok, 3, NULL, NULL, err, sizeof err) == 0);
    CHECK(pt_session_sync(s, bad, 3, NULL, NULL, err, sizeof err) == -1);
    CHECK_STR_CONTAINS(err, "outside the vocabulary");
    CHECK(pt_session_n_past(s) == 3);
    CHECK(pt_session_sync(s, ok, 0, NULL, NULL, err, sizeof err) == -1);
    CHECK_STR_CONTAINS(err, "empty");
    CHECK(pt_session_sync(s, long_, 9, NULL, NULL, err, sizeof err) == -1);
    CHECK_STR_CONTAINS(err, "context holds 8");
    volatile sig_atomic_t stop = 1;
    CHECK(pt_session_sync(s, long_, 8, NULL, &stop, err, sizeof err) == -2);
    pt_session_free(s);
    pt_engine_close(e);
}

/* glm-dsa: after a long first request with MTP drafts, a second request sharing
 * a short prefix gets MTP logits bit-identical to a fresh session's: MTP
 * position i comes from trunk position i and token i+1, so truncating the
 * trunk to 3 positions keeps MTP positions 0 and 1 only. */
static void session_mtp_follows_truncation(void) {
    char err[512];
    int32_t first[256], second[256];
    const int n1 = prompt_tokens("glm-dsa-rq2k.ref.json", 2, first, 256);
    const int n0 = prompt_tokens("glm-dsa-rq2k.ref.json", 1, second + 3, 200);
    CHECK(n1 > 30 && n0 > 0);
    if (n1 <= 30 || n0 <= 0) return;
    memcpy(second, first, 3 * sizeof *first);
    const int n2 = n0 + 3;
    pt_engine *e = open_fixture("glm-dsa-rq2k.gguf", err, sizeof err);
    CHECKF(e, "%s", err);
    if (!e) return;
    const int nv = pt_engine_n_vocab(e), ne = pt_engine_n_embd(e);
    const size_t hrow = sizeof(float) * (size_t)ne;
    float *h1 = malloc(64 * hrow), *h = malloc(64 * hrow), *hf = malloc(64 * hrow);
    float *l = malloc(sizeof(float) * 64 * (size_t)nv),
          *la = malloc(sizeof(float) * 64 * (size_t)nv),
          *lb = malloc(sizeof(float) * 64 * (size_t)nv);
    pt_session_params sp = {.n_ctx = 64, .n_batch = 4};
    pt_session *s = pt_session_new(e, &sp, err, sizeof err),
               *fresh = pt_session_new(e, &sp, err, sizeof err);
    /* first request: trunk over n1 positions, MTP over n1 - 1 */
    CHECK(pt_session_eval(s, first, n1, l, 1, h1, err, sizeof err) == 0);
    CHECK(session_mtp(s, first + 1, h1, n1 - 1, l, 0, NULL, err, sizeof err) == 0);
    /* second: keep 3 trunk positions; MTP resumes at position 2 with token 3 */
    CHECK(pt_session_truncate(s, 3) == 3);
    memcpy(h, h1 + (size_t)2 * ne, hrow);
    CHECK(pt_session_eval(s, second + 3, n2 - 3, l, 1, h + ne, err, sizeof err) == 0);
    CHECK(session_mtp(s, second + 3, h, n2 - 3, la, 0, NULL, err, sizeof err) == 0);
    /* fresh: trunk over n2, MTP over positions 0..1, then from 2 as above */
    CHECK(pt_session_eval(fresh, second, n2, l, 1, hf, err, sizeof err) == 0);
    CHECK(!memcmp(h, hf + (size_t)2 * ne, (size_t)(n2 - 2) * hrow));
    CHECK(session_mtp(fresh, second + 1, hf, 2, lb, 0, NULL, err, sizeof err) == 0);
    CHECK(session_mtp(fresh, second + 3, hf + (size_t)2 * ne, n2 - 3, lb, 0, NULL, err,
                      sizeof err) == 0);
    CHECKF(!memcmp(la, lb, sizeof(float) * (size_t)(n2 - 3) * nv), "MTP logits after reuse differ");
    free(h1);
    free(h);
    free(hf);
    free(l);
    free(la);
    free(lb);
    pt_session_free(s);
    pt_session_free(fresh);
    pt_engine_close(e);
}

/* The same pattern through pt_gen (what `petrel serve` and `petrel chat` run
 * for every request): the second request's greedy answer and the session's
 * history equal those of a fresh session, and pt_gen_prefill's return (the
 * server's cached_tokens) is the positions really reused. */
static void session_gen_reuse_matches_fresh(void) {
    for (size_t f = 0; f < sizeof FAMS / sizeof FAMS[0]; f++) {
        const fam *fm = &FAMS[f];
        char err[512];
        int32_t first[256], second[256];
        const int n1 = prompt_tokens(fm->ref, 2, first, 256);
        const int n0 = prompt_tokens(fm->ref, 1, second + 3, 200);
        if (n1 <= 30 || n0 <= 0) {
            CHECKF(0, "%s: prompts not found", fm->ref);
            continue;
        }
        memcpy(second, first, 3 * sizeof *first);
        const int n2 = n0 + 3;
        pt_engine *e = open_fixture(fm->model, err, sizeof err);
        CHECKF(e, "%s", err);
        if (!e) continue;
        pt_session_params sp = {.n_ctx = 64, .n_batch = 4};
        pt_session *s = pt_session_new(e, &sp, err, sizeof err);
        pt_session *fresh = pt_session_new(e, &sp, err, sizeof err);
        pt_sampling greedy;
        pt_sampling_default(&greedy);
        greedy.temp = 0;
        pt_gen *g = s ? pt_gen_new(s, &greedy, err, sizeof err) : NULL;
        pt_gen *gf = fresh ? pt_gen_new(fresh, &greedy, err, sizeof err) : NULL;
        CHECKF(g && gf, "%s", err);
        if (g && gf) {
            const pt_gen_opts o = {.max_tokens = 8, .ignore_eog = 1};
            pt_gen_result r = {0}, rf = {0};
            CHECK(pt_gen_prefill(g, first, n1, NULL, err, sizeof err) == 0);
            CHECK(pt_gen_run(g, &o, NULL, NULL, NULL, &r, err, sizeof err) == 0);
            const int expect = fm->expect_reuse < 0 ? 3 : fm->expect_reuse;
            const int cached = pt_gen_prefill(g, second, n2, NULL, err, sizeof err);
            CHECKF(cached == expect, "%s: cached_tokens %d, expected %d", fm->model, cached,
                   expect);
            CHECK(pt_gen_run(g, &o, NULL, NULL, NULL, &r, err, sizeof err) == 0);
            CHECK(pt_gen_prefill(gf, second, n2, NULL, err, sizeof err) == 0);
            CHECK(pt_gen_run(gf, &o, NULL, NULL, NULL, &rf, err, sizeof err) == 0);
            CHECKF(r.n_tokens == 8 && rf.n_tokens == 8 && r.text.n == rf.text.n &&
                       !memcmp(r.text.v, rf.text.v, r.text.n),
                   "%s: the answer after reuse differs from a fresh session's", fm->model);
            const int np = pt_session_n_past(s);
            CHECK(np == pt_session_n_past(fresh) &&
                  !memcmp(pt_session_tokens(s), pt_session_tokens(fresh),
                          sizeof(int32_t) * (size_t)np));
            pt_buf_free(&r.text);
            pt_buf_free(&rf.text);
        }
        pt_gen_free(g);
        pt_gen_free(gf);
        pt_session_free(s);
        pt_session_free(fresh);
        pt_engine_close(e);
    }
}

/* ===== Prompt progress (pt_session_set_progress) ===== */

typedef struct prog_log {
    int calls, bad; /* reports; reports that broke the contract */
    pt_prompt_progress first, last;
    int stop_after; /* > 0: set *stop at this report */
    volatile sig_atomic_t *stop;
} prog_log;

static void on_prog(void *ud, const pt_prompt_progress *p) {
    prog_log *l = ud;
    if (l->calls == 0) l->first = *p;
    /* done grows from 0 to total; the prompt's numbers stay */
    if (p->total <= 0 || p->done < 0 || p->done > p->total ||
        (l->calls > 0 && (p->done <= l->last.done || p->total != l->last.total ||
                          p->n_prompt != l->last.n_prompt || p->n_reused != l->last.n_reused)))
        l->bad++;
    l->last = *p;
    if (++l->calls == l->stop_after) *l->stop = 1;
}

/* The progress of pt_session_sync and of the drafting prefill (pt_gen_prefill with an MTP
 * head): a first report with done 0, then one per layer of each chunk, the last with done ==
 * total = the evaluated tokens x the layers; the reused prefix is named; decode steps report
 * nothing; a stopped prefill reports nothing after it returns. */
static void session_progress_reports_work(void) {
    static const char *const models[] = {"qwen3moe-rq2k.gguf", "glm-dsa-rq2k.gguf"};
    static const char *const refs[] = {"qwen3moe-rq2k.ref.json", "glm-dsa-rq2k.ref.json"};
    for (int f = 0; f < 2; f++) {
        char err[512];
        int32_t toks[60];
        const int n = prompt_tokens(refs[f], 2, toks, 40);
        if (n < 30) {
            CHECKF(0, "%s: prompt not found", refs[f]);
            continue;
        }
        pt_engine *e = open_fixture(models[f], err, sizeof err);
        CHECKF(e, "%s", err);
        if (!e) continue;
        const int B = 8;
        pt_session_params sp = {.n_ctx = 64, .n_batch = B};
        pt_session *s = pt_session_new(e, &sp, err, sizeof err);
        pt_sampling greedy;
        pt_sampling_default(&greedy);
        greedy.temp = 0;
        pt_gen *g = s ? pt_gen_new(s, &greedy, err, sizeof err) : NULL;
        CHECKF(g, "%s", err);
        if (!g) goto next;
        /* glm-dsa prefills through the drafting path (its MTP head) */
        if (pt_engine_has_mtp(e)) CHECK(pt_gen_set_draft(g, 2, err, sizeof err) == 2);
        prog_log l = {0};
        pt_session_set_progress(s, on_prog, &l);
        /* the whole prompt but its last 7 tokens: 33 tokens in chunks of 8 */
        const int n1 = n - 7;
        CHECK(pt_gen_prefill(g, toks, n1, NULL, err, sizeof err) == 0);
        const int64_t layers = l.last.total / n1;
        CHECKF(l.bad == 0 && l.first.done == 0 && l.last.done == l.last.total &&
                   l.last.total == layers * n1 && layers > 0 && l.last.n_prompt == n1 &&
                   l.last.n_reused == 0 && l.calls == 1 + (int)layers * ((n1 + B - 1) / B),
               "%s: %d reports (%d bad), last %lld/%lld", models[f], l.calls, l.bad,
               (long long)l.last.done, (long long)l.last.total);
        /* the same prompt and 7 more tokens: the prefix is reused, 7 tokens evaluated */
        memset(&l, 0, sizeof l);
        const int reused = pt_gen_prefill(g, toks, n, NULL, err, sizeof err);
        CHECKF(reused > 0 && l.bad == 0 && l.first.n_reused == reused && l.last.n_prompt == n &&
                   l.last.done == l.last.total && l.last.total == layers * (n - reused),
               "%s: reused %d, reported %d of %d, %lld/%lld", models[f], reused, l.first.n_reused,
               l.last.n_prompt, (long long)l.last.done, (long long)l.last.total);
        /* a decode step reports nothing */
        memset(&l, 0, sizeof l);
        const pt_gen_opts o = {.max_tokens = 3, .ignore_eog = 1};
        pt_gen_result r = {0};
        CHECK(pt_gen_run(g, &o, NULL, NULL, NULL, &r, err, sizeof err) == 0);
        pt_buf_free(&r.text);
        CHECKF(l.calls == 0, "%s: %d reports while decoding", models[f], l.calls);
        /* stopped after the first chunk's first layer: -2, and no report after the return */
        volatile sig_atomic_t stop = 0;
        memset(&l, 0, sizeof l);
        l.stop_after = 2, l.stop = &stop;
        pt_gen_clear(g);
        CHECK(pt_gen_prefill(g, toks, n, &stop, err, sizeof err) == -2);
        const int calls = l.calls;
        CHECKF(calls == 1 + (int)layers && l.last.done < l.last.total,
               "%s: %d reports before the stop", models[f], calls);
        CHECK(pt_session_eval(s, toks, 1, NULL, 0, NULL, err, sizeof err) == 0);
        CHECK(l.calls == calls);
        /* no callback: no report */
        pt_session_set_progress(s, NULL, NULL);
        pt_gen_clear(g);
        CHECK(pt_gen_prefill(g, toks, n, NULL, err, sizeof err) == 0);
        CHECK(l.calls == calls);
    next:
        pt_gen_free(g);
        pt_session_free(s);
        pt_engine_close(e);
    }
}

T_SUITE(session) {
    T_ADD(session_progress_reports_work);
    T_ADD(session_sync_reuses_only_what_it_can);
    T_ADD(session_truncate_reports_kept);
    T_ADD(session_sync_refusals);
    T_ADD(session_mtp_follows_truncation);
    T_ADD(session_gen_reuse_matches_fresh);
}
