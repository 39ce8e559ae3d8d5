/* chat.c — `petrel chat`: an interactive, streaming conversation.
 *
 *   petrel chat -m MODEL.gguf [--system TEXT] [sampling and engine flags]
 *
 * Each turn re-renders the whole conversation with the model's chat template
 * and runs it as one turn (front/front.h: render, tokenize, pt_gen_prefill,
 * which keeps the longest common prefix of the KV cache, generate, parse): only
 * the new tokens are evaluated (the previous answer is
 * re-evaluated only where the template renders history differently from what
 * was generated, e.g. GLM dropping old reasoning). Commands: /clear, /exit,
 * /stats, /system TEXT, /think on|off. Ctrl-C stops the answer being generated
 * (the partial answer stays in the conversation); Ctrl-D or /exit quits.
 * Lines come from stdin with fgets-style reading (no line-editing library:
 * the terminal's own editing applies), so the command works in pipes too;
 * --no-kv-reuse clears the cache before each turn (to test that reuse changes
 * nothing). The answer streams to stdout without the reasoning's tags; the
 * reasoning goes to stderr (dimmed on a terminal) unless --hide-reasoning.
 * --session FILE restores the conversation and its KV cache from FILE at start (a file of
 * another model or KV type restores the conversation only; a corrupt one is ignored with a
 * warning) and saves both there on exit (pt_gen_save_file: written aside, then renamed).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "options.h"
#include "textcli.h"

/* Read one line (without its newline) into *buf. 1: a line; 0: end of input;
 * -1: interrupted by Ctrl-C. */
static int read_line(char **buf, size_t *cap) {
    errno = 0;
    ssize_t n = getline(buf, cap, stdin);
    if (n < 0) {
        if (errno == EINTR || tcli_interrupted) {
            clearerr(stdin);
            return -1;
        }
        return 0;
    }
    while (n > 0 && ((*buf)[n - 1] == '\n' || (*buf)[n - 1] == '\r'))
        (*buf)[--n] = 0;
    return 1;
}

/* The conversation restarted: the system message, if any. */
static json_t *new_conversation(const char *system) {
    json_t *m = json_array();
    if (system && *system)
        json_array_append_new(m, json_pack("{s:s, s:s}", "role", "system", "content", system));
    return m;
}

/* A conversation in progress. */
typedef struct chat_state {
    const tcli_opts *opts;
    tcli_model m;
    json_t *msgs;       /* the conversation so far */
    pt_buf sys, fixed;  /* the system message; the last line, made valid UTF-8 */
    int think;          /* -1: the family's default; /think on|off */
    int no_reuse;       /* --no-kv-reuse: clear the cache before each turn */
    fe_turn_result res; /* the last turn's */
    tcli_turn last;     /* its statistics, for /stats */
    tcli_answer ans;    /* the answer on stdout, the reasoning on stderr */
    tcli_progress prog; /* a long prompt's progress line on stderr */
} chat_state;

/* --session FILE at start: the conversation and its KV cache restored from FILE when it holds
 * them (another model's: the conversation only; a corrupt one: a warning, a new one). */
static void chat_restore(chat_state *c, const char *session) {
    char serr[600], *saved = NULL;
    size_t saved_len = 0;
    const int got = pt_gen_load_file(c->m.g, session, &saved, &saved_len, serr, sizeof serr);
    json_t *conv = saved ? json_loads(saved, 0, NULL) : NULL;
    if (got < 0 || !json_is_array(conv)) {
        fprintf(stderr, "petrel: WARNING: %s; starting a new conversation\n",
                got < 0 ? serr : "the session file holds no conversation");
        pt_gen_clear(c->m.g);
        json_decref(conv);
    } else {
        if (got == 0 && serr[0]) fprintf(stderr, "petrel: WARNING: %s\n", serr);
        json_decref(c->msgs);
        c->msgs = conv;
        fprintf(stderr, "petrel: session %s: %zu messages, %d positions of KV restored\n", session,
                json_array_size(c->msgs), got);
    }
    free(saved);
}

