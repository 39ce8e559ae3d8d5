/* test_faults.c — what the engine does when the disk misbehaves.
 *
 * Read faults are injected through xio's test hook (src/runtime/xio.h:
 * xio_set_fault_hook), in both read back-ends; a full disk is a real one (a
 * small tmpfs mounted in a private mount namespace; the case is skipped, by
 * name, where mounting is not permitted); a truncated file is really
 * truncated while an engine has it open. For every fault the outcome is one of
 * two: the logits equal the resident run's bit for bit, or the call fails with
 * an error naming the file, and nothing torn is left under a final name.
 * README.md ("Faults") has the table these cases check.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common.h"
#include "petrel.h"
#include "runtime/xio.h"
#include "test.h"

static char out[1 << 16];

static const char *bin(void) {
    const char *b = getenv("PETREL_BIN");
    return b && *b ? b : "build/petrel";
}

/* A private copy of a fixture (packs are written next to the model). */
static void copy_fixture(const char *name, const char *dst) {
    size_t len;
    void *data = t_read_file(t_fixture(name), &len);
    CHECK(data && t_write_file(dst, data, len) == 0);
    free(data);
}

/* Prompt 2 of glm-dsa-rq2k (as tests/test_pack.c). */
static const int32_t TOKS[] = {500, 502, 504, 41,  280, 276, 303, 262, 300, 350, 272,
                               353, 261, 46,  505, 42,  308, 310, 283, 340, 265, 307,
                               44,  260, 285, 49,  44,  257, 50,  44,  257, 51};
#define N_TOKS ((int)PT_ARRAY_LEN(TOKS))
#define N_VOCAB 512

static pt_engine *open_model(const char *model, int slots, int no_pack, int io, char *err,
                             size_t len) {
    pt_engine_params ep = {.model_path = model,
                           .n_threads = 2,
                           .expert_slots = slots,
                           .no_pack = no_pack,
                           .io = io,
                           .usage_dir = t_usage_dir()};
    return pt_engine_open(&ep, err, len);
}

/* Logits of every position of TOKS in a fresh session of e into lg
 * [N_TOKS * N_VOCAB]; returns pt_session_eval's result (-1 with err). */
static int eval_all(pt_engine *e, float *lg, char *err, size_t len) {
    pt_session_params sp = {.n_ctx = 64};
    pt_session *s = pt_session_new(e, &sp, err, len);
    if (!s) return -1;
    int rc = pt_session_eval(s, TOKS, N_TOKS, lg, 1, NULL, err, len);
    pt_session_free(s);
    return rc;
}

/* The resident (mmap) run's logits, the reference of every case. */
static float *resident_logits(const char *model) {
    char err[512];
    pt_engine *e = open_model(model, PT_EXPERTS_MMAP, 1, 0, err, sizeof err);
    CHECKF(e, "%s", err);
    if (!e) return NULL;
    CHECK(pt_engine_n_vocab(e) == N_VOCAB);
    float *lg = malloc(sizeof(float) * N_TOKS * N_VOCAB);
    CHECKF(eval_all(e, lg, err, sizeof err) == 0, "%s", err);
    pt_engine_close(e);
    return lg;
}

static int same(const float *a, const float *b) {
    return a && b && !memcmp(a, b, sizeof(float) * N_TOKS * N_VOCAB);
}

/* ===== Read faults (xio's hook) ===== */

enum { F_EIO_FIRST, F_EIO_ALWAYS, F_SHORT, F_FLIP };
static int fault_kind;
static atomic_int fault_budget; /* F_EIO_FIRST: failures left */
static atomic_int fault_hits;   /* reads the hook altered */

