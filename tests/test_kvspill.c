/* test_kvspill.c — KV beyond RAM (nn/kv.h, kv_arena_spill): with the KV cache's RAM share
 * forced tiny (pt_engine_params.kv_ram_mb), most positions of a 600-token prompt live in the
 * spill file, and the logits of the prompt and of decode steps after it are bit-identical to
 * the same session with its KV all in RAM, on every fixture family (glm-dsa: its DSA indexer
 * selects the rows read; deepseek2 and qwen3moe: full attention reads every position;
 * gemma4: sliding-window rings in RAM, global layers spilled). A spill file that cannot grow
 * (RLIMIT_FSIZE, as a full disk gives ENOSPC) fails the evaluation with a message naming the
 * file's folder; the positions cached before stay valid and the session continues exactly.
 * `petrel generate --kv-ram-mb` spills into the cache directory and says so in the plan line
 * and the KV statistics. The arena's cache of selected spilled pages keeps what recent steps
 * selected, within the share, and returns the bytes written (kvspill_cache_bounded); a
 * gathered buffer's selected rows read directly come back whole (kvspill_gather_rows).
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "nn/kv.h"
#include "os/os.h"
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
static void spill_equals_ram(const char *model, int ctk, double kv_ram_mb) {
    char err[512];
    pt_engine *ram = open_model(model, ctk, 0, err, sizeof err);
    CHECKF(ram, "%s: %s", model, err);
    pt_engine *ssd = open_model(model, ctk, kv_ram_mb, err, sizeof err);
    CHECKF(ssd, "%s: %s", model, err);
    if (!ram || !ssd) {
        pt_engine_close(ram);
        pt_engine_close(ssd);
        return;
    }
    CHECKF(strstr(pt_engine_plan(ssd), "spill: positions beyond"), "%s: %s", model,
           pt_engine_plan(ssd));
    const int nv = pt_engine_n_vocab(ram);
    int32_t t[N_PROMPT + 3 * N_DECODE];
    make_tokens(t, N_PROMPT + 3 * N_DECODE, nv);
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
        /* glm-dsa's typed latent rows: decode steps read their selected spilled rows
         * directly where the file system allows (the prompt's chunks select more than the
         * gather buffer holds: through the mapping) */
        pt_kv_cache_stats st;
        pt_session_kv_cache(b, &st);
        if (st.gather_cap)
            CHECKF(st.gathers >= N_DECODE && st.gather_rows > 0, "%s: %llu gathers", model,
                   (unsigned long long)st.gathers);
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
        /* decode again over the rows written after the truncation (a gather buffer that kept
         * rows holds none of the old ones) */
        for (int i = 0; i < 3 * N_DECODE; i++) {
            CHECK(pt_session_eval(a, t + N_PROMPT + i, 1, la, 0, NULL, err, sizeof err) == 0);
            CHECK(pt_session_eval(b, t + N_PROMPT + i, 1, lb, 0, NULL, err, sizeof err) == 0);
            CHECKF(!memcmp(la, lb, sizeof(float) * nv),
                   "%s: decode step %d after a truncation differs spilled", model, i);
        }
        /* with room for a decode step's rows, the buffer kept rows between steps (this
         * model's indexer selects most of its rows again) */
        pt_session_kv_cache(b, &st);
        if (st.gather_cap && kv_ram_mb >= 0.1)
            CHECKF(st.gather_kept > 0, "%s: %llu of %llu gathered rows kept", model,
                   (unsigned long long)st.gather_kept, (unsigned long long)st.gather_rows);
    }
    free(la), free(lb);
    pt_session_free(a), pt_session_free(b);
    pt_engine_close(ram), pt_engine_close(ssd);
}

