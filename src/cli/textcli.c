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

#define TCLI_STR_(x) #x
#define TCLI_STR(x) TCLI_STR_(x) /* a number macro as a string literal */

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
static int grammar_flag(const char *cmd, const char *a, const char *v, tcli_opts *o) {
    if (o->grammar) {
        fprintf(stderr, "petrel %s: %s and %s contradict each other: give one grammar\n", cmd,
                o->grammar_flag, a);
        return -1;
    }
    const int file = !strcmp(a, "--grammar-file") || !strcmp(a, "--json-schema-file");
    const int schema =
        !strcmp(a, "-j") || !strcmp(a, "--json-schema") || !strcmp(a, "--json-schema-file");
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

static int parse_long(const char *s, long lo, long hi, long *out) {
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi) return -1;
    *out = v;
    return 0;
}

static int parse_float(const char *s, double lo, double hi, float *out) {
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || *end || !(v >= lo && v <= hi)) return -1;
    *out = (float)v;
    return 0;
}

enum {
    TCLI_GIVEN_GREEDY = 1u << 0,
    TCLI_GIVEN_TEMP = 1u << 1, /* a temperature above 0 */
    TCLI_GIVEN_SLOTS = 1u << 2,
    TCLI_GIVEN_MMAP = 1u << 3,
    TCLI_GIVEN_PACK = 1u << 4,
    TCLI_GIVEN_NO_PACK = 1u << 5,
    TCLI_GIVEN_PIN = 1u << 6,
    TCLI_GIVEN_NO_PIN = 1u << 7,
};

/* The exclusive pairs: a bit, the other one, and how to say it. */
static const struct {
    unsigned a, b;
    const char *what;
} tcli_exclusive[] = {
    {TCLI_GIVEN_GREEDY, TCLI_GIVEN_TEMP, "--greedy and --temp above 0"},
    {TCLI_GIVEN_SLOTS, TCLI_GIVEN_MMAP, "--expert-slots and --mmap-experts"},
    {TCLI_GIVEN_PACK, TCLI_GIVEN_NO_PACK, "--pack and --no-pack"},
    {TCLI_GIVEN_PIN, TCLI_GIVEN_NO_PIN, "--pin-gb and --no-pin"},
};

/* Record that a flag of an exclusive pair was given: 0, or -1 (message printed)
 * when the other one was given too. */
static int given(const char *cmd, tcli_opts *o, unsigned bit) {
    o->given |= bit;
    for (size_t k = 0; k < sizeof tcli_exclusive / sizeof tcli_exclusive[0]; k++)
        if ((o->given & tcli_exclusive[k].a) && (o->given & tcli_exclusive[k].b)) {
            fprintf(stderr, "petrel %s: %s contradict each other: give one\n", cmd,
                    tcli_exclusive[k].what);
            return -1;
        }
    return 0;
}

