/* textcli.c — the flags, model opening and statistics that `petrel generate`
 * (text mode), `petrel chat` and `petrel serve` share. See textcli.h. */
#include "textcli.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "front/helpers.h"
#include "hub.h"

volatile sig_atomic_t tcli_interrupted;

static void on_sigint(int sig) {
    (void)sig;
    tcli_interrupted = 1;
}

void tcli_sigint(int on) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on ? on_sigint : SIG_DFL;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = 0; /* no SA_RESTART: a read blocked at the prompt returns EINTR */
    sigaction(SIGINT, &sa, NULL);
}

void tcli_opts_init(tcli_opts *o) {
    memset(o, 0, sizeof *o);
    o->ep.cache_dir = cli_cache_dir();
    /* PETREL_USAGE_DIR: keep usage statistics there instead of next to the model
     * (the test suite points it into its temp dir, away from the fixtures) */
    o->ep.usage_dir = getenv("PETREL_USAGE_DIR");
    /* PETREL_PROGRESS_AFTER: seconds before a long prompt's progress line shows (the test suite
     * sets 0 to see it on a small model) */
    const char *pa = getenv("PETREL_PROGRESS_AFTER");
    char *end = NULL;
    o->progress_after = pa && *pa ? strtod(pa, &end) : 1.0;
    if (end && (*end || !(o->progress_after >= 0))) o->progress_after = 1.0;
    pt_sampling_default(&o->sp);
    o->n_gen = -1;
    o->think = -1;
    o->draft = -1;
}

void tcli_opts_free(tcli_opts *o) {
    free(o->grammar);
    o->grammar = NULL;
}

/* The largest grammar or schema file read (--grammar-file, --json-schema-file). */
#define TCLI_MAX_GRAMMAR_FILE (64u << 20)

/* The grammar flags: --grammar GBNF, --grammar-file FILE, -j/--json-schema SCHEMA,
 * --json-schema-file FILE (llama.cpp's names). The grammar is checked here (syntax, schema
 * subset), so a bad one is a usage error naming the flag; one of the four at most. */
static int grammar_flag(const char *cmd, const cli_val *opt, tcli_opts *o) {
    const char *a = opt->name, *v = opt->s;
    if (o->grammar) {
        fprintf(stderr, "petrel %s: %s and %s contradict each other: give one grammar\n", cmd,
                o->grammar_flag, a);
        return -1;
    }
    const int file = opt->id == OPT_GRAMMAR_FILE || opt->id == OPT_JSON_SCHEMA_FILE;
    const int schema = opt->id == OPT_JSON_SCHEMA || opt->id == OPT_JSON_SCHEMA_FILE;
    pt_buf fb = {0};
    char *text = !file ? strdup(v) : fe_read_file(v, TCLI_MAX_GRAMMAR_FILE, &fb) ? NULL : fb.v;
    if (!text) {
        pt_buf_free(&fb);
        fprintf(stderr, "petrel %s: invalid value '%s' for %s: %s\n", cmd, v, a,
                file ? strerror(errno) : "out of memory");
        return -1;
    }
    char err[512] = "";
    if (schema) {
        pt_buf b = {0};
        int rc = pt_json_schema_to_gbnf(text, &b, err, sizeof err);
        free(text);
        if (rc) {
            pt_buf_free(&b);
            fprintf(stderr, "petrel %s: invalid value for %s: %s\n", cmd, a, err);
            return -1;
        }
        text = b.v; /* the buffer's bytes are malloc'd and NUL-terminated */
    }
    pt_grammar *g = pt_grammar_new(NULL, text, strlen(text), err, sizeof err);
    if (!g) {
        fprintf(stderr, "petrel %s: invalid value for %s: %s\n", cmd, a, err);
        free(text);
        return -1;
    }
    pt_grammar_free(g);
    o->grammar = text;
    o->grammar_flag = a;
    return 0;
}

