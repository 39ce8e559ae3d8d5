/* tools.c — the model-tools API (petrel_tools.h) over the GGUF reader, the
 * model accounting (model/info.c) and expert packs (format/xpack.c). Thin by
 * design: the tools' logic stays in those modules, this file only translates
 * types and errors so the CLI needs no internal header. */
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "format/ggml_types.h"
#include "format/gguf.h"
#include "format/xpack.h"
#include "model/info.h"
#include "petrel_tools.h"

_Static_assert(PT_TYPE_COUNT == QT_COUNT,
               "petrel_tools.h's type count follows format/ggml_types.h");
_Static_assert(PT_NO_TYPE == MI_NO_TYPE,
               "petrel_tools.h's PT_NO_TYPE is model/info.h's MI_NO_TYPE");
_Static_assert((int)PT_META_FLOAT64 == (int)GGUF_FLOAT64 && (int)PT_META_ARRAY == (int)GGUF_ARRAY &&
                   (int)PT_META_STRING == (int)GGUF_STRING && (int)PT_META_BOOL == (int)GGUF_BOOL,
               "petrel_tools.h's value types are GGUF's");

struct pt_model {
    gguf_ctx *g;
};

static void copy_err(const pt_err *e, char *buf, size_t len) {
    if (buf && len) snprintf(buf, len, "%s", e->msg);
}

pt_model *pt_model_open(const char *path, char *err, size_t err_len) {
    pt_err e = {{0}};
    pt_model *m = calloc(1, sizeof *m);
    if (!m) {
        snprintf(err, err_len, "out of memory");
        return NULL;
    }
    m->g = gguf_open(path, &e);
    if (!m->g) {
        copy_err(&e, err, err_len);
        free(m);
        return NULL;
    }
    return m;
}

void pt_model_close(pt_model *m) {
    if (!m) return;
    gguf_close(m->g);
    free(m);
}

const char *pt_model_path(const pt_model *m) {
    return m->g->files[0].path;
}

/* ===== Metadata ===== */

uint64_t pt_model_n_meta(const pt_model *m) {
    return m->g->n_kv;
}

void pt_model_meta(const pt_model *m, uint64_t i, pt_meta *out) {
    const gguf_kv *kv = &m->g->kv[i];
    *out = (pt_meta){.key = kv->key.ptr, .key_len = (size_t)kv->key.len, .type = (int)kv->val.type};
    if (kv->val.type == GGUF_ARRAY) out->elem_type = (int)kv->val.arr.type, out->n = kv->val.arr.n;
}

/* The value of pair i, or element j of its array of strings or arrays (the
 * elements parsed as values); NULL for a fixed-size element (read by index). */
static const gguf_value *value_at(const pt_model *m, uint64_t i, int64_t j) {
    const gguf_value *v = &m->g->kv[i].val;
    if (j < 0) return v;
    if (v->type != GGUF_ARRAY || (uint64_t)j >= v->arr.n || !v->arr.items) return NULL;
    return &v->arr.items[j];
}

static int fixed_elem(const pt_model *m, uint64_t i, int64_t j) {
    const gguf_value *v = &m->g->kv[i].val;
    return j >= 0 && v->type == GGUF_ARRAY && (uint64_t)j < v->arr.n && !v->arr.items;
}

int pt_model_meta_str(const pt_model *m, uint64_t i, int64_t j, const char **s, size_t *len) {
    const gguf_value *v = value_at(m, i, j);
    if (!v || v->type != GGUF_STRING) return -1;
    *s = v->str.ptr;
    *len = (size_t)v->str.len;
    return 0;
}

int pt_model_meta_i64(const pt_model *m, uint64_t i, int64_t j, int64_t *out) {
    if (fixed_elem(m, i, j)) return gguf_array_i64(&m->g->kv[i].val, (uint64_t)j, out);
    const gguf_value *v = value_at(m, i, j);
    if (!v) return -1;
    if (v->type == GGUF_BOOL) return *out = v->b != 0, 0;
    return gguf_value_i64(v, out);
}

