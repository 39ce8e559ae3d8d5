/* sampler.c — token sampling (penalties, temperature, top-k, top-p, min-p,
 * seeded draw) and stop-string matching. See sampler.h for the order of the
 * chain and why it owns its random generator. */
#include "text/sampler.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "text/grammar.h"

struct pt_sampler {
    sampler_params p;
    int n_vocab;
    uint64_t rng[4];      /* xoshiro256** state */
    int32_t *hist;        /* [penalty_last_n] ring of accepted tokens */
    int n_hist, head;     /* tokens in the ring, next slot */
    uint32_t *count;      /* [n_vocab] occurrences of each token in the ring */
    int32_t *idx;         /* [n_vocab] candidate ids (scratch) */
    float *val;           /* [n_vocab] candidate logits, then probabilities (scratch) */
    pt_logit_bias *bias;  /* [p.n_logit_bias] the sampler's own copy (p.logit_bias points here) */
    gram_match *gm;       /* the position in p.grammar (NULL: none) */
    int32_t gram_n_vocab; /* tokens the grammar's masks cover; ids past them are never drawn */
};

void sampler_params_default(sampler_params *p) {
    *p = (sampler_params){.temp = 0.7f,
                          .top_k = 0,
                          .top_p = 0.95f,
                          .min_p = 0.0f,
                          .repeat_penalty = 1.0f,
                          .frequency_penalty = 0.0f,
                          .presence_penalty = 0.0f,
                          .penalty_last_n = 64,
                          .seed = 0};
}

int sampler_params_from_gguf(sampler_params *p, const gguf_ctx *g) {
    int found = 0;
    float f;
    uint32_t u;
    if (gguf_find(g, "general.sampling.temp") &&
        !gguf_get_f32(g, "general.sampling.temp", &f, NULL))
        p->temp = f, found++;
    if (gguf_find(g, "general.sampling.top_p") &&
        !gguf_get_f32(g, "general.sampling.top_p", &f, NULL))
        p->top_p = f, found++;
    if (gguf_find(g, "general.sampling.min_p") &&
        !gguf_get_f32(g, "general.sampling.min_p", &f, NULL))
        p->min_p = f, found++;
    if (gguf_find(g, "general.sampling.top_k") &&
        !gguf_get_u32(g, "general.sampling.top_k", &u, NULL))
        p->top_k = (int)u, found++;
    return found;
}

/* ===== Random numbers ===== */

static uint64_t splitmix64(uint64_t *x) {
    uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}
static uint64_t rotl(uint64_t x, int k) {
    return (x << k) | (x >> (64 - k));
}
static uint64_t next_u64(uint64_t s[4]) {
    uint64_t r = rotl(s[1] * 5, 7) * 9, t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return r;
}
/* uniform in [0, 1) with 53 random bits */
static double next_unit(uint64_t s[4]) {
    return (double)(next_u64(s) >> 11) * 0x1.0p-53;
}

/* ===== Life cycle ===== */

