/* test_pcache.c — prefixes that survive (engine/pcache.c): a prefix stored by one session and
 * restored into another gives logits bit-identical to evaluating it fresh, on every fixture
 * family (glm-dsa with its MTP rows, deepseek2, gemma4 with its sliding-window rings and a
 * prefix far longer than the window, qwen3moe) and a non-f32 KV type; a corrupt block, one of
 * another model or another format version is ignored with a warning; the folder is evicted to
 * its bound; two processes write one folder; a write that fails (a full disk, here
 * RLIMIT_FSIZE) stops caching, never the answer; a session file round-trips.
 */
#include <dirent.h>
#include <jansson.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "engine/pcache.h"
#include "engine/session.h"
#include "petrel.h"
#include "test.h"

enum { N_TOK = 600, N_MORE = 21 }; /* two blocks of 256, and a tail */

/* A prompt of n ids: a fixture prompt's tokens, repeated with an offset, in the vocabulary. */
static void make_tokens(const char *ref_name, int32_t *out, int n, int n_vocab, int salt) {
    json_t *ref = json_load_file(t_fixture(ref_name), 0, NULL);
    json_t *ids = json_object_get(json_array_get(json_object_get(ref, "prompts"), 0), "tokens");
    const int m = (int)json_array_size(ids);
    for (int i = 0; i < n; i++) {
        const int32_t t = m ? (int32_t)json_integer_value(json_array_get(ids, (size_t)(i % m))) : 1;
        out[i] = (int32_t)((t + i / (m ? m : 1) * 7 + salt) % n_vocab);
    }
    json_decref(ref);
}

static pt_engine *open_model(const char *model, int ctk, char *err, size_t len) {
    pt_engine_params ep = {.model_path = t_fixture(model),
                           .n_threads = 2,
                           .usage_dir = t_usage_dir(),
                           .cache_type_k = ctk,
                           .cache_type_v = ctk};
    return pt_engine_open(&ep, err, len);
}

typedef struct warns {
    int n;
    char last[1024];
} warns;

static void on_warn(void *ud, const char *msg) {
    warns *w = ud;
    w->n++;
    snprintf(w->last, sizeof w->last, "%s", msg);
}

static pt_pcache *open_cache(pt_engine *e, const char *dir, uint64_t max_bytes, warns *w) {
    char err[512];
    pt_pcache_params pp = {.dir = dir, .max_bytes = max_bytes, .warn = on_warn, .warn_ud = w};
    pt_pcache *pc = pt_pcache_open(e, &pp, err, sizeof err);
    CHECKF(pc, "%s", err);
    return pc;
}

/* Fill session s with tokens[0..n) (and, with an MTP head, its n-1 MTP positions). */
static int fill(pt_session *s, const int32_t *t, int n, int mtp, char *err, size_t len) {
    const int E = pt_engine_n_embd(pt_session_engine(s));
    float *hid = malloc(sizeof(float) * (size_t)n * E);
    int rc = pt_session_eval(s, t, n, NULL, 0, hid, err, len);
    if (!rc && mtp) rc = session_mtp(s, t + 1, hid, n - 1, NULL, 0, NULL, err, len);
    free(hid);
    return rc;
}

/* Store a 600-token prefix from one session (batch 256: its rings still hold the last
 * block's window); restore it into another with a different batch
 * (other ring sizes) and continue with 21 more tokens: the last logits (and the MTP head's)
 * equal a fresh session's bit for bit. */
