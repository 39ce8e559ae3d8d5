/* test_kvspill.c — KV beyond RAM (nn/kv.h, kv_arena_spill): with the KV cache's RAM share
 * forced tiny (pt_engine_params.kv_ram_mb), most positions of a 600-token prompt live in the
 * spill file, and the logits of the prompt and of decode steps after it are bit-identical to
 * the same session with its KV all in RAM, on every fixture family (glm-dsa: its DSA indexer
 * selects the rows read; deepseek2 and qwen3moe: full attention reads every position;
 * gemma4: sliding-window rings in RAM, global layers spilled). A spill file that cannot grow
 * (RLIMIT_FSIZE, as a full disk gives ENOSPC) fails the evaluation with a message naming the
 * file's folder; the positions cached before stay valid and the session continues exactly.
 * `petrel generate --kv-ram-mb` spills into the cache directory and says so in the plan line
 * and the KV statistics.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "petrel.h"
#include "test.h"

enum { N_PROMPT = 600, N_DECODE = 6, N_CTX = 4096, N_BATCH = 64 };

/* A prompt of n ids in the vocabulary: a fixed pseudo-random walk. */
static void make_tokens(int32_t *out, int n, int n_vocab) {
    uint32_t x = 12345;
    for (int i = 0; i < n; i++) {
        x = x * 1664525u + 1013904223u;
        out[i] = (int32_t)(x >> 8) % n_vocab;
    }
}

/* kv_ram_mb 0: the KV all in RAM (the fixtures fit the budget). */
static pt_engine *open_model(const char *model, int ctk, double kv_ram_mb, char *err, size_t len) {
    pt_engine_params ep = {.model_path = t_fixture(model),
                           .n_threads = 2,
                           .usage_dir = t_usage_dir(),
                           .cache_dir = t_tmpdir(),
                           .cache_type_k = ctk,
                           .cache_type_v = ctk,
                           .kv_ram_mb = kv_ram_mb};
    return pt_engine_open(&ep, err, len);
}

/* The prompt in chunks of 64, then N_DECODE single-token steps: every step's logits equal. */
static void spill_equals_ram(const char *model, int ctk) {
    char err[512];
    pt_engine *ram = open_model(model, ctk, 0, err, sizeof err);
    CHECKF(ram, "%s: %s", model, err);
    pt_engine *ssd = open_model(model, ctk, 0.02, err, sizeof err);
    CHECKF(ssd, "%s: %s", model, err);
    if (!ram || !ssd) {
        pt_engine_close(ram);
        pt_engine_close(ssd);
        return;
    }
    CHECKF(strstr(pt_engine_plan(ssd), "spill: positions beyond"), "%s: %s", model,
           pt_engine_plan(ssd));
    const int nv = pt_engine_n_vocab(ram);
    int32_t t[N_PROMPT + N_DECODE];
    make_tokens(t, N_PROMPT + N_DECODE, nv);
    const pt_session_params sp = {.n_ctx = N_CTX, .n_batch = N_BATCH};
    pt_session *a = pt_session_new(ram, &sp, err, sizeof err);
    CHECKF(a, "%s", err);
    pt_session *b = pt_session_new(ssd, &sp, err, sizeof err);
    CHECKF(b, "%s", err);
    float *la = malloc(sizeof(float) * nv), *lb = malloc(sizeof(float) * nv);
    if (a && b) {
        CHECK(pt_session_kv_hot(a) == 0 && pt_session_kv_disk_bytes(a) == 0);
        /* most of the prompt is on disk: the share holds under a sixth of it */
        const int hot = pt_session_kv_hot(b);
        CHECKF(hot >= 1 && hot < N_PROMPT / 6, "%s: %d positions in RAM", model, hot);
        CHECK(pt_session_eval(a, t, N_PROMPT, la, 0, NULL, err, sizeof err) == 0);
        CHECKF(pt_session_eval(b, t, N_PROMPT, lb, 0, NULL, err, sizeof err) == 0, "%s", err);
        CHECKF(!memcmp(la, lb, sizeof(float) * nv), "%s (ctk %s): prompt logits differ spilled",
               model, pt_kv_type_name(ctk));
        for (int i = 0; i < N_DECODE; i++) {
            CHECK(pt_session_eval(a, t + N_PROMPT + i, 1, la, 0, NULL, err, sizeof err) == 0);
            CHECK(pt_session_eval(b, t + N_PROMPT + i, 1, lb, 0, NULL, err, sizeof err) == 0);
            CHECKF(!memcmp(la, lb, sizeof(float) * nv), "%s: decode step %d differs spilled", model,
                   i);
        }
        /* the spilled rows are on disk and out of RAM */
        CHECKF(pt_session_kv_disk_bytes(b) > 0, "%s: nothing on disk", model);
        CHECKF(pt_session_kv_bytes(b) < pt_session_kv_bytes(a), "%s: %llu in RAM spilled, %llu not",
               model, (unsigned long long)pt_session_kv_bytes(b),
               (unsigned long long)pt_session_kv_bytes(a));
        /* truncated into the spilled part and evaluated again: still equal */
        CHECK(pt_session_truncate(a, 300) == 300 || pt_session_n_past(a) == 0);
        const int ka = pt_session_n_past(a);
        CHECK(pt_session_truncate(b, 300) == ka);
        CHECK(pt_session_eval(a, t + ka, N_PROMPT - ka, la, 0, NULL, err, sizeof err) == 0);
        CHECK(pt_session_eval(b, t + ka, N_PROMPT - ka, lb, 0, NULL, err, sizeof err) == 0);
        CHECKF(!memcmp(la, lb, sizeof(float) * nv), "%s: logits after a truncation differ", model);
    }
    free(la), free(lb);
    pt_session_free(a), pt_session_free(b);
    pt_engine_close(ram), pt_engine_close(ssd);
}

