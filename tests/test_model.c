/* test_model.c — whole-model outputs against llama.cpp's references in
 * ../shared/fixtures (glm-dsa and deepseek2, every shipped variant).
 *
 * For each fixture and prompt: the prompt is evaluated as one batch with
 * logits at every position; then the reference's greedy tokens are fed one
 * by one (the decode path, teacher forced) and each row is compared with the
 * reference's gen rows. Gates (fixtures README): F32 — max |diff| <= 1e-3 and
 * our own greedy continuation identical; quantised — per prompt cos min >= 0.99,
 * cos mean >= 0.9998, top-1 disagreements only where the reference margin is
 * below 0.1 and at most max(1, 6% of rows). The glm-dsa MTP head and the trunk
 * hidden state are checked against their reference files the same way.
 * Also: chunked prefill, thread count and decode-vs-batch invariances, and
 * models that must be refused with a clear message. */
#include <fcntl.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "engine/session.h"
#include "format/gguf.h"
#include "gates.h"
#include "os/os.h"
#include "petrel.h"
#include "test.h"

/* Run every prompt of one fixture; returns 1 when all gates hold. */
static void check_fixture(const char *name, int with_mtp) {
    json_t *ref;
    pt_engine *e = fixture_open(name, &ref);
    if (!e) return;
    const int f32 = !strcmp(json_string_value(json_object_get(ref, "quant")), "f32");
    const int nv = (int)json_integer_value(json_object_get(ref, "n_vocab"));
    char err[512];
    CHECK(pt_engine_n_vocab(e) == nv);
    const int E = pt_engine_n_embd(e);
    size_t pi;
    json_t *p;
    json_array_foreach(json_object_get(ref, "prompts"), pi, p) {
        json_t *jt = json_object_get(p, "tokens"), *jg = json_object_get(p, "greedy_tokens");
        const int np = (int)json_array_size(jt), ng = (int)json_array_size(jg);
        int32_t *toks = malloc(sizeof(int32_t) * (size_t)(np + ng));
        for (int i = 0; i < np; i++)
            toks[i] = (int32_t)json_integer_value(json_array_get(jt, (size_t)i));
        for (int i = 0; i < ng; i++)
            toks[np + i] = (int32_t)json_integer_value(json_array_get(jg, (size_t)i));
        float *want =
            gate_read_f32(json_string_value(json_object_get(p, "logits_file")), (size_t)np * nv);
        float *want_gen = gate_read_f32(json_string_value(json_object_get(p, "greedy_logits_file")),
                                        (size_t)ng * nv);
        CHECKF(want && want_gen, "%s: reference logits missing or of the wrong size", name);
        float *got = malloc(sizeof(float) * (size_t)(np + ng) * nv);
        float *hidden = malloc(sizeof(float) * (size_t)np * E);
        pt_session_params sp = {.n_ctx = np + ng + 1};
        pt_session *s = pt_session_new(e, &sp, err, sizeof err);
        CHECKF(s, "%s: %s", name, err);
        if (s && want && want_gen) {
            CHECK(pt_session_eval(s, toks, np, got, 1, hidden, err, sizeof err) == 0);
            /* teacher-forced decode, one token at a time */
            for (int j = 0; j < ng; j++)
                CHECK(pt_session_eval(s, &toks[np + j], 1, got + (size_t)(np + j) * nv, 0, NULL,
                                      err, sizeof err) == 0);
            /* gates over prompt rows and greedy rows together, as the README recommends */
            float *all_want = malloc(sizeof(float) * (size_t)(np + ng) * nv);
            memcpy(all_want, want, sizeof(float) * (size_t)np * nv);
            memcpy(all_want + (size_t)np * nv, want_gen, sizeof(float) * (size_t)ng * nv);
            gate_stats st = gate_compare(got, all_want, np + ng, nv);
            CHECKF(gate_ok(&st, f32 ? 1e-3 : 0),
                   "%s p%zu: cos min %.6f mean %.6f max|diff| %.2e flips %d (%d at margin >= 0.1) "
                   "of %d rows",
                   name, pi + 1, st.cos_min, st.cos_mean, st.max_diff, st.flips, st.bad_flips,
                   st.rows);
            fprintf(stderr, "  %s p%zu: cos min %.6f mean %.6f max|diff| %.2e top-1 flips %d/%d\n",
                    name, pi + 1, st.cos_min, st.cos_mean, st.max_diff, st.flips, st.rows);
            /* F32: our own greedy continuation equals the reference's */
            if (f32) {
                int same = gate_argmax(got + (size_t)(np - 1) * nv, nv) == toks[np];
                for (int j = 0; j + 1 < ng && same; j++)
                    same = gate_argmax(got + (size_t)(np + j) * nv, nv) == toks[np + j + 1];
                CHECKF(same, "%s p%zu: greedy continuation differs", name, pi + 1);
            }
            free(all_want);
            if (with_mtp) {
                float *want_h = gate_read_f32(json_string_value(json_object_get(p, "hidden_file")),
                                              (size_t)np * E);
                float *want_m = gate_read_f32(
                    json_string_value(json_object_get(p, "mtp_logits_file")), (size_t)np * nv);
                CHECK(want_h && want_m);
                if (want_h && want_m) {
                    gate_stats hs = gate_compare(hidden, want_h, np, E);
                    CHECKF(f32 ? hs.max_diff <= 1e-4 : hs.cos_min >= 0.99,
                           "%s p%zu: hidden state: cos min %.6f max|diff| %.2e", name, pi + 1,
                           hs.cos_min, hs.max_diff);
                    /* MTP row i from (token i, reference hidden of position i-1; zeros
                     * before 0): the head is checked on the reference's inputs */
                    float *hprev = calloc((size_t)np * E, sizeof(float));
                    memcpy(hprev + E, want_h, sizeof(float) * (size_t)(np - 1) * E);
                    float *mtp = malloc(sizeof(float) * (size_t)np * nv);
                    CHECK(session_mtp(s, toks, hprev, np, mtp, 0, NULL, err, sizeof err) == 0);
                    gate_stats ms = gate_compare(mtp, want_m, np, nv);
                    CHECKF(gate_ok(&ms, f32 ? 1e-3 : 0),
                           "%s p%zu MTP: cos min %.6f mean %.6f max|diff| %.2e flips %d (%d bad)",
                           name, pi + 1, ms.cos_min, ms.cos_mean, ms.max_diff, ms.flips,
                           ms.bad_flips);
                    fprintf(
                        stderr,
                        "  %s p%zu MTP: cos min %.6f mean %.6f max|diff| %.2e top-1 flips %d/%d\n",
                        name, pi + 1, ms.cos_min, ms.cos_mean, ms.max_diff, ms.flips, ms.rows);
                    free(hprev);
                    free(mtp);
                }
                free(want_h);
                free(want_m);
            }
        }
        pt_session_free(s);
        free(toks);
        free(want);
        free(want_gen);
        free(got);
        free(hidden);
    }
    pt_engine_close(e);
    json_decref(ref);
}

