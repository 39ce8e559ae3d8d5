/* test_cli.c — the `petrel` command as a user sees it: output, exit statuses
 * (0 ok, 1 error, 2 bad usage) and the one-line error convention. The binary
 * is taken from PETREL_BIN (set by `make test`), default build/petrel. */
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "test.h"

static char out[1 << 16];

static const char *bin(void) {
    const char *b = getenv("PETREL_BIN");
    return b && *b ? b : "build/petrel";
}

static int run(const char *args) {
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "%s %s", bin(), args);
    return t_run(cmd, out, sizeof out);
}

/* Run with stdout discarded: `out` holds only stderr. */
static int run_stderr(const char *args) {
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "%s %s 2>&1 >/dev/null", bin(), args);
    return t_run(cmd, out, sizeof out);
}

static int count_lines(const char *s) {
    int n = 0;
    for (; *s; s++)
        n += *s == '\n';
    return n;
}

static void cli_inspect_text(void) {
    char args[1024];
    snprintf(args, sizeof args, "inspect %s", t_fixture("glm-dsa-rq2k.gguf"));
    CHECK(run(args) == 0);
    CHECK_STR_CONTAINS(out, "architecture    glm-dsa");
    CHECK_STR_CONTAINS(out, "expert_weights_scale");
    CHECK_STR_CONTAINS(out, "Q2_K         12 tensors");
    CHECK_STR_CONTAINS(out, "16 experts x   63.0 KiB");
    CHECK_STR_CONTAINS(out, "3 trunk MoE layers + 1 MTP block");
    CHECK_STR_CONTAINS(out, "756.0 KiB of routed experts touched");
    snprintf(args, sizeof args, "inspect %s", t_fixture("gemma4-rq2k.gguf"));
    CHECK(run(args) == 0);
    CHECK_STR_CONTAINS(out, "gate_up Q2_K, down Q2_K");
}

static void cli_inspect_json(void) {
    const char *files[] = {"glm-dsa-rq2k.gguf", "deepseek2-q4_k_m.gguf", "gemma4-f32.gguf",
                           "qwen3moe-mxfp4.gguf"};
    for (size_t f = 0; f < sizeof files / sizeof files[0]; f++) {
        char args[1024];
        if (!t_need(files[f])) continue; /* gemma4-f32: the others are still inspected */
        snprintf(args, sizeof args, "inspect --json %s 2>/dev/null", t_fixture(files[f]));
        CHECK(run(args) == 0);
        json_error_t jerr;
        json_t *o = json_loads(out, 0, &jerr);
        CHECKF(o, "%s: not JSON: %s", files[f], jerr.text);
        if (!o) continue;
        json_int_t tensor = json_integer_value(json_object_get(o, "tensor_bytes"));
        json_int_t res = json_integer_value(json_object_get(o, "resident_bytes"));
        json_int_t routed = json_integer_value(json_object_get(o, "routed_expert_bytes"));
        CHECK(tensor > 0 && res > 0 && routed > 0 && res + routed == tensor);
        json_t *layers = json_object_get(o, "moe_layers");
        json_int_t used = json_integer_value(json_object_get(o, "n_expert_used"));
        json_int_t per_token = 0;
        size_t i;
        json_t *l;
        json_array_foreach(layers, i, l) {
            if (json_is_true(json_object_get(l, "mtp"))) continue;
            per_token += used * json_integer_value(json_object_get(l, "expert_bytes"));
        }
        CHECK(per_token == json_integer_value(json_object_get(o, "expert_bytes_per_token")));
        CHECK(json_is_object(json_object_get(o, "hyper_parameters")));
        json_decref(o);
    }
    /* exact figures for one file: glm-dsa-rq2k experts are Q2_K 256x256, x3 matrices */
    char args[1024];
    snprintf(args, sizeof args, "inspect %s --json", t_fixture("glm-dsa-rq2k.gguf"));
    CHECK(run(args) == 0);
    json_t *o = json_loads(out, 0, NULL);
    if (o) {
        CHECK(json_integer_value(json_object_get(o, "expert_bytes_max")) == 3 * 256 * 84);
        CHECK(json_integer_value(json_object_get(o, "expert_bytes_per_token")) ==
              4 * 3 * 3 * 256 * 84);
        CHECK(json_integer_value(json_object_get(o, "n_moe_layers")) == 3);
        json_decref(o);
    }
}