/* The exclusive pairs: two options, and how to say it (--temp counts when above 0). */
static const struct {
    int a, b;
    const char *what;
} tcli_exclusive[] = {
    {OPT_GREEDY, OPT_TEMP, "--greedy and --temp above 0"},
    {OPT_EXPERT_SLOTS, OPT_MMAP_EXPERTS, "--expert-slots and --mmap-experts"},
    {OPT_PACK, OPT_NO_PACK, "--pack and --no-pack"},
    {OPT_PIN_GB, OPT_NO_PIN, "--pin-gb and --no-pin"},
};

_Static_assert(OPT_SHARED_END <= 64, "tcli_opts.given holds a bit per shared option");

/* Record that option id, of an exclusive pair, was given: 0, or -1 (message printed) when the
 * other one was given too. */
static int given(const char *cmd, tcli_opts *o, int id) {
    o->given |= 1ull << id;
    for (size_t k = 0; k < sizeof tcli_exclusive / sizeof tcli_exclusive[0]; k++)
        if ((o->given >> tcli_exclusive[k].a & 1) && (o->given >> tcli_exclusive[k].b & 1)) {
            fprintf(stderr, "petrel %s: %s contradict each other: give one\n", cmd,
                    tcli_exclusive[k].what);
            return -1;
        }
    return 0;
}

/* The model and engine options (pt_engine_params and the session's sizes): 0, or -1 with the
 * message printed. */
static int engine_option(tcli_opts *o, const cli_args *a, const cli_val *v) {
    static const int kernels[] = {PT_KERNELS_BEST, PT_KERNELS_AVX512, PT_KERNELS_AVX2,
                                  PT_KERNELS_SCALAR}; /* in --kernels' order */
    static const int io[] = {PT_IO_AUTO, PT_IO_URING, PT_IO_PREAD};
    static const int load[] = {PT_LOAD_MMAP, PT_LOAD_RAM, PT_LOAD_RAM, PT_LOAD_MLOCK};
    pt_engine_params *ep = &o->ep;
    switch (v->id) {
    case OPT_MODEL: o->model = v->s; return 0;
    case OPT_HF: o->hf = v->s; return 0;
    case OPT_THREADS: o->threads = (long)v->n; return 0;
    case OPT_CTX: o->n_ctx = (long)v->n; return 0;
    case OPT_BATCH: o->n_batch = (long)v->n; return 0;
    case OPT_CACHE_TYPE_K:
    case OPT_CACHE_TYPE_V: {
        const int t = pt_kv_type_parse(v->s);
        if (t < 0) return cli_bad_value(a, v);
        *(v->id == OPT_CACHE_TYPE_K ? &ep->cache_type_k : &ep->cache_type_v) = t;
        return 0;
    }
    case OPT_KV_RAM_MB: ep->kv_ram_mb = v->f; return 0;
    case OPT_KERNELS: o->kernels = kernels[v->n]; return 0;
    case OPT_RAM: ep->ram_gb = (float)v->f; return 0;
    case OPT_EXPERT_SLOTS: ep->expert_slots = (int)v->n; return given(a->name, o, v->id);
    case OPT_MMAP_EXPERTS: ep->expert_slots = PT_EXPERTS_MMAP; return given(a->name, o, v->id);
    case OPT_EXPERT_POLICY: ep->expert_policy = v->n ? PT_POLICY_LRU : PT_POLICY_LFU; return 0;
    case OPT_IO: ep->io = io[v->n]; return 0;
    case OPT_BUFFERED_IO: ep->buffered_io = 1; return 0;
    case OPT_LOAD_MODE: ep->load_mode = load[v->n]; return 0;
    case OPT_PACK: ep->pack_path = v->s; return given(a->name, o, v->id);
    case OPT_NO_PACK: ep->no_pack = 1; return given(a->name, o, v->id);
    case OPT_NO_VERIFY: ep->no_verify = 1; return 0;
    case OPT_PIN_GB: ep->pin_gb = (float)v->f; return given(a->name, o, v->id);
    case OPT_NO_PIN: ep->no_pin = 1; return given(a->name, o, v->id);
    case OPT_PREFETCH: ep->prefetch = 1; return 0;
    case OPT_TRACE: ep->trace_path = v->s; return 0;
    case OPT_STATS: o->stats = 1; return 0;
    default: fprintf(stderr, "petrel %s: %s is not handled (a bug)\n", a->name, v->name); return -1;
    }
}

