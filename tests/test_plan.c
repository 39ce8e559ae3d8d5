/* test_plan.c — the memory planner (runtime/plan.c) on hand-made numbers, and
 * the whole plan on the real shapes of big models: header-only GGUFs of
 * GLM-5.2, DeepSeek-V3, Gemma 4 26B-A4B and Qwen3-235B-A22B written by
 * build/mkmodel --shape (sparse files: the real size, a few KB on disk),
 * opened with plan_only at 16-128 GB; and mkmodel's small deepseek2 and
 * qwen3moe models (refusals, the family keys read back). */
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common.h"
#include "petrel.h"
#include "runtime/plan.h"
#include "test.h"

#define MIB (1ull << 20)
#define GIB_U (1ull << 30)

/* ===== The planner on hand-made numbers ===== */

/* Three layers: a dense one (no slot) and two MoE layers of 100 MiB slots;
 * 16 experts per layer; 1000 KV bytes per position. */
static const uint64_t slot3[3] = {0, 100 * MIB, 100 * MIB};

static plan_in base_in(uint64_t budget) {
    return (plan_in){.budget = budget,
                     .resident = 2 * GIB_U,
                     .routed = 100 * GIB_U,
                     .slot_bytes = slot3,
                     .n_layers = 3,
                     .n_expert = 16,
                     .kv_per_pos = 1000,
                     .kv_fixed = 0,
                     .slots = 0,
                     .margin = PLAN_MARGIN};
}

static void plan_fits_in_memory_uses_mmap(void) {
    plan_in in = base_in(200 * GIB_U);
    plan_out p;
    pt_err err = {{0}};
    CHECKF(plan_compute(&in, NULL, &p, &err) == 0, "%s", err.msg);
    CHECK(!p.streaming && p.slots == 0 && p.cache_bytes == 0 && p.pin_bytes == 0);
    CHECK(p.n_ctx == PT_DEFAULT_CTX && p.kv_bytes == (uint64_t)PT_DEFAULT_CTX * 1000);
    CHECK_STR_CONTAINS(
        p.line,
        "budget 200.00 GB: resident 2.00 GB, experts 100.00 GB read through the memory map");
    /* exactly fitting still fits; one byte less streams */
    in.budget = 2 * GIB_U + p.kv_bytes + PLAN_MARGIN + 100 * GIB_U;
    CHECK(plan_compute(&in, NULL, &p, &err) == 0 && !p.streaming);
    in.budget -= 1;
    CHECK(plan_compute(&in, NULL, &p, &err) == 0 && p.streaming);
    /* an unknown budget (0) never streams on its own */
    in.budget = 0;
    CHECK(plan_compute(&in, NULL, &p, &err) == 0 && !p.streaming);
    /* nor does a model without routed experts */
    const uint64_t none[3] = {0, 0, 0};
    in = base_in(GIB_U);
    in.slot_bytes = none;
    CHECK(plan_compute(&in, NULL, &p, &err) == 0 && !p.streaming);
}

static void plan_streaming_slot_arithmetic(void) {
    plan_in in = base_in(10 * GIB_U);
    in.n_expert = 64;
    plan_out p;
    pt_err err = {{0}};
    CHECKF(plan_compute(&in, NULL, &p, &err) == 0, "%s", err.msg);
    /* (10 GiB - 2 GiB - 4096 * 1000 - 512 MiB) / 200 MiB = 38.38 */
    CHECK(p.streaming && p.slots == 38);
    CHECK(p.slot_sum == 200 * MIB && p.cache_bytes == 38 * 200 * MIB);
    CHECK(p.pin_bytes == (uint64_t)(0.25 * (double)(200 * MIB) * 38));
    CHECK_STR_CONTAINS(
        p.line,
        "budget 10.00 GB: resident 2.00 GB, KV 3.9 MB (4096 ctx), experts 100.00 GB on disk "
        "streamed into 38 slots/layer (7.42 GB)");
    /* more budget, more slots, never more than the experts a layer has */
    int last = p.slots;
    for (uint64_t gb = 12; gb <= 40; gb += 4) {
        in.budget = gb * GIB_U;
        CHECK(plan_compute(&in, NULL, &p, &err) == 0 && p.streaming);
        CHECKF(p.slots >= last && p.slots <= 64, "%llu GB: %d slots after %d",
               (unsigned long long)gb, p.slots, last);
        last = p.slots;
    }
    CHECK(last == 64);
    /* the KV cache comes out of the experts' share: a longer context, fewer slots */
    in = base_in(10 * GIB_U);
    in.n_expert = 64;
    in.kv_per_pos = 200 * 1024;
    in.n_ctx = 32768; /* 6.25 GiB of KV */
    CHECK(plan_compute(&in, NULL, &p, &err) == 0 && p.streaming && p.slots == 6);
    CHECK_STR_CONTAINS(p.line, "KV 6.25 GB (32768 ctx)");
    /* the store's details go inside the cache's parentheses */
    char line[256];
    plan_line(&p, ", LFU, pread", line, sizeof line);
    CHECK_STR_CONTAINS(line, "6 slots/layer (1.17 GB, LFU, pread)");
}

