/* bench_kernels.c — single-threaded microbenchmark of the dot-product kernels
 * (`make bench`).
 *
 * For every type with a SIMD kernel, a weight matrix of 4096-wide rows is
 * multiplied by one activation vector (a full matvec pass: every row dotted
 * with the same activations, as in decoding one token) at each ISA level the
 * CPU supports. Two sizes: ~1 MB of weights (stays in L2/L3: compute-bound)
 * and ~64 MB (larger than any L3 here: streams from DRAM, the regime of a
 * huge MoE model). Reported: GB/s of weight bytes read and the speedup over
 * the scalar reference at the same size. Each measurement is the best of
 * rounds of passes over MEASURE_S seconds after one warm-up pass. A second table
 * times the four-row kernels (qt_dot4_fn, a prompt batch) on the 1 MB matrix
 * against four single-row passes at the same ISA level. The whole run takes
 * well under a minute. Then the engine's matmul (mm_run: activation conversion,
 * tile / four-row / single-row kernels, split over 1 and 2 threads) at 1, 4, 16
 * and 64 activation rows on a 16 MB weight matrix: GB/s of weight bytes and
 * GFLOP/s (2 x rows x weights per second), beside this machine's memory read
 * bandwidth at 1 and 2 threads (the roofline of a one-row pass over weights in
 * DRAM). Last, the SwiGLU activation's cost per element. Usage:
 * bench_petrel [TYPE]  (e.g. Q4_K: that type only; swiglu: the activation only; gemm:
 * the matmul at llama.cpp's MUL_MAT perf shape instead, which bench/gemm.sh prints beside
 * llama.cpp's own figures).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../tests/qt_random.h"
#include "common.h"
#include "kernels/quant.h"
#include "nn/matmul.h"
#include "nn/ops.h"
#include "runtime/threadpool.h"

#define NCOLS 4096     /* weights per row: a multiple of every block size */
#define MEASURE_S 0.25 /* seconds of timed passes per (type, size, ISA) */
#define ROUND_S 0.02   /* minimum length of one timed round */

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static const char *isa_name(int isa) {
    return isa == QT_ISA_AVX512 ? "AVX512" : isa == QT_ISA_AVX2 ? "AVX2" : "scalar";
}

/* One matvec pass: out[r] = dot(row r, act). */
static void matvec(qt_dot_fn f, const uint8_t *w, size_t row_bytes, int64_t rows, const void *act,
                   float *out) {
    for (int64_t r = 0; r < rows; r++)
        out[r] = f(w + (size_t)r * row_bytes, act, NCOLS);
}

/* Four activation rows (act, act + as, ...): four single-row passes when f4 is
 * NULL, else one pass of the four-row kernel. out: [4][rows]. */
typedef struct pass4 {
    qt_dot_fn f;
    qt_dot4_fn f4;
    uint64_t as;
} pass4;

static void matvec4(const pass4 *p, const uint8_t *w, size_t row_bytes, int64_t rows,
                    const uint8_t *act, float *out) {
    if (!p->f4) {
        for (int k = 0; k < 4; k++)
            matvec(p->f, w, row_bytes, rows, act + k * p->as, out + k * rows);
        return;
    }
    for (int64_t r = 0; r < rows; r++) {
        float o[4];
        p->f4(w + (size_t)r * row_bytes, act, p->as, NCOLS, o);
        for (int k = 0; k < 4; k++)
            out[k * rows + r] = o[k];
    }
}

/* GB/s of weight bytes for kernel f over `rows` rows: the best of several
 * rounds of passes (each round at least ROUND_S), which filters out other
 * processes sharing the core; MEASURE_S of rounds in all. */
static double measure(const pass4 *p, const uint8_t *w, size_t row_bytes, int64_t rows,
                      const void *act, float *out, int four) {
#define PASS()                                                                                     \
    (four ? matvec4(p, w, row_bytes, rows, act, out) : matvec(p->f, w, row_bytes, rows, act, out))
    PASS(); /* warm-up: caches, page faults */
    const double bytes = (double)row_bytes * (double)rows;
    const double start = now_s();
    double best = 0;
    do {
        int passes = 0;
        const double t0 = now_s();
        double t;
        do {
            PASS();
            passes++;
            t = now_s() - t0;
        } while (t < ROUND_S);
        if (bytes * passes / t > best) best = bytes * passes / t;
    } while (now_s() - start < MEASURE_S);
    return best / 1e9;
#undef PASS
}