static void kvspill_glm_dsa(void) {
    spill_equals_ram("glm-dsa-rq2k.gguf", PT_KV_F16);
    spill_equals_ram("glm-dsa-rq2k.gguf", PT_KV_F32);
}
static void kvspill_deepseek2(void) {
    spill_equals_ram("deepseek2-q8_0.gguf", PT_KV_F16);
}
static void kvspill_gemma4(void) {
    spill_equals_ram("gemma4-rq2k.gguf", PT_KV_F16);
}
static void kvspill_qwen3moe(void) {
    spill_equals_ram("qwen3moe-rq2k.gguf", PT_KV_Q8_0);
}

/* The soft limit only: the hard one stays, so the limit can be lifted again. */
static void set_fsize(rlim_t n) {
    struct rlimit rl;
    CHECK(getrlimit(RLIMIT_FSIZE, &rl) == 0);
    rl.rlim_cur = n;
    CHECK(setrlimit(RLIMIT_FSIZE, &rl) == 0);
}

/* The spill file cannot grow (RLIMIT_FSIZE: EFBIG; a full disk: ENOSPC): the evaluation fails
 * with the reason, nothing crashes, the positions cached before stay and the session goes on
 * to the logits of a session that never failed. */
static void kvspill_full_disk_errors(void) {
    char err[512];
    pt_engine *ram = open_model("qwen3moe-rq2k.gguf", PT_KV_F16, 0, err, sizeof err);
    pt_engine *ssd = open_model("qwen3moe-rq2k.gguf", PT_KV_F16, 0.02, err, sizeof err);
    CHECKF(ram && ssd, "%s", err);
    if (!ram || !ssd) {
        pt_engine_close(ram);
        pt_engine_close(ssd);
        return;
    }
    const int nv = pt_engine_n_vocab(ram), n = 1400;
    int32_t *t = malloc(sizeof(int32_t) * n);
    make_tokens(t, n, nv);
    const pt_session_params sp = {.n_ctx = N_CTX, .n_batch = N_BATCH};
    pt_session *a = pt_session_new(ram, &sp, err, sizeof err);
    pt_session *b = pt_session_new(ssd, &sp, err, sizeof err);
    float *la = malloc(sizeof(float) * nv), *lb = malloc(sizeof(float) * nv);
    signal(SIGXFSZ, SIG_IGN);
    struct rlimit old;
    getrlimit(RLIMIT_FSIZE, &old);
    if (a && b) {
        /* the first block of the file cannot be made */
        set_fsize(1);
        err[0] = 0;
        CHECK(pt_session_eval(b, t, N_PROMPT, lb, 0, NULL, err, sizeof err) != 0);
        CHECK_STR_CONTAINS(err, "the KV spill file in");
        CHECK_STR_CONTAINS(err, "cannot grow");
        CHECK(pt_session_n_past(b) == 0);
        /* room again: the prompt */
        set_fsize(old.rlim_cur);
        CHECK(pt_session_eval(a, t, N_PROMPT, la, 0, NULL, err, sizeof err) == 0);
        CHECKF(pt_session_eval(b, t, N_PROMPT, lb, 0, NULL, err, sizeof err) == 0, "%s", err);
        CHECK(!memcmp(la, lb, sizeof(float) * nv));
        /* full again while the file grows past its first 1024 positions: the chunks before
         * the one that needs the new block are kept */
        set_fsize(1);
        err[0] = 0;
        CHECK(pt_session_eval(b, t + N_PROMPT, n - N_PROMPT, lb, 0, NULL, err, sizeof err) != 0);
        CHECK_STR_CONTAINS(err, "cannot grow");
        const int kept = pt_session_n_past(b);
        CHECKF(kept >= N_PROMPT && kept <= 1024, "%d positions kept", kept);
        set_fsize(old.rlim_cur);
        CHECK(pt_session_eval(a, t + N_PROMPT, n - N_PROMPT, la, 0, NULL, err, sizeof err) == 0);
        CHECKF(pt_session_eval(b, t + kept, n - kept, lb, 0, NULL, err, sizeof err) == 0, "%s",
               err);
        CHECK(!memcmp(la, lb, sizeof(float) * nv));
    }
    setrlimit(RLIMIT_FSIZE, &old);
    free(t), free(la), free(lb);
    pt_session_free(a), pt_session_free(b);
    pt_engine_close(ram), pt_engine_close(ssd);
}

