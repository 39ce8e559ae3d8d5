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
#include "petrel.h"
#include "textcli.h"

static void generate_usage(FILE *f) {
    fprintf(
        f, "usage: petrel generate -m MODEL.gguf (-p TEXT | -f FILE | --tokens IDS) [options]\n"
           "  -m, --model FILE        GGUF model (any part of a split model; default: the demo\n"
           "                          model)\n"
           "  -p, --prompt TEXT       prompt text, taken verbatim (raw completion; BOS as the "
           "model says)\n"
           "  -f, --file FILE         read the prompt from FILE ('-' or no -p/-f/--tokens: stdin)\n"
           "  --chat                  wrap the prompt in the model's chat template as a user turn\n"
           "  --system TEXT           system message for --chat\n"
           "  --quiet                 no statistics (and no reasoning) on stderr\n"
           "  --json                  statistics as one JSON object on stderr (with --chat: the\n"
           "                          answer's \"content\" and \"reasoning\" too)\n"
           "  --show-reasoning        with --chat: the model's reasoning on stderr (dimmed on a\n"
           "                          terminal; the default unless --quiet or --json); stdout\n"
           "                          holds only the answer\n"
           "  --hide-reasoning        with --chat: do not print the reasoning\n"
           "  --tokens LIST           prompt token ids, comma-separated, fed verbatim (no BOS); "
           "prints\n"
           "                          the ids of exactly N greedy tokens (-n, default 16; EOS does "
           "not\n"
           "                          stop); -c defaults to prompt + N; @FILE: the list in FILE\n"
           "  --dump-logits FILE      with --tokens: write prompt logits, float32 "
           "[n_prompt][n_vocab]\n"
           "  --session FILE          with --tokens: restore the KV of the prompt's ids but the "
           "last\n"
           "                          from FILE when it holds them (same model, KV types, ids),\n"
           "                          else evaluate them and save FILE\n");
    tcli_usage(f);
}

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

