/* ffn.h — gated feed-forward blocks a family composes: SwiGLU (GLM,
 * DeepSeek, Qwen3) and GeGLU with llama.cpp's fp16-table GELU (Gemma 4),
 * for dense FFNs, shared experts and routed experts alike.
 *
 * out[T][n_out] = down(act(gate(x)) * up(x)). Every projection is one mm_run,
 * the same arithmetic for a routed expert's rows as for a dense FFN's.
 * g and u are the caller's scratch, [rows][width] each (GeGLU with a fused
 * gate|up projection: g is [rows][2 width]); T rows run in tiles of `rows`,
 * which changes no bit (each output row is computed alone).
 */
#ifndef PT_NN_FFN_H
#define PT_NN_FFN_H

#include "nn/matmul.h"

typedef struct nn_ffn {
    mm_ctx *mm;
    float *g, *u; /* scratch, see above */
    int rows;     /* rows g and u hold (0: every call's T) */
} nn_ffn;

/* GELU (tanh form) as llama.cpp's CPU backend evaluates it: through a table
 * indexed by the fp16 input and holding fp16 outputs, y = f16(gelu(f16(x))),
 * for |x| < 10; the identity above and 0 below. */
float nn_gelu_f16(float x);
/* The same, evaluated directly (tanhf): the reference the table is filled from and tested
 * against (ops_gelu_table_matches). */
float nn_gelu_f16_ref(float x);

/* act[j] = nn_gelu_f16(g[j]) * u[j] for j < n (act may be g), vectorised where the
 * CPU allows with the same bits (ops_geglu_row_matches). */
void nn_geglu_row(const float *g, const float *u, float *act, int64_t n);

/* SwiGLU: out = down(silu(gate x) * up x). */
void nn_swiglu(const nn_ffn *f, const mm_weight *gate, const mm_weight *up, const mm_weight *down,
               const float *x, int T, float *out, int64_t n_out);

/* GeGLU with separate gate and up projections. */
void nn_geglu(const nn_ffn *f, const mm_weight *gate, const mm_weight *up, const mm_weight *down,
              const float *x, int T, float *out, int64_t n_out);

/* GeGLU with a fused gate|up projection (gate rows first), width n_ff. */
void nn_geglu_fused(const nn_ffn *f, const mm_weight *gate_up, int64_t n_ff, const mm_weight *down,
                    const float *x, int T, float *out, int64_t n_out);

#endif