static void restore_one(const char *model, const char *ref, int ctk) {
    char err[512];
    pt_engine *e = open_model(model, ctk, err, sizeof err);
    CHECKF(e, "%s: %s", model, err);
    if (!e) return;
    const int nv = pt_engine_n_vocab(e), E = pt_engine_n_embd(e), mtp = pt_engine_has_mtp(e);
    int32_t *t = malloc(sizeof(int32_t) * (N_TOK + N_MORE));
    make_tokens(ref, t, N_TOK + N_MORE, nv, 0);
    const int n = N_TOK + N_MORE;
    warns w = {0};
    pt_pcache *pc = open_cache(e, t_tmpdir(), 0, &w);
    pt_session_params p1 = {.n_ctx = 1024, .n_batch = 256}, p2 = {.n_ctx = 1024, .n_batch = 24};
    pt_session *a = pt_session_new(e, &p1, err, sizeof err);
    pt_session *b = pt_session_new(e, &p2, err, sizeof err);
    pt_session *c = pt_session_new(e, &p2, err, sizeof err);
    float *lb = malloc(sizeof(float) * nv), *lc = malloc(sizeof(float) * nv);
    float *hb = malloc(sizeof(float) * (size_t)n * E), *hc = malloc(sizeof(float) * (size_t)n * E);
    CHECK(a && b && c && pc);
    if (a && b && c && pc) {
        CHECK(fill(a, t, N_TOK, mtp, err, sizeof err) == 0);
        CHECKF(pcache_save(pc, a, NULL, N_TOK) > 0, "%s: nothing stored", model);
        const int P = pcache_restore(pc, b, NULL, t, n);
        const int want = mtp ? 511 : 512;
        CHECKF(P == want, "%s: restored %d positions, expected %d", model, P, want);
        CHECK(pt_session_n_past(b) == P && !memcmp(pt_session_tokens(b), t, sizeof(int32_t) * P));
        CHECK(session_mtp_n_past(b) == (mtp ? P : 0));
        /* the rest, with hidden rows and the last logits; fresh: everything */
        CHECK(pt_session_eval(b, t + P, n - P, lb, 0, hb, err, sizeof err) == 0);
        CHECK(pt_session_eval(c, t, n, lc, 0, hc, err, sizeof err) == 0);
        CHECKF(!memcmp(lb, lc, sizeof(float) * nv), "%s (ctk %s): logits after a restore differ",
               model, pt_kv_type_name(ctk));
        if (mtp) { /* the head continues from P: its last logits equal a fresh head's */
            CHECK(session_mtp(b, t + P + 1, hb, n - P - 1, lb, 1, NULL, err, sizeof err) == 0);
            CHECK(session_mtp(c, t + 1, hc, n - 1, lc, 1, NULL, err, sizeof err) == 0);
            CHECKF(!memcmp(lb, lc, sizeof(float) * nv), "%s: MTP logits after a restore differ",
                   model);
        }
        /* a prompt the store holds no more of than the session: nothing restored */
        CHECK(pcache_restore(pc, b, NULL, t, n) == 0);
        /* another scope (API key) finds nothing */
        pt_session_truncate(c, 0);
        CHECK(pcache_restore(pc, c, "key-2", t, n) == 0);
        CHECKF(w.n == 0, "unexpected warning: %s", w.last);
    }
    free(lb), free(lc), free(hb), free(hc), free(t);
    pt_session_free(a), pt_session_free(b), pt_session_free(c);
    pt_pcache_close(pc);
    pt_engine_close(e);
}

static void pcache_restore_equals_fresh(void) {
    restore_one("glm-dsa-rq2k.gguf", "glm-dsa-rq2k.ref.json", PT_KV_F32);
    restore_one("deepseek2-q8_0.gguf", "deepseek2-q8_0.ref.json", PT_KV_F16);
    restore_one("gemma4-rq2k.gguf", "gemma4-rq2k.ref.json", PT_KV_F16);
    restore_one("qwen3moe-rq2k.gguf", "qwen3moe-rq2k.ref.json", PT_KV_Q8_0);
}

/* The store's files, sorted by name. */
static int list_kv(const char *dir, char names[][128], int cap) {
    DIR *d = opendir(dir);
    int n = 0;
    for (struct dirent *de; d && (de = readdir(d)) && n < cap;) {
        const size_t l = strlen(de->d_name);
        if (l > 3 && l < 128 && !strcmp(de->d_name + l - 3, ".kv"))
            memcpy(names[n++], de->d_name, l + 1);
    }
    if (d) closedir(d);
    return n;
}

/* Flip one byte at off of every block file. */
static void poke_all(const char *dir, long off, int add) {
    char names[16][128];
    const int n = list_kv(dir, names, 16);
    for (int i = 0; i < n; i++) {
        char path[4800];
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        size_t len = 0;
        unsigned char *b = t_read_file(path, &len);
        if (!b) continue;
        b[off < 0 ? (long)len + off : off] += (unsigned char)add;
        t_write_file(path, b, len);
        free(b);
    }
}

/* Corrupt payload, another model's fingerprint, another version: each is ignored with a
 * warning naming why, and removed; a later save writes it again. */
