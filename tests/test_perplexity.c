/* test_perplexity.c — `petrel perplexity` against llama.cpp's llama-perplexity on the demo
 * model over the held-out KJV chapters (tests/data/perplexity/: the text, llama.cpp's output
 * and base file, and the commands that made them), the KL-divergence file format both ways,
 * the number's independence from -b, and bad input. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "test.h"

#define DEMO "models/petrel-demo-glm.gguf"
#define TEXT "tests/data/perplexity/kjv-heldout.txt"
#define LLAMA_OUT "tests/data/perplexity/llama-perplexity-c128.txt"
#define LLAMA_BASE "tests/data/perplexity/llama-base-c128-4chunks.kld"

static char out[1 << 16];

static const char *bin(void) {
    const char *b = getenv("PETREL_BIN");
    return b && *b ? b : "build/petrel";
}

/* The number after `key` in s, or NAN. */
static double number_after(const char *s, const char *key) {
    const char *p = s ? strstr(s, key) : NULL;
    return p ? strtod(p + strlen(key), NULL) : NAN;
}

static void perplexity_matches_llama(void) {
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "%s perplexity -m %s -f %s -c 128 2>/dev/null", bin(), DEMO, TEXT);
    CHECK(t_run(cmd, out, sizeof out) == 0);
    double ours = number_after(out, "Final estimate: PPL = ");
    CHECK_STR_CONTAINS(out, "[1]");
    char *ref = t_read_file(LLAMA_OUT, NULL);
    double theirs = number_after(ref, "Final estimate: PPL = ");
    CHECKF(ref && isfinite(theirs), "%s has no final estimate", LLAMA_OUT);
    CHECKF(fabs(ours / theirs - 1) < 1e-3, "petrel %.4f, llama.cpp %.4f (%.4f%% apart)", ours,
           theirs, 100 * fabs(ours / theirs - 1));
    printf("  perplexity over the held-out chapters, -c 128: petrel %.4f, llama.cpp %.4f\n", ours,
           theirs);
    free(ref);
    /* the scored rows in batches of 7: the same number (batch invariance) */
    snprintf(cmd, sizeof cmd, "%s perplexity -m %s -f %s -c 128 -b 7 --chunks 20 2>/dev/null",
             bin(), DEMO, TEXT);
    CHECK(t_run(cmd, out, sizeof out) == 0);
    char b7[256];
    const char *f = strstr(out, "Final estimate");
    snprintf(b7, sizeof b7, "%s", f ? f : "");
    snprintf(cmd, sizeof cmd, "%s perplexity -m %s -f %s -c 128 --chunks 20 2>/dev/null", bin(),
             DEMO, TEXT);
    CHECK(t_run(cmd, out, sizeof out) == 0);
    CHECK_STR_CONTAINS(out, b7);
}

/* llama.cpp's base file (4 chunks) read by petrel: the same model gives a KLD near 0 (1.9e-4:
 * the two engines' float rounding) and the same top token almost everywhere; petrel's own base
 * file round-trips to ~0 (only the 16-bit levels' rounding). */
static void perplexity_kl_divergence(void) {
    char cmd[4096], base[512];
    snprintf(cmd, sizeof cmd,
             "%s perplexity -m %s -c 128 --kl-divergence-base %s --kl-divergence 2>/dev/null",
             bin(), DEMO, LLAMA_BASE);
    CHECK(t_run(cmd, out, sizeof out) == 0);
    double kld = number_after(out, "Mean    KLD: "), top = number_after(out, "Same top p: ");
    double ratio = number_after(out, "Mean PPL(Q)/PPL(base)         : ");
    CHECKF(fabs(kld) < 1e-3 && top > 98.0 && fabs(ratio - 1) < 2e-3,
           "against llama.cpp's base: KLD %g, same top %g%%, PPL ratio %g\n%s", kld, top, ratio,
           out);
    snprintf(base, sizeof base, "%s/base.kld", t_tmpdir());
    snprintf(cmd, sizeof cmd,
             "%s perplexity -m %s -f %s -c 128 --chunks 3 --kl-divergence-base %s 2>/dev/null && "
             "%s perplexity -m %s -c 128 --kl-divergence-base %s --kl-divergence 2>/dev/null",
             bin(), DEMO, TEXT, base, bin(), DEMO, base);
    CHECK(t_run(cmd, out, sizeof out) == 0);
    kld = number_after(out, "Mean    KLD: ");
    top = number_after(out, "Same top p: ");
    CHECKF(fabs(kld) < 1e-4 && top > 99.9, "own base: KLD %g, same top %g%%\n%s", kld, top, out);
}

static void perplexity_bad_input(void) {
    char cmd[1024], path[512];
    /* too little text for two chunks: says how much is needed */
    snprintf(path, sizeof path, "%s/short.txt", t_tmpdir());
    FILE *f = fopen(path, "w");
    fputs("In the beginning God created the heaven and the earth.\n", f);
    fclose(f);
    snprintf(cmd, sizeof cmd, "%s perplexity -m %s -f %s -c 128 2>&1", bin(), DEMO, path);
    CHECK(t_run(cmd, out, sizeof out) == 1);
    CHECK_STR_CONTAINS(out, "needs at least 256");
    /* not a base file */
    snprintf(cmd, sizeof cmd, "%s perplexity -m %s --kl-divergence-base %s --kl-divergence 2>&1",
             bin(), DEMO, path);
    CHECK(t_run(cmd, out, sizeof out) == 1);
    CHECK_STR_CONTAINS(out, "no _logits_ header");
    /* usage */
    snprintf(cmd, sizeof cmd, "%s perplexity -m %s 2>&1", bin(), DEMO);
    CHECK(t_run(cmd, out, sizeof out) == 2);
    CHECK_STR_CONTAINS(out, "-f TEXT is required");
    snprintf(cmd, sizeof cmd, "%s perplexity -m %s -f %s --chunks 0 2>&1", bin(), DEMO, TEXT);
    CHECK(t_run(cmd, out, sizeof out) == 2);
    CHECK_STR_CONTAINS(out, "--chunks");
    snprintf(cmd, sizeof cmd, "%s perplexity -m %s --kl-divergence 2>&1", bin(), DEMO);
    CHECK(t_run(cmd, out, sizeof out) == 2);
}

T_SUITE(perplexity) {
    T_ADD(perplexity_matches_llama);
    T_ADD(perplexity_kl_divergence);
    T_ADD(perplexity_bad_input);
}