int tcli_parse(const char *cmd, int argc, char **argv, int *i, tcli_opts *o) {
    const char *a = argv[*i];
    const char *v = *i + 1 < argc ? argv[*i + 1] : NULL;
    long n;
    float f;
#define NEEDV()                                                                                    \
    do {                                                                                           \
        if (!v) {                                                                                  \
            fprintf(stderr, "petrel %s: %s needs a value\n", cmd, a);                              \
            return -1;                                                                             \
        }                                                                                          \
        (*i)++;                                                                                    \
    } while (0)
/* one line naming the flag and what it accepts, exit status 2 (the caller) */
#define BADR(range)                                                                                \
    do {                                                                                           \
        fprintf(stderr, "petrel %s: invalid value '%s' for %s: expected %s\n", cmd, v, a, range);  \
        return -1;                                                                                 \
    } while (0)
#define IS(x) (!strcmp(a, x))
    if (IS("-m") || IS("--model")) {
        NEEDV();
        o->model = v;
    } else if (IS("-hf") || IS("--hf-repo")) {
        NEEDV();
        o->hf = v;
    } else if (IS("-t") || IS("--threads")) {
        NEEDV();
        if (parse_long(v, 1, 1024, &o->threads))
            BADR("an integer from 1 to 1024 (leave -t out for all cores)");
    } else if (IS("-c") || IS("--ctx-size")) {
        NEEDV();
        if (parse_long(v, 1, 1 << 26, &o->n_ctx)) BADR("an integer from 1 to 67108864");
    } else if (IS("-ctk") || IS("--cache-type-k") || IS("-ctv") || IS("--cache-type-v")) {
        NEEDV();
        const int t = pt_kv_type_parse(v);
        if (t < 0) BADR("f32, f16, bf16, q8_0 or q4_0");
        *(IS("-ctk") || IS("--cache-type-k") ? &o->ep.cache_type_k : &o->ep.cache_type_v) = t;
    } else if (IS("--kv-ram-mb")) {
        NEEDV();
        char *end = NULL;
        const double mb = strtod(v, &end);
        if (!end || *end || !(mb > 0) || mb > 1073741824.0)
            BADR("a size in MiB above 0 (0.5 and 4096 are sizes)");
        o->ep.kv_ram_mb = mb;
    } else if (IS("-b") || IS("--batch-size")) {
        NEEDV();
        if (parse_long(v, 1, 1 << 16, &o->n_batch)) BADR("an integer from 1 to 65536");
    } else if (IS("-n") || IS("--max-tokens") || IS("--n-predict")) {
        NEEDV();
        if (parse_long(v, -1, 1 << 24, &o->n_gen))
            BADR("an integer from 0 to 16777216, or -1 (until end of generation)");
    } else if (IS("--kernels")) {
        NEEDV();
        if (!strcmp(v, "best"))
            o->kernels = PT_KERNELS_BEST;
        else if (!strcmp(v, "scalar"))
            o->kernels = PT_KERNELS_SCALAR;
        else if (!strcmp(v, "avx2"))
            o->kernels = PT_KERNELS_AVX2;
        else if (!strcmp(v, "avx512"))
            o->kernels = PT_KERNELS_AVX512;
        else
            BADR("best, avx512, avx2 or scalar");
    } else if (IS("--expert-slots")) {
        NEEDV();
        if (parse_long(v, 1, 1 << 20, &n)) BADR("an integer from 1 to 1048576");
        o->ep.expert_slots = (int)n;
        if (given(cmd, o, TCLI_GIVEN_SLOTS)) return -1;
    } else if (IS("--mmap-experts")) {
        o->ep.expert_slots = PT_EXPERTS_MMAP;
        if (given(cmd, o, TCLI_GIVEN_MMAP)) return -1;
    } else if (IS("--ram")) {
        NEEDV();
        if (parse_float(v, 1e-6, 1e9, &f)) BADR("a number of GB above 0 (at most 1e9)");
        o->ep.ram_gb = f;
    } else if (IS("--expert-policy")) {
        NEEDV();
        if (!strcmp(v, "lru"))
            o->ep.expert_policy = PT_POLICY_LRU;
        else if (!strcmp(v, "lfu"))
            o->ep.expert_policy = PT_POLICY_LFU;
        else
            BADR("lfu or lru");
    } else if (IS("--io")) {
        NEEDV();
        if (!strcmp(v, "auto"))
            o->ep.io = PT_IO_AUTO;
        else if (!strcmp(v, "uring"))
            o->ep.io = PT_IO_URING;
        else if (!strcmp(v, "pread"))
            o->ep.io = PT_IO_PREAD;
        else
            BADR("auto, uring or pread");
    } else if (IS("--pack")) {
        NEEDV();
        o->ep.pack_path = v;
        if (given(cmd, o, TCLI_GIVEN_PACK)) return -1;
    } else if (IS("--no-pack")) {
        o->ep.no_pack = 1;
        if (given(cmd, o, TCLI_GIVEN_NO_PACK)) return -1;
    } else if (IS("--no-verify")) {
        o->ep.no_verify = 1;
    } else if (IS("--pin-gb")) {
        NEEDV();
        if (parse_float(v, 1e-6, 1e9, &f)) BADR("a number of GB above 0 (at most 1e9)");
        o->ep.pin_gb = f;
        if (given(cmd, o, TCLI_GIVEN_PIN)) return -1;
    } else if (IS("--no-pin")) {
        o->ep.no_pin = 1;
        if (given(cmd, o, TCLI_GIVEN_NO_PIN)) return -1;
    } else if (IS("--prefetch")) {
        o->ep.prefetch = 1;
    } else if (IS("--trace")) {
        NEEDV();
        o->ep.trace_path = v;
    } else if (IS("--load-mode") || IS("-lm")) {
        NEEDV();
        if (!strcmp(v, "mmap"))
            o->ep.load_mode = PT_LOAD_MMAP;
        else if (!strcmp(v, "ram") || !strcmp(v, "none"))
            o->ep.load_mode = PT_LOAD_RAM;
        else if (!strcmp(v, "mlock"))
            o->ep.load_mode = PT_LOAD_MLOCK;
        else
            BADR("mmap, ram (llama.cpp's none) or mlock");
    } else if (IS("--buffered-io")) {
        o->ep.buffered_io = 1;
    } else if (IS("--stats")) {
        o->stats = 1;
    } else if (IS("--draft")) {
        NEEDV();
        if (parse_long(v, 0, 1 << 20, &o->draft))
            BADR("an integer from 0 (no drafting) up; the MTP head drafts N tokens per forward");
    } else if (IS("--greedy")) {
        o->sp.temp = 0;
        o->sp_set |= PT_SAMPLING_TEMP;
        if (given(cmd, o, TCLI_GIVEN_GREEDY)) return -1;
    } else if (IS("--temp") || IS("--temperature")) {
        NEEDV();
        if (parse_float(v, 0, 100, &o->sp.temp)) BADR("a number from 0 (greedy) to 100");
        o->sp_set |= PT_SAMPLING_TEMP;
        if (o->sp.temp > 0 && given(cmd, o, TCLI_GIVEN_TEMP)) return -1;
    } else if (IS("--top-k")) {
        NEEDV();
        if (parse_long(v, 0, 1 << 24, &n)) BADR("an integer from 0 (off) to 16777216");
        o->sp.top_k = (int)n;
        o->sp_set |= PT_SAMPLING_TOP_K;
    } else if (IS("--top-p")) {
        NEEDV();
        if (parse_float(v, 1e-6, 1, &o->sp.top_p)) BADR("a number above 0, at most 1 (1 = off)");
        o->sp_set |= PT_SAMPLING_TOP_P;
    } else if (IS("--min-p")) {
        NEEDV();
        if (parse_float(v, 0, 1, &o->sp.min_p)) BADR("a number from 0 (off) to 1");
        o->sp_set |= PT_SAMPLING_MIN_P;
    } else if (IS("--repeat-penalty")) {
        NEEDV();
        if (parse_float(v, 1e-3, 100, &o->sp.repeat_penalty))
            BADR("a number from 0.001 to 100 (1 = off)");
        o->sp_set |= PT_SAMPLING_REPEAT;
    } else if (IS("--repeat-last-n")) {
        NEEDV();
        if (parse_long(v, 0, 1 << 20, &n)) BADR("an integer from 0 to 1048576");
        o->sp.penalty_last_n = (int)n;
        o->sp_set |= PT_SAMPLING_LAST_N;
    } else if (IS("--presence-penalty")) {
        NEEDV();
        if (parse_float(v, -100, 100, &o->sp.presence_penalty)) BADR("a number from -100 to 100");
        o->sp_set |= PT_SAMPLING_PRESENCE;
    } else if (IS("--frequency-penalty")) {
        NEEDV();
        if (parse_float(v, -100, 100, &o->sp.frequency_penalty)) BADR("a number from -100 to 100");
        o->sp_set |= PT_SAMPLING_FREQUENCY;
    } else if (IS("--seed")) {
        NEEDV();
        char *end;
        errno = 0;
        unsigned long long s = strtoull(v, &end, 10);
        /* digits (and an optional '+') only: strtoull would take " -5" as 2^64 - 5 */
        const char *d = v[0] == '+' ? v + 1 : v;
        if (errno || end == v || *end || *d < '0' || *d > '9')
            BADR("an integer from 0 to 18446744073709551615");
        o->sp.seed = s;
        o->sp_set |= PT_SAMPLING_SEED;
    } else if (IS("--stop")) {
        NEEDV();
        if (!*v) BADR("a non-empty string");
        if (o->n_stops == TCLI_MAX_STOPS) {
            fprintf(stderr, "petrel %s: at most %d --stop strings\n", cmd, TCLI_MAX_STOPS);
            return -1;
        }
        o->stops[o->n_stops++] = v;
    } else if (IS("--chat-format")) {
        NEEDV();
        if (!pt_chat_format_known(v)) {
            fprintf(stderr,
                    "petrel %s: unknown chat format '%s' (glm-5, deepseek-v3, gemma-4, qwen3)\n",
                    cmd, v);
            return -1;
        }
        o->chat_format = v;
    } else if (IS("--think")) {
        o->think = 1;
    } else if (IS("--no-think")) {
        o->think = 0;
    } else if (IS("--parse-special-in-content")) {
        o->parse_special_in_content = 1;
    } else if ((IS("--grammar") || IS("--grammar-file") || IS("-j") || IS("--json-schema") ||
                IS("--json-schema-file")) &&
               (!strcmp(cmd, "generate") || !strcmp(cmd, "chat"))) {
        NEEDV();
        if (grammar_flag(cmd, a, v, o)) return -1;
    } else {
        return 0;
    }
#undef IS
#undef NEEDV
#undef BADR
    return 1;
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

void tcli_usage(FILE *f) {
    fprintf(f,
            "model (default: the demo model, %s):\n"
            "  -hf, --hf-repo OWNER/NAME[:QUANT]\n"
            "                          a GGUF model of the Hugging Face Hub, from petrel's cache,\n"
            "                          pulled into it first when missing (see petrel pull)\n",
            CLI_DEFAULT_MODEL ? CLI_DEFAULT_MODEL : "not found");
    fprintf(
        f,
        "sampling (defaults: the model's published values, else --temp 0.7 --top-p 0.95):\n"
        "  --temp T                temperature; 0 = greedy\n"
        "  --greedy                same as --temp 0\n"
        "  --top-k K               keep the K most likely tokens (0 = off)\n"
        "  --top-p P               keep the smallest set with probability >= P (1 = off)\n"
        "  --min-p P               drop tokens below P x the top probability (0 = off)\n"
        "  --repeat-penalty R      penalise tokens of the last --repeat-last-n (default 64) (1 "
        "= off)\n"
        "  --presence-penalty P    subtract P from every token already seen\n"
        "  --frequency-penalty F   subtract F x count from every token already seen\n"
        "  --seed N                random seed (default: from the clock; printed with --stats)\n"
        "  --stop TEXT             stop when TEXT is generated (repeatable)\n"
        "  -n, --max-tokens N      at most N tokens (default: until end of generation or the\n"
        "                          context is full)\n"
        "  --think, --no-think     turn the model's reasoning on/off (default: the family's)\n"
        "  --chat-format NAME      glm-5, deepseek-v3, gemma-4 or qwen3 instead of the model's "
        "own\n"
        "  --grammar GBNF          (generate, chat) constrain the output to a GBNF grammar\n"
        "                          (llama.cpp's syntax, start rule root)\n"
        "  --grammar-file FILE     (generate, chat) the grammar from FILE\n"
        "  -j, --json-schema JSON  (generate, chat) constrain the output to JSON valid against\n"
        "                          the schema (the subset README.md lists)\n"
        "  --json-schema-file FILE (generate, chat) the schema from FILE\n"
        "  --draft N               draft N tokens per forward with the model's MTP head and\n"
        "                          verify them in one pass (default " TCLI_STR(
            TCLI_DEFAULT_DRAFT) " when the model has one; 0 = off;\n"
                                "                          lossless: the output is the same)\n"
                                "  --parse-special-in-content\n"
                                "                          special-token text inside messages and "
                                "tool results\n"
                                "                          (<|user|>, <tool_call>, ...) becomes "
                                "the token, as in\n"
                                "                          llama.cpp (default: only the chat "
                                "template's markup does)\n"
                                "engine:\n"
                                "  -t, --threads N         threads (default: all cores)\n"
                                "  -c, --ctx-size N        context positions (default: the model's "
                                "training\n"
                                "                          context; positions beyond the KV "
                                "cache's share of\n"
                                "                          --ram spill to the SSD; the cache is "
                                "paid for as\n"
                                "                          positions are used)\n"
                                "  -ctk, --cache-type-k T  KV cache type of keys: f32, f16 "
                                "(default), bf16, q8_0,\n"
                                "                          q4_0 (MLA models: the latent and rope "
                                "key)\n"
                                "  -ctv, --cache-type-v T  KV cache type of values (same types; "
                                "unused by MLA)\n"
                                "  --kv-ram-mb N           the KV cache's RAM share in MiB "
                                "(default: what --ram\n"
                                "                          leaves); older positions of a longer "
                                "context live\n"
                                "                          in a file in the cache directory, "
                                "removed on exit\n"
                                "  -b, --batch-size N      prompt rows per forward chunk: a "
                                "streamed "
                                "expert is read once\n"
                                "                          per layer per chunk that routes to it "
                                "(default: the\n"
                                "                          plan's prompt block, up to 8192; 256 "
                                "when the budget is unknown)\n"
                                "  --kernels K             best (default), avx512, avx2 or scalar "
                                "dot-product kernels\n"
                                "  --ram GB                memory budget (default: available "
                                "memory "
                                "and cgroup limit)\n"
                                "  --expert-slots N        stream routed experts through N cache "
                                "slots per MoE layer\n"
                                "  --mmap-experts          read experts through the memory map (no "
                                "cache of our own)\n"
                                "  --expert-policy P       cache replacement: lfu (default, with "
                                "decay) or lru\n"
                                "  --io B                  expert reads: auto (default), uring or "
                                "pread\n"
                                "  --buffered-io           read experts through the page cache "
                                "instead of O_DIRECT\n"
                                "  -lm, --load-mode M      weights kept in RAM: mmap (default: "
                                "page cache), ram (copied; llama.cpp's none) or mlock\n"
                                "  --pack PATH             expert pack to read from (default: "
                                "MODEL.gguf.xpack if valid)\n"
                                "  --no-pack               ignore expert packs, read experts from "
                                "the GGUF\n"
                                "  --no-verify             do not check streamed experts against "
                                "the pack's checksums\n"
                                "  --pin-gb GB             cache memory for hot experts pinned "
                                "from "
                                "usage history\n"
                                "  --no-pin                pin nothing\n"
                                "  --prefetch              read the next layer's likely experts "
                                "ahead (router lookahead)\n"
                                "  --trace FILE            write the routing trace (one line per "
                                "layer request)\n"
                                "  --stats                 print expert-cache details with the "
                                "statistics\n");
}

int tcli_open(const tcli_opts *o, tcli_model *m, int quiet) {
    memset(m, 0, sizeof *m);
    pt_engine_params ep = o->ep;
    ep.model_path = o->model;
    ep.n_threads = (int)o->threads;
    ep.kernels = o->kernels;
    ep.n_ctx = (int)o->n_ctx; /* the memory plan leaves room for the context asked for */
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
    default: return "none";
    }
}

