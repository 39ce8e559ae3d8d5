/* bench_grammar.c — what constrained decoding costs per token, run by `make bench`.
 *
 *   bench_grammar [MODEL.gguf...]
 *
 * For each vocabulary — Gemma 4's 262,144 tokens (tests/fixtures/tokenizer/ggml-vocab-gemma-4.gguf)
 * and the demo model's (models/petrel-demo-glm.gguf), plus the vocabulary of every MODEL given —
 * a 20-field JSON Schema is compiled to a grammar and a valid instance (about 300 tokens) is fed
 * token by token through the sampler, as a generation would: pt_sampler_sample (greedy: the
 * logit bias, the grammar's mask, the argmax) then pt_sampler_accept of the instance's next
 * token. The grammar's cost is that time minus the same loop without a grammar. "cold" is a new
 * sampler (what every request gets: the lazily built DFA and the mask cache start empty);
 * "warm" is the same sampler reset and run again. The vocabulary's trie is built once per
 * engine (its time is printed too).
 *
 * The ratio to decode time: for a MODEL given (and for the demo model), its decode time is
 * measured here (greedy, 32 tokens after an 8-token prompt, all threads); the Gemma 4
 * vocabulary is measured against the models given that have it (bench/RESULTS.md: a Gemma 4
 * 26B-A4B-shaped model made by mkmodel). Times are CPU-seconds of this thread for the grammar,
 * wall seconds for decode. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "petrel.h"

static double cpu_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* 20 fields: strings, bounded strings, integers, numbers, booleans, enums, arrays, a nested
 * object, a nullable anyOf; 14 required. */
static const char k_schema[] =
    "{\"type\":\"object\",\"additionalProperties\":false,"
    "\"required\":[\"id\",\"name\",\"email\",\"age\",\"score\",\"active\",\"role\",\"tags\","
    "\"address\",\"created\",\"notes\",\"level\",\"ratio\",\"flags\"],"
    "\"properties\":{"
    "\"id\":{\"type\":\"integer\"},"
    "\"name\":{\"type\":\"string\",\"maxLength\":40},"
    "\"email\":{\"type\":\"string\"},"
    "\"age\":{\"type\":\"integer\"},"
    "\"score\":{\"type\":\"number\"},"
    "\"active\":{\"type\":\"boolean\"},"
    "\"role\":{\"enum\":[\"admin\",\"editor\",\"viewer\",\"guest\"]},"
    "\"tags\":{\"type\":\"array\",\"items\":{\"type\":\"string\"},\"maxItems\":8},"
    "\"address\":{\"type\":\"object\",\"properties\":{\"street\":{\"type\":\"string\"},"
    "\"city\":{\"type\":\"string\"},\"zip\":{\"type\":\"string\",\"maxLength\":10},"
    "\"country\":{\"type\":\"string\"}},\"required\":[\"street\",\"city\",\"country\"],"
    "\"additionalProperties\":false},"
    "\"created\":{\"type\":\"string\"},"
    "\"notes\":{\"type\":\"string\"},"
    "\"level\":{\"type\":\"integer\"},"
    "\"ratio\":{\"type\":\"number\"},"
    "\"flags\":{\"type\":\"array\",\"items\":{\"type\":\"boolean\"}},"
    "\"manager\":{\"anyOf\":[{\"type\":\"null\"},{\"type\":\"string\"}]},"
    "\"phone\":{\"type\":\"string\"},"
    "\"website\":{\"type\":\"string\"},"
    "\"rank\":{\"type\":\"integer\"},"
    "\"bio\":{\"type\":\"string\"},"
    "\"language\":{\"enum\":[\"en\",\"fr\",\"de\",\"ja\"]}}}";