#define FIXTURE_TEST(fn, name, mtp)                                                                \
    static void fn(void) {                                                                         \
        check_fixture(name, mtp);                                                                  \
    }
FIXTURE_TEST(model_glm_dsa_f32, "glm-dsa-f32", 1)
FIXTURE_TEST(model_glm_dsa_rq2k, "glm-dsa-rq2k", 1)
FIXTURE_TEST(model_glm_dsa_iq2, "glm-dsa-iq2", 1)
FIXTURE_TEST(model_glm_dsa_iq3, "glm-dsa-iq3", 1)
FIXTURE_TEST(model_deepseek2_q8_0, "deepseek2-q8_0", 0)
FIXTURE_TEST(model_deepseek2_q4_k_m, "deepseek2-q4_k_m", 0)
FIXTURE_TEST(model_deepseek2_rq2k, "deepseek2-rq2k", 0)

/* ===== Invariances ===== */

/* Logits of the 40-token prompt of glm-dsa-rq2k under the given settings. */
static float *run_prompt(const char *model, int threads, int kernels, int n_batch, int one_by_one,
                         int *np_out, int *nv_out) {
    json_t *ref = json_load_file(t_fixture("glm-dsa-rq2k.ref.json"), 0, NULL);
    json_t *jt = json_object_get(json_array_get(json_object_get(ref, "prompts"), 1), "tokens");
    const int np = (int)json_array_size(jt);
    int32_t toks[64];
    for (int i = 0; i < np; i++)
        toks[i] = (int32_t)json_integer_value(json_array_get(jt, (size_t)i));
    json_decref(ref);
    char err[512];
    pt_engine_params ep = {.model_path = t_fixture(model),
                           .n_threads = threads,
                           .kernels = kernels,
                           .usage_dir = t_usage_dir()};
    pt_engine *e = pt_engine_open(&ep, err, sizeof err);
    if (!e) return NULL;
    const int nv = pt_engine_n_vocab(e);
    pt_session_params sp = {.n_ctx = 64, .n_batch = n_batch};
    pt_session *s = pt_session_new(e, &sp, err, sizeof err);
    float *out = malloc(sizeof(float) * (size_t)np * nv);
    int rc = 0;
    if (one_by_one)
        for (int i = 0; i < np && !rc; i++)
            rc = pt_session_eval(s, &toks[i], 1, out + (size_t)i * nv, 0, NULL, err, sizeof err);
    else
        rc = pt_session_eval(s, toks, np, out, 1, NULL, err, sizeof err);
    pt_session_free(s);
    pt_engine_close(e);
    if (rc) {
        free(out);
        return NULL;
    }
    *np_out = np;
    *nv_out = nv;
    return out;
}

