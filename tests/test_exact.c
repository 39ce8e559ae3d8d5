/* test_exact.c — long prompts (2,000 and 8,000 tokens) against llama.cpp
 * references made by tools/mkref_exact.sh (tests/data/exact/README.md: the
 * models, the commands, the file format).
 *
 * Each line of tests/data/exact/MANIFEST names a reference, its gate (f32 or
 * q) and its model: a fixture (`fixture:NAME.gguf`), a file beside the data
 * (`data:NAME.gguf`) or an F32 model build/mkmodel writes again here
 * (`mkmodel:ARGS`, deterministic). The prompt is evaluated as one batch with
 * logits at every position (llama.cpp's batched path), then the reference's
 * greedy tokens are fed one at a time (its one-token path); each petrel path
 * is compared with the llama.cpp path that matches it and both figures are
 * printed. The reference stores every row's top 5 and every STRIDE-th prompt
 * row, the last prompt row and all greedy rows in full: cosine and max |diff|
 * over the full rows (and at the top-5 entries of every row), top-1 over every
 * row. Gates as tests/test_model.c (the fixtures README's): F32 — max |diff|
 * <= 1e-3 and petrel's own greedy continuation identical; quantised — cos
 * min >= 0.99, mean >= 0.9998, top-1 flips only at a reference margin < 0.1,
 * at most max(1, 6%) of the rows. Skipped by name when the data is absent.
 *
 * A reference named `NAME.kv-TYPE.pNk.ref` was made with llama.cpp's K and V cache in TYPE
 * (f16, bf16, q8_0, q4_0) and runs with petrel's in TYPE three times: in RAM, with all but
 * about 32 positions of the KV spilled to the SSD (kv_ram_mb), and through a prefix stored in
 * a prefix cache on disk and restored into a new session; the last two runs' logits must
 * equal the first's bit for bit. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine/pcache.h"
#include "gates.h"
#include "kernels/quant.h"
#include "petrel.h"
#include "test.h"

#define EX_DIR "tests/data/exact/"

typedef struct ex_ref {
    uint32_t nv, np, ng, stride, f16, nfull;
    const int32_t *tok;  /* [np + ng] */
    const uint8_t *top;  /* [np + ng] x (5 x u16 ids, 5 x f32 values) */
    const uint8_t *full; /* nfull rows, f32 or f16 */
    uint8_t *buf;
} ex_ref;

static int ex_is_full(const ex_ref *r, uint32_t row) {
    return row % r->stride == 0 || row + 1 >= r->np;
}

static int ex_load(const char *path, ex_ref *r) {
    size_t len;
    memset(r, 0, sizeof *r);
    r->buf = t_read_file(path, &len);
    if (!r->buf || len < 32 || memcmp(r->buf, "PTREF01", 8)) return -1;
    uint32_t h[6];
    memcpy(h, r->buf + 8, sizeof h);
    r->nv = h[0], r->np = h[1], r->ng = h[2], r->stride = h[3], r->f16 = h[4], r->nfull = h[5];
    const size_t nr = (size_t)r->np + r->ng;
    const size_t need = 32 + nr * 4 + nr * 30 + (size_t)r->nfull * r->nv * (r->f16 ? 2 : 4);
    if (!r->stride || len != need) return -1;
    r->tok = (const int32_t *)(r->buf + 32);
    r->top = r->buf + 32 + nr * 4;
    r->full = r->top + nr * 30;
    return 0;
}

static void ex_top(const ex_ref *r, size_t row, uint16_t id[5], float v[5]) {
    memcpy(id, r->top + row * 30, 10);
    memcpy(v, r->top + row * 30 + 10, 20);
}