static void kvspill_glm_dsa(void) {
    spill_equals_ram("glm-dsa-rq2k.gguf", PT_KV_F16, 0.02);
    spill_equals_ram("glm-dsa-rq2k.gguf", PT_KV_F32, 0.02);
    spill_equals_ram("glm-dsa-rq2k.gguf", PT_KV_F16, 0.1);
}
static void kvspill_deepseek2(void) {
    spill_equals_ram("deepseek2-q8_0.gguf", PT_KV_F16, 0.02);
}
static void kvspill_gemma4(void) {
    spill_equals_ram("gemma4-rq2k.gguf", PT_KV_F16, 0.02);
}
static void kvspill_qwen3moe(void) {
    spill_equals_ram("qwen3moe-rq2k.gguf", PT_KV_Q8_0, 0.02);
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
    /* --json has the direct reads' figures: decode steps gathered where the file system
     * has O_DIRECT (kv_gather_cap 0 where it has not) */
    snprintf(cmd, sizeof cmd,
             "yes 'the quick brown fox jumps over the lazy dog' | head -18 | XDG_CACHE_HOME=%s "
             "%s generate -m %s -n 8 --greedy -t 2 -c 512 --kv-ram-mb 0.02 --json 2>&1 >/dev/null",
             t_tmpdir(), bin, t_fixture("glm-dsa-rq2k.gguf"));
    CHECKF(t_run(cmd, out, sizeof out) == 0, "%s", out);
    unsigned long long cap = 1, gathers = 0, rows = 0, reads = 0;
    const char *j = strstr(out, "\"kv_gather_cap\": ");
    CHECKF(j && sscanf(j,
                       "\"kv_gather_cap\": %llu, \"kv_gathers\": %llu, \"kv_gather_rows\": %llu, "
                       "\"kv_gather_kept\": %*u, \"kv_gather_reads\": %llu",
                       &cap, &gathers, &rows, &reads) == 4,
           "%s", out);
    if (cap) CHECKF(gathers >= 7 && rows > 0 && reads > 0, "%s", out);
    snprintf(cmd, sizeof cmd, "%s generate -m %s -p hi --kv-ram-mb 0 2>&1", bin,
             t_fixture("glm-dsa-rq2k.gguf"));
    CHECK(t_run(cmd, out, sizeof out) == 2);
    CHECK_STR_CONTAINS(out, "--kv-ram-mb");
}

/* `petrel generate --tokens --session FILE`: the first run evaluates the prompt and saves its
 * KV, a second one (its KV spilled this time) restores it and decodes the same ids; other ids
 * are evaluated again, not restored. */
static void kvspill_cli_session_restore(void) {
    static char out[3][1 << 14], log[1 << 14];
    char ids[4096] = "", cmd[8192], file[600];
    size_t n = 0;
    for (int i = 0; i < 400; i++)
        n += (size_t)snprintf(ids + n, sizeof ids - n, "%s%d", i ? "," : "", 3 + (i * 53) % 200);
    const char *bin =
        getenv("PETREL_BIN") && *getenv("PETREL_BIN") ? getenv("PETREL_BIN") : "build/petrel";
    snprintf(file, sizeof file, "%s/kvspill-session.bin", t_tmpdir());
    remove(file);
    const char *flags[3] = {"", "--kv-ram-mb 0.02", "--kv-ram-mb 0.02"};
    for (int r = 0; r < 3; r++) {
        if (r == 2) ids[0] = '4'; /* another prompt */
        snprintf(cmd, sizeof cmd,
                 "XDG_CACHE_HOME=%s %s generate -m %s --tokens %s -n 6 -t 2 -c 512 --session %s %s "
                 "2>%s/kvspill-session.log",
                 t_tmpdir(), bin, t_fixture("glm-dsa-rq2k.gguf"), ids, file, flags[r], t_tmpdir());
        CHECKF(t_run(cmd, out[r], sizeof out[r]) == 0, "run %d: %s", r, out[r]);
        snprintf(cmd, sizeof cmd, "cat %s/kvspill-session.log", t_tmpdir());
        t_run(cmd, log, sizeof log);
        if (r == 1) {
            CHECK_STR_CONTAINS(log, "399 positions of KV restored");
            CHECKF(!strcmp(out[0], out[1]), "restored and spilled: %s, evaluated: %s", out[1],
                   out[0]);
        }
        if (r == 2) CHECK_STR_CONTAINS(log, "another prompt's or model's; evaluating the prompt");
    }
    snprintf(cmd, sizeof cmd, "%s generate -m %s -p hi --session %s 2>&1", bin,
             t_fixture("glm-dsa-rq2k.gguf"), file);
    CHECK(t_run(cmd, out[0], sizeof out[0]) == 2);
    CHECK_STR_CONTAINS(out[0], "--session needs --tokens");
    remove(file);
}

/* The byte of row r, column j, as the arena test writes it. */
static uint8_t row_byte(int r, int j) {
    return (uint8_t)(r * 31 + j * 7 + 1);
}

/* Positions [from, to) of the buffers bufs[0..nb) (rows of `row` bytes) written in chunks of
 * `step` positions, each chunk reserved and settled: row r's byte j is row_byte(r, j), xor
 * 0x5a from position `flip` on (rows written again with other bytes). */