static void model_invariances(void) {
    int np, nv;
    float *base = run_prompt("glm-dsa-rq2k.gguf", 2, PT_KERNELS_BEST, 64, 0, &np, &nv);
    CHECK(base != NULL);
    if (!base) return;
    /* chunked prefill (chunks of 7: 5 x 7 + 5) and one thread are bit-identical:
     * every output element is computed in the same order whoever computes it */
    struct {
        int threads, batch, one;
        const char *what;
    } v[] = {{2, 7, 0, "prefill in chunks of 7"}, {1, 64, 0, "1 thread"}};
    for (size_t k = 0; k < PT_ARRAY_LEN(v); k++) {
        int np2, nv2;
        float *o = run_prompt("glm-dsa-rq2k.gguf", v[k].threads, PT_KERNELS_BEST, v[k].batch,
                              v[k].one, &np2, &nv2);
        CHECKF(o && np2 == np && !memcmp(o, base, sizeof(float) * (size_t)np * nv),
               "%s: logits differ", v[k].what);
        free(o);
    }
    /* token by token: one arithmetic whatever the chunk's row count (the
     * engine's invariant; tests/test_batchinv.c checks it on every fixture) */
    int np1, nv1;
    float *one = run_prompt("glm-dsa-rq2k.gguf", 2, PT_KERNELS_BEST, 64, 1, &np1, &nv1);
    CHECKF(one && np1 == np && !memcmp(one, base, sizeof(float) * (size_t)np * nv),
           "one token at a time: logits differ from one batch");
    free(one);
    /* scalar kernels agree with SIMD to float rounding (then quantisation may flip) */
    int np3, nv3;
    float *sc = run_prompt("glm-dsa-rq2k.gguf", 2, PT_KERNELS_SCALAR, 64, 0, &np3, &nv3);
    CHECK(sc != NULL);
    if (sc) {
        gate_stats st = gate_compare(sc, base, np, nv);
        CHECKF(st.cos_min >= 0.99 && st.cos_mean >= 0.9998,
               "scalar vs SIMD: cos min %.6f mean %.6f", st.cos_min, st.cos_mean);
    }
    free(sc);
    free(base);
}

/* ===== Refusals ===== */