/* Token mode: the ids verbatim, exactly n_gen greedy tokens, ids on stdout. */
static int run_tokens(const tcli_opts *o, const char *tokens_arg, const char *dump,
                      const char *session) {
    const char *model = o->model;
    long n_gen = o->n_gen < 0 ? 16 : o->n_gen, threads = o->threads, n_ctx = o->n_ctx,
         n_batch = o->n_batch;
    int kernels = o->kernels, stats = o->stats;
    pt_engine_params ep = o->ep;
    if (o->sp_set & PT_SAMPLING_TEMP && o->sp.temp != 0) {
        fprintf(
            stderr,
            "petrel generate: --tokens decodes greedily (--temp 0); sample from text with -p\n");
        return CLI_USAGE;
    }
    pt_ids ids = {0};
    if (fe_parse_ids(tokens_arg, &ids) || ids.n == 0 || ids.n > INT32_MAX / 2) {
        fprintf(stderr,
                "petrel generate: --tokens wants comma-separated non-negative ids, got '%.60s'\n",
                tokens_arg);
        pt_ids_free(&ids);
        return CLI_USAGE;
    }
    int32_t *prompt = ids.v;
    const int n_prompt = (int)ids.n;
    char err[512];
    double t0 = pt_now();
    ep.model_path = model;
    ep.n_threads = (int)threads;
    ep.kernels = kernels;
    ep.n_ctx = (int)n_ctx; /* the memory plan leaves room for the context asked for */
    pt_engine *e = pt_engine_open(&ep, err, sizeof err);
    if (!e) {
        free(prompt);
        return cli_error("%s", err);
    }
    int rc0;
    if (o->draft > 0 && !pt_engine_has_mtp(e)) { /* token mode decodes one token per forward */
        rc0 = cli_error("--draft %ld: the model %s (%s) has no NextN/MTP head to draft with",
                        o->draft, model ? model : "", pt_engine_arch(e));
        pt_engine_close(e);
        free(prompt);
        return rc0;
    }
    fprintf(stderr, "petrel: %s\n", pt_engine_plan(e));
    const int nv = pt_engine_n_vocab(e);
    pt_session_params sp = {.n_ctx = n_ctx ? (int)n_ctx : n_prompt + (int)n_gen + 1,
                            .n_batch = (int)n_batch};
    pt_session *s = pt_session_new(e, &sp, err, sizeof err);
    float *logits = s ? malloc((size_t)n_prompt * (size_t)nv * sizeof(float)) : NULL;
    int32_t *out = malloc(((size_t)n_gen + 1) * sizeof(int32_t));
    int rc = CLI_OK;
    if (!s) {
        rc = cli_error("%s", err);
        goto done;
    }
    if (!logits || !out) {
        rc = cli_error("out of memory for %d x %d logits", n_prompt, nv);
        goto done;
    }
    double t1 = pt_now();
    const int pre = session && n_prompt > 1
                        ? prompt_session(s, session, prompt, n_prompt, logits, err, sizeof err)
                        : 0;
    if (pre < 0 || pt_session_eval(s, prompt + pre, n_prompt - pre, logits, dump != NULL, NULL, err,
                                   sizeof err)) {
        rc = cli_error("%s", err);
        goto done;
    }
    double t2 = pt_now();
    if (dump) {
        FILE *f = fopen(dump, "wb");
        size_t cnt = (size_t)n_prompt * (size_t)nv;
        if (!f || fwrite(logits, sizeof(float), cnt, f) != cnt || fclose(f) != 0) {
            rc = cli_error("%s: cannot write logits: %s", dump, strerror(errno));
            goto done;
        }
    }
    const float *last = dump ? logits + (size_t)(n_prompt - 1) * nv : logits;
    int next = argmax(last, nv);
    for (long i = 0; i < n_gen; i++) {
        out[i] = next;
        if (i + 1 == n_gen) break;
        if (pt_session_eval(s, &out[i], 1, logits, 0, NULL, err, sizeof err)) {
            rc = cli_error("%s", err);
            goto done;
        }
        next = argmax(logits, nv);
    }
    double t3 = pt_now();
    for (long i = 0; i < n_gen; i++)
        printf("%s%d", i ? " " : "", out[i]);
    printf("\n");
    if (fflush(stdout) != 0) rc = cli_error("cannot write output");
    fprintf(stderr,
            "petrel: %s, %d threads; load %.2f s; prompt %d tokens in %.3f s (%.1f tok/s); "
            "generated %ld in %.3f s (%.2f tok/s)\n",
            pt_engine_arch(e), pt_engine_n_threads(e), t1 - t0, n_prompt, t2 - t1,
            n_prompt / (t2 - t1 + 1e-9), n_gen, t3 - t2,
            n_gen > 1 ? (n_gen - 1) / (t3 - t2 + 1e-9) : 0.0);
    if (stats) {
        pt_stats st;
        pt_engine_stats(e, &st);
        uint64_t req = st.hits + st.misses;
        fprintf(
            stderr,
            "petrel: experts %s (%d slots/layer, %s%s%s): hit rate %.1f%% (%llu hits, %llu "
            "misses), "
            "%.3f GB read, %.1f MB/token, I/O wait %.3f s, %llu pinned, prefetch %llu/%llu used; "
            "RSS %.0f MB (peak %.0f MB)\n",
            st.streaming ? "streamed" : "mmap", st.slots_per_layer, st.io_backend,
            st.direct_io ? ", O_DIRECT" : "", st.expert_pack ? ", pack" : "",
            req ? 100.0 * st.hits / req : 0.0, (unsigned long long)st.hits,
            (unsigned long long)st.misses, st.bytes_read / 1e9,
            (n_prompt + n_gen) ? st.bytes_read / 1e6 / (n_prompt + n_gen) : 0.0, st.io_wait_s,
            (unsigned long long)st.pinned, (unsigned long long)st.prefetch_used,
            (unsigned long long)st.prefetched, st.rss_bytes / 1048576.0,
            st.peak_rss_bytes / 1048576.0);
        pt_prompt_stats ps;
        pt_session_prompt_stats(s, &ps);
        fprintf(stderr,
                "petrel: prompt %d tokens in blocks of %d: %llu experts read (%.3f GB), %llu "
                "routed to (%.3f GB), bytes read/routed %.3f\n",
                ps.n_tokens, ps.n_batch, (unsigned long long)ps.experts_read,
                ps.expert_bytes_read / 1e9, (unsigned long long)ps.routed_experts,
                ps.routed_expert_bytes / 1e9,
                ps.routed_expert_bytes ? (double)ps.expert_bytes_read / ps.routed_expert_bytes
                                       : 0.0);
        fprintf(stderr,
                "petrel: expert checksums: %llu reads checked in %.4f s, %llu bad (read again, "
                "never used), %llu read from the GGUF instead of the pack\n",
                (unsigned long long)st.checked_reads, st.verify_s, (unsigned long long)st.bad_reads,
                (unsigned long long)st.fallbacks);
        fe_kv_stats kv;
        char kline[FE_KV_LINE];
        fe_kv_stats_of(s, 0, 0, &kv);
        fe_kv_format(&kv, kline, sizeof kline);
        fprintf(stderr, "petrel: %s\n", kline);
    }
done:
    free(out);
    free(logits);
    free(prompt);
    pt_session_free(s);
    pt_engine_close(e);
    return rc;
}