static void write_rows(kv_arena *a, uint8_t *const *bufs, int nb, size_t row, int from, int to,
                       int step, int flip) {
    pt_err e = {0};
    for (int pos = from; pos < to; pos += step) {
        CHECK(kv_arena_reserve(a, pos + step, &e) == 0);
        for (int t = pos; t < pos + step; t++)
            for (size_t j = 0; j < row; j++)
                for (int b = 0; b < nb; b++)
                    bufs[b][(size_t)t * row + j] =
                        (uint8_t)(row_byte(t, (int)j) ^ (t >= flip ? 0x5a : 0));
        CHECKF(kv_arena_settle(a, pos + step, &e) == 0, "%s", e.msg);
    }
}

/* Bytes of the rows sel[0..n) at rowp[sel[i]] other than write_rows wrote them. */
static int rows_wrong(const uint8_t *const *rowp, const int *sel, int n, size_t row, int flip) {
    int bad = 0;
    for (int i = 0; i < n; i++)
        for (size_t j = 0; j < row; j++)
            bad += rowp[sel[i]][j] !=
                   (uint8_t)(row_byte(sel[i], (int)j) ^ (sel[i] >= flip ? 0x5a : 0));
    return bad;
}

/* Two sparse buffers (rows of 1152 bytes, as GLM-5's f16 latent) in an arena spilling beyond a
 * share of 64 positions: 32 newest positions in RAM, a cache of 2 x 9 pages. Written in chunks
 * of 16 positions, then "decode steps" that select rows: after every settle the cache holds no
 * more than its bound, the spill mapping's resident pages stay within the window plus the cache
 * (mincore: what the kernel really holds), a selection that fits, repeated, is all hits,
 * and every row reads back its bytes. */
static void kvspill_cache_bounded(void) {
    enum { ROW = 1152, CTX = 2048, SHARE = 64, N = 1500 };
    kv_arena a;
    pt_err e = {0};
    CHECK(kv_arena_init(&a, 1 << 20) == 0);
    CHECKF(kv_arena_spill(&a, 2 * (CTX * ROW + 65536), t_tmpdir(), SHARE, CTX, &e) == 0, "%s",
           e.msg);
    uint8_t *buf[2] = {kv_arena_rows(&a, ROW, CTX, 1), kv_arena_rows(&a, ROW, CTX, 1)};
    CHECK(buf[0] && buf[1]);
    size_t cap = 0;
    kv_arena_cache_pages(&a, &cap);
    CHECKF(cap == 2 * (SHARE / 2 * ROW / os_page_size()), "cache bound %zu pages", cap);
    const size_t np = (CTX * ROW + os_page_size() - 1) / os_page_size() + 1;
    /* the hot window's pages (two partial ones at its ends) and the cache */
    const size_t bound = 2 * ((size_t)(SHARE / 2) * ROW / os_page_size() + 2) + cap;
    uint8_t *marks = calloc(np, 1);
    int pos = 0;
    for (int step = 0; pos < N && buf[0] && buf[1]; step++) {
        const int T = pos < 1200 ? 16 : 1;
        CHECK(kv_arena_reserve(&a, pos + T, &e) == 0);
        /* the selection: while decoding, 40 rows of the cold part, the same set on even steps
         * (a working set of up to 2 x 40 x 2 pages: beyond the cache, so evictions happen)
         * and 6 fixed rows on odd ones */
        for (int b = 0; b < 2 && T == 1; b++) {
            int sel[40], n = 0;
            for (int i = 0; i < (step % 2 ? 6 : 40); i++)
                sel[n++] = step % 2 ? 100 + 150 * i : (i * 997 + b * 13) % 1000;
            kv_prefetch_mark(marks, ROW, sel, n);
            kv_prefetch_flush(&a, buf[b], marks, np);
            for (int i = 0; i < n; i++)
                for (int j = 0; j < ROW; j += 97)
                    if (buf[b][(size_t)sel[i] * ROW + j] != row_byte(sel[i], j)) {
                        CHECKF(0, "row %d byte %d read back wrong at step %d", sel[i], j, step);
                        i = n;
                        break;
                    }
        }
        for (int b = 0; b < 2; b++)
            for (int t = 0; t < T; t++)
                for (int j = 0; j < ROW; j++)
                    buf[b][(size_t)(pos + t) * ROW + j] = row_byte(pos + t, j);
        pos += T;
        CHECKF(kv_arena_settle(&a, pos, &e) == 0, "%s", e.msg);
        const size_t kept = kv_arena_cache_pages(&a, NULL);
        CHECKF(kept <= cap, "step %d: %zu pages cached, bound %zu", step, kept, cap);
        const size_t res = kv_arena_resident(&a) / os_page_size();
        CHECKF(res <= bound, "step %d: %zu pages resident, bound %zu", step, res, bound);
        if (T == 1 && step % 2 == 0)
            CHECKF(kept == cap, "step %d: cache not full (%zu)", step, kept);
    }
    /* a selection that fits the cache (4 rows a buffer: 16 pages at most), repeated: from its
     * second step on, every selected page is a hit */
    for (int step = 0; step < 3; step++) {
        const uint64_t hits0 = a.sel_hits, pages0 = a.sel_pages;
        for (int b = 0; b < 2; b++) {
            const int sel[4] = {100, 350, 600, 850};
            kv_prefetch_mark(marks, ROW, sel, 4);
            kv_prefetch_flush(&a, buf[b], marks, np);
        }
        CHECK(kv_arena_settle(&a, pos, &e) == 0);
        const uint64_t hits = a.sel_hits - hits0, pages = a.sel_pages - pages0;
        CHECKF(pages >= 8 && pages <= 16 && hits == (step ? pages : 0),
               "repeat %d: %llu hits of %llu pages", step, (unsigned long long)hits,
               (unsigned long long)pages);
    }
    free(marks);
    kv_arena_free(&a);
}