static void pcache_bad_entries_ignored(void) {
    char err[512];
    pt_engine *e = open_model("qwen3moe-rq2k.gguf", PT_KV_F16, err, sizeof err);
    CHECKF(e, "%s", err);
    if (!e) return;
    int32_t t[N_TOK];
    make_tokens("qwen3moe-rq2k.ref.json", t, N_TOK, pt_engine_n_vocab(e), 3);
    warns w = {0};
    pt_session_params sp = {.n_ctx = 1024, .n_batch = 64};
    pt_session *a = pt_session_new(e, &sp, err, sizeof err);
    pt_session *b = pt_session_new(e, &sp, err, sizeof err);
    CHECK(fill(a, t, N_TOK, 0, err, sizeof err) == 0);
    const struct {
        long off;
        const char *why;
    } cases[] = {{-1, "checksum"}, {8, "another model"}, {4, "another format version"}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char dir[2400];
        snprintf(dir, sizeof dir, "%s/case%zu", t_tmpdir(), i);
        pt_pcache *pc = open_cache(e, dir, 0, &w);
        CHECK(pcache_save(pc, a, NULL, N_TOK) > 0);
        CHECK(pcache_restore(pc, b, NULL, t, N_TOK) == 512);
        pt_session_truncate(b, 0);
        poke_all(dir, cases[i].off, 1);
        w.n = 0;
        CHECK(pcache_restore(pc, b, NULL, t, N_TOK) == 0);
        CHECK(pt_session_n_past(b) == 0);
        CHECKF(w.n == 1, "case %zu: %d warnings", i, w.n);
        CHECK_STR_CONTAINS(w.last, cases[i].why);
        char names[16][128];
        CHECK(list_kv(dir, names, 16) == 1); /* the bad first block removed */
        pt_pcache_close(pc);
    }
    pt_session_free(a), pt_session_free(b);
    pt_engine_close(e);
}

/* Two prefixes of two blocks each, a bound of three blocks: the least recently used block
 * goes; the bound holds; two processes saving into one folder leave usable blocks. */
static void pcache_evicts_and_shares(void) {
    char err[512];
    pt_engine *e = open_model("qwen3moe-rq2k.gguf", PT_KV_F16, err, sizeof err);
    CHECKF(e, "%s", err);
    if (!e) return;
    int32_t t1[N_TOK], t2[N_TOK];
    make_tokens("qwen3moe-rq2k.ref.json", t1, N_TOK, pt_engine_n_vocab(e), 5);
    make_tokens("qwen3moe-rq2k.ref.json", t2, N_TOK, pt_engine_n_vocab(e), 9);
    warns w = {0};
    const char *dir = t_tmpdir();
    pt_pcache *probe = open_cache(e, dir, 0, &w);
    pt_session_params sp = {.n_ctx = 1024, .n_batch = 64};
    pt_session *a = pt_session_new(e, &sp, err, sizeof err);
    pt_session *b = pt_session_new(e, &sp, err, sizeof err);
    CHECK(fill(a, t1, N_TOK, 0, err, sizeof err) == 0);
    CHECK(fill(b, t2, N_TOK, 0, err, sizeof err) == 0);
    const uint64_t block = pcache_save(probe, a, NULL, N_TOK) / 2;
    CHECK(block > 0);
    pt_pcache_close(probe);
    pt_pcache *pc = open_cache(e, dir, 3 * block, &w);
    /* t1's first block used again: its second is the least recently used */
    usleep(20000);
    pt_session *c = pt_session_new(e, &sp, err, sizeof err);
    CHECK(pcache_restore(pc, c, NULL, t1, 257) == 256);
    usleep(20000);
    CHECK(pcache_save(pc, b, NULL, N_TOK) == 2 * block);
    char names[16][128];
    CHECK(list_kv(dir, names, 16) == 3);
    /* t1 restores one block, t2 both */
    pt_session_truncate(c, 0);
    CHECK(pcache_restore(pc, c, NULL, t2, N_TOK) == 512);
    pt_session_truncate(c, 0);
    CHECK(pcache_restore(pc, c, NULL, t1, N_TOK) == 256);
    pt_pcache_close(pc);
    /* two processes write the same blocks into a fresh folder at once */
    char shared[2400];
    snprintf(shared, sizeof shared, "%s/shared", dir);
    pc = open_cache(e, shared, 0, &w);
    const pid_t pid = fork();
    if (pid == 0) {
        for (int i = 0; i < 5; i++) {
            pcache_save(pc, a, NULL, N_TOK);
            char lst[16][128];
            const int k = list_kv(shared, lst, 16);
            for (int j = 0; j < k; j++) {
                char p[4800];
                snprintf(p, sizeof p, "%s/%s", shared, lst[j]);
                unlink(p); /* make the other write again */
            }
        }
        _exit(0);
    }
    for (int i = 0; i < 5; i++)
        pcache_save(pc, a, NULL, N_TOK);
    int st = 0;
    waitpid(pid, &st, 0);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    pcache_save(pc, a, NULL, N_TOK);
    pt_session_truncate(c, 0);
    w.n = 0;
    CHECK(pcache_restore(pc, c, NULL, t1, N_TOK) == 512);
    CHECKF(w.n == 0, "warning: %s", w.last);
    pt_session_free(a), pt_session_free(b), pt_session_free(c);
    pt_pcache_close(pc);
    pt_engine_close(e);
}

/* A write that fails (RLIMIT_FSIZE: EFBIG, as a full disk gives ENOSPC) stops caching with
 * one warning; the prefill and the answer go on. */