sampler *sampler_new(const sampler_params *p, int n_vocab, pt_err *err) {
    if (n_vocab <= 0) return pt_errf(err, "sampler: vocabulary size %d", n_vocab), NULL;
    if (!(p->temp >= 0) && !(p->temp < 0)) return pt_errf(err, "sampler: temperature is NaN"), NULL;
    if (p->top_k < 0) return pt_errf(err, "sampler: top-k %d is negative", p->top_k), NULL;
    if (!(p->top_p > 0 && p->top_p <= 1))
        return pt_errf(err, "sampler: top-p %g is outside (0, 1]", p->top_p), NULL;
    if (!(p->min_p >= 0 && p->min_p <= 1))
        return pt_errf(err, "sampler: min-p %g is outside [0, 1]", p->min_p), NULL;
    if (!(p->repeat_penalty > 0))
        return pt_errf(err, "sampler: repeat penalty %g must be > 0", p->repeat_penalty), NULL;
    if (!isfinite(p->frequency_penalty) || !isfinite(p->presence_penalty))
        return pt_errf(err, "sampler: penalties must be finite"), NULL;
    if (p->penalty_last_n < 0 || p->penalty_last_n > (1 << 20))
        return pt_errf(err, "sampler: penalty window %d is outside [0, 1048576]",
                       p->penalty_last_n),
               NULL;
    if (p->n_logit_bias < 0 || (p->n_logit_bias && !p->logit_bias))
        return pt_errf(err, "sampler: %d logit biases", p->n_logit_bias), NULL;
    for (int i = 0; i < p->n_logit_bias; i++) {
        const pt_logit_bias *b = &p->logit_bias[i];
        if (b->token < 0 || b->token >= n_vocab)
            return pt_errf(err, "sampler: logit bias for token %d; ids are in [0, %d)", b->token,
                           n_vocab),
                   NULL;
        if (!(b->bias >= -100 && b->bias <= 100))
            return pt_errf(err, "sampler: logit bias %g for token %d is outside [-100, 100]",
                           b->bias, b->token),
                   NULL;
    }
    sampler *s = calloc(1, sizeof *s);
    if (!s) return pt_errf(err, "sampler: out of memory"), NULL;
    s->p = *p;
    if (p->n_logit_bias) {
        s->bias = malloc((size_t)p->n_logit_bias * sizeof *s->bias);
        if (!s->bias) {
            free(s);
            return pt_errf(err, "sampler: out of memory for %d logit biases", p->n_logit_bias),
                   NULL;
        }
        memcpy(s->bias, p->logit_bias, (size_t)p->n_logit_bias * sizeof *s->bias);
    }
    s->p.logit_bias = s->bias;
    s->n_vocab = n_vocab;
    if (p->grammar) {
        const gram *g = p->grammar->g;
        const gram_vocab *gv = p->grammar->gv;
        if (!gv) {
            sampler_free(s);
            return pt_errf(err, "sampler: the grammar was made without an engine's vocabulary"),
                   NULL;
        }
        if (gram_vocab_n_vocab(gv) > n_vocab) {
            sampler_free(s);
            return pt_errf(err, "sampler: the grammar's vocabulary is larger than %d logits",
                           n_vocab),
                   NULL;
        }
        s->gm = gram_match_new(g, gv, err);
        if (!s->gm) {
            sampler_free(s);
            return NULL;
        }
        s->gram_n_vocab = gram_vocab_n_vocab(gv);
    }
    s->hist = malloc((size_t)(p->penalty_last_n ? p->penalty_last_n : 1) * sizeof *s->hist);
    s->count = calloc((size_t)n_vocab, sizeof *s->count);
    s->idx = malloc((size_t)n_vocab * sizeof *s->idx);
    s->val = malloc((size_t)n_vocab * sizeof *s->val);
    if (!s->hist || !s->count || !s->idx || !s->val) {
        sampler_free(s);
        return pt_errf(err, "sampler: out of memory for %d candidates", n_vocab), NULL;
    }
    uint64_t x = p->seed;
    for (int i = 0; i < 4; i++)
        s->rng[i] = splitmix64(&x);
    return s;
}

void sampler_free(sampler *s) {
    if (!s) return;
    free(s->hist);
    free(s->count);
    free(s->idx);
    free(s->val);
    free(s->bias);
    gram_match_free(s->gm);
    free(s);
}

void sampler_reset(sampler *s) {
    for (int i = 0; i < s->n_hist; i++) {
        int k = (s->head - 1 - i + s->p.penalty_last_n) % s->p.penalty_last_n;
        s->count[s->hist[k]] = 0;
    }
    s->n_hist = s->head = 0;
    if (s->gm) gram_match_reset(s->gm);
}

int sampler_accept(sampler *s, int32_t tok) {
    sampler_note(s, tok);
    return s->gm ? gram_match_token(s->gm, tok) : 0;
}

int sampler_grammar_done(const sampler *s) {
    return s->gm && gram_match_can_end(s->gm);
}

