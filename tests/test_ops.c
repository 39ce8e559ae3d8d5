/* test_ops.c — the attention helpers of nn/ops.c that reproduce ggml's float
 * lane order (nn_dot_f32, nn_wsum_*, nn_softmax), the attention of nn/attn.c
 * against one head at a time, the GELU table, and the scratch they run in (pt_scratch_alloc).
 *
 * Whole-model agreement with llama.cpp is tested against the fixtures
 * (test_model*.c); these cases pin the order itself with inputs whose result
 * depends on it, so that a "harmless" reassociation fails here, with a
 * readable message, rather than as a 0.1 logit drift on one fixture row.
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "kernels/quant.h"
#include "nn/attn.h"
#include "nn/ffn.h"
#include "nn/kv.h"
#include "nn/mla.h"
#include "nn/ops.h"
#include "test.h"

/* ggml_vec_dot_f32 folds lane 32 into lane 0 before lane 16, and adds the
 * tail (elements from 64 on) after the fold, one by one. */
static void ops_dot_f32_order(void) {
    float x[66] = {0}, y[66] = {0};
    for (int i = 0; i < 66; i++)
        x[i] = 1.0f;
    y[0] = 1e8f;  /* lane 0 */
    y[32] = 1.0f; /* lane 32: lost in 1e8 when folded first */
    y[16] = -1e8f;
    /* sequential: 1e8 - 1e8 + 1 = 1; ggml: (1e8 + 1) - 1e8 = 0 */
    CHECKF(nn_dot_f32(x, y, 64) == 0.0f, "got %g", nn_dot_f32(x, y, 64));
    /* tail after the fold: 0 + 3 + 0.5 */
    y[64] = 3.0f;
    y[65] = 0.5f;
    CHECKF(nn_dot_f32(x, y, 66) == 3.5f, "got %g", nn_dot_f32(x, y, 66));
    /* below 64 elements everything is tail, summed in order */
    float a[3] = {1e8f, 1.0f, -1e8f}, b[3] = {1.0f, 1.0f, 1.0f};
    CHECK(nn_dot_f32(a, b, 3) == 0.0f);
}

/* nn_wsum_add_keys gives nn_wsum_add's bits key by key: random rows and
 * probabilities (some zero, skipped), blocks of 1 to NN_WSUM_KEYS keys starting
 * at positions that are not multiples of the lane count, a row length with a
 * tail (d % 8 != 0), memcmp of the folded outputs. And it is not vacuous: the
 * same keys summed in reverse order differ somewhere. */