/* Rows of a gathered buffer (KV_READ_GATHERED) read directly (kv_gather): every selected row
 * reads back its bytes from the gather buffer, rows next to each other come in one read, a
 * selection larger than the buffer is refused (the caller reads through the mapping) and so
 * is a buffer read through the mapping. */
static void kvspill_gather_rows(void) {
    enum { ROW = 1152, CTX = 4096, SHARE = 512 };
    kv_arena a;
    pt_err e = {0};
    CHECK(kv_arena_init(&a, 1 << 20) == 0);
    CHECKF(kv_arena_spill(&a, 2 * (CTX * ROW + 65536), t_tmpdir(), SHARE, CTX, &e) == 0, "%s",
           e.msg);
    uint8_t *g = kv_arena_rows(&a, ROW, CTX, KV_READ_GATHERED);
    uint8_t *m = kv_arena_rows(&a, ROW, CTX, KV_READ_SELECTED);
    CHECK(g && m);
    if (!g || !m || !a.gcap) {
        if (g && m) t_skip("no O_DIRECT reads on the temporary folder's file system");
        kv_arena_free(&a);
        return;
    }
    CHECKF(a.gcap == (size_t)(SHARE / 2) * ROW, "gather buffer %zu", a.gcap);
    write_rows(&a, (uint8_t *const[]){g, m}, 2, ROW, 0, CTX, 64, CTX);
    const int cold = (int)a.cold;
    CHECKF(cold > CTX / 2, "%d positions spilled", cold);
    const uint8_t **rowp = calloc(CTX, sizeof *rowp);
    int *sel = malloc(sizeof(int) * CTX);
    /* spread rows (17 apart: gaps of ~19 KB, each its own read), then a run of 100 rows */
    int n = 0;
    for (int r = 5; r < cold && n < 120; r += 17)
        sel[n++] = r;
    const uint64_t reads0 = a.g_reads;
    CHECK(kv_gather(&a, g, sel, n, rowp, &e) == 1);
    CHECKF(a.g_reads - reads0 == (uint64_t)n, "%llu reads for %d spread rows",
           (unsigned long long)(a.g_reads - reads0), n);
    CHECK(!rows_wrong(rowp, sel, n, ROW, CTX));
    for (int i = 0; i < 100; i++)
        sel[i] = 1000 + i;
    const uint64_t reads1 = a.g_reads;
    CHECK(kv_gather(&a, g, sel, 100, rowp, &e) == 1);
    CHECKF(a.g_reads - reads1 == 1, "%llu reads for 100 adjacent rows",
           (unsigned long long)(a.g_reads - reads1));
    for (int i = 0; i < 100; i++)
        CHECKF(!memcmp(rowp[sel[i]], m + (size_t)sel[i] * ROW, ROW), "row %d gathered wrong",
               sel[i]);
    /* every spilled row: more than the buffer holds */
    for (int i = 0; i < cold; i++)
        sel[i] = i;
    CHECK(kv_gather(&a, g, sel, cold, rowp, &e) == 0);
    CHECK(kv_gather(&a, m, sel, 10, rowp, &e) == 0);
    free(rowp);
    free(sel);
    kv_arena_free(&a);
}

