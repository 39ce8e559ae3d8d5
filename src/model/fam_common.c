/* fam_common.c — the binding, rope, state and GQA-layer code every family shares (see
 * fam_common.h). Moved from the three family files: the same keys and tensors read, the same
 * refusals (block_count's cap now holds for glm-dsa and deepseek2 too), the same arithmetic. */
#include "model/fam_common.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nn/kv.h"
#include "petrel.h" /* PT_DEFAULT_CTX */

/* ===== Binding ===== */

int fam_block_count(ld_ctx *L, int *n) {
    if (ld_u32(L, "block_count", n, 1, 0)) return -1;
    if (*n < 1 || *n > LD_MAX_LAYERS)
        return L->rc = pt_errf(L->err, "%s: %s.block_count %d outside 1..%d", L->path, L->arch, *n,
                               LD_MAX_LAYERS);
    return 0;
}

int fam_bind_trunk(ld_ctx *L, int n_embd, fam_desc *d) {
    d->n_embd = n_embd;
    d->embd_scale = 1.0f;
    if (ld_u32(L, "context_length", &d->n_ctx_train, 0, PT_DEFAULT_CTX)) return -1;
    /* the vocabulary is the embedding's rows; a vocab_size key may only agree */
    const gguf_tensor *emb = ld_tensor(L, "token_embd.weight", 2, n_embd, -1, 1, 1);
    if (!emb) return -1;
    d->n_vocab = (int)emb->ne[1];
    int vocab_meta;
    if (ld_u32(L, "vocab_size", &vocab_meta, 0, d->n_vocab)) return -1;
    if (vocab_meta != d->n_vocab)
        return L->rc = pt_errf(L->err, "%s: vocab_size %d but token_embd has %d rows", L->path,
                               vocab_meta, d->n_vocab);
    d->tok_embd = ld_weight(L, "token_embd.weight", n_embd, d->n_vocab, 1);
    d->output_norm = ld_vec(L, "output_norm.weight", n_embd, 1);
    d->output = ld_weight(L, "output.weight", n_embd, d->n_vocab, 0);
    if (L->rc) return -1;
    if (!d->output.data) d->output = d->tok_embd; /* tied embeddings */
    return 0;
}

nn_rope fam_rope_plain(int n_dims, int neox, float freq_base) {
    return (nn_rope){.n_dims = n_dims,
                     .neox = neox,
                     .freq_base = freq_base,
                     .freq_scale = 1.0f,
                     .attn_factor = 1.0f};
}

int fam_rope(ld_ctx *L, int n_dims, int neox, nn_rope *r, fam_yarn *yarn) {
    float base;
    if (ld_f32(L, "rope.freq_base", &base, 0, FAM_ROPE_FREQ_BASE)) return -1;
    *r = fam_rope_plain(n_dims, neox, base);
    if (yarn) *yarn = (fam_yarn){0};
    char k[160], stype[32] = "";
    snprintf(k, sizeof k, "%s.rope.scaling.type", L->arch);
    if (gguf_find(L->g, k) && gguf_get_str(L->g, k, stype, sizeof stype, L->err)) return L->rc = -1;
    if (!stype[0] || !strcmp(stype, "none")) return 0;
    if (strcmp(stype, "yarn") || !yarn)
        return L->rc =
                   pt_errf(L->err, "%s: rope.scaling.type '%s' is not supported", L->path, stype);
    float factor, beta_fast, beta_slow;
    int orig_ctx;
    if (ld_f32(L, "rope.scaling.factor", &factor, 1, 0) ||
        ld_u32(L, "rope.scaling.original_context_length", &orig_ctx, 1, 0) ||
        ld_f32(L, "rope.scaling.yarn_beta_fast", &beta_fast, 0, 32.0f) ||
        ld_f32(L, "rope.scaling.yarn_beta_slow", &beta_slow, 0, 1.0f) ||
        ld_f32(L, "rope.scaling.yarn_log_multiplier", &yarn->log_mul, 0, 0.0f))
        return -1;
    if (!(factor > 0))
        return L->rc = pt_errf(L->err, "%s: rope.scaling.factor must be positive", L->path);
    r->freq_scale = 1.0f / factor;
    r->ext_factor = 1.0f;
    nn_rope_yarn_corr_dims(n_dims, orig_ctx, r->freq_base, beta_fast, beta_slow, r->corr_dims);
    yarn->on = 1;
    return 0;
}

