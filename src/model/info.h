/* info.h — what a model file means for streaming, computed from GGUF metadata
 * and tensor infos alone (no tensor data is read, so it is instant even on a
 * multi-hundred-GB split model).
 *
 * The split that matters to petrel: routed-expert tensors (`blk.N.ffn_*_exps.weight`,
 * stacked per layer with ne[2] = expert count) live on the SSD and are streamed;
 * everything else is resident. Per MoE layer, one expert is the sum of its
 * slices of the layer's gate/up/down (or fused gate_up) expert tensors.
 */
#ifndef PT_MODEL_INFO_H
#define PT_MODEL_INFO_H

#include <stdint.h>

#include "format/gguf.h"
#include "format/xpack.h"
#include "kernels/qtypes.h"

#define MI_MAX_LAYERS 65536    /* block_count above this is refused as implausible */
#define MI_NO_TYPE 0xffffffffu /* expert_types entry of a matrix the layer lacks */

typedef struct mi_layer {
    int32_t index;            /* N of blk.N */
    int is_nextn;             /* one of the trailing nextn/MTP blocks */
    uint32_t n_expert;        /* routed experts (ne[2] of the expert tensors), 0 if dense */
    uint64_t expert_bytes;    /* bytes of ONE routed expert (all its matrices) */
    uint64_t routed_bytes;    /* bytes of all routed experts of the layer */
    uint64_t resident_bytes;  /* bytes of the layer's other tensors */
    uint32_t expert_types[3]; /* ggml types of gate/up/down (gate_up in [0] when fused) */
    int fused_gate_up;
} mi_layer;

typedef struct model_info {
    char arch[64];    /* general.architecture */
    char name[256];   /* general.name, or "" */
    uint32_t version; /* GGUF version */
    uint32_t n_files;
    uint64_t file_bytes; /* all files */
    uint64_t n_tensors;
    uint64_t tensor_bytes;   /* all tensor data */
    uint64_t routed_bytes;   /* routed-expert tensors */
    uint64_t resident_bytes; /* everything else */
    uint64_t type_count[QT_COUNT];
    uint64_t type_bytes[QT_COUNT];
    uint32_t n_layers; /* <arch>.block_count, or highest blk.N + 1 */
    uint32_t n_nextn;  /* <arch>.nextn_predict_layers (trailing MTP blocks) */
    uint32_t n_expert, n_expert_used, n_expert_shared; /* from metadata (0 if absent) */
    uint32_t n_expert_max;      /* most routed experts found in one layer's tensors */
    uint32_t n_moe_layers;      /* trunk layers (not MTP) with routed experts */
    uint64_t expert_bytes_max;  /* largest single expert over layers */
    uint64_t touched_per_token; /* routed bytes one token reads: top-k experts of every trunk MoE
                                   layer */
    mi_layer *layers;           /* [n_layers] */
} model_info;

/* Fill mi from a parsed file. Returns 0, or -1 with err set. */
int model_info_get(const gguf_ctx *g, model_info *mi, pt_err *err);
void model_info_free(model_info *mi);

/* The routed-expert tensors of every layer, found by name: *out gets
 * block_count entries (n_mats = 0 for dense layers), mats ordered gate, up,
 * down (or gate_up, down when fused) — the order of an expert's record in a
 * pack and in a cache slot. 0, or -1 with err (inconsistent tensors). */
int model_expert_layers(const gguf_ctx *g, xp_layer_desc **out, int *n_layers, pt_err *err);

/* If `name` is a routed-expert weight (`blk.N.ffn_{gate,up,down,gate_up}_exps.weight`),
 * return 1 and set *layer; else 0. */
int model_is_routed_expert(const char *name, int *layer);

#endif
