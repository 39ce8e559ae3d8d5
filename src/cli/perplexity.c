/* perplexity.c — `petrel perplexity`: a model's perplexity over a text, computed the way
 * llama.cpp's llama-perplexity does so the numbers compare directly:
 *
 *   petrel perplexity [-m MODEL] -f TEXT [-c N] [-b N] [--chunks N] [engine flags]
 *
 * The text is tokenized whole (BOS added when the vocabulary adds one), cut into chunks of
 * n_ctx tokens (at least two), each evaluated from an empty cache with its first token
 * replaced by BOS; the second half of each chunk is scored: the negative log-likelihood of
 * every next token under the log-softmax of the logits (float max, double sum of expf, as
 * llama.cpp). Prints "[k]PPL," after each chunk and "Final estimate: PPL = P +/- E", E being
 * PPL times the standard error of the mean NLL. Experts stream like in every other command;
 * by batch invariance the numbers do not depend on -b.
 *
 * KL divergence, in llama.cpp's file format so either program can make or read the base:
 * `--kl-divergence-base FILE` with -f writes the scored rows' log-probabilities ("_logits_",
 * n_ctx, n_vocab, n_chunk, the tokens, then per scored row two floats (scale, minimum) and
 * n_vocab (rounded up to even) 16-bit levels of the log-probabilities within 16 of the
 * maximum); adding `--kl-divergence` reads FILE instead (its tokens, no -f) and compares this
 * model with the base: PPL(Q) and PPL(base), their ratio, mean KLD with its percentiles, Δp
 * statistics and how often the top token is the same. */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "front/helpers.h"
#include "textcli.h"

static void perplexity_usage(FILE *f) {
    fprintf(f, "usage: petrel perplexity [-m MODEL] -f TEXT [-c N] [-b N] [--chunks N] [options]\n"
               "Perplexity of MODEL over TEXT as llama-perplexity computes it: chunks of -c\n"
               "tokens (default 4096), the second half of each scored.\n"
               "  -f, --file FILE         the text ('-': standard input)\n"
               "  --chunks N              score the first N chunks only (default: all)\n"
               "  --kl-divergence-base FILE  write the scored rows' log-probabilities to FILE\n"
               "                          (llama-perplexity's format), or with --kl-divergence\n"
               "                          read them (and the tokens; no -f) and compare\n"
               "  --kl-divergence         KL divergence of MODEL from the base in FILE\n");
    tcli_usage(f);
}

static int nearest_int(float f) { /* round half to even, as llama.cpp packs the levels */
    return (int)lrintf(f);
}

/* A base row: -log p(tok), and levels[4 + n] (two floats first) written as llama.cpp does. */
static double base_row(const float *logits, int n, int32_t tok, uint16_t *levels) {
    float mx = logits[0], mn = logits[0];
    for (int i = 1; i < n; i++) {
        if (logits[i] > mx) mx = logits[i];
        if (logits[i] < mn) mn = logits[i];
    }
    if (mn < mx - 16) mn = mx - 16;
    double sum = 0.0;
    for (int i = 0; i < n; i++)
        sum += expf(logits[i] - mx);
    const float lse = (float)log(sum);
    const float min_lp = mn - mx - lse, scale = (mx - mn) / 65535.f;
    memcpy(levels, &scale, sizeof scale);
    memcpy(levels + 2, &min_lp, sizeof min_lp);
    uint16_t *q = levels + 4;
    if (scale) {
        const float inv = 1 / scale;
        for (int i = 0; i < n; i++)
            q[i] = logits[i] > mn ? (uint16_t)nearest_int(inv * (logits[i] - mn)) : 0;
    } else {
        memset(q, 0, (size_t)n * sizeof *q);
    }
    return mx + lse - logits[tok];
}

/* Running sums of the comparison with a base (llama.cpp's kl_divergence_result). */
typedef struct kld_sums {
    double nll, nll2, nll_base, nll_base2, nll_nll_base, kld, kld2, p_diff, p_diff2, p_diff4;
    float max_p_diff;
    long same_top, count;
} kld_sums;