static void model_refuses_bad_files(void) {
    struct {
        const char *drop_key, *drop_tensor, *u32_key;
        uint32_t val;
        const char *expect;
    } cases[] = {
        {"glm-dsa.attention.kv_lora_rank", NULL, NULL, 0,
         "missing metadata key 'glm-dsa.attention.kv_lora_rank'"},
        {NULL, "blk.2.attn_kv_a_mqa.weight", NULL, 0,
         "missing tensor 'blk.2.attn_kv_a_mqa.weight'"},
        {NULL, NULL, "glm-dsa.attention.q_lora_rank", 64,
         "tensor 'blk.0.attn_q_a.weight' has shape {256,128,1,1}, expected {256,64,1}"},
        {NULL, NULL, "glm-dsa.expert_used_count", 99, "expert_used_count 99"},
        {NULL, NULL, "glm-dsa.expert_gating_func", 7, "expert_gating_func 7 is not supported"},
        {NULL, NULL, "glm-dsa.vocab_size", 1000, "vocab_size 1000 but token_embd has 512 rows"},
    };
    for (size_t i = 0; i < PT_ARRAY_LEN(cases); i++) {
        char path[512], err[512] = "";
        snprintf(path, sizeof path, "%s/variant%zu.gguf", t_tmpdir(), i);
        CHECK(fixture_variant("glm-dsa-rq2k.gguf", path, cases[i].drop_key, cases[i].drop_tensor,
                              cases[i].u32_key, cases[i].val) == 0);
        pt_engine_params ep = {.model_path = path, .n_threads = 1, .usage_dir = t_usage_dir()};
        pt_engine *e = pt_engine_open(&ep, err, sizeof err);
        CHECKF(e == NULL, "variant %zu accepted", i);
        pt_engine_close(e);
        CHECK_STR_CONTAINS(err, cases[i].expect);
    }
    /* an architecture petrel does not run, and a vocab-only file */
    char err[512] = "";
    pt_engine_params ep = {.model_path = t_fixture("tokenizer/ggml-vocab-gpt-2.gguf"),
                           .n_threads = 1,
                           .usage_dir = t_usage_dir()};
    CHECK(pt_engine_open(&ep, err, sizeof err) == NULL);
    CHECK_STR_CONTAINS(err, "is not supported");
    /* token ids outside the vocabulary and a full context are errors, not crashes */
    ep.model_path = t_fixture("glm-dsa-rq2k.gguf");
    pt_engine *e = pt_engine_open(&ep, err, sizeof err);
    CHECK(e != NULL);
    if (!e) return;
    pt_session_params sp = {.n_ctx = 4};
    pt_session *s = pt_session_new(e, &sp, err, sizeof err);
    int32_t bad[2] = {5, 512};
    CHECK(pt_session_eval(s, bad, 2, NULL, 0, NULL, err, sizeof err) == -1);
    CHECK_STR_CONTAINS(err, "token id 512 at index 1 is outside the vocabulary");
    int32_t five[5] = {1, 2, 3, 4, 5};
    CHECK(pt_session_eval(s, five, 5, NULL, 0, NULL, err, sizeof err) == -1);
    CHECK_STR_CONTAINS(err, "context full");
    CHECK(pt_session_n_past(s) == 0);
    pt_session_free(s);
    pt_engine_close(e);
}

T_SUITE(model) {
    T_ADD(model_glm_dsa_f32);
    T_ADD(model_glm_dsa_rq2k);
    T_ADD(model_glm_dsa_iq2);
    T_ADD(model_glm_dsa_iq3);
    T_ADD(model_deepseek2_q8_0);
    T_ADD(model_deepseek2_q4_k_m);
    T_ADD(model_deepseek2_rq2k);
    T_ADD(model_invariances);
    T_ADD(model_refuses_bad_files);
}

/* ===== Streaming ===== */

typedef struct stream_run {
    float *logits; /* [np + ng][nv]: prompt rows then decode rows */
    pt_stats st;
    int rows, nv;
    char plan[1600];
} stream_run;

/* Prompt 2 of a fixture as one batch, then its greedy tokens one at a time,
 * with the given engine settings. */
