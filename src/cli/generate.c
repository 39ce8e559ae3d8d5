/* generate.c — `petrel generate`: one-shot generation, from text or from token ids.
 *
 *   petrel generate -m MODEL.gguf -p TEXT [-n N] [--chat [--system TEXT]] [sampling flags]
 *   petrel generate -m MODEL.gguf --tokens 1,2,3 -n 16 --greedy [--dump-logits FILE]
 *
 * Text mode: TEXT (or -f FILE, or stdin) is completed as is, with BOS as the
 * vocabulary says, or wrapped in the model's chat template with --chat; the
 * text streams to stdout as it is produced, statistics go to stderr. With
 * --chat, stdout gets only the answer; the reasoning (its tags and channel
 * markers never printed) goes to stderr unless hidden.
 *
 * Token mode (the reference runs of shared/tools/check_ref.py depend on it):
 * The ids are fed verbatim (no BOS added); exactly N tokens are generated (no
 * stop at EOS, like llama.cpp's reference runs; -n 0 is allowed) and printed
 * space-separated on one line of stdout. --dump-logits writes the logits of
 * every prompt position as little-endian float32 [n_prompt][n_vocab], the
 * format of the fixtures' reference files. Timing goes to stderr. --session
 * FILE keeps the KV of all the prompt's ids but the last in FILE: a later run
 * with the same model, KV types and ids restores it instead of evaluating them
 * (long-context benchmarks pay for their prefill once: bench/kvspill.sh).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "front/front.h"
#include "front/helpers.h"
#include "options.h"
#include "petrel.h"
#include "textcli.h"

static int argmax(const float *x, int n) {
    int best = 0;
    for (int i = 1; i < n; i++)
        if (x[i] > x[best]) best = i; /* ties: lowest id, as the references */
    return best;
}

/* --session FILE in token mode: positions [0, n - 1) of the prompt restored from FILE when
 * it holds exactly them (its extra bytes are their ids), else evaluated and saved there.
 * Returns the positions now cached (n - 1), or -1 with err. */
static int prompt_session(pt_session *s, const char *path, const int32_t *prompt, int n,
                          float *logits, char *err, size_t err_len) {
    const size_t len = (size_t)(n - 1) * sizeof *prompt;
    if (access(path, F_OK) == 0) {
        char *extra = NULL, why[512] = "";
        size_t elen = 0;
        const int got = pt_session_load_file(s, path, &extra, &elen, why, sizeof why);
        const int same = got == n - 1 && elen == len && !memcmp(extra, prompt, len);
        free(extra);
        if (same) {
            fprintf(stderr, "petrel: session %s: %d positions of KV restored\n", path, got);
            return got;
        }
        fprintf(stderr, "petrel: session %s: %s; evaluating the prompt\n", path,
                got < 0 ? why : "another prompt's or model's");
        pt_session_truncate(s, 0);
    }
    if (pt_session_eval(s, prompt, n - 1, logits, 0, NULL, err, err_len)) return -1;
    if (pt_session_save_file(s, path, prompt, len, err, err_len)) return -1;
    return n - 1;
}

/* ===== Token mode ===== */

/* generate's own options (the rest are tcli_opts). */
typedef struct gen_args {
    tcli_opts *o; /* the model, engine, sampling and turn options */
    const char *tokens, *dump, *prompt, *file, *system, *session;
    int chat, quiet, json;
    int reasoning; /* --show-reasoning / --hide-reasoning; -1: shown unless --quiet or --json */
} gen_args;

/* A token-mode run: its engine and session, the ids in and out, and when each part ended. */
typedef struct tok_run {
    pt_engine *e;
    pt_session *s;
    pt_ids prompt; /* the ids given */
    long n_gen;    /* ids to generate */
    int nv;        /* logits a row */
    float *logits; /* [n_prompt][nv]: every prompt row's with --dump-logits, else the last */
    int32_t *out;  /* [n_gen] the ids generated */
    double t0, t1; /* pt_now() before the engine opened, before the prompt */
    double t2, t3; /* after the prompt, after the last id */
    char err[512];
} tok_run;

