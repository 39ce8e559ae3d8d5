/* textcli.h — what `petrel generate` (text mode), `petrel chat` and `petrel
 * serve` share (`bench` and `perplexity` the model and engine part): the engine and sampling
 * flags (their entries: options.h), opening a model (its
 * vocabulary, chat format and sampling defaults come with the engine), the
 * per-turn statistics line, the SIGINT flag, and how a chat answer is shown
 * (the answer on stdout, the reasoning on stderr). Public API (petrel.h), the
 * front ends' shared turn (front/front.h) and streaming splitter (front/split.h:
 * the one place that knows how a family's reasoning tags stream). */
#ifndef PT_TEXTCLI_H
#define PT_TEXTCLI_H

#include <signal.h>
#include <stdio.h>

#include "front/front.h"
#include "front/split.h"
#include "options.h"
#include "petrel.h"

#define TCLI_MAX_STOPS 32

typedef struct tcli_opts {
    const char *model;         /* -m, or set by tcli_resolve_model */
    const char *hf;            /* -hf OWNER/NAME[:QUANT]: a model of the Hugging Face Hub */
    char hf_path[PT_PATH_MAX]; /* where -hf's model is in the cache */
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
    /* seconds a prompt's evaluation runs before its progress line shows (PETREL_PROGRESS_AFTER;
     * default 1; the tests set 0) */
    double progress_after;
    long draft; /* --draft N: MTP draft length; -1: TCLI_DEFAULT_DRAFT when the model has an MTP
                   head */
    /* the options of each exclusive pair given so far (bit OPT_* of options.h): one of
     * --greedy / --temp T>0, --expert-slots / --mmap-experts, --pack / --no-pack,
     * --pin-gb / --no-pin; both is a usage error, not "the last one wins" */
    uint64_t given;
    /* constrained decoding (generate and chat only): the GBNF text of --grammar /
     * --grammar-file, or made from -j/--json-schema / --json-schema-file (checked when parsed);
     * malloc'd, freed by tcli_opts_free */
    char *grammar;
    const char *grammar_flag; /* the flag it came from, for messages */
} tcli_opts;

void tcli_opts_init(tcli_opts *o);
void tcli_opts_free(tcli_opts *o);
/* Store a model, engine, sampling or turn option (OPT_MODEL up to OPT_SHARED_END), checking
 * what involves the options before it (the exclusive pairs, one grammar). 0, or -1 with the
 * message printed (a usage error). */
int tcli_option(tcli_opts *o, const cli_args *a, const cli_val *v);
/* The model to open, once the flags are parsed: -hf's (taken from the cache, pulled into it
 * first when missing: src/cli/hub.h), else -m's, else the demo model (CLI_DEFAULT_MODEL).
 * 0, or the exit status with the message printed (-m with -hf, no model: CLI_USAGE). */
int tcli_resolve_model(tcli_opts *o, const char *cmd);

typedef struct tcli_model {
    pt_engine *e;
    pt_session *s;
    pt_gen *g;
    const char *format;    /* chat format in effect ("none": raw text only) */
    pt_sampling sp;        /* in effect: the model's defaults, then the user's flags */
    unsigned char *markup; /* [vocab] the control tokens a chat reply shows
                              (pt_gen_opts.show_control); NULL without a chat format */
    pt_grammar *grammar;   /* the options' grammar compiled for the engine (sp.grammar), or NULL */
} tcli_model;

/* The engine's parameters the options say (the model, threads, kernels, context). */
pt_engine_params tcli_engine_params(const tcli_opts *o);
/* "streamed (16 slots/layer, io_uring, O_DIRECT, pack)": how the experts are read. */
void tcli_experts_how(const pt_stats *st, char *out, size_t cap);

/* Open engine (with its vocabulary), session (n_ctx default: the model's training context,
 * as the plan allows) and generator. Prints the error; returns 0 or CLI_ERROR. */
int tcli_open(const tcli_opts *o, tcli_model *m, int quiet);
void tcli_close(tcli_model *m);

/* One line of statistics for a prefill + generation. */
typedef struct tcli_turn {
    int n_prompt, n_reused, n_gen;
    double t_start, t_prefilled, t_first, t_end;
    int reason;
} tcli_turn;
/* answer (may be NULL): with json, its content and reasoning as fields too. */
void tcli_print_stats(FILE *f, const tcli_model *m, const tcli_turn *t, int json, int verbose,
                      const pt_chat_parsed *answer);

/* ===== Progress of a long prompt =====
 * Once a prompt's evaluation has run `after` seconds, a line on stderr: the
 * tokens done of the prompt's (the reused prefix counts as done), tokens per
 * second, and the time left. On a terminal the line is rewritten in place
 * (at most ten times a second) and erased when the prompt is done; otherwise
 * (a log, a pipe) a line is written at each tenth of the way or every 5 s,
 * and a last one when the prompt is done, with no control characters.
 * stdout is never touched. */
typedef struct tcli_progress {
    double after;  /* seconds before anything shows */
    int tty;       /* stderr is a terminal */
    double t0;     /* pt_now() when the evaluation began */
    double t_last; /* when the line was last written */
    int tenth;     /* (not a terminal) the last tenth of the way written */
    int live;      /* (a terminal) the line is on the screen */
} tcli_progress;

void tcli_progress_init(tcli_progress *p, double after);
/* pt_prompt_progress_fn (ud: the tcli_progress): pt_session_set_progress(s, tcli_progress_cb, p).
 */
void tcli_progress_cb(void *ud, const pt_prompt_progress *pr);
/* After the turn: erase a line left on a terminal (the prompt was stopped or failed). */
void tcli_progress_end(tcli_progress *p);

/* ===== A chat answer as it streams =====
 * The answer (content) goes to stdout, exactly what the model answered: no
 * reasoning tags, no channel markers. The reasoning goes to stderr when shown
 * (dimmed when stderr is a terminal, so the two read apart on one screen),
 * ended by a newline before anything else is printed there. */
typedef struct tcli_answer {
    fe_split split;     /* the family's markup, held back until it can be told apart */
    const char *format; /* chat format */
    int show;           /* reasoning to stderr */
    int dim;            /* stderr is a terminal */
    int in_reasoning;   /* reasoning printed and its line not ended yet */
    int reasoning_nl;   /* the last reasoning byte printed was '\n' */
} tcli_answer;

/* show: print the reasoning on stderr. */
void tcli_answer_init(tcli_answer *a, const char *format, int show);
/* fe_turn.on_prefilled (ud: the tcli_answer): starts the answer's split. */
int tcli_answer_prefilled(void *ud, int in_reasoning);
/* fe_turn.emit (ud: the tcli_answer). */
int tcli_answer_emit(void *ud, const char *s, size_t n);
/* The end of generation: what was held back is printed, the reasoning line
 * ended. Returns the content printed on stdout (valid until the next turn). */
const pt_buf *tcli_answer_finish(tcli_answer *a);
void tcli_answer_free(tcli_answer *a);

/* Set by SIGINT while installed; tcli_sigint(1) installs (no SA_RESTART, so a
 * blocked read returns), tcli_sigint(0) restores the default. */
extern volatile sig_atomic_t tcli_interrupted;
void tcli_sigint(int on);

/* "eog", "length", "stop", "context", "interrupted" for a PT_GEN_* reason. */
const char *tcli_reason_name(int reason);

#endif
