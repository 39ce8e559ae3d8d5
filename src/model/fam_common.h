/* fam_common.h — what every model family binds, reads and allocates the same way, so that a
 * family file (model/<family>.c) holds only what is its own: its hyper-parameters, its layers'
 * tensors, its state and its block.
 *
 * Binding: the trunk's two ends (token embedding, final norm, output head with the tied
 * embedding as fallback) and the training context go straight into the fam_desc the decoder
 * reads; block_count is held to LD_MAX_LAYERS; a rope is read with the scaling the file asks
 * for (none, or YaRN for a family that takes it). State: the zeroed state, the one refusal when
 * an allocation fails, freeing scratch, and the FFN scratch an expert runs with. GQA layers
 * (Gemma 4, Qwen3-MoE): one K and one V buffer per layer, linear or a sliding-window ring,
 * with their KV bytes and the buffer list the prefix cache copies, and the normed attention
 * that a block and its block_kv share. (MLA's cache is nn/mla's business.)
 *
 * The architecture itself is checked once, by the table (model/families.c: fam_load), which
 * also allocates the family's model and frees it after a failed load.
 */
#ifndef PT_MODEL_FAM_COMMON_H
#define PT_MODEL_FAM_COMMON_H

#include <stddef.h>
#include <stdint.h>

#include "model/family.h"
#include "model/loader.h"
#include "nn/attn.h"
#include "nn/ffn.h"
#include "nn/ops.h"

/* ===== Binding ===== */

/* `<arch>.block_count` (required) into *n, refused outside 1..LD_MAX_LAYERS. 0, or -1 with
 * the error in L. */
int fam_block_count(ld_ctx *L, int *n);

/* The trunk every family shares, into d: n_embd; the training context (`context_length`,
 * PT_DEFAULT_CTX when absent); token_embd.weight (n_vocab rows of n_embd; `vocab_size`, when
 * present, must agree); output_norm.weight; output.weight, else the embedding (tied); and
 * embd_scale 1 (a family that scales its embeddings sets it after). 0, or -1 with the error
 * in L. */
int fam_bind_trunk(ld_ctx *L, int n_embd, fam_desc *d);

#define FAM_ROPE_FREQ_BASE 10000.0f /* rope.freq_base when the file has none (llama.cpp's) */

/* A rope over n_dims dims (NEOX pairs when neox, else NORM) at freq_base, unscaled. */
nn_rope fam_rope_plain(int n_dims, int neox, float freq_base);

/* What YaRN leaves to the family: the attention scale's share of it (DeepSeek-V3 multiplies
 * its logit scale by mscale^2, mscale = 1 + log_mul * ln(factor)). */
typedef struct fam_yarn {
    int on;        /* the file asks for YaRN */
    float log_mul; /* rope.scaling.yarn_log_multiplier (0.1 x mscale_all_dim) */
} fam_yarn;

/* `<arch>.rope.freq_base` (default FAM_ROPE_FREQ_BASE) and `rope.scaling.type`: none (or absent)
 * gives fam_rope_plain's rope; yarn, where the family passes yarn, sets freq_scale (1 / factor),
 * ext_factor and corr_dims from rope.scaling.factor, original_context_length and
 * yarn_beta_fast / yarn_beta_slow, and *yarn. Any other type, or yarn where yarn is NULL,
 * is refused. 0, or -1 with the error in L. */
int fam_rope(ld_ctx *L, int n_dims, int neox, nn_rope *r, fam_yarn *yarn);

/* Greatest common divisor (gcd(0, b) = b): fam_desc.kv_unit of widths that differ. */
int fam_gcd(int a, int b);

/* ===== State ===== */

/* state_new's first step: a zeroed state of `bytes`, or NULL with err. */
void *fam_state_alloc(size_t bytes, pt_err *err);
/* state_new's last step: st when nothing failed, else state_free(st) and NULL with err
 * saying the context c->n_ctx did not fit. */
void *fam_state_done(void *st, int fail, void (*state_free)(void *), const fam_ctx *c, pt_err *err);
/* pt_scratch_free of each of bufs[n] (NULL ones too). */
void fam_scratch_free(float *const *bufs, size_t n);
#define FAM_SCRATCH_FREE(...)                                                                      \
    fam_scratch_free((float *const[]){__VA_ARGS__},                                                \
                     sizeof((float *const[]){__VA_ARGS__}) / sizeof(float *))

/* The FFN scratch an expert (or a dense FFN) runs with: a pool job's worker's own (wk), else
 * the state's g, u of c->tile rows with c's threaded matmuls. The same bits either way. */
static inline nn_ffn fam_ffn(fam_ctx *c, moe_worker *wk, float *g, float *u) {
    return wk ? (nn_ffn){&wk->mm, wk->g, wk->u, wk->rows} : (nn_ffn){&c->mm, g, u, c->tile};
}

/* ===== GQA layers ===== */

/* One layer's K and V rows. */
typedef struct fam_kv_layer {
    int64_t width; /* elements of a position's K row and of its V row: n_kv * head_dim */
    int ring;      /* 1: a sliding-window layer, whose cache is a ring of fam_ctx.ring slots */
} fam_kv_layer;

/* A session's K and V caches, one of each per layer, from fam_ctx.kv: rings stay in RAM (a
 * window's keys are all read every step), every-position buffers may spill (nn/kv.h: read
 * whole, KV_READ_ALL). */
typedef struct fam_kv {
    void **k, **v;  /* [n_layer] -> [slots[l]] rows of width elements of k_type / v_type */
    int64_t *slots; /* [n_layer] c->n_ctx, or c->ring on a sliding-window layer */
} fam_kv;

/* fam_ops.kv_size of layers ly[n_layer]: every-position layers per position, rings fixed. */
void fam_kv_size(const fam_kv_layer *ly, int n_layer, int64_t ring, uint32_t k_type,
                 uint32_t v_type, uint64_t *per_pos, uint64_t *fixed);
/* The caches of ly[n_layer] for c. 0, or -1 (out of memory or reservation; fam_kv_free it
 * all the same). */
int fam_kv_alloc(fam_kv *kv, const fam_kv_layer *ly, int n_layer, fam_ctx *c);
void fam_kv_free(fam_kv *kv);
/* fam_ops.kv_bufs: keys then values of every layer, linear or ring. */
int fam_kv_bufs(const fam_kv *kv, const fam_kv_layer *ly, int n_layer, const fam_ctx *c,
                fam_kv_buf *out, int max);

/* Layer `layer`'s attention on the residual rows c->x[T] at positions pos0..: the input RMS
 * norm (attn_norm, at g's eps and width) into c->xn, then nn_gqa_forward with the layer's
 * caches into out[T][n_embd]. fam_gqa_store is its keys and values alone (fam_ops.block_kv):
 * the same norm, the same cache bits, by construction. */
void fam_gqa_attn(fam_ctx *c, const nn_gqa *g, nn_gqa_scratch *sc, const float *attn_norm,
                  const fam_kv *kv, int layer, int T, int pos0, float *out);
void fam_gqa_store(fam_ctx *c, const nn_gqa *g, nn_gqa_scratch *sc, const float *attn_norm,
                   const fam_kv *kv, int layer, int T, int pos0);

#endif