/* A sampling field the user gave (its PT_SAMPLING_* bit recorded). */
#define SP_SET(field, bit, value) (o->sp.field = (value), o->sp_set |= (bit))

int tcli_option(tcli_opts *o, const cli_args *a, const cli_val *v) {
    switch (v->id) {
    case OPT_TEMP:
        SP_SET(temp, PT_SAMPLING_TEMP, (float)v->f);
        return o->sp.temp > 0 ? given(a->name, o, v->id) : 0;
    case OPT_GREEDY: SP_SET(temp, PT_SAMPLING_TEMP, 0); return given(a->name, o, v->id);
    case OPT_TOP_K: SP_SET(top_k, PT_SAMPLING_TOP_K, (int)v->n); return 0;
    case OPT_TOP_P: SP_SET(top_p, PT_SAMPLING_TOP_P, (float)v->f); return 0;
    case OPT_MIN_P: SP_SET(min_p, PT_SAMPLING_MIN_P, (float)v->f); return 0;
    case OPT_REPEAT_PENALTY: SP_SET(repeat_penalty, PT_SAMPLING_REPEAT, (float)v->f); return 0;
    case OPT_REPEAT_LAST_N: SP_SET(penalty_last_n, PT_SAMPLING_LAST_N, (int)v->n); return 0;
    case OPT_PRESENCE_PENALTY:
        SP_SET(presence_penalty, PT_SAMPLING_PRESENCE, (float)v->f);
        return 0;
    case OPT_FREQUENCY_PENALTY:
        SP_SET(frequency_penalty, PT_SAMPLING_FREQUENCY, (float)v->f);
        return 0;
    case OPT_SEED: SP_SET(seed, PT_SAMPLING_SEED, v->u); return 0;
    case OPT_STOP:
        if (o->n_stops == TCLI_MAX_STOPS) {
            fprintf(stderr, "petrel %s: at most %d --stop strings\n", a->name, TCLI_MAX_STOPS);
            return -1;
        }
        o->stops[o->n_stops++] = v->s;
        return 0;
    case OPT_MAX_TOKENS: o->n_gen = (long)v->n; return 0;
    case OPT_THINK: o->think = 1; return 0;
    case OPT_NO_THINK: o->think = 0; return 0;
    case OPT_CHAT_FORMAT:
        if (!pt_chat_format_known(v->s)) {
            char known[128];
            cli_chat_formats(", ", known, sizeof known);
            fprintf(stderr, "petrel %s: unknown chat format '%s' (%s)\n", a->name, v->s, known);
            return -1;
        }
        o->chat_format = v->s;
        return 0;
    case OPT_DRAFT: o->draft = (long)v->n; return 0;
    case OPT_PARSE_SPECIAL_IN_CONTENT: o->parse_special_in_content = 1; return 0;
    case OPT_GRAMMAR:
    case OPT_GRAMMAR_FILE:
    case OPT_JSON_SCHEMA:
    case OPT_JSON_SCHEMA_FILE: return grammar_flag(a->name, v, o);
    default: return engine_option(o, a, v);
    }
}

int tcli_resolve_model(tcli_opts *o, const char *cmd) {
    if (o->hf && o->model) {
        fprintf(stderr, "petrel %s: -m and -hf contradict each other: give one\n", cmd);
        return CLI_USAGE;
    }
    if (o->hf) {
        int rc = hub_model_path(o->hf, o->hf_path, sizeof o->hf_path);
        if (rc == CLI_OK) o->model = o->hf_path;
        return rc;
    }
    if (!o->model) o->model = CLI_DEFAULT_MODEL;
    if (!o->model) {
        fprintf(stderr, "petrel %s: -m MODEL is required\n", cmd);
        return CLI_USAGE;
    }
    return 0;
}

