/* test_pack.c — expert packs: lossless records, resumable writing (an
 * interrupted pack finishes byte-identical to an uninterrupted one), streamed
 * logits from a pack equal resident ones, and stale / truncated / corrupt
 * packs are detected, reported and not used; every streamed record is checked
 * against the pack's checksum table (a bad one is re-read, then read from the
 * GGUF, never used), and a model edited behind an unchanged header never
 * meets its old pack. */
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common.h"
#include "format/gguf.h"
#include "petrel.h"
#include "test.h"

static char out[1 << 16];

static const char *bin(void) {
    const char *b = getenv("PETREL_BIN");
    return b && *b ? b : "build/petrel";
}

static int petrel(const char *fmt, const char *a, const char *b) {
    char args[2048], cmd[4096];
    snprintf(args, sizeof args, fmt, a, b);
    snprintf(cmd, sizeof cmd, "%s %s", bin(), args);
    return t_run(cmd, out, sizeof out);
}

/* A private copy of a fixture (packs are written next to the model). */
static void copy_fixture(const char *name, const char *dst) {
    size_t len;
    void *data = t_read_file(t_fixture(name), &len);
    CHECK(data && t_write_file(dst, data, len) == 0);
    free(data);
}

static int files_equal(const char *a, const char *b) {
    size_t la, lb;
    void *x = t_read_file(a, &la), *y = t_read_file(b, &lb);
    int eq = x && y && la == lb && !memcmp(x, y, la);
    free(x);
    free(y);
    return eq;
}

static void pack_resume_is_byte_identical(void) {
    char model[512], full[600], part[600];
    snprintf(model, sizeof model, "%s/pk.gguf", t_tmpdir());
    copy_fixture("glm-dsa-rq2k.gguf", model);
    snprintf(full, sizeof full, "%s/full.xpack", t_tmpdir());
    CHECK(petrel("pack %s -o %s", model, full) == 0);
    CHECK(petrel("verify %s --pack %s", model, full) == 0);
    CHECK_STR_CONTAINS(out, "is valid (64 records)");
    const char *stops[] = {"0", "1", "17", "63"};
    for (size_t i = 0; i < PT_ARRAY_LEN(stops); i++) {
        snprintf(part, sizeof part, "%s/part%zu.xpack", t_tmpdir(), i);
        char args[64];
        snprintf(args, sizeof args, "--stop-after %s", stops[i]);
        char cmd[2048];
        snprintf(cmd, sizeof cmd, "%s pack %s -o %s %s", bin(), model, part, args);
        CHECKF(t_run(cmd, out, sizeof out) == 1, "stop after %s: expected an interrupted run",
               stops[i]);
        char partial[700];
        snprintf(partial, sizeof partial, "%s.partial", part);
        CHECKF(access(partial, F_OK) == 0 && access(part, F_OK) != 0,
               "stop after %s: no partial file", stops[i]);
        /* an interrupted pack is never used */
        CHECK(petrel("verify %s --pack %s", model, partial) == 1);
        CHECK_STR_CONTAINS(out, "incomplete pack");
        CHECK(petrel("pack %s -o %s", model, part) == 0);
        CHECKF(files_equal(full, part),
               "stop after %s: resumed pack differs from an uninterrupted one", stops[i]);
        CHECK(access(partial, F_OK) != 0);
    }
}