/* Streaming: a prompt block takes half of what the fixed costs and one slot
 * per layer leave (the rest stays expert cache), at most the context; in mmap
 * mode half of what the fixed costs and the whole model leave; when not one
 * more row than the default fits, or the budget is unknown, the default. */
static void plan_prompt_block(void) {
    plan_in in = base_in(10 * GIB_U);
    in.n_expert = 64;
    in.row_bytes = MIB;
    in.batch = 256;
    plan_out p;
    pt_err err = {{0}};
    CHECKF(plan_compute(&in, NULL, &p, &err) == 0, "%s", err.msg);
    /* (10 GiB - 2 GiB - 4096 * 1000 - 512 MiB - 200 MiB) / 2 / 1 MiB = 3738.04 rows;
     * (10 GiB - 2 GiB - 4096 * 1000 - 512 MiB - 3738 MiB) / 200 MiB = 19.69 slots */
    CHECKF(p.streaming && p.block_rows == 3738 && p.block_bytes == 3738 * MIB && p.slots == 19,
           "block %d rows, %llu bytes, %d slots", p.block_rows, (unsigned long long)p.block_bytes,
           p.slots);
    CHECK_STR_CONTAINS(p.line, "19 slots/layer (3.71 GB); prompt blocks of 3738 rows "
                               "(activations 3.65 GB)");
    /* small rows: the whole context in one block */
    in.row_bytes = 1000;
    CHECK(plan_compute(&in, NULL, &p, &err) == 0 && p.block_rows == 4096 &&
          p.block_bytes == 4096 * 1000);
    /* rows too large for one more than the default: the default, slots as without */
    in.row_bytes = 8 * GIB_U;
    CHECK(plan_compute(&in, NULL, &p, &err) == 0 && p.block_rows == 256 && p.block_bytes == 0 &&
          p.slots == 38);
    CHECK(!strstr(p.line, "prompt blocks"));
    /* forced slots are kept whole; the block halves what they leave */
    in.row_bytes = MIB;
    in.slots = 4;
    CHECK(plan_compute(&in, NULL, &p, &err) == 0 && p.slots == 4 && p.block_rows == 3438);
    /* experts through the mmap: (120 GiB - 2 GiB - 4096 * 1000 - 512 MiB - 100 GiB) / 2 /
     * 1 MiB = 8958 rows, capped at the context (4096), and for a 32768-position context at
     * PLAN_BLOCK_MAX; then 1 GiB more than the model and the fixed costs: 512 rows */
    in = base_in(120 * GIB_U);
    in.row_bytes = MIB;
    in.batch = 256;
    CHECKF(plan_compute(&in, NULL, &p, &err) == 0 && !p.streaming && p.block_rows == 4096 &&
               p.block_bytes == 4096 * MIB,
           "block %d rows", p.block_rows);
    CHECK_STR_CONTAINS(p.line, "read through the memory map; prompt blocks of 4096 rows "
                               "(activations 4.00 GB)");
    in.n_ctx = 32768;
    CHECKF(plan_compute(&in, NULL, &p, &err) == 0 && !p.streaming &&
               p.block_rows == PLAN_BLOCK_MAX && p.block_bytes == PLAN_BLOCK_MAX * MIB,
           "block %d rows", p.block_rows);
    in.n_ctx = 0;
    in.budget = 2 * GIB_U + 4096 * 1000 + PLAN_MARGIN + 100 * GIB_U + GIB_U;
    CHECKF(plan_compute(&in, NULL, &p, &err) == 0 && !p.streaming && p.block_rows == 512,
           "block %d rows", p.block_rows);
    /* a budget not known: the default block */
    in.budget = 0;
    CHECK(plan_compute(&in, NULL, &p, &err) == 0 && !p.streaming && p.block_rows == 256 &&
          p.block_bytes == 0);
}