static void cli_errors_are_one_line(void) {
    char path[512], args[1024];
    snprintf(path, sizeof path, "%s/bad.gguf", t_tmpdir());
    t_write_file(path, "GGUF\x09\0\0\0", 8);
    snprintf(args, sizeof args, "inspect %s", path);
    CHECK(run_stderr(args) == 1);
    CHECK(count_lines(out) == 1);
    CHECK(strncmp(out, "petrel: ", 8) == 0);
    CHECK_STR_CONTAINS(out, "bad.gguf: unsupported GGUF version 9");
    CHECK(run_stderr("inspect /no/such/file.gguf") == 1);
    CHECK(count_lines(out) == 1);
    CHECK_STR_CONTAINS(out, "/no/such/file.gguf: cannot open");
    /* a vocab-only file is fine */
    snprintf(args, sizeof args, "inspect %s", t_fixture("tokenizer/ggml-vocab-gpt-2.gguf"));
    CHECK(run(args) == 0);
}

static void cli_usage_errors(void) {
    /* `petrel` alone chats with the shipped default model (EOF on stdin ends it) */
    CHECK(run("< /dev/null") == 0);
    CHECK_STR_CONTAINS(out, "chatting with glm-dsa");
    CHECK(run("inspect") == 0); /* the default model, as for every command that takes -m */
    CHECK_STR_CONTAINS(out, "glm-dsa");
    CHECK(run("inspect --json x.gguf y.gguf") == 2);
    CHECK_STR_CONTAINS(out, "usage: petrel inspect");
    CHECK(run("inspect --bogus x.gguf") == 2);
    CHECK(run("frobnicate") == 2);
    CHECK_STR_CONTAINS(out, "unknown command 'frobnicate'");
    CHECK(run("--help") == 0);
    CHECK_STR_CONTAINS(out, "inspect");
    CHECK(run("inspect --help") == 0);
    CHECK(run("version") == 0);
    CHECK_STR_CONTAINS(out, "petrel ");
}

/* Out-of-range and non-numeric flag values: exit 2 before the model is opened,
 * one line that names the flag and what it accepts. */