static int run_stream(const char *fixture, const pt_engine_params *base, stream_run *r, char *err,
                      size_t errlen) {
    char path[256];
    snprintf(path, sizeof path, "%s.ref.json", fixture);
    json_t *ref = json_load_file(t_fixture(path), 0, NULL);
    json_t *p = json_array_get(json_object_get(ref, "prompts"), 1);
    json_t *jt = json_object_get(p, "tokens"), *jg = json_object_get(p, "greedy_tokens");
    const int np = (int)json_array_size(jt), ng = (int)json_array_size(jg);
    int32_t toks[128];
    for (int i = 0; i < np; i++)
        toks[i] = (int32_t)json_integer_value(json_array_get(jt, (size_t)i));
    for (int i = 0; i < ng; i++)
        toks[np + i] = (int32_t)json_integer_value(json_array_get(jg, (size_t)i));
    snprintf(path, sizeof path, "%s",
             t_fixture(json_string_value(json_object_get(ref, "model_file"))));
    json_decref(ref);
    pt_engine_params ep = *base;
    ep.model_path = path;
    pt_engine *e = pt_engine_open(&ep, err, errlen);
    if (!e) return -1;
    const int nv = pt_engine_n_vocab(e);
    pt_session_params sp = {.n_ctx = np + ng + 1};
    pt_session *s = pt_session_new(e, &sp, err, errlen);
    r->logits = malloc(sizeof(float) * (size_t)(np + ng) * nv);
    int rc = !s || pt_session_eval(s, toks, np, r->logits, 1, NULL, err, errlen);
    for (int j = 0; j < ng && !rc; j++)
        rc = pt_session_eval(s, &toks[np + j], 1, r->logits + (size_t)(np + j) * nv, 0, NULL, err,
                             errlen);
    pt_engine_stats(e, &r->st);
    snprintf(r->plan, sizeof r->plan, "%s", pt_engine_plan(e));
    r->rows = np + ng;
    r->nv = nv;
    pt_session_free(s);
    pt_engine_close(e);
    return rc ? -1 : 0;
}

/* multi_moe: the model has two or more MoE layers, so router lookahead has a next layer. */
static void check_streamed_equals_resident(const char *fixture, int multi_moe) {
    char err[512] = "";
    pt_engine_params resident = {
        .n_threads = 2, .expert_slots = PT_EXPERTS_MMAP, .usage_dir = t_usage_dir()};
    stream_run ref = {0};
    CHECKF(run_stream(fixture, &resident, &ref, err, sizeof err) == 0, "%s resident: %s", fixture,
           err);
    CHECK(!ref.st.streaming && ref.st.misses == 0);
    struct {
        int slots, io, policy, buffered, prefetch, pin;
        const char *what, *backend;
    } v[] = {
        {1, PT_IO_URING, PT_POLICY_LRU, 0, 0, 0, "1 slot, io_uring, LRU", "io_uring"},
        {2, PT_IO_PREAD, PT_POLICY_LRU, 0, 0, 0, "2 slots, pread, LRU", "pread"},
        {2, PT_IO_URING, PT_POLICY_LFU, 0, 0, 0, "2 slots, io_uring, LFU", "io_uring"},
        {3, PT_IO_PREAD, PT_POLICY_LFU, 1, 0, 0, "3 slots, pread, LFU, buffered", "pread"},
        {1, PT_IO_PREAD, PT_POLICY_LRU, 1, 0, 0, "1 slot, pread, buffered", "pread"},
        {2, PT_IO_URING, PT_POLICY_LRU, 0, 1, 0, "2 slots, io_uring, prefetch", "io_uring"},
        {1, PT_IO_PREAD, PT_POLICY_LFU, 0, 1, 0, "1 slot, pread, prefetch", "pread"},
        {4, PT_IO_URING, PT_POLICY_LRU, 0, 1, 1, "4 slots, pins from the runs above, prefetch",
         "io_uring"},
    };
    for (size_t k = 0; k < PT_ARRAY_LEN(v); k++) {
        pt_engine_params ep = {.n_threads = 2,
                               .expert_slots = v[k].slots,
                               .io = v[k].io,
                               .expert_policy = v[k].policy,
                               .buffered_io = v[k].buffered,
                               .prefetch = v[k].prefetch,
                               .no_pin = !v[k].pin,
                               .usage_dir = t_usage_dir()};
        stream_run r = {0};
        int rc = run_stream(fixture, &ep, &r, err, sizeof err);
        CHECKF(rc == 0, "%s %s: %s", fixture, v[k].what, err);
        if (rc == 0) {
            CHECKF(!memcmp(r.logits, ref.logits, sizeof(float) * (size_t)ref.rows * ref.nv),
                   "%s %s: streamed logits differ from resident", fixture, v[k].what);
            /* the mechanism really ran */
            CHECKF(r.st.streaming && r.st.misses > 0 && r.st.bytes_read > 0 &&
                       r.st.slots_per_layer == v[k].slots,
                   "%s %s: streaming did not run (misses %llu, bytes %llu)", fixture, v[k].what,
                   (unsigned long long)r.st.misses, (unsigned long long)r.st.bytes_read);
            CHECKF(!strcmp(r.st.io_backend, v[k].backend), "%s: back-end %s, asked for %s",
                   v[k].what, r.st.io_backend, v[k].backend);
            CHECK(r.st.direct_io == !v[k].buffered);
            if (v[k].prefetch && multi_moe)
                CHECKF(r.st.prefetched > 0, "%s: no prefetch issued", v[k].what);
            if (v[k].pin)
                CHECKF(r.st.pinned > 0, "%s: nothing pinned from usage history", v[k].what);
        }
        free(r.logits);
    }
    free(ref.logits);
}