/* The engine and session of a token-mode run (the plan line printed). 0, or the exit status
 * with the message printed. */
static int tokens_open(tok_run *r, const tcli_opts *o) {
    const int n_prompt = (int)r->prompt.n;
    pt_engine_params ep = tcli_engine_params(o);
    r->t0 = pt_now();
    r->e = pt_engine_open(&ep, r->err, sizeof r->err);
    if (!r->e) return cli_error("%s", r->err);
    if (o->draft > 0 && !pt_engine_has_mtp(r->e)) /* token mode decodes one token per forward */
        return cli_error("--draft %ld: the model %s (%s) has no NextN/MTP head to draft with",
                         o->draft, o->model ? o->model : "", pt_engine_arch(r->e));
    fprintf(stderr, "petrel: %s\n", pt_engine_plan(r->e));
    r->nv = pt_engine_n_vocab(r->e);
    pt_session_params sp = {.n_ctx = o->n_ctx ? (int)o->n_ctx : n_prompt + (int)r->n_gen + 1,
                            .n_batch = (int)o->n_batch};
    r->s = pt_session_new(r->e, &sp, r->err, sizeof r->err);
    if (!r->s) return cli_error("%s", r->err);
    r->logits = malloc((size_t)n_prompt * (size_t)r->nv * sizeof(float));
    r->out = malloc(((size_t)r->n_gen + 1) * sizeof(int32_t));
    if (!r->logits || !r->out)
        return cli_error("out of memory for %d x %d logits", n_prompt, r->nv);
    return 0;
}

/* The prompt (restored from --session FILE, or evaluated), its logits to --dump-logits FILE,
 * then n_gen greedy ids. 0, or the exit status with the message printed. */
static int tokens_eval(tok_run *r, const gen_args *g) {
    const int n_prompt = (int)r->prompt.n, nv = r->nv;
    const int32_t *prompt = r->prompt.v;
    r->t1 = pt_now();
    const int pre = g->session && n_prompt > 1 ? prompt_session(r->s, g->session, prompt, n_prompt,
                                                                r->logits, r->err, sizeof r->err)
                                               : 0;
    if (pre < 0 || pt_session_eval(r->s, prompt + pre, n_prompt - pre, r->logits, g->dump != NULL,
                                   NULL, r->err, sizeof r->err))
        return cli_error("%s", r->err);
    r->t2 = pt_now();
    if (g->dump) {
        FILE *f = fopen(g->dump, "wb");
        size_t cnt = (size_t)n_prompt * (size_t)nv;
        if (!f || fwrite(r->logits, sizeof(float), cnt, f) != cnt || fclose(f) != 0)
            return cli_error("%s: cannot write logits: %s", g->dump, strerror(errno));
    }
    const float *last = g->dump ? r->logits + (size_t)(n_prompt - 1) * nv : r->logits;
    int next = argmax(last, nv);
    for (long i = 0; i < r->n_gen; i++) {
        r->out[i] = next;
        if (i + 1 == r->n_gen) break;
        if (pt_session_eval(r->s, &r->out[i], 1, r->logits, 0, NULL, r->err, sizeof r->err))
            return cli_error("%s", r->err);
        next = argmax(r->logits, nv);
    }
    r->t3 = pt_now();
    return 0;
}