static void ops_wsum_add_keys(void) {
    enum { D = 21, NKEYS = 200 };
    float *rows = malloc(sizeof(float) * D * NKEYS), p[NKEYS];
    unsigned char on[NKEYS];
    float *acc1 = malloc(sizeof(float) * NN_WSUM_LANES * D),
          *acc2 = malloc(sizeof(float) * NN_WSUM_LANES * D);
    uint32_t st = 12345;
    for (int i = 0; i < D * NKEYS; i++) {
        st = st * 1664525u + 1013904223u;
        rows[i] = (float)(int32_t)st / 2147483648.0f * 3.0f;
    }
    for (int k = 0; k < NKEYS; k++) {
        st = st * 1664525u + 1013904223u;
        p[k] = (st >> 8) % 5 == 0 ? 0.0f : (float)(st >> 8) / 16777216.0f;
        on[k] = p[k] != 0.0f;
    }
    const int blocks[] = {1, 7, 16, 33, NN_WSUM_KEYS};
    int reorder_seen = 0;
    for (size_t b = 0; b < PT_ARRAY_LEN(blocks); b++) {
        const int nb = blocks[b], key0 = 5;
        uint64_t u1, u2;
        nn_wsum_begin(acc1, NN_WSUM_LANES, D, &u1);
        nn_wsum_begin(acc2, NN_WSUM_LANES, D, &u2);
        for (int j = key0; j < NKEYS; j++)
            if (on[j]) nn_wsum_add(acc1, NN_WSUM_LANES, D, j, p[j], rows + (size_t)j * D, &u1);
        for (int j0 = key0; j0 < NKEYS; j0 += nb) {
            const int nk = NKEYS - j0 < nb ? NKEYS - j0 : nb;
            nn_wsum_add_keys(acc2, NN_WSUM_LANES, D, j0, nk, p + j0, on + j0, rows + (size_t)j0 * D,
                             D, &u2);
        }
        float o1[D], o2[D];
        nn_wsum_end(acc1, NN_WSUM_LANES, D, o1, u1);
        nn_wsum_end(acc2, NN_WSUM_LANES, D, o2, u2);
        CHECK(u1 == u2);
        CHECKF(memcmp(o1, o2, sizeof o1) == 0, "blocks of %d keys: %.9g vs %.9g", nb, (double)o1[0],
               (double)o2[0]);
        /* reversed key order, one key at a time */
        nn_wsum_begin(acc2, NN_WSUM_LANES, D, &u2);
        for (int j = NKEYS - 1; j >= key0; j--)
            if (on[j]) nn_wsum_add(acc2, NN_WSUM_LANES, D, j, p[j], rows + (size_t)j * D, &u2);
        nn_wsum_end(acc2, NN_WSUM_LANES, D, o2, u2);
        reorder_seen += memcmp(o1, o2, sizeof o1) != 0;
    }
    CHECK(reorder_seen > 0);
    /* g heads over the same rows: heads 0, 2, 5 count the same keys (passes over several heads
     * at once), the others each drop some; then (all) every head counts every key, with
     * weights p + 0.5 (the blocks that take the all-ones masks); every head must get what it
     * gets alone */
    for (int ga = 2; ga <= 2 * NN_WSUM_HEADS + 1; ga++) {
        const int g = ga / 2, all = ga % 2;
#define KEPT(j, h) (all || (on[j] && ((h) == 0 || (h) == 2 || (h) == 5 || (j) % ((h) + 2) != 0)))
#define WEIGHT(j, h) ((all ? p[j] + 0.5f : p[j]) * (1.0f + 0.125f * (float)(h)))
        float ph[NN_WSUM_HEADS][NN_WSUM_KEYS], *accs[NN_WSUM_HEADS], outs[NN_WSUM_HEADS][D];
        unsigned char onh[NN_WSUM_HEADS][NN_WSUM_KEYS];
        uint64_t uh[NN_WSUM_HEADS], ua;
        float *hacc = malloc(sizeof(float) * NN_WSUM_HEADS * NN_WSUM_LANES * D);
        for (int h = 0; h < g; h++) {
            accs[h] = hacc + (size_t)h * NN_WSUM_LANES * D;
            nn_wsum_begin(accs[h], NN_WSUM_LANES, D, &uh[h]);
        }
        for (int j0 = 0; j0 < NKEYS; j0 += NN_WSUM_KEYS) {
            const int nk = NKEYS - j0 < NN_WSUM_KEYS ? NKEYS - j0 : NN_WSUM_KEYS;
            for (int h = 0; h < g; h++)
                for (int k = 0; k < nk; k++) {
                    onh[h][k] = KEPT(j0 + k, h);
                    ph[h][k] = onh[h][k] ? WEIGHT(j0 + k, h) : 0.0f;
                }
            nn_wsum_add_keys_heads(g, accs, NN_WSUM_LANES, D, j0, nk, &ph[0][0], &onh[0][0],
                                   rows + (size_t)j0 * D, D, uh);
        }
        for (int h = 0; h < g; h++) {
            nn_wsum_end(accs[h], NN_WSUM_LANES, D, outs[h], uh[h]);
            nn_wsum_begin(acc1, NN_WSUM_LANES, D, &ua);
            for (int j = 0; j < NKEYS; j++)
                if (KEPT(j, h))
                    nn_wsum_add(acc1, NN_WSUM_LANES, D, j, WEIGHT(j, h), rows + (size_t)j * D, &ua);
            float o1[D];
            nn_wsum_end(acc1, NN_WSUM_LANES, D, o1, ua);
            CHECKF(memcmp(o1, outs[h], sizeof o1) == 0, "%d heads%s, head %d: %.9g vs %.9g", g,
                   all ? " (all keys)" : "", h, (double)o1[0], (double)outs[h][0]);
        }
        free(hacc);
    }
#undef KEPT
#undef WEIGHT
    free(rows);
    free(acc1);
    free(acc2);
}

/* Keys 0 and 16 share lane 0 with 16 lanes (one fused multiply-add on top of
 * the other) and sit in different lanes with 64 (two roundings, then a fold).
 * With at most 16 keys both orders give the same bits. */