/* Gate statistics of rows [r0, r1) of petrel's logits `got` ([rows][nv]). */
static gate_stats ex_compare(const ex_ref *r, const float *got, uint32_t r0, uint32_t r1) {
    gate_stats s = {1.0, 0.0, 0.0, (int)(r1 - r0), 0, 0};
    float *want = malloc(sizeof(float) * r->nv);
    size_t fi = 0;
    int nfull = 0;
    for (uint32_t row = 0; row < r1; row++) {
        const int full = ex_is_full(r, row);
        const size_t idx = fi;
        fi += full;
        if (row < r0) continue;
        const float *g = got + (size_t)row * r->nv;
        uint16_t id[5];
        float v[5];
        ex_top(r, row, id, v);
        int ag = 0;
        for (uint32_t i = 1; i < r->nv; i++)
            if (g[i] > g[ag]) ag = (int)i;
        if (ag != id[0]) {
            s.flips++;
            if (v[0] - v[1] >= 0.1) s.bad_flips++;
        }
        for (int k = 0; k < 5; k++)
            s.max_diff = fmax(s.max_diff, fabs((double)g[id[k]] - v[k]));
        if (!full) continue;
        for (uint32_t i = 0; i < r->nv; i++)
            want[i] = r->f16 ? qt_f16_to_f32(((const pt_f16 *)r->full)[idx * r->nv + i])
                             : ((const float *)r->full)[idx * r->nv + i];
        gate_stats one = gate_compare(g, want, 1, (int)r->nv);
        s.cos_min = fmin(s.cos_min, one.cos_min);
        s.cos_mean += one.cos_mean;
        s.max_diff = fmax(s.max_diff, one.max_diff);
        nfull++;
    }
    s.cos_mean = nfull ? s.cos_mean / nfull : 1.0;
    free(want);
    return s;
}

/* Evaluates the reference's rows into got ([np + ng][nv]): the prompt as one batch, then the
 * greedy tokens one at a time. how 1: the first half of the prompt (whole prefix-cache blocks)
 * is evaluated by one session and stored in a prefix cache on disk, and a second session
 * restores it and evaluates the rest: rows from the restored position on are that session's.
 * Returns the first row the second session computed (0 for how 0), or -1. */
static int ex_run(pt_engine *e, const ex_ref *r, int how, float *got, const char *refname,
                  uint64_t *disk) {
    char err[512], dir[4200];
    const uint32_t nr = r->np + r->ng;
    pt_session_params sp = {.n_ctx = (int)nr + 1};
    int from = 0, rc = -1;
    pt_pcache *pc = NULL;
    if (how == 1) {
        snprintf(dir, sizeof dir, "%s/pcache", t_tmpdir());
        pt_pcache_params pp = {.dir = dir};
        pc = pt_pcache_open(e, &pp, err, sizeof err);
        CHECKF(pc, "%s: %s", refname, err);
        if (!pc) return -1;
        const int half = (int)(r->np / 2 / PT_PCACHE_BLOCK * PT_PCACHE_BLOCK);
        pt_session *a = pt_session_new(e, &sp, err, sizeof err);
        CHECKF(a, "%s: %s", refname, err);
        if (!a) goto out;
        const int ok = pt_session_eval(a, r->tok, half, NULL, 0, NULL, err, sizeof err) == 0;
        CHECKF(ok, "%s: %s", refname, err);
        CHECKF(!ok || pcache_save(pc, a, NULL, half) > 0, "%s: nothing stored", refname);
        pt_session_free(a);
        if (!ok) goto out;
    }
    pt_session *s = pt_session_new(e, &sp, err, sizeof err);
    CHECKF(s, "%s: %s", refname, err);
    if (!s) goto out;
    if (pc) {
        from = pcache_restore(pc, s, NULL, r->tok, (int)r->np);
        CHECKF(from > 0, "%s: nothing restored", refname);
        if (from <= 0) {
            pt_session_free(s);
            goto out;
        }
    }
    rc = pt_session_eval(s, r->tok + from, (int)r->np - from, got + (size_t)from * r->nv, 1, NULL,
                         err, sizeof err);
    for (uint32_t j = 0; j < r->ng && rc == 0; j++)
        rc = pt_session_eval(s, &r->tok[r->np + j], 1, got + (size_t)(r->np + j) * r->nv, 0, NULL,
                             err, sizeof err);
    CHECKF(rc == 0, "%s: %s", refname, err);
    if (disk) *disk = pt_session_kv_disk_bytes(s);
    pt_session_free(s);
    rc = rc ? -1 : from;
out:
    pt_pcache_close(pc);
    return rc;
}

