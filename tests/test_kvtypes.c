/* test_kvtypes.c — KV cache element types (f32, f16, bf16, q8_0, q4_0)
 * against llama.cpp run with the same cache types, and the cache's memory
 * growing with the positions used.
 *
 * References: tests/data/kv/NAME.kv-TYPE.K.f32, made by llama.cpp with
 * --cache-type-k/-v TYPE (tests/data/kv/README.md has the commands): prompt K
 * of the fixture teacher-forced ([n_prompt][n_vocab]), then 24 greedy steps
 * one token per decode ([24][n_vocab]). The greedy tokens are the references'
 * own argmaxes, so petrel is fed exactly what llama.cpp was. One model per
 * family: qwen3moe-q4_k_m, gemma4-q4_k_m (sliding window + full layers),
 * deepseek2-q8_0 and glm-dsa-rq2k (MLA: the latent and rope key in the K
 * type; q8_0 and q4_0 ran with flash attention, which llama.cpp requires for
 * a quantised V). Gates: the quantised gate of the fixtures README (cos min
 * >= 0.99, cos mean >= 0.9998, flips only at reference margins < 0.1, at most
 * max(1, 6%) of rows).
 *
 * Where the gate does not hold (KV_LOOSE below) the reference is not the
 * arithmetic petrel runs: llama.cpp computes a quantised V cache only with
 * flash attention (online softmax; f32/f16 K cast to F16 there), its prompt
 * pass sums q8_0 scores in tinyBLAS order, and its DSA indexer scores with a
 * query rounded to the K type while petrel's indexer keeps a float query (it
 * stores the keys' rounded values, as llama.cpp does). The fixtures turn such
 * rounding into top-k routing / key-selection flips. Those cases are held to
 * a looser floor (cos min >= 0.95, cos mean >= 0.97) so a regression still
 * fails, and their numbers are printed.
 *
 * The default type (f16) against the fixtures' F32-KV references: wherever
 * llama.cpp's own f16 run passes the gates there, petrel's must too (prompt
 * rows; for the MLA fixtures llama.cpp's f16 itself does not).
 * Case names start with `kv`. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gates.h"
#include "petrel.h"
#include "test.h"

#define KV_DIR "tests/data/kv/"
#define N_GEN 24
#define KV_LEN(a) (sizeof(a) / sizeof((a)[0]))

static float *read_ref(const char *path, size_t count) {
    size_t len = 0;
    float *v = t_read_file(path, &len);
    if (v && len != count * sizeof(float)) {
        free(v);
        return NULL;
    }
    return v;
}

/* Prompt k (1-based) of a fixture's ref.json: tokens into toks, returns n. */
static int prompt_tokens(const char *name, int k, int32_t *toks, int cap) {
    char path[256];
    snprintf(path, sizeof path, "%s.ref.json", name);
    json_t *ref = json_load_file(t_fixture(path), 0, NULL);
    if (!ref) return -1;
    json_t *jt =
        json_object_get(json_array_get(json_object_get(ref, "prompts"), (size_t)k - 1), "tokens");
    int n = (int)json_array_size(jt);
    if (n > cap) n = -1;
    for (int i = 0; i < n; i++)
        toks[i] = (int32_t)json_integer_value(json_array_get(jt, (size_t)i));
    json_decref(ref);
    return n;
}

/* Logits of the prompt (all rows) and N_GEN teacher-forced steps fed the
 * argmaxes of `want` (the reference's greedy chain): got [np + N_GEN][nv]. */
static int run_chain(pt_engine *e, const int32_t *toks, int np, const float *want, int nv,
                     float *got) {
    char err[512];
    pt_session_params sp = {.n_ctx = np + N_GEN + 1};
    pt_session *s = pt_session_new(e, &sp, err, sizeof err);
    CHECKF(s, "%s", err);
    if (!s) return -1;
    int rc = pt_session_eval(s, toks, np, got, 1, NULL, err, sizeof err);
    for (int j = 0; j < N_GEN && !rc; j++) {
        const int32_t t = gate_argmax(want + (size_t)(np - 1 + j) * nv, nv);
        rc = pt_session_eval(s, &t, 1, got + (size_t)(np + j) * nv, 0, NULL, err, sizeof err);
    }
    CHECKF(rc == 0, "%s", err);
    pt_session_free(s);
    return rc;
}

static pt_engine *open_typed(const char *name, int type) {
    char model[256], err[512];
    snprintf(model, sizeof model, "%s.gguf", name);
    pt_engine_params ep = {.model_path = t_fixture(model),
                           .n_threads = 2,
                           .usage_dir = t_usage_dir(),
                           .cache_type_k = type,
                           .cache_type_v = type};
    pt_engine *e = pt_engine_open(&ep, err, sizeof err);
    CHECKF(e, "%s: %s", name, err);
    return e;
}

