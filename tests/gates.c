/* gates.c — logit comparison and the fixtures README's gates, and the fixture variants
 * the refusal tests load (see gates.h). */
#include "gates.h"

#include <jansson.h>
#include <math.h>
#include <stdlib.h>

#include "format/gguf.h"
#include "petrel.h"
#include "test.h"

gate_stats gate_compare(const float *got, const float *want, int rows, int n) {
    gate_stats s = {1.0, 0.0, 0.0, rows, 0, 0};
    for (int r = 0; r < rows; r++) {
        const float *g = got + (size_t)r * n, *w = want + (size_t)r * n;
        double dot = 0, ng = 0, nw = 0;
        int ag = 0, aw = 0, second = -1;
        for (int i = 0; i < n; i++) {
            dot += (double)g[i] * w[i];
            ng += (double)g[i] * g[i];
            nw += (double)w[i] * w[i];
            double d = fabs((double)g[i] - w[i]);
            if (d > s.max_diff) s.max_diff = d;
            if (g[i] > g[ag]) ag = i;
            if (w[i] > w[aw]) aw = i;
        }
        for (int i = 0; i < n; i++)
            if (i != aw && (second < 0 || w[i] > w[second])) second = i;
        double c = dot / fmax(sqrt(ng * nw), 1e-30);
        if (c < s.cos_min) s.cos_min = c;
        s.cos_mean += c / rows;
        if (ag != aw) {
            s.flips++;
            if (w[aw] - w[second] >= 0.1) s.bad_flips++;
        }
    }
    return s;
}

int gate_ok(const gate_stats *s, double f32_tol) {
    if (f32_tol > 0) return s->max_diff <= f32_tol && s->bad_flips == 0;
    int allowed = s->rows * 6 / 100;
    if (allowed < 1) allowed = 1;
    return s->cos_min >= 0.99 && s->cos_mean >= 0.9998 && s->bad_flips == 0 && s->flips <= allowed;
}

float *gate_read_f32(const char *name, size_t count) {
    size_t len = 0;
    float *p = t_read_file(t_fixture(name), &len);
    if (p && len != count * sizeof(float)) {
        free(p);
        return NULL;
    }
    return p;
}

int gate_argmax(const float *x, int n) {
    int b = 0;
    for (int i = 1; i < n; i++)
        if (x[i] > x[b]) b = i;
    return b;
}

int fixture_variant(const char *src_name, const char *path, const char *drop_key,
                    const char *drop_tensor, const char *u32_key, uint32_t u32_val) {
    pt_err err = {{0}};
    gguf_ctx *src = gguf_open(t_fixture(src_name), &err);
    if (!src) return -1;
    gguf_writer *w = gguf_writer_new(32);
    int rc = 0;
    for (uint64_t i = 0; i < src->n_kv && !rc; i++) {
        const gguf_kv *kv = &src->kv[i];
        if (drop_key && kv->key.len == strlen(drop_key) &&
            !memcmp(kv->key.ptr, drop_key, kv->key.len))
            continue;
        if (u32_key && kv->key.len == strlen(u32_key) &&
            !memcmp(kv->key.ptr, u32_key, kv->key.len)) {
            rc = gguf_writer_kv_u32(w, u32_key, u32_val, &err);
            continue;
        }
        rc = gguf_writer_kv_copy(w, kv, &err);
    }
    for (uint64_t i = 0; i < src->n_tensors && !rc; i++) {
        const gguf_tensor *t = &src->tensors[i];
        if (drop_tensor && !strcmp(t->name, drop_tensor)) continue;
        rc = gguf_writer_add_tensor(w, t->name, t->type, t->n_dims, t->ne, &err);
    }
    rc = rc || gguf_writer_begin(w, path, &err);
    for (uint64_t i = 0; i < src->n_tensors && !rc; i++) {
        const gguf_tensor *t = &src->tensors[i];
        if (drop_tensor && !strcmp(t->name, drop_tensor)) continue;
        rc = gguf_writer_write(w, t->data, t->nbytes, &err);
    }
    rc = rc || gguf_writer_finish(w, &err);
    gguf_writer_free(w);
    gguf_close(src);
    return rc;
}

pt_engine *fixture_open(const char *name, json_t **ref) {
    char path[256], model[256], err[512];
    *ref = NULL;
    snprintf(path, sizeof path, "%s.gguf", name);
    if (!t_need(path)) return NULL; /* the F32 models live in ../shared/fixtures only */
    snprintf(path, sizeof path, "%s.ref.json", name);
    if (!t_need(path)) return NULL;
    json_error_t jerr;
    json_t *j = json_load_file(t_fixture(path), 0, &jerr);
    CHECKF(j, "%s: %s", path, jerr.text);
    if (!j) return NULL;
    snprintf(model, sizeof model, "%s",
             t_fixture(json_string_value(json_object_get(j, "model_file"))));
    /* the references were made with an F32 KV cache (test_kvtypes.c covers the others) */
    pt_engine_params ep = {.model_path = model,
                           .n_threads = 2,
                           .usage_dir = t_usage_dir(),
                           .cache_type_k = PT_KV_F32,
                           .cache_type_v = PT_KV_F32};
    pt_engine *e = pt_engine_open(&ep, err, sizeof err);
    CHECKF(e, "%s: %s", name, err);
    if (!e) {
        json_decref(j);
        return NULL;
    }
    *ref = j;
    return e;
}
