/* test_batchinv.c — batch invariance: the engine's invariant (ARCHITECTURE.md,
 * "One arithmetic"). A position's logits are a function of the tokens up to it
 * and nothing else: for every fixture family and weight type they are
 * bit-identical (memcmp) whether the sequence is evaluated
 *   - in one batch (the reference),
 *   - in the decoder's chunks of 1, 3, 7 or 16 rows (pt_session_params.n_batch;
 *     this also changes the size of gemma4's sliding-window rings),
 *   - in blocks whose row-local work runs in tiles (pt_session_params.n_tile:
 *     attention, FFNs and matmul passes of 1, 3 or 7 rows; this sizes the rings),
 *   - in the caller's chunks of uneven sizes, or one token at a time,
 *   - in chunks asking for the last row's logits only (the last layer then stores
 *     the other rows' keys and values alone),
 *   - after a truncation to a prefix and re-evaluation of the rest (in a
 *     session whose rings keep the prefix, and in one whose rings have lost it),
 *   - with the routed experts streamed through one cache slot per layer, in
 *     one batch (also in tiles of 5, where a cold cache must read exactly the
 *     bytes of the distinct experts the block routes to: once per layer) and
 *     one token at a time.
 * The sequence is prompt 2 of the fixture (40 tokens, longer than gemma4's
 * window of 16 and glm-dsa's DSA top-k of 8) and the first 8 reference
 * greedy tokens. The F32 models are in ../shared/fixtures only; their cases
 * skip by name without it. */
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "petrel.h"
#include "test.h"

enum { BI_MAX = 64, BI_GREEDY = 8 };

typedef struct bi_seq {
    int32_t tok[BI_MAX];
    int n, nv;
    float *ref; /* [n][nv]: one batch */
} bi_seq;

static int bi_kv = PT_KV_DEFAULT; /* the KV cache type of every engine opened */

static pt_engine *bi_open(const char *model, int slots, char *err, size_t len) {
    pt_engine_params ep = {.model_path = t_fixture(model),
                           .n_threads = 2,
                           .expert_slots = slots,
                           .no_pin = 1,
                           .usage_dir = t_usage_dir(),
                           .cache_type_k = bi_kv,
                           .cache_type_v = bi_kv};
    return pt_engine_open(&ep, err, len);
}

/* Rows [from, n) of got against the reference: 1 when bit-identical, else a
 * failure naming the variant, the first row that differs and by how much. */
static int bi_same(const char *fixture, const char *what, const bi_seq *q, const float *got,
                   int from) {
    const size_t nv = (size_t)q->nv;
    for (int r = from; r < q->n; r++) {
        const float *g = got + (size_t)r * nv, *w = q->ref + (size_t)r * nv;
        if (!memcmp(g, w, nv * sizeof(float))) continue;
        double md = 0;
        int rows = 0;
        for (int r2 = r; r2 < q->n; r2++) {
            const float *g2 = got + (size_t)r2 * nv, *w2 = q->ref + (size_t)r2 * nv;
            rows += memcmp(g2, w2, nv * sizeof(float)) != 0;
            for (size_t i = 0; i < nv; i++)
                md = fmax(md, fabs((double)g2[i] - w2[i]));
        }
        t_fail_at(__FILE__, __LINE__,
                  "%s, %s: logits differ from one batch from row %d on (%d of %d rows, "
                  "max|diff| %.3g)",
                  fixture, what, r, rows, q->n - from, md);
        return 0;
    }
    return 1;
}

/* Evaluate tokens [0, n) in caller chunks of the sizes in `chunks` (cycled;
 * NULL: all at once) in a fresh session of n_batch rows per block and n_tile
 * per tile (0: the default); logits of every row. */
static int bi_eval_tiled(pt_engine *e, const bi_seq *q, int n_batch, int n_tile, const int *chunks,
                         int n_chunks, float *out, pt_session **keep, char *err, size_t len) {
    pt_session_params sp = {.n_ctx = BI_MAX, .n_batch = n_batch, .n_tile = n_tile};
    pt_session *s = pt_session_new(e, &sp, err, len);
    if (!s) return -1;
    int rc = 0;
    for (int i = 0, c = 0; i < q->n && !rc; c++) {
        int k = chunks ? chunks[c % n_chunks] : q->n;
        if (k > q->n - i) k = q->n - i;
        rc = pt_session_eval(s, q->tok + i, k, out + (size_t)i * q->nv, 1, NULL, err, len);
        i += k;
    }
    if (keep && !rc)
        *keep = s;
    else
        pt_session_free(s);
    return rc;
}

