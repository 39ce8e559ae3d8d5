/* gates.c — logit comparison and the fixtures README's gates (see gates.h). */
#include "gates.h"

#include <math.h>
#include <stdlib.h>

#include "test.h"

gate_stats gate_compare(const float *got, const float *want, int rows, int n) {
    gate_stats s = {1.0, 0.0, 0.0, rows, 0, 0};
    for (int r = 0; r < rows; r++) {
        const float *g = got + (size_t)r * n, *w = want + (size_t)r * n;
        double dot = 0, ng = 0, nw = 0;
        int ag = 0, aw = 0, second = -1;
        for (int i = 0; i < n; i++) {
            dot += (double)g[i] * w[i];
            ng += (double)g[i] * g[i];
            nw += (double)w[i] * w[i];
            double d = fabs((double)g[i] - w[i]);
            if (d > s.max_diff) s.max_diff = d;
            if (g[i] > g[ag]) ag = i;
            if (w[i] > w[aw]) aw = i;
        }
        for (int i = 0; i < n; i++)
            if (i != aw && (second < 0 || w[i] > w[second])) second = i;
        double c = dot / fmax(sqrt(ng * nw), 1e-30);
        if (c < s.cos_min) s.cos_min = c;
        s.cos_mean += c / rows;
        if (ag != aw) {
            s.flips++;
            if (w[aw] - w[second] >= 0.1) s.bad_flips++;
        }
    }
    return s;
}

int gate_ok(const gate_stats *s, double f32_tol) {
    if (f32_tol > 0) return s->max_diff <= f32_tol && s->bad_flips == 0;
    int allowed = s->rows * 6 / 100;
    if (allowed < 1) allowed = 1;
    return s->cos_min >= 0.99 && s->cos_mean >= 0.9998 && s->bad_flips == 0 && s->flips <= allowed;
}

float *gate_read_f32(const char *name, size_t count) {
    size_t len = 0;
    float *p = t_read_file(t_fixture(name), &len);
    if (p && len != count * sizeof(float)) {
        free(p);
        return NULL;
    }
    return p;
}

int gate_argmax(const float *x, int n) {
    int b = 0;
    for (int i = 1; i < n; i++)
        if (x[i] > x[b]) b = i;
    return b;
}