static void pcache_full_disk_keeps_answering(void) {
    char err[512];
    pt_engine *e = open_model("qwen3moe-rq2k.gguf", PT_KV_F16, err, sizeof err);
    CHECKF(e, "%s", err);
    if (!e) return;
    int32_t t[N_TOK];
    make_tokens("qwen3moe-rq2k.ref.json", t, N_TOK, pt_engine_n_vocab(e), 11);
    warns w = {0};
    pt_pcache *pc = open_cache(e, t_tmpdir(), 0, &w);
    pt_session_params sp = {.n_ctx = 1024, .n_batch = 64};
    pt_session *s = pt_session_new(e, &sp, err, sizeof err);
    pt_sampling smp;
    pt_sampling_default(&smp);
    smp.temp = 0;
    pt_gen *g = pt_gen_new(s, &smp, err, sizeof err);
    CHECK(g && pt_gen_set_prefix_cache(g, pc, NULL) == 0);
    signal(SIGXFSZ, SIG_IGN);
    const struct rlimit rl = {4096, 4096};
    CHECK(setrlimit(RLIMIT_FSIZE, &rl) == 0);
    CHECK(pt_gen_prefill(g, t, N_TOK, NULL, err, sizeof err) == 0);
    pt_gen_opts o = {.max_tokens = 3};
    pt_gen_result r;
    memset(&r, 0, sizeof r);
    CHECK(pt_gen_run(g, &o, NULL, NULL, NULL, &r, err, sizeof err) == 0);
    CHECK(r.n_tokens == 3);
    pt_pcache_stats st;
    pt_pcache_get_stats(pc, &st);
    CHECK(st.writes_off == 1 && st.blocks_written == 0 && w.n == 1);
    CHECK_STR_CONTAINS(w.last, "no more prefixes are stored");
    pt_buf_free(&r.text);
    pt_gen_free(g);
    pt_session_free(s);
    pt_pcache_close(pc);
    pt_engine_close(e);
}

/* A session file: tokens, KV and the caller's bytes back; the restored session continues
 * bit-identically (gemma4: rings); a corrupt file is refused. */
static void pcache_session_file_round_trip(void) {
    char err[512];
    pt_engine *e = open_model("gemma4-rq2k.gguf", PT_KV_F16, err, sizeof err);
    CHECKF(e, "%s", err);
    if (!e) return;
    const int nv = pt_engine_n_vocab(e);
    int32_t t[300];
    make_tokens("gemma4-rq2k.ref.json", t, 300, nv, 2);
    pt_session_params sp = {.n_ctx = 512, .n_batch = 32};
    pt_session *a = pt_session_new(e, &sp, err, sizeof err);
    pt_session *b = pt_session_new(e, &sp, err, sizeof err);
    pt_session *c = pt_session_new(e, &sp, err, sizeof err);
    float *la = malloc(sizeof(float) * nv), *lb = malloc(sizeof(float) * nv);
    CHECK(pt_session_eval(a, t, 280, NULL, 0, NULL, err, sizeof err) == 0);
    char path[4800];
    snprintf(path, sizeof path, "%s/s.ptkv", t_tmpdir());
    CHECK(pt_session_save_file(a, path, "[\"hi\"]", 6, err, sizeof err) == 0);
    char *extra = NULL;
    size_t xl = 0;
    CHECK(pt_session_load_file(b, path, &extra, &xl, err, sizeof err) == 280);
    CHECK(extra && xl == 6 && !strcmp(extra, "[\"hi\"]"));
    free(extra);
    CHECK(pt_session_eval(b, t + 280, 20, la, 0, NULL, err, sizeof err) == 0);
    CHECK(pt_session_eval(c, t, 300, lb, 0, NULL, err, sizeof err) == 0);
    CHECK(!memcmp(la, lb, sizeof(float) * nv));
    size_t len = 0;
    unsigned char *bytes = t_read_file(path, &len);
    bytes[len / 2] ^= 0x10;
    t_write_file(path, bytes, len);
    free(bytes);
    CHECK(pt_session_load_file(c, path, &extra, &xl, err, sizeof err) == -1);
    CHECK_STR_CONTAINS(err, "checksum");
    free(la), free(lb);
    pt_session_free(a), pt_session_free(b), pt_session_free(c);
    pt_engine_close(e);
}

T_SUITE(pcache) {
    T_ADD_TIMEOUT(pcache_restore_equals_fresh, 300);
    T_ADD(pcache_bad_entries_ignored);
    T_ADD(pcache_evicts_and_shares);
    T_ADD(pcache_full_disk_keeps_answering);
    T_ADD(pcache_session_file_round_trip);
}
