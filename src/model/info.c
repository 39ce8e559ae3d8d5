/* info.c — resident vs routed-expert accounting of a GGUF model (see info.h). */
#include "info.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "format/ggml_types.h"
#include "model/loader.h" /* LD_MAX_LAYERS */

/* Parse "blk.N." at the start of name; return N or -1. */
static int block_index(const char *name, const char **rest) {
    if (strncmp(name, "blk.", 4) != 0) return -1;
    const char *p = name + 4;
    long n = 0;
    int digits = 0;
    while (*p >= '0' && *p <= '9' && digits < 7)
        n = n * 10 + (*p++ - '0'), digits++;
    if (!digits || *p != '.') return -1;
    if (rest) *rest = p + 1;
    return (int)n;
}

static const char *const expert_parts[] = {"ffn_gate_up_exps.weight", "ffn_gate_exps.weight",
                                           "ffn_up_exps.weight", "ffn_down_exps.weight"};

int model_is_routed_expert(const char *name, int *layer) {
    const char *rest;
    int b = block_index(name, &rest);
    if (b < 0) return 0;
    for (size_t i = 0; i < PT_ARRAY_LEN(expert_parts); i++)
        if (strcmp(rest, expert_parts[i]) == 0) {
            if (layer) *layer = b;
            return 1;
        }
    return 0;
}

static uint32_t arch_u32(const gguf_ctx *g, const char *arch, const char *key, uint32_t def) {
    char k[192];
    snprintf(k, sizeof k, "%s.%s", arch, key);
    uint32_t v;
    return gguf_get_u32(g, k, &v, NULL) == 0 ? v : def;
}

