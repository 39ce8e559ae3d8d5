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
#include "options.h"
#include "textcli.h"

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

/* perplexity's own options. */
typedef struct ppl_args {
    tcli_opts *o;     /* the model and engine options */
    const char *file; /* -f: the text */
    const char *base; /* --kl-divergence-base FILE */
    long chunks;      /* --chunks; -1: all */
    int kld_mode;     /* --kl-divergence: compare with the base instead of writing it */
} ppl_args;

/* One run: the model, the tokens, the scratch and the running sums. */
typedef struct ppl_run {
    tcli_model m;
    int n_ctx, n_vocab, n_out,
        n_batch; /* tokens per chunk, vocabulary, logits a row, rows a pass */
    int32_t bos;
    int add_bos;         /* BOS replaces each chunk's first token */
    long n_chunk;        /* chunks scored */
    const int32_t *toks; /* [n_chunk * n_ctx] the text's tokens (ids.v or btok) */
    pt_ids ids;          /* the text's tokens */
    pt_buf text;         /* the text (-f) */
    int32_t *btok;       /* --kl-divergence: the base file's tokens */
    int b_ctx, b_vocab, b_chunk;
    FILE *bf;             /* --kl-divergence: the base file, at its first chunk's levels */
    FILE *out;            /* --kl-divergence-base without --kl-divergence: the file written */
    int first;            /* rows of a chunk that only fill the cache (its first half) */
    int n_scored;         /* rows of a chunk scored */
    size_t nv;            /* 16-bit words per base row */
    float *logits;        /* [n_batch][n_out] */
    int32_t *chunk;       /* [n_ctx] the chunk's tokens, BOS first */
    uint16_t *levels;     /* [n_scored][nv] a chunk's base rows */
    float *klds, *pdiffs; /* [n_chunk * n_scored] each scored row's KLD and Δp */
    double nll, nll2;
    long count;
    kld_sums k;
    char err[512];
} ppl_run;

static int ppl_option(void *ud, const cli_args *a, const cli_val *v) {
    ppl_args *p = ud;
    switch (v->id) {
    case OPT_FILE: p->file = v->s; return 0;
    case OPT_CHUNKS: p->chunks = (long)v->n; return 0;
    case OPT_KLD_BASE: p->base = v->s; return 0;
    case OPT_KLD: p->kld_mode = 1; return 0;
    default: return tcli_option(p->o, a, v);
    }
}

/* The command line into p and o: 0 to run, or -1 to stop with exit status *status (after
 * --help, or a usage error printed). */
static int ppl_parse(ppl_args *p, int argc, char **argv, int *status) {
    if (cli_parse("perplexity", argc, argv, ppl_option, p, status)) return -1;
    *status = CLI_USAGE;
    if (p->kld_mode && !p->base) {
        fprintf(stderr, "petrel perplexity: --kl-divergence needs --kl-divergence-base FILE\n");
        return -1;
    }
    if (p->kld_mode && p->file) {
        fprintf(stderr, "petrel perplexity: --kl-divergence takes its tokens from the base file; "
                        "leave -f out\n");
        return -1;
    }
    if (!p->kld_mode && !p->file) return cli_usage_error("perplexity", "-f TEXT is required"), -1;
    return (*status = tcli_resolve_model(p->o, "perplexity")) ? -1 : 0;
}

/* The input before the model opens: the text, or the base file's header and tokens (whose
 * context is the default -c). 0, or CLI_ERROR printed. */
static int ppl_input(ppl_run *r, const ppl_args *p, tcli_opts *o) {
    if (p->kld_mode) {
        if (!(r->bf = fopen(p->base, "rb"))) return cli_error("%s: %s", p->base, strerror(errno));
        if (read_base(r->bf, p->base, &r->b_ctx, &r->b_vocab, &r->b_chunk, &r->btok))
            return CLI_ERROR;
        if (o->n_ctx == 0) o->n_ctx = r->b_ctx;
    } else if (fe_read_file(p->file, 0, &r->text)) {
        return cli_error("%s: %s", p->file, strerror(errno));
    }
    if (o->n_ctx == 0) o->n_ctx = PT_DEFAULT_CTX;
    return 0;
}

/* The tokens to score, once the model is open: the text's, or the base file's checked against
 * the model; the chunks and whether BOS starts each. 0, or CLI_ERROR printed. */