/* A line that starts with '/': 1 to end the chat (/exit, or out of memory), else 0. */
static int chat_command(chat_state *c, const char *line) {
    if (!strcmp(line, "/exit") || !strcmp(line, "/quit")) return 1;
    if (!strcmp(line, "/clear")) {
        json_decref(c->msgs);
        c->msgs = new_conversation(c->sys.v);
        pt_gen_clear(c->m.g);
        fprintf(stderr, "[conversation cleared]\n");
    } else if (!strcmp(line, "/stats")) {
        tcli_print_stats(stderr, &c->m, &c->last, 0, 1, NULL);
    } else if (!strncmp(line, "/system", 7) && (line[7] == ' ' || !line[7])) {
        const char *t = line[7] ? line + 8 : "";
        if (pt_utf8_repair(t, strlen(t), &c->sys) < 0) return 1;
        json_decref(c->msgs);
        c->msgs = new_conversation(c->sys.v);
        fprintf(stderr, "[system message %s; conversation restarted]\n", *t ? "set" : "cleared");
    } else if (!strcmp(line, "/think on") || !strcmp(line, "/think off")) {
        c->think = line[8] == 'n';
        fprintf(stderr, "[thinking %s]\n", c->think ? "on" : "off");
    } else {
        fprintf(stderr, "[unknown command %s: /clear /exit /stats /system TEXT /think on|off]\n",
                line);
    }
    return 0;
}

/* The answer joins the conversation as content + reasoning. */
static void keep_answer(chat_state *c) {
    const pt_chat_parsed *p = &c->res.parsed;
    json_t *am = json_pack("{s:s, s:s}", "role", "assistant", "content", p->content);
    if (p->reasoning[0]) json_object_set_new(am, "reasoning_content", json_string(p->reasoning));
    json_array_append_new(c->msgs, am);
}

/* One turn on the user's line: CLI_OK to go on, or the exit status (the message printed). */
static int chat_turn(chat_state *c, const char *line) {
    const int bad = pt_utf8_repair(line, strlen(line), &c->fixed);
    if (bad < 0) return cli_error("out of memory");
    if (bad)
        fprintf(stderr, "[input is not valid UTF-8: %d bad sequences replaced by U+FFFD]\n", bad);
    json_array_append_new(c->msgs, json_pack("{s:s, s:s}", "role", "user", "content", c->fixed.v));
    const tcli_opts *o = c->opts;
    fe_turn turn = {.format = c->m.format,
                    .messages = c->msgs,
                    .thinking = c->think,
                    .parse_special_in_content = o->parse_special_in_content,
                    .clear = c->no_reuse,
                    .parse = 1,
                    .gen = {.max_tokens = (int)o->n_gen,
                            .stops = o->stops,
                            .n_stops = o->n_stops,
                            .decode_flags = PT_DETOKENIZE_RENDER_SPECIAL,
                            .show_control = c->m.markup},
                    .emit = tcli_answer_emit,
                    .emit_ud = &c->ans,
                    .on_prefilled = tcli_answer_prefilled,
                    .ud = &c->ans,
                    .stop = &tcli_interrupted};
    char err[512];
    const int trc = fe_turn_run(c->m.g, &turn, &c->res, err, sizeof err);
    tcli_progress_end(&c->prog);
    if (trc == FE_TURN_BAD_PROMPT) return cli_error("%s", err);
    if (trc == FE_TURN_TOO_LONG || trc == FE_TURN_CANCELLED || trc == FE_TURN_PREFILL_FAILED) {
        /* the turn is dropped; the conversation stays as it was */
        json_array_remove(c->msgs, json_array_size(c->msgs) - 1);
        if (trc == FE_TURN_CANCELLED)
            fprintf(stderr, "\n[interrupted]\n");
        else
            fprintf(stderr, "petrel: %s\n", err);
        return CLI_OK;
    }
    tcli_answer_finish(&c->ans);
    if (trc == FE_TURN_GEN_FAILED) return cli_error("%s", err);
    fputc('\n', stdout);
    fflush(stdout);
    const fe_turn_result *r = &c->res;
    if (r->gen.reason == PT_GEN_INTERRUPT) fprintf(stderr, "[interrupted]\n");
    c->last = (tcli_turn){.n_prompt = r->n_prompt,
                          .n_reused = r->n_reused,
                          .t_start = r->t_start,
                          .t_prefilled = r->t_prefilled,
                          .n_gen = r->gen.n_tokens,
                          .t_first = r->gen.t_first,
                          .t_end = r->gen.t_end,
                          .reason = r->gen.reason};
    tcli_print_stats(stderr, &c->m, &c->last, 0, o->stats, NULL);
    if (trc) return cli_error("out of memory"); /* the answer could not be kept */
    keep_answer(c);
    if (r->gen.reason == PT_GEN_CONTEXT)
        fprintf(stderr, "[the context is full: /clear to start again]\n");
    return CLI_OK;
}

