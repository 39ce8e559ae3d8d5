/* gemma4.c — hyper-parameters and tensor binding for `gemma4` (see gemma4.h).
 * Every tensor is checked against the shape the per-layer metadata implies and
 * its type against what petrel can compute with, so a contradictory file is
 * refused at load with the key or tensor and the problem named.
 */
#include "gemma4.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/loader.h"

/* Per-layer attention geometry and rope; fills layers[].swa/head_dim/n_kv/rope. */
static int load_hparams(ld_ctx *L, gemma4_model *m) {
    gemma4_hparams *hp = &m->hp;
    int per_layer_in = 0, shared_kv = 0;
    if (ld_u32(L, "block_count", &hp->n_layer, 1, 0) ||
        ld_u32(L, "embedding_length", &hp->n_embd, 1, 0) ||
        ld_u32(L, "feed_forward_length", &hp->n_ff, 1, 0) ||
        ld_u32(L, "expert_count", &hp->n_expert, 0, 0) ||
        ld_u32(L, "expert_used_count", &hp->n_expert_used, 0, 0) ||
        ld_u32(L, "expert_feed_forward_length", &hp->n_ff_exp, 0, 0) ||
        ld_u32(L, "context_length", &hp->n_ctx_train, 0, 4096) ||
        ld_f32(L, "attention.layer_norm_rms_epsilon", &hp->rms_eps, 1, 0) ||
        ld_f32(L, "final_logit_softcapping", &hp->softcap, 0, 0.0f) ||
        ld_u32(L, "embedding_length_per_layer_input", &per_layer_in, 0, 0) ||
        ld_u32(L, "attention.shared_kv_layers", &shared_kv, 0, 0))
        return -1;
    if (hp->n_layer < 1 || hp->n_embd < 1)
        return L->rc = pt_errf(L->err, "%s: block_count %d / embedding_length %d must be positive",
                               L->path, hp->n_layer, hp->n_embd);
    if (hp->n_expert == 0)
        return L->rc = pt_errf(
                   L->err,
                   "%s: dense Gemma 4 (no gemma4.expert_count) is not supported; petrel runs the "
                   "MoE variants (e.g. 26B-A4B)",
                   L->path);
    if (per_layer_in > 0 || shared_kv > 0)
        return L->rc = pt_errf(L->err,
                               "%s: Gemma 4 with per-layer input embeddings (%d) or shared KV "
                               "layers (%d) is not "
                               "supported",
                               L->path, per_layer_in, shared_kv);
    if (hp->n_expert_used < 1 || hp->n_expert_used > hp->n_expert || hp->n_ff_exp < 1)
        return L->rc = pt_errf(
                   L->err,
                   "%s: expert_used_count %d must be in 1..expert_count (%d), expert width %d",
                   L->path, hp->n_expert_used, hp->n_expert, hp->n_ff_exp);
    if (hp->softcap < 0)
        return L->rc = pt_errf(L->err, "%s: final_logit_softcapping is negative", L->path);
    hp->embd_scale = sqrtf((float)hp->n_embd);

    const int n = hp->n_layer;
    int *heads = calloc((size_t)n, sizeof(int)), *kv = calloc((size_t)n, sizeof(int));
    uint8_t *swa = calloc((size_t)n, 1);
    if (!heads || !kv || !swa) {
        free(heads), free(kv), free(swa);
        return L->rc = pt_errf(L->err, "%s: out of memory", L->path);
    }
    int kl, vl, kl_swa, vl_swa, rot, rot_swa;
    float base, base_swa;
    ld_u32_layers(L, "attention.head_count", n, heads, 1, 0);
    ld_u32_layers(L, "attention.head_count_kv", n, kv, 0, 0);
    ld_bool_layers(L, "attention.sliding_window_pattern", n, swa, 0);
    ld_u32(L, "attention.key_length", &kl, 1, 0);
    ld_u32(L, "attention.value_length", &vl, 0, kl);
    ld_u32(L, "attention.key_length_swa", &kl_swa, 0, kl);
    ld_u32(L, "attention.value_length_swa", &vl_swa, 0, kl_swa);
    ld_u32(L, "rope.dimension_count", &rot, 0, kl);
    ld_u32(L, "rope.dimension_count_swa", &rot_swa, 0, kl_swa);
    ld_f32(L, "rope.freq_base", &base, 0, 10000.0f);
    ld_f32(L, "rope.freq_base_swa", &base_swa, 0, base);
    ld_u32(L, "attention.sliding_window", &hp->window, 0, 0);
    hp->n_head = heads[0];
    int any_swa = 0;
    for (int l = 0; l < n && !L->rc; l++) {
        gemma4_layer *ly = &m->layers[l];
        ly->swa = swa[l];
        any_swa |= ly->swa;
        ly->head_dim = ly->swa ? kl_swa : kl;
        ly->n_kv = kv[l] ? kv[l] : heads[l];
        const int vdim = ly->swa ? vl_swa : vl, r = ly->swa ? rot_swa : rot;
        if (heads[l] != hp->n_head)
            L->rc = pt_errf(L->err, "%s: attention.head_count differs between layers (%d vs %d)",
                            L->path, heads[l], hp->n_head);
        else if (hp->n_head < 1 || ly->n_kv < 1 || hp->n_head % ly->n_kv)
            L->rc = pt_errf(L->err, "%s: layer %d: %d KV heads do not divide %d query heads",
                            L->path, l, ly->n_kv, hp->n_head);
        else if (ly->head_dim < 2 || vdim != ly->head_dim)
            L->rc = pt_errf(L->err, "%s: layer %d: key length %d and value length %d must be equal",
                            L->path, l, ly->head_dim, vdim);
        else if (r < 2 || (r & 1) || r > ly->head_dim)
            L->rc =
                pt_errf(L->err, "%s: layer %d: rope dimension count %d must be even and at most %d",
                        L->path, l, r, ly->head_dim);
        nn_rope *rp = &ly->rope;
        memset(rp, 0, sizeof *rp);
        rp->n_dims = r;
        rp->neox = 1;
        rp->freq_base = ly->swa ? base_swa : base;
        rp->freq_scale = 1.0f;
        rp->attn_factor = 1.0f;
        if (ly->head_dim > hp->max_head_dim) hp->max_head_dim = ly->head_dim;
        if (ly->n_kv * ly->head_dim > hp->max_kv_dim) hp->max_kv_dim = ly->n_kv * ly->head_dim;
    }
    free(heads), free(kv), free(swa);
    char key[160];
    snprintf(key, sizeof key, "%s.attention.sliding_window_pattern", L->arch);
    if (!L->rc && hp->window > 0 && !gguf_find(L->g, key))
        L->rc =
            pt_errf(L->err, "%s: missing metadata key '%s' (which layers use the sliding window)",
                    L->path, key);
    if (!L->rc && any_swa && hp->window < 1)
        L->rc = pt_errf(L->err,
                        "%s: sliding-window layers but %s.attention.sliding_window is missing or 0",
                        L->path, L->arch);
    return L->rc;
}

