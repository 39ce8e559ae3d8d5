/* test_sampler.c — the sampler's distribution properties (temperature, top-k,
 * top-p, min-p), reproducibility by seed, penalties, and stop strings matched
 * across token boundaries. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "test.h"
#include "text/sampler.h"

static sampler *mk(float temp, int top_k, float top_p, float min_p, uint64_t seed, int nv) {
    sampler_params p;
    sampler_params_default(&p);
    p.temp = temp, p.top_k = top_k, p.top_p = top_p, p.min_p = min_p, p.seed = seed;
    pt_err err = {{0}};
    sampler *s = sampler_new(&p, nv, &err);
    CHECKF(s != NULL, "%s", err.msg);
    return s;
}

/* Draw n tokens from fixed logits; counts[nv]. */
static void draw(sampler *s, const float *logits, int nv, int n, int *counts) {
    float *l = malloc((size_t)nv * sizeof *l);
    for (int i = 0; i < n; i++) {
        memcpy(l, logits, (size_t)nv * sizeof *l);
        int32_t t = sampler_sample(s, l);
        if (t >= 0 && t < nv) counts[t]++;
    }
    free(l);
}

static void test_sampler_greedy(void) {
    float l[5] = {0.1f, 2.0f, -1.0f, 2.0f, 1.9f};
    sampler *s = mk(0, 0, 1, 0, 1, 5);
    if (!s) return;
    for (int i = 0; i < 10; i++) {
        float c[5];
        memcpy(c, l, sizeof c);
        CHECK(sampler_sample(s, c) == 1); /* tie between 1 and 3: lowest id */
    }
    sampler_free(s);
}

static void test_sampler_distribution(void) {
    const float l[4] = {logf(0.5f), logf(0.3f), logf(0.2f), -INFINITY};
    int c[4] = {0};
    sampler *s = mk(1.0f, 0, 1.0f, 0, 42, 4);
    if (!s) return;
    const int n = 40000;
    draw(s, l, 4, n, c);
    CHECKF(fabs(c[0] / (double)n - 0.5) < 0.015 && fabs(c[1] / (double)n - 0.3) < 0.015 &&
               fabs(c[2] / (double)n - 0.2) < 0.015 && c[3] == 0,
           "frequencies %d %d %d %d", c[0], c[1], c[2], c[3]);
    sampler_free(s);
    /* temperature 0.5 squares the odds: 25:9:4 */
    memset(c, 0, sizeof c);
    s = mk(0.5f, 0, 1.0f, 0, 43, 4);
    draw(s, l, 4, n, c);
    CHECKF(fabs(c[0] / (double)n - 25.0 / 38) < 0.015 && fabs(c[2] / (double)n - 4.0 / 38) < 0.015,
           "temp 0.5: %d %d %d", c[0], c[1], c[2]);
    sampler_free(s);
    /* top-k 2: token 2 never; renormalised 5:3 */
    memset(c, 0, sizeof c);
    s = mk(1.0f, 2, 1.0f, 0, 44, 4);
    draw(s, l, 4, n, c);
    CHECKF(c[2] == 0 && fabs(c[0] / (double)n - 0.625) < 0.015, "top-k: %d %d %d", c[0], c[1],
           c[2]);
    sampler_free(s);
    /* top-p 0.5: the first token alone reaches 0.5; 0.6 needs two */
    memset(c, 0, sizeof c);
    s = mk(1.0f, 0, 0.5f, 0, 45, 4);
    draw(s, l, 4, 2000, c);
    CHECKF(c[0] == 2000, "top-p 0.5: %d %d %d", c[0], c[1], c[2]);
    sampler_free(s);
    memset(c, 0, sizeof c);
    s = mk(1.0f, 0, 0.6f, 0, 46, 4);
    draw(s, l, 4, 4000, c);
    CHECKF(c[2] == 0 && c[1] > 0 && c[0] > c[1], "top-p 0.6: %d %d %d", c[0], c[1], c[2]);
    sampler_free(s);
    /* min-p 0.5: keep p >= 0.25 -> tokens 0 and 1 */
    memset(c, 0, sizeof c);
    s = mk(1.0f, 0, 1.0f, 0.5f, 47, 4);
    draw(s, l, 4, 4000, c);
    CHECKF(c[2] == 0 && c[1] > 0, "min-p: %d %d %d", c[0], c[1], c[2]);
    sampler_free(s);
}