/* Logits of prompt 2 of glm-dsa-rq2k through the API with the given settings. */
static float *logits_with(const char *model, int slots, const char *pack, int no_pack, int io,
                          pt_stats *st, char *plan, size_t plan_len) {
    static const int32_t toks[] = {500, 502, 504, 41,  280, 276, 303, 262, 300, 350, 272,
                                   353, 261, 46,  505, 42,  308, 310, 283, 340, 265, 307,
                                   44,  260, 285, 49,  44,  257, 50,  44,  257, 51};
    const int n = (int)PT_ARRAY_LEN(toks);
    char err[512];
    pt_engine_params ep = {.model_path = model,
                           .n_threads = 2,
                           .expert_slots = slots,
                           .pack_path = pack,
                           .no_pack = no_pack,
                           .io = io,
                           .usage_dir = t_usage_dir()};
    pt_engine *e = pt_engine_open(&ep, err, sizeof err);
    CHECKF(e, "%s", err);
    if (!e) return NULL;
    const int nv = pt_engine_n_vocab(e);
    pt_session_params sp = {.n_ctx = 64};
    pt_session *s = pt_session_new(e, &sp, err, sizeof err);
    float *lg = malloc(sizeof(float) * (size_t)n * nv);
    CHECK(s && pt_session_eval(s, toks, n, lg, 1, NULL, err, sizeof err) == 0);
    if (st) pt_engine_stats(e, st);
    if (plan) snprintf(plan, plan_len, "%s", pt_engine_plan(e));
    pt_session_free(s);
    pt_engine_close(e);
    return lg;
}

static void pack_streamed_equals_resident(void) {
    char model[512];
    snprintf(model, sizeof model, "%s/ps.gguf", t_tmpdir());
    copy_fixture("glm-dsa-rq2k.gguf", model);
    CHECK(petrel("pack %s%s", model, "") == 0); /* default location: next to the model */
    char pack[600];
    snprintf(pack, sizeof pack, "%s.xpack", model);
    CHECK(access(pack, F_OK) == 0);
    const size_t bytes = sizeof(float) * 32 * 512;
    float *ref = logits_with(model, PT_EXPERTS_MMAP, NULL, 0, 0, NULL, NULL, 0);
    int ios[2] = {PT_IO_URING, PT_IO_PREAD};
    for (int slots = 1; slots <= 2; slots++)
        for (int k = 0; k < 2; k++) {
            pt_stats st;
            float *lg = logits_with(model, slots, NULL, 0, ios[k], &st, NULL, 0);
            CHECKF(ref && lg && !memcmp(ref, lg, bytes),
                   "%d slots, io %d: streamed-from-pack logits differ", slots, ios[k]);
            CHECKF(st.expert_pack && st.misses > 0 && st.bytes_read > 0,
                   "the pack was not used (pack %d misses %llu)", st.expert_pack,
                   (unsigned long long)st.misses);
            CHECKF(st.checked_reads > 0 && st.bad_reads == 0, "checked %llu, bad %llu",
                   (unsigned long long)st.checked_reads, (unsigned long long)st.bad_reads);
            free(lg);
        }
    /* --no-pack reads the GGUF, checked against the pack's table */
    pt_stats st;
    float *lg = logits_with(model, 2, NULL, 1, 0, &st, NULL, 0);
    CHECK(!st.expert_pack && st.misses > 0);
    CHECK(st.checked_reads > 0 && st.bad_reads == 0);
    CHECK(ref && lg && !memcmp(ref, lg, bytes));
    free(lg);
    free(ref);
}

