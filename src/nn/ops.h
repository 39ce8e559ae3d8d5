/* ops.h — element-wise and row-wise layer math shared by every architecture:
 * norms, rotary embeddings, softmax, activations, top-k.
 *
 * Numerics follow llama.cpp's CPU backend where it matters for matching its
 * references: norms sum in double and scale by a float reciprocal square root;
 * rotary angles are built by repeated float multiplication
 * (theta *= theta_scale) exactly as ggml's rope cache does, with the same
 * fused multiply-adds; the attention helpers (nn_dot_f32, nn_softmax,
 * nn_wsum_*) reproduce the lane order of ggml's AVX-512 F32 kernels bit for
 * bit (ops.c explains which kernel each mirrors and why it matters).
 */
#ifndef PT_NN_OPS_H
#define PT_NN_OPS_H

#include <stddef.h>
#include <stdint.h>

/* y[n] = x * 1/sqrt(mean(x^2) + eps) * w (w may be NULL: no weight). y may alias x. */
void nn_rms_norm(const float *x, const float *w, float eps, int n, float *y);
/* nn_rms_norm of rows consecutive rows of n (x and y row-major; y may be x), several at once. */
void nn_rms_norm_rows(const float *x, const float *w, float eps, int n, int rows, float *y);

/* y[n] = (x - mean) / sqrt(var + eps) * w + b (w, b may be NULL). y may alias x. */
void nn_layer_norm(const float *x, const float *w, const float *b, float eps, int n, float *y);

/* Rotary embedding parameters of one attention flavour. */
typedef struct nn_rope {
    int n_dims; /* rotated dimensions (even); the rest pass through */
    int neox;   /* 0: pairs (2i, 2i+1) ("NORM"); 1: pairs (i, i + n_dims/2) ("NEOX") */
    float freq_base;
    float freq_scale;   /* 1 / YaRN factor; 1 without scaling */
    float ext_factor;   /* YaRN extrapolation mix; 0 without YaRN */
    float attn_factor;  /* magnitude multiplier of cos/sin (YaRN cancels its own factor with it) */
    float corr_dims[2]; /* YaRN correction range in pair indices */
    const float *freq_factors; /* [n_dims/2] divisors of theta (proportional rope), or NULL */
} nn_rope;

/* YaRN correction range for n_dims rotated dims (llama.cpp's ggml_rope_yarn_corr_dims). */
void nn_rope_yarn_corr_dims(int n_dims, int n_ctx_orig, float freq_base, float beta_fast,
                            float beta_slow, float dims[2]);

/* cos/sin table for position pos: cs[2*i] = cos, cs[2*i+1] = sin for pair i < n_dims/2. */
void nn_rope_cache(const nn_rope *r, int64_t pos, float *cs);

/* Rotate one head vector x[head_dim] in place with a table from nn_rope_cache. */
void nn_rope_apply(const nn_rope *r, const float *cs, float *x);

/* In place: x = softmax(x * scale) over n (entries equal to -INFINITY get 0),
 * rounded like ggml_soft_max_ext: attention callers pad n to a multiple of 16
 * with -INFINITY, as llama.cpp's KV window is. */
void nn_softmax(float *x, int n, float scale);
/* nn_softmax with its chunks' exponentials one lane at a time (the reference the vector path
 * is tested against): the same bits. */
void nn_softmax_scalar(float *x, int n, float scale);

/* sum x[i] * y[i] in ggml_vec_dot_f32's order (attention scores). */
float nn_dot_f32(const float *x, const float *y, int n);
/* out[k] = nn_dot_f32(x, yk, n) for two rows at once (x loaded once), same bits. */
void nn_dot2_f32(const float *x, const float *y0, const float *y1, int n, float *out);