static long fault_hook(void *user, int fd, uint64_t off, uint8_t *dst, uint64_t len, long res) {
    (void)user, (void)fd, (void)off, (void)len;
    switch (fault_kind) {
    case F_EIO_FIRST:
        if (atomic_fetch_sub(&fault_budget, 1) > 0) {
            atomic_fetch_add(&fault_hits, 1);
            return -EIO;
        }
        return res;
    case F_EIO_ALWAYS: atomic_fetch_add(&fault_hits, 1); return -EIO;
    case F_SHORT:
        /* at most one 4 KiB block per completion: the rest is read again from
         * there (a block multiple, so an O_DIRECT continuation stays aligned) */
        if (res > 4096) {
            atomic_fetch_add(&fault_hits, 1);
            return 4096;
        }
        return res;
    case F_FLIP:
        if (res > 100) {
            atomic_fetch_add(&fault_hits, 1);
            dst[100] ^= 0x5a;
        }
        return res;
    }
    return res;
}

static void set_fault(int kind, int budget) {
    fault_kind = kind;
    atomic_store(&fault_budget, budget);
    atomic_store(&fault_hits, 0);
    xio_set_fault_hook(fault_hook, NULL);
}

/* A model copy and its pack in the case's folder; returns the model path. */
static const char *model_with_pack(char *model, size_t len) {
    snprintf(model, len, "%s/f.gguf", t_tmpdir());
    copy_fixture("glm-dsa-rq2k.gguf", model);
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "%s pack %s", bin(), model);
    CHECKF(t_run(cmd, out, sizeof out) == 0, "petrel pack: %s", out);
    return model;
}

static const int IOS[2] = {PT_IO_URING, PT_IO_PREAD};

/* EIO on the first two reads: retried (xio retries EIO three times per read),
 * the logits are exact. From the pack and from the GGUF, both back-ends. */
static void faults_eio_transient_retried(void) {
    char model[512], err[512];
    model_with_pack(model, sizeof model);
    float *ref = resident_logits(model), *lg = malloc(sizeof(float) * N_TOKS * N_VOCAB);
    for (int no_pack = 0; no_pack <= 1; no_pack++)
        for (int k = 0; k < 2; k++) {
            pt_engine *e = open_model(model, 1, no_pack, IOS[k], err, sizeof err);
            CHECKF(e, "%s", err);
            if (!e) continue;
            set_fault(F_EIO_FIRST, 2);
            CHECKF(eval_all(e, lg, err, sizeof err) == 0, "%s", err);
            xio_set_fault_hook(NULL, NULL);
            CHECK(atomic_load(&fault_hits) == 2);
            CHECKF(same(ref, lg), "no_pack %d io %d: logits differ after retried EIO", no_pack,
                   IOS[k]);
            pt_engine_close(e);
        }
    free(lg);
    free(ref);
}

/* EIO that persists: the evaluation fails with an error naming the file, and
 * the expert that failed is never used: once the disk recovers, the same
 * engine's next evaluation is exact. */
static void faults_eio_persistent_names_file(void) {
    char model[512], err[512], pack[600];
    model_with_pack(model, sizeof model);
    snprintf(pack, sizeof pack, "%s.xpack", model);
    float *ref = resident_logits(model), *lg = malloc(sizeof(float) * N_TOKS * N_VOCAB);
    for (int no_pack = 0; no_pack <= 1; no_pack++)
        for (int k = 0; k < 2; k++) {
            pt_engine *e = open_model(model, 2, no_pack, IOS[k], err, sizeof err);
            CHECKF(e, "%s", err);
            if (!e) continue;
            set_fault(F_EIO_ALWAYS, 0);
            CHECK(eval_all(e, lg, err, sizeof err) == -1);
            xio_set_fault_hook(NULL, NULL);
            CHECK(atomic_load(&fault_hits) > 0);
            CHECK_STR_CONTAINS(err, "reading experts of layer");
            CHECK_STR_CONTAINS(err, no_pack ? model : pack);
            CHECK_STR_CONTAINS(err, "Input/output error");
            CHECKF(eval_all(e, lg, err, sizeof err) == 0, "%s", err);
            CHECKF(same(ref, lg), "no_pack %d io %d: logits differ after a failed read", no_pack,
                   IOS[k]);
            pt_engine_close(e);
        }
    free(lg);
    free(ref);
}

