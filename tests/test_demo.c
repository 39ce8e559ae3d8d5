/* test_demo.c — the double check of petrel's default model, models/petrel-demo-glm.gguf (a
 * glm-dsa MoE trained from scratch by tools/train_demo): petrel's logits on a fixed 48-token
 * passage against an independent PyTorch implementation of the architecture
 * (tools/train_demo/model.py) run on the weights decoded from the same file. The reference
 * rows live in tests/data/demo (made by tools/train_demo/dump_ref.py; no torch at test time).
 *
 * The passage is longer than the model's DSA top-k (32), so rows past 32 exercise the sparse
 * attention. Gates (../shared/fixtures/README.md, "Recommended comparison metrics"): the
 * reference converts activations to Q8_0 like llama.cpp (ref.json "act_q8": true), so the
 * quantised / converts-activations row applies — cos min >= 0.99, cos mean >= 0.9998,
 * max |diff| <= 2, top-1 disagreements only at a reference margin below 0.1 and at most
 * max(1, 6% of rows); with a float-activation reference, the dequantise-to-float row (0.97,
 * 0.999, 3, >= 85 % top-1). The trunk hidden state (the MTP input) and the MTP head (fed the
 * reference's hidden state, as tests/test_model.c does) are checked the same way, and the
 * logits must not change when the routed experts are streamed through a small cache. */
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "engine/session.h"
#include "petrel.h"
#include "test.h"

#define DEMO_DIR "tests/data/demo/"
#define DEMO_MODEL "models/petrel-demo-glm.gguf"

typedef struct demo_stats {
    double cos_min, cos_mean, max_diff;
    int rows, flips, bad_flips;
} demo_stats;

/* got rows picked by rows[] (NULL: row r) from got [..][n], against want [nrows][n]. */
static demo_stats demo_compare(const float *got, const int *rows, const float *want, int nrows,
                               int n) {
    demo_stats s = {1.0, 0.0, 0.0, nrows, 0, 0};
    for (int r = 0; r < nrows; r++) {
        const float *g = got + (size_t)(rows ? rows[r] : r) * n, *w = want + (size_t)r * n;
        double dot = 0, ng = 0, nw = 0;
        int ag = 0, aw = 0, second = -1;
        for (int i = 0; i < n; i++) {
            dot += (double)g[i] * w[i];
            ng += (double)g[i] * g[i];
            nw += (double)w[i] * w[i];
            const double d = fabs((double)g[i] - w[i]);
            if (d > s.max_diff) s.max_diff = d;
            if (g[i] > g[ag]) ag = i;
            if (w[i] > w[aw]) aw = i;
        }
        for (int i = 0; i < n; i++)
            if (i != aw && (second < 0 || w[i] > w[second])) second = i;
        const double c = dot / fmax(sqrt(ng * nw), 1e-30);
        if (c < s.cos_min) s.cos_min = c;
        s.cos_mean += c / nrows;
        if (ag != aw) {
            s.flips++;
            if (w[aw] - w[second] >= 0.1) s.bad_flips++;
        }
    }
    return s;
}

static int demo_gate(const demo_stats *s, int act_q8) {
    if (act_q8) {
        int allowed = s->rows * 6 / 100;
        if (allowed < 1) allowed = 1;
        return s->cos_min >= 0.99 && s->cos_mean >= 0.9998 && s->max_diff <= 2.0 &&
               s->bad_flips == 0 && s->flips <= allowed;
    }
    return s->cos_min >= 0.97 && s->cos_mean >= 0.999 && s->max_diff <= 3.0 &&
           s->flips * 100 <= s->rows * 15;
}

static float *demo_read_f32(const char *name, size_t count) {
    char path[256];
    snprintf(path, sizeof path, DEMO_DIR "%s", name);
    size_t len = 0;
    float *p = t_read_file(path, &len);
    if (p && len != count * sizeof(float)) {
        free(p);
        return NULL;
    }
    return p;
}

static int *json_ints(json_t *a, int *n) {
    *n = (int)json_array_size(a);
    int *v = malloc(sizeof(int) * (size_t)(*n > 0 ? *n : 1));
    for (int i = 0; i < *n; i++)
        v[i] = (int)json_integer_value(json_array_get(a, (size_t)i));
    return v;
}

/* Evaluate the passage with the given expert cache; logits [n][nv] and hidden [n][D]. */
static int demo_eval(int expert_slots, const int32_t *toks, int n, float *logits, float *hidden,
                     float *mtp, const float *hprev) {
    char err[512];
    pt_engine_params ep = {.model_path = DEMO_MODEL,
                           .n_threads = 2,
                           .expert_slots = expert_slots,
                           .usage_dir = t_usage_dir(),
                           .cache_type_k = PT_KV_F32, /* the reference rows keep float K/V */
                           .cache_type_v = PT_KV_F32};
    pt_engine *e = pt_engine_open(&ep, err, sizeof err);
    CHECKF(e, "%s", err);
    if (!e) return -1;
    pt_session_params sp = {.n_ctx = n + 1};
    pt_session *s = pt_session_new(e, &sp, err, sizeof err);
    CHECKF(s, "%s", err);
    int rc = -1;
    if (s) {
        rc = pt_session_eval(s, toks, n, logits, 1, hidden, err, sizeof err);
        CHECKF(rc == 0, "%s", err);
        if (rc == 0 && mtp) {
            rc = session_mtp(s, toks, hprev, n, mtp, 0, NULL, err, sizeof err);
            CHECKF(rc == 0, "%s", err);
        }
        pt_session_free(s);
    }
    pt_engine_close(e);
    return rc;
}