/* ===== Text mode ===== */

static int emit_stdout(void *ud, const char *s, size_t n) {
    (void)ud;
    if (fwrite(s, 1, n, stdout) != n) return -1;
    fflush(stdout);
    return 0;
}

/* show_reasoning: with --chat, print the reasoning on stderr. */
static int run_text(const tcli_opts *o, const char *text, size_t len, int chat, const char *system,
                    int quiet, int json, int show_reasoning) {
    tcli_model m;
    tcli_turn t = {0};
    pt_buf fixed = {0};
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
        int bad = pt_utf8_repair(text, len, &fixed);
        if (bad < 0) goto oom;
        if (bad)
            fprintf(stderr,
                    "petrel: the prompt is not valid UTF-8; %d bad sequences replaced by U+FFFD\n",
                    bad);
        msgs = json_array();
        if (system) {
            pt_buf sys = {0};
            if (pt_utf8_repair(system, strlen(system), &sys) < 0) goto oom;
            json_array_append_new(msgs,
                                  json_pack("{s:s, s:s}", "role", "system", "content", sys.v));
            pt_buf_free(&sys);
        }
        json_array_append_new(msgs, json_pack("{s:s, s:s}", "role", "user", "content", fixed.v));
        turn.format = m.format, turn.messages = msgs, turn.thinking = o->think;
        turn.parse_special_in_content = o->parse_special_in_content;
        /* the answer on stdout, the reasoning on stderr (or nowhere) */
        tcli_answer_init(&ans, m.format, show_reasoning);
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
    goto done;
oom:
    rc = cli_error("out of memory");
done:
    tcli_sigint(0);
    tcli_answer_free(&ans);
    json_decref(msgs);
    fe_turn_result_free(&res);
    pt_buf_free(&fixed);
    tcli_close(&m);
    return rc;
}