/* The same in caller chunks (cycled) asking for each chunk's last row's logits only, the
 * first chunk for none: the decoder's last layer then runs whole only on the rows whose
 * output is read and stores the others' KV alone (fam_ops.block_kv). Rows without logits
 * are copied from the reference, so bi_same compares the chunks' last rows, whose bits
 * also depend on every key stored that way before them. */
static int bi_eval_last(pt_engine *e, const bi_seq *q, int n_batch, const int *chunks, int n_chunks,
                        float *out, char *err, size_t len) {
    pt_session_params sp = {.n_ctx = BI_MAX, .n_batch = n_batch};
    pt_session *s = pt_session_new(e, &sp, err, len);
    if (!s) return -1;
    const size_t nv = (size_t)q->nv;
    memcpy(out, q->ref, sizeof(float) * (size_t)q->n * nv);
    int rc = 0;
    for (int i = 0, c = 0; i < q->n && !rc; c++) {
        int k = chunks[c % n_chunks];
        if (k > q->n - i) k = q->n - i;
        float *last = c ? out + (size_t)(i + k - 1) * nv : NULL;
        if (last) memset(last, 0, nv * sizeof(float));
        rc = pt_session_eval(s, q->tok + i, k, last, 0, NULL, err, len);
        i += k;
    }
    pt_session_free(s);
    return rc;
}

static int bi_eval(pt_engine *e, const bi_seq *q, int n_batch, const int *chunks, int n_chunks,
                   float *out, pt_session **keep, char *err, size_t len) {
    return bi_eval_tiled(e, q, n_batch, 0, chunks, n_chunks, out, keep, err, len);
}

/* Cut a session that holds the whole sequence to `to` positions and evaluate
 * the rest again in one call: rows [kept, n) of out are rewritten. Returns
 * the positions kept, or -1. */
static int bi_truncate_reeval(pt_session *s, const bi_seq *q, int to, float *out, char *err,
                              size_t len) {
    const int kept = pt_session_truncate(s, to);
    if (kept < 0 || kept > to) return -1;
    memset(out + (size_t)kept * q->nv, 0, sizeof(float) * (size_t)(q->n - kept) * q->nv);
    if (pt_session_eval(s, q->tok + kept, q->n - kept, out + (size_t)kept * q->nv, 1, NULL, err,
                        len))
        return -1;
    return kept;
}