static void ops_wsum_lanes(void) {
    const int d = 1;
    uint64_t used;
    float acc[64], out16, out64;
    const float third = 1.0f / 3.0f, minus1 = -1.0f, three = 3.0f;
    /* fused: fma(1/3, 3, -1) = 2^-25 exactly; unfused: round(1/3 * 3) = 1, - 1 = 0 */
    nn_wsum_begin(acc, NN_WSUM_LANES, d, &used);
    nn_wsum_add(acc, NN_WSUM_LANES, d, 0, 1.0f, &minus1, &used);
    nn_wsum_add(acc, NN_WSUM_LANES, d, 16, third, &three, &used);
    nn_wsum_end(acc, NN_WSUM_LANES, d, &out16, used);
    nn_wsum_begin(acc, 64, d, &used);
    nn_wsum_add(acc, 64, d, 0, 1.0f, &minus1, &used);
    nn_wsum_add(acc, 64, d, 16, third, &three, &used);
    nn_wsum_end(acc, 64, d, &out64, used);
    CHECKF(out16 == ldexpf(1.0f, -25) && out64 == 0.0f, "16 lanes %g, 64 lanes %g", out16, out64);
    CHECK(NN_WSUM_LANES == 16); /* the attention's one order (tinyBLAS's) */

    /* 16 keys, each in its own lane in both orders: identical */
    enum { D = 40 };
    float rows[16][D], p[16], acc2[64 * D], o16[D], o64[D];
    uint32_t s = 7;
    for (int k = 0; k < 16; k++) {
        s = s * 1664525u + 1013904223u;
        p[k] = (float)(s >> 8) / 16777216.0f;
        for (int i = 0; i < D; i++) {
            s = s * 1664525u + 1013904223u;
            rows[k][i] = (float)((int32_t)s >> 8) / 8388608.0f;
        }
    }
    const int lanes[2] = {NN_WSUM_LANES, 64};
    float *outs[2] = {o16, o64};
    for (int v = 0; v < 2; v++) {
        nn_wsum_begin(acc2, lanes[v], D, &used);
        for (int k = 0; k < 16; k++)
            nn_wsum_add(acc2, lanes[v], D, k, p[k], rows[k], &used);
        nn_wsum_end(acc2, lanes[v], D, outs[v], used);
    }
    CHECK(memcmp(o16, o64, sizeof o16) == 0);
}

/* Softmax: masked entries get exactly 0, a row padded with -inf to a multiple
 * of 16 keeps its distribution, and ggml's exp stays within a few ulp of
 * expf (its chunks are whole 16s, the tail goes through expf itself). */
static void ops_softmax(void) {
    float x[32], y[32];
    for (int i = 0; i < 20; i++)
        x[i] = y[i] = 0.37f * (float)(i % 7) - 1.1f;
    for (int i = 20; i < 32; i++)
        x[i] = -INFINITY;
    nn_softmax(x, 32, 0.8f);
    double sum = 0;
    for (int i = 0; i < 32; i++)
        sum += x[i];
    CHECKF(fabs(sum - 1.0) < 1e-6, "sum %g", sum);
    for (int i = 20; i < 32; i++)
        CHECK(x[i] == 0.0f);
    /* y: 16 through ggml's exp, 4 through expf; same distribution to float rounding */
    nn_softmax(y, 20, 0.8f);
    for (int i = 0; i < 20; i++)
        CHECKF(fabsf(x[i] - y[i]) <= 4e-7f * y[i] + 1e-12f, "%d: %g vs %g", i, x[i], y[i]);
}

/* nn_softmax (vector exponentials where the CPU has them) against nn_softmax_scalar, memcmp:
 * scores spread over [-200, 20] after scaling so chunks cross the saturation at |n| > 192 and
 * the subnormal range, masked keys, lengths with and without a tail. */
static void ops_softmax_vector_matches(void) {
    enum { N = 4099 };
    float *a = malloc(sizeof(float) * N), *b = malloc(sizeof(float) * N);
    CHECK(a && b);
    if (!a || !b) goto out;
    int bad = 0;
    uint32_t r = 99;
    for (int round = 0; round < 40; round++) {
        const int n = round < 20 ? N - round * 13 : 16 * (round - 19);
        for (int i = 0; i < n; i++) {
            r = r * 1664525u + 1013904223u;
            a[i] = (r >> 29) == 0 ? -INFINITY : (float)(r >> 8) / 16777216.0f * 220.0f - 200.0f;
        }
        a[(round * 7) % n] = 20.0f; /* the max: everything else at or below it */
        memcpy(b, a, sizeof(float) * n);
        nn_softmax(a, n, 1.0f);
        nn_softmax_scalar(b, n, 1.0f);
        bad += memcmp(a, b, sizeof(float) * n) != 0;
    }
    CHECKF(bad == 0, "%d of 40 rows differ", bad);
out:
    free(a), free(b);
}

/* nn_relu_wsum8 (vectors where the CPU has them) against its definition written here,
 * memcmp: dots of both signs, zeros of both signs, NaNs (relu gives 0), head counts 1 to
 * 40, sums that start from nonzero values. */