static void ex_check(const char *refname, double f32, const char *model_spec) {
    char path[512], model[512], cmd[2048], out[4096], err[512];
    snprintf(path, sizeof path, EX_DIR "%s", refname);
    ex_ref r;
    if (ex_load(path, &r)) {
        CHECKF(0, "%s: unreadable or malformed", path);
        free(r.buf);
        return;
    }
    if (!strncmp(model_spec, "fixture:", 8)) {
        const char *p = t_need(model_spec + 8);
        if (!p) {
            free(r.buf);
            return;
        }
        snprintf(model, sizeof model, "%s", p);
    } else if (!strncmp(model_spec, "data:", 5)) {
        snprintf(model, sizeof model, EX_DIR "%s", model_spec + 5);
    } else if (!strncmp(model_spec, "mkmodel:", 8)) {
        const char *mk = getenv("PETREL_MKMODEL");
        if (!mk || !*mk) mk = "build/mkmodel";
        snprintf(model, sizeof model, "%s/m.gguf", t_tmpdir());
        snprintf(cmd, sizeof cmd, "%s -o %s -t 1 %s", mk, model, model_spec + 8);
        CHECKF(t_run(cmd, out, sizeof out) == 0, "mkmodel (set PETREL_MKMODEL): %s", out);
    } else {
        CHECKF(0, "%s: unknown model '%s'", refname, model_spec);
        free(r.buf);
        return;
    }
    /* the cache type: `NAME.kv-TYPE.pNk.ref` was made with llama.cpp's K and V cache in TYPE,
     * every other reference with an F32 cache */
    int kv = PT_KV_F32;
    const char *kvp = strstr(refname, ".kv-");
    if (kvp) {
        char tn[16];
        snprintf(tn, sizeof tn, "%.*s", (int)strcspn(kvp + 4, "."), kvp + 4);
        kv = pt_kv_type_parse(tn);
        CHECKF(kv > 0, "%s: unknown cache type '%s'", refname, tn);
        if (kv <= 0) {
            free(r.buf);
            return;
        }
    }
    pt_engine_params ep = {.model_path = model,
                           .n_threads = 2,
                           .usage_dir = t_usage_dir(),
                           .cache_type_k = kv,
                           .cache_type_v = kv};
    pt_engine *e = pt_engine_open(&ep, err, sizeof err);
    CHECKF(e, "%s: %s", refname, err);
    if (!e) {
        free(r.buf);
        return;
    }
    CHECK(pt_engine_n_vocab(e) == (int)r.nv);
    const uint32_t nr = r.np + r.ng;
    float *got = malloc(sizeof(float) * (size_t)nr * r.nv);
    if (ex_run(e, &r, 0, got, refname, NULL) == 0) {
        gate_stats b = ex_compare(&r, got, 0, r.np), o = ex_compare(&r, got, r.np, nr),
                   all = ex_compare(&r, got, 0, nr);
        fprintf(stderr,
                "  %s: batch (%u rows): cos min %.6f mean %.7f max|diff| %.2e flips %d (%d at "
                "margin >= 0.1); one-token (%u rows): cos min %.6f max|diff| %.2e flips %d\n",
                refname, r.np, b.cos_min, b.cos_mean, b.max_diff, b.flips, b.bad_flips, r.ng,
                o.cos_min, o.max_diff, o.flips);
        /* f32 -2: the loose floor of tests/test_kvtypes.c (a path llama.cpp computes otherwise) */
        CHECKF(f32 == -1 ||
                   (f32 == -2 ? all.cos_min >= 0.95 && all.cos_mean >= 0.97 : gate_ok(&all, f32)),
               "%s: cos min %.6f mean %.7f max|diff| %.2e flips %d (%d at margin >= 0.1) of %d",
               refname, all.cos_min, all.cos_mean, all.max_diff, all.flips, all.bad_flips,
               all.rows);
        if (f32 > 0) {
            int same = 1;
            for (uint32_t j = 0; j < r.ng && same; j++) {
                const float *g = got + (size_t)(r.np + j - 1) * r.nv;
                int a = 0;
                for (uint32_t i = 1; i < r.nv; i++)
                    if (g[i] > g[a]) a = (int)i;
                same = a == r.tok[r.np + j];
            }
            CHECKF(same, "%s: greedy continuation differs", refname);
        }
        /* the KV-type references also run with the KV spilled to the SSD (a RAM share of
         * about 32 positions) and through a prefix restored from disk: each run's logits must
         * be the in-RAM run's bits, so the gate holds there too */
        if (kvp) {
            float *again = malloc(sizeof(float) * (size_t)nr * r.nv);
            ep.kv_ram_mb = 0.02;
            pt_engine *es = pt_engine_open(&ep, err, sizeof err);
            CHECKF(es, "%s (KV spilled): %s", refname, err);
            uint64_t disk = 0;
            if (es && ex_run(es, &r, 0, again, refname, &disk) == 0) {
                CHECKF(disk > 0, "%s: --kv-ram-mb 0.02 spilled nothing", refname);
                CHECKF(!memcmp(again, got, (size_t)nr * r.nv * sizeof(float)),
                       "%s: with the KV spilled to the SSD the logits differ from the in-RAM run",
                       refname);
                fprintf(stderr,
                        "  %s: KV spilled to the SSD (%.1f MB on disk): identical rows 0..%u\n",
                        refname, (double)disk / 1e6, nr - 1);
            }
            pt_engine_close(es);
            const int held = ex_run(e, &r, 1, again, refname, NULL);
            if (held > 0) {
                const size_t at = (size_t)held * r.nv, n = (size_t)nr * r.nv - at;
                CHECKF(!memcmp(again + at, got + at, n * sizeof(float)),
                       "%s: after a prefix of %d positions restored from disk the logits differ "
                       "from the in-RAM run",
                       refname, held);
                fprintf(stderr, "  %s: restored from disk at %d: identical rows %d..%u\n", refname,
                        held, held, nr - 1);
            }
            free(again);
        }
    }
    pt_engine_close(e);
    free(got);
    free(r.buf);
}