/* Every read comes back short (one block at a time): continued, exact. */
static void faults_short_reads_continued(void) {
    char model[512], err[512];
    model_with_pack(model, sizeof model);
    float *ref = resident_logits(model), *lg = malloc(sizeof(float) * N_TOKS * N_VOCAB);
    for (int no_pack = 0; no_pack <= 1; no_pack++)
        for (int k = 0; k < 2; k++) {
            pt_engine *e = open_model(model, 1, no_pack, IOS[k], err, sizeof err);
            CHECKF(e, "%s", err);
            if (!e) continue;
            set_fault(F_SHORT, 0);
            CHECKF(eval_all(e, lg, err, sizeof err) == 0, "%s", err);
            xio_set_fault_hook(NULL, NULL);
            CHECK(atomic_load(&fault_hits) > 0);
            CHECKF(same(ref, lg), "no_pack %d io %d: logits differ after short reads", no_pack,
                   IOS[k]);
            pt_engine_close(e);
        }
    free(lg);
    free(ref);
}

/* A read that returns wrong bytes (one flipped byte per read, the pack's and
 * the GGUF's alike). Every expert read is checked against its record checksum:
 * a bad pack record is read again, then from the GGUF, whose bytes are bad
 * too here, so the evaluation must fail with an error naming the file; wrong
 * bytes never reach the logits (a run that succeeds must equal the resident
 * one). */
static void faults_wrong_bytes(void) {
    char model[512], err[512];
    model_with_pack(model, sizeof model);
    float *ref = resident_logits(model), *lg = malloc(sizeof(float) * N_TOKS * N_VOCAB);
    for (int k = 0; k < 2; k++) {
        pt_engine *e = open_model(model, 1, 0, IOS[k], err, sizeof err);
        CHECKF(e, "%s", err);
        if (!e) continue;
        set_fault(F_FLIP, 0);
        int rc = eval_all(e, lg, err, sizeof err);
        xio_set_fault_hook(NULL, NULL);
        CHECK(atomic_load(&fault_hits) > 0);
        if (rc == 0)
            CHECKF(same(ref, lg), "io %d: flipped bytes reached the logits", IOS[k]);
        else
            CHECK_STR_CONTAINS(err, model);
        pt_engine_close(e);
    }
    free(lg);
    free(ref);
}

/* The pack truncated while the engine streams from it: the next miss fails
 * with "unexpected end of file" naming the pack. */
static void faults_pack_truncated_while_running(void) {
    char model[512], err[512], pack[600];
    model_with_pack(model, sizeof model);
    snprintf(pack, sizeof pack, "%s.xpack", model);
    float *lg = malloc(sizeof(float) * N_TOKS * N_VOCAB);
    for (int k = 0; k < 2; k++) {
        pt_engine *e = open_model(model, 1, 0, IOS[k], err, sizeof err);
        CHECKF(e, "%s", err);
        if (!e) continue;
        CHECKF(eval_all(e, lg, err, sizeof err) == 0, "%s", err);
        struct stat st;
        CHECK(stat(pack, &st) == 0 && truncate(pack, st.st_size / 4) == 0);
        CHECK(eval_all(e, lg, err, sizeof err) == -1);
        CHECK_STR_CONTAINS(err, pack);
        CHECK_STR_CONTAINS(err, "unexpected end of file");
        pt_engine_close(e);
        unlink(pack);
        model_with_pack(model, sizeof model);
    }
    free(lg);
}

/* ===== A full disk (a small private tmpfs) ===== */

static int write_str(const char *path, const char *s) {
    int fd = open(path, O_WRONLY);
    if (fd < 0) return -1;
    int ok = write(fd, s, strlen(s)) == (ssize_t)strlen(s);
    close(fd);
    return ok ? 0 : -1;
}