static void cli_flag_values(void) {
    static const struct {
        const char *flags, *flag;
    } bad[] = {
        {"-n -2", "-n"},
        {"--max-tokens x", "--max-tokens"},
        {"-n 5x", "-n"},
        {"--top-p 2", "--top-p"},
        {"--top-p 0", "--top-p"},
        {"--top-p -0.5", "--top-p"},
        {"--temp -1", "--temp"},
        {"--temperature nan", "--temperature"},
        {"--top-k -3", "--top-k"},
        {"--top-k 1.5", "--top-k"},
        {"--min-p -0.1", "--min-p"},
        {"--min-p 1.5", "--min-p"},
        {"-c 0", "-c"},
        {"--ctx-size -5", "--ctx-size"},
        {"-t 0", "-t"},
        {"--threads -2", "--threads"},
        {"-b 0", "-b"},
        {"--repeat-penalty 0", "--repeat-penalty"},
        {"--repeat-penalty -1", "--repeat-penalty"},
        {"--repeat-last-n -1", "--repeat-last-n"},
        {"--presence-penalty abc", "--presence-penalty"},
        {"--frequency-penalty 1000", "--frequency-penalty"},
        {"--seed -1", "--seed"},
        {"--seed ' -5'", "--seed"},
        {"--seed 1.5", "--seed"},
        {"--seed 99999999999999999999999", "--seed"},
        {"--expert-slots 0", "--expert-slots"},
        {"--ram 0", "--ram"},
        {"--pin-gb -1", "--pin-gb"},
        {"--kernels fast", "--kernels"},
        {"--expert-policy mru", "--expert-policy"},
        {"--io aio", "--io"},
        {"--stop ''", "--stop"},
    };
    const char *cmds[] = {"generate -m /no/such/model.gguf -p hi", "chat -m /no/such/model.gguf",
                          "serve -m /no/such/model.gguf"};
    char args[1024], want[128];
    for (size_t c = 0; c < sizeof cmds / sizeof cmds[0]; c++)
        for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
            snprintf(args, sizeof args, "%s %s < /dev/null", cmds[c], bad[k].flags);
            int rc = run_stderr(args);
            CHECKF(rc == 2, "%s: exit %d, not 2:\n%s", args, rc, out);
            CHECKF(count_lines(out) == 1, "%s: %d lines:\n%s", args, count_lines(out), out);
            snprintf(want, sizeof want, " for %s: expected ", bad[k].flag);
            CHECKF(strstr(out, want) != NULL, "%s: no '%s' in:\n%s", args, want, out);
        }
    /* flags that contradict each other: exit 2, one line naming both */
    static const char *contra[][2] = {
        {"--greedy --temp 0.7", "--greedy and --temp above 0"},
        {"--temp 1 --greedy", "--greedy and --temp above 0"},
        {"--expert-slots 4 --mmap-experts", "--expert-slots and --mmap-experts"},
        {"--no-pack --pack x.xpack", "--pack and --no-pack"},
        {"--pin-gb 1 --no-pin", "--pin-gb and --no-pin"},
    };
    for (size_t c = 0; c < sizeof cmds / sizeof cmds[0]; c++)
        for (size_t k = 0; k < sizeof contra / sizeof contra[0]; k++) {
            snprintf(args, sizeof args, "%s %s < /dev/null", cmds[c], contra[k][0]);
            int rc = run_stderr(args);
            CHECKF(rc == 2 && count_lines(out) == 1 && strstr(out, contra[k][1]),
                   "%s: exit %d:\n%s", args, rc, out);
        }
    /* the server's own numbers too */
    CHECK(run_stderr("serve -m /no/such/model.gguf --port 70000") == 2);
    CHECK_STR_CONTAINS(out, "--port: expected an integer from 0 to 65535");
    CHECK(run_stderr("serve -m /no/such/model.gguf --queue -1") == 2);
    CHECK(count_lines(out) == 1);
    /* the limits themselves and the documented special values still work */
    static const char *good[] = {
        "-n -1 -c 256 --top-p 1 --top-k 0 --min-p 0 --temp 0 --seed 0", /* -n -1: to a full context
                                                                         */
        "-n 0",
        "--min-p 1 --repeat-penalty 1 --repeat-last-n 0 --seed 18446744073709551615",
        "-t 1 -c 64 -b 1 --temp 100 --top-p 0.5 --presence-penalty -2 --frequency-penalty 0.5",
        "--greedy -n 3 --top-k 40 --repeat-penalty 1.1 --seed +7",
        "--greedy --temp 0 --mmap-experts --no-pin --no-pack",
        "--expert-slots 4 --pin-gb 0.001",
    };
    for (size_t k = 0; k < sizeof good / sizeof good[0]; k++) {
        snprintf(args, sizeof args, "generate -m %s -p hi -n 2 %s --quiet",
                 t_fixture("glm-dsa-rq2k.gguf"), good[k]);
        int rc = run(args);
        CHECKF(rc == 0, "%s: exit %d:\n%s", args, rc, out);
    }
}