static void plan_refusal_names_the_numbers(void) {
    plan_in in = base_in(2 * GIB_U + GIB_U / 2);
    plan_out p;
    pt_err err = {{0}};
    CHECK(plan_compute(&in, "big.gguf", &p, &err) == -1);
    /* 2 GiB + 4096000 B + 512 MiB + 200 MiB = 2.70 GiB */
    CHECK_STR_CONTAINS(err.msg, "big.gguf: not enough memory: petrel needs at least 2.70 GB");
    CHECK_STR_CONTAINS(err.msg, "tensors 2.00 GB");
    CHECK_STR_CONTAINS(err.msg, "KV cache 0.00 GB for 4096 positions");
    CHECK_STR_CONTAINS(err.msg, "margin 0.50 GB");
    CHECK_STR_CONTAINS(err.msg, "one expert slot per layer 0.20 GB");
    CHECK_STR_CONTAINS(err.msg, "but the budget is 2.50 GB");
    /* one byte more than the minimum plans one slot */
    in.budget = 2 * GIB_U + 4096ull * 1000 + PLAN_MARGIN + 200 * MIB;
    CHECK(plan_compute(&in, NULL, &p, &err) == 0 && p.streaming && p.slots == 1);
    in.budget -= 1;
    CHECK(plan_compute(&in, NULL, &p, &err) == -1);
    /* sums that would wrap are refused, not planned */
    in = base_in(64 * GIB_U);
    in.kv_per_pos = UINT64_MAX / 2;
    CHECK(plan_compute(&in, NULL, &p, &err) == -1);
    CHECK_STR_CONTAINS(err.msg, "not enough memory");
}

static void plan_forced_slots_and_mmap(void) {
    plan_out p;
    pt_err err = {{0}};
    /* forced slots stream even when everything fits, and are not capped */
    plan_in in = base_in(200 * GIB_U);
    in.slots = 3;
    CHECK(plan_compute(&in, NULL, &p, &err) == 0 && p.streaming && p.slots == 3);
    CHECK(p.cache_bytes == 3 * 200 * MIB);
    in.slots = 100;
    CHECK(plan_compute(&in, NULL, &p, &err) == 0 && p.streaming && p.slots == 100);
    /* forced slots are the user's call: no refusal under a small budget */
    in = base_in(GIB_U);
    in.slots = 2;
    CHECK(plan_compute(&in, NULL, &p, &err) == 0 && p.streaming && p.slots == 2);
    /* mmap asked for: no cache, no refusal */
    in.slots = PT_EXPERTS_MMAP;
    CHECK(plan_compute(&in, NULL, &p, &err) == 0 && !p.streaming && p.slots == 0);
}