static void pack_bad_packs_are_refused(void) {
    char model[512], pack[600], plan[1024];
    snprintf(model, sizeof model, "%s/pb.gguf", t_tmpdir());
    copy_fixture("glm-dsa-rq2k.gguf", model);
    snprintf(pack, sizeof pack, "%s.xpack", model);
    CHECK(petrel("pack %s%s", model, "") == 0);
    float *ref = logits_with(model, 2, NULL, 1, 0, NULL, NULL, 0);
    size_t len;
    uint8_t *good = t_read_file(pack, &len);
    CHECK(good && len > 8192);
    if (!good) return;
    /* a corrupt record: verify names it */
    good[len - 5000] ^= 0x40;
    t_write_file(pack, good, len);
    CHECK(petrel("verify %s%s", model, "") == 1);
    CHECK_STR_CONTAINS(out, "corrupt record");
    good[len - 5000] ^= 0x40;
    /* truncated: the engine warns, ignores it and reads the GGUF — same logits */
    t_write_file(pack, good, len - 4096);
    CHECK(petrel("verify %s%s", model, "") == 1);
    CHECK_STR_CONTAINS(out, "truncated");
    pt_stats st;
    float *lg = logits_with(model, 2, NULL, 0, 0, &st, plan, sizeof plan);
    CHECK(!st.expert_pack);
    CHECK_STR_CONTAINS(plan, "WARNING");
    CHECK_STR_CONTAINS(plan, "truncated");
    CHECK(ref && lg && !memcmp(ref, lg, sizeof(float) * 32 * 512));
    free(lg);
    /* stale: the pack of another model */
    char other[512];
    snprintf(other, sizeof other, "%s/po.gguf", t_tmpdir());
    copy_fixture("glm-dsa-iq2.gguf", other);
    t_write_file(pack, good, len);
    CHECK(petrel("verify %s --pack %s", other, pack) == 1);
    CHECK_STR_CONTAINS(out, "stale pack");
    /* an explicitly named bad pack is an error, not a silent fallback */
    char err[512];
    pt_engine_params ep = {.model_path = other,
                           .n_threads = 1,
                           .expert_slots = 2,
                           .pack_path = pack,
                           .usage_dir = t_usage_dir()};
    pt_engine *e = pt_engine_open(&ep, err, sizeof err);
    CHECK(e == NULL);
    CHECK_STR_CONTAINS(err, "stale pack");
    pt_engine_close(e);
    /* no pack and no table: verify writes the checksum table, then checks it, and
     * the engine's streamed GGUF reads are checked against it */
    unlink(pack);
    CHECK(petrel("verify %s%s", model, "") == 0);
    CHECK_STR_CONTAINS(out, "no expert pack or checksum table");
    CHECK(petrel("verify %s%s", model, "") == 0);
    CHECK_STR_CONTAINS(out, "is valid");
    lg = logits_with(model, 2, NULL, 0, 0, &st, NULL, 0);
    CHECK(!st.expert_pack && st.checked_reads > 0 && st.bad_reads == 0);
    CHECK(ref && lg && !memcmp(ref, lg, sizeof(float) * 32 * 512));
    free(lg);
    /* a named pack that does not exist is an error */
    CHECK(petrel("verify %s --pack %s", model, pack) == 1);
    CHECK_STR_CONTAINS(out, "no such expert pack");
    free(good);
    free(ref);
}

/* A real kill -9 in the middle of packing a larger model (about 1 GB, written
 * by build/mkmodel with raw expert blocks, so it takes seconds), then a rerun:
 * the finished pack is byte-identical to an uninterrupted one. */
static void pack_kill9_resume(void) {
    const char *mk = getenv("PETREL_MKMODEL");
    if (!mk || !*mk) mk = "build/mkmodel";
    char model[512], full[600], part[600], cmd[4096];
    snprintf(model, sizeof model, "%s/big.gguf", t_tmpdir());
    snprintf(full, sizeof full, "%s/big-full.xpack", t_tmpdir());
    snprintf(part, sizeof part, "%s/big-part.xpack", t_tmpdir());
    snprintf(cmd, sizeof cmd,
             "%s -o %s --embd 2048 --layers 6 --experts 64 --ff-exp 768 --heads 4 --q-lora 256 "
             "--kv-lora 256 "
             "--vocab 2048 --ff 1024 --raw-experts",
             mk, model);
    CHECKF(t_run(cmd, out, sizeof out) == 0, "mkmodel (set PETREL_MKMODEL): %s", out);
    CHECK(petrel("pack %s -o %s", model, full) == 0);
    /* kill -9 after a moment; the rerun resumes from the journal (or starts over) */
    int killed = 0;
    for (double delay = 0.6; delay < 5 && !killed; delay *= 1.6) {
        unlink(part);
        char partial[700];
        snprintf(partial, sizeof partial, "%s.partial", part);
        unlink(partial);
        snprintf(
            cmd, sizeof cmd,
            "%s pack %s -o %s & p=$!; sleep %.2f; kill -9 $p 2>/dev/null && echo KILLED; wait $p",
            bin(), model, part, delay);
        t_run(cmd, out, sizeof out);
        killed = strstr(out, "KILLED") && access(partial, F_OK) == 0;
    }
    CHECKF(killed, "could not interrupt petrel pack with kill -9");
    CHECK(petrel("pack %s -o %s", model, part) == 0);
    CHECKF(files_equal(full, part),
           "the pack finished after kill -9 differs from an uninterrupted one");
    CHECK(petrel("verify %s --pack %s", model, part) == 0);
    unlink(full);
    unlink(part);
    unlink(model);
}