static void demo_model_vs_pytorch(void) {
    FILE *f = fopen(DEMO_MODEL, "rb");
    if (!f) {
        t_skip(DEMO_MODEL " not present");
        return;
    }
    fclose(f);
    json_error_t jerr;
    json_t *ref = json_load_file(DEMO_DIR "ref.json", 0, &jerr);
    CHECKF(ref, DEMO_DIR "ref.json: %s", jerr.text);
    if (!ref) return;
    const int act_q8 = json_is_true(json_object_get(ref, "act_q8"));
    const int nv = (int)json_integer_value(json_object_get(ref, "n_vocab"));
    const int D = (int)json_integer_value(json_object_get(ref, "n_embd"));
    int n, n_rows, n_mtp;
    int *tok_i = json_ints(json_object_get(ref, "tokens"), &n);
    int *rows = json_ints(json_object_get(ref, "logit_rows"), &n_rows);
    int *mrows = json_ints(json_object_get(ref, "mtp_rows"), &n_mtp);
    int32_t *toks = malloc(sizeof(int32_t) * (size_t)n);
    for (int i = 0; i < n; i++)
        toks[i] = tok_i[i];
    float *want =
        demo_read_f32(json_string_value(json_object_get(ref, "logits_file")), (size_t)n_rows * nv);
    float *want_h =
        demo_read_f32(json_string_value(json_object_get(ref, "hidden_file")), (size_t)n * D);
    float *want_m =
        demo_read_f32(json_string_value(json_object_get(ref, "mtp_file")), (size_t)n_mtp * nv);
    CHECKF(want && want_h && want_m, DEMO_DIR ": reference files missing or of the wrong size");
    float *got = malloc(sizeof(float) * (size_t)n * nv),
          *hidden = malloc(sizeof(float) * (size_t)n * D);
    float *mtp = malloc(sizeof(float) * (size_t)n * nv),
          *hprev = calloc((size_t)n * D, sizeof(float));
    float *got_s = malloc(sizeof(float) * (size_t)n * nv),
          *hidden_s = malloc(sizeof(float) * (size_t)n * D);
    if (want && want_h && want_m) {
        memcpy(hprev + D, want_h, sizeof(float) * (size_t)(n - 1) * D);
        if (demo_eval(PT_EXPERTS_MMAP, toks, n, got, hidden, mtp, hprev) == 0) {
            demo_stats st = demo_compare(got, rows, want, n_rows, nv);
            CHECKF(demo_gate(&st, act_q8),
                   "demo logits: cos min %.6f mean %.6f max|diff| %.3f flips %d (%d at margin >= "
                   "0.1) of %d",
                   st.cos_min, st.cos_mean, st.max_diff, st.flips, st.bad_flips, st.rows);
            fprintf(stderr,
                    "  demo logits: cos min %.6f mean %.6f max|diff| %.3f top-1 flips %d/%d\n",
                    st.cos_min, st.cos_mean, st.max_diff, st.flips, st.rows);
            demo_stats hs = demo_compare(hidden, NULL, want_h, n, D);
            CHECKF(hs.cos_min >= 0.99, "demo hidden state: cos min %.6f max|diff| %.3f", hs.cos_min,
                   hs.max_diff);
            demo_stats ms = demo_compare(mtp, mrows, want_m, n_mtp, nv);
            CHECKF(demo_gate(&ms, act_q8),
                   "demo MTP: cos min %.6f mean %.6f max|diff| %.3f flips %d (%d bad) of %d",
                   ms.cos_min, ms.cos_mean, ms.max_diff, ms.flips, ms.bad_flips, ms.rows);
            fprintf(stderr, "  demo MTP: cos min %.6f mean %.6f max|diff| %.3f top-1 flips %d/%d\n",
                    ms.cos_min, ms.cos_mean, ms.max_diff, ms.flips, ms.rows);
            /* streamed through a 4-slot cache per layer: the arithmetic must not change */
            if (demo_eval(4, toks, n, got_s, hidden_s, NULL, NULL) == 0) {
                double md = 0;
                for (size_t i = 0; i < (size_t)n * nv; i++)
                    md = fmax(md, fabs((double)got_s[i] - got[i]));
                CHECKF(md == 0.0, "demo: streamed experts change the logits (max |diff| %.3g)", md);
            }
        }
    }
    free(tok_i);
    free(rows);
    free(mrows);
    free(toks);
    free(want);
    free(want_h);
    free(want_m);
    free(got);
    free(hidden);
    free(mtp);
    free(hprev);
    free(got_s);
    free(hidden_s);
    json_decref(ref);
}

T_SUITE(demo) {
    T_ADD(demo_model_vs_pytorch);
}