int gemma4_model_load(const gguf_ctx *g, gemma4_model *m, pt_err *err) {
    memset(m, 0, sizeof *m);
    char arch[32];
    if (gguf_get_str(g, "general.architecture", arch, sizeof arch, err)) return -1;
    ld_ctx L = {g, arch, g->files[0].path, err, 0};
    if (strcmp(arch, "gemma4"))
        return pt_errf(err, "%s: architecture '%s' is not gemma4", L.path, arch);
    gemma4_hparams *hp = &m->hp;
    int n_layer = 0;
    if (ld_u32(&L, "block_count", &n_layer, 1, 0)) return -1;
    if (n_layer < 1 || n_layer > GEMMA4_MAX_LAYERS)
        return pt_errf(err, "%s: gemma4.block_count %d outside 1..%d", L.path, n_layer,
                       GEMMA4_MAX_LAYERS);
    m->layers = calloc((size_t)(n_layer > 0 ? n_layer : 1), sizeof(gemma4_layer));
    if (!m->layers) return pt_errf(err, "%s: out of memory", L.path);
    if (load_hparams(&L, m)) goto fail;

    const gguf_tensor *emb = ld_tensor(&L, "token_embd.weight", 2, hp->n_embd, -1, 1, 1);
    if (!emb) goto fail;
    hp->n_vocab = (int)emb->ne[1];
    int vocab_meta;
    if (ld_u32(&L, "vocab_size", &vocab_meta, 0, hp->n_vocab)) goto fail;
    if (vocab_meta != hp->n_vocab) {
        pt_errf(err, "%s: vocab_size %d but token_embd has %d rows", L.path, vocab_meta,
                hp->n_vocab);
        goto fail;
    }
    m->tok_embd = ld_weight(&L, "token_embd.weight", hp->n_embd, hp->n_vocab, 1);
    m->output_norm = ld_vec(&L, "output_norm.weight", hp->n_embd, 1);
    m->output = ld_weight(&L, "output.weight", hp->n_embd, hp->n_vocab, 0);
    if (L.rc) goto fail;
    if (!m->output.data) m->output = m->tok_embd; /* tied embeddings */

    /* proportional rope: one table of per-pair divisors, used by full layers */
    const float *rope_freqs = NULL;
    for (int l = 0; l < hp->n_layer; l++)
        if (!m->layers[l].swa) {
            rope_freqs = ld_vec(&L, "rope_freqs.weight", m->layers[l].rope.n_dims / 2, 0);
            break;
        }
    if (L.rc) goto fail;

    const int E = hp->n_embd, H = hp->n_head, X = hp->n_expert, F = hp->n_ff_exp;
    for (int l = 0; l < hp->n_layer && !L.rc; l++) {
        gemma4_layer *ly = &m->layers[l];
        const int D = ly->head_dim, KV = ly->n_kv * D;
        char n[128];
#define NM(s) (snprintf(n, sizeof n, "blk.%d.%s", l, s), n)
        if (!ly->swa) ly->rope.freq_factors = rope_freqs;
        ly->attn_norm = ld_vec(&L, NM("attn_norm.weight"), E, 1);
        ly->wq = ld_weight(&L, NM("attn_q.weight"), E, (int64_t)H * D, 1);
        ly->wk = ld_weight(&L, NM("attn_k.weight"), E, KV, 1);
        ly->wv = ld_weight(&L, NM("attn_v.weight"), E, KV, 0);
        ly->q_norm = ld_vec(&L, NM("attn_q_norm.weight"), D, 1);
        ly->k_norm = ld_vec(&L, NM("attn_k_norm.weight"), D, 1);
        ly->wo = ld_weight(&L, NM("attn_output.weight"), (int64_t)H * D, E, 1);
        ly->post_attn_norm = ld_vec(&L, NM("post_attention_norm.weight"), E, 1);
        ly->ffn_norm = ld_vec(&L, NM("ffn_norm.weight"), E, 1);
        ly->ffn_gate = ld_weight(&L, NM("ffn_gate.weight"), E, hp->n_ff, 1);
        ly->ffn_up = ld_weight(&L, NM("ffn_up.weight"), E, hp->n_ff, 1);
        ly->ffn_down = ld_weight(&L, NM("ffn_down.weight"), hp->n_ff, E, 1);
        ly->post_ffw_norm_1 = ld_vec(&L, NM("post_ffw_norm_1.weight"), E, 1);
        ly->pre_ffw_norm_2 = ld_vec(&L, NM("pre_ffw_norm_2.weight"), E, 1);
        ly->gate_inp = ld_weight(&L, NM("ffn_gate_inp.weight"), E, X, 1);
        ly->gate_inp_scale = ld_vec(&L, NM("ffn_gate_inp.scale"), E, 1);
        ly->gate_up_exps = ld_stack(&L, NM("ffn_gate_up_exps.weight"), E, 2 * (int64_t)F, X, 1);
        ly->down_exps = ld_stack(&L, NM("ffn_down_exps.weight"), F, E, X, 1);
        ly->down_exps_scale = ld_vec(&L, NM("ffn_down_exps.scale"), X, 0);
        ly->post_ffw_norm_2 = ld_vec(&L, NM("post_ffw_norm_2.weight"), E, 1);
        ly->post_ffw_norm = ld_vec(&L, NM("post_ffw_norm.weight"), E, 1);
        const float *os = ld_vec(&L, NM("layer_output_scale.weight"), 1, 0);
        ly->out_scale = os ? os[0] : 1.0f;
#undef NM
    }
    if (L.rc) goto fail;
    return 0;
fail:
    gemma4_model_free(m);
    return -1;
}

void gemma4_model_free(gemma4_model *m) {
    free(m->layers);
    memset(m, 0, sizeof *m);
}

gemma4_expert_w gemma4_expert(const gemma4_model *m, int layer, int e, const uint8_t *const mats[2]) {
    const gemma4_layer *ly = &m->layers[layer];
    gemma4_expert_w w = {ld_slice_at(ly->gate_up_exps, mats[0]), ld_slice_at(ly->down_exps, mats[1]),
                         ly->down_exps_scale ? ly->down_exps_scale[e] : 1.0f};
    return w;
}