static void test_sampler_seed(void) {
    const int nv = 1000;
    float *l = malloc(nv * sizeof *l);
    for (int i = 0; i < nv; i++)
        l[i] = sinf((float)i) * 3;
    int32_t a[200], b[200], d[200];
    sampler *s1 = mk(0.9f, 50, 0.95f, 0.01f, 1234, nv), *s2 = mk(0.9f, 50, 0.95f, 0.01f, 1234, nv),
            *s3 = mk(0.9f, 50, 0.95f, 0.01f, 1235, nv);
    float *c = malloc(nv * sizeof *c);
    for (int i = 0; i < 200; i++) {
        memcpy(c, l, nv * sizeof *c);
        a[i] = sampler_sample(s1, c);
        memcpy(c, l, nv * sizeof *c);
        b[i] = sampler_sample(s2, c);
        memcpy(c, l, nv * sizeof *c);
        d[i] = sampler_sample(s3, c);
    }
    CHECK(!memcmp(a, b, sizeof a));
    CHECK(memcmp(a, d, sizeof a) != 0);
    sampler_free(s1);
    sampler_free(s2);
    sampler_free(s3);
    free(c);
    free(l);
}

static void test_sampler_penalties(void) {
    sampler_params p;
    sampler_params_default(&p);
    p.temp = 0;
    p.repeat_penalty = 2.0f;
    p.penalty_last_n = 3;
    pt_err err = {{0}};
    sampler *s = sampler_new(&p, 4, &err);
    if (!s) return;
    float l[4] = {4.0f, 3.0f, -1.0f, 0.0f};
    sampler_accept(s, 0);
    sampler_accept(s, 0);
    sampler_accept(s, 2);
    CHECK(sampler_sample(s, l) == 1); /* 4/2 = 2 < 3 */
    CHECK(l[0] == 2.0f && l[2] == -2.0f && l[1] == 3.0f);
    /* the window slides: after three more tokens, 0 is forgotten */
    sampler_accept(s, 3);
    sampler_accept(s, 3);
    sampler_accept(s, 3);
    float m[4] = {4.0f, 3.0f, -1.0f, 0.0f};
    CHECK(sampler_sample(s, m) == 0 && m[0] == 4.0f && m[3] == 0.0f);
    sampler_free(s);
    /* frequency and presence */
    sampler_params_default(&p);
    p.temp = 0;
    p.frequency_penalty = 0.5f;
    p.presence_penalty = 1.0f;
    s = sampler_new(&p, 4, &err);
    sampler_accept(s, 1);
    sampler_accept(s, 1);
    sampler_accept(s, 1);
    float q[4] = {0, 3.0f, 0, 0};
    sampler_sample(s, q);
    CHECKF(fabsf(q[1] - (3.0f - 1.5f - 1.0f)) < 1e-6f, "got %g", q[1]);
    sampler_reset(s);
    float r[4] = {0, 3.0f, 0, 0};
    sampler_sample(s, r);
    CHECK(r[1] == 3.0f);
    sampler_free(s);
    /* bad parameters are refused */
    sampler_params_default(&p);
    p.top_p = 0;
    CHECK(sampler_new(&p, 4, &err) == NULL);
    sampler_params_default(&p);
    p.repeat_penalty = 0;
    CHECK(sampler_new(&p, 4, &err) == NULL);
    sampler_params_default(&p);
    p.top_k = -1;
    CHECK(sampler_new(&p, 4, &err) == NULL);
}