/* One row against its base levels; returns the row's KLD, *p_diff its Δp. */
static double kld_row(const float *logits, int n, const uint16_t *levels, int32_t tok, kld_sums *k,
                      float *p_diff) {
    float mx = logits[0];
    int imax = 0;
    for (int i = 1; i < n; i++)
        if (logits[i] > mx) mx = logits[i], imax = i;
    double sum_exp = 0.0;
    for (int i = 0; i < n; i++)
        sum_exp += expf(logits[i] - mx);
    const float lse = (float)log(sum_exp);
    float scale, min_lp;
    memcpy(&scale, levels, sizeof scale);
    memcpy(&min_lp, levels + 2, sizeof min_lp);
    const uint16_t *q = levels + 4;
    const float nll = mx + lse - logits[tok], nll_base = -(scale * q[tok] + min_lp);
    k->nll += nll, k->nll2 += nll * nll;
    k->nll_base += nll_base, k->nll_base2 += nll_base * nll_base;
    k->nll_nll_base += nll * nll_base;
    mx += lse;
    double sum = 0;
    int imax_base = -1;
    float lp_base_max = 0;
    for (int i = 0; i < n; i++) {
        const float lpb = scale * q[i] + min_lp;
        if (i == 0 || lpb > lp_base_max) lp_base_max = lpb, imax_base = i;
        if (lpb > -16.f) sum += expf(lpb) * (lpb - logits[i] + mx);
    }
    k->kld += sum, k->kld2 += sum * sum;
    k->count++;
    k->same_top += imax == imax_base;
    const float pd = expf(-nll) - expf(-nll_base);
    k->p_diff += pd;
    k->p_diff2 += (double)pd * pd;
    k->p_diff4 += (double)pd * pd * pd * pd;
    if (fabsf(pd) > k->max_p_diff) k->max_p_diff = fabsf(pd);
    *p_diff = pd;
    return sum;
}

static void mean_unc(double sum, double sum2, long count, double *m, double *u) {
    *m = count ? sum / count : 0;
    double d = count ? sum2 / count - *m * *m : 0;
    *u = d > 0 && count > 10 ? sqrt(d / (count - 1)) : 0;
}

static double covariance(double a, double b, double ab, long count) {
    if (count < 10) return 0;
    return (ab / count - (a / count) * (b / count)) / (count - 1);
}

static int cmp_float(const void *a, const void *b) {
    float x = *(const float *)a, y = *(const float *)b;
    return (x > y) - (x < y);
}

static float percentile(const float *v, size_t n, float fraction) {
    if (fraction <= 0) return v[0];
    if (fraction >= 1) return v[n - 1];
    float p = fraction * (float)(n - 1);
    size_t ip = (size_t)p;
    p -= (float)ip;
    return (1 - p) * v[ip] + p * v[ip + 1 < n ? ip + 1 : n - 1];
}

/* The running line after each chunk and the statistics at the end, as llama.cpp prints them. */
static void kld_line(long chunk, const kld_sums *k) {
    double lp, lpu, lb, lbu, kl, klu, mse, mseu;
    mean_unc(k->nll, k->nll2, k->count, &lp, &lpu);
    mean_unc(k->nll_base, k->nll_base2, k->count, &lb, &lbu);
    double cov = covariance(k->nll, k->nll_base, k->nll_nll_base, k->count);
    mean_unc(k->kld, k->kld2, k->count, &kl, &klu);
    mean_unc(k->p_diff2, k->p_diff4, k->count, &mse, &mseu);
    double rms = sqrt(mse), top = (double)k->same_top / k->count;
    printf("%4ld    %9.4lf ± %9.4lf    %10.5lf ± %10.5lf    %10.5lf ± %10.5lf    %6.3lf ± %6.3lf %%"
           "    %6.3lf ± %6.3lf %%\n",
           chunk, exp(lp), exp(lp) * lpu, lp - lb, sqrt(lpu * lpu + lbu * lbu - 2 * cov), kl, klu,
           100 * rms, rms > 0 ? 100 * 0.5 / rms * mseu : 0, 100 * top,
           100 * sqrt(top * (1 - top) / (k->count - 1)));
    fflush(stdout);
}