static void ops_relu_wsum8_matches(void) {
    enum { NH = 40 };
    float d[NH * 8], w[NH];
    uint32_t r = 7;
    int bad = 0;
    for (int round = 0; round < 200; round++) {
        for (int i = 0; i < NH * 8; i++) {
            r = r * 1664525u + 1013904223u;
            const uint32_t c = r >> 28;
            d[i] = c == 0   ? -0.0f
                   : c == 1 ? 0.0f
                   : c == 2 ? NAN
                            : ((float)(r >> 8) / 16777216.0f - 0.4f) * 3.0f;
        }
        for (int h = 0; h < NH; h++) {
            r = r * 1664525u + 1013904223u;
            w[h] = ((float)(r >> 8) / 16777216.0f - 0.5f) * 0.7f;
        }
        const int nh = 1 + round % NH;
        float got[8], want[8];
        for (int k = 0; k < 8; k++)
            got[k] = want[k] = round % 3 ? 0.0f : 0.25f * (float)(k - 3);
        nn_relu_wsum8(d, w, nh, got);
        for (int h = 0; h < nh; h++)
            for (int k = 0; k < 8; k++) {
                const float v = d[8 * h + k];
                want[k] += (v > 0 ? v : 0) * w[h];
            }
        bad += memcmp(got, want, sizeof got) != 0;
    }
    CHECKF(bad == 0, "%d of 200 differ", bad);
}

