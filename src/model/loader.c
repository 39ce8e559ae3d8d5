/* loader.c — hyper-parameter reads and shape-checked tensor binding shared by
 * the model binders (see loader.h). */
#include "loader.h"

#include <stdio.h>
#include <string.h>

#include "kernels/quant.h"

static const gguf_kv *find_key(ld_ctx *L, const char *key, char *k, size_t cap) {
    snprintf(k, cap, "%s.%s", L->arch, key);
    return gguf_find(L->g, k);
}

int ld_u32(ld_ctx *L, const char *key, int *out, int required, int def) {
    if (L->rc) return -1;
    char k[160];
    if (!find_key(L, key, k, sizeof k)) {
        if (required) return L->rc = pt_errf(L->err, "%s: missing metadata key '%s'", L->path, k);
        *out = def;
        return 0;
    }
    uint32_t v;
    if (gguf_get_u32(L->g, k, &v, L->err)) return L->rc = -1;
    if (v > (1u << 30))
        return L->rc = pt_errf(L->err, "%s: metadata key '%s' = %u is implausible", L->path, k, v);
    *out = (int)v;
    return 0;
}

int ld_f32(ld_ctx *L, const char *key, float *out, int required, float def) {
    if (L->rc) return -1;
    char k[160];
    if (!find_key(L, key, k, sizeof k)) {
        if (required) return L->rc = pt_errf(L->err, "%s: missing metadata key '%s'", L->path, k);
        *out = def;
        return 0;
    }
    if (gguf_get_f32(L->g, k, out, L->err)) return L->rc = -1;
    return 0;
}

int ld_bool(ld_ctx *L, const char *key, int *out, int def) {
    if (L->rc) return -1;
    char k[160];
    if (!find_key(L, key, k, sizeof k)) {
        *out = def;
        return 0;
    }
    if (gguf_get_bool(L->g, k, out, L->err)) return L->rc = -1;
    return 0;
}

int ld_u32_layers(ld_ctx *L, const char *key, int n, int *out, int required, int def) {
    if (L->rc) return -1;
    char k[160];
    const gguf_kv *kv = find_key(L, key, k, sizeof k);
    if (!kv || kv->val.type != GGUF_ARRAY) {
        int v;
        if (ld_u32(L, key, &v, required, def)) return -1;
        for (int i = 0; i < n; i++)
            out[i] = v;
        return 0;
    }
    if (kv->val.arr.n != (uint64_t)n)
        return L->rc = pt_errf(L->err, "%s: '%s' has %llu entries, expected one per layer (%d)",
                               L->path, k, (unsigned long long)kv->val.arr.n, n);
    for (int i = 0; i < n; i++) {
        int64_t v;
        if (gguf_array_i64(&kv->val, (uint64_t)i, &v) || v < 0 || v > (1 << 30))
            return L->rc =
                       pt_errf(L->err, "%s: '%s'[%d] is not an integer in 0..2^30", L->path, k, i);
        out[i] = (int)v;
    }
    return 0;
}

int ld_bool_layers(ld_ctx *L, const char *key, int n, uint8_t *out, int def) {
    if (L->rc) return -1;
    char k[160];
    const gguf_kv *kv = find_key(L, key, k, sizeof k);
    if (!kv) {
        for (int i = 0; i < n; i++)
            out[i] = (uint8_t)(def != 0);
        return 0;
    }
    if (kv->val.type != GGUF_ARRAY || kv->val.arr.n == 0 || kv->val.arr.n > (uint64_t)n)
        return L->rc = pt_errf(L->err, "%s: '%s' must be an array of 1..%d bools", L->path, k, n);
    for (int i = 0; i < n; i++) {
        int64_t v;
        if (gguf_array_i64(&kv->val, (uint64_t)i % kv->val.arr.n, &v))
            return L->rc = pt_errf(L->err, "%s: '%s'[%d] is not a bool", L->path, k, i);
        out[i] = (uint8_t)(v != 0);
    }
    return 0;
}

const gguf_tensor *ld_tensor(ld_ctx *L, const char *name, int n_dims, int64_t ne0, int64_t ne1,
                             int64_t ne2, int required) {
    if (L->rc) return NULL; /* the first problem is the one reported */
    const gguf_tensor *t = gguf_find_tensor(L->g, name);
    if (!t) {
        if (required) L->rc = pt_errf(L->err, "%s: missing tensor '%s'", L->path, name);
        return NULL;
    }
    int64_t want[3] = {ne0, ne1, ne2};
    int ok = t->ne[3] == 1;
    for (int d = 0; d < 3; d++)
        if (d < n_dims ? (want[d] >= 0 && t->ne[d] != want[d]) : t->ne[d] != 1) ok = 0;
    if (!ok) {
        L->rc = pt_errf(
            L->err, "%s: tensor '%s' has shape {%lld,%lld,%lld,%lld}, expected {%lld,%lld,%lld}",
            L->path, name, (long long)t->ne[0], (long long)t->ne[1], (long long)t->ne[2],
            (long long)t->ne[3], (long long)ne0, (long long)(n_dims > 1 ? ne1 : 1),
            (long long)(n_dims > 2 ? ne2 : 1));
        return NULL;
    }
    return t;
}

const float *ld_vec(ld_ctx *L, const char *name, int64_t n, int required) {
    const gguf_tensor *t = ld_tensor(L, name, 1, n, 1, 1, required);
    if (!t) return NULL;
    if (t->type != QT_F32) {
        L->rc = pt_errf(L->err, "%s: tensor '%s' has type %s, expected F32", L->path, name,
                        qt_name(t->type));
        return NULL;
    }
    return (const float *)t->data;
}

static int check_matmul_type(ld_ctx *L, const gguf_tensor *t) {
    const qt_traits *tr = qt_get(t->type);
    if (!tr || tr->act_type < 0 || !tr->decodes)
        return L->rc =
                   pt_errf(L->err, "%s: tensor '%s' has type %s, which petrel cannot compute with",
                           L->path, t->name, qt_name(t->type));
    return 0;
}

mm_weight ld_as_weight(const gguf_tensor *t) {
    mm_weight w = {0};
    if (!t) return w;
    w.type = t->type;
    w.n_in = t->ne[0];
    w.n_out = t->ne[1];
    qt_row_bytes(t->type, t->ne[0], &w.row_bytes);
    w.data = t->data;
    return w;
}

mm_weight ld_slice(const gguf_tensor *t, int i) {
    mm_weight w = ld_as_weight(t);
    w.data = t->data + (uint64_t)i * w.row_bytes * (uint64_t)t->ne[1];
    return w;
}

mm_weight ld_slice_at(const gguf_tensor *t, const uint8_t *data) {
    mm_weight w = ld_slice(t, 0);
    w.data = data;
    return w;
}

mm_weight ld_weight(ld_ctx *L, const char *name, int64_t n_in, int64_t n_out, int required) {
    const gguf_tensor *t = ld_tensor(L, name, 2, n_in, n_out, 1, required);
    if (t && check_matmul_type(L, t)) t = NULL;
    return ld_as_weight(t);
}

const gguf_tensor *ld_stack(ld_ctx *L, const char *name, int64_t n_in, int64_t n_out, int64_t n,
                            int required) {
    const gguf_tensor *t = ld_tensor(L, name, 3, n_in, n_out, n, required);
    if (t && check_matmul_type(L, t)) return NULL;
    return t;
}