/* `petrel bench`: llama-bench's tests and figures on the demo model (in the repository) */
static void cli_bench(void) {
    const char *demo = "models/petrel-demo-glm.gguf";
    char args[1024];
    snprintf(args, sizeof args, "bench -m %s -p 8,16 -n 4 -d 0,8 -r 2 -t 1 2>/dev/null", demo);
    CHECK(run(args) == 0);
    CHECK_STR_CONTAINS(out, "| model | size | threads | test | t/s |");
    /* per depth the prompts, then the decodes */
    const char *order[] = {"| pp8 |",      "| pp16 |",      "| tg4 |",
                           "| pp8 @ d8 |", "| pp16 @ d8 |", "| tg4 @ d8 |"};
    const char *at = out;
    for (size_t k = 0; k < sizeof order / sizeof order[0]; k++) {
        const char *p = strstr(at, order[k]);
        CHECKF(p != NULL, "no '%s' after the previous test in:\n%s", order[k], out);
        if (p) at = p;
    }
    CHECK(count_lines(out) == 8);
    snprintf(args, sizeof args, "bench -m %s -p 8 -n 3 -r 3 -t 1 -o jsonl 2>/dev/null", demo);
    CHECK(run(args) == 0);
    CHECK(count_lines(out) == 2);
    const char *line = out;
    for (int k = 0; k < 2 && line; k++) {
        json_error_t jerr;
        json_t *o = json_loadb(line, strcspn(line, "\n"), 0, &jerr);
        CHECKF(o, "not JSON: %s", jerr.text);
        if (o) {
            CHECK(json_integer_value(json_object_get(o, "n_prompt")) == (k ? 0 : 8));
            CHECK(json_integer_value(json_object_get(o, "n_gen")) == (k ? 3 : 0));
            json_t *samples = json_object_get(o, "samples_ts");
            CHECK(json_array_size(samples) == 3);
            double sum = 0;
            for (size_t i = 0; i < json_array_size(samples); i++) {
                const double v = json_real_value(json_array_get(samples, i));
                CHECK(v > 0);
                sum += v;
            }
            const double avg = json_real_value(json_object_get(o, "avg_ts"));
            CHECKF(fabs(avg - sum / 3) <= 1e-6 * avg, "avg_ts %g is not the samples' mean %g", avg,
                   sum / 3);
            CHECK(json_real_value(json_object_get(o, "stddev_ts")) >= 0);
            json_decref(o);
        }
        line = strchr(line, '\n');
        if (line) line++;
    }
    /* bad usage: exit 2, one line naming the flag */
    static const char *bad[][2] = {
        {"-r 0", "for -r: expected"},     {"-p 8,x", "for -p: expected"},
        {"-p 8,", "for -p: expected"},    {"-o csv", "for -o: expected md or jsonl"},
        {"-p 0 -n 0", "nothing to time"}, {"-p 64 -c 32", "-c 32 is too small"},
        {"-n", "-n needs a value"},
    };
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        snprintf(args, sizeof args, "bench -m %s %s", demo, bad[k][0]);
        const int rc = run_stderr(args);
        CHECKF(rc == 2 && count_lines(out) == 1 && strstr(out, bad[k][1]), "%s: exit %d:\n%s", args,
               rc, out);
    }
}

/* Every subcommand's --help lists what that subcommand accepts, and only that: each option a
 * help lists is taken by the subcommand (run with it, then an unknown sentinel option: the
 * sentinel, not the listed option, is what stops it, so nothing runs), options for tests are
 * not listed (but still taken), and options of other subcommands are not listed. */
static const char *const SUBCOMMANDS[] = {"chat",       "generate", "serve",    "bench",
                                          "perplexity", "inspect",  "pack",     "verify",
                                          "pull",       "list",     "tokenize", "detokenize"};

/* The option names a help text lists: the "-x, --xx ARG" heads of lines that start with
 * "  -", into names (one string, each name followed by '\n'). Returns how many. */
static int help_names(const char *help, char *names, size_t cap) {
    int n = 0;
    names[0] = 0;
    for (const char *l = help; *l;) {
        const char *e = strchr(l, '\n');
        const size_t len = e ? (size_t)(e - l) : strlen(l);
        if (len > 3 && !strncmp(l, "  -", 3)) {
            char head[256];
            const char *gap = strstr(l + 2, "  "); /* the head ends two blanks before the text */
            size_t hl = gap && gap < l + len ? (size_t)(gap - l - 2) : len - 2;
            snprintf(head, sizeof head, "%.*s", (int)(hl < sizeof head ? hl : sizeof head - 1),
                     l + 2);
            /* "-n, --max-tokens, --n-predict N": the comma-separated names, then the value */
            for (char *tok = strtok(head, ", "); tok && tok[0] == '-'; tok = strtok(NULL, ", ")) {
                const size_t used = strlen(names);
                snprintf(names + used, cap - used, "%s\n", tok);
                n++;
            }
        }
        l += len + (e ? 1 : 0);
    }
    return n;
}

/* How many times names (as help_names makes it) lists name. */
static int listed(const char *names, const char *name) {
    char want[128], all[16384];
    snprintf(want, sizeof want, "\n%s\n", name);
    snprintf(all, sizeof all, "\n%s", names);
    int n = 0;
    for (const char *p = strstr(all, want); p; p = strstr(p + 1, want))
        n++;
    return n;
}

/* Does `petrel sub name x --zz-sentinel` refuse `name` as unknown? (x: a value for name, or a
 * stray argument; either way the sentinel or the value stops the command before it runs.) */