int fam_gcd(int a, int b) {
    while (b) {
        const int r = a % b;
        a = b;
        b = r;
    }
    return a;
}

/* ===== State ===== */

void *fam_state_alloc(size_t bytes, pt_err *err) {
    void *s = calloc(1, bytes);
    if (!s) pt_errf(err, "out of memory");
    return s;
}

void *fam_state_done(void *st, int fail, void (*state_free)(void *), const fam_ctx *c,
                     pt_err *err) {
    if (!fail) return st;
    state_free(st);
    pt_errf(err, "out of memory allocating the KV cache and scratch for %d positions", c->n_ctx);
    return NULL;
}

void fam_scratch_free(float *const *bufs, size_t n) {
    for (size_t i = 0; i < n; i++)
        pt_scratch_free(bufs[i]);
}

/* ===== GQA layers ===== */

void fam_kv_size(const fam_kv_layer *ly, int n_layer, int64_t ring, uint32_t k_type,
                 uint32_t v_type, uint64_t *per_pos, uint64_t *fixed) {
    *per_pos = *fixed = 0;
    for (int l = 0; l < n_layer; l++) {
        const uint64_t row = kv_bytes(k_type, ly[l].width) + kv_bytes(v_type, ly[l].width);
        if (ly[l].ring)
            *fixed += (uint64_t)ring * row;
        else
            *per_pos += row;
    }
}

int fam_kv_alloc(fam_kv *kv, const fam_kv_layer *ly, int n_layer, fam_ctx *c) {
    kv->slots = calloc((size_t)n_layer, sizeof(int64_t));
    kv->k = calloc((size_t)n_layer, sizeof(void *));
    kv->v = calloc((size_t)n_layer, sizeof(void *));
    if (!kv->slots || !kv->k || !kv->v) return -1;
    for (int l = 0; l < n_layer; l++) {
        const size_t kr = kv_bytes(c->k_type, ly[l].width), vr = kv_bytes(c->v_type, ly[l].width);
        kv->slots[l] = ly[l].ring ? c->ring : c->n_ctx;
        if (ly[l].ring) {
            kv->k[l] = kv_arena_take(c->kv, (size_t)kv->slots[l] * kr);
            kv->v[l] = kv_arena_take(c->kv, (size_t)kv->slots[l] * vr);
        } else {
            kv->k[l] = kv_arena_rows(c->kv, kr, kv->slots[l], KV_READ_ALL);
            kv->v[l] = kv_arena_rows(c->kv, vr, kv->slots[l], KV_READ_ALL);
        }
        if (!kv->k[l] || !kv->v[l]) return -1;
    }
    return 0;
}

void fam_kv_free(fam_kv *kv) {
    free(kv->k);
    free(kv->v);
    free(kv->slots);
    memset(kv, 0, sizeof *kv);
}

int fam_kv_bufs(const fam_kv *kv, const fam_kv_layer *ly, int n_layer, const fam_ctx *c,
                fam_kv_buf *out, int max) {
    int n = 0;
    for (int l = 0; l < n_layer; l++) {
        const int kind = ly[l].ring ? FAM_KV_RING : FAM_KV_LINEAR;
        if (n + 2 <= max) {
            out[n] = (fam_kv_buf){kv->k[l], kv_bytes(c->k_type, ly[l].width), kind, kv->slots[l]};
            out[n + 1] =
                (fam_kv_buf){kv->v[l], kv_bytes(c->v_type, ly[l].width), kind, kv->slots[l]};
        }
        n += 2;
    }
    return n;
}

void fam_gqa_attn(fam_ctx *c, const nn_gqa *g, nn_gqa_scratch *sc, const float *attn_norm,
                  const fam_kv *kv, int layer, int T, int pos0, float *out) {
    nn_rms_norm_rows(c->x, attn_norm, g->rms_eps, g->n_embd, T, c->xn);
    nn_gqa_forward(g, sc, c->xn, T, pos0, kv->k[layer], kv->v[layer], kv->slots[layer], out);
}

void fam_gqa_store(fam_ctx *c, const nn_gqa *g, nn_gqa_scratch *sc, const float *attn_norm,
                   const fam_kv *kv, int layer, int T, int pos0) {
    nn_rms_norm_rows(c->x, attn_norm, g->rms_eps, g->n_embd, T, c->xn);
    nn_gqa_store(g, sc, c->xn, T, pos0, kv->k[layer], kv->v[layer], kv->slots[layer]);
}
