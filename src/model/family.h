/* family.h — the contract between the decoder (engine/decoder.c) and a model
 * family (model/<family>.c).
 *
 * A family is an ops table: load/free the model (hyper-parameters and tensor
 * bindings from the GGUF), say how many KV bytes a context costs, make and
 * free the per-session state (its KV caches and scratch), run one decoder
 * block on the residual rows, route a row of router logits, and optionally the
 * NextN/MTP head. model/families.c lists every family in one table and loads a
 * model through it (fam_load: the architecture matched against the table, the
 * family's model allocated and freed there); model/fam_common.h holds what
 * every family binds and allocates the same way. Adding a family is one file
 * under model/ plus one entry in the table.
 *
 * The decoder owns what every family shares and passes it in a fam_ctx: the
 * thread pool, the matmul context, the expert store, the residual stream and
 * normed rows, the routing buffers, the chunk loop and positions (with the
 * sliding-window ring), token checks, the embedding lookup, the final norm and
 * the output head, truncation, and the routed-expert step with its prefetch
 * driver (fam_ctx.moe). A family composes nn/ functions (attention variants,
 * routers, gated FFNs) in its block; it never allocates in the token loop.
 */
#ifndef PT_MODEL_FAMILY_H
#define PT_MODEL_FAMILY_H

#include <stdint.h>

#include "common.h"
#include "format/gguf.h"
#include "model/loader.h"
#include "nn/kv.h"
#include "nn/matmul.h"
#include "nn/moe.h"
#include "runtime/experts.h"
#include "runtime/threadpool.h"

/* What the decoder needs to know about a loaded model. fam_load zeroes it;
 * fam_bind_trunk (model/fam_common.h) fills the trunk's part (n_vocab, n_embd,
 * n_ctx_train, tok_embd, embd_scale, output_norm, output), the family the
 * rest. Pointers point into the family's model or the mapping and live as
 * long as the model. */
typedef struct fam_desc {
    int n_vocab;
    int n_embd;               /* residual width */
    int n_layer;              /* trunk blocks the decoder runs, in order */
    int n_ctx_train;          /* training context (0: unknown) */
    int n_expert;             /* routed experts per MoE layer (0: none) */
    int n_expert_used;        /* experts chosen per row */
    int has_mtp;              /* the family implements fam_ops.mtp for this model */
    int window;               /* sliding-window width of windowed layers (0: none) */
    int k_only;               /* one cache row per position, in the K type (MLA's latent | rope
                                 key): the V cache type is unused and changes no byte */
    float rms_eps;            /* final norm epsilon */
    mm_weight tok_embd;       /* n_vocab rows of n_embd */
    float embd_scale;         /* embeddings are multiplied by it (1: not) */
    const float *output_norm; /* [n_embd] final RMS norm gain */
    mm_weight output;         /* n_embd -> n_vocab (tok_embd when tied) */
    float softcap;            /* logits = softcap * tanh(logits / softcap) when > 0 */
    int64_t max_in;           /* widest input of any matmul the family runs */
    int64_t row_floats;       /* floats of the family's state per block row (its B-row
                                 buffers; the plan counts them with the decoder's) */
    int kv_unit;              /* every KV head (or MLA latent / rope part) is a multiple of this
                                 many elements: a block cache type needs kv_block | kv_unit */
} fam_desc;

typedef struct fam_ctx fam_ctx;

/* The routed-expert step of one layer, run by the decoder: the router matmul
 * on router_in[T][n_embd], fam_ops.route per row, then the experts on
 * expert_in through the expert store, summed per row in selection order into
 * out[T][n_embd]. While the first reads are in flight the decoder runs the
 * router lookahead for the next layer (when prefetch is on) and then extra()
 * (e.g. a shared expert; may be NULL). 0, or -1 with err. */
typedef int (*fam_moe_fn)(fam_ctx *c, int layer, int T, const float *router_in,
                          const float *expert_in, float *out, moe_expert_fn expert,
                          moe_overlap_fn extra, void *st, pt_err *err);

/* Per-session context the decoder gives the family (B = max_batch rows, the
 * block; A = tile rows). Buffers that carry a row through a whole block (the
 * residual, a sub-block's output, the MoE's input and output) hold B rows;
 * row-local work (attention, dense and expert FFNs, the matmul's converted
 * activations) holds A and runs B rows in tiles of A, which changes no bit:
 * a tile is a chunk of A rows as far as any row's arithmetic can tell. So a
 * prompt block can be large (each routed expert read once per layer for the
 * whole block) while the scratch that grows fastest with rows stays small. */
struct fam_ctx {
    tp_pool *pool;
    xs_store *xs; /* where routed experts come from */
    mm_ctx mm;
    int n_ctx;     /* positions the caches address */
    int max_batch; /* B: rows per block (a decoder chunk) */
    int tile;      /* A: rows per tile of row-local work, <= B */
    int64_t ring;  /* slots of a sliding-window layer's cache: window + tile - 1 (<= n_ctx) */
    uint32_t k_type, v_type; /* KV cache element types (nn/kv.h); MLA caches use k_type */
    kv_arena *kv;   /* where the state takes its KV buffers (kv_arena_take; the decoder frees it) */
    float *x;       /* [B][n_embd] residual stream: the block's input and output */
    float *xn;      /* [B][n_embd] normed input of a sub-block (also the final-norm rows) */
    fam_moe_fn moe; /* the routed-expert step (decoder.c) */
};