/* Flip one byte in each expert slice of the first routed-expert tensor of
 * `model`, in place (same inode, header untouched). Returns the tensor's name
 * (static) or NULL. */
static const char *edit_experts_in_place(const char *model) {
    static char name[256];
    pt_err e = {{0}};
    gguf_ctx *g = gguf_open(model, &e);
    CHECKF(g, "%s", e.msg);
    if (!g) return NULL;
    const gguf_tensor *t = NULL;
    for (uint64_t i = 0; i < g->n_tensors && !t; i++)
        if (strstr(g->tensors[i].name, "_exps")) t = &g->tensors[i];
    CHECK(t != NULL);
    if (!t) {
        gguf_close(g);
        return NULL;
    }
    snprintf(name, sizeof name, "%s", t->name);
    const uint64_t per = t->nbytes / (uint64_t)t->ne[2], off = t->file_offset;
    const int64_t n = t->ne[2];
    gguf_close(g);
    int fd = open(model, O_RDWR);
    CHECK(fd >= 0);
    for (int64_t x = 0; x < n; x++) {
        uint8_t b;
        const off_t at = (off_t)(off + (uint64_t)x * per + per / 2);
        CHECK(pread(fd, &b, 1, at) == 1);
        b ^= 0x10;
        CHECK(pwrite(fd, &b, 1, at) == 1);
    }
    close(fd);
    return name;
}

/* Weights edited in place behind an unchanged header: the old pack is stale
 * (mtime), the engine reads the GGUF; with the mtime put back, verify still
 * finds the record that differs, and the pack's table (kept with --no-pack)
 * refuses the GGUF's edited bytes with an error naming the tensor. */
static void pack_changed_model_is_stale(void) {
    char model[512], pack[600], plan[1280];
    snprintf(model, sizeof model, "%s/pc.gguf", t_tmpdir());
    copy_fixture("glm-dsa-rq2k.gguf", model);
    snprintf(pack, sizeof pack, "%s.xpack", model);
    CHECK(petrel("pack %s%s", model, "") == 0);
    struct stat before;
    CHECK(stat(model, &before) == 0);
    usleep(20000); /* a later mtime even on coarse clocks */
    const char *tensor = edit_experts_in_place(model);
    if (!tensor) return;
    float *ref = logits_with(model, PT_EXPERTS_MMAP, NULL, 0, 0, NULL, NULL, 0);
    pt_stats st;
    float *lg = logits_with(model, 2, NULL, 0, 0, &st, plan, sizeof plan);
    CHECKF(!st.expert_pack, "an old pack was used for an edited model");
    CHECK_STR_CONTAINS(plan, "stale pack");
    CHECK_STR_CONTAINS(plan, "modification time");
    CHECK(ref && lg && !memcmp(ref, lg, sizeof(float) * 32 * 512));
    free(lg);
    CHECK(petrel("verify %s%s", model, "") == 1);
    CHECK_STR_CONTAINS(out, "stale pack");
    /* the mtime restored: only the bytes tell */
    const struct timespec ts[2] = {before.st_atim, before.st_mtim};
    CHECK(utimensat(AT_FDCWD, model, ts, 0) == 0);
    CHECK(petrel("verify %s%s", model, "") == 1);
    CHECK_STR_CONTAINS(out, "differs from the model's bytes");
    char err[1024];
    pt_engine_params ep = {.model_path = model,
                           .n_threads = 2,
                           .expert_slots = 2,
                           .no_pack = 1,
                           .usage_dir = t_usage_dir()};
    pt_engine *e = pt_engine_open(&ep, err, sizeof err);
    CHECKF(e, "%s", err);
    if (e) {
        pt_session_params sp = {.n_ctx = 64};
        pt_session *s = pt_session_new(e, &sp, err, sizeof err);
        const int32_t toks[] = {500, 502, 504, 41, 280, 276, 303, 262};
        float *lgs = malloc(sizeof(float) * 8 * (size_t)pt_engine_n_vocab(e));
        CHECK(s && pt_session_eval(s, toks, 8, lgs, 1, NULL, err, sizeof err) == -1);
        CHECK_STR_CONTAINS(err, "fails its checksum");
        CHECK_STR_CONTAINS(err, tensor);
        CHECK_STR_CONTAINS(err, "at offset");
        pt_engine_stats(e, &st);
        CHECK(st.bad_reads >= 2);
        free(lgs);
        pt_session_free(s);
        pt_engine_close(e);
    }
    free(ref);
}

