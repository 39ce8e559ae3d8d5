/* options.h — every option of every `petrel` subcommand, in one table (options.c) that drives
 * both the parser and each subcommand's --help, so that `petrel SUBCOMMAND --help` lists
 * exactly what that subcommand accepts.
 *
 * An entry names an option (every spelling, llama.cpp's included), the value it takes and its
 * range or words, the subcommands that take it, its help text and its default, which comes
 * from the one definition the command itself starts from (the constants below, PT_DEFAULT_CTX,
 * pt_sampling_default), never from a number written again in the text. Options only tests use
 * are hidden: accepted, not listed. One spelling may mean different things to different
 * subcommands (`-n`: tokens to generate, or bench's decode lengths): those are separate
 * entries, each with its own subcommands.
 *
 * A command reads its arguments with cli_parse, which checks every value against its entry
 * (numbers and ranges, words, non-empty text) and stops the command with one line on stderr
 * and exit status 2 at anything wrong: an unknown option (the line names it and points to
 * `petrel SUBCOMMAND --help`), a missing or bad value, an argument too many. What is left to
 * the command is storing the values and the checks that involve several options. */
#ifndef PT_CLI_OPTIONS_H
#define PT_CLI_OPTIONS_H

#include <stdio.h>

/* ===== Defaults, each defined once: the commands start from these, --help prints them ===== */

#define TCLI_DEFAULT_DRAFT 3      /* --draft, when the model has an MTP head */
#define GEN_DEFAULT_TOKENS 16     /* generate --tokens without -n: tokens generated */
#define SERVE_DEFAULT_CACHE_GB 20 /* the prefix cache's bound: ~100 12k-token prompts of GLM-5 */
#define BENCH_DEFAULT_PROMPT 512  /* -p, as llama-bench */
#define BENCH_DEFAULT_GEN 128     /* -n */
#define BENCH_DEFAULT_DEPTH 0     /* -d */
#define BENCH_DEFAULT_REPS 5      /* -r */
#define PPL_MAX_BATCH 512   /* perplexity keeps every row's logits: the plan's block is capped */
#define PULL_DEFAULT_JOBS 4 /* files downloaded at a time */

/* ===== Subcommands and options ===== */

/* The subcommands; CMD(X) is subcommand CMD_X as a bit of cli_opt.cmds. */
enum {
    CMD_CHAT,
    CMD_GENERATE,
    CMD_SERVE,
    CMD_BENCH,
    CMD_PERPLEXITY,
    CMD_INSPECT,
    CMD_PACK,
    CMD_VERIFY,
    CMD_PULL,
    CMD_LIST,
    CMD_TOKENIZE,
    CMD_DETOKENIZE,
    CMD_COUNT
};
#define CMD(x) (1u << CMD_##x)
#define CMD_TEXT (CMD(CHAT) | CMD(GENERATE) | CMD(SERVE))    /* sampling flags */
#define CMD_ENGINE (CMD_TEXT | CMD(BENCH) | CMD(PERPLEXITY)) /* open an engine: engine flags */

/* What an option is; several entries may share one (a spelling that reads differently per
 * subcommand). The model and engine options come first, then sampling: textcli.c's
 * tcli_option handles [OPT_MODEL, OPT_SHARED_END), whose ids are below 64 (tcli_opts.given). */