static void kld_report(const kld_sums *k, float *klds, float *pdiffs, size_t n) {
    if (k->count < 100) return; /* no statistics on so few values, as llama.cpp */
    qsort(klds, n, sizeof *klds, cmp_float);
    qsort(pdiffs, n, sizeof *pdiffs, cmp_float);
    double lp, lpu, lb, lbu, kl, klu, pd, pdu, mse, mseu;
    mean_unc(k->nll, k->nll2, k->count, &lp, &lpu);
    mean_unc(k->nll_base, k->nll_base2, k->count, &lb, &lbu);
    double cov = covariance(k->nll, k->nll_base, k->nll_nll_base, k->count);
    double ppl = exp(lp), pplu = ppl * lpu, pb = exp(lb), pbu = pb * lbu;
    double ru = sqrt(lpu * lpu + lbu * lbu - 2 * cov);
    printf("====== Perplexity statistics ======\n");
    printf("Mean PPL(Q)                   : %10.6lf ± %10.6lf\n", ppl, pplu);
    printf("Mean PPL(base)                : %10.6lf ± %10.6lf\n", pb, pbu);
    printf("Cor(ln(PPL(Q)), ln(PPL(base))): %6.2lf%%\n", 100.0 * cov / (lpu * lbu));
    printf("Mean ln(PPL(Q)/PPL(base))     : %10.6lf ± %10.6lf\n", lp - lb, ru);
    printf("Mean PPL(Q)/PPL(base)         : %10.6lf ± %10.6lf\n", exp(lp - lb), exp(lp - lb) * ru);
    printf("Mean PPL(Q)-PPL(base)         : %10.6lf ± %10.6lf\n\n", ppl - pb,
           sqrt(pplu * pplu + pbu * pbu - 2.0 * ppl * pb * cov));
    mean_unc(k->kld, k->kld2, k->count, &kl, &klu);
    float med = n % 2 == 0 ? 0.5f * (klds[n / 2] + klds[n / 2 - 1]) : klds[n / 2];
    printf("====== KL divergence statistics ======\n");
    printf("Mean    KLD: %10.6lf ± %10.6lf\n", kl, klu);
    printf("Maximum KLD: %10.6f\n", klds[n - 1]);
    const float kf[] = {0.999f, 0.990f, 0.950f, 0.900f};
    const char *kn[] = {"99.9%", "99.0%", "95.0%", "90.0%"};
    for (int i = 0; i < 4; i++)
        printf("%s   KLD: %10.6f\n", kn[i], percentile(klds, n, kf[i]));
    printf("Median  KLD: %10.6f\n", med);
    const float lf[] = {0.100f, 0.050f, 0.010f, 0.001f};
    const char *ln[] = {"10.0%", " 5.0%", " 1.0%", " 0.1%"};
    for (int i = 0; i < 4; i++)
        printf("%s   KLD: %10.6f\n", ln[i], percentile(klds, n, lf[i]));
    printf("Minimum KLD: %10.6f\n\n", klds[0]);
    mean_unc(k->p_diff, k->p_diff2, k->count, &pd, &pdu);
    float pmed = n % 2 == 0 ? 0.5f * (pdiffs[n / 2] + pdiffs[n / 2 - 1]) : pdiffs[n / 2];
    printf("====== Token probability statistics ======\n");
    printf("Mean    Δp: %6.3lf ± %5.3lf %%\n", 100.0 * pd, 100.0 * pdu);
    printf("Maximum Δp: %6.3lf%%\n", 100.0 * pdiffs[n - 1]);
    const float pf[] = {0.999f, 0.990f, 0.950f, 0.900f, 0.750f};
    const char *pn[] = {"99.9%", "99.0%", "95.0%", "90.0%", "75.0%"};
    for (int i = 0; i < 5; i++)
        printf("%s   Δp: %6.3lf%%\n", pn[i], 100.0 * percentile(pdiffs, n, pf[i]));
    printf("Median  Δp: %6.3lf%%\n", 100.0 * pmed);
    const float qf[] = {0.250f, 0.100f, 0.050f, 0.010f, 0.001f};
    const char *qn[] = {"25.0%", "10.0%", " 5.0%", " 1.0%", " 0.1%"};
    for (int i = 0; i < 5; i++)
        printf("%s   Δp: %6.3lf%%\n", qn[i], 100.0 * percentile(pdiffs, n, qf[i]));
    printf("Minimum Δp: %6.3lf%%\n", 100.0 * pdiffs[0]);
    mean_unc(k->p_diff2, k->p_diff4, k->count, &mse, &mseu);
    double rms = sqrt(mse), top = (double)k->same_top / k->count;
    printf("RMS Δp    : %6.3lf ± %5.3lf %%\n", 100.0 * rms, 100.0 * 0.5 / rms * mseu);
    printf("Same top p: %6.3lf ± %5.3lf %%\n", 100.0 * top,
           100.0 * sqrt(top * (1.0 - top) / (k->count - 1)));
}