/* ===== A chat answer as it streams ===== */

void tcli_answer_init(tcli_answer *a, const char *format, int show) {
    memset(a, 0, sizeof *a);
    a->format = format;
    a->show = show;
    a->dim = isatty(fileno(stderr));
    oai_split_init(&a->split, format, 0, 0, 0);
}

int tcli_answer_prefilled(void *ud, int in_reasoning) {
    tcli_answer *a = ud;
    /* a new turn: what the last one left is dropped, the prompt says where we start */
    oai_split_free(&a->split);
    oai_split_init(&a->split, a->format, in_reasoning, 0, 0);
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
    if (kind == OAI_REASONING) {
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
    return oai_split_push(&a->split, s, n, 0, answer_delta, a);
}

const pt_buf *tcli_answer_finish(tcli_answer *a) {
    oai_split_push(&a->split, "", 0, 1, answer_delta, a);
    end_reasoning(a);
    return &a->split.content;
}

void tcli_answer_free(tcli_answer *a) {
    oai_split_free(&a->split);
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
    if (verbose)
        fprintf(f,
                "[experts %s (%d slots/layer, %s%s%s): %llu hits, %llu misses, I/O wait %.3f s, "
                "%llu pinned, "
                "prefetch %llu/%llu used; prompt in blocks of %d: %.3f GB of experts read, "
                "%.3f GB routed to; seed %llu]\n",
                st.streaming ? "streamed" : "mmap", st.slots_per_layer, st.io_backend,
                st.direct_io ? ", O_DIRECT" : "", st.expert_pack ? ", pack" : "",
                (unsigned long long)st.hits, (unsigned long long)st.misses, st.io_wait_s,
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