enum {
    OPT_ARG = 1, /* not an option: a positional argument (cli_val.s) */
    /* model and engine (tcli_opts) */
    OPT_MODEL,
    OPT_HF,
    OPT_THREADS,
    OPT_CTX,
    OPT_BATCH,
    OPT_CACHE_TYPE_K,
    OPT_CACHE_TYPE_V,
    OPT_KV_RAM_MB,
    OPT_KERNELS,
    OPT_RAM,
    OPT_EXPERT_SLOTS,
    OPT_MMAP_EXPERTS,
    OPT_EXPERT_POLICY,
    OPT_IO,
    OPT_BUFFERED_IO,
    OPT_LOAD_MODE,
    OPT_PACK,
    OPT_NO_PACK,
    OPT_NO_VERIFY,
    OPT_PIN_GB,
    OPT_NO_PIN,
    OPT_PREFETCH,
    OPT_TRACE,
    OPT_STATS,
    /* sampling and the chat turn (tcli_opts) */
    OPT_TEMP,
    OPT_GREEDY,
    OPT_TOP_K,
    OPT_TOP_P,
    OPT_MIN_P,
    OPT_REPEAT_PENALTY,
    OPT_REPEAT_LAST_N,
    OPT_PRESENCE_PENALTY,
    OPT_FREQUENCY_PENALTY,
    OPT_SEED,
    OPT_STOP,
    OPT_MAX_TOKENS,
    OPT_THINK,
    OPT_NO_THINK,
    OPT_CHAT_FORMAT,
    OPT_DRAFT,
    OPT_PARSE_SPECIAL_IN_CONTENT,
    OPT_GRAMMAR,
    OPT_GRAMMAR_FILE,
    OPT_JSON_SCHEMA,
    OPT_JSON_SCHEMA_FILE,
    OPT_SHARED_END,
    /* each subcommand's own */
    OPT_PROMPT,
    OPT_FILE,
    OPT_CHAT,
    OPT_SYSTEM,
    OPT_QUIET,
    OPT_JSON,
    OPT_SHOW_REASONING,
    OPT_HIDE_REASONING,
    OPT_TOKENS,
    OPT_DUMP_LOGITS,
    OPT_SESSION,
    OPT_NO_KV_REUSE,
    OPT_HOST,
    OPT_PORT,
    OPT_API_KEY,
    OPT_QUEUE,
    OPT_ALIAS,
    OPT_MAX_BODY,
    OPT_MAX_HEADER,
    OPT_TIMEOUT,
    OPT_MAX_CONNS,
    OPT_MAX_CONNS_PER_IP,
    OPT_REQUEST_TIMEOUT,
    OPT_CORS,
    OPT_ALLOW_HOST,
    OPT_SSE_KEEPALIVE,
    OPT_CACHE_DIR,
    OPT_CACHE_GB,
    OPT_N_PROMPT,
    OPT_N_GEN,
    OPT_N_DEPTH,
    OPT_REPETITIONS,
    OPT_NO_WARMUP,
    OPT_OUTPUT,
    OPT_CHUNKS,
    OPT_KLD_BASE,
    OPT_KLD,
    OPT_RAM_LIST,
    OPT_TABLE_ONLY,
    OPT_STOP_AFTER,
    OPT_WRITE_PACK,
    OPT_NO_WRITE_PACK,
    OPT_JOBS,
    OPT_ADD_SPECIAL,
    OPT_PARSE_SPECIAL,
    OPT_IDS,
    OPT_SKIP_SPECIAL,
};

/* How a value is read (an option without one, cli_opt.arg NULL, is a switch). */
enum {
    CLI_TEXT = 0, /* as given */
    CLI_INT,      /* a decimal integer in [lo, hi]: cli_val.n */
    CLI_NUM,      /* a number in [lo, hi] ((lo, hi] with CLI_ABOVE): cli_val.f */
    CLI_U64,      /* digits (a '+' allowed), 0 to 2^64-1: cli_val.u */
    CLI_CHOICE,   /* one of the words of cli_opt.choices: cli_val.n is its index */
};

enum {
    CLI_HIDDEN = 1u << 0,     /* accepted, not listed by --help (options for tests) */
    CLI_NONEMPTY = 1u << 1,   /* CLI_TEXT: "" is a bad value */
    CLI_ABOVE = 1u << 2,      /* CLI_NUM: lo itself is out of range */
    CLI_NAME_FIRST = 1u << 3, /* a bad value reads "NAME 'V': expected ..." (inspect's own) */
};

/* The sections of --help, in this order within every subcommand's table entries. */
enum { SEC_OPTIONS = 0, SEC_MODEL, SEC_SAMPLING, SEC_GRAMMAR, SEC_ENGINE };