static int ppl_tokens(ppl_run *r, const ppl_args *p) {
    if (p->kld_mode) {
        if (r->b_ctx > r->n_ctx)
            return cli_error("%s was computed with a context of %d; this session holds %d (raise "
                             "-c)",
                             p->base, r->b_ctx, r->n_ctx);
        if (r->b_vocab != r->n_vocab)
            return cli_error("%s: a vocabulary of %d tokens; this model has %d", p->base,
                             r->b_vocab, r->n_vocab);
        r->n_ctx = r->b_ctx, r->n_chunk = r->b_chunk, r->toks = r->btok;
        /* as llama.cpp: BOS when the vocabulary adds one */
        pt_ids probe = {0};
        r->add_bos = r->bos >= 0 &&
                     !pt_tokenize(r->m.e, "a", 1, PT_TOKENIZE_ADD_SPECIAL, &probe, NULL, 0) &&
                     probe.n > 0 && probe.v[0] == r->bos;
        pt_ids_free(&probe);
    } else {
        if (pt_tokenize(r->m.e, r->text.v, r->text.n, PT_TOKENIZE_ADD_SPECIAL, &r->ids, r->err,
                        sizeof r->err))
            return cli_error("%s: %s", p->file, r->err);
        /* BOS starts every chunk when the vocabulary adds one (as it did to the text) */
        r->add_bos = r->bos >= 0 && r->ids.n > 0 && r->ids.v[0] == r->bos;
        if ((long)r->ids.n < 2L * r->n_ctx)
            return cli_error("%s: %zu tokens; perplexity with a context of %d needs at least %d",
                             p->file, r->ids.n, r->n_ctx, 2 * r->n_ctx);
        r->n_chunk = (long)r->ids.n / r->n_ctx;
        r->toks = r->ids.v;
    }
    if (p->chunks > 0 && p->chunks < r->n_chunk) r->n_chunk = p->chunks;
    return 0;
}

/* The scratch, and the base file's header when one is written. 0, or CLI_ERROR printed. */
static int ppl_alloc(ppl_run *r, const ppl_args *p) {
    r->first = r->n_ctx / 2, r->n_scored = r->n_ctx - 1 - r->first;
    r->nv = 2 * (((size_t)r->n_vocab + 1) / 2) + 4; /* 16-bit words per base row */
    const size_t rows = (size_t)r->n_scored * (size_t)r->n_chunk;
    r->logits = malloc((size_t)r->n_batch * (size_t)r->n_out * sizeof *r->logits);
    r->chunk = malloc((size_t)r->n_ctx * sizeof *r->chunk);
    if (p->base) r->levels = malloc((size_t)r->n_scored * r->nv * sizeof *r->levels);
    if (p->kld_mode) {
        r->klds = malloc(rows * sizeof *r->klds);
        r->pdiffs = malloc(rows * sizeof *r->pdiffs);
    }
    if (!r->logits || !r->chunk || (p->base && !r->levels) ||
        (p->kld_mode && (!r->klds || !r->pdiffs)))
        return cli_error("out of memory");
    if (p->base && !p->kld_mode) {
        /* the base file llama.cpp's --kl-divergence reads */
        const int32_t hdr[3] = {r->n_ctx, r->n_vocab, (int32_t)r->n_chunk};
        const size_t nt = (size_t)r->n_chunk * (size_t)r->n_ctx;
        if (!(r->out = fopen(p->base, "wb")) || fwrite("_logits_", 1, 8, r->out) != 8 ||
            fwrite(hdr, 4, 3, r->out) != 3 || fwrite(r->toks, sizeof *r->toks, nt, r->out) != nt)
            return cli_error("%s: %s", p->base, strerror(errno));
    }
    return 0;
}

/* Chunk c: its first half into the cache, then its scored rows, n_batch at a time, each
 * scored (or compared with its base row). 0, or CLI_ERROR printed. */
static int ppl_chunk(ppl_run *r, const ppl_args *p, long c) {
    const int n_ctx = r->n_ctx, first = r->first;
    const size_t nv = r->nv, words = (size_t)r->n_scored * nv;
    memcpy(r->chunk, r->toks + c * n_ctx, (size_t)n_ctx * sizeof *r->chunk);
    if (r->add_bos) r->chunk[0] = r->bos;
    if (p->kld_mode && fread(r->levels, sizeof *r->levels, words, r->bf) != words)
        return cli_error("%s: truncated in the log-probabilities of chunk %ld", p->base, c + 1);
    pt_session_truncate(r->m.s, 0);
    if (pt_session_eval(r->m.s, r->chunk, first, NULL, 0, NULL, r->err, sizeof r->err))
        return cli_error("%s", r->err);
    for (int at = first; at < n_ctx - 1; at += r->n_batch) {
        const int n = n_ctx - 1 - at < r->n_batch ? n_ctx - 1 - at : r->n_batch;
        if (pt_session_eval(r->m.s, r->chunk + at, n, r->logits, 1, NULL, r->err, sizeof r->err))
            return cli_error("%s", r->err);
        for (int i = 0; i < n; i++) {
            /* the next token of the original text (only position 0 became BOS) */
            const float *row = r->logits + (size_t)i * r->n_out;
            const int32_t next = r->toks[c * n_ctx + at + i + 1];
            const size_t row_at = (size_t)(at - first + i), slot = (size_t)c * r->n_scored + row_at;
            if (p->kld_mode) {
                r->klds[slot] = (float)kld_row(row, r->n_vocab, r->levels + row_at * nv, next,
                                               &r->k, &r->pdiffs[slot]);
                continue;
            }
            const double v = p->base ? base_row(row, r->n_vocab, next, r->levels + row_at * nv)
                                     : nll_of(row, r->n_vocab, next);
            r->nll += v, r->nll2 += v * v;
        }
        r->count += n;
    }
    if (r->out && fwrite(r->levels, sizeof *r->levels, words, r->out) != words)
        return cli_error("%s: %s", p->base, strerror(errno));
    return 0;
}