static const char k_instance[] =
    "{\"id\": 48213, \"name\": \"Ada Lovelace-Byron\", \"email\": \"ada.lovelace@example.org\", "
    "\"age\": 36, \"score\": 97.25, \"active\": true, \"role\": \"editor\", \"tags\": "
    "[\"mathematics\", \"analytical engine\", \"poetry\", \"notes\"], \"address\": {\"street\": "
    "\"12 St James's Square\", \"city\": \"London\", \"zip\": \"SW1Y 4JH\", \"country\": "
    "\"United Kingdom\"}, \"created\": \"1843-09-05T10:00:00Z\", \"notes\": \"Wrote the first "
    "published algorithm intended for a machine; translated Menabrea's memoir and added notes "
    "A to G, three times its length. Caf\xc3\xa9 au lait, \xe6\x97\xa5\xe6\x9c\xac.\", "
    "\"level\": 7, \"ratio\": 0.618, \"flags\": [true, false, true], \"manager\": null, "
    "\"phone\": \"+44 20 7946 0958\", \"website\": \"https://example.org/ada\", \"rank\": 1, "
    "\"bio\": \"Mathematician and writer, known for her work on Charles Babbage's proposed "
    "mechanical general-purpose computer.\", \"language\": \"en\"}";

/* Seconds of CPU per token for sample+accept over the instance; grammar may be NULL. */
static double run_loop(pt_sampler *s, const int32_t *ids, size_t n, float *logits,
                       const float *base, int nv, int *bad) {
    double t = cpu_s();
    for (size_t i = 0; i < n; i++) {
        memcpy(logits, base, (size_t)nv * sizeof *logits);
        int32_t tok = pt_sampler_sample(s, logits);
        if (tok < 0 || pt_sampler_accept(s, ids[i])) (*bad)++;
    }
    return (cpu_s() - t) / (double)n;
}

/* Decode ms per token of a model (greedy), or 0 when it cannot run. */
static double decode_ms(const char *model) {
    char err[512];
    pt_engine_params ep = {.model_path = model};
    pt_engine *e = pt_engine_open(&ep, err, sizeof err);
    if (!e) {
        printf("  %s: %s\n", model, err);
        return 0;
    }
    pt_session_params spp = {.n_ctx = 128};
    pt_session *s = pt_session_new(e, &spp, err, sizeof err);
    pt_sampling sp;
    pt_sampling_default(&sp);
    sp.temp = 0;
    pt_gen *g = s ? pt_gen_new(s, &sp, err, sizeof err) : NULL;
    double ms = 0;
    if (g) {
        int32_t prompt[8] = {2, 100, 200, 300, 400, 500, 600, 700};
        pt_gen_result r = {0};
        pt_gen_opts o = {.max_tokens = 4, .ignore_eog = 1};
        /* a warm-up run reads the weights once */
        if (pt_gen_prefill(g, prompt, 8, NULL, err, sizeof err) >= 0 &&
            !pt_gen_run(g, &o, NULL, NULL, NULL, &r, err, sizeof err)) {
            o.max_tokens = 32;
            pt_gen_clear(g);
            if (pt_gen_prefill(g, prompt, 8, NULL, err, sizeof err) >= 0 &&
                !pt_gen_run(g, &o, NULL, NULL, NULL, &r, err, sizeof err) && r.n_tokens > 1)
                ms = (r.t_end - r.t_first) * 1e3 / (r.n_tokens - 1);
        }
        pt_buf_free(&r.text);
    }
    if (!ms) printf("  %s: decode failed: %s\n", model, err);
    pt_gen_free(g);
    pt_session_free(s);
    pt_engine_close(e);
    return ms;
}

typedef struct vres {
    double cold_us, warm_us;
    int n_vocab;
} vres;