static void check_batch_invariance(const char *fixture) {
    char path[256], err[512] = "";
    snprintf(path, sizeof path, "%s.gguf", fixture);
    if (!t_need(path)) return; /* the F32 models live in ../shared/fixtures only */
    snprintf(path, sizeof path, "%s.ref.json", fixture);
    json_t *ref = json_load_file(t_fixture(path), 0, NULL);
    CHECKF(ref, "%s: cannot read %s", fixture, path);
    if (!ref) return;
    bi_seq q = {0};
    json_t *p = json_array_get(json_object_get(ref, "prompts"), 1);
    json_t *jt = json_object_get(p, "tokens"), *jg = json_object_get(p, "greedy_tokens");
    for (size_t i = 0; i < json_array_size(jt) && q.n < BI_MAX - BI_GREEDY; i++)
        q.tok[q.n++] = (int32_t)json_integer_value(json_array_get(jt, i));
    for (size_t i = 0; i < json_array_size(jg) && i < BI_GREEDY; i++)
        q.tok[q.n++] = (int32_t)json_integer_value(json_array_get(jg, i));
    json_decref(ref);
    snprintf(path, sizeof path, "%s.gguf", fixture);
    pt_engine *e = bi_open(path, 0, err, sizeof err);
    CHECKF(e, "%s: %s", fixture, err);
    if (!e) return;
    q.nv = pt_engine_n_vocab(e);
    const size_t bytes = sizeof(float) * (size_t)q.n * q.nv;
    q.ref = malloc(bytes);
    float *got = malloc(bytes);
    CHECKF(bi_eval(e, &q, BI_MAX, NULL, 0, q.ref, NULL, err, sizeof err) == 0, "%s: %s", fixture,
           err);

    /* the decoder's chunks */
    const int batches[] = {1, 3, 7, 16};
    for (size_t b = 0; b < PT_ARRAY_LEN(batches); b++) {
        char what[64];
        snprintf(what, sizeof what, "n_batch %d", batches[b]);
        CHECKF(bi_eval(e, &q, batches[b], NULL, 0, got, NULL, err, sizeof err) == 0, "%s: %s",
               fixture, err);
        bi_same(fixture, what, &q, got, 0);
    }
    /* blocks run in tiles (attention, FFNs, matmul passes of n_tile rows) */
    const int tiled[][2] = {{BI_MAX, 3}, {48, 7}, {16, 1}};
    for (size_t b = 0; b < PT_ARRAY_LEN(tiled); b++) {
        char what[64];
        snprintf(what, sizeof what, "n_batch %d in tiles of %d", tiled[b][0], tiled[b][1]);
        CHECKF(bi_eval_tiled(e, &q, tiled[b][0], tiled[b][1], NULL, 0, got, NULL, err,
                             sizeof err) == 0,
               "%s: %s", fixture, err);
        bi_same(fixture, what, &q, got, 0);
    }
    /* the caller's chunks, uneven, then one token at a time */
    const int uneven[] = {5, 1, 11, 2, 9, 3};
    CHECK(bi_eval(e, &q, BI_MAX, uneven, PT_ARRAY_LEN(uneven), got, NULL, err, sizeof err) == 0);
    bi_same(fixture, "caller chunks 5,1,11,2,9,3", &q, got, 0);
    const int one[] = {1};
    CHECK(bi_eval(e, &q, BI_MAX, one, 1, got, NULL, err, sizeof err) == 0);
    bi_same(fixture, "one token at a time", &q, got, 0);
    /* the last row's logits only: the last layer stores the other rows' KV alone */
    const int lastonly[] = {13, 6, 1, 9, 2, 17};
    for (int nb = 0; nb < 2; nb++) {
        char what[96];
        snprintf(what, sizeof what, "n_batch %d, chunks 13,6,1,9,2,17, last row's logits only",
                 nb ? 4 : BI_MAX);
        CHECKF(bi_eval_last(e, &q, nb ? 4 : BI_MAX, lastonly, PT_ARRAY_LEN(lastonly), got, err,
                            sizeof err) == 0,
               "%s: %s", fixture, err);
        bi_same(fixture, what, &q, got, 0);
    }

    /* truncation: a session whose rings hold everything (n_batch 64), cut to
     * 20; one with small rings (n_batch 3: gemma4 keeps window + 2 positions),
     * cut near the end and then to 20, where the window's keys are gone */
    pt_session *s = NULL;
    CHECK(bi_eval(e, &q, BI_MAX, NULL, 0, got, &s, err, sizeof err) == 0 && s);
    if (s) {
        const int kept = bi_truncate_reeval(s, &q, 20, got, err, sizeof err);
        CHECKF(kept == 20, "%s: truncate to 20 kept %d (%s)", fixture, kept, err);
        if (kept >= 0) bi_same(fixture, "truncated to 20, re-evaluated", &q, got, kept);
        pt_session_free(s);
        s = NULL;
    }
    CHECK(bi_eval(e, &q, 3, NULL, 0, got, &s, err, sizeof err) == 0 && s);
    if (s) {
        const int cut[] = {q.n - 3, 20};
        for (size_t c = 0; c < PT_ARRAY_LEN(cut); c++) {
            char what[96];
            const int kept = bi_truncate_reeval(s, &q, cut[c], got, err, sizeof err);
            snprintf(what, sizeof what, "n_batch 3, truncated to %d (kept %d), re-evaluated",
                     cut[c], kept);
            CHECKF(kept >= 0, "%s: %s", fixture, err);
            if (kept >= 0) bi_same(fixture, what, &q, got, kept);
        }
        pt_session_free(s);
    }
    pt_engine_close(e);

    /* routed experts streamed through one cache slot per layer */
    pt_engine *es = bi_open(path, 1, err, sizeof err);
    CHECKF(es, "%s, 1 slot: %s", fixture, err);
    if (es) {
        /* one block in tiles of 5 on a cold cache: every routed expert is read
         * exactly once per layer (no prefetch, nothing cached before) */
        pt_session *sb = NULL;
        CHECK(bi_eval_tiled(es, &q, BI_MAX, 5, NULL, 0, got, &sb, err, sizeof err) == 0 && sb);
        bi_same(fixture, "streamed through 1 slot, one block in tiles of 5", &q, got, 0);
        if (sb) {
            pt_prompt_stats ps;
            pt_session_prompt_stats(sb, &ps);
            CHECKF(ps.n_tokens == q.n && ps.routed_experts > 0 &&
                       ps.experts_read == ps.routed_experts &&
                       ps.expert_bytes_read >= ps.routed_expert_bytes,
                   "%s: one block of %d tokens read %llu experts (%llu bytes), routed to %llu "
                   "(%llu bytes)",
                   fixture, ps.n_tokens, (unsigned long long)ps.experts_read,
                   (unsigned long long)ps.expert_bytes_read, (unsigned long long)ps.routed_experts,
                   (unsigned long long)ps.routed_expert_bytes);
            pt_session_free(sb);
        }
        CHECK(bi_eval(es, &q, BI_MAX, NULL, 0, got, NULL, err, sizeof err) == 0);
        bi_same(fixture, "streamed through 1 slot, one batch", &q, got, 0);
        /* blocks of 3 rows read an expert again for every block that routes to it */
        CHECK(bi_eval(es, &q, 3, NULL, 0, got, &sb, err, sizeof err) == 0 && sb);
        bi_same(fixture, "streamed through 1 slot, blocks of 3", &q, got, 0);
        if (sb) {
            pt_prompt_stats ps;
            pt_session_prompt_stats(sb, &ps);
            CHECKF(ps.experts_read > ps.routed_experts,
                   "%s: blocks of 3 read %llu experts, routed to %llu: expected more reads",
                   fixture, (unsigned long long)ps.experts_read,
                   (unsigned long long)ps.routed_experts);
            pt_session_free(sb);
        }
        CHECK(bi_eval(es, &q, BI_MAX, one, 1, got, NULL, err, sizeof err) == 0);
        bi_same(fixture, "streamed through 1 slot, one token at a time", &q, got, 0);
        CHECK(bi_eval_last(es, &q, 4, lastonly, PT_ARRAY_LEN(lastonly), got, err, sizeof err) == 0);
        bi_same(fixture, "streamed through 1 slot, n_batch 4, last row's logits only", &q, got, 0);
        pt_stats st;
        pt_engine_stats(es, &st);
        CHECKF(st.streaming && st.misses > 0 && st.slots_per_layer == 1,
               "%s: streaming did not run (misses %llu)", fixture, (unsigned long long)st.misses);
        pt_engine_close(es);
    }
    free(q.ref);
    free(got);
}