/* Mount a tmpfs of `size` at dir, in a mount namespace of this case's process
 * alone (and its children: the CLI runs see it). Returns 0, or -1 after
 * marking the case skipped when this machine does not allow it. */
static int small_disk(const char *dir, const char *size) {
    mkdir(dir, 0755);
    if (unshare(CLONE_NEWNS) != 0) {
        /* not root: a user namespace grants the mount (its root is our uid) */
        uid_t uid = getuid();
        gid_t gid = getgid();
        char map[64];
        if (unshare(CLONE_NEWUSER | CLONE_NEWNS) != 0) goto skip;
        write_str("/proc/self/setgroups", "deny");
        snprintf(map, sizeof map, "%d %d 1", (int)uid, (int)uid);
        if (write_str("/proc/self/uid_map", map)) goto skip;
        snprintf(map, sizeof map, "%d %d 1", (int)gid, (int)gid);
        if (write_str("/proc/self/gid_map", map)) goto skip;
    }
    if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0) goto skip;
    char opt[64];
    snprintf(opt, sizeof opt, "size=%s", size);
    if (mount("petrel-test", dir, "tmpfs", 0, opt) != 0) goto skip;
    return 0;
skip:
    t_skip("needs a private tmpfs mount (unshare/mount not permitted here)");
    return -1;
}

/* Fill dir's file system to the last byte. */
static void fill_disk(const char *dir) {
    char path[600];
    snprintf(path, sizeof path, "%s/filler", dir);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    CHECK(fd >= 0);
    static char block[4096];
    for (int n = 4096; n > 0;)
        if (write(fd, block, (size_t)n) <= 0) n /= 2; /* the last partial block too */
    close(fd);
}

/* Names in dir, space-separated, into buf. */
static void list_dir(const char *dir, char *buf, size_t cap) {
    buf[0] = 0;
    DIR *d = opendir(dir);
    if (!d) return;
    for (struct dirent *de; (de = readdir(d));)
        if (de->d_name[0] != '.') {
            strncat(buf, de->d_name, cap - strlen(buf) - 2);
            strcat(buf, " ");
        }
    closedir(d);
}

/* `petrel pack` onto a disk too small for the pack: exit 1 naming the file
 * and ENOSPC; no file under the final name; what was written stays under
 * NAME.partial (the CLI says so: it may be what fills the disk), which the
 * engine and `petrel verify` refuse (and a rerun with room resumes). */
static void faults_enospc_pack(void) {
    char model[512], disk[512], pack[600], partial[700], cmd[4096];
    snprintf(model, sizeof model, "%s/f.gguf", t_tmpdir());
    copy_fixture("glm-dsa-rq2k.gguf", model);
    snprintf(disk, sizeof disk, "%s/disk", t_tmpdir());
    if (small_disk(disk, "1m")) return;
    snprintf(pack, sizeof pack, "%s/f.xpack", disk);
    snprintf(partial, sizeof partial, "%s.partial", pack);
    snprintf(cmd, sizeof cmd, "%s pack %s -o %s", bin(), model, pack);
    CHECK(t_run(cmd, out, sizeof out) == 1);
    CHECK_STR_CONTAINS(out, partial);
    CHECK_STR_CONTAINS(out, "No space left on device");
    CHECK_STR_CONTAINS(out, "rerun `petrel pack` to resume, or delete it");
    CHECK(access(pack, F_OK) != 0);
    snprintf(cmd, sizeof cmd, "%s verify %s --pack %s", bin(), model, partial);
    CHECK(t_run(cmd, out, sizeof out) == 1);
    CHECK_STR_CONTAINS(out, "incomplete pack");
    char err[512];
    pt_engine_params ep = {.model_path = model,
                           .n_threads = 1,
                           .expert_slots = 1,
                           .pack_path = partial,
                           .usage_dir = t_usage_dir()};
    pt_engine *e = pt_engine_open(&ep, err, sizeof err);
    CHECK(e == NULL);
    pt_engine_close(e);
}

