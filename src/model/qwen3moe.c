/* qwen3moe.c — hyper-parameters and tensor binding for `qwen3moe` (see
 * qwen3moe.h). Every tensor is checked against the shape the metadata implies
 * and its type against what petrel can compute with, so a contradictory file
 * is refused at load with the key or tensor and the problem named.
 */
#include "qwen3moe.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/loader.h"

static int load_hparams(ld_ctx *L, qwen3moe_hparams *hp) {
    int vl, n_rot;
    if (ld_u32(L, "block_count", &hp->n_layer, 1, 0) ||
        ld_u32(L, "embedding_length", &hp->n_embd, 1, 0) ||
        ld_u32(L, "attention.head_count", &hp->n_head, 1, 0) ||
        ld_u32(L, "attention.head_count_kv", &hp->n_kv, 0, hp->n_head) ||
        ld_u32(L, "expert_count", &hp->n_expert, 1, 0) ||
        ld_u32(L, "expert_used_count", &hp->n_expert_used, 1, 0) ||
        ld_u32(L, "expert_feed_forward_length", &hp->n_ff_exp, 1, 0) ||
        ld_u32(L, "context_length", &hp->n_ctx_train, 0, 4096) ||
        ld_f32(L, "attention.layer_norm_rms_epsilon", &hp->rms_eps, 1, 0) ||
        ld_f32(L, "expert_weights_scale", &hp->weights_scale, 0, 0.0f) ||
        ld_bool(L, "expert_weights_norm", &hp->weights_norm, 1))
        return -1;
    if (hp->n_layer < 1 || hp->n_layer > QWEN3MOE_MAX_LAYERS)
        return L->rc = pt_errf(L->err, "%s: qwen3moe.block_count %d outside 1..%d", L->path,
                               hp->n_layer, QWEN3MOE_MAX_LAYERS);
    if (hp->n_embd < 1 || hp->n_head < 1)
        return L->rc = pt_errf(L->err, "%s: embedding_length %d / head_count %d must be positive",
                               L->path, hp->n_embd, hp->n_head);
    if (ld_u32(L, "attention.key_length", &hp->head_dim, 0, hp->n_embd / hp->n_head) ||
        ld_u32(L, "attention.value_length", &vl, 0, hp->head_dim) ||
        ld_u32(L, "rope.dimension_count", &n_rot, 0, hp->head_dim))
        return -1;
    if (hp->n_kv < 1 || hp->n_head % hp->n_kv)
        return L->rc = pt_errf(L->err, "%s: %d KV heads do not divide %d query heads", L->path,
                               hp->n_kv, hp->n_head);
    if (hp->head_dim < 2 || vl != hp->head_dim)
        return L->rc = pt_errf(L->err, "%s: key length %d and value length %d must be equal",
                               L->path, hp->head_dim, vl);
    if (n_rot < 2 || (n_rot & 1) || n_rot > hp->head_dim)
        return L->rc = pt_errf(L->err, "%s: rope.dimension_count %d must be even and at most %d",
                               L->path, n_rot, hp->head_dim);
    if (hp->n_expert < 1 || hp->n_expert_used < 1 || hp->n_expert_used > hp->n_expert ||
        hp->n_ff_exp < 1)
        return L->rc = pt_errf(
                   L->err,
                   "%s: expert_used_count %d must be in 1..expert_count (%d), expert width %d",
                   L->path, hp->n_expert_used, hp->n_expert, hp->n_ff_exp);
    hp->kq_scale = 1.0f / sqrtf((float)hp->head_dim);
    nn_rope *r = &hp->rope;
    memset(r, 0, sizeof *r);
    r->n_dims = n_rot;
    r->neox = 1;
    r->freq_scale = 1.0f;
    r->attn_factor = 1.0f;
    char stype[32] = "", k[160];
    snprintf(k, sizeof k, "%s.rope.scaling.type", L->arch);
    if (gguf_find(L->g, k) && gguf_get_str(L->g, k, stype, sizeof stype, L->err)) return L->rc = -1;
    if (stype[0] && strcmp(stype, "none"))
        return L->rc =
                   pt_errf(L->err, "%s: rope.scaling.type '%s' is not supported", L->path, stype);
    return ld_f32(L, "rope.freq_base", &r->freq_base, 0, 10000.0f);
}