/* Every chunk, a line after each, and the final figures. 0, or CLI_ERROR printed. */
static int ppl_score(ppl_run *r, const ppl_args *p) {
    const double t0 = pt_now();
    for (long c = 0; c < r->n_chunk; c++) {
        if (ppl_chunk(r, p, c)) return CLI_ERROR;
        if (c == 0) {
            double dt = pt_now() - t0;
            fprintf(stderr, "petrel: %.2f seconds per pass - ETA %.2f minutes\n", dt,
                    dt * r->n_chunk / 60.0);
            if (p->kld_mode)
                printf("\nchunk             PPL               ln(PPL(Q)/PPL(base))          KL "
                       "Divergence              Δp RMS            Same top p\n");
        }
        if (p->kld_mode) {
            kld_line(c + 1, &r->k);
            continue;
        }
        printf("[%ld]%.4lf,", c + 1, exp(r->nll / r->count));
        fflush(stdout);
    }
    printf("\n");
    if (p->kld_mode) {
        kld_report(&r->k, r->klds, r->pdiffs, (size_t)r->k.count);
    } else {
        const double mean = r->nll / r->count, var = r->nll2 / r->count - mean * mean;
        const double ppl = exp(mean);
        if (var > 0)
            printf("Final estimate: PPL = %.4lf +/- %.5lf\n", ppl,
                   sqrt(var / (r->count - 1)) * ppl);
        else
            printf("Final estimate: PPL = %.4lf\n", ppl);
    }
    if (r->out) {
        FILE *o2 = r->out;
        r->out = NULL;
        if (fclose(o2)) return cli_error("%s: %s", p->base, strerror(errno));
    }
    return 0;
}

static void ppl_free(ppl_run *r) {
    if (r->out) fclose(r->out);
    if (r->bf) fclose(r->bf);
    free(r->logits);
    free(r->chunk);
    free(r->levels);
    free(r->klds);
    free(r->pdiffs);
    free(r->btok);
    pt_ids_free(&r->ids);
    pt_buf_free(&r->text);
    tcli_close(&r->m);
}

/* The command on options cmd_perplexity owns. */
static int perplexity_with(tcli_opts *o, int argc, char **argv) {
    ppl_args p = {.o = o, .chunks = -1};
    int rc;
    if (ppl_parse(&p, argc, argv, &rc)) return rc;
    ppl_run r;
    memset(&r, 0, sizeof r);
    rc = ppl_input(&r, &p, o);
    if (!rc && tcli_open(o, &r.m, 0)) rc = CLI_ERROR;
    if (!rc) {
        r.n_ctx = pt_session_n_ctx(r.m.s);
        r.n_vocab = pt_vocab_size(r.m.e), r.n_out = pt_engine_n_vocab(r.m.e);
        /* every row's logits are kept ([n_batch][n_vocab]): a prompt block the plan
         * made large for streaming is capped unless -b asked for it */
        r.n_batch = pt_session_n_batch(r.m.s);
        if (!o->n_batch && r.n_batch > PPL_MAX_BATCH) r.n_batch = PPL_MAX_BATCH;
        r.bos = pt_token_bos(r.m.e);
        rc = ppl_tokens(&r, &p);
    }
    if (!rc) {
        fprintf(stderr, "petrel: %s over %ld chunks, n_ctx=%d, batch_size=%d\n",
                p.kld_mode ? "KL divergence" : "perplexity", r.n_chunk, r.n_ctx, r.n_batch);
        rc = ppl_alloc(&r, &p);
    }
    if (!rc) rc = ppl_score(&r, &p);
    ppl_free(&r);
    return rc;
}

int cmd_perplexity(int argc, char **argv) {
    tcli_opts o;
    tcli_opts_init(&o);
    const int rc = perplexity_with(&o, argc, argv);
    tcli_opts_free(&o);
    return rc;
}