/* (model, type) pairs measured outside the gate, see the top comment. */
static int kv_loose(const char *name, int type) {
    static const struct {
        const char *name;
        int type;
    } loose[] = {{"qwen3moe-q4_k_m", PT_KV_Q8_0}, {"qwen3moe-q4_k_m", PT_KV_Q4_0},
                 {"gemma4-q4_k_m", PT_KV_Q8_0},   {"gemma4-q4_k_m", PT_KV_Q4_0},
                 {"glm-dsa-rq2k", PT_KV_BF16},    {"glm-dsa-rq2k", PT_KV_Q8_0},
                 {"glm-dsa-rq2k", PT_KV_Q4_0}};
    for (size_t i = 0; i < KV_LEN(loose); i++)
        if (!strcmp(loose[i].name, name) && loose[i].type == type) return 1;
    return 0;
}

/* Every type of one model against llama.cpp at that type. */
static void check_types(const char *name) {
    static const int types[] = {PT_KV_F16, PT_KV_BF16, PT_KV_Q8_0, PT_KV_Q4_0};
    for (size_t ti = 0; ti < KV_LEN(types); ti++) {
        pt_engine *e = open_typed(name, types[ti]);
        if (!e) return;
        const int nv = pt_engine_n_vocab(e);
        for (int k = 1; k <= 2; k++) {
            int32_t toks[64];
            const int np = prompt_tokens(name, k, toks, 64);
            CHECK(np > 0);
            if (np <= 0) break;
            char path[256];
            snprintf(path, sizeof path, KV_DIR "%s.kv-%s.%d.f32", name, pt_kv_type_name(types[ti]),
                     k);
            float *want = read_ref(path, (size_t)(np + N_GEN) * nv);
            CHECKF(want, "%s missing or of the wrong size", path);
            float *got = malloc(sizeof(float) * (size_t)(np + N_GEN) * nv);
            if (want && !run_chain(e, toks, np, want, nv, got)) {
                gate_stats st = gate_compare(got, want, np + N_GEN, nv);
                const int loose = kv_loose(name, types[ti]);
                CHECKF(loose ? st.cos_min >= 0.95 && st.cos_mean >= 0.97 : gate_ok(&st, 0),
                       "%s %s p%d: cos min %.6f mean %.6f max|diff| %.2e flips %d (%d at margin "
                       ">= 0.1) of %d rows",
                       name, pt_kv_type_name(types[ti]), k, st.cos_min, st.cos_mean, st.max_diff,
                       st.flips, st.bad_flips, st.rows);
                fprintf(stderr,
                        "  %s kv %s p%d: cos min %.6f mean %.7f max|diff| %.2e flips %d (%d at "
                        "margin >= 0.1)/%d%s\n",
                        name, pt_kv_type_name(types[ti]), k, st.cos_min, st.cos_mean, st.max_diff,
                        st.flips, st.bad_flips, st.rows, loose ? " (loose)" : "");
            }
            free(want);
            free(got);
        }
        pt_engine_close(e);
    }
}

#define KV_TEST(fn, name)                                                                          \
    static void fn(void) {                                                                         \
        check_types(name);                                                                         \
    }
KV_TEST(kv_types_qwen3moe, "qwen3moe-q4_k_m")
KV_TEST(kv_types_gemma4, "gemma4-q4_k_m")
KV_TEST(kv_types_deepseek2, "deepseek2-q8_0")
KV_TEST(kv_types_glm_dsa, "glm-dsa-rq2k")

/* The default engine (f16 KV, no cache type given) against the fixtures'
 * F32-KV references, prompt rows: where llama.cpp's own f16 prompt rows pass
 * the gate there, petrel's must too. */
static void kv_default_f16_passes_fixture_gates(void) {
    static const char *const names[] = {"qwen3moe-q4_k_m", "gemma4-q4_k_m", "deepseek2-q8_0",
                                        "glm-dsa-rq2k"};
    for (size_t i = 0; i < KV_LEN(names); i++) {
        pt_engine *e = open_typed(names[i], PT_KV_DEFAULT);
        if (!e) continue;
        const int nv = pt_engine_n_vocab(e);
        CHECK_STR_CONTAINS(pt_engine_plan(e), "KV f16");
        for (int k = 1; k <= 2; k++) {
            int32_t toks[64];
            const int np = prompt_tokens(names[i], k, toks, 64);
            char lp[128], kp[256], err[512];
            snprintf(lp, sizeof lp, "%s.logits.%d.f32", names[i], k);
            snprintf(kp, sizeof kp, KV_DIR "%s.kv-f16.%d.f32", names[i], k);
            float *want = gate_read_f32(lp, (size_t)np * nv);
            float *llama16 = read_ref(kp, (size_t)(np + N_GEN) * nv);
            float *got = malloc(sizeof(float) * (size_t)np * nv);
            pt_session_params sp = {.n_ctx = np};
            pt_session *s = pt_session_new(e, &sp, err, sizeof err);
            CHECK(want && llama16 && s);
            if (want && llama16 && s &&
                pt_session_eval(s, toks, np, got, 1, NULL, err, sizeof err) == 0) {
                gate_stats st = gate_compare(got, want, np, nv);
                gate_stats sl = gate_compare(llama16, want, np, nv);
                CHECKF(gate_ok(&st, 0) || !gate_ok(&sl, 0),
                       "%s f16 vs F32-KV p%d: cos min %.6f mean %.6f flips %d", names[i], k,
                       st.cos_min, st.cos_mean, st.flips);
                fprintf(stderr,
                        "  %s p%d vs the F32-KV reference: petrel f16 cos min %.6f mean %.7f "
                        "flips %d/%d gate %s; llama.cpp f16 cos min %.6f mean %.7f flips %d gate "
                        "%s\n",
                        names[i], k, st.cos_min, st.cos_mean, st.flips, st.rows,
                        gate_ok(&st, 0) ? "ok" : "FAILS", sl.cos_min, sl.cos_mean, sl.flips,
                        gate_ok(&sl, 0) ? "ok" : "FAILS");
            }
            pt_session_free(s);
            free(want);
            free(llama16);
            free(got);
        }
        pt_engine_close(e);
    }
}

