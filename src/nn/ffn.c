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
static pt_f16 gelu_tab[(1 << 16) + 1]; /* + 1: the vector path reads 4 bytes at an entry */
static pthread_once_t gelu_once = PTHREAD_ONCE_INIT;

static int gelu_vec; /* nn_geglu_row's AVX-512 path: set with the table */

static void gelu_fill(void) {
    for (uint32_t u = 0; u < 1u << 16; u++)
        gelu_tab[u] = gelu_of_f16(qt_f16_to_f32((pt_f16)u));
    gelu_vec = qt_isa_detect() >= QT_ISA_AVX512;
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

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
/* gelu_lookup(g[j]) * u[j] for j < n rounded down to 16, sixteen at a time:
 * F16C rounds to nearest even as qt_f32_to_f16 does, the table is gathered
 * (4 bytes at an entry, the low 2 kept), the clamps are masks. Returns the
 * count done. */
__attribute__((target("avx512f"))) static int64_t geglu_avx512(const float *g, const float *u,
                                                               float *act, int64_t n) {
    const __m512 lo = _mm512_set1_ps(-10.0f), hi = _mm512_set1_ps(10.0f);
    int64_t j = 0;
    for (; j + 16 <= n; j += 16) {
        const __m512 x = _mm512_loadu_ps(g + j);
        const __m512i h = _mm512_cvtepu16_epi32(
            _mm512_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
        const __m512i t = _mm512_i32gather_epi32(h, (const void *)gelu_tab, 2);
        __m512 y = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(t));
        y = _mm512_mask_mov_ps(y, _mm512_cmp_ps_mask(x, hi, _CMP_GE_OQ), x);
        y = _mm512_maskz_mov_ps(_knot_mask16(_mm512_cmp_ps_mask(x, lo, _CMP_LE_OQ)), y);
        _mm512_storeu_ps(act + j, _mm512_mul_ps(y, _mm512_loadu_ps(u + j)));
    }
    return j;
}
#define HAVE_GEGLU_AVX512 1
#endif

void nn_geglu_row(const float *g, const float *u, float *act, int64_t n) {
    pthread_once(&gelu_once, gelu_fill);
    int64_t j = 0;
#ifdef HAVE_GEGLU_AVX512
    if (gelu_vec) j = geglu_avx512(g, u, act, n);
#endif
    for (; j < n; j++)
        act[j] = gelu_lookup(g[j]) * u[j];
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

/* down(act(gate x) * up x) with separate gate and up projections: GeGLU when gelu, else
 * SwiGLU (nn_swiglu_row a row at a time, as llama.cpp's silu). */
static void glu(const nn_ffn *f, const mm_weight *gate, const mm_weight *up, const mm_weight *down,
                const float *x, int T, float *out, int64_t n_out, int gelu) {
    const int64_t F = gate->n_out, n_in = gate->n_in;
    for (int t0 = 0, n; t0 < T; t0 += n) {
        n = tile_rows(f, T, t0);
        run_gate_up(f, gate, up, x + (size_t)t0 * n_in, n);
        if (gelu)
            nn_geglu_row(f->g, f->u, f->g, (int64_t)n * F);
        else
            for (int t = 0; t < n; t++)
                nn_swiglu_row(f->g + (size_t)t * F, f->u + (size_t)t * F, F);
        run(f, down, f->g, n, out + (size_t)t0 * n_out, n_out);
    }
}

void nn_swiglu(const nn_ffn *f, const mm_weight *gate, const mm_weight *up, const mm_weight *down,
               const float *x, int T, float *out, int64_t n_out) {
    glu(f, gate, up, down, x, T, out, n_out, 0);
}

void nn_geglu(const nn_ffn *f, const mm_weight *gate, const mm_weight *up, const mm_weight *down,
              const float *x, int T, float *out, int64_t n_out) {
    glu(f, gate, up, down, x, T, out, n_out, 1);
}

void nn_geglu_fused(const nn_ffn *f, const mm_weight *gate_up, int64_t n_ff, const mm_weight *down,
                    const float *x, int T, float *out, int64_t n_out) {
    const int64_t n_in = gate_up->n_in;
    for (int t0 = 0, n; t0 < T; t0 += n) {
        n = tile_rows(f, T, t0);
        run(f, gate_up, x + (size_t)t0 * n_in, n, f->g, 2 * n_ff);
        for (int t = 0; t < n; t++) {
            const float *gu = f->g + (size_t)t * 2 * n_ff;
            nn_geglu_row(gu, gu + n_ff, f->u + (size_t)t * n_ff, n_ff);
        }
        run(f, down, f->u, n, out + (size_t)t0 * n_out, n_out);
    }
}