/* --stats in token mode: the expert cache, the prompt's reads, the checksums, the KV cache. */
static void tokens_stats(const tok_run *r) {
    pt_stats st;
    pt_engine_stats(r->e, &st);
    char how[128];
    tcli_experts_how(&st, how, sizeof how);
    const uint64_t req = st.hits + st.misses;
    const long n_tok = (long)r->prompt.n + r->n_gen;
    fprintf(stderr,
            "petrel: experts %s: hit rate %.1f%% (%llu hits, %llu misses), %.3f GB read, %.1f "
            "MB/token, I/O wait %.3f s, %llu pinned, prefetch %llu/%llu used; RSS %.0f MB (peak "
            "%.0f MB)\n",
            how, req ? 100.0 * st.hits / req : 0.0, (unsigned long long)st.hits,
            (unsigned long long)st.misses, st.bytes_read / 1e9,
            n_tok ? st.bytes_read / 1e6 / n_tok : 0.0, st.io_wait_s, (unsigned long long)st.pinned,
            (unsigned long long)st.prefetch_used, (unsigned long long)st.prefetched,
            st.rss_bytes / 1048576.0, st.peak_rss_bytes / 1048576.0);
    pt_prompt_stats ps;
    pt_session_prompt_stats(r->s, &ps);
    fprintf(stderr,
            "petrel: prompt %d tokens in blocks of %d: %llu experts read (%.3f GB), %llu "
            "routed to (%.3f GB), bytes read/routed %.3f\n",
            ps.n_tokens, ps.n_batch, (unsigned long long)ps.experts_read,
            ps.expert_bytes_read / 1e9, (unsigned long long)ps.routed_experts,
            ps.routed_expert_bytes / 1e9,
            ps.routed_expert_bytes ? (double)ps.expert_bytes_read / ps.routed_expert_bytes : 0.0);
    fprintf(stderr,
            "petrel: expert checksums: %llu reads checked in %.4f s, %llu bad (read again, "
            "never used), %llu read from the GGUF instead of the pack\n",
            (unsigned long long)st.checked_reads, st.verify_s, (unsigned long long)st.bad_reads,
            (unsigned long long)st.fallbacks);
    fe_kv_stats kv;
    char kline[FE_KV_LINE];
    fe_kv_stats_of(r->s, 0, 0, &kv);
    fe_kv_format(&kv, kline, sizeof kline);
    fprintf(stderr, "petrel: %s\n", kline);
}

/* Token mode: the ids verbatim, exactly n_gen greedy tokens, ids on stdout. */
static int run_tokens(const tcli_opts *o, const char *list, const gen_args *g) {
    if (o->sp_set & PT_SAMPLING_TEMP && o->sp.temp != 0) {
        fprintf(
            stderr,
            "petrel generate: --tokens decodes greedily (--temp 0); sample from text with -p\n");
        return CLI_USAGE;
    }
    tok_run r = {.n_gen = o->n_gen < 0 ? GEN_DEFAULT_TOKENS : o->n_gen};
    if (fe_parse_ids(list, &r.prompt) || r.prompt.n == 0 || r.prompt.n > INT32_MAX / 2) {
        fprintf(stderr,
                "petrel generate: --tokens wants comma-separated non-negative ids, got '%.60s'\n",
                list);
        pt_ids_free(&r.prompt);
        return CLI_USAGE;
    }
    int rc = tokens_open(&r, o);
    if (!rc) rc = tokens_eval(&r, g);
    if (!rc) {
        const int n_prompt = (int)r.prompt.n;
        for (long i = 0; i < r.n_gen; i++)
            printf("%s%d", i ? " " : "", r.out[i]);
        printf("\n");
        if (fflush(stdout) != 0) rc = cli_error("cannot write output");
        fprintf(stderr,
                "petrel: %s, %d threads; load %.2f s; prompt %d tokens in %.3f s (%.1f tok/s); "
                "generated %ld in %.3f s (%.2f tok/s)\n",
                pt_engine_arch(r.e), pt_engine_n_threads(r.e), r.t1 - r.t0, n_prompt, r.t2 - r.t1,
                n_prompt / (r.t2 - r.t1 + 1e-9), r.n_gen, r.t3 - r.t2,
                r.n_gen > 1 ? (r.n_gen - 1) / (r.t3 - r.t2 + 1e-9) : 0.0);
        if (o->stats) tokens_stats(&r);
    }
    free(r.out);
    free(r.logits);
    pt_ids_free(&r.prompt);
    pt_session_free(r.s);
    pt_engine_close(r.e);
    return rc;
}

/* ===== Text mode ===== */

static int emit_stdout(void *ud, const char *s, size_t n) {
    (void)ud;
    if (fwrite(s, 1, n, stdout) != n) return -1;
    fflush(stdout);
    return 0;
}

/* The conversation generate --chat sends: --system's message, then the prompt as the user's,
 * both made valid UTF-8 (a warning says how many bad sequences the prompt had). NULL: out of
 * memory. */
