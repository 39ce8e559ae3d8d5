/* textcli.h — what `petrel generate` (text mode), `petrel chat` and `petrel
 * serve` share: the engine and sampling flags, opening a model (its
 * vocabulary, chat format and sampling defaults come with the engine), the
 * per-turn statistics line, and the SIGINT flag. Public API only (petrel.h),
 * plus the front ends' shared turn (front/front.h). */
#ifndef PT_TEXTCLI_H
#define PT_TEXTCLI_H

#include <signal.h>
#include <stdio.h>

#include "front/front.h"
#include "petrel.h"

#define TCLI_MAX_STOPS 32

typedef struct tcli_opts {
    const char *model;
    pt_engine_params ep;
    long threads, n_ctx, n_batch;
    int kernels;
    /* sampling: the values the user gave (the rest come from the model or the defaults) */
    pt_sampling sp;
    unsigned sp_set;         /* PT_SAMPLING_* bits: the fields of sp the user gave */
    const char *chat_format; /* --chat-format: overrides the model's; NULL: the model's */
    const char *stops[TCLI_MAX_STOPS];
    int n_stops;
    long n_gen; /* -1: until EOG / context end */
    int think;  /* -1: the family's default */
    /* --parse-special-in-content: special-token text inside messages becomes
     * the token (fe_turn.parse_special_in_content); off: only the template's */
    int parse_special_in_content;
    int stats; /* --stats: expert-cache details too */
} tcli_opts;

void tcli_opts_init(tcli_opts *o);
/* Try to consume argv[*i] (and its value) as a model/engine/sampling flag.
 * 1: consumed; 0: not one of these; -1: bad value (message printed). */
int tcli_parse(const char *cmd, int argc, char **argv, int *i, tcli_opts *o);
/* The help lines for those flags. */
void tcli_usage(FILE *f);

typedef struct tcli_model {
    pt_engine *e;
    pt_session *s;
    pt_gen *g;
    const char *format; /* chat format in effect ("none": raw text only) */
    pt_sampling sp;     /* in effect: the model's defaults, then the user's flags */
} tcli_model;

/* Open engine (with its vocabulary), session (n_ctx default 4096, capped by the
 * engine) and generator. Prints the error; returns 0 or CLI_ERROR. */
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

/* "eog", "length", "stop", "context", "interrupted" for a PT_GEN_* reason. */
const char *tcli_reason_name(int reason);

#endif