/* The CLI: --kv-ram-mb spills into $XDG_CACHE_HOME/petrel, the plan line names it, --stats
 * shows the bytes on disk; a bad value stops before the model is opened. */
static void kvspill_cli_flag_and_stats(void) {
    static char out[1 << 16];
    char ids[4096] = "", cmd[8192];
    size_t n = 0;
    for (int i = 0; i < 400; i++)
        n += (size_t)snprintf(ids + n, sizeof ids - n, "%s%d", i ? "," : "", 3 + (i * 37) % 200);
    const char *bin =
        getenv("PETREL_BIN") && *getenv("PETREL_BIN") ? getenv("PETREL_BIN") : "build/petrel";
    snprintf(cmd, sizeof cmd,
             "XDG_CACHE_HOME=%s %s generate -m %s --tokens %s -n 4 -t 2 -c 512 --kv-ram-mb 0.02 "
             "--stats 2>&1 >/dev/null",
             t_tmpdir(), bin, t_fixture("glm-dsa-rq2k.gguf"), ids);
    CHECKF(t_run(cmd, out, sizeof out) == 0, "%s", out);
    char want[4200];
    snprintf(want, sizeof want, "to %s/petrel)", t_tmpdir());
    CHECK_STR_CONTAINS(out, "context 512 (KV f16, RAM share");
    CHECK_STR_CONTAINS(out, "spill: positions beyond");
    CHECK_STR_CONTAINS(out, want);
    CHECK_STR_CONTAINS(out, "KV 403/512 f16"); /* the last token is not evaluated */
    CHECK_STR_CONTAINS(out, "on disk, prefix hits 0");
    snprintf(cmd, sizeof cmd, "%s generate -m %s -p hi --kv-ram-mb 0 2>&1", bin,
             t_fixture("glm-dsa-rq2k.gguf"));
    CHECK(t_run(cmd, out, sizeof out) == 2);
    CHECK_STR_CONTAINS(out, "--kv-ram-mb");
}

T_SUITE(kvspill) {
    T_ADD_TIMEOUT(kvspill_glm_dsa, 300);
    T_ADD_TIMEOUT(kvspill_deepseek2, 300);
    T_ADD_TIMEOUT(kvspill_gemma4, 300);
    T_ADD_TIMEOUT(kvspill_qwen3moe, 300);
    T_ADD_TIMEOUT(kvspill_full_disk_errors, 300);
    T_ADD_TIMEOUT(kvspill_cli_flag_and_stats, 300);
}
