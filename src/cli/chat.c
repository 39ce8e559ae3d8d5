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
#include "textcli.h"

static void chat_usage(FILE *f) {
    fprintf(f,
            "usage: petrel chat -m MODEL.gguf [options]\n"
            "  -m, --model FILE        GGUF model (default: %s)\n"
            "  --system TEXT           system message\n"
            "  --no-kv-reuse           re-evaluate the whole conversation every turn (for tests)\n"
            "  --hide-reasoning        do not print the model's reasoning (default: on stderr,\n"
            "                          dimmed on a terminal; stdout holds only the answers)\n"
            "  --show-reasoning        print it (the default)\n"
            "  --session FILE          restore the conversation and its KV cache from FILE, save\n"
            "                          both there on exit\n"
            "commands during the chat: /clear  /exit  /stats  /system TEXT  /think on|off\n"
            "Ctrl-C stops the current answer; Ctrl-D exits.\n",
            CLI_DEFAULT_MODEL ? CLI_DEFAULT_MODEL : "none yet");
    tcli_usage(f);
}

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

/* The command on options cmd_chat owns (and frees, whatever the way out). */
static int chat_with(tcli_opts *opts, int argc, char **argv) {
    const char *system_arg = NULL, *session = NULL;
    int no_reuse = 0, show_reasoning = 1;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            chat_usage(stdout);
            return CLI_OK;
        } else if (!strcmp(a, "--system")) {
            if (i + 1 >= argc) {
                fprintf(stderr, "petrel chat: --system needs a value\n");
                return CLI_USAGE;
            }
            system_arg = argv[++i];
        } else if (!strcmp(a, "--session")) {
            if (i + 1 >= argc || !*argv[i + 1]) {
                fprintf(stderr, "petrel chat: --session needs a file\n");
                return CLI_USAGE;
            }
            session = argv[++i];
        } else if (!strcmp(a, "--no-kv-reuse")) {
            no_reuse = 1;
        } else if (!strcmp(a, "--show-reasoning") || !strcmp(a, "--hide-reasoning")) {
            show_reasoning = a[2] == 's';
        } else {
            int r = tcli_parse("chat", argc, argv, &i, opts);
            if (r < 0) return CLI_USAGE;
            if (r == 0) {
                fprintf(stderr, "petrel chat: unknown option '%s'\n", a);
                chat_usage(stderr);
                return CLI_USAGE;
            }
        }
    }
    int mrc = tcli_resolve_model(opts, "chat");
    if (mrc) {
        if (mrc == CLI_USAGE && !opts->hf) chat_usage(stderr);
        return mrc;
    }
    tcli_model m;
    if (tcli_open(opts, &m, 0)) return CLI_ERROR;
    if (!pt_chat_format_known(m.format)) {
        tcli_close(&m);
        return cli_error("%s: no known chat format for this model", opts->model);
    }
    int interactive = isatty(fileno(stdin));
    int think = opts->think;
    pt_buf sys = {0}, fixed = {0};
    if (system_arg && pt_utf8_repair(system_arg, strlen(system_arg), &sys) < 0)
        return cli_error("out of memory");
    json_t *msgs = new_conversation(sys.v);
    if (session && access(session, F_OK) == 0) {
        char serr[600], *saved = NULL;
        size_t saved_len = 0;
        const int got = pt_gen_load_file(m.g, session, &saved, &saved_len, serr, sizeof serr);
        json_t *conv = saved ? json_loads(saved, 0, NULL) : NULL;
        if (got < 0 || !json_is_array(conv)) {
            fprintf(stderr, "petrel: WARNING: %s; starting a new conversation\n",
                    got < 0 ? serr : "the session file holds no conversation");
            pt_session_truncate(m.s, 0);
            json_decref(conv);
        } else {
            if (got == 0 && serr[0]) fprintf(stderr, "petrel: WARNING: %s\n", serr);
            json_decref(msgs);
            msgs = conv;
            fprintf(stderr, "petrel: session %s: %zu messages, %d positions of KV restored\n",
                    session, json_array_size(msgs), got);
        }
        free(saved);
    }
    fe_turn_result res = {0};
    char *line = NULL;
    size_t cap = 0;
    int rc = CLI_OK;
    tcli_turn last = {0};
    tcli_answer ans; /* the answer on stdout, the reasoning on stderr */
    tcli_answer_init(&ans, m.format, show_reasoning);
    tcli_progress prog; /* a long prompt's progress line on stderr */
    tcli_progress_init(&prog, opts->progress_after);
    pt_session_set_progress(m.s, tcli_progress_cb, &prog);
    fprintf(stderr, "petrel: chatting with %s (%s format, context %d); /exit or Ctrl-D to quit\n",
            pt_engine_arch(m.e), m.format, pt_session_n_ctx(m.s));
    tcli_sigint(1);
    for (;;) {
        if (interactive) {
            fputs("> ", stderr);
            fflush(stderr);
        }
        tcli_interrupted = 0;
        int got = read_line(&line, &cap);
        if (got == 0) break;
        if (got < 0) {
            fputc('\n', stderr);
            continue;
        }
        if (!line[0]) continue;
        if (line[0] == '/') {
            if (!strcmp(line, "/exit") || !strcmp(line, "/quit")) break;
            if (!strcmp(line, "/clear")) {
                json_decref(msgs);
                msgs = new_conversation(sys.v);
                pt_gen_clear(m.g);
                fprintf(stderr, "[conversation cleared]\n");
            } else if (!strcmp(line, "/stats")) {
                tcli_print_stats(stderr, &m, &last, 0, 1, NULL);
            } else if (!strncmp(line, "/system", 7) && (line[7] == ' ' || !line[7])) {
                const char *t = line[7] ? line + 8 : "";
                if (pt_utf8_repair(t, strlen(t), &sys) < 0) break;
                json_decref(msgs);
                msgs = new_conversation(sys.v);
                fprintf(stderr, "[system message %s; conversation restarted]\n",
                        *t ? "set" : "cleared");
            } else if (!strcmp(line, "/think on") || !strcmp(line, "/think off")) {
                think = line[8] == 'n';
                fprintf(stderr, "[thinking %s]\n", think ? "on" : "off");
            } else {
                fprintf(stderr,
                        "[unknown command %s: /clear /exit /stats /system TEXT /think on|off]\n",
                        line);
            }
            continue;
        }
        int bad = pt_utf8_repair(line, strlen(line), &fixed);
        if (bad < 0) break;
        if (bad)
            fprintf(stderr, "[input is not valid UTF-8: %d bad sequences replaced by U+FFFD]\n",
                    bad);
        json_array_append_new(msgs, json_pack("{s:s, s:s}", "role", "user", "content", fixed.v));
        fe_turn turn = {.format = m.format,
                        .messages = msgs,
                        .thinking = think,
                        .parse_special_in_content = opts->parse_special_in_content,
                        .clear = no_reuse,
                        .parse = 1,
                        .gen = {.max_tokens = (int)opts->n_gen,
                                .stops = opts->stops,
                                .n_stops = opts->n_stops,
                                .decode_flags = PT_DETOKENIZE_RENDER_SPECIAL,
                                .show_control = m.markup},
                        .emit = tcli_answer_emit,
                        .emit_ud = &ans,
                        .on_prefilled = tcli_answer_prefilled,
                        .ud = &ans,
                        .stop = &tcli_interrupted};
        char err[512];
        int trc = fe_turn_run(m.g, &turn, &res, err, sizeof err);
        tcli_progress_end(&prog);
        tcli_turn t = {.n_prompt = res.n_prompt,
                       .n_reused = res.n_reused,
                       .t_start = res.t_start,
                       .t_prefilled = res.t_prefilled};
        if (trc == FE_TURN_BAD_PROMPT) {
            rc = cli_error("%s", err);
            break;
        }
        if (trc == FE_TURN_TOO_LONG || trc == FE_TURN_CANCELLED || trc == FE_TURN_PREFILL_FAILED) {
            /* the turn is dropped; the conversation stays as it was */
            json_array_remove(msgs, json_array_size(msgs) - 1);
            if (trc == FE_TURN_CANCELLED)
                fprintf(stderr, "\n[interrupted]\n");
            else
                fprintf(stderr, "petrel: %s\n", err);
            continue;
        }
        tcli_answer_finish(&ans);
        if (trc == FE_TURN_GEN_FAILED) {
            rc = cli_error("%s", err);
            break;
        }
        fputc('\n', stdout);
        fflush(stdout);
        if (res.gen.reason == PT_GEN_INTERRUPT) fprintf(stderr, "[interrupted]\n");
        t.n_gen = res.gen.n_tokens, t.t_first = res.gen.t_first, t.t_end = res.gen.t_end,
        t.reason = res.gen.reason;
        last = t;
        tcli_print_stats(stderr, &m, &t, 0, 0, NULL);
        if (trc) { /* the answer could not be kept (out of memory) */
            rc = cli_error("out of memory");
            break;
        }
        /* the answer joins the conversation as content + reasoning */
        const pt_chat_parsed *p = &res.parsed;
        json_t *am = json_pack("{s:s, s:s}", "role", "assistant", "content", p->content);
        if (p->reasoning[0])
            json_object_set_new(am, "reasoning_content", json_string(p->reasoning));
        json_array_append_new(msgs, am);
        if (res.gen.reason == PT_GEN_CONTEXT)
            fprintf(stderr, "[the context is full: /clear to start again]\n");
    }
    tcli_sigint(0);
    if (interactive && rc == CLI_OK) fputc('\n', stderr);
    if (session) {
        char serr[600];
        char *conv = json_dumps(msgs, JSON_COMPACT);
        if (!conv || pt_gen_save_file(m.g, session, conv, strlen(conv), serr, sizeof serr))
            fprintf(stderr, "petrel: WARNING: %s\n", conv ? serr : "out of memory");
        free(conv);
    }
    free(line);
    tcli_answer_free(&ans);
    json_decref(msgs);
    fe_turn_result_free(&res);
    pt_buf_free(&fixed);
    pt_buf_free(&sys);
    tcli_close(&m);
    return rc;
}

int cmd_chat(int argc, char **argv) {
    tcli_opts o;
    tcli_opts_init(&o);
    int rc = chat_with(&o, argc, argv);
    tcli_opts_free(&o);
    return rc;
}