pt_engine_params tcli_engine_params(const tcli_opts *o) {
    pt_engine_params ep = o->ep;
    ep.model_path = o->model;
    ep.n_threads = (int)o->threads;
    ep.kernels = o->kernels;
    ep.n_ctx = (int)o->n_ctx; /* the memory plan leaves room for the context asked for */
    return ep;
}

void tcli_experts_how(const pt_stats *st, char *out, size_t cap) {
    snprintf(out, cap, "%s (%d slots/layer, %s%s%s)", st->streaming ? "streamed" : "mmap",
             st->slots_per_layer, st->io_backend, st->direct_io ? ", O_DIRECT" : "",
             st->expert_pack ? ", pack" : "");
}

int tcli_open(const tcli_opts *o, tcli_model *m, int quiet) {
    memset(m, 0, sizeof *m);
    pt_engine_params ep = tcli_engine_params(o);
    char err[512];
    m->e = pt_engine_open(&ep, err, sizeof err);
    if (!m->e) return cli_error("%s", err);
    if (!pt_engine_has_vocab(m->e, err, sizeof err)) {
        tcli_close(m);
        return cli_error("%s", err);
    }
    m->format = o->chat_format ? o->chat_format : pt_engine_chat_format(m->e);
    /* the model's published values, then the user's flags */
    pt_engine_sampling(m->e, &m->sp);
    pt_sampling_override(&m->sp, &o->sp, o->sp_set);
    if (!(o->sp_set & PT_SAMPLING_SEED))
        m->sp.seed = (uint64_t)(pt_now() * 1e9) ^ ((uint64_t)getpid() << 32);
    if (o->grammar) {
        m->grammar = pt_grammar_new(m->e, o->grammar, strlen(o->grammar), err, sizeof err);
        if (!m->grammar) {
            tcli_close(m);
            return cli_error("%s", err);
        }
        m->sp.grammar = m->grammar;
    }
    if (!quiet) fprintf(stderr, "petrel: %s\n", pt_engine_plan(m->e));
    pt_session_params sp = {.n_ctx = (int)o->n_ctx, .n_batch = (int)o->n_batch};
    m->s = pt_session_new(m->e, &sp, err, sizeof err);
    if (!m->s) {
        tcli_close(m);
        return cli_error("%s", err);
    }
    m->g = pt_gen_new(m->s, &m->sp, err, sizeof err);
    if (!m->g) {
        tcli_close(m);
        return cli_error("%s", err);
    }
    if (o->draft > 0 && !pt_engine_has_mtp(m->e)) {
        const int rc = cli_error(
            "--draft %ld: the model %s (%s) has no NextN/MTP head to draft with", o->draft,
            o->model ? o->model : "", pt_engine_arch(m->e) ? pt_engine_arch(m->e) : "");
        tcli_close(m);
        return rc;
    }
    const int want = o->draft >= 0             ? (int)o->draft
                     : pt_engine_has_mtp(m->e) ? TCLI_DEFAULT_DRAFT
                                               : 0;
    const int got = pt_gen_set_draft(m->g, want, err, sizeof err);
    if (got < 0) {
        tcli_close(m);
        return cli_error("%s", err);
    }
    if (got != want)
        fprintf(stderr,
                "petrel: warning: --draft %d clamped to %d (at most %d, and the context of %d "
                "positions needs room for the drafts)\n",
                want, got, PT_MAX_DRAFT, pt_session_n_ctx(m->s));
    int n_vocab = pt_vocab_size(m->e);
    if (pt_chat_format_known(m->format) && (m->markup = malloc((size_t)n_vocab)) &&
        pt_chat_markup_tokens(m->e, m->format, m->markup, n_vocab) < 0) {
        free(m->markup);
        m->markup = NULL;
    }
    return 0;
}

void tcli_close(tcli_model *m) {
    free(m->markup);
    pt_gen_free(m->g);
    pt_grammar_free(m->grammar);
    pt_session_free(m->s);
    pt_engine_close(m->e);
    memset(m, 0, sizeof *m);
}