int model_info_get(const gguf_ctx *g, model_info *mi, pt_err *err) {
    memset(mi, 0, sizeof *mi);
    const char *path = g->files[0].path;
    pt_err e2;
    if (gguf_get_str(g, "general.architecture", mi->arch, sizeof mi->arch, &e2))
        return pt_errf(err, "%s", e2.msg);
    if (gguf_find(g, "general.name"))
        gguf_get_str(g, "general.name", mi->name, sizeof mi->name, NULL);
    mi->version = g->version;
    mi->n_files = g->n_files;
    mi->file_bytes = g->total_size;
    mi->n_tensors = g->n_tensors;

    int max_blk = -1;
    for (uint64_t i = 0; i < g->n_tensors; i++) {
        int b = block_index(g->tensors[i].name, NULL);
        if (b > max_blk) max_blk = b;
    }
    mi->n_layers = arch_u32(g, mi->arch, "block_count", (uint32_t)(max_blk + 1));
    if (mi->n_layers > LD_MAX_LAYERS)
        return pt_errf(err, "%s: %s.block_count = %u, expected at most %d", path, mi->arch,
                       mi->n_layers, LD_MAX_LAYERS);
    if (max_blk >= (int)mi->n_layers)
        return pt_errf(err, "%s: tensor of block %d but %s.block_count is %u", path, max_blk,
                       mi->arch, mi->n_layers);
    mi->n_nextn = arch_u32(g, mi->arch, "nextn_predict_layers", 0);
    if (mi->n_nextn > mi->n_layers)
        return pt_errf(err, "%s: %s.nextn_predict_layers = %u exceeds block_count %u", path,
                       mi->arch, mi->n_nextn, mi->n_layers);
    mi->n_expert = arch_u32(g, mi->arch, "expert_count", 0);
    mi->n_expert_used = arch_u32(g, mi->arch, "expert_used_count", 0);
    mi->n_expert_shared = arch_u32(g, mi->arch, "expert_shared_count", 0);

    mi->layers = calloc(mi->n_layers ? mi->n_layers : 1, sizeof(mi_layer));
    if (!mi->layers) return pt_errf(err, "%s: out of memory", path);
    for (uint32_t l = 0; l < mi->n_layers; l++) {
        mi->layers[l].index = (int32_t)l;
        mi->layers[l].is_mtp = l >= mi->n_layers - mi->n_nextn;
        for (int k = 0; k < 3; k++)
            mi->layers[l].expert_types[k] = MI_NO_TYPE;
    }

    for (uint64_t i = 0; i < g->n_tensors; i++) {
        const gguf_tensor *t = &g->tensors[i];
        mi->tensor_bytes += t->nbytes;
        mi->type_count[t->type]++;
        mi->type_bytes[t->type] += t->nbytes;
        int layer;
        int b = block_index(t->name, NULL);
        if (model_is_routed_expert(t->name, &layer)) {
            mi_layer *L = &mi->layers[layer];
            uint32_t ne2 = (uint32_t)t->ne[2];
            if (t->n_dims != 3 || ne2 == 0 || (L->n_expert && L->n_expert != ne2)) {
                model_info_free(mi);
                return pt_errf(err,
                               "%s: expert tensor '%s' has shape {%lld,%lld,%lld}, expected 3 "
                               "dimensions with the expert count last (consistent per layer)",
                               path, t->name, (long long)t->ne[0], (long long)t->ne[1],
                               (long long)t->ne[2]);
            }
            L->n_expert = ne2;
            L->routed_bytes += t->nbytes;
            L->expert_bytes += t->nbytes / ne2;
            const char *part = strchr(t->name + 4, '.') + 1;
            if (strncmp(part, "ffn_gate_up", 11) == 0) {
                L->fused_gate_up = 1;
                L->expert_types[0] = t->type;
            } else if (strncmp(part, "ffn_gate", 8) == 0) {
                L->expert_types[0] = t->type;
            } else if (strncmp(part, "ffn_up", 6) == 0) {
                L->expert_types[1] = t->type;
            } else {
                L->expert_types[2] = t->type;
            }
            mi->routed_bytes += t->nbytes;
        } else {
            mi->resident_bytes += t->nbytes;
            if (b >= 0) mi->layers[b].resident_bytes += t->nbytes;
        }
    }
    const gguf_tensor *out = gguf_find_tensor(g, "output.weight");
    if (!out) out = gguf_find_tensor(g, "token_embd.weight");
    if (out && out->n_dims >= 2) mi->n_output_rows = (uint64_t)out->ne[1];
    const gguf_kv *toks = gguf_find(g, "tokenizer.ggml.tokens");
    if (toks && toks->val.type == GGUF_ARRAY) mi->n_vocab_tokens = toks->val.arr.n;
    for (uint32_t l = 0; l < mi->n_layers; l++) {
        const mi_layer *L = &mi->layers[l];
        if (!L->n_expert) continue;
        if (L->n_expert > mi->n_expert_max) mi->n_expert_max = L->n_expert;
        if (L->expert_bytes > mi->expert_bytes_max) mi->expert_bytes_max = L->expert_bytes;
        if (L->is_mtp) continue;
        mi->n_moe_layers++;
        mi->touched_per_token += (uint64_t)PT_MIN(mi->n_expert_used, L->n_expert) * L->expert_bytes;
    }
    return 0;
}

void model_info_free(model_info *mi) {
    free(mi->layers);
    mi->layers = NULL;
}

int model_expert_layers(const gguf_ctx *g, xp_layer_desc **out, int *n_layers, pt_err *err) {
    model_info mi;
    if (model_info_get(g, &mi, err)) return -1;
    const int n = (int)mi.n_layers;
    model_info_free(&mi);
    xp_layer_desc *d = calloc((size_t)(n > 0 ? n : 1), sizeof *d);
    if (!d) return pt_errf(err, "out of memory");
    for (int l = 0; l < n; l++) {
        const gguf_tensor *t[4];
        for (int k = 0; k < 4; k++) {
            char name[64];
            snprintf(name, sizeof name, "blk.%d.%s", l, expert_parts[k]);
            t[k] = gguf_find_tensor(g, name);
        }
        /* expert_parts: gate_up, gate, up, down */
        if (t[0] && t[3] && !t[1] && !t[2])
            d[l] = (xp_layer_desc){2, {t[0], t[3], NULL}};
        else if (t[1] && t[2] && t[3] && !t[0])
            d[l] = (xp_layer_desc){3, {t[1], t[2], t[3]}};
        else if (t[0] || t[1] || t[2] || t[3]) {
            free(d);
            return pt_errf(err, "%s: layer %d has an incomplete set of routed-expert tensors",
                           g->files[0].path, l);
        }
    }
    *out = d;
    *n_layers = n;
    return 0;
}