/* Weighted sum of value rows in the order of llama.cpp's probability x value
 * product for a batch of query rows (tinyBLAS): out[d] = sum over keys of
 * p * row[d], key k accumulated into lane k % lanes with fused multiply-adds,
 * lanes folded pairwise at the end. acc is scratch [lanes][d]. The attention
 * uses NN_WSUM_LANES for every query row, one alone too (llama.cpp's single
 * row takes ggml_vec_dot_f32's 64 lanes instead): a row's output must not
 * depend on how many rows share its batch. Other lane counts (a power of two,
 * at most 64) serve the tests. */
enum { NN_WSUM_LANES = 16 };
/* `used` tracks the lanes touched (lanes <= 64), so only those are zeroed and folded. */
void nn_wsum_begin(float *acc, int lanes, int d, uint64_t *used);
void nn_wsum_add(float *acc, int lanes, int d, int64_t key, float p, const float *row,
                 uint64_t *used);
void nn_wsum_end(float *acc, int lanes, int d, float *out, uint64_t used);
/* nn_wsum_add for keys key0 .. key0 + nk - 1 (nk <= NN_WSUM_KEYS) whose on[k]
 * is set, probability p[k], row rows + k * stride: the same bits as calling
 * nn_wsum_add for each in key order, but the keys that share a lane are summed
 * in one pass over the lane (qt_f32_axpyn_fn), so the lane is loaded and
 * stored once per nk keys instead of once per key. 256 keys: a lane gets 16 of
 * them per pass and stays in L1 across them (64 was 8-14% slower in attention). */
enum { NN_WSUM_KEYS = 256 };
void nn_wsum_add_keys(float *acc, int lanes, int d, int64_t key0, int nk, const float *p,
                      const unsigned char *on, const float *rows, size_t stride, uint64_t *used);
/* nn_wsum_add_keys for g <= NN_WSUM_HEADS heads over the same rows: head h's
 * lanes at acc[h], its probabilities and flags at p, on + h * NN_WSUM_KEYS,
 * its lane mask used[h]. Lane by lane, every head adds the lane's rows while
 * they are in cache, the heads that count the same keys of the lane in one
 * pass over its rows (qt_f32_axpyn_fn for several heads); each head gets the
 * bits nn_wsum_add_keys gives it. */
enum { NN_WSUM_HEADS = 8 };
void nn_wsum_add_keys_heads(int g, float *const *acc, int lanes, int d, int64_t key0, int nk,
                            const float *p, const unsigned char *on, const float *rows,
                            size_t stride, uint64_t *used);
/* The same over fp16 rows (raw IEEE halves, stride apart), each value converted as it is
 * loaded (qt_f16_axpyn_fn): the bits of converting the rows first. */
void nn_wsum_add_keys_heads_f16(int g, float *const *acc, int lanes, int d, int64_t key0, int nk,
                                const float *p, const unsigned char *on, const uint16_t *rows,
                                size_t stride, uint64_t *used);

/* A block of attention weights for the weighted sums: pk[k] = p[k] + 0 (+0 for either
 * zero, every other value as it is) and on[k] = pk[k] != 0 (a NaN counts), k < n. */
void nn_weights_on(const float *p, int n, float *pk, unsigned char *on);

/* The DSA indexer's head sums of eight keys: sc[k] += relu(d[h * 8 + k]) * w[h] for
 * h = 0 .. nh - 1 in turn (a product, then a sum: two roundings). */
void nn_relu_wsum8(const float *d, const float *w, int nh, float sc[8]);

float nn_silu(float x);
float nn_sigmoid(float x);
/* g[i] = silu(g[i]) * u[i] over one row of n, in ggml_vec_swiglu_f32's order
 * (its AVX-512 build): the first n & ~15 through ggml_v_silu (x / (1 + exp(-x))
 * with ggml_v_expf), the rest through expf. */
void nn_swiglu_row(float *g, const float *u, int64_t n);

/* Indices of the k largest values of x[n] in descending order of value (ties:
 * lower index first). k <= n. */
void nn_top_k(const float *x, int n, int k, int *idx);

#endif