static json_t *chat_messages(const char *text, size_t len, const char *system) {
    pt_buf fixed = {0}, sys = {0};
    json_t *msgs = NULL;
    const int bad = pt_utf8_repair(text, len, &fixed);
    if (bad > 0)
        fprintf(stderr,
                "petrel: the prompt is not valid UTF-8; %d bad sequences replaced by U+FFFD\n",
                bad);
    if (bad >= 0 && (!system || pt_utf8_repair(system, strlen(system), &sys) >= 0) &&
        (msgs = json_array())) {
        if (system)
            json_array_append_new(msgs,
                                  json_pack("{s:s, s:s}", "role", "system", "content", sys.v));
        json_array_append_new(msgs, json_pack("{s:s, s:s}", "role", "user", "content", fixed.v));
    }
    pt_buf_free(&fixed);
    pt_buf_free(&sys);
    return msgs;
}

/* Text mode: TEXT completed as is, or with --chat as a user turn. */
static int run_text(const tcli_opts *o, const char *text, size_t len, const gen_args *g) {
    const int chat = g->chat, quiet = g->quiet, json = g->json;
    tcli_model m;
    tcli_turn t = {0};
    fe_turn_result res = {0};
    json_t *msgs = NULL;
    tcli_answer ans = {0};
    char err[512];
    int rc = CLI_OK;
    if (len == 0) {
        fprintf(stderr, "petrel generate: the prompt is empty\n");
        return CLI_USAGE;
    }
    if (tcli_open(o, &m, quiet || json)) return CLI_ERROR;
    fe_turn turn = {.text = text,
                    .text_len = len,
                    .emit = emit_stdout,
                    .stop = &tcli_interrupted,
                    .gen = {.max_tokens = (int)o->n_gen,
                            .stops = o->stops,
                            .n_stops = o->n_stops,
                            .decode_flags = chat ? PT_DETOKENIZE_RENDER_SPECIAL : 0,
                            .show_control = chat ? m.markup : NULL}};
    if (chat) {
        if (!pt_chat_format_known(m.format)) {
            rc = cli_error("%s: no known chat format for this model (use generate without --chat)",
                           o->model);
            goto done;
        }
        if (!(msgs = chat_messages(text, len, g->system))) {
            rc = cli_error("out of memory");
            goto done;
        }
        turn.format = m.format, turn.messages = msgs, turn.thinking = o->think;
        turn.parse_special_in_content = o->parse_special_in_content;
        /* the answer on stdout, the reasoning on stderr (or nowhere) */
        tcli_answer_init(&ans, m.format, g->reasoning);
        turn.emit = tcli_answer_emit, turn.emit_ud = &ans;
        turn.on_prefilled = tcli_answer_prefilled, turn.ud = &ans;
        turn.parse = 1;
    }
    tcli_progress prog; /* a long prompt's progress line on stderr */
    tcli_progress_init(&prog, o->progress_after);
    if (!quiet && !json) pt_session_set_progress(m.s, tcli_progress_cb, &prog);
    tcli_interrupted = 0;
    tcli_sigint(1);
    int trc = fe_turn_run(m.g, &turn, &res, err, sizeof err);
    tcli_progress_end(&prog);
    t.n_prompt = res.n_prompt, t.n_reused = res.n_reused, t.t_start = res.t_start,
    t.t_prefilled = res.t_prefilled;
    /* what the split held back is printed and the reasoning's line ended, even
     * before an error line */
    const pt_buf *out = chat ? tcli_answer_finish(&ans) : &res.gen.text;
    if (trc) {
        rc = cli_error("%s", err);
        goto done;
    }
    tcli_sigint(0);
    if (!isatty(fileno(stdout)) || out->n == 0 || out->v[out->n - 1] != '\n') fputc('\n', stdout);
    if (fflush(stdout) != 0) rc = cli_error("cannot write output");
    t.n_gen = res.gen.n_tokens, t.t_first = res.gen.t_first, t.t_end = res.gen.t_end,
    t.reason = res.gen.reason;
    if (o->grammar && !res.gen.grammar_done && !quiet)
        fprintf(stderr,
                "petrel generate: the output stopped (%s) before the end of the %s grammar\n",
                tcli_reason_name(res.gen.reason), o->grammar_flag);
    if (json)
        tcli_print_stats(stderr, &m, &t, 1, 0, chat && res.have_parsed ? &res.parsed : NULL);
    else if (!quiet)
        tcli_print_stats(stderr, &m, &t, 0, o->stats, NULL);
done:
    tcli_sigint(0);
    tcli_answer_free(&ans);
    json_decref(msgs);
    fe_turn_result_free(&res);
    tcli_close(&m);
    return rc;
}

