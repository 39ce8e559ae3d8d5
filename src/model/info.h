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
#include "petrel_tools.h"

#define MI_NO_TYPE PT_NO_TYPE /* expert_types entry of a matrix the layer lacks */

/* The public types of petrel_tools.h themselves: a layer's expert/resident
 * split (mi_layer) and the whole file's (model_info), with the layer array
 * malloc'd by model_info_get. */
typedef pt_layer_info mi_layer;
typedef pt_model_info model_info;

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