/* One KV buffer of a session's state, as the prefix cache copies it
 * (engine/pcache.c): the rows of position p live at base + slot * row_bytes,
 * slot = p on a linear buffer, p % slots on a sliding-window ring. MTP
 * buffers are indexed by the MTP head's positions (fam_ops.mtp). */
enum { FAM_KV_LINEAR, FAM_KV_RING, FAM_KV_MTP };
typedef struct fam_kv_buf {
    uint8_t *base;    /* slot 0 */
    size_t row_bytes; /* one position's row */
    int kind;         /* FAM_KV_* */
    int64_t slots;    /* ring slots (FAM_KV_RING), else the context */
} fam_kv_buf;

typedef struct fam_ops {
    const char *name;         /* e.g. "glm-dsa" */
    const char *const *archs; /* general.architecture values it loads, NULL-terminated */
    size_t model_bytes;       /* the family's model: fam_load allocates it zeroed */
    /* Bind the model that L reads (L->arch: one of archs) into model, filling d (zeroed).
     * 0, or -1 with the error in L->err. */
    int (*load)(ld_ctx *L, void *model, fam_desc *d);
    /* Free what load allocated inside model, after a failed load too (not model itself). */
    void (*free)(void *model);
    /* KV cache bytes at element types k_type / v_type (nn/kv.h): per_pos for
     * every position of the context, fixed for the caches that do not grow
     * with it (rings of `ring` slots). */
    void (*kv_size)(const void *model, int64_t ring, uint32_t k_type, uint32_t v_type,
                    uint64_t *per_pos, uint64_t *fixed);
    /* Session state (KV caches, scratch) for c->n_ctx positions, blocks of
     * c->max_batch rows and tiles of c->tile rows; NULL with err. */
    void *(*state_new)(const void *model, fam_ctx *c, pt_err *err);
    void (*state_free)(void *st);
    /* Decoder block `layer` on c->x[T] at positions pos0.. . 0, or -1 with err. */
    int (*block)(void *st, int layer, int T, int pos0, pt_err *err);
    /* The part of block `layer` on c->x[T] (positions pos0..) that later positions read:
     * the rows' KV (and any other per-position state), the same bits as block's, nothing
     * else; c->x is left as it is. The decoder runs it for the last layer's rows whose
     * output nobody reads (every row but the last of a prompt; all of an earlier chunk's).
     * NULL: the decoder runs the whole block there. 0, or -1 with err. */
    int (*block_kv)(void *st, int layer, int T, int pos0, pt_err *err);
    /* Router weights of `layer` (NULL: no routed experts there). */
    const mm_weight *(*router)(const void *model, int layer);
    /* The experts chosen from logits[n_expert] (may be overwritten), in
     * selection order, and their weights. scratch: [2 n_expert] floats. */
    void (*route)(const void *model, int layer, float *logits, int *chosen, float *w,
                  float *scratch);
    /* Rows the router of layer `next` would read, from the current layer's
     * state (router lookahead); may be NULL when the family has no lookahead. */
    const float *(*lookahead_input)(void *st, int next, int T);
    /* NextN/MTP draft logits (see session_mtp: logits NULL, or [n][n_vocab], or the
     * last row's [n_vocab] when last_only; hidden_out NULL or [n][n_embd]); NULL when none. */
    int (*mtp)(void *st, const int32_t *tokens, const float *hidden_prev, int n, float *logits,
               int last_only, float *hidden_out, pt_err *err);
    /* Keep at most n MTP positions; returns the positions the MTP cache holds (n = INT_MAX
     * asks without cutting). NULL when the family has no MTP head. */
    int (*mtp_keep)(void *st, int n);
    /* The decoder cut the trunk to n positions (NULL: nothing to do). */
    void (*truncated)(void *st, int n);
    /* Every buffer that holds per-position state (all of it: a restored prefix must give
     * the logits a fresh evaluation gives), in a fixed order, at most max; returns how many. */
    int (*kv_bufs)(void *st, fam_kv_buf *out, int max);
    /* The MTP rows of positions 0..n-1 were written into its buffers: the head holds n
     * (NULL when the family has no MTP head). */
    void (*mtp_restored)(void *st, int n);
} fam_ops;

/* Load g, whose general.architecture is arch, with the family whose archs list it: *fam,
 * *model (free it with fam_free) and *d. 0, or -1 with err (an architecture no family
 * loads is refused, naming the ones petrel runs). */
int fam_load(const gguf_ctx *g, const char *arch, const fam_ops **fam, void **model, fam_desc *d,
             pt_err *err);
void fam_free(const fam_ops *fam, void *model); /* NULL model is fine */

#endif