/* A pack whose records all carry a flipped byte (pack, checksum table and
 * header intact): every read fails its checksum, is read again, then from the
 * GGUF; logits equal the resident run's and the counters say so. */
static void pack_bad_record_is_reread(void) {
    char model[512], pack[600];
    snprintf(model, sizeof model, "%s/pr.gguf", t_tmpdir());
    copy_fixture("glm-dsa-rq2k.gguf", model);
    snprintf(pack, sizeof pack, "%s.xpack", model);
    CHECK(petrel("pack %s%s", model, "") == 0);
    float *ref = logits_with(model, PT_EXPERTS_MMAP, NULL, 0, 0, NULL, NULL, 0);
    pt_stats st;
    float *lg = logits_with(model, 2, NULL, 0, 0, &st, NULL, 0);
    CHECK(st.expert_pack && st.checked_reads > 0 && st.bad_reads == 0);
    free(lg);
    size_t len;
    uint8_t *p = t_read_file(pack, &len);
    CHECK(p && len > 8192);
    if (!p) return;
    /* the header (xpack.h): n_layers at 12, data_offset at 80, the layer table at 128 */
    uint32_t n_layers;
    uint64_t at;
    memcpy(&n_layers, p + 12, 4);
    memcpy(&at, p + 80, 8);
    for (uint32_t l = 0; l < n_layers; l++) {
        uint32_t n_expert;
        uint64_t rec;
        memcpy(&n_expert, p + 128 + 48 * l, 4);
        memcpy(&rec, p + 128 + 48 * l + 32, 8);
        for (uint32_t x = 0; x < n_expert && at + rec <= len; x++, at += rec)
            p[at + 100] ^= 0x01;
    }
    CHECK(at == len);
    CHECK(t_write_file(pack, p, len) == 0);
    int ios[2] = {PT_IO_URING, PT_IO_PREAD};
    for (int slots = 1; slots <= 2; slots++)
        for (int k = 0; k < 2; k++) {
            lg = logits_with(model, slots, NULL, 0, ios[k], &st, NULL, 0);
            CHECKF(ref && lg && !memcmp(ref, lg, sizeof(float) * 32 * 512),
                   "%d slots, io %d: logits from a corrupt pack differ from resident", slots,
                   ios[k]);
            CHECKF(st.expert_pack && st.bad_reads > 0 && st.fallbacks > 0 &&
                       st.bad_reads == 2 * st.fallbacks,
                   "bad reads %llu, fallbacks %llu", (unsigned long long)st.bad_reads,
                   (unsigned long long)st.fallbacks);
            free(lg);
        }
    /* generate prints the resident run's tokens, warns once and counts */
    char cmd[2048], want[4096];
    snprintf(cmd, sizeof cmd,
             "%s generate -m %s --mmap-experts --tokens 500,502,504,41 -n 8 --greedy 2>/dev/null",
             bin(), model);
    CHECK(t_run(cmd, want, sizeof want) == 0);
    snprintf(cmd, sizeof cmd,
             "%s generate -m %s --expert-slots 2 --tokens 500,502,504,41 -n 8 --greedy "
             "2>/dev/null",
             bin(), model);
    CHECK(t_run(cmd, out, sizeof out) == 0);
    CHECKF(!strcmp(out, want), "streamed from a corrupt pack: %s, resident: %s", out, want);
    snprintf(cmd, sizeof cmd,
             "%s generate -m %s --expert-slots 2 --tokens 500,502,504,41 -n 8 --greedy --stats",
             bin(), model);
    t_run(cmd, out, sizeof out);
    CHECK_STR_CONTAINS(out, "fails its checksum");
    CHECK_STR_CONTAINS(out, "read from the GGUF instead of the pack");
    const char *w = strstr(out, "warning");
    CHECKF(w && !strstr(w + 1, "warning"), "warned more than once: %s", out);
    /* an old-version pack is stale, not used */
    p[8] = 1;
    CHECK(t_write_file(pack, p, len) == 0);
    CHECK(petrel("verify %s%s", model, "") == 1);
    CHECK_STR_CONTAINS(out, "stale pack: format version 1");
    char plan[1280];
    lg = logits_with(model, 2, NULL, 0, 0, &st, plan, sizeof plan);
    CHECK(!st.expert_pack);
    CHECK_STR_CONTAINS(plan, "format version 1");
    CHECK(ref && lg && !memcmp(ref, lg, sizeof(float) * 32 * 512));
    free(lg);
    free(p);
    free(ref);
}