const char *tcli_reason_name(int r) {
    switch (r) {
    case PT_GEN_EOG: return "eog";
    case PT_GEN_LENGTH: return "length";
    case PT_GEN_STOP_STRING: return "stop";
    case PT_GEN_CONTEXT: return "context";
    case PT_GEN_INTERRUPT: return "interrupted";
    case PT_GEN_ERROR: return "error";
    default: return "none";
    }
}

/* ===== A chat answer as it streams ===== */

void tcli_answer_init(tcli_answer *a, const char *format, int show) {
    memset(a, 0, sizeof *a);
    a->format = format;
    a->show = show;
    a->dim = isatty(fileno(stderr));
    fe_split_init(&a->split, format, 0, 0, 0);
}

int tcli_answer_prefilled(void *ud, int in_reasoning) {
    tcli_answer *a = ud;
    /* a new turn: what the last one left is dropped, the prompt says where we start */
    fe_split_free(&a->split);
    fe_split_init(&a->split, a->format, in_reasoning, 0, 0);
    a->in_reasoning = 0;
    return 0;
}

/* End the reasoning's line on stderr (and its dimming). */
static void end_reasoning(tcli_answer *a) {
    if (!a->in_reasoning) return;
    if (a->dim) fputs("\033[0m", stderr);
    if (!a->reasoning_nl) fputc('\n', stderr);
    fflush(stderr);
    a->in_reasoning = 0;
}

static int answer_delta(void *ud, int kind, const char *s, size_t n) {
    tcli_answer *a = ud;
    if (kind == FE_REASONING) {
        if (!a->show) return 0;
        if (!a->in_reasoning && a->dim) fputs("\033[2m", stderr);
        a->in_reasoning = 1;
        fwrite(s, 1, n, stderr);
        a->reasoning_nl = s[n - 1] == '\n';
        fflush(stderr);
        return 0;
    }
    end_reasoning(a);
    if (fwrite(s, 1, n, stdout) != n) return -1;
    fflush(stdout);
    return 0;
}

int tcli_answer_emit(void *ud, const char *s, size_t n) {
    tcli_answer *a = ud;
    return fe_split_push(&a->split, s, n, 0, answer_delta, a);
}

const pt_buf *tcli_answer_finish(tcli_answer *a) {
    fe_split_push(&a->split, "", 0, 1, answer_delta, a);
    end_reasoning(a);
    return &a->split.content;
}

void tcli_answer_free(tcli_answer *a) {
    fe_split_free(&a->split);
}