static void plan_context_default_and_cap(void) {
    plan_out p;
    pt_err err = {{0}};
    plan_in in = base_in(10 * GIB_U);
    in.kv_fixed = 12345;
    snprintf(in.kv_types, sizeof in.kv_types, "q8_0");
    /* unknown training context: PT_DEFAULT_CTX */
    CHECK(plan_compute(&in, NULL, &p, &err) == 0);
    CHECK(p.n_ctx == PT_DEFAULT_CTX && p.kv_bytes == 4096ull * 1000 + 12345);
    /* the default is the training context ... */
    in.n_ctx_train = 2048;
    CHECK(plan_compute(&in, NULL, &p, &err) == 0);
    CHECK(p.n_ctx == 2048 && p.kv_bytes == 2048ull * 1000 + 12345);
    CHECK_STR_CONTAINS(p.line, "(2048 ctx)");
    in.n_ctx_train = 1 << 20;
    CHECK(plan_compute(&in, NULL, &p, &err) == 0 && p.n_ctx == 1 << 20);
    CHECK_STR_CONTAINS(p.line, "context 1048576 (KV q8_0, RAM share 1000.0 MB, grows as used; "
                               "spill: none)");
    /* ... within the KV share: the budget less the resident bytes, the margin,
     * the rings and a floor of two tokens' experts per layer (2 x 4 slots):
     * at 3 GiB nothing is left: the default's positions stay in RAM, the rest spill */
    in.n_expert_used = 4;
    in.budget = 3 * GIB_U;
    CHECK(plan_compute(&in, NULL, &p, &err) == 0 && p.n_ctx == 1 << 20 &&
          p.kv_hot == PT_DEFAULT_CTX && p.kv_bytes == 4096ull * 1000 + 12345);
    /* 5 GiB: (5 GiB - 2 GiB - 512 MiB - 8 slots of 200 MiB - 12345) / 1000 positions */
    in.budget = 5 * GIB_U;
    CHECK(plan_compute(&in, NULL, &p, &err) == 0);
    const uint64_t fit = (5 * GIB_U - 2 * GIB_U - PLAN_MARGIN - 8 * p.slot_sum - 12345) / 1000;
    CHECKF(p.kv_hot == (int)fit && p.n_ctx == 1 << 20 && p.floor_bytes == 8 * p.slot_sum,
           "kv_hot %d, want %llu", p.kv_hot, (unsigned long long)fit);
    CHECK_STR_CONTAINS(p.line, "of 1048576 positions in RAM");
    CHECK_STR_CONTAINS(p.line, "context 1048576 (KV q8_0, RAM share");
    CHECK_STR_CONTAINS(p.line, "spill: positions beyond");
    CHECK_STR_CONTAINS(p.line, "to the SSD)");
    in.spill_dir = "/home/u/.cache/petrel";
    CHECK(plan_compute(&in, NULL, &p, &err) == 0);
    CHECK_STR_CONTAINS(p.line, "to /home/u/.cache/petrel)");
    in.spill_dir = NULL;
    /* the expert cache keeps at least the floor */
    CHECKF(p.streaming && p.slots >= 8, "%s", p.line);
    /* ... and a context asked for is taken as is (the session does the same) */
    in.n_ctx_train = 2048;
    in.n_ctx = 8192;
    CHECK(plan_compute(&in, NULL, &p, &err) == 0 && p.n_ctx == 8192 &&
          p.kv_bytes == 8192ull * 1000 + 12345 && p.kv_hot == 0);
    /* a forced RAM share (--kv-ram-mb): 2000 positions in RAM, any context beyond spills */
    in.kv_ram = 2000ull * 1000 + 999;
    CHECK(plan_compute(&in, NULL, &p, &err) == 0 && p.n_ctx == 8192 && p.kv_hot == 2000 &&
          p.kv_bytes == 2000ull * 1000 + 12345);
    CHECK_STR_CONTAINS(p.line, "spill: positions beyond 2000 to the SSD");
    /* ... and a context within it does not */
    in.n_ctx = 1500;
    CHECK(plan_compute(&in, NULL, &p, &err) == 0 && p.n_ctx == 1500 && p.kv_hot == 0);
    CHECK_STR_CONTAINS(p.line, "spill: none");
}

static void plan_pins(void) {
    plan_out p;
    pt_err err = {{0}};
    plan_in in = base_in(10 * GIB_U);
    in.n_expert = 64;
    in.pin_bytes = 123 * MIB;
    CHECK(plan_compute(&in, NULL, &p, &err) == 0 && p.streaming && p.pin_bytes == 123 * MIB);
    in.no_pin = 1;
    CHECK(plan_compute(&in, NULL, &p, &err) == 0 && p.streaming && p.pin_bytes == 0);
    /* nothing to pin when experts come through the mmap */
    in = base_in(200 * GIB_U);
    CHECK(plan_compute(&in, NULL, &p, &err) == 0 && !p.streaming && p.pin_bytes == 0);
}

/* ===== Real shapes, header-only ===== */

static const char *mkmodel(void) {
    const char *mk = getenv("PETREL_MKMODEL");
    return mk && *mk ? mk : "build/mkmodel";
}

static const char *bin(void) {
    const char *b = getenv("PETREL_BIN");
    return b && *b ? b : "build/petrel";
}

/* Write shape `name` header-only into the test folder (once per run); path
 * receives its path. Checks that the file has its real size (within
 * [lo_gib, hi_gib]) but occupies almost no disk. 0 when usable. */