/* ===== The command ===== */

static int generate_option(void *ud, const cli_args *a, const cli_val *v) {
    gen_args *g = ud;
    switch (v->id) {
    case OPT_TOKENS: g->tokens = v->s; return 0;
    case OPT_DUMP_LOGITS: g->dump = v->s; return 0;
    case OPT_PROMPT: g->prompt = v->s; return 0;
    case OPT_FILE: g->file = v->s; return 0;
    case OPT_SYSTEM: g->system = v->s; return 0;
    case OPT_SESSION: g->session = v->s; return 0;
    case OPT_CHAT: g->chat = 1; return 0;
    case OPT_QUIET: g->quiet = 1; return 0;
    case OPT_JSON: g->json = 1; return 0;
    case OPT_SHOW_REASONING: g->reasoning = 1; return 0;
    case OPT_HIDE_REASONING: g->reasoning = 0; return 0;
    default: return tcli_option(g->o, a, v);
    }
}

/* The options that need or exclude one another: 0, or -1 with the message printed. */
static int generate_check(const gen_args *g, const tcli_opts *o) {
    const char *why = NULL;
    if ((g->tokens != NULL) + (g->prompt != NULL) + (g->file != NULL) > 1)
        why = "give one of -p, -f and --tokens";
    else if (g->tokens && (g->chat || g->system))
        why = "--chat/--system need a text prompt (-p or -f)";
    else if (g->session && (!g->tokens || g->dump))
        why = "--session needs --tokens (and no --dump-logits)";
    else if (g->dump && !g->tokens)
        why = "--dump-logits needs --tokens";
    else if (g->system && !g->chat)
        why = "--system needs --chat";
    else if (g->reasoning >= 0 && !g->chat)
        why = "--show-reasoning/--hide-reasoning need --chat";
    if (why) return fprintf(stderr, "petrel generate: %s\n", why), -1;
    if (g->tokens && o->grammar)
        return fprintf(stderr, "petrel generate: %s needs a text prompt (-p or -f)\n",
                       o->grammar_flag),
               -1;
    return 0;
}

/* The command on options cmd_generate owns (and frees, whatever the way out). */
static int generate_with(tcli_opts *opts, int argc, char **argv) {
    gen_args g = {.o = opts, .reasoning = -1};
    int status;
    if (cli_parse("generate", argc, argv, generate_option, &g, &status)) return status;
    if (generate_check(&g, opts)) return CLI_USAGE;
    const int mrc = tcli_resolve_model(opts, "generate");
    if (mrc) return mrc;
    if (g.reasoning < 0) g.reasoning = !g.quiet && !g.json;
    if (g.prompt) return run_text(opts, g.prompt, strlen(g.prompt), &g);
    /* the ids or the text from a file (ids: longer than an argument may be), or stdin */
    const char *path = g.tokens ? (g.tokens[0] == '@' ? g.tokens + 1 : NULL) : g.file;
    if (g.tokens && !path) return run_tokens(opts, g.tokens, &g);
    pt_buf in = {0};
    int rc = fe_read_file(path, 0, &in) ? cli_error("%s%s: %s", g.tokens ? "--tokens @" : "",
                                                    path ? path : "stdin", strerror(errno))
             : g.tokens                 ? run_tokens(opts, in.v, &g)
                                        : run_text(opts, in.v, in.n, &g);
    pt_buf_free(&in);
    return rc;
}

int cmd_generate(int argc, char **argv) {
    tcli_opts o;
    tcli_opts_init(&o);
    int rc = generate_with(&o, argc, argv);
    tcli_opts_free(&o);
    return rc;
}