static void stream_glm_dsa_rq2k(void) {
    check_streamed_equals_resident("glm-dsa-rq2k", 1);
}
static void stream_glm_dsa_iq3(void) {
    check_streamed_equals_resident("glm-dsa-iq3", 1);
}
static void stream_deepseek2_q4_k_m(void) {
    check_streamed_equals_resident("deepseek2-q4_k_m", 0);
}
static void stream_gemma4_rq2k(void) {
    check_streamed_equals_resident("gemma4-rq2k", 1);
}
static void stream_qwen3moe_mxfp4(void) {
    check_streamed_equals_resident("qwen3moe-mxfp4", 1);
}

/* --load-mode ram / mlock hold the same bytes: the logits are the mmap run's bits, with the
 * experts read through the mmap (every tensor held) and streamed (the resident part held). */
static void stream_load_modes(void) {
    const char *fx = "deepseek2-q4_k_m";
    char err[512] = "";
    pt_engine_params base = {
        .n_threads = 2, .expert_slots = PT_EXPERTS_MMAP, .usage_dir = t_usage_dir()};
    stream_run ref = {0};
    CHECKF(run_stream(fx, &base, &ref, err, sizeof err) == 0, "mmap: %s", err);
    CHECK(strstr(ref.plan, "of weights") == NULL);
    struct {
        int mode, slots;
        const char *expect;
    } v[] = {{PT_LOAD_RAM, PT_EXPERTS_MMAP, "of weights copied into RAM"},
             {PT_LOAD_RAM, 2, "of weights copied into RAM"},
             {PT_LOAD_MLOCK, PT_EXPERTS_MMAP, "locked in RAM"}};
    for (size_t k = 0; k < PT_ARRAY_LEN(v); k++) {
        pt_engine_params ep = base;
        ep.load_mode = v[k].mode;
        ep.expert_slots = v[k].slots;
        ep.no_pin = 1;
        stream_run r = {0};
        const int rc = run_stream(fx, &ep, &r, err, sizeof err);
        CHECKF(rc == 0, "load mode %d: %s", v[k].mode, err);
        if (rc == 0) {
            CHECKF(!memcmp(r.logits, ref.logits, sizeof(float) * (size_t)ref.rows * ref.nv),
                   "load mode %d, slots %d: logits differ from the mmap run", v[k].mode,
                   v[k].slots);
            CHECKF(strstr(r.plan, v[k].expect) != NULL, "plan line without '%s': %s", v[k].expect,
                   r.plan);
        }
        free(r.logits);
    }
    free(ref.logits);
}

/* os_privatize leaves the bytes and the address as they were but detaches them from the
 * file: a later write to the file no longer shows through the range (it would through the
 * shared mapping). */