static int shape_file(const char *name, double lo_gib, double hi_gib, char path[512]) {
    snprintf(path, 512, "%s/shape-%s.gguf", t_tmpdir(), name);
    struct stat st;
    if (stat(path, &st) != 0) {
        char cmd[2048], out[4096];
        snprintf(cmd, sizeof cmd, "%s --shape %s --header-only -o %s", mkmodel(), name, path);
        if (t_run(cmd, out, sizeof out) != 0 || stat(path, &st) != 0) {
            t_fail_at(__FILE__, __LINE__, "mkmodel --shape %s (set PETREL_MKMODEL): %s", name, out);
            return -1;
        }
    }
    const double gib = (double)st.st_size / GIB_U;
    CHECKF(gib >= lo_gib && gib <= hi_gib, "%s: %.2f GiB, expected %.0f-%.0f", name, gib, lo_gib,
           hi_gib);
    CHECKF((uint64_t)st.st_blocks * 512 < 4 * MIB, "%s: %llu bytes on disk: the file is not sparse",
           name, (unsigned long long)st.st_blocks * 512);
    return 0;
}

typedef struct shape_plan {
    int ok;        /* the plan was made (else err) */
    int streaming; /* "streamed into" */
    int slots;     /* slots per layer when streaming */
    char line[1024], err[1024];
} shape_plan;

static shape_plan plan_at(const char *path, double ram_gb, int n_ctx) {
    shape_plan r = {0};
    pt_engine_params p = {.model_path = path, .ram_gb = ram_gb, .n_ctx = n_ctx, .plan_only = 1};
    pt_engine *e = pt_engine_open(&p, r.err, sizeof r.err);
    if (e) {
        r.ok = 1;
        snprintf(r.line, sizeof r.line, "%s", pt_engine_plan(e));
        const char *s = strstr(r.line, "streamed into ");
        r.streaming = s != NULL;
        if (s) r.slots = atoi(s + strlen("streamed into "));
        /* plan only: no threads, no sessions */
        CHECK(pt_engine_n_threads(e) == 0);
        char err[512] = "";
        CHECK(pt_session_new(e, NULL, err, sizeof err) == NULL);
        CHECK_STR_CONTAINS(err, "plan only");
    }
    pt_engine_close(e);
    return r;
}

static const double budgets[] = {16, 32, 64, 128};

/* Slots grow with the budget (or stay: above the floor of two tokens'
 * experts per layer the KV share of a long training context takes the rest)
 * and stay within the experts of a layer. */
static void check_streams_everywhere(const char *path, const char *name, int from, int n_expert) {
    int last = 0;
    for (size_t k = from; k < PT_ARRAY_LEN(budgets); k++) {
        shape_plan r = plan_at(path, budgets[k], 0);
        CHECKF(r.ok && r.streaming, "%s at %.0f GB: %s%s", name, budgets[k], r.line, r.err);
        CHECKF(r.slots >= last && r.slots >= 1 && r.slots <= n_expert,
               "%s at %.0f GB: %d slots after %d", name, budgets[k], r.slots, last);
        last = r.slots;
    }
}

static void shape_glm52(void) {
    char path[512];
    if (shape_file("glm-5.2", 243, 245, path)) return;
    /* 16 GB: the resident part alone (19.55 GB of Q8_0 attention, shared experts,
     * embeddings) does not fit; the refusal names it */
    shape_plan r = plan_at(path, 16, 0);
    CHECKF(!r.ok, "glm-5.2 at 16 GB planned: %s", r.line);
    CHECK_STR_CONTAINS(r.err, "not enough memory");
    CHECK_STR_CONTAINS(r.err, "tensors 19.55 GB");
    CHECK_STR_CONTAINS(r.err, "one expert slot per layer 0.88 GB");
    CHECK_STR_CONTAINS(r.err, "but the budget is 16.00 GB");
    check_streams_everywhere(path, "glm-5.2", 1, 256);
    r = plan_at(path, 32, 0);
    CHECK_STR_CONTAINS(r.line, "resident 19.55 GB, KV 511.5 MB (4096 of 1048576 positions in "
                               "RAM), experts 224.44 GB on disk");
    /* the 1M training context does not fit the KV share at 32 GB (the floor of
     * 16 slots per layer takes 14 GB): 4096 positions stay in RAM, the rest
     * spill to the SSD */
    CHECK_STR_CONTAINS(r.line, "context 1048576 (KV f16, RAM share 511.5 MB");
    CHECK_STR_CONTAINS(r.line, "spill: positions beyond 4096 to ");
    /* 32K positions of f16 latent + rope key (f32 indexer keys: 4.0 GB) cost
     * slots, 128K (16 GB) do not fit beside one slot per layer */
    shape_plan big = plan_at(path, 32, 32768);
    CHECKF(big.ok && big.slots >= 1 && big.slots < r.slots, "32K context: %s%s", big.line, big.err);
    CHECK_STR_CONTAINS(big.line, "(32768 ctx)");
    big = plan_at(path, 32, 131072);
    CHECK(!big.ok);
    CHECK_STR_CONTAINS(big.err, "for 131072 positions");
    /* at 128 GB the share holds most of the training context */
    r = plan_at(path, 128, 0);
    CHECK_STR_CONTAINS(r.line, "KV f16");
    CHECKF(r.ok && r.slots >= 16, "%s", r.line);
}

