/* test_dequant.c — petrel's decoders against llama.cpp's, through the
 * fixtures: metrics.json (`dequant_vs_f32`) lists, for every quantised tensor
 * of the shipped fixtures, the RMS of llama.cpp's decoding and its relative
 * RMS error against the F32 original. Decoding each tensor with
 * qt_dequant_ref must reproduce both figures to 1e-5 relative (the fixtures
 * README's gate; a correct decoder lands near 1e-7). Entries whose file is not
 * shipped (the `iq1` mix) are counted and reported, not silently passed. The
 * F32 originals are in ../shared/fixtures only: without them the RMS figures
 * are still checked and the case is reported skipped, naming the file. */
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "format/gguf.h"
#include "kernels/quant.h"
#include "test.h"

/* F32 original of a fixture, when shipped and present (have[0]: glm-dsa's, have[1]: gemma4's). */
static const char *original_of(const char *fixture, const int have[2]) {
    if (!strncmp(fixture, "glm-dsa-", 8)) return have[0] ? "glm-dsa-f32.gguf" : NULL;
    if (!strncmp(fixture, "gemma4-", 7)) return have[1] ? "gemma4-f32.gguf" : NULL;
    return NULL;
}

typedef struct open_file {
    char name[64];
    gguf_ctx *g;
} open_file;

static gguf_ctx *get_file(open_file *cache, int *n, const char *name) {
    for (int i = 0; i < *n; i++)
        if (!strcmp(cache[i].name, name)) return cache[i].g;
    if (*n == 16) return NULL;
    pt_err err = {{0}};
    gguf_ctx *g = gguf_open(t_fixture(name), &err);
    snprintf(cache[*n].name, sizeof cache[*n].name, "%s", name);
    cache[(*n)++].g = g;
    return g;
}

static void dequant_matches_llamacpp_metrics(void) {
    size_t len;
    char *text = t_read_file(t_fixture("metrics.json"), &len);
    CHECKF(text, "cannot read %s", t_fixture("metrics.json"));
    if (!text) return;
    json_error_t jerr;
    json_t *root = json_loads(text, 0, &jerr);
    free(text);
    CHECKF(root, "metrics.json: %s", jerr.text);
    json_t *list = json_object_get(root, "dequant_vs_f32");
    CHECK(json_is_array(list) && json_array_size(list) > 300);
    const int have[2] = {t_need("glm-dsa-f32.gguf") != NULL, t_need("gemma4-f32.gguf") != NULL};
    open_file cache[16];
    int n_open = 0;
    int checked = 0, with_original = 0, missing = 0;
    int per_type[QT_COUNT] = {0};
    double worst = 0;
    size_t i;
    json_t *e;
    json_array_foreach(list, i, e) {
        const char *fx = json_string_value(json_object_get(e, "fixture"));
        const char *tn = json_string_value(json_object_get(e, "tensor"));
        double want_err = json_real_value(json_object_get(e, "rel_rms_err_vs_f32"));
        double want_rms = json_real_value(json_object_get(e, "rms"));
        char file[96];
        snprintf(file, sizeof file, "%s.gguf", fx);
        gguf_ctx *g = get_file(cache, &n_open, file);
        if (!g) {
            missing++;
            continue;
        }
        const gguf_tensor *t = gguf_find_tensor(g, tn);
        CHECKF(t, "%s: no tensor %s", fx, tn);
        if (!t) continue;
        const qt_traits *tr = qt_get(t->type);
        CHECKF(tr && tr->decodes, "%s: %s has type %s petrel cannot decode", fx, tn,
               qt_name(t->type));
        if (!tr || !tr->decodes) continue;
        int64_t n = gguf_nelements(t);
        float *x = malloc((size_t)n * sizeof(float));
        qt_dequant_ref(t->type, t->data, x, n);
        double ss = 0;
        for (int64_t j = 0; j < n; j++)
            ss += (double)x[j] * x[j];
        double rms = sqrt(ss / (double)n);
        double rel = fabs(rms - want_rms) / want_rms;
        if (rel > worst) worst = rel;
        CHECKF(rel <= 1e-5, "%s %s (%s): rms %.9g, llama.cpp %.9g", fx, tn, tr->name, rms,
               want_rms);
        const char *orig_name = original_of(fx, have);
        gguf_ctx *og = orig_name ? get_file(cache, &n_open, orig_name) : NULL;
        const gguf_tensor *ot = og ? gguf_find_tensor(og, tn) : NULL;
        if (ot && ot->type == QT_F32 && gguf_nelements(ot) == n) {
            const float *o = (const float *)ot->data;
            double se = 0, so = 0;
            for (int64_t j = 0; j < n; j++) {
                double d = (double)x[j] - o[j];
                se += d * d;
                so += (double)o[j] * o[j];
            }
            double got = sqrt(se / so);
            double r = fabs(got - want_err) / want_err;
            if (r > worst) worst = r;
            CHECKF(r <= 1e-5, "%s %s (%s): rel RMS error %.9g, llama.cpp %.9g", fx, tn, tr->name,
                   got, want_err);
            with_original++;
        }
        free(x);
        per_type[t->type]++;
        checked++;
    }
    for (int k = 0; k < n_open; k++)
        gguf_close(cache[k].g);
    json_decref(root);
    fprintf(stderr,
            "  %d tensors decoded (%d against their F32 original), %d in unshipped files, "
            "worst relative deviation %.2e; by type:",
            checked, with_original, missing, worst);
    for (int k = 0; k < QT_COUNT; k++)
        if (per_type[k]) fprintf(stderr, " %s %d", qt_name((uint32_t)k), per_type[k]);
    fprintf(stderr, "\n");
    CHECK(checked >= 300);
    /* every type the shipped fixtures contain was exercised */
    const int must[] = {QT_Q8_0,  QT_Q2_K,    QT_Q4_K,  QT_Q6_K,   QT_Q5_0,   QT_IQ2_XXS, QT_IQ2_XS,
                        QT_IQ2_S, QT_IQ3_XXS, QT_IQ3_S, QT_IQ4_NL, QT_IQ4_XS, QT_MXFP4};
    for (size_t k = 0; k < PT_ARRAY_LEN(must); k++)
        CHECKF(per_type[must[k]] > 0, "no %s tensor checked", qt_name((uint32_t)must[k]));
}

T_SUITE(dequant) {
    T_ADD(dequant_matches_llamacpp_metrics);
}