static int refused(const char *sub, const char *name) {
    char args[512], want[160];
    snprintf(args, sizeof args, "%s %s x --zz-sentinel < /dev/null", sub, name);
    const int rc = run_stderr(args);
    snprintf(want, sizeof want, "unknown option '%s'", name);
    return rc == 2 && strstr(out, want) != NULL;
}

static void cli_help_lists_what_it_takes(void) {
    char names[16384];
    for (size_t c = 0; c < sizeof SUBCOMMANDS / sizeof SUBCOMMANDS[0]; c++) {
        const char *sub = SUBCOMMANDS[c];
        char args[256];
        snprintf(args, sizeof args, "%s --help", sub);
        CHECKF(run(args) == 0, "%s --help: exit status", sub);
        CHECKF(strncmp(out, "usage: petrel ", 14) == 0, "%s --help:\n%s", sub, out);
        const int n = help_names(out, names, sizeof names);
        CHECKF(n >= 1, "%s --help lists no option", sub);
        for (const char *p = names; *p;) {
            const char *e = strchr(p, '\n');
            char name[128];
            snprintf(name, sizeof name, "%.*s", (int)(e - p), p);
            CHECKF(listed(names, name) == 1, "%s --help lists %s %d times", sub, name,
                   listed(names, name));
            CHECKF(!refused(sub, name), "%s --help lists %s, which %s refuses:\n%s", sub, name, sub,
                   out);
            p = e + 1;
        }
        /* options for tests only are taken but not listed */
        static const char *const hidden[][2] = {{"pack", "--stop-after"},
                                                {"chat", "--no-kv-reuse"}};
        for (size_t h = 0; h < sizeof hidden / sizeof hidden[0]; h++) {
            if (strcmp(sub, hidden[h][0])) continue;
            CHECKF(!listed(names, hidden[h][1]), "%s --help lists %s, an option for tests", sub,
                   hidden[h][1]);
            CHECKF(!refused(sub, hidden[h][1]), "%s no longer takes %s", sub, hidden[h][1]);
        }
        /* the server takes grammars per request; bench and perplexity sample nothing */
        static const char *const absent[][2] = {
            {"serve", "--grammar"}, {"serve", "-j"},          {"serve", "--json-schema"},
            {"bench", "--temp"},    {"bench", "--seed"},      {"bench", "--draft"},
            {"perplexity", "-n"},   {"perplexity", "--temp"}, {"perplexity", "--stop"},
        };
        for (size_t k = 0; k < sizeof absent / sizeof absent[0]; k++)
            if (!strcmp(sub, absent[k][0]))
                CHECKF(!listed(names, absent[k][1]), "%s --help lists %s", sub, absent[k][1]);
    }
    /* inspect's plans budget the training context, not a fixed default */
    CHECK(run("inspect --help") == 0);
    CHECK_STR_CONTAINS(out, "training context");
}

/* An unknown option: one line naming it and pointing to the subcommand's --help, exit 2. */
static void cli_unknown_option_one_line(void) {
    char args[256];
    for (size_t c = 0; c < sizeof SUBCOMMANDS / sizeof SUBCOMMANDS[0]; c++) {
        snprintf(args, sizeof args, "%s --zz-bogus < /dev/null", SUBCOMMANDS[c]);
        const int rc = run_stderr(args);
        CHECKF(rc == 2, "%s: exit %d", args, rc);
        CHECKF(count_lines(out) == 1, "%s: %d lines on stderr:\n%s", args, count_lines(out), out);
        char want[128];
        snprintf(want, sizeof want, "petrel %s --help", SUBCOMMANDS[c]);
        CHECKF(strstr(out, "'--zz-bogus'") && strstr(out, want), "%s:\n%s", args, out);
    }
    /* `petrel -m MODEL ...` is chat */
    CHECK(run_stderr("-m /no/such.gguf --zz-bogus < /dev/null") == 2);
    CHECK(count_lines(out) == 1);
    CHECK_STR_CONTAINS(out, "petrel chat --help");
}

T_SUITE(cli) {
    T_ADD(cli_inspect_text);
    T_ADD(cli_inspect_json);
    T_ADD(cli_errors_are_one_line);
    T_ADD(cli_usage_errors);
    T_ADD(cli_flag_values);
    T_ADD(cli_bench);
    T_ADD(cli_help_lists_what_it_takes);
    T_ADD(cli_unknown_option_one_line);
}