/* Rows a buffer's steps select again are kept: the same rows gathered repeatedly switch the
 * buffer to caching, then they are found there and not read again; rows new to a step are
 * read and kept; a truncation drops the copies of the rows written again; selections that
 * no longer repeat switch it back to streaming. */
static void kvspill_gather_cache(void) {
    enum { ROW = 1152, CTX = 4096, SHARE = 512, N = 100 };
    kv_arena a;
    pt_err e = {0};
    CHECK(kv_arena_init(&a, 1 << 20) == 0);
    CHECKF(kv_arena_spill(&a, CTX * ROW + 65536, t_tmpdir(), SHARE, CTX, &e) == 0, "%s", e.msg);
    uint8_t *g = kv_arena_rows(&a, ROW, CTX, KV_READ_GATHERED);
    CHECK(g != NULL);
    if (!g || !a.gcap) {
        if (g) t_skip("no O_DIRECT reads on the temporary folder's file system");
        kv_arena_free(&a);
        return;
    }
    write_rows(&a, &g, 1, ROW, 0, CTX, 64, CTX);
    const int cold = (int)a.cold;
    CHECKF(cold > 2 * 17 * N, "%d positions spilled", cold);
    const uint8_t **rowp = calloc(CTX, sizeof *rowp);
    int sel[2 * N];
    int bad = 0, flip = CTX; /* rows from flip on were written again */
#define GATHER(n)                                                                                  \
    do {                                                                                           \
        CHECK(kv_gather(&a, g, sel, (n), rowp, &e) == 1);                                          \
        bad += rows_wrong(rowp, sel, (n), ROW, flip);                                              \
    } while (0)
    for (int i = 0; i < N; i++)
        sel[i] = 5 + 17 * i;
    for (int k = 0; k < 4; k++)
        GATHER(N);
    CHECKF(a.g_caching == 1, "caching %d after four equal selections", a.g_caching);
    GATHER(N); /* the slots start empty: read, and kept */
    uint64_t reads = a.g_reads, hits = a.g_hits;
    GATHER(N);
    CHECKF(a.g_reads == reads && a.g_hits - hits == N, "%llu reads, %llu rows kept",
           (unsigned long long)(a.g_reads - reads), (unsigned long long)(a.g_hits - hits));
    /* half the rows again, half new (between them): only the new ones are read */
    for (int i = 0; i < N; i++)
        sel[i] = 5 + 17 * (2 * (i / 2)) + (i % 2 ? 8 : 0);
    reads = a.g_reads, hits = a.g_hits;
    GATHER(N);
    CHECKF(a.g_reads - reads == N / 2 && a.g_hits - hits == N / 2, "%llu reads, %llu rows kept",
           (unsigned long long)(a.g_reads - reads), (unsigned long long)(a.g_hits - hits));
    /* cut to 1000 positions and written again with other bytes: no copy of the old ones */
    flip = 1000;
    kv_arena_truncate(&a, flip);
    write_rows(&a, &g, 1, ROW, flip, CTX, 8, flip);
    CHECKF(a.cold > 5 + 17 * N, "%lld positions spilled", (long long)a.cold);
    GATHER(N);
    CHECKF(a.g_caching == 1, "caching %d", a.g_caching);
    CHECKF(!bad, "%d bytes gathered wrong", bad);
    /* selections that share nothing with the step before: streaming again */
    for (int k = 0; k < 8; k++) {
        for (int i = 0; i < N; i++)
            sel[i] = 3 + k + 11 * i;
        GATHER(N);
    }
    CHECKF(a.g_caching == 0, "caching %d after eight new selections", a.g_caching);
    CHECKF(!bad, "%d bytes gathered wrong", bad);
#undef GATHER
    free(rowp);
    kv_arena_free(&a);
}

T_SUITE(kvspill) {
    T_ADD_TIMEOUT(kvspill_gather_rows, 60);
    T_ADD_TIMEOUT(kvspill_gather_cache, 60);
    T_ADD_TIMEOUT(kvspill_cache_bounded, 60);
    T_ADD_TIMEOUT(kvspill_cli_session_restore, 120);
    T_ADD_TIMEOUT(kvspill_glm_dsa, 300);
    T_ADD_TIMEOUT(kvspill_deepseek2, 300);
    T_ADD_TIMEOUT(kvspill_gemma4, 300);
    T_ADD_TIMEOUT(kvspill_qwen3moe, 300);
    T_ADD_TIMEOUT(kvspill_full_disk_errors, 300);
    T_ADD_TIMEOUT(kvspill_cli_flag_and_stats, 300);
}