static void os_privatize_copies(void) {
    char path[512];
    snprintf(path, sizeof path, "%s/priv.bin", t_tmpdir());
    const size_t ps = os_page_size(), len = 4 * ps;
    uint8_t *buf = malloc(len);
    for (size_t i = 0; i < len; i++)
        buf[i] = (uint8_t)(i * 7 + 3);
    FILE *f = fopen(path, "wb");
    CHECK(f && fwrite(buf, 1, len, f) == len);
    if (f) fclose(f);
    const int fd = open(path, O_RDWR);
    CHECK(fd >= 0);
    const uint8_t *m = mmap(NULL, len, PROT_READ, MAP_SHARED, fd, 0);
    CHECK(m != MAP_FAILED);
    if (fd < 0 || m == MAP_FAILED) {
        free(buf);
        return;
    }
    const uint8_t z[16] = {0};
    CHECK(pwrite(fd, z, sizeof z, (off_t)ps) == (ssize_t)sizeof z); /* seen while shared */
    CHECK(m[ps] == 0);
    memset(buf + ps, 0, sizeof z);
    CHECK(os_privatize((void *)(m + ps), 2 * ps, fd, ps) == 0);
    CHECK(!memcmp(m, buf, len));
    CHECK(pwrite(fd, buf, 16, (off_t)ps) == 16 && pwrite(fd, z, 16, (off_t)(2 * ps)) == 16);
    CHECKF(m[ps] == 0 && m[2 * ps] == buf[2 * ps], "the privatized range still follows the file");
    CHECKF(m[0] == buf[0], "the range before it changed");
    munmap((void *)m, len);
    close(fd);
    free(buf);
}

/* os_populate backs every page of the range, the parts of its threads included, and leaves
 * the memory zero; a range that is not a whole number of its parts is covered too. */
static void os_populate_backs_pages(void) {
    const size_t ps = os_page_size(), huge = (size_t)2 << 20;
    const size_t lens[] = {ps, 3 * huge + 5 * ps, 9 * huge};
    for (size_t k = 0; k < sizeof lens / sizeof lens[0]; k++) {
        const size_t len = lens[k], n = len / ps;
        uint8_t *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        CHECK(p != MAP_FAILED);
        if (p == MAP_FAILED) return;
        os_populate(p, len);
#ifdef __linux__
        unsigned char *vec = malloc(n);
#else
        char *vec = malloc(n);
#endif
        CHECK(vec && mincore(p, len, vec) == 0);
        size_t in = 0;
        for (size_t i = 0; vec && i < n; i++)
            in += vec[i] & 1;
        CHECKF(in == n, "%zu of %zu pages resident after os_populate (%zu bytes)", in, n, len);
        size_t nz = 0;
        for (size_t i = 0; i < len; i += 64)
            nz += p[i] != 0;
        CHECK(nz == 0);
        free(vec);
        munmap(p, len);
    }
}

static void stream_refuses_tiny_budget(void) {
    char err[512] = "";
    if (!t_need("glm-dsa-f32.gguf")) return; /* the budgets below are sized for this model */
    pt_engine_params ep = {.model_path = t_fixture("glm-dsa-f32.gguf"),
                           .n_threads = 1,
                           .ram_gb = 0.1,
                           .usage_dir = t_usage_dir()};
    pt_engine *e = pt_engine_open(&ep, err, sizeof err);
    CHECK(e == NULL);
    pt_engine_close(e);
    CHECK_STR_CONTAINS(err, "not enough memory: petrel needs at least");
    CHECK_STR_CONTAINS(err, "but the budget is 0.10 GB");
    /* a budget that holds the resident part but not all experts streams automatically */
    ep.ram_gb = 0.55;
    e = pt_engine_open(&ep, err, sizeof err);
    CHECKF(e != NULL, "%s", err);
    if (e) {
        pt_stats st;
        pt_engine_stats(e, &st);
        CHECK(st.streaming && st.slots_per_layer >= 1 && st.slots_per_layer < 16);
        CHECK_STR_CONTAINS(pt_engine_plan(e), "streamed into");
    }
    pt_engine_close(e);
}

T_SUITE(stream) {
    T_ADD(stream_glm_dsa_rq2k);
    T_ADD(stream_glm_dsa_iq3);
    T_ADD(stream_deepseek2_q4_k_m);
    T_ADD(stream_gemma4_rq2k);
    T_ADD(stream_qwen3moe_mxfp4);
    T_ADD(stream_refuses_tiny_budget);
    T_ADD(stream_load_modes);
    T_ADD(os_privatize_copies);
    T_ADD(os_populate_backs_pages);
}