/* A model with no pack: `petrel pack --table-only` writes MODEL.gguf.xsums,
 * which checks the GGUF's streamed reads (logits equal resident); bytes edited
 * in place with the mtime put back fail with an error naming the tensor, and
 * verify finds them; with the new mtime the table is stale and reported. */
static void pack_table_checks_gguf_reads(void) {
    char model[512], plan[1280];
    snprintf(model, sizeof model, "%s/pt.gguf", t_tmpdir());
    copy_fixture("glm-dsa-rq2k.gguf", model);
    CHECK(petrel("pack %s %s", model, "--table-only") == 0);
    CHECK(petrel("verify %s%s", model, "") == 0);
    CHECK_STR_CONTAINS(out, ".xsums is valid (64 records)");
    float *ref = logits_with(model, PT_EXPERTS_MMAP, NULL, 0, 0, NULL, NULL, 0);
    pt_stats st;
    float *lg = logits_with(model, 2, NULL, 0, 0, &st, plan, sizeof plan);
    CHECK(!st.expert_pack && st.checked_reads > 0 && st.bad_reads == 0);
    CHECK(ref && lg && !memcmp(ref, lg, sizeof(float) * 32 * 512));
    free(lg);
    free(ref);
    struct stat before;
    CHECK(stat(model, &before) == 0);
    usleep(20000);
    const char *tensor = edit_experts_in_place(model);
    if (!tensor) return;
    lg = logits_with(model, 2, NULL, 0, 0, &st, plan, sizeof plan);
    CHECK_STR_CONTAINS(plan, "stale pack");
    CHECK_STR_CONTAINS(plan, "expert reads unchecked");
    CHECK(st.checked_reads == 0);
    free(lg);
    const struct timespec ts[2] = {before.st_atim, before.st_mtim};
    CHECK(utimensat(AT_FDCWD, model, ts, 0) == 0);
    CHECK(petrel("verify %s%s", model, "") == 1);
    CHECK_STR_CONTAINS(out, "fails its checksum");
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "%s generate -m %s --expert-slots 2 --tokens 500,502,504,41 -n 4",
             bin(), model);
    CHECK(t_run(cmd, out, sizeof out) != 0);
    CHECK_STR_CONTAINS(out, "fails its checksum");
    CHECK_STR_CONTAINS(out, tensor);
}

T_SUITE(pack) {
    T_ADD(pack_resume_is_byte_identical);
    T_ADD(pack_streamed_equals_resident);
    T_ADD(pack_bad_packs_are_refused);
    T_ADD(pack_kill9_resume);
    T_ADD(pack_changed_model_is_stale);
    T_ADD(pack_bad_record_is_reread);
    T_ADD(pack_table_checks_gguf_reads);
}