void sampler_note(sampler *s, int32_t tok) {
    int n = s->p.penalty_last_n;
    if (n == 0 || tok < 0 || tok >= s->n_vocab) return;
    if (s->n_hist == n)
        s->count[s->hist[s->head]]--; /* the oldest leaves the window */
    else
        s->n_hist++;
    s->hist[s->head] = tok;
    s->count[tok]++;
    s->head = (s->head + 1) % n;
}

/* ===== Sampling ===== */

static void apply_penalties(sampler *s, float *logits) {
    const sampler_params *p = &s->p;
    if (p->repeat_penalty == 1.0f && p->frequency_penalty == 0.0f && p->presence_penalty == 0.0f)
        return;
    int n = p->penalty_last_n;
    /* each distinct token once: the high bit of its count marks it done */
    const uint32_t done = 0x80000000u;
    for (int i = 0; i < s->n_hist; i++) {
        int32_t t = s->hist[(s->head - 1 - i + n) % n];
        uint32_t c = s->count[t];
        if (c & done) continue;
        float l = logits[t];
        if (p->repeat_penalty != 1.0f) l = l > 0 ? l / p->repeat_penalty : l * p->repeat_penalty;
        l -= (float)c * p->frequency_penalty + p->presence_penalty;
        logits[t] = l;
        s->count[t] = c | done;
    }
    for (int i = 0; i < s->n_hist; i++)
        s->count[s->hist[(s->head - 1 - i + n) % n]] &= ~done;
}

/* Sort candidates [0, n) by value, descending (ties: lower id first). */
static void sift(int32_t *idx, float *val, int n, int i) {
    for (;;) { /* min-heap on (val, -id): the root is the weakest of the kept */
        int l = 2 * i + 1, r = l + 1, m = i;
        if (l < n && (val[l] < val[m] || (val[l] == val[m] && idx[l] > idx[m]))) m = l;
        if (r < n && (val[r] < val[m] || (val[r] == val[m] && idx[r] > idx[m]))) m = r;
        if (m == i) return;
        int32_t ti = idx[i];
        idx[i] = idx[m];
        idx[m] = ti;
        float tv = val[i];
        val[i] = val[m];
        val[m] = tv;
        i = m;
    }
}
/* Keep the k best of n candidates, sorted best first (heap select + heap sort:
 * O(n log k), no allocation). */
static int top_sorted(int32_t *idx, float *val, int n, int k) {
    if (k > n) k = n;
    for (int i = k / 2 - 1; i >= 0; i--)
        sift(idx, val, k, i);
    for (int i = k; i < n; i++) {
        if (val[i] > val[0] || (val[i] == val[0] && idx[i] < idx[0])) {
            idx[0] = idx[i];
            val[0] = val[i];
            sift(idx, val, k, 0);
        }
    }
    for (int end = k - 1; end > 0; end--) { /* heap sort: weakest goes to the back */
        int32_t ti = idx[0];
        idx[0] = idx[end];
        idx[end] = ti;
        float tv = val[0];
        val[0] = val[end];
        val[end] = tv;
        sift(idx, val, end, 0);
    }
    return k;
}

/* The logit bias comes first, as in llama.cpp's chain: what the penalties and the
 * truncations see is the biased distribution. -100 is a ban (-inf, never drawn, and
 * never the greedy pick while any token is left), not merely a large negative shift. */
static void apply_bias(const sampler *s, float *logits) {
    for (int i = 0; i < s->p.n_logit_bias; i++) {
        const pt_logit_bias *b = &s->bias[i];
        logits[b->token] = b->bias <= -100 ? -INFINITY : logits[b->token] + b->bias;
    }
}

/* The grammar's mask: every token it does not allow now gets -inf. Returns the first allowed
 * token (the draw when the bias banned all the allowed ones), or -1 when none is allowed. */