/* Lines from stdin until the end, /exit or an error: the exit status. */
static int chat_loop(chat_state *c) {
    const int interactive = isatty(fileno(stdin));
    char *line = NULL;
    size_t cap = 0;
    int rc = CLI_OK;
    tcli_sigint(1);
    for (;;) {
        if (interactive) {
            fputs("> ", stderr);
            fflush(stderr);
        }
        tcli_interrupted = 0;
        const int got = read_line(&line, &cap);
        if (got == 0) break;
        if (got < 0) {
            fputc('\n', stderr);
            continue;
        }
        if (!line[0]) continue;
        if (line[0] == '/' ? chat_command(c, line) : (rc = chat_turn(c, line)) != CLI_OK) break;
    }
    tcli_sigint(0);
    if (interactive && rc == CLI_OK) fputc('\n', stderr);
    free(line);
    return rc;
}

/* --session FILE on exit: the conversation and its KV cache saved there. */
static void chat_save(chat_state *c, const char *session) {
    char serr[600];
    char *conv = json_dumps(c->msgs, JSON_COMPACT);
    if (!conv || pt_gen_save_file(c->m.g, session, conv, strlen(conv), serr, sizeof serr))
        fprintf(stderr, "petrel: WARNING: %s\n", conv ? serr : "out of memory");
    free(conv);
}

/* chat's own options (the rest are tcli_opts). */
typedef struct chat_args {
    tcli_opts *o; /* the model, engine, sampling and turn options */
    const char *system, *session;
    int no_reuse, show_reasoning;
} chat_args;

static int chat_option(void *ud, const cli_args *a, const cli_val *v) {
    chat_args *ca = ud;
    switch (v->id) {
    case OPT_SYSTEM: ca->system = v->s; return 0;
    case OPT_SESSION: ca->session = v->s; return 0;
    case OPT_NO_KV_REUSE: ca->no_reuse = 1; return 0;
    case OPT_SHOW_REASONING: ca->show_reasoning = 1; return 0;
    case OPT_HIDE_REASONING: ca->show_reasoning = 0; return 0;
    default: return tcli_option(ca->o, a, v);
    }
}

/* The command on options cmd_chat owns (and frees, whatever the way out). */
static int chat_with(tcli_opts *opts, int argc, char **argv) {
    chat_args ca = {.o = opts, .show_reasoning = 1};
    int status;
    if (cli_parse("chat", argc, argv, chat_option, &ca, &status)) return status;
    const int mrc = tcli_resolve_model(opts, "chat");
    if (mrc) return mrc;
    chat_state c = {.opts = opts, .think = opts->think, .no_reuse = ca.no_reuse};
    if (tcli_open(opts, &c.m, 0)) return CLI_ERROR;
    int rc = CLI_OK;
    if (!pt_chat_format_known(c.m.format))
        rc = cli_error("%s: no known chat format for this model", opts->model);
    else if (ca.system && pt_utf8_repair(ca.system, strlen(ca.system), &c.sys) < 0)
        rc = cli_error("out of memory");
    if (rc) {
        tcli_close(&c.m);
        pt_buf_free(&c.sys);
        return rc;
    }
    c.msgs = new_conversation(c.sys.v);
    if (ca.session && access(ca.session, F_OK) == 0) chat_restore(&c, ca.session);
    tcli_answer_init(&c.ans, c.m.format, ca.show_reasoning);
    tcli_progress_init(&c.prog, opts->progress_after);
    pt_session_set_progress(c.m.s, tcli_progress_cb, &c.prog);
    fprintf(stderr, "petrel: chatting with %s (%s format, context %d); /exit or Ctrl-D to quit\n",
            pt_engine_arch(c.m.e), c.m.format, pt_session_n_ctx(c.m.s));
    rc = chat_loop(&c);
    if (ca.session) chat_save(&c, ca.session);
    tcli_answer_free(&c.ans);
    json_decref(c.msgs);
    fe_turn_result_free(&c.res);
    pt_buf_free(&c.fixed);
    pt_buf_free(&c.sys);
    tcli_close(&c.m);
    return rc;
}

int cmd_chat(int argc, char **argv) {
    tcli_opts o;
    tcli_opts_init(&o);
    int rc = chat_with(&o, argc, argv);
    tcli_opts_free(&o);
    return rc;
}