/* Memory read bandwidth: each worker sums its share of a large array. */
typedef struct bw_job {
    const uint64_t *p;
    size_t n;
    uint64_t sum[2];
} bw_job;

static void bw_worker(void *arg, int ith, int nth) {
    bw_job *j = arg;
    long lo, hi;
    tp_range((long)j->n, ith, nth, &lo, &hi);
    uint64_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
    long i = lo;
    for (; i + 4 <= hi; i += 4) {
        s0 += j->p[i];
        s1 += j->p[i + 1];
        s2 += j->p[i + 2];
        s3 += j->p[i + 3];
    }
    for (; i < hi; i++)
        s0 += j->p[i];
    j->sum[ith & 1] += s0 + s1 + s2 + s3;
}

/* The fastest of mm_run's passes over nr activation rows in MEASURE_S seconds, after one
 * warm-up pass. */
static double mm_best_s(mm_ctx *mc, const mm_weight *mw, const float *x, int nr, float *y,
                        int64_t ldy) {
    mm_run(mc, mw, x, nr, y, ldy);
    double best = 1e30;
    const double start = now_s();
    do {
        const double t0 = now_s();
        mm_run(mc, mw, x, nr, y, ldy);
        const double dt = now_s() - t0;
        if (dt < best) best = dt;
    } while (now_s() - start < MEASURE_S);
    return best;
}

/* The engine's matmul at the shape of llama.cpp's `test-backend-ops perf -o MUL_MAT` cases (a
 * 4096 x 14336 weight matrix, n = 1, 4, 8, 512 activation rows), on half the processors of
 * this machine as that tool runs (at least one), so bench/gemm.sh can print the two side by
 * side. */
static void llama_shape_table(qr_rng *rp) {
    qr_rng r = *rp;
    volatile float sink = 0;
    enum { LM = 4096, LK = 14336, LN = 512 };
    const uint32_t ltypes[] = {QT_Q4_0, QT_Q5_0, QT_Q8_0, QT_Q2_K, QT_Q4_K, QT_Q6_K};
    const int nrows[] = {1, 4, 8, LN};
    const int nt = sysconf(_SC_NPROCESSORS_ONLN) > 1 ? (int)sysconf(_SC_NPROCESSORS_ONLN) / 2 : 1;
    printf("\nmatmul (mm_run) at llama.cpp's MUL_MAT perf shape: m=%d, k=%d, %d threads, best "
           "ISA: GFLOP/s\n",
           LM, LK, nt);
    printf("%-8s %9s %9s %9s %9s\n", "type", "n=1", "n=4", "n=8", "n=512");
    float *lx = malloc((size_t)LN * LK * sizeof *lx), *ly = malloc((size_t)LN * LM * sizeof *ly);
    tp_pool *pool = tp_new(nt);
    mm_ctx mc;
    const int ok = lx && ly && pool && mm_ctx_init(&mc, pool, -1, LN, LK) == 0;
    for (int k = 0; ok && k < LN; k++)
        qr_fill_acts(&r, lx + (size_t)k * LK, LK);
    for (size_t ti = 0; ok && ti < PT_ARRAY_LEN(ltypes); ti++) {
        const uint32_t type = ltypes[ti];
        const qt_traits *t = qt_get(type);
        uint64_t rb64;
        if (qt_row_bytes(type, LK, &rb64)) continue;
        uint8_t *lw = malloc((size_t)(rb64 * LM));
        if (!lw) break;
        qr_fill_weights(&r, type, lw, (int64_t)LM * LK);
        const mm_weight mw = {type, LK, LM, rb64, lw};
        printf("%-8s", t->name);
        for (size_t ri = 0; ri < PT_ARRAY_LEN(nrows); ri++) {
            const int nr = nrows[ri];
            const double best = mm_best_s(&mc, &mw, lx, nr, ly, LM);
            sink += ly[0];
            printf(" %9.2f", 2.0 * nr * (double)LK * (double)LM / best / 1e9);
            fflush(stdout);
        }
        printf("\n");
        free(lw);
    }
    if (ok) mm_ctx_free(&mc);
    tp_free(pool);
    free(lx);
    free(ly);
    *rp = r;
}

