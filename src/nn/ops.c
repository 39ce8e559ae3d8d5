/* ops.c — norms, rotary embeddings, softmax, activations, top-k (see ops.h). */
#include "ops.h"

#include <math.h>
#include <string.h>

void nn_rms_norm(const float *x, const float *w, float eps, int n, float *y) {
    double sum = 0;
    for (int i = 0; i < n; i++) sum += (double)x[i] * x[i];
    const float mean = (float)(sum / n);
    const float scale = 1.0f / sqrtf(mean + eps);
    if (w)
        for (int i = 0; i < n; i++) y[i] = (x[i] * scale) * w[i];
    else
        for (int i = 0; i < n; i++) y[i] = x[i] * scale;
}

void nn_layer_norm(const float *x, const float *w, const float *b, float eps, int n, float *y) {
    double sum = 0;
    for (int i = 0; i < n; i++) sum += x[i];
    const float mean = (float)(sum / n);
    double var = 0;
    for (int i = 0; i < n; i++) {
        float d = x[i] - mean;
        y[i] = d;
        var += (double)d * d;
    }
    const float scale = 1.0f / sqrtf((float)(var / n) + eps);
    for (int i = 0; i < n; i++) {
        float v = y[i] * scale;
        if (w) v *= w[i];
        if (b) v += b[i];
        y[i] = v;
    }
}

static float corr_dim(int n_dims, int n_ctx_orig, float n_rot, float base) {
    return (float)n_dims * logf((float)n_ctx_orig / (n_rot * 2 * (float)M_PI)) / (2 * logf(base));
}

void nn_rope_yarn_corr_dims(int n_dims, int n_ctx_orig, float freq_base, float beta_fast,
                            float beta_slow, float dims[2]) {
    float start = floorf(corr_dim(n_dims, n_ctx_orig, beta_fast, freq_base));
    float end = ceilf(corr_dim(n_dims, n_ctx_orig, beta_slow, freq_base));
    dims[0] = start > 0 ? start : 0;
    dims[1] = end < (float)(n_dims - 1) ? end : (float)(n_dims - 1);
}

static float yarn_ramp(float low, float high, int i0) {
    float y = ((float)(i0 / 2) - low) / fmaxf(0.001f, high - low);
    return 1.0f - fminf(1.0f, fmaxf(0.0f, y));
}

void nn_rope_cache(const nn_rope *r, int64_t pos, float *cs) {
    const float theta_scale = powf(r->freq_base, -2.0f / (float)r->n_dims);
    float theta = (float)pos;
    for (int i0 = 0; i0 < r->n_dims; i0 += 2) {
        const float ff = r->freq_factors ? r->freq_factors[i0 / 2] : 1.0f;
        const float extrap = theta / ff;
        const float interp = r->freq_scale * extrap;
        float t = interp, mscale = r->attn_factor;
        if (r->ext_factor != 0.0f) {
            float mix = yarn_ramp(r->corr_dims[0], r->corr_dims[1], i0) * r->ext_factor;
            t = interp * (1 - mix) + extrap * mix;
            mscale *= 1.0f + 0.1f * logf(1.0f / r->freq_scale);
        }
        cs[i0] = cosf(t) * mscale;
        cs[i0 + 1] = sinf(t) * mscale;
        theta *= theta_scale;
    }
}

void nn_rope_apply(const nn_rope *r, const float *cs, float *x) {
    const int half = r->n_dims / 2;
    for (int i = 0; i < half; i++) {
        const float c = cs[2 * i], s = cs[2 * i + 1];
        const int a = r->neox ? i : 2 * i;
        const int b = r->neox ? i + half : 2 * i + 1;
        const float x0 = x[a], x1 = x[b];
        x[a] = x0 * c - x1 * s;
        x[b] = x0 * s + x1 * c;
    }
}

void nn_softmax(float *x, int n, float scale) {
    float max = -INFINITY;
    for (int i = 0; i < n; i++) {
        x[i] *= scale;
        if (x[i] > max) max = x[i];
    }
    double sum = 0;
    for (int i = 0; i < n; i++) {
        float e = x[i] == -INFINITY ? 0.0f : expf(x[i] - max);
        x[i] = e;
        sum += e;
    }
    const float inv = (float)(1.0 / sum);
    for (int i = 0; i < n; i++) x[i] *= inv;
}

float nn_silu(float x) { return x / (1.0f + expf(-x)); }

float nn_sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }

/* a ranks above b: larger value, ties broken by the lower index */
static int ranks_above(const float *x, int a, int b) {
    return x[a] > x[b] || (x[a] == x[b] && a < b);
}

static void sift_down(const float *x, int *h, int n, int i) {
    /* min-heap on rank: h[0] is the weakest of the kept entries */
    for (;;) {
        int l = 2 * i + 1, r = l + 1, m = i;
        if (l < n && ranks_above(x, h[m], h[l])) m = l;
        if (r < n && ranks_above(x, h[m], h[r])) m = r;
        if (m == i) return;
        int t = h[i];
        h[i] = h[m];
        h[m] = t;
        i = m;
    }
}

void nn_top_k(const float *x, int n, int k, int *idx) {
    /* O(n log k) with a heap of the k best so far: DSA selects 2048 of up to
     * a million keys per query, so a quadratic selection would not do. */
    if (k <= 0) return;
    for (int i = 0; i < k; i++) idx[i] = i;
    for (int i = k / 2 - 1; i >= 0; i--) sift_down(x, idx, k, i);
    for (int i = k; i < n; i++)
        if (ranks_above(x, i, idx[0])) {
            idx[0] = i;
            sift_down(x, idx, k, 0);
        }
    /* heap-sort into descending rank */
    for (int end = k - 1; end > 0; end--) {
        int t = idx[0];
        idx[0] = idx[end];
        idx[end] = t;
        sift_down(x, idx, end, 0);
    }
}