/* The KV cache is reserved for the whole (training) context and backed as
 * positions are written: bytes grow with positions, not with the context. */
static void kv_grows_with_positions(void) {
    pt_engine *e = open_typed("qwen3moe-q4_k_m", PT_KV_DEFAULT);
    if (!e) return;
    char err[512];
    const int n_ctx = pt_engine_n_ctx(e);
    CHECKF(n_ctx == 40960, "default context %d, want the training context 40960", n_ctx);
    pt_session *s = pt_session_new(e, NULL, err, sizeof err);
    CHECKF(s, "%s", err);
    if (!s) {
        pt_engine_close(e);
        return;
    }
    CHECK(pt_session_n_ctx(s) == n_ctx);
    const uint64_t b0 = pt_session_kv_bytes(s);
    int32_t toks[2048];
    for (int i = 0; i < 2048; i++)
        toks[i] = (int32_t)(i * 7 % 500);
    CHECK(pt_session_eval(s, toks, 16, NULL, 0, NULL, err, sizeof err) == 0);
    const uint64_t b1 = pt_session_kv_bytes(s);
    CHECK(pt_session_eval(s, toks + 16, 2032, NULL, 0, NULL, err, sizeof err) == 0);
    const uint64_t b2 = pt_session_kv_bytes(s);
    /* 2 layers x (K + V) x 2 heads x 64 x 2 bytes = 1024 bytes per position at f16 */
    fprintf(stderr,
            "  KV backed: %llu bytes at 0 positions, %llu at 16, %llu at 2048 (of %d "
            "x 1024 = %.1f MB for the whole context)\n",
            (unsigned long long)b0, (unsigned long long)b1, (unsigned long long)b2, n_ctx,
            n_ctx * 1024.0 / 1048576.0);
    CHECK(b0 <= 64 * 1024);
    CHECK(b1 > b0 && b1 <= 128 * 1024);
    CHECK(b2 >= 2048ull * 1024 && b2 <= 2048ull * 1024 + 256 * 1024);
    pt_session_free(s);
    pt_engine_close(e);
}

/* A block type needs heads of whole blocks; types are named in the plan. */
static void kv_type_names_and_plan(void) {
    CHECK(pt_kv_type_parse("f16") == PT_KV_F16 && pt_kv_type_parse("Q8_0") == PT_KV_Q8_0);
    CHECK(pt_kv_type_parse("bf16") == PT_KV_BF16 && pt_kv_type_parse("q4_0") == PT_KV_Q4_0);
    CHECK(pt_kv_type_parse("f32") == PT_KV_F32 && pt_kv_type_parse("q5_1") == -1);
    CHECK(!strcmp(pt_kv_type_name(PT_KV_DEFAULT), "f16"));
    char model[256], err[512];
    snprintf(model, sizeof model, "%s", t_fixture("gemma4-q4_k_m.gguf"));
    pt_engine_params ep = {.model_path = model,
                           .n_threads = 1,
                           .usage_dir = t_usage_dir(),
                           .cache_type_k = PT_KV_Q8_0,
                           .cache_type_v = PT_KV_F16};
    pt_engine *e = pt_engine_open(&ep, err, sizeof err);
    CHECKF(e, "%s", err);
    if (e) CHECK_STR_CONTAINS(pt_engine_plan(e), "KV K q8_0, V f16");
    pt_engine_close(e);
    ep.cache_type_k = 99;
    CHECK(pt_engine_open(&ep, err, sizeof err) == NULL);
    CHECK_STR_CONTAINS(err, "cache type 99");
}

T_SUITE(kv) {
    T_ADD(kv_types_qwen3moe);
    T_ADD(kv_types_gemma4);
    T_ADD(kv_types_deepseek2);
    T_ADD(kv_types_glm_dsa);
    T_ADD(kv_default_f16_passes_fixture_gates);
    T_ADD(kv_grows_with_positions);
    T_ADD(kv_type_names_and_plan);
}