static int cmp_int(const void *a, const void *b) {
    const int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

/* nn_idx_top_k keeps the set that the heap (nn_idx_top_k_heap) keeps: scores
 * without ties (where it selects by radix: its keys come in key order), with
 * a few distinct values (ties on the cut), in a narrow range (the radix bytes
 * below the top), and with zeros of both signs, infinities and NaNs. */
static void ops_idx_top_k_set(void) {
    enum { N = 3000 };
    static float x[N];
    static int got[N], want[N];
    static uint32_t tmp[N];
    uint32_t r = 11;
    int bad = 0, ordered = 0, plain = 0;
    for (int round = 0; round < 400; round++) {
        const int mode = round % 4;
        r = r * 1664525u + 1013904223u;
        const int n = 1 + (int)(r >> 8) % N;
        r = r * 1664525u + 1013904223u;
        const int k = 1 + (int)(r >> 8) % n;
        for (int i = 0; i < n; i++) {
            r = r * 1664525u + 1013904223u;
            const float u = (float)(r >> 8) / 16777216.0f;
            const uint32_t c = r & 15;
            x[i] = mode == 0                  ? (u - 0.3f) * 100.0f
                   : mode == 1                ? (float)(int)(u * 6.0f) - 2.0f
                   : mode == 2                ? 1.0f + u * 0.001f
                   : c == 0                   ? -0.0f
                   : c == 1                   ? 0.0f
                   : c == 2                   ? INFINITY
                   : c == 3                   ? -INFINITY
                   : c == 4 && round % 8 == 3 ? NAN
                                              : u - 0.5f;
        }
        nn_idx_top_k(x, n, k, got, tmp);
        nn_idx_top_k_heap(x, n, k, want);
        if (mode == 0 && k >= 3 && k < n) {
            plain++;
            int inc = 1;
            for (int i = 1; i < k; i++)
                inc &= got[i] > got[i - 1];
            ordered += inc;
        }
        qsort(got, (size_t)k, sizeof *got, cmp_int);
        qsort(want, (size_t)k, sizeof *want, cmp_int);
        bad += memcmp(got, want, sizeof(int) * (size_t)k) != 0;
    }
    CHECKF(bad == 0, "%d of 400 sets differ", bad);
    CHECKF(ordered == plain && plain > 50, "radix selection ran on %d of %d tie-free rounds",
           ordered, plain);
}

/* nn_weights_on (vectors where the CPU has them) against its definition, memcmp: zeros of
 * both signs, NaNs, subnormals and ordinary weights, lengths with and without a tail. */
static void ops_weights_on_matches(void) {
    enum { N = 300 };
    float p[N], pk[N], want[N];
    unsigned char on[N], won[N];
    uint32_t r = 3;
    int bad = 0;
    for (int round = 0; round < 50; round++) {
        for (int i = 0; i < N; i++) {
            r = r * 1664525u + 1013904223u;
            const uint32_t c = r >> 29;
            p[i] = c == 0   ? -0.0f
                   : c == 1 ? 0.0f
                   : c == 2 ? NAN
                   : c == 3 ? 1e-41f
                            : (float)(r >> 8) / 16777216.0f;
        }
        const int n = N - round * 5;
        nn_weights_on(p, n, pk, on);
        for (int i = 0; i < n; i++) {
            want[i] = p[i] + 0.0f;
            won[i] = want[i] != 0.0f;
        }
        bad += memcmp(pk, want, sizeof(float) * n) != 0 || memcmp(on, won, (size_t)n) != 0;
    }
    CHECKF(bad == 0, "%d of 50 differ", bad);
}

/* SwiGLU: a whole chunk of 16 gives ggml_vec_swiglu_f32's bits (AVX-512 build:
 * ggml_v_silu with ggml_v_expf), a tail takes expf. The 16 (x, u, ggml's
 * silu(x) * u) were produced by ggml's own swiglu op; at each, x / (1 +
 * expf(-x)) * u is another float, so the three repeated at the tail must give
 * that instead. (nn_swiglu_row agrees with ggml on all 2^32 x at u = 1 and on
 * random u: measured with a client of libggml-cpu, bench/RESULTS.md.) */
static void ops_swiglu_ggml(void) {
    static const float want[16][3] = {
        {-0x1.d16a48p+1, 0x1.6p+0, -0x1.06ef04p-3}, {-0x1.8dc81p+0, 0x1.cp+0, -0x1.e5fb8cp-2},
        {-0x1.6c6c8p+1, 0x1p+0, -0x1.3fb8c4p-3},    {-0x1.45734p+0, 0x1.6p+0, -0x1.8811f6p-2},
        {0x1.e4826p-1, 0x1.8p+0, 0x1.05c528p+0},    {-0x1.17b5f4p+2, 0x1p+0, -0x1.bf14c2p-5},
        {-0x1.bf4034p+2, 0x1.2p+0, -0x1.daedp-8},   {-0x1.5f739p+2, 0x1.6p+0, -0x1.fbd64ep-6},
        {-0x1.198848p+1, 0x1p+0, -0x1.c18aaep-3},   {-0x1.239dc8p+2, 0x1.4p+0, -0x1.e4c3c4p-5},
        {-0x1.b917e8p+2, 0x1.ap+0, -0x1.746868p-7}, {-0x1.b758c8p+1, 0x1.8p+0, -0x1.4a04a2p-3},
        {-0x1.f575p+0, 0x1p+0, -0x1.efd24cp-3},     {-0x1.afe04cp+2, 0x1.6p+0, -0x1.64444cp-7},
        {-0x1.ea836p+0, 0x1.8p+0, -0x1.79997p-2},   {-0x1.a18d4p+2, 0x1.ap+0, -0x1.fd0a74p-7},
    };
    float g[19], u[19];
    for (int i = 0; i < 19; i++) {
        g[i] = want[i % 16][0];
        u[i] = want[i % 16][1];
    }
    nn_swiglu_row(g, u, 19);
    for (int i = 0; i < 16; i++)
        CHECKF(memcmp(&g[i], &want[i][2], 4) == 0, "%d: silu(%a) * %a = %a, ggml %a", i,
               (double)want[i][0], (double)want[i][1], (double)g[i], (double)want[i][2]);
    for (int i = 16; i < 19; i++) {
        const float x = want[i - 16][0], t = x / (1.0f + expf(-x)) * want[i - 16][1];
        CHECKF(memcmp(&g[i], &t, 4) == 0 && t != want[i - 16][2], "tail %d: %a, expf gives %a", i,
               (double)g[i], (double)t);
    }
}

/* nn_gelu_f16 (a table filled once) gives the bits of the direct evaluation for every fp16
 * value, the clamps' neighbourhoods and random floats; a table off by one entry fails. */
static void ops_gelu_table_matches(void) {
    int bad = 0;
    for (uint32_t u = 0; u < 1u << 16; u++) {
        const float x = qt_f16_to_f32((pt_f16)u);
        if (x != x) continue; /* NaN in, NaN out; the payload is not the point */
        const float a = nn_gelu_f16(x), b = nn_gelu_f16_ref(x);
        if (memcmp(&a, &b, sizeof a) && bad++ < 5)
            t_fail_at(__FILE__, __LINE__, "gelu(%a): table %a, direct %a", x, a, b);
    }
    uint64_t r = 12345;
    for (int i = 0; i < 200000; i++) {
        r = r * 6364136223846793005ull + 1442695040888963407ull;
        const float x = ((float)(r >> 40) / (float)(1 << 24) - 0.5f) * (i & 1 ? 24.0f : 0.02f);
        const float c = i % 4 == 0 ? -10.0f + x * 1e-3f : i % 4 == 2 ? 10.0f + x * 1e-3f : x;
        const float a = nn_gelu_f16(c), b = nn_gelu_f16_ref(c);
        if (memcmp(&a, &b, sizeof a) && bad++ < 10)
            t_fail_at(__FILE__, __LINE__, "gelu(%a): table %a, direct %a", c, a, b);
    }
    CHECKF(bad == 0, "%d inputs differ", bad);
    /* the check can fail: the neighbouring entry's value differs for most inputs */
    const float x = 0.75f;
    const float nb = qt_f16_to_f32((pt_f16)(qt_f32_to_f16(x) + 1));
    CHECK(nn_gelu_f16_ref(nb) != nn_gelu_f16(x));
}

/* One query row t, head h, alone: the plain composition of the helpers (scores key by key,
 * softmax, nn_wsum_add key by key), the reference nn_attn_run's grouped blocks must equal. */
/* kv_load's fp16 rows (the value rows of every attention) at each length's
 * vector and scalar parts: every half value converts to the float
 * qt_f16_to_f32 gives, whatever the row's offset and length (NaNs to a NaN:
 * the hardware conversion quiets a signalling one). */
static int same_f16_load(float got, uint16_t h) {
    const float want = qt_f16_to_f32(h);
    return want != want ? got != got : memcmp(&got, &want, 4) == 0;
}
static void ops_kv_load_f16_exact(void) {
    const int64_t N = 65536 + 40;
    uint16_t *h = malloc((size_t)N * sizeof *h);
    float *got = malloc((size_t)N * sizeof *got);
    CHECK(h && got);
    if (!h || !got) goto out;
    for (int64_t i = 0; i < N; i++)
        h[i] = (uint16_t)(i * 40503u); /* odd multiplier: every value once in 65536 */
    int bad = 0;
    for (int off = 0; off < 3; off++)
        for (int64_t n = 1; n <= 64; n += off + 1) {
            kv_load(QT_F16, h + off + 7 * n, n, got);
            for (int64_t i = 0; i < n; i++)
                bad += !same_f16_load(got[i], h[off + 7 * n + i]);
        }
    kv_load(QT_F16, h + 1, N - 1, got);
    for (int64_t i = 0; i < N - 1; i++)
        bad += !same_f16_load(got[i], h[i + 1]);
    CHECKF(bad == 0, "%d converted values differ", bad);
out:
    free(h), free(got);
}

/* nn_rms_norm_rows against nn_rms_norm row by row, memcmp: 1 to 9 rows (the groups of four and
 * what is left), with and without a weight, in place and not; values over many binades so the
 * double sums round. */
static void ops_rms_norm_rows_match(void) {
    enum { N = 515, R = 9 };
    float *x = malloc(sizeof(float) * N * R), *w = malloc(sizeof(float) * N),
          *y = malloc(sizeof(float) * N * R), *want = malloc(sizeof(float) * N * R);
    CHECK(x && w && y && want);
    if (!x || !w || !y || !want) goto out;
    uint32_t r = 777;
    for (int i = 0; i < N * R; i++) {
        r = r * 1664525u + 1013904223u;
        x[i] = ldexpf((float)(r >> 8) / 16777216.0f - 0.5f, (int)(r % 40) - 20);
    }
    for (int i = 0; i < N; i++)
        w[i] = 0.5f + (float)i / N;
    int bad = 0;
    for (int rows = 1; rows <= R; rows++)
        for (int wi = 0; wi < 2; wi++)
            for (int inplace = 0; inplace < 2; inplace++) {
                const float *wt = wi ? w : NULL;
                for (int k = 0; k < rows; k++)
                    nn_rms_norm(x + k * N, wt, 1e-6f, N, want + k * N);
                if (inplace) {
                    memcpy(y, x, sizeof(float) * N * rows);
                    nn_rms_norm_rows(y, wt, 1e-6f, N, rows, y);
                } else {
                    nn_rms_norm_rows(x, wt, 1e-6f, N, rows, y);
                }
                bad += memcmp(y, want, sizeof(float) * N * rows) != 0;
            }
    CHECKF(bad == 0, "%d row batches differ", bad);
out:
    free(x), free(w), free(y), free(want);
}

/* nn_geglu_row (vectorised where the CPU allows) against nn_gelu_f16(g) * u one
 * at a time: every fp16 input, floats between them and at the clamps, odd lengths,
 * in place; NaNs compare as NaNs. */
static void ops_geglu_row_matches(void) {
    const int64_t N = 65536 + 4096 + 13;
    float *g = malloc((size_t)N * sizeof *g), *u = malloc((size_t)N * sizeof *u),
          *act = malloc((size_t)N * sizeof *act);
    CHECK(g && u && act);
    if (!g || !u || !act) goto out;
    uint32_t r = 12345;
    for (int64_t i = 0; i < N; i++) {
        r = r * 1664525u + 1013904223u;
        if (i < 65536)
            g[i] = qt_f16_to_f32((pt_f16)i);
        else if (i % 7 == 0)
            g[i] = (i & 8 ? -10.0f : 10.0f) * (1.0f + (float)((int)(r >> 20) - 2048) * 1e-7f);
        else
            g[i] = ((float)(r >> 8) / 16777216.0f - 0.5f) * 30.0f; /* not fp16 values */
        u[i] = ((float)((r >> 4) & 0xffff) / 65536.0f - 0.5f) * 4.0f;
    }
    int bad = 0;
    for (int64_t n = N - 37; n <= N; n += 37) {
        memcpy(act, g, (size_t)n * sizeof *act);
        nn_geglu_row(act, u, act, n); /* in place, as nn_geglu does */
        for (int64_t i = 0; i < n; i++) {
            const float want = nn_gelu_f16(g[i]) * u[i];
            bad += want != want ? act[i] == act[i] : memcmp(&act[i], &want, 4) != 0;
        }
    }
    CHECKF(bad == 0, "%d GeGLU outputs differ", bad);
out:
    free(g), free(u), free(act);
}

static void attn_ref_one(const nn_attn *a, int t, int h, float *out) {
    const int D = a->head_dim;
    const int64_t pos = a->pos0 + t;
    const int64_t lo = a->window > 0 && pos - a->window + 1 > 0 ? pos - a->window + 1 : 0;
    const int64_t base = lo & ~(int64_t)15;
    const int n_pad = (int)(((pos + 1 - base) + 15) & ~(int64_t)15);
    const int kh = h / (a->n_head / a->n_kv);
    const float *q = a->q + ((size_t)t * a->n_head + h) * D;
    float *sc = malloc(sizeof(float) * (size_t)n_pad), *vb = malloc(sizeof(float) * (size_t)D);
    float *acc = malloc(sizeof(float) * (size_t)NN_WSUM_LANES * (size_t)D);
    uint8_t qb[4096];
    const size_t koff = kv_bytes(a->k_type, (int64_t)kh * D),
                 voff = kv_bytes(a->v_type, (int64_t)kh * D);
#define KR(p) (a->k + (size_t)((p) % a->cap) * a->k_row + koff)
#define VR(p) (a->v + (size_t)((p) % a->cap) * a->v_row + voff)
    for (int j = 0; j < n_pad; j++)
        sc[j] = -INFINITY;
    int64_t p = lo;
    if (a->k_type == QT_F32) {
        for (; p + 1 <= pos; p += 2)
            nn_dot2_f32(q, (const float *)KR(p), (const float *)KR(p + 1), D, sc + (p - base));
        if (p <= pos) sc[p - base] = nn_dot_f32(q, (const float *)KR(p), D);
    } else {
        kv_query(a->k_type, q, D, qb);
        for (; p <= pos; p++)
            sc[p - base] = kv_dot(a->k_type, qb, KR(p), D);
    }
    nn_softmax(sc, n_pad, a->scale);
    uint64_t used;
    nn_wsum_begin(acc, NN_WSUM_LANES, D, &used);
    for (p = lo; p <= pos; p++) {
        if (sc[p - base] == 0.0f) continue;
        if (a->v_type == QT_F32) {
            nn_wsum_add(acc, NN_WSUM_LANES, D, p, sc[p - base], (const float *)VR(p), &used);
        } else {
            kv_load(a->v_type, VR(p), D, vb);
            nn_wsum_add(acc, NN_WSUM_LANES, D, p, kv_weight(a->v_type, sc[p - base]), vb, &used);
        }
    }
#undef KR
#undef VR
    nn_wsum_end(acc, NN_WSUM_LANES, D, out, used);
    free(sc), free(vb), free(acc);
}

/* nn_attn_run (groups of query heads per KV head, keys in blocks, value rows decoded once a
 * block) gives every (row, head) the bits of the head computed alone: group sizes 1, 4 and 8,
 * one row and a batch, linear caches and a ring that wraps inside a block, a sliding window,
 * f32 / f16 / q8_0 keys and values, 1 and 2 threads. */
static void ops_attn_groups_match_heads(void) {
    const int D = 64, H = 8;
    const uint32_t types[][2] = {{QT_F32, QT_F32}, {QT_F16, QT_F16}, {QT_Q8_0, QT_F16}};
    tp_pool *pools[2] = {tp_new(1), tp_new(2)};
    uint64_t r = 7;
    int n_cases = 0, bad = 0;
    for (int ti = 0; ti < 3; ti++)
        for (int n_kv = 1; n_kv <= 8; n_kv *= 2) {
            if (n_kv == 4) continue; /* groups of 8, 2... */
            for (int shape = 0; shape < 4; shape++) {
                const int T = shape & 1 ? 7 : 1, window = shape >= 2 ? 45 : 0;
                const int64_t pos0 = 150;
                const int64_t cap = window ? window + T + 9 : pos0 + T; /* the ring wraps */
                const uint32_t kt = types[ti][0], vt = types[ti][1];
                const int KVD = n_kv * D;
                const size_t krow = kv_bytes(kt, KVD), vrow = kv_bytes(vt, KVD);
                uint8_t *k = calloc((size_t)cap, krow), *v = calloc((size_t)cap, vrow);
                float *x = malloc(sizeof(float) * (size_t)KVD);
                float *q = malloc(sizeof(float) * (size_t)T * H * D);
                float *got = malloc(sizeof(float) * (size_t)T * H * D),
                      *want = malloc(sizeof(float) * (size_t)D);
                for (int64_t p = 0; p < pos0 + T; p++) { /* in order: a ring keeps the newest */
                    for (int i = 0; i < KVD; i++) {
                        r = r * 6364136223846793005ull + 1442695040888963407ull;
                        x[i] = (float)((int)(r >> 41) - (1 << 22)) / (float)(1 << 21);
                    }
                    kv_store(kt, x, KVD, k + (size_t)(p % cap) * krow);
                    for (int i = 0; i < KVD; i++)
                        x[i] = x[(i * 7 + 3) % KVD] * 0.5f - x[i] * 0.25f;
                    kv_store(vt, x, KVD, v + (size_t)(p % cap) * vrow);
                }
                for (int i = 0; i < T * H * D; i++) {
                    r = r * 6364136223846793005ull + 1442695040888963407ull;
                    q[i] = (float)((int)(r >> 41) - (1 << 22)) / (float)(1 << 22);
                }
                for (int pi = 0; pi < 2; pi++) {
                    tp_pool *pool = pools[pi];
                    const int64_t keys = window ? window : pos0 + T;
                    const int64_t stride = nn_attn_stride(keys, D, H / n_kv);
                    float *scr = malloc(sizeof(float) * (size_t)(stride * tp_size(pool)));
                    nn_attn a = {.q = q,
                                 .k = k,
                                 .v = v,
                                 .k_type = kt,
                                 .v_type = vt,
                                 .k_row = krow,
                                 .v_row = vrow,
                                 .out = got,
                                 .T = T,
                                 .pos0 = pos0,
                                 .n_head = H,
                                 .n_kv = n_kv,
                                 .head_dim = D,
                                 .cap = cap,
                                 .window = window,
                                 .scale = 0.125f,
                                 .scores = scr,
                                 .scores_keys = keys,
                                 .scores_stride = stride};
                    /* past the small-job cut (work stays on the caller below it) both ways */
                    nn_attn_run(pool, &a);
                    for (int t = 0; t < T; t++)
                        for (int h = 0; h < H; h++) {
                            attn_ref_one(&a, t, h, want);
                            n_cases++;
                            if (memcmp(want, got + ((size_t)t * H + h) * D, sizeof(float) * D) &&
                                bad++ < 5)
                                t_fail_at(__FILE__, __LINE__,
                                          "types %u/%u, %d KV heads, T %d, window %d, %d "
                                          "threads: row %d head %d differs",
                                          kt, vt, n_kv, T, window, tp_size(pool), t, h);
                        }
                    free(scr);
                }
                free(k), free(v), free(x), free(q), free(got), free(want);
            }
        }
    CHECKF(bad == 0 && n_cases > 1000, "%d of %d (row, head) outputs differ", bad, n_cases);
    tp_free(pools[0]), tp_free(pools[1]);
}

/* pt_scratch_alloc: zeroed, aligned, every byte writable, freed by pt_scratch_free; from 2 MiB
 * on it lies in whole huge pages (its 64-byte header at a 2 MiB boundary) */
static void ops_scratch_alloc(void) {
    const size_t huge = (size_t)2 << 20;
    const size_t sizes[] = {1, 100, 4096, huge - 65, huge - 64, huge - 63, huge, 5 * huge + 3};
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
        uint8_t *p = pt_scratch_alloc(sizes[k]);
        CHECKF(p != NULL, "%zu bytes: NULL", sizes[k]);
        if (!p) continue;
        CHECKF((uintptr_t)p % 16 == 0, "%zu bytes at %p", sizes[k], (void *)p);
        size_t nonzero = 0;
        for (size_t i = 0; i < sizes[k]; i++)
            nonzero += p[i] != 0;
        CHECKF(nonzero == 0, "%zu bytes: %zu not zero", sizes[k], nonzero);
        memset(p, 0xA5, sizes[k]);
        if (sizes[k] + 64 >= huge)
            CHECKF(((uintptr_t)p - 64) % huge == 0, "%zu bytes at %p", sizes[k], (void *)p);
        pt_scratch_free(p);
    }
    pt_scratch_free(NULL);
    int fail = 0;
    float *f = pt_falloc(0, &fail);
    CHECK(f != NULL && !fail && f[0] == 0.0f);
    pt_scratch_free(f);
    CHECK(pt_scratch_alloc(SIZE_MAX - 10) == NULL);
    f = pt_falloc(SIZE_MAX / 2, &fail);
    CHECK(f == NULL && fail);
}

T_SUITE(ops) {
    T_ADD(ops_geglu_row_matches);
    T_ADD(ops_rms_norm_rows_match);
    T_ADD(ops_kv_load_f16_exact);
    T_ADD(ops_attn_groups_match_heads);
    T_ADD(ops_gelu_table_matches);
    T_ADD(ops_dot_f32_order);
    T_ADD(ops_wsum_lanes);
    T_ADD(ops_wsum_add_keys);
    T_ADD(ops_softmax);
    T_ADD(ops_softmax_vector_matches);
    T_ADD(ops_relu_wsum8_matches);
    T_ADD(ops_weights_on_matches);
    T_ADD(ops_idx_top_k_set);
    T_ADD(ops_swiglu_ggml);
    T_ADD(ops_scratch_alloc);
}