/* logit_bias comes before the chain: -100 bans even the greedy pick, +100 forces
 * a token under temperature; out-of-range entries are refused at sampler_new. */
static void test_sampler_logit_bias(void) {
    const float l[5] = {0.1f, 2.0f, -1.0f, 1.5f, 1.9f};
    pt_logit_bias ban[] = {{1, -100}}, force[] = {{2, 100}}, shift[] = {{4, 0.5f}, {4, -0.2f}};
    sampler_params p;
    sampler_params_default(&p);
    p.temp = 0;
    pt_err err = {{0}};
    float c[5];
    p.logit_bias = ban, p.n_logit_bias = 1;
    sampler *s = sampler_new(&p, 5, &err);
    CHECKF(s != NULL, "%s", err.msg);
    if (!s) return;
    ban[0].token = 0; /* the sampler keeps its own copy */
    memcpy(c, l, sizeof c);
    CHECK(sampler_sample(s, c) == 4 && c[1] == -INFINITY);
    sampler_free(s);
    p.logit_bias = shift, p.n_logit_bias = 2; /* entries add up: 1.9 + 0.3 > 2.0 */
    s = sampler_new(&p, 5, &err);
    memcpy(c, l, sizeof c);
    CHECK(s && sampler_sample(s, c) == 4);
    sampler_free(s);
    p.temp = 1.0f, p.top_p = 1.0f, p.seed = 7;
    p.logit_bias = force, p.n_logit_bias = 1;
    s = sampler_new(&p, 5, &err);
    int counts[5] = {0};
    if (s) draw(s, l, 5, 2000, counts);
    CHECKF(counts[2] == 2000, "forced token drawn %d of 2000 times", counts[2]);
    sampler_free(s);
    pt_logit_bias bad_id[] = {{5, 1}}, bad_neg[] = {{-1, 1}}, bad_val[] = {{0, 100.5f}},
                  bad_nan[] = {{0, NAN}};
    const pt_logit_bias *bads[] = {bad_id, bad_neg, bad_val, bad_nan};
    for (int i = 0; i < 4; i++) {
        p.logit_bias = bads[i], p.n_logit_bias = 1;
        err.msg[0] = 0;
        s = sampler_new(&p, 5, &err);
        CHECKF(s == NULL && strstr(err.msg, "logit bias"), "case %d: %s", i, err.msg);
        sampler_free(s);
    }
}

static void test_sampler_stop_strings(void) {
    const char *stops[] = {"\nUser:", "###"};
    size_t hold;
    /* token 1: "Hello\nUs" — may be the start of a stop string: hold 3 bytes back */
    const char *t1 = "Hello\nUs";
    CHECK(stop_find(stops, 2, t1, strlen(t1), 0, &hold) == -1 && hold == 3);
    /* token 2 completes it across the boundary */
    const char *t2 = "Hello\nUser: hi";
    CHECK(stop_find(stops, 2, t2, strlen(t2), strlen(t1), &hold) == 5);
    /* a near miss releases the held bytes */
    const char *t3 = "Hello\nUsb";
    CHECK(stop_find(stops, 2, t3, strlen(t3), strlen(t1), &hold) == -1 && hold == 0);
    /* the earliest of several */
    const char *t4 = "a###b\nUser:";
    CHECK(stop_find(stops, 2, t4, strlen(t4), 0, &hold) == 1);
    CHECK(stop_find(stops, 2, "##", 2, 0, &hold) == -1 && hold == 2);
    CHECK(stop_find(stops, 0, "x", 1, 0, &hold) == -1 && hold == 0);
}

T_SUITE(sampler) {
    T_ADD(test_sampler_greedy);
    T_ADD(test_sampler_distribution);
    T_ADD(test_sampler_seed);
    T_ADD(test_sampler_penalties);
    T_ADD(test_sampler_stop_strings);
    T_ADD(test_sampler_logit_bias);
}