/* -log p(tok) under the log-softmax of logits[n] (llama.cpp's order of operations). */
static double nll_of(const float *logits, int n, int32_t tok) {
    float mx = logits[0];
    for (int i = 1; i < n; i++)
        if (logits[i] > mx) mx = logits[i];
    double sum = 0.0;
    for (int i = 0; i < n; i++)
        sum += expf(logits[i] - mx);
    return -(logits[tok] - mx - log(sum));
}

/* The base file's header and tokens (--kl-divergence): 0, or -1 with the reason printed. */
static int read_base(FILE *f, const char *path, int *n_ctx, int *n_vocab, int *n_chunk,
                     int32_t **tokens) {
    char magic[8];
    uint32_t nc;
    int32_t nv, nk;
    if (fread(magic, 1, 8, f) != 8 || memcmp(magic, "_logits_", 8))
        return cli_error("%s: not a file of log-probabilities (no _logits_ header)", path), -1;
    if (fread(&nc, 4, 1, f) != 1 || fread(&nv, 4, 1, f) != 1 || fread(&nk, 4, 1, f) != 1 ||
        nc < 4 || nc > (1u << 24) || nv < 1 || nk < 1 || (uint64_t)nc * (uint64_t)nk > (1u << 30))
        return cli_error("%s: a truncated or implausible header", path), -1;
    *tokens = malloc((size_t)nc * (size_t)nk * sizeof **tokens);
    if (!*tokens) return cli_error("out of memory"), -1;
    if (fread(*tokens, sizeof **tokens, (size_t)nc * (size_t)nk, f) != (size_t)nc * (size_t)nk)
        return cli_error("%s: truncated in its tokens", path), -1;
    *n_ctx = (int)nc, *n_vocab = nv, *n_chunk = nk;
    return 0;
}