static void shape_deepseek_v3(void) {
    char path[512];
    if (shape_file("deepseek-v3", 228, 232, path)) return;
    check_streams_everywhere(path, "deepseek-v3", 0, 256);
    shape_plan r = plan_at(path, 16, 0);
    CHECK_STR_CONTAINS(r.line, "resident 9.59 GB, KV 274.5 MB (4096 of 163840 positions in RAM), "
                               "experts 220.45 GB on disk");
}

static void shape_gemma4_26b(void) {
    char path[512];
    if (shape_file("gemma4-26b", 14, 15, path)) return;
    /* the 262144-position training context at f16 (5.24 GB) is budgeted: at
     * 16 GB the experts stream beside it, from 32 GB everything fits */
    for (size_t k = 0; k < PT_ARRAY_LEN(budgets); k++) {
        shape_plan r = plan_at(path, budgets[k], 0);
        CHECKF(r.ok && r.streaming == (k == 0), "gemma4-26b at %.0f GB: %s%s", budgets[k], r.line,
               r.err);
        CHECK_STR_CONTAINS(r.line, "context 262144 (KV f16, RAM share 5.24 GB");
    }
    /* under a small budget the KV share holds few positions, with the
     * sliding-window rings and a prompt block of 8192 rows (1.33 GB) counted
     * whole: nothing is left for more than the default 4096 positions in RAM
     * (below it the floor yields), the rest spill; the block then takes half
     * of what one slot per layer leaves */
    shape_plan r = plan_at(path, 4, 0);
    CHECKF(r.ok && r.streaming && r.slots >= 8 && r.slots < 128, "gemma4-26b at 4 GB: %s%s", r.line,
           r.err);
    CHECK_STR_CONTAINS(r.line, "KV 329.8 MB (4096 of 262144 positions in RAM)");
    CHECK_STR_CONTAINS(r.line, "prompt blocks of 5012 rows (activations 812.8 MB)");
    CHECK_STR_CONTAINS(r.line, "spill: positions beyond 4096 to ");
}

static void shape_qwen3_235b(void) {
    char path[512];
    if (shape_file("qwen3-235b", 131, 134, path)) return;
    check_streams_everywhere(path, "qwen3-235b", 0, 128);
    /* the 40960-position training context is the default */
    shape_plan r = plan_at(path, 64, 0);
    CHECK_STR_CONTAINS(r.line, "KV 7.34 GB (40960 ctx)");
}

/* `petrel inspect --ram` prints the same plans after the model's description. */
static void shape_inspect_ram(void) {
    char path[512], cmd[2048];
    static char out[1 << 17];
    if (shape_file("glm-5.2", 243, 245, path)) return;
    snprintf(cmd, sizeof cmd, "%s inspect %s --ram 16,32,64,128", bin(), path);
    CHECKF(t_run(cmd, out, sizeof out) == 0, "%s", out);
    CHECK_STR_CONTAINS(out, "architecture    glm-dsa");
    CHECK_STR_CONTAINS(out, "memory plans");
    CHECK_STR_CONTAINS(
        out, "16 GB  refused: not enough memory: petrel needs at least 21.43 GB (tensors 19.55 GB");
    CHECK_STR_CONTAINS(out, "32 GB  budget 32.00 GB: resident 19.55 GB");
    CHECK_STR_CONTAINS(out, "128 GB  budget 128.00 GB:");
    snprintf(cmd, sizeof cmd, "%s inspect %s --ram 32 -c 32768 --json", bin(), path);
    CHECKF(t_run(cmd, out, sizeof out) == 0, "%s", out);
    CHECK_STR_CONTAINS(out, "\"memory_plans\"");
    CHECK_STR_CONTAINS(out, "(32768 ctx)");
    snprintf(cmd, sizeof cmd, "%s inspect %s --ram 16,x", bin(), path);
    CHECK(t_run(cmd, out, sizeof out) == 2);
    CHECK_STR_CONTAINS(out, "--ram '16,x'");
}