int main(int argc, char **argv) {
    const char *only = argc > 1 ? argv[1] : NULL; /* optional: bench one type by name */
    if (only && strcmp(only, "gemm") == 0) {
        qr_rng r = {20240601};
        llama_shape_table(&r);
        return 0;
    }
    const int top = qt_isa_detect();
    const size_t sizes[2] = {(size_t)1 << 20, (size_t)64 << 20};
    printf("petrel kernel bench: single thread, %d-weight rows, best ISA here: %s\n", NCOLS,
           isa_name(top));
    printf("%-8s %-7s %-7s %9s %9s\n", "type", "weights", "ISA", "GB/s", "x scalar");

    uint8_t *w = malloc(sizes[1] + 64);
    float *x = malloc(NCOLS * sizeof *x);
    uint8_t *act =
        malloc(4 * NCOLS * 4); /* four act rows; the largest is F32, 4 bytes per weight */
    /* one float per row; no type has rows under 512 bytes at NCOLS weights */
    float *out = malloc(4 * (sizes[1] / 512) * sizeof *out);
    if (!w || !x || !act || !out) {
        fprintf(stderr, "bench_kernels: out of memory\n");
        return 1;
    }
    qr_rng r = {20240601};
    qr_fill_acts(&r, x, NCOLS);
    volatile float sink = 0;
    int benched = 0;

    for (uint32_t type = 0; type < QT_COUNT; type++) {
        const qt_traits *t = qt_get(type);
        if (!t || t->act_type < 0 || (only && strcmp(only, t->name) != 0)) continue;
        int has_simd = 0;
        for (int isa = QT_ISA_AVX2; isa <= top; isa++)
            has_simd |= qt_dot_impl(type, isa) != NULL;
        if (!has_simd) continue;
        uint64_t rb64;
        if (qt_row_bytes(type, NCOLS, &rb64)) continue;
        const size_t row_bytes = (size_t)rb64;
        qt_quantize_act_ref((uint32_t)t->act_type, x, act, NCOLS);
        for (int s = 0; s < 2; s++) {
            const int64_t rows =
                (int64_t)(sizes[s] / row_bytes) > 0 ? (int64_t)(sizes[s] / row_bytes) : 1;
            qr_fill_weights(&r, type, w, rows * NCOLS);
            double base = 0;
            for (int isa = QT_ISA_SCALAR; isa <= top; isa++) {
                qt_dot_fn f = qt_dot_impl(type, isa);
                if (!f) continue;
                const pass4 p = {f, NULL, 0};
                const double gbs = measure(&p, w, row_bytes, rows, act, out, 0);
                sink += out[0];
                if (isa == QT_ISA_SCALAR) base = gbs;
                printf("%-8s %-7s %-7s %9.2f %9.2f\n", t->name, s ? "64 MB" : "1 MB", isa_name(isa),
                       gbs, base > 0 ? gbs / base : 0.0);
                fflush(stdout);
            }
        }
        benched++;
    }
    if (!benched) printf("(no SIMD kernels in this build/CPU: nothing to compare)\n");

    printf("\nfour activation rows (a prompt batch), 1 MB of weights: GB/s of weight bytes x 4 "
           "rows\n");
    printf("%-8s %-7s %12s %12s %9s\n", "type", "ISA", "4 x single", "four-row", "speedup");
    for (uint32_t type = 0; type < QT_COUNT; type++) {
        const qt_traits *t = qt_get(type);
        if (!t || t->act_type < 0 || (only && strcmp(only, t->name) != 0)) continue;
        uint64_t rb64, ab64;
        if (qt_row_bytes(type, NCOLS, &rb64) || qt_row_bytes((uint32_t)t->act_type, NCOLS, &ab64))
            continue;
        const int64_t rows = (int64_t)(sizes[0] / rb64) > 0 ? (int64_t)(sizes[0] / rb64) : 1;
        for (int k = 0; k < 4; k++) {
            qr_fill_acts(&r, x, NCOLS);
            qt_quantize_act_ref((uint32_t)t->act_type, x, act + k * ab64, NCOLS);
        }
        qr_fill_weights(&r, type, w, rows * NCOLS);
        for (int isa = QT_ISA_AVX2; isa <= top; isa++) {
            qt_dot4_fn f4 = qt_dot4_impl(type, isa);
            if (!f4) continue;
            const pass4 single = {qt_dot_impl(type, isa), NULL, ab64}, four = {NULL, f4, ab64};
            const double g1 = 4 * measure(&single, w, (size_t)rb64, rows, act, out, 1);
            const double g4 = 4 * measure(&four, w, (size_t)rb64, rows, act, out, 1);
            sink += out[0];
            printf("%-8s %-7s %12.2f %12.2f %9.2f\n", t->name, isa_name(isa), g1, g4, g4 / g1);
            fflush(stdout);
        }
    }

    /* The types whose matmul kernel is the panel order (qt_mm_dot_upto: the
     * engine's one arithmetic per type, used for a decode step too) against
     * their single-row vec_dot order, best ISA each. */
    printf("\nmatmul order of the panel types vs their single-row order, one activation row, "
           "best ISA: GB/s\n");
    printf("%-8s %-7s %12s %12s %9s\n", "type", "weights", "single-row", "panel", "ratio");
    for (uint32_t type = 0; type < QT_COUNT; type++) {
        const qt_traits *t = qt_get(type);
        if (!t || t->act_type < 0 || !qt_has_panel(type) || (only && strcmp(only, t->name) != 0))
            continue;
        uint64_t rb64;
        if (qt_row_bytes(type, NCOLS, &rb64)) continue;
        qr_fill_acts(&r, x, NCOLS);
        qt_quantize_act_ref((uint32_t)t->act_type, x, act, NCOLS);
        for (int s = 0; s < 2; s++) {
            const int64_t rows = (int64_t)(sizes[s] / rb64) > 0 ? (int64_t)(sizes[s] / rb64) : 1;
            qr_fill_weights(&r, type, w, rows * NCOLS);
            const pass4 one = {qt_dot_upto(type, -1), NULL, 0},
                        panel = {qt_mm_dot_upto(type, -1), NULL, 0};
            const double g1 = measure(&one, w, (size_t)rb64, rows, act, out, 0);
            const double gp = measure(&panel, w, (size_t)rb64, rows, act, out, 0);
            sink += out[0];
            printf("%-8s %-7s %12.2f %12.2f %9.2f\n", t->name, s ? "64 MB" : "1 MB", g1, gp,
                   gp / g1);
            fflush(stdout);
        }
    }
    /* The engine's matmul at 1, 4, 16, 64 activation rows, 1 and 2 threads,
     * beside the memory read bandwidth (a sum over 256 MB, outside any cache). */
    {
        enum { GEMM_MB = 16, BW_MB = 256 };
        double bw[3] = {0, 0, 0};
        if (!only) {
            const size_t nbw = ((size_t)BW_MB << 20) / sizeof(uint64_t);
            uint64_t *big = malloc(nbw * sizeof *big);
            if (big) {
                for (size_t i = 0; i < nbw; i++)
                    big[i] = i;
                for (int nt = 1; nt <= 2; nt++) {
                    tp_pool *pool = tp_new(nt);
                    if (!pool) break;
                    bw_job bj = {big, nbw, {0, 0}};
                    tp_run(pool, bw_worker, &bj);
                    for (int k = 0; k < 5; k++) {
                        const double t0 = now_s();
                        tp_run(pool, bw_worker, &bj);
                        const double g = (double)nbw * sizeof *big / (now_s() - t0) / 1e9;
                        if (g > bw[nt]) bw[nt] = g;
                    }
                    sink += (float)(bj.sum[0] + bj.sum[1]);
                    tp_free(pool);
                }
                free(big);
            }
            printf("\nmemory read bandwidth (sum of %d MB, best of 5): %.2f GB/s 1 thread, "
                   "%.2f GB/s 2 threads\n",
                   BW_MB, bw[1], bw[2]);
        }
        const uint32_t gtypes[] = {QT_Q8_0, QT_Q4_K, QT_Q6_K, QT_Q2_K};
        printf("\nmatmul (mm_run), %d MB of weights, %d-weight rows, best ISA: GB/s of weights "
               "| GFLOP/s\n",
               GEMM_MB, NCOLS);
        printf("%-8s %-8s %17s %17s %17s %17s\n", "type", "threads", "1 row", "4 rows", "16 rows",
               "64 rows");
        enum { GMAX = 64 };
        float *gx = malloc((size_t)GMAX * NCOLS * sizeof *gx);
        for (size_t gi = 0; gx && gi < PT_ARRAY_LEN(gtypes); gi++) {
            const uint32_t type = gtypes[gi];
            const qt_traits *t = qt_get(type);
            if (only && strcmp(only, t->name) != 0) continue;
            uint64_t rb64;
            if (qt_row_bytes(type, NCOLS, &rb64)) continue;
            const int64_t n_out = (int64_t)((((uint64_t)GEMM_MB << 20) / rb64) & ~(uint64_t)63);
            uint8_t *gw = malloc((size_t)(rb64 * (uint64_t)n_out));
            float *gy = malloc((size_t)GMAX * (size_t)n_out * sizeof *gy);
            if (!gw || !gy) {
                free(gw);
                free(gy);
                break;
            }
            qr_fill_weights(&r, type, gw, n_out * NCOLS);
            for (int k = 0; k < GMAX; k++)
                qr_fill_acts(&r, gx + (size_t)k * NCOLS, NCOLS);
            const mm_weight mw = {type, NCOLS, n_out, rb64, gw};
            for (int nt = 1; nt <= 2; nt++) {
                tp_pool *pool = tp_new(nt);
                mm_ctx mc;
                if (!pool || mm_ctx_init(&mc, pool, -1, GMAX, NCOLS)) {
                    tp_free(pool);
                    break;
                }
                printf("%-8s %-8d", t->name, nt);
                const int nrows[] = {1, 4, 16, 64};
                for (size_t ri = 0; ri < PT_ARRAY_LEN(nrows); ri++) {
                    const int nr = nrows[ri];
                    const double best = mm_best_s(&mc, &mw, gx, nr, gy, n_out);
                    sink += gy[0];
                    const double gbs = (double)rb64 * (double)n_out / best / 1e9;
                    const double gfl = 2.0 * nr * (double)NCOLS * (double)n_out / best / 1e9;
                    printf(" %7.2f | %7.2f", gbs, gfl);
                    fflush(stdout);
                }
                printf("\n");
                mm_ctx_free(&mc);
                tp_free(pool);
            }
            free(gw);
            free(gy);
        }
        free(gx);
    }

    if (!only || strcmp(only, "swiglu") == 0) {
        /* the FFN activation (llama.cpp's order: ggml_v_silu in chunks of 16) */
        enum { NS = 2048 };
        static float g[NS], g0[NS], u[NS];
        for (int i = 0; i < NS; i++) {
            g0[i] = (float)((i * 7919 % 2000) - 1000) / 200.0f; /* -5 .. 5 */
            u[i] = 1.0f + (float)(i % 13) / 13.0f;
        }
        double best = 1e30;
        for (int k = 0; k < 20; k++) {
            const double t0 = now_s();
            for (int rep = 0; rep < 200; rep++) {
                memcpy(g, g0, sizeof g);
                nn_swiglu_row(g, u, NS);
                sink += g[rep % NS];
            }
            const double ns = (now_s() - t0) / (200.0 * NS) * 1e9;
            if (ns < best) best = ns;
        }
        printf("\nSwiGLU (nn_swiglu_row, rows of %d): %.2f ns per element (copy included)\n", NS,
               best);
    }
    free(w);
    free(x);
    free(act);
    free(out);
    (void)sink; /* the volatile writes keep the passes from being optimised away */
    return 0;
}