#define BATCHINV_TEST(fn, name)                                                                    \
    static void fn(void) {                                                                         \
        check_batch_invariance(name);                                                              \
    }
BATCHINV_TEST(batchinv_glm_dsa_f32, "glm-dsa-f32")
BATCHINV_TEST(batchinv_glm_dsa_rq2k, "glm-dsa-rq2k")
BATCHINV_TEST(batchinv_glm_dsa_iq2, "glm-dsa-iq2")
BATCHINV_TEST(batchinv_glm_dsa_iq3, "glm-dsa-iq3")
BATCHINV_TEST(batchinv_deepseek2_q8_0, "deepseek2-q8_0")
BATCHINV_TEST(batchinv_deepseek2_q4_k_m, "deepseek2-q4_k_m")
BATCHINV_TEST(batchinv_deepseek2_rq2k, "deepseek2-rq2k")
BATCHINV_TEST(batchinv_gemma4_f32, "gemma4-f32")
BATCHINV_TEST(batchinv_gemma4_q4_k_m, "gemma4-q4_k_m")
BATCHINV_TEST(batchinv_gemma4_rq2k, "gemma4-rq2k")
BATCHINV_TEST(batchinv_qwen3moe_q4_k_m, "qwen3moe-q4_k_m")
BATCHINV_TEST(batchinv_qwen3moe_rq2k, "qwen3moe-rq2k")
BATCHINV_TEST(batchinv_qwen3moe_mxfp4, "qwen3moe-mxfp4")

/* The cases above run the default KV type (f16); every other type, on one
 * model of each family. */
static void batchinv_kv_types(void) {
    static const char *const models[] = {"glm-dsa-rq2k", "deepseek2-rq2k", "gemma4-rq2k",
                                         "qwen3moe-rq2k"};
    static const int types[] = {PT_KV_F32, PT_KV_BF16, PT_KV_Q8_0, PT_KV_Q4_0};
    for (size_t t = 0; t < sizeof types / sizeof types[0]; t++)
        for (size_t m = 0; m < sizeof models / sizeof models[0]; m++) {
            bi_kv = types[t];
            check_batch_invariance(models[m]);
        }
    bi_kv = PT_KV_DEFAULT;
}

T_SUITE(batchinv) {
    T_ADD_TIMEOUT(batchinv_kv_types, 600);
    T_ADD(batchinv_glm_dsa_f32);
    T_ADD(batchinv_glm_dsa_rq2k);
    T_ADD(batchinv_glm_dsa_iq2);
    T_ADD(batchinv_glm_dsa_iq3);
    T_ADD(batchinv_deepseek2_q8_0);
    T_ADD(batchinv_deepseek2_q4_k_m);
    T_ADD(batchinv_deepseek2_rq2k);
    T_ADD(batchinv_gemma4_f32);
    T_ADD(batchinv_gemma4_q4_k_m);
    T_ADD(batchinv_gemma4_rq2k);
    T_ADD(batchinv_qwen3moe_q4_k_m);
    T_ADD(batchinv_qwen3moe_rq2k);
    T_ADD(batchinv_qwen3moe_mxfp4);
}