void tcli_print_stats(FILE *f, const tcli_model *m, const tcli_turn *t, int json, int verbose,
                      const pt_chat_parsed *answer) {
    pt_stats st;
    pt_engine_stats(m->e, &st);
    uint64_t req = st.hits + st.misses;
    double hit = req ? 100.0 * (double)st.hits / (double)req : 100.0;
    double prefill_s = t->t_prefilled - t->t_start;
    double ttft = t->t_first ? t->t_first - t->t_start : 0;
    double dec_s = t->t_first && t->t_end > t->t_first ? t->t_end - t->t_first : 0;
    double tps = t->n_gen > 1 && dec_s > 0 ? (t->n_gen - 1) / dec_s : 0;
    pt_draft_stats ds;
    pt_gen_draft_stats(m->g, &ds);
    pt_prompt_stats ps;
    pt_session_prompt_stats(m->s, &ps);
    const uint64_t fwd = ds.verify + ds.plain;
    const double acc = ds.drafted ? (double)ds.accepted / (double)ds.drafted : 0;
    const double tpf = fwd ? (double)ds.tokens / (double)fwd : 0;
    fe_kv_stats kv;
    fe_kv_stats_of(m->s, t->n_reused, pt_gen_last_restored(m->g), &kv);
    char dline[160] = "";
    if (ds.n_draft)
        snprintf(dline, sizeof dline, " | draft %d: %.1f%% accepted, %.2f tok/forward", ds.n_draft,
                 100 * acc, tpf);
    if (json) {
        /* the answer split, each part in its own field (JSON-escaped) */
        char *fields = NULL;
        if (answer) {
            json_t *o =
                json_pack("{s:s, s:s}", "content", answer->content, "reasoning", answer->reasoning);
            char *d = o ? json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
            json_decref(o);
            if (d && strlen(d) > 2) { /* "{...}" -> ", ..." */
                d[strlen(d) - 1] = 0;
                d[0] = ' ';
                fields = d;
            } else {
                free(d);
            }
        }
        fprintf(
            f,
            "{\"prompt_tokens\": %d, \"reused_tokens\": %d, \"prefill_s\": %.4f, \"ttft_s\": %.4f, "
            "\"generated_tokens\": %d, \"decode_tok_s\": %.3f, \"stop\": \"%s\", "
            "\"cache_hit_rate\": %.4f, "
            "\"expert_hits\": %llu, \"expert_misses\": %llu, \"gb_read\": %.6f, \"io_wait_s\": "
            "%.4f, "
            "\"rss_mb\": %.1f, \"peak_rss_mb\": %.1f, \"draft\": %d, \"draft_accept\": %.4f, "
            "\"tokens_per_forward\": %.3f, \"draft_backoffs\": %llu, \"draft_probes\": %llu, "
            "\"draft_probe_hits\": %llu, \"seed\": %llu, "
            "\"n_ctx\": %d, \"kv_positions\": %d, \"kv_types\": \"%s\", \"kv_ram_bytes\": %llu, "
            "\"kv_disk_bytes\": %llu, \"kv_gather_cap\": %llu, \"kv_gathers\": %llu, "
            "\"kv_gather_rows\": %llu, \"kv_gather_kept\": %llu, \"kv_gather_reads\": %llu, "
            "\"kv_gather_bytes\": %llu, "
            "\"prefix_hits\": %d, \"prefix_hits_disk\": %d, \"prompt_batch\": %d, "
            "\"prompt_expert_gb_read\": %.6f, \"prompt_routed_expert_gb\": %.6f%s%s}\n",
            t->n_prompt, t->n_reused, prefill_s, ttft, t->n_gen, tps, tcli_reason_name(t->reason),
            hit / 100, (unsigned long long)st.hits, (unsigned long long)st.misses,
            st.bytes_read / 1e9, st.io_wait_s, st.rss_bytes / 1048576.0,
            st.peak_rss_bytes / 1048576.0, ds.n_draft, acc, tpf, (unsigned long long)ds.backoffs,
            (unsigned long long)ds.probes, (unsigned long long)ds.probe_hits,
            (unsigned long long)m->sp.seed, kv.n_ctx, kv.n_past, kv.types,
            (unsigned long long)kv.ram_bytes, (unsigned long long)kv.disk_bytes,
            (unsigned long long)kv.cache.gather_cap, (unsigned long long)kv.cache.gathers,
            (unsigned long long)kv.cache.gather_rows, (unsigned long long)kv.cache.gather_kept,
            (unsigned long long)kv.cache.gather_reads, (unsigned long long)kv.cache.gather_bytes,
            kv.hits, kv.hits_disk, ps.n_batch, ps.expert_bytes_read / 1e9,
            ps.routed_expert_bytes / 1e9, fields ? "," : "", fields ? fields : "");
        free(fields);
        return;
    }
    char kline[FE_KV_LINE];
    fe_kv_format(&kv, kline, sizeof kline);
    fprintf(f,
            "[prompt %d tokens (%d reused) in %.2f s, TTFT %.2f s | %d tokens, %.2f tok/s, %s | "
            "%s | experts %.1f%% "
            "hit, %.2f GB read | RSS %.0f MB, peak %.0f MB%s]\n",
            t->n_prompt, t->n_reused, prefill_s, ttft, t->n_gen, tps, tcli_reason_name(t->reason),
            kline, hit, st.bytes_read / 1e9, st.rss_bytes / 1048576.0,
            st.peak_rss_bytes / 1048576.0, dline);
    char how[128];
    tcli_experts_how(&st, how, sizeof how);
    if (verbose)
        fprintf(f,
                "[experts %s: %llu hits, %llu misses, I/O wait %.3f s, %llu pinned, prefetch "
                "%llu/%llu used; prompt in blocks of %d: %.3f GB of experts read, %.3f GB routed "
                "to; seed %llu]\n",
                how, (unsigned long long)st.hits, (unsigned long long)st.misses, st.io_wait_s,
                (unsigned long long)st.pinned, (unsigned long long)st.prefetch_used,
                (unsigned long long)st.prefetched, ps.n_batch, ps.expert_bytes_read / 1e9,
                ps.routed_expert_bytes / 1e9, (unsigned long long)m->sp.seed);
    if (verbose && (st.checked_reads || st.bad_reads))
        fprintf(f,
                "[expert checksums: %llu reads checked in %.3f s, %llu bad, %llu from the GGUF]\n",
                (unsigned long long)st.checked_reads, st.verify_s, (unsigned long long)st.bad_reads,
                (unsigned long long)st.fallbacks);
}

