/* textcli.h — what `petrel generate` (text mode) and `petrel chat` share:
 * the engine and sampling flags, opening a model with its vocabulary and chat
 * format, the per-turn statistics line, and the SIGINT flag. */
#ifndef PT_TEXTCLI_H
#define PT_TEXTCLI_H

#include <signal.h>
#include <stdio.h>

#include "petrel.h"
#include "text/chat.h"
#include "text/gen.h"
#include "text/sampler.h"
#include "text/tokenizer.h"

#define TCLI_MAX_STOPS 32

typedef struct tcli_opts {
    const char *model;
    pt_engine_params ep;
    long threads, n_ctx, n_batch;
    int kernels;
    /* sampling: the values the user gave (the rest come from the model or the defaults) */
    sampler_params sp;
    unsigned sp_set; /* TCLI_SET_* bits */
    const char *stops[TCLI_MAX_STOPS];
    int n_stops;
    long n_gen; /* -1: until EOG / context end */
    int think;  /* -1: the family's default */
    int stats;  /* --stats: expert-cache details too */
} tcli_opts;

enum {
    TCLI_SET_TEMP = 1, TCLI_SET_TOPK = 2, TCLI_SET_TOPP = 4, TCLI_SET_MINP = 8, TCLI_SET_SEED = 16,
};

void tcli_opts_init(tcli_opts *o);
/* Try to consume argv[*i] (and its value) as a model/engine/sampling flag.
 * 1: consumed; 0: not one of these; -1: bad value (message printed). */
int tcli_parse(const char *cmd, int argc, char **argv, int *i, tcli_opts *o);
/* The help lines for those flags. */
void tcli_usage(FILE *f);

typedef struct tcli_model {
    pt_engine *e;
    pt_session *s;
    tok_vocab *v;
    chat_format fmt;
    gen *g;
    sampler_params sp; /* in effect */
} tcli_model;

/* Open engine, session (n_ctx default 4096, capped by the engine), vocabulary,
 * chat format and generator. Prints the error; returns 0 or CLI_ERROR. */
int tcli_open(const tcli_opts *o, tcli_model *m, int quiet);
void tcli_close(tcli_model *m);

/* One line of statistics for a prefill + generation. */
typedef struct tcli_turn {
    int n_prompt, n_reused, n_gen;
    double t_start, t_prefilled, t_first, t_end;
    int reason;
} tcli_turn;
void tcli_print_stats(FILE *f, const tcli_model *m, const tcli_turn *t, int json, int verbose);

/* Set by SIGINT while installed; tcli_sigint(1) installs (no SA_RESTART, so a
 * blocked read returns), tcli_sigint(0) restores the default. */
extern volatile sig_atomic_t tcli_interrupted;
void tcli_sigint(int on);

/* Replace invalid UTF-8 in s[0..n) by U+FFFD, into out (NUL-terminated).
 * Returns the number of bad sequences replaced, -1 out of memory. */
int tcli_utf8_fix(const char *s, size_t n, tok_bytes *out);

#endif
