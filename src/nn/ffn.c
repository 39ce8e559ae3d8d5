/* ffn.c — gated feed-forward blocks (see ffn.h). */
#include "nn/ffn.h"

#include <math.h>
#include <pthread.h>

#include "kernels/quant.h"
#include "nn/ops.h"

/* GELU of an fp16 input h, rounded to fp16. */
static pt_f16 gelu_of_f16(float h) {
    const float y =
        0.5f * h *
        (1.0f + tanhf(0.79788456080286535587989211986876f * h * (1.0f + 0.044715f * h * h)));
    return qt_f32_to_f16(y);
}

float nn_gelu_f16_ref(float x) {
    if (x <= -10.0f) return 0.0f;
    if (x >= 10.0f) return x;
    return qt_f16_to_f32(gelu_of_f16(qt_f16_to_f32(qt_f32_to_f16(x))));
}

/* The reference's fp16 result for every fp16 input, filled once: between the clamps the
 * reference reads x only through f16(x), so a lookup gives its bits without a tanhf. */
static pt_f16 gelu_tab[1 << 16];
static pthread_once_t gelu_once = PTHREAD_ONCE_INIT;

static void gelu_fill(void) {
    for (uint32_t u = 0; u < 1u << 16; u++)
        gelu_tab[u] = gelu_of_f16(qt_f16_to_f32((pt_f16)u));
}

/* nn_gelu_f16 once the table is filled (the loops below fill it once per call). */
static inline float gelu_lookup(float x) {
    if (x <= -10.0f) return 0.0f;
    if (x >= 10.0f) return x;
    return qt_f16_to_f32(gelu_tab[qt_f32_to_f16(x)]);
}

float nn_gelu_f16(float x) {
    pthread_once(&gelu_once, gelu_fill);
    return gelu_lookup(x);
}

static void run(const nn_ffn *f, const mm_weight *w, const float *x, int T, float *y, int64_t ldy) {
    mm_run(f->mm, w, x, T, y, ldy);
}

/* gate and up of x's n rows into f->g, f->u in one job (mm_run_many) */
static void run_gate_up(const nn_ffn *f, const mm_weight *gate, const mm_weight *up, const float *x,
                        int n) {
    const mm_task t[2] = {{gate, x, gate->n_in, f->g, gate->n_out},
                          {up, x, up->n_in, f->u, up->n_out}};
    mm_run_many(f->mm, t, 2, n);
}

/* The FFNs below run x[T] in tiles of the rows the scratch holds (f->rows):
 * every output row is computed alone, so tiles change no bit. x and out may
 * be the same rows (a routed expert in place): a tile reads its rows before
 * it writes them. */
static int tile_rows(const nn_ffn *f, int T, int t0) {
    const int r = f->rows > 0 ? f->rows : T;
    return T - t0 < r ? T - t0 : r;
}

void nn_swiglu(const nn_ffn *f, const mm_weight *gate, const mm_weight *up, const mm_weight *down,
               const float *x, int T, float *out, int64_t n_out) {
    const int64_t F = gate->n_out, n_in = gate->n_in;
    for (int t0 = 0, n; t0 < T; t0 += n) {
        n = tile_rows(f, T, t0);
        run_gate_up(f, gate, up, x + (size_t)t0 * n_in, n);
        for (int t = 0; t < n; t++)
            nn_swiglu_row(f->g + (size_t)t * F, f->u + (size_t)t * F, F);
        run(f, down, f->g, n, out + (size_t)t0 * n_out, n_out);
    }
}

void nn_geglu(const nn_ffn *f, const mm_weight *gate, const mm_weight *up, const mm_weight *down,
              const float *x, int T, float *out, int64_t n_out) {
    const int64_t F = gate->n_out, n_in = gate->n_in;
    for (int t0 = 0, n; t0 < T; t0 += n) {
        n = tile_rows(f, T, t0);
        run_gate_up(f, gate, up, x + (size_t)t0 * n_in, n);
        pthread_once(&gelu_once, gelu_fill);
        for (int64_t i = 0; i < (int64_t)n * F; i++)
            f->g[i] = gelu_lookup(f->g[i]) * f->u[i];
        run(f, down, f->g, n, out + (size_t)t0 * n_out, n_out);
    }
}

void nn_geglu_fused(const nn_ffn *f, const mm_weight *gate_up, int64_t n_ff, const mm_weight *down,
                    const float *x, int T, float *out, int64_t n_out) {
    const int64_t n_in = gate_up->n_in;
    for (int t0 = 0, n; t0 < T; t0 += n) {
        n = tile_rows(f, T, t0);
        run(f, gate_up, x + (size_t)t0 * n_in, n, f->g, 2 * n_ff);
        pthread_once(&gelu_once, gelu_fill);
        for (int t = 0; t < n; t++) {
            const float *gu = f->g + (size_t)t * 2 * n_ff;
            float *act = f->u + (size_t)t * n_ff;
            for (int64_t j = 0; j < n_ff; j++)
                act[j] = gelu_lookup(gu[j]) * gu[n_ff + j];
        }
        run(f, down, f->u, n, out + (size_t)t0 * n_out, n_out);
    }
}