/* ===== Progress of a long prompt ===== */

void tcli_progress_init(tcli_progress *p, double after) {
    memset(p, 0, sizeof *p);
    p->after = after;
    p->tty = isatty(fileno(stderr));
}

/* "21 s", "4 min 12 s", "1 h 02 min". */
static void fmt_secs(double t, char *out, size_t cap) {
    const long s = t > 0 ? (long)(t + 0.5) : 0;
    if (s < 60)
        snprintf(out, cap, "%ld s", s);
    else if (s < 3600)
        snprintf(out, cap, "%ld min %02ld s", s / 60, s % 60);
    else
        snprintf(out, cap, "%ld h %02ld min", s / 3600, s / 60 % 60);
}

void tcli_progress_cb(void *ud, const pt_prompt_progress *pr) {
    tcli_progress *p = ud;
    const double now = pt_now();
    if (pr->done == 0) { /* a new prompt */
        p->t0 = p->t_last = now;
        p->tenth = 0, p->live = 0;
        return;
    }
    const double el = now - p->t0;
    if (el < p->after) return;
    const int last = pr->done >= pr->total;
    const int n_eval = pr->n_prompt - pr->n_reused;
    const double evaluated = (double)n_eval * (double)pr->done / (double)pr->total;
    const int tokens = pr->n_reused + (int)evaluated;
    const double tps = el > 0 ? evaluated / el : 0;
    const int tenth = (int)(10 * pr->done / pr->total);
    char eta[32], took[32];
    fmt_secs(tps > 0 ? (n_eval - evaluated) / tps : 0, eta, sizeof eta);
    if (el < 60)
        snprintf(took, sizeof took, "%.1f s", el);
    else
        fmt_secs(el, took, sizeof took);
    if (p->tty) {
        if (last) {
            if (p->live) fputs("\r\033[K", stderr);
            p->live = 0;
            fflush(stderr);
            return;
        }
        if (p->live && now - p->t_last < 0.1) return;
        fprintf(stderr, "\r\033[K[prefill %d/%d tokens | %.1f tok/s | ETA %s]", tokens,
                pr->n_prompt, tps, eta);
        p->live = 1;
    } else {
        if (!last && tenth <= p->tenth && now - p->t_last < 5) return;
        if (last)
            fprintf(stderr, "[prefill %d/%d tokens | %.1f tok/s | done in %s]\n", tokens,
                    pr->n_prompt, tps, took);
        else
            fprintf(stderr, "[prefill %d/%d tokens | %.1f tok/s | ETA %s]\n", tokens, pr->n_prompt,
                    tps, eta);
        p->tenth = tenth;
    }
    p->t_last = now;
    fflush(stderr);
}

void tcli_progress_end(tcli_progress *p) {
    if (p->live) fputs("\r\033[K", stderr), fflush(stderr);
    p->live = 0;
}