static int bench_vocab(const char *label, const char *path, vres *out) {
    char err[512];
    pt_engine_params ep = {.model_path = path, .vocab_only = 1};
    pt_engine *e = pt_engine_open(&ep, err, sizeof err);
    if (!e) {
        printf("  %-30s skipped: %s\n", label, err);
        return -1;
    }
    const int nv = pt_engine_n_vocab(e);
    double t0 = cpu_s();
    pt_grammar *g = pt_grammar_from_json_schema(e, k_schema, err, sizeof err);
    double t_build = cpu_s() - t0;
    if (!g) {
        printf("  %-30s grammar failed: %s\n", label, err);
        pt_engine_close(e);
        return -1;
    }
    pt_ids ids = {0};
    pt_tokenize(e, k_instance, strlen(k_instance), 0, &ids, err, sizeof err);
    float *base = malloc((size_t)nv * sizeof *base), *logits = malloc((size_t)nv * sizeof *logits);
    uint64_t x = 7;
    for (int i = 0; i < nv; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        base[i] = (float)(x % 10000) / 1000.0f;
    }
    pt_sampling sp;
    pt_sampling_default(&sp);
    sp.temp = 0;
    int bad = 0;
    pt_sampler *plain = pt_sampler_new(&sp, nv, err, sizeof err);
    double t_plain = 1e9;
    for (int rep = 0; rep < 3; rep++) {
        double t = run_loop(plain, ids.v, ids.n, logits, base, nv, &bad);
        if (t < t_plain) t_plain = t;
    }
    bad = 0;
    sp.grammar = g;
    double cold = 1e9, warm = 1e9;
    for (int rep = 0; rep < 3; rep++) { /* the best of 3: the machine is shared */
        pt_sampler *gs = pt_sampler_new(&sp, nv, err, sizeof err);
        double c = run_loop(gs, ids.v, ids.n, logits, base, nv, &bad);
        pt_sampler_reset(gs);
        double w = run_loop(gs, ids.v, ids.n, logits, base, nv, &bad);
        if (c < cold) cold = c;
        if (w < warm) warm = w;
        pt_sampler_free(gs);
    }
    out->n_vocab = nv;
    out->cold_us = (cold - t_plain) * 1e6;
    out->warm_us = (warm - t_plain) * 1e6;
    printf("  %-30s %7d tokens  trie+grammar %6.1f ms once;  %zu-token instance: %7.1f us/token "
           "cold, %6.1f warm (sampling without grammar %.1f us)%s\n",
           label, nv, t_build * 1e3, ids.n, out->cold_us, out->warm_us, t_plain * 1e6,
           bad ? "  REJECTED TOKENS" : "");
    pt_sampler_free(plain);
    free(base);
    free(logits);
    pt_ids_free(&ids);
    pt_grammar_free(g);
    pt_engine_close(e);
    return bad ? -1 : 0;
}

int main(int argc, char **argv) {
    const char *dir = getenv("PETREL_FIXTURES");
    if (!dir || !*dir) dir = "tests/fixtures";
    char gemma[1024];
    snprintf(gemma, sizeof gemma, "%s/tokenizer/ggml-vocab-gemma-4.gguf", dir);
    const char *demo = "models/petrel-demo-glm.gguf";
    printf("grammar (JSON Schema, 20 fields) cost per token, one thread, greedy sampler:\n");
    vres rg = {0}, rd = {0};
    int fail = bench_vocab("gemma-4 (262,144)", gemma, &rg);
    fail |= bench_vocab("demo model", demo, &rd);
    double dm = decode_ms(demo);
    if (dm > 0)
        printf("  demo model decode %.3f ms/token: grammar %.1f%% cold, %.1f%% warm\n", dm,
               rd.cold_us / 10 / dm, rd.warm_us / 10 / dm);
    for (int i = 1; i < argc; i++) {
        double m = decode_ms(argv[i]);
        vres r = {0};
        if (bench_vocab(argv[i], argv[i], &r)) continue;
        if (m > 0)
            printf("  %s decode %.1f ms/token: its vocabulary's grammar %.2f%% cold, %.2f%% warm\n",
                   argv[i], m, r.cold_us / 10 / m, r.warm_us / 10 / m);
        if (m > 0 && r.n_vocab == rg.n_vocab && rg.cold_us > 0)
            printf("  %s decode %.1f ms/token: Gemma 4's vocabulary's grammar %.2f%% cold, %.2f%% "
                   "warm (the target: < 10%%)\n",
                   argv[i], m, rg.cold_us / 10 / m, rg.warm_us / 10 / m);
    }
    return fail ? 1 : 0;
}