/* mkmodel --arch deepseek2 / qwen3moe (weights, not header-only; the exactness references
 * use them, tests/test_exact.c): a shape llama.cpp would refuse is refused with the numbers
 * named, and a small model of each opens with the family's keys. */
static void shape_mkmodel_small_arches(void) {
    char cmd[2048], path[512];
    static char out[1 << 16];
    const char *small = "--embd 256 --layers 2 --ff 512 --ff-exp 256 --heads 4 --vocab 512 -t 1";
    snprintf(path, sizeof path, "%s/mk-small.gguf", t_tmpdir());
    /* llama.cpp asserts groups < experts, groups dividing them, used groups < groups */
    snprintf(cmd, sizeof cmd, "%s -o %s --arch deepseek2 %s --experts 4 --used 2 --groups 8",
             mkmodel(), path, small);
    CHECK(t_run(cmd, out, sizeof out) == 2);
    CHECK_STR_CONTAINS(out, "inconsistent expert groups 4/8 for 4 experts");
    snprintf(cmd, sizeof cmd,
             "%s -o %s --arch deepseek2 %s --experts 8 --used 2 --groups 4 --groups-used 4",
             mkmodel(), path, small);
    CHECK(t_run(cmd, out, sizeof out) == 2);
    CHECK_STR_CONTAINS(out, "inconsistent expert groups 4/4 for 8 experts");
    snprintf(cmd, sizeof cmd, "%s -o %s --arch qwen3moe %s --experts 4 --used 2 --kv-heads 3",
             mkmodel(), path, small);
    CHECK(t_run(cmd, out, sizeof out) == 2);
    CHECK_STR_CONTAINS(out, "inconsistent qwen3moe shape");
    /* a small model of each: petrel reads the family's keys back */
    snprintf(cmd, sizeof cmd,
             "%s -o %s --arch deepseek2 %s --experts 8 --used 2 --groups 4 --groups-used 2 && "
             "%s inspect %s",
             mkmodel(), path, small, bin(), path);
    CHECKF(t_run(cmd, out, sizeof out) == 0, "%s", out);
    CHECK_STR_CONTAINS(out, "architecture    deepseek2");
    CHECK_STR_CONTAINS(out, "expert_group_count                       4");
    CHECK_STR_CONTAINS(out, "nextn_predict_layers                     0");
    snprintf(cmd, sizeof cmd,
             "%s -o %s --arch qwen3moe %s --experts 4 --used 2 --kv-heads 2 --head-dim 64 && "
             "%s inspect %s",
             mkmodel(), path, small, bin(), path);
    CHECKF(t_run(cmd, out, sizeof out) == 0, "%s", out);
    CHECK_STR_CONTAINS(out, "architecture    qwen3moe");
    CHECK_STR_CONTAINS(out, "attention.head_count_kv                  2");
    unlink(path);
}

T_SUITE(plan) {
    T_ADD(plan_fits_in_memory_uses_mmap);
    T_ADD(plan_streaming_slot_arithmetic);
    T_ADD(plan_prompt_block);
    T_ADD(plan_refusal_names_the_numbers);
    T_ADD(plan_forced_slots_and_mmap);
    T_ADD(plan_context_default_and_cap);
    T_ADD(plan_pins);
    T_ADD(shape_glm52);
    T_ADD(shape_deepseek_v3);
    T_ADD(shape_gemma4_26b);
    T_ADD(shape_qwen3_235b);
    T_ADD(shape_inspect_ram);
    T_ADD(shape_mkmodel_small_arches);
}