int cmd_perplexity(int argc, char **argv) {
    tcli_opts o;
    tcli_opts_init(&o);
    const char *file = NULL, *base = NULL;
    long chunks = -1;
    int kld_mode = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            perplexity_usage(stdout);
            return CLI_OK;
        }
        if (!strcmp(a, "--kl-divergence")) {
            kld_mode = 1;
            continue;
        }
        if (!strcmp(a, "-f") || !strcmp(a, "--file") || !strcmp(a, "--chunks") ||
            !strcmp(a, "--kl-divergence-base")) {
            if (!v) {
                fprintf(stderr, "petrel perplexity: %s needs a value\n", a);
                return CLI_USAGE;
            }
            i++;
            if (!strcmp(a, "--kl-divergence-base")) {
                base = v;
                continue;
            }
            if (strcmp(a, "--chunks")) {
                file = v;
                continue;
            }
            char *end = NULL;
            errno = 0;
            chunks = strtol(v, &end, 10);
            if (errno || end == v || *end || chunks < 1) {
                fprintf(stderr,
                        "petrel perplexity: invalid value '%s' for --chunks: expected an integer "
                        "of 1 or more\n",
                        v);
                return CLI_USAGE;
            }
            continue;
        }
        int r = tcli_parse("perplexity", argc, argv, &i, &o);
        if (r < 0) return CLI_USAGE;
        if (r == 0) {
            fprintf(stderr, "petrel perplexity: unknown option '%s'\n", a);
            perplexity_usage(stderr);
            return CLI_USAGE;
        }
    }
    if (kld_mode && !base) {
        fprintf(stderr, "petrel perplexity: --kl-divergence needs --kl-divergence-base FILE\n");
        return CLI_USAGE;
    }
    if (kld_mode && file) {
        fprintf(stderr, "petrel perplexity: --kl-divergence takes its tokens from the base file; "
                        "leave -f out\n");
        return CLI_USAGE;
    }
    if (!kld_mode && !file) {
        fprintf(stderr, "petrel perplexity: -f TEXT is required\n");
        perplexity_usage(stderr);
        return CLI_USAGE;
    }
    int mrc = tcli_resolve_model(&o, "perplexity");
    if (mrc) return mrc;
    /* the input: the text's tokens, or the base file's */
    int rc = CLI_ERROR;
    char err[512];
    char *text = NULL;
    size_t len = 0;
    int32_t *btok = NULL;
    int b_ctx = 0, b_vocab = 0, b_chunk = 0;
    FILE *bf = NULL;
    if (kld_mode) {
        if (!(bf = fopen(base, "rb"))) return cli_error("%s: %s", base, strerror(errno));
        if (read_base(bf, base, &b_ctx, &b_vocab, &b_chunk, &btok)) {
            fclose(bf);
            free(btok);
            return CLI_ERROR;
        }
        if (o.n_ctx == 0) o.n_ctx = b_ctx;
    } else {
        pt_buf tb = {0};
        if (fe_read_file(file, 0, &tb)) {
            pt_buf_free(&tb);
            return cli_error("%s: %s", file, strerror(errno));
        }
        text = tb.v, len = tb.n;
    }
    if (o.n_ctx == 0) o.n_ctx = PT_DEFAULT_CTX;
    tcli_model m;
    memset(&m, 0, sizeof m);
    pt_ids ids = {0};
    float *logits = NULL, *klds = NULL, *pdiffs = NULL;
    uint16_t *levels = NULL;
    int32_t *chunk = NULL;
    FILE *out = NULL;
    if (tcli_open(&o, &m, 0)) goto out;
    int n_ctx = pt_session_n_ctx(m.s);
    const int n_vocab = pt_vocab_size(m.e), n_out = pt_engine_n_vocab(m.e);
    /* every row's logits are kept ([n_batch][n_vocab]): a prompt block the plan
     * made large for streaming is capped unless -b asked for it */
    int n_batch = pt_session_n_batch(m.s);
    if (!o.n_batch && n_batch > 512) n_batch = 512;
    const int32_t bos = pt_token_bos(m.e);
    int add_bos;
    long n_chunk;
    const int32_t *toks;
    if (kld_mode) {
        if (b_ctx > n_ctx) {
            cli_error("%s was computed with a context of %d; this session holds %d (raise -c)",
                      base, b_ctx, n_ctx);
            goto out;
        }
        if (b_vocab != n_vocab) {
            cli_error("%s: a vocabulary of %d tokens; this model has %d", base, b_vocab, n_vocab);
            goto out;
        }
        n_ctx = b_ctx;
        n_chunk = b_chunk;
        toks = btok;
        /* as llama.cpp: BOS when the vocabulary adds one */
        pt_ids probe = {0};
        add_bos = bos >= 0 && !pt_tokenize(m.e, "a", 1, PT_TOKENIZE_ADD_SPECIAL, &probe, NULL, 0) &&
                  probe.n > 0 && probe.v[0] == bos;
        pt_ids_free(&probe);
    } else {
        if (pt_tokenize(m.e, text, len, PT_TOKENIZE_ADD_SPECIAL, &ids, err, sizeof err)) {
            cli_error("%s: %s", file, err);
            goto out;
        }
        /* BOS starts every chunk when the vocabulary adds one (as it did to the text) */
        add_bos = bos >= 0 && ids.n > 0 && ids.v[0] == bos;
        if ((long)ids.n < 2L * n_ctx) {
            cli_error("%s: %zu tokens; perplexity with a context of %d needs at least %d", file,
                      ids.n, n_ctx, 2 * n_ctx);
            goto out;
        }
        n_chunk = (long)ids.n / n_ctx;
        toks = ids.v;
    }
    if (chunks > 0 && chunks < n_chunk) n_chunk = chunks;
    const int first = n_ctx / 2, n_scored = n_ctx - 1 - first;
    const size_t nv = 2 * (((size_t)n_vocab + 1) / 2) + 4; /* 16-bit words per base row */
    fprintf(stderr, "petrel: %s over %ld chunks, n_ctx=%d, batch_size=%d\n",
            kld_mode ? "KL divergence" : "perplexity", n_chunk, n_ctx, n_batch);
    logits = malloc((size_t)n_batch * (size_t)n_out * sizeof *logits);
    chunk = malloc((size_t)n_ctx * sizeof *chunk);
    if (base) levels = malloc((size_t)n_scored * nv * sizeof *levels);
    if (kld_mode) {
        klds = malloc((size_t)n_scored * (size_t)n_chunk * sizeof *klds);
        pdiffs = malloc((size_t)n_scored * (size_t)n_chunk * sizeof *pdiffs);
    }
    if (!logits || !chunk || (base && !levels) || (kld_mode && (!klds || !pdiffs))) {
        cli_error("out of memory");
        goto out;
    }
    if (base && !kld_mode) {
        /* the base file llama.cpp's --kl-divergence reads */
        int32_t hdr[3] = {n_ctx, n_vocab, (int32_t)n_chunk};
        if (!(out = fopen(base, "wb")) || fwrite("_logits_", 1, 8, out) != 8 ||
            fwrite(hdr, 4, 3, out) != 3 ||
            fwrite(toks, sizeof *toks, (size_t)n_chunk * n_ctx, out) != (size_t)n_chunk * n_ctx) {
            cli_error("%s: %s", base, strerror(errno));
            goto out;
        }
    }
    double nll = 0, nll2 = 0;
    long count = 0;
    kld_sums k = {0};
    double t0 = pt_now();
    for (long c = 0; c < n_chunk; c++) {
        memcpy(chunk, toks + c * n_ctx, (size_t)n_ctx * sizeof *chunk);
        if (add_bos) chunk[0] = bos;
        if (kld_mode &&
            fread(levels, sizeof *levels, (size_t)n_scored * nv, bf) != (size_t)n_scored * nv) {
            cli_error("%s: truncated in the log-probabilities of chunk %ld", base, c + 1);
            goto out;
        }
        pt_session_truncate(m.s, 0);
        /* the first half only fills the cache; the rest is scored row by row */
        if (pt_session_eval(m.s, chunk, first, NULL, 0, NULL, err, sizeof err)) {
            cli_error("%s", err);
            goto out;
        }
        for (int p = first; p < n_ctx - 1; p += n_batch) {
            int n = n_ctx - 1 - p < n_batch ? n_ctx - 1 - p : n_batch;
            if (pt_session_eval(m.s, chunk + p, n, logits, 1, NULL, err, sizeof err)) {
                cli_error("%s", err);
                goto out;
            }
            for (int r = 0; r < n; r++) {
                /* the next token of the original text (only position 0 became BOS) */
                const float *row = logits + (size_t)r * n_out;
                const int32_t next = toks[c * n_ctx + p + r + 1];
                const size_t at = (size_t)(p - first + r);
                double v;
                if (kld_mode) {
                    size_t slot = (size_t)c * n_scored + at;
                    klds[slot] =
                        (float)kld_row(row, n_vocab, levels + at * nv, next, &k, &pdiffs[slot]);
                    continue;
                }
                v = base ? base_row(row, n_vocab, next, levels + at * nv)
                         : nll_of(row, n_vocab, next);
                nll += v, nll2 += v * v;
            }
            count += n;
        }
        if (c == 0) {
            double dt = pt_now() - t0;
            fprintf(stderr, "petrel: %.2f seconds per pass - ETA %.2f minutes\n", dt,
                    dt * n_chunk / 60.0);
            if (kld_mode)
                printf("\nchunk             PPL               ln(PPL(Q)/PPL(base))          KL "
                       "Divergence              Δp RMS            Same top p\n");
        }
        if (kld_mode) {
            kld_line(c + 1, &k);
            continue;
        }
        if (out &&
            fwrite(levels, sizeof *levels, (size_t)n_scored * nv, out) != (size_t)n_scored * nv) {
            cli_error("%s: %s", base, strerror(errno));
            goto out;
        }
        printf("[%ld]%.4lf,", c + 1, exp(nll / count));
        fflush(stdout);
    }
    printf("\n");
    if (kld_mode) {
        kld_report(&k, klds, pdiffs, (size_t)k.count);
    } else {
        double mean = nll / count, var = nll2 / count - mean * mean, ppl = exp(mean);
        if (var > 0)
            printf("Final estimate: PPL = %.4lf +/- %.5lf\n", ppl, sqrt(var / (count - 1)) * ppl);
        else
            printf("Final estimate: PPL = %.4lf\n", ppl);
    }
    if (out) {
        FILE *o2 = out;
        out = NULL;
        if (fclose(o2)) {
            cli_error("%s: %s", base, strerror(errno));
            goto out;
        }
    }
    rc = CLI_OK;
out:
    if (out) fclose(out);
    if (bf) fclose(bf);
    free(logits);
    free(chunk);
    free(levels);
    free(klds);
    free(pdiffs);
    free(btok);
    pt_ids_free(&ids);
    free(text);
    tcli_close(&m);
    return rc;
}