int qwen3moe_model_load(const gguf_ctx *g, qwen3moe_model *m, pt_err *err) {
    memset(m, 0, sizeof *m);
    char arch[32];
    if (gguf_get_str(g, "general.architecture", arch, sizeof arch, err)) return -1;
    ld_ctx L = {g, arch, g->files[0].path, err, 0};
    if (strcmp(arch, "qwen3moe"))
        return pt_errf(err, "%s: architecture '%s' is not qwen3moe", L.path, arch);
    qwen3moe_hparams *hp = &m->hp;
    if (load_hparams(&L, hp)) return -1;
    const gguf_tensor *emb = ld_tensor(&L, "token_embd.weight", 2, hp->n_embd, -1, 1, 1);
    if (!emb) return -1;
    hp->n_vocab = (int)emb->ne[1];
    int vocab_meta;
    if (ld_u32(&L, "vocab_size", &vocab_meta, 0, hp->n_vocab)) return -1;
    if (vocab_meta != hp->n_vocab)
        return pt_errf(err, "%s: vocab_size %d but token_embd has %d rows", L.path, vocab_meta,
                       hp->n_vocab);
    m->tok_embd = ld_weight(&L, "token_embd.weight", hp->n_embd, hp->n_vocab, 1);
    m->output_norm = ld_vec(&L, "output_norm.weight", hp->n_embd, 1);
    m->output = ld_weight(&L, "output.weight", hp->n_embd, hp->n_vocab, 0);
    if (L.rc) return -1;
    if (!m->output.data) m->output = m->tok_embd; /* tied embeddings */
    m->layers = calloc((size_t)hp->n_layer, sizeof(qwen3moe_layer));
    if (!m->layers) return pt_errf(err, "%s: out of memory", L.path);
    const int E = hp->n_embd, QD = hp->n_head * hp->head_dim, KVD = hp->n_kv * hp->head_dim;
    const int X = hp->n_expert, F = hp->n_ff_exp;
    for (int l = 0; l < hp->n_layer && !L.rc; l++) {
        qwen3moe_layer *ly = &m->layers[l];
        char n[128];
#define NM(s) (snprintf(n, sizeof n, "blk.%d.%s", l, s), n)
        ly->attn_norm = ld_vec(&L, NM("attn_norm.weight"), E, 1);
        ly->wq = ld_weight(&L, NM("attn_q.weight"), E, QD, 1);
        ly->wk = ld_weight(&L, NM("attn_k.weight"), E, KVD, 1);
        ly->wv = ld_weight(&L, NM("attn_v.weight"), E, KVD, 1);
        ly->q_norm = ld_vec(&L, NM("attn_q_norm.weight"), hp->head_dim, 1);
        ly->k_norm = ld_vec(&L, NM("attn_k_norm.weight"), hp->head_dim, 1);
        ly->wo = ld_weight(&L, NM("attn_output.weight"), QD, E, 1);
        ly->ffn_norm = ld_vec(&L, NM("ffn_norm.weight"), E, 1);
        ly->gate_inp = ld_weight(&L, NM("ffn_gate_inp.weight"), E, X, 1);
        ly->gate_exps = ld_stack(&L, NM("ffn_gate_exps.weight"), E, F, X, 1);
        ly->up_exps = ld_stack(&L, NM("ffn_up_exps.weight"), E, F, X, 1);
        ly->down_exps = ld_stack(&L, NM("ffn_down_exps.weight"), F, E, X, 1);
#undef NM
    }
    if (L.rc) {
        qwen3moe_model_free(m);
        return -1;
    }
    return 0;
}

void qwen3moe_model_free(qwen3moe_model *m) {
    free(m->layers);
    memset(m, 0, sizeof *m);
}

qwen3moe_expert_w qwen3moe_expert(const qwen3moe_model *m, int layer, const uint8_t *const mats[3]) {
    const qwen3moe_layer *ly = &m->layers[layer];
    qwen3moe_expert_w w = {ld_slice_at(ly->gate_exps, mats[0]), ld_slice_at(ly->up_exps, mats[1]),
                           ld_slice_at(ly->down_exps, mats[2])};
    return w;
}