/* Usage statistics onto a full disk: the save fails quietly (pt_engine_close
 * cannot fail; the statistics are only a pinning hint), no temporary file is
 * left behind, and the statistics saved before stay intact. */
static void faults_enospc_usage(void) {
    char model[512], disk[512], before[1024], after[1024], path[2048], err[512];
    snprintf(model, sizeof model, "%s/f.gguf", t_tmpdir());
    copy_fixture("glm-dsa-rq2k.gguf", model);
    snprintf(disk, sizeof disk, "%s/disk", t_tmpdir());
    if (small_disk(disk, "64k")) return;
    float *lg = malloc(sizeof(float) * N_TOKS * N_VOCAB);
    pt_engine_params ep = {
        .model_path = model, .n_threads = 2, .expert_slots = 1, .no_pack = 1, .usage_dir = disk};
    pt_engine *e = pt_engine_open(&ep, err, sizeof err);
    CHECKF(e && eval_all(e, lg, err, sizeof err) == 0, "%s", err);
    pt_engine_close(e);
    list_dir(disk, before, sizeof before);
    CHECKF(strstr(before, ".usage ") && !strchr(strstr(before, ".usage ") + 6, 'u'),
           "expected one usage file, found: %s", before);
    *strchr(before, ' ') = 0;
    snprintf(path, sizeof path, "%s/%s", disk, before);
    size_t n0, n1;
    void *old = t_read_file(path, &n0);
    fill_disk(disk);
    e = pt_engine_open(&ep, err, sizeof err);
    CHECKF(e && eval_all(e, lg, err, sizeof err) == 0, "%s", err);
    pt_engine_close(e);
    void *now = t_read_file(path, &n1);
    CHECKF(old && now && n0 == n1 && !memcmp(old, now, n0), "the saved statistics changed");
    list_dir(disk, after, sizeof after);
    CHECKF(!strstr(after, ".tmp"), "a temporary file was left: %s", after);
    free(old);
    free(now);
    free(lg);
}

/* The model file truncated under a running command: its resident tensors are
 * memory-mapped, so the next touch past the new end raises SIGBUS. `petrel
 * chat` has opened the model and waits for a line; the file is cut to 8 KiB,
 * then the line arrives: the command must stop with status 1 and one clear
 * line, not die with "Bus error". */
static void faults_model_truncated_under_cli(void) {
    const char *b = getenv("PETREL_BIN");
    char model[600], cmd[4096], msg[8192];
    snprintf(model, sizeof model, "%s/m.gguf", t_tmpdir());
    snprintf(cmd, sizeof cmd, "cp '%s' '%s'", t_fixture("qwen3moe-rq2k.gguf"), model);
    CHECK(t_run(cmd, msg, sizeof msg) == 0);
    snprintf(cmd, sizeof cmd,
             "(sleep 1.5; truncate -s 8192 '%s'; echo 'hello there') | '%s' chat -m '%s' "
             "--no-think -n 8 "
             "-t 1 >/dev/null",
             model, b && *b ? b : "build/petrel", model);
    const int rc = t_run(cmd, msg, sizeof msg);
    CHECKF(rc == 1, "exit status %d, expected 1:\n%s", rc, msg);
    CHECK_STR_CONTAINS(msg, "memory-mapped model file was truncated");
}

T_SUITE(faults) {
    T_ADD(faults_eio_transient_retried);
    T_ADD(faults_eio_persistent_names_file);
    T_ADD(faults_short_reads_continued);
    T_ADD(faults_wrong_bytes);
    T_ADD(faults_pack_truncated_while_running);
    T_ADD(faults_enospc_pack);
    T_ADD(faults_enospc_usage);
    T_ADD(faults_model_truncated_under_cli);
}