static void exact_long_prompts(void) {
    size_t len;
    char *man = t_read_file(EX_DIR "MANIFEST", &len);
    if (!man) {
        t_skip("needs tests/data/exact/MANIFEST (tools/mkref_exact.sh)");
        return;
    }
    man = realloc(man, len + 1);
    man[len] = 0;
    for (char *line = strtok(man, "\n"); line; line = strtok(NULL, "\n")) {
        if (line[0] == '#' || !line[0]) continue;
        char ref[256], gate[16];
        int n = 0;
        if (sscanf(line, "%255s %15s %n", ref, gate, &n) != 2 || !n) continue;
        const char *only = getenv("PETREL_EXACT_ONLY"); /* a substring of the names to run */
        if (only && *only && !strstr(ref, only)) continue;
        /* the 8,000-token prompts run in `make test-full` (minutes each, more under the
         * sanitizers); `make test` checks every 2,000-token reference */
        const char *full = getenv("PETREL_TEST_FULL");
        if (strstr(ref, ".p8k.") && !(full && !strcmp(full, "1")) && !(only && *only)) continue;
        /* of the KV-type references, make test runs the default type's (f16) */
        if (strstr(ref, ".kv-") && !strstr(ref, ".kv-f16.") && !(full && !strcmp(full, "1")) &&
            !(only && *only))
            continue;
        char path[512];
        snprintf(path, sizeof path, EX_DIR "%s", ref);
        if (access(path, R_OK)) {
            char why[600];
            snprintf(why, sizeof why, "needs %s (tools/mkref_exact.sh)", path);
            t_skip(why);
            continue;
        }
        /* f32: the F32 gate (1e-3); f32g: gemma4's F32 gate (1e-2, its fp16 GELU table);
         * q: the quantised gate; loose: cos min >= 0.95, mean >= 0.97 (llama.cpp's
         * flash-attention path for a quantised cache, README.md); open: figures printed, no
         * gate (a drift not yet explained, bench/RESULTS.md) */
        const double g = !strcmp(gate, "f32")     ? 1e-3
                         : !strcmp(gate, "f32g")  ? 1e-2
                         : !strcmp(gate, "open")  ? -1
                         : !strcmp(gate, "loose") ? -2
                                                  : 0;
        ex_check(ref, g, line + n);
    }
    free(man);
}

T_SUITE(exact) {
    T_ADD_TIMEOUT(exact_long_prompts, 600);
}