int pt_model_meta_u64(const pt_model *m, uint64_t i, int64_t j, uint64_t *out) {
    int64_t x;
    if (fixed_elem(m, i, j)) {
        const uint32_t t = m->g->kv[i].val.arr.type;
        if (t == GGUF_UINT64) {
            memcpy(out, m->g->kv[i].val.arr.data + 8 * (uint64_t)j, 8);
            return 0;
        }
        if (gguf_array_i64(&m->g->kv[i].val, (uint64_t)j, &x) || x < 0) return -1;
        return *out = (uint64_t)x, 0;
    }
    const gguf_value *v = value_at(m, i, j);
    if (!v) return -1;
    if (v->type == GGUF_UINT8 || v->type == GGUF_UINT16 || v->type == GGUF_UINT32 ||
        v->type == GGUF_UINT64)
        return *out = v->u64, 0;
    if (gguf_value_i64(v, &x) || x < 0) return -1;
    return *out = (uint64_t)x, 0;
}

int pt_model_meta_f64(const pt_model *m, uint64_t i, int64_t j, double *out) {
    if (fixed_elem(m, i, j)) {
        const uint32_t t = m->g->kv[i].val.arr.type;
        if (t != GGUF_FLOAT32 && t != GGUF_FLOAT64) return -1;
        return gguf_array_f64(&m->g->kv[i].val, (uint64_t)j, out);
    }
    const gguf_value *v = value_at(m, i, j);
    if (!v || (v->type != GGUF_FLOAT32 && v->type != GGUF_FLOAT64)) return -1;
    return *out = v->f64, 0;
}

const char *pt_meta_type_name(int type) {
    return gguf_type_name((uint32_t)type);
}

/* ===== Accounting ===== */

const char *pt_type_name(uint32_t type) {
    return qt_name(type);
}

int pt_model_info_get(const pt_model *m, pt_model_info *out, char *err, size_t err_len) {
    pt_err e = {{0}};
    if (model_info_get(m->g, out, &e)) {
        copy_err(&e, err, err_len);
        return -1;
    }
    return 0;
}

void pt_model_info_free(pt_model_info *info) {
    model_info_free(info);
}

/* ===== Expert packs ===== */

int pt_pack_candidates(const pt_model *m, const char *cache_dir, char out[2][PT_PATH_MAX]) {
    return xpack_candidates(m->g->files[0].path, cache_dir, out);
}

int pt_pack_write(const pt_model *m, const char *path, pt_progress_fn progress, void *user,
                  int64_t stop_after, char *err, size_t err_len) {
    pt_err e = {{0}};
    xp_layer_desc *d = NULL;
    int n = 0;
    int rc = model_expert_layers(m->g, &d, &n, &e);
    if (rc == 0) rc = xpack_write(m->g, d, n, path, 0, progress, user, stop_after, &e);
    free(d);
    if (rc) copy_err(&e, err, err_len);
    return rc ? -1 : 0;
}

int pt_table_candidates(const pt_model *m, const char *cache_dir, char out[2][PT_PATH_MAX]) {
    return xpack_table_candidates(m->g->files[0].path, cache_dir, out);
}

int pt_table_write(const pt_model *m, const char *path, pt_progress_fn progress, void *user,
                   char *err, size_t err_len) {
    pt_err e = {{0}};
    xp_layer_desc *d = NULL;
    int n = 0;
    int rc = model_expert_layers(m->g, &d, &n, &e);
    if (rc == 0) rc = xpack_write(m->g, d, n, path, 1, progress, user, -1, &e);
    free(d);
    if (rc) copy_err(&e, err, err_len);
    return rc ? -1 : 0;
}

int pt_pack_verify(const pt_model *m, const char *path, pt_progress_fn progress, void *user,
                   uint64_t *n_records, char *err, size_t err_len) {
    pt_err e = {{0}};
    xp_layer_desc *d = NULL;
    int n = 0;
    xpack *p = NULL;
    int rc = model_expert_layers(m->g, &d, &n, &e);
    if (rc == 0) rc = (p = xpack_open(path, m->g, d, n, &e)) ? 0 : -1;
    if (rc == 0) rc = xpack_verify(p, m->g, d, progress, user, &e);
    if (rc == 0 && n_records) *n_records = p->n_records;
    xpack_close(p);
    free(d);
    if (rc) copy_err(&e, err, err_len);
    return rc ? -1 : 0;
}