/* The command on options cmd_generate owns (and frees, whatever the way out). */
static int generate_with(tcli_opts *opts, int argc, char **argv) {
    const char *tokens_arg = NULL, *dump = NULL, *prompt = NULL, *file = NULL, *system = NULL,
               *session = NULL;
    int chat = 0, quiet = 0, json = 0, reasoning = -1; /* -1: shown unless --quiet/--json */
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        int needs = !strcmp(a, "--tokens") || !strcmp(a, "--dump-logits") || !strcmp(a, "-p") ||
                    !strcmp(a, "--prompt") || !strcmp(a, "-f") || !strcmp(a, "--file") ||
                    !strcmp(a, "--system") || !strcmp(a, "--session");
        if (needs && !v) {
            fprintf(stderr, "petrel generate: %s needs a value\n", a);
            generate_usage(stderr);
            return CLI_USAGE;
        }
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            generate_usage(stdout);
            return CLI_OK;
        } else if (!strcmp(a, "--tokens")) {
            tokens_arg = argv[++i];
        } else if (!strcmp(a, "--dump-logits")) {
            dump = argv[++i];
        } else if (!strcmp(a, "-p") || !strcmp(a, "--prompt")) {
            prompt = argv[++i];
        } else if (!strcmp(a, "-f") || !strcmp(a, "--file")) {
            file = argv[++i];
        } else if (!strcmp(a, "--system")) {
            system = argv[++i];
        } else if (!strcmp(a, "--session")) {
            session = argv[++i];
        } else if (!strcmp(a, "--chat")) {
            chat = 1;
        } else if (!strcmp(a, "--quiet")) {
            quiet = 1;
        } else if (!strcmp(a, "--json")) {
            json = 1;
        } else if (!strcmp(a, "--show-reasoning")) {
            reasoning = 1;
        } else if (!strcmp(a, "--hide-reasoning")) {
            reasoning = 0;
        } else {
            int r = tcli_parse("generate", argc, argv, &i, opts);
            if (r < 0) return CLI_USAGE;
            if (r == 0) {
                fprintf(stderr, "petrel generate: unknown option '%s'\n", a);
                generate_usage(stderr);
                return CLI_USAGE;
            }
        }
    }
    if ((tokens_arg != NULL) + (prompt != NULL) + (file != NULL) > 1) {
        fprintf(stderr, "petrel generate: give one of -p, -f and --tokens\n");
        return CLI_USAGE;
    }
    if (tokens_arg && (chat || system)) {
        fprintf(stderr, "petrel generate: --chat/--system need a text prompt (-p or -f)\n");
        return CLI_USAGE;
    }
    if (tokens_arg && opts->grammar) {
        fprintf(stderr, "petrel generate: %s needs a text prompt (-p or -f)\n", opts->grammar_flag);
        return CLI_USAGE;
    }
    if (session && (!tokens_arg || dump)) {
        fprintf(stderr, "petrel generate: --session needs --tokens (and no --dump-logits)\n");
        return CLI_USAGE;
    }
    if (dump && !tokens_arg) {
        fprintf(stderr, "petrel generate: --dump-logits needs --tokens\n");
        return CLI_USAGE;
    }
    if (system && !chat) {
        fprintf(stderr, "petrel generate: --system needs --chat\n");
        return CLI_USAGE;
    }
    if (reasoning >= 0 && !chat) {
        fprintf(stderr, "petrel generate: --show-reasoning/--hide-reasoning need --chat\n");
        return CLI_USAGE;
    }
    int mrc = tcli_resolve_model(opts, "generate");
    if (mrc) {
        if (mrc == CLI_USAGE && !opts->hf) generate_usage(stderr);
        return mrc;
    }
    if (tokens_arg && tokens_arg[0] == '@') { /* ids from a file: longer than an argument may be */
        pt_buf ids = {0};
        if (fe_read_file(tokens_arg + 1, 0, &ids)) {
            pt_buf_free(&ids);
            return cli_error("--tokens %s: %s", tokens_arg, strerror(errno));
        }
        const int rc = run_tokens(opts, ids.v, dump, session);
        pt_buf_free(&ids);
        return rc;
    }
    if (tokens_arg) return run_tokens(opts, tokens_arg, dump, session);
    if (reasoning < 0) reasoning = !quiet && !json;
    if (prompt) return run_text(opts, prompt, strlen(prompt), chat, system, quiet, json, reasoning);
    pt_buf text = {0};
    int rc = fe_read_file(file, 0, &text)
                 ? cli_error("%s: %s", file ? file : "stdin", strerror(errno))
                 : run_text(opts, text.v, text.n, chat, system, quiet, json, reasoning);
    pt_buf_free(&text);
    return rc;
}

int cmd_generate(int argc, char **argv) {
    tcli_opts o;
    tcli_opts_init(&o);
    int rc = generate_with(&o, argc, argv);
    tcli_opts_free(&o);
    return rc;
}