/* Defaults known only at run time. */
enum {
    RDEF_NONE = 0, /* def or defn */
    RDEF_TEMP,     /* pt_sampling_default's fields */
    RDEF_TOP_K,
    RDEF_TOP_P,
    RDEF_MIN_P,
    RDEF_REPEAT,
    RDEF_LAST_N,
    RDEF_PRESENCE,
    RDEF_FREQUENCY,
    RDEF_CHAT_FORMATS, /* the chat formats petrel renders (pt_chat_format_name), "a, b or c" */
};

typedef struct cli_opt {
    int id;              /* OPT_* */
    unsigned cmds;       /* CMD(X) bits: the subcommands that take it */
    const char *names;   /* every spelling, ", "-separated ("-c, --ctx-size") */
    const char *arg;     /* the value's name in --help ("N", "FILE"); NULL: a switch */
    int kind;            /* CLI_* */
    double lo, hi;       /* CLI_INT, CLI_NUM (and list options the command reads): the range */
    const char *choices; /* CLI_CHOICE: the words, '|'-separated */
    const char *expect;  /* what a bad value should have been ("expected ..."); {lo} {hi} */
    const char *help;    /* --help's text: '\n' starts a line; {} the default, {lo} {hi} */
    const char *def;     /* the default {} shows, as text; NULL: ... */
    double defn;         /* ... this number, unless */
    int rdef;            /* ... a default known at run time (RDEF_*) */
    int section;         /* SEC_* */
    unsigned flags;      /* CLI_HIDDEN, CLI_NONEMPTY, CLI_ABOVE */
} cli_opt;

/* One option (or positional argument) read from the command line. */
typedef struct cli_val {
    int id;               /* OPT_* */
    const cli_opt *opt;   /* its entry (NULL for OPT_ARG) */
    const char *name;     /* the spelling given, for messages */
    const char *s;        /* the value as given (the argument, for OPT_ARG); NULL: a switch */
    long long n;          /* CLI_INT: the value; CLI_CHOICE: the word's index */
    double f;             /* CLI_NUM */
    unsigned long long u; /* CLI_U64 */
} cli_val;

typedef struct cli_cmd cli_cmd;

/* The arguments of one subcommand, read in order. */
typedef struct cli_args {
    const cli_cmd *cmd;
    const char *name; /* the subcommand ("generate"), for messages */
    int argc;
    char **argv;
    int i;      /* the next argument */
    int n_args; /* positional arguments read */
    int status; /* when reading stopped early: the command's exit status */
} cli_args;

/* What a command does with one option or argument (ud: its own state): 0 when stored, -1 when
 * refused (a usage error, its message printed: cli_bad_value, or the command's own line). */
typedef int (*cli_option_fn)(void *ud, const cli_args *a, const cli_val *v);

/* Read argv[1..argc) as the arguments of subcommand `cmd` ("generate"), calling fn for each in
 * order (fn NULL: the subcommand takes no option but --help). 0 when all were read; -1 when
 * the command stops here with exit status *status: -h/--help printed its help on stdout
 * (CLI_OK), or a usage error (CLI_USAGE) was said on stderr in one line: an unknown option
 * (named, with a pointer to `petrel CMD --help`), a missing or bad value, what fn refused; an
 * argument more than the subcommand takes is followed by its usage line. */
int cli_parse(const char *cmd, int argc, char **argv, cli_option_fn fn, void *ud, int *status);
/* For a value the command's own checks refuse: "petrel CMD: invalid value 'V' for NAME:
 * expected ..." (the entry's expect) on stderr. Returns -1. */
int cli_bad_value(const cli_args *a, const cli_val *v);
/* "petrel CMD: MESSAGE" and the subcommand's usage line on stderr. Returns CLI_USAGE. */
int cli_usage_error(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* The help of subcommand `cmd`: its usage line, what it does, every option it accepts but the
 * hidden ones, by section, with their defaults. */
void cli_help(FILE *f, const char *cmd);
/* The chat formats petrel renders, ", "-separated with last_sep before the last ("a, b or c"),
 * into out[cap] (cut to fit, NUL-terminated). */
void cli_chat_formats(const char *last_sep, char *out, size_t cap);

#endif