static int32_t apply_grammar(sampler *s, float *logits) {
    int n_allowed = 0;
    const uint64_t *mask = gram_match_mask(s->gm, &n_allowed);
    if (!mask || !n_allowed) return -1;
    int32_t first = -1;
    const int32_t nv = s->gram_n_vocab;
    for (int32_t w = 0; w * 64 < nv; w++) {
        uint64_t bits = mask[w];
        int32_t base = w * 64, end = base + 64 < nv ? base + 64 : nv;
        if (!bits) {
            for (int32_t t = base; t < end; t++)
                logits[t] = -INFINITY;
            continue;
        }
        if (first < 0) first = base + __builtin_ctzll(bits);
        if (bits == ~0ull && end - base == 64) continue;
        for (int32_t t = base; t < end; t++)
            if (!(bits >> (t - base) & 1)) logits[t] = -INFINITY;
    }
    for (int32_t t = nv; t < s->n_vocab; t++)
        logits[t] = -INFINITY;
    return first;
}

int32_t sampler_sample(sampler *s, float *logits) {
    const sampler_params *p = &s->p;
    const int n_vocab = s->n_vocab;
    apply_bias(s, logits);
    int32_t fallback = 0;
    if (s->gm && (fallback = apply_grammar(s, logits)) < 0) return -1;
    apply_penalties(s, logits);
    if (p->temp <= 0) {
        int32_t best = 0;
        for (int32_t i = 1; i < n_vocab; i++)
            if (logits[i] > logits[best]) best = i;
        return logits[best] == -INFINITY ? fallback : best;
    }
    int n = 0;
    for (int32_t i = 0; i < n_vocab; i++) {
        if (logits[i] == -INFINITY || isnan(logits[i])) continue;
        s->idx[n] = i;
        s->val[n] = logits[i] / p->temp;
        n++;
    }
    if (n == 0) return fallback;
    /* top-k (or a full sort when top-p/min-p need the order) */
    int k = p->top_k > 0 && p->top_k < n ? p->top_k : n;
    n = top_sorted(s->idx, s->val, n, k);
    /* softmax over the kept candidates (sorted: val[0] is the max) */
    double sum = 0;
    float mx = s->val[0];
    for (int i = 0; i < n; i++) {
        s->val[i] = expf(s->val[i] - mx);
        sum += s->val[i];
    }
    for (int i = 0; i < n; i++)
        s->val[i] = (float)(s->val[i] / sum);
    if (p->top_p < 1.0f) {
        double cum = 0;
        int keep = n;
        for (int i = 0; i < n; i++) {
            cum += s->val[i];
            if (cum >= p->top_p) {
                keep = i + 1;
                break;
            }
        }
        n = keep;
    }
    if (p->min_p > 0) {
        float thr = p->min_p * s->val[0];
        int keep = 1;
        while (keep < n && s->val[keep] >= thr)
            keep++;
        n = keep;
    }
    double total = 0;
    for (int i = 0; i < n; i++)
        total += s->val[i];
    double r = next_unit(s->rng) * total, acc = 0;
    for (int i = 0; i < n; i++) {
        acc += s->val[i];
        if (r < acc) return s->idx[i];
    }
    return s->idx[n - 1];
}

/* ===== Stop strings ===== */

long stop_find(const char *const *stops, int n_stops, const char *text, size_t len, size_t from,
               size_t *hold) {
    long best = -1;
    for (int k = 0; k < n_stops; k++) {
        size_t m = strlen(stops[k]);
        if (m == 0 || m > len) continue;
        size_t start = from > m ? from - m + 1 : 0; /* a match may begin before `from` */
        for (size_t i = start; i + m <= len; i++) {
            if ((long)i >= best && best >= 0) break;
            if (text[i] == stops[k][0] && !memcmp(text + i, stops[k], m)) {
                best = (long)i;
                break;
            }
        }
    }
    if (hold) {
        size_t h = 0;
        if (best < 0)
            for (int k = 0; k < n_stops; k++) {
                size_t m = strlen(stops[k]);
                for (size_t l = m > 0 ? m - 1 : 0; l > h; l--) /* longest suffix == prefix */
                    if (l <= len && !memcmp(text + len - l, stops[k], l)) {
                        h = l;
                        break;
                    }
            }
        *hold = h;
    }
    return best;
}
