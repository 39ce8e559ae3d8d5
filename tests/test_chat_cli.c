/* test_chat_cli.c — `petrel chat` and the text mode of `petrel generate` as a
 * user drives them (through the binary at PETREL_BIN): the KV-reuse invariant
 * (turn 2 of a continued session generates exactly what a session that
 * re-evaluates the whole conversation generates, greedy, and the reuse really
 * happened), chat driven through stdin, and bad input (invalid UTF-8, empty
 * prompt, a prompt longer than the context, unknown flags). */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "test.h"

static char out[1 << 16], out2[1 << 16];

static const char *bin(void) {
    const char *b = getenv("PETREL_BIN");
    return b && *b ? b : "build/petrel";
}

/* Run `petrel ARGS` with stdin from the printf-format INPUT; buf gets stdout
 * only (stderr to errfile when not NULL). */
static int run_io(const char *input, const char *args, const char *errfile, char *buf, size_t cap) {
    char cmd[16384];
    snprintf(cmd, sizeof cmd, "printf '%s' | %s %s 2>%s", input, bin(), args,
             errfile ? errfile : "/dev/null");
    return t_run(cmd, buf, cap);
}

static const char *model(void) {
    static char m[1024];
    snprintf(m, sizeof m, "%s", t_fixture("glm-dsa-rq2k.gguf"));
    return m;
}

static void test_chat_cli_kv_reuse_invariant(void) {
    static const char *const fixtures[] = {"glm-dsa-rq2k.gguf", "deepseek2-rq2k.gguf",
                                           "gemma4-rq2k.gguf"};
    for (size_t k = 0; k < sizeof fixtures / sizeof fixtures[0]; k++) {
        char args[8192], errf[512];
        const char *input = "Hello there\\nTell me about SSDs\\nAnd a third turn\\n";
        snprintf(errf, sizeof errf, "%s/chat_err_%zu.txt", t_tmpdir(), k);
        snprintf(args, sizeof args, "chat -m %s --greedy -n 10 -t 2", t_fixture(fixtures[k]));
        int rc1 = run_io(input, args, errf, out, sizeof out);
        size_t elen = 0;
        char *err = t_read_file(errf, &elen);
        snprintf(args, sizeof args, "chat -m %s --greedy -n 10 -t 2 --no-kv-reuse",
                 t_fixture(fixtures[k]));
        int rc2 = run_io(input, args, NULL, out2, sizeof out2);
        CHECKF(rc1 == 0 && rc2 == 0, "%s: exit %d %d: %s", fixtures[k], rc1, rc2, err ? err : "");
        CHECKF(!strcmp(out, out2),
               "%s: continued session differs from full re-prefill:\n%s\n---\n%s", fixtures[k], out,
               out2);
        /* three turns, three stats lines, and turns 2 and 3 really reused the cache */
        int turns = 0, reused_later = 0;
        for (const char *p = err; p && (p = strstr(p, "[prompt ")); p++) {
            int np = 0, nr = 0;
            if (sscanf(p, "[prompt %d tokens (%d reused)", &np, &nr) == 2) {
                turns++;
                if (turns > 1 && nr > 0 && nr < np) reused_later++;
            }
        }
        CHECKF(turns == 3 && reused_later == 2, "%s: %d turns, %d reused:\n%s", fixtures[k], turns,
               reused_later, err ? err : "");
        free(err);
    }
}

static void test_chat_cli_commands(void) {
    char args[8192], errf[512];
    snprintf(errf, sizeof errf, "%s/chat_cmd.txt", t_tmpdir());
    snprintf(args, sizeof args, "chat -m %s --greedy -n 4", model());
    int rc = run_io("/stats\\n/think off\\n/system Be "
                    "brief.\\nHi\\n/bogus\\n/clear\\n\\nHi\\n/exit\\nnot read\\n",
                    args, errf, out, sizeof out);
    char *err = t_read_file(errf, NULL);
    CHECKF(rc == 0, "exit %d: %s", rc, err ? err : "");
    CHECK_STR_CONTAINS(err, "[thinking off]");
    CHECK_STR_CONTAINS(err, "[system message set");
    CHECK_STR_CONTAINS(err, "[unknown command /bogus");
    CHECK_STR_CONTAINS(err, "[conversation cleared]");
    /* after /clear the same question gives the same answer from an empty cache */
    int n = 0;
    for (const char *p = err; p && (p = strstr(p, "[prompt ")); p++)
        n++;
    CHECKF(n == 3, "expected /stats + 2 turns, got %d", n);
    CHECK(strstr(err ? err : "", "(0 reused)") != NULL);
    free(err);
    /* EOF right away: clean exit */
    CHECK(run_io("", args, NULL, out, sizeof out) == 0);
    /* invalid UTF-8 in a chat line is replaced, not fatal */
    rc = run_io("\\377\\376 hi\\n", args, errf, out, sizeof out);
    err = t_read_file(errf, NULL);
    CHECKF(rc == 0, "exit %d", rc);
    CHECK_STR_CONTAINS(err, "not valid UTF-8");
    free(err);
}

static void test_chat_cli_generate_text(void) {
    char args[8192], errf[512];
    snprintf(errf, sizeof errf, "%s/gen_err.txt", t_tmpdir());
    /* deterministic: same seed, same text; greedy equals --temp 0 */
    snprintf(args, sizeof args, "generate -m %s -p 'Once upon a time' -n 12 --seed 7 --temp 0.9",
             model());
    CHECK(run_io("", args, NULL, out, sizeof out) == 0);
    CHECK(run_io("", args, NULL, out2, sizeof out2) == 0);
    CHECK(!strcmp(out, out2));
    snprintf(args, sizeof args, "generate -m %s -p 'Once upon a time' -n 12 --greedy", model());
    CHECK(run_io("", args, NULL, out, sizeof out) == 0);
    snprintf(args, sizeof args, "generate -m %s -p 'Once upon a time' -n 12 --temp 0 --seed 99",
             model());
    CHECK(run_io("", args, NULL, out2, sizeof out2) == 0);
    CHECK(!strcmp(out, out2));
    /* stdin prompt, --chat, --json stats */
    snprintf(args, sizeof args, "generate -m %s --chat --system 'Be brief.' -n 5 --greedy --json",
             model());
    CHECK(run_io("What is 2+2?", args, errf, out, sizeof out) == 0);
    char *err = t_read_file(errf, NULL);
    CHECK_STR_CONTAINS(err, "\"prompt_tokens\": ");
    CHECK_STR_CONTAINS(err, "\"generated_tokens\": 5");
    CHECK_STR_CONTAINS(err, "\"peak_rss_mb\"");
    free(err);
    /* --quiet: nothing on stderr */
    snprintf(args, sizeof args, "generate -m %s -p hi -n 3 --quiet", model());
    CHECK(run_io("", args, errf, out, sizeof out) == 0);
    size_t elen = 99;
    free(t_read_file(errf, &elen));
    CHECKF(elen == 0, "--quiet wrote %zu bytes to stderr", elen);
    /* a stop string ends the text */
    snprintf(args, sizeof args, "generate -m %s -p 'Once upon a time' -n 12 --greedy", model());
    CHECK(run_io("", args, NULL, out, sizeof out) == 0);
    if (strlen(out) > 6) {
        char stop[8] = {0};
        memcpy(stop, out + 3, 2);
        if (!strchr(stop, '\'') && !strchr(stop, '\\') && !strchr(stop, '%')) {
            snprintf(args, sizeof args,
                     "generate -m %s -p 'Once upon a time' -n 12 --greedy --stop '%s'", model(),
                     stop);
            CHECK(run_io("", args, NULL, out2, sizeof out2) == 0);
            CHECKF(strlen(out2) <= 4 && !strncmp(out, out2, strlen(out2) - 1),
                   "stop '%s': '%s' vs '%s'", stop, out2, out);
        }
    }
    /* the token mode is unchanged */
    snprintf(args, sizeof args, "generate -m %s --tokens 500,502,505,39 -n 3 --greedy", model());
    CHECK(run_io("", args, NULL, out, sizeof out) == 0);
    int a, b, c;
    CHECK(sscanf(out, "%d %d %d", &a, &b, &c) == 3);
}

/* The progress line of a long prompt (PETREL_PROGRESS_AFTER=0 shows it at once; by default
 * after 1 s): on stderr that is not a terminal, whole lines without control characters, at each
 * tenth of the way, the last one with every token done; on a terminal (script(1)), one line
 * rewritten in place and erased when done; stdout is what it is without it; --quiet and --json
 * show none. `petrel chat` shows it too. */
static void test_chat_cli_progress_line(void) {
    char prompt[512], errf[512], cmd[16384];
    snprintf(prompt, sizeof prompt, "%s/long_prompt.txt", t_tmpdir());
    snprintf(errf, sizeof errf, "%s/progress_err.txt", t_tmpdir());
    FILE *f = fopen(prompt, "w");
    CHECK(f != NULL);
    if (!f) return;
    for (int i = 0; i < 12; i++)
        fprintf(f, "Solid state drives store data in flash cells, line %d. ", i);
    fclose(f);
    const char *flags[] = {"", "--quiet", "--json"};
    char *errs[3] = {0};
    static char outs[3][4096];
    for (int k = 0; k < 3; k++) {
        snprintf(cmd, sizeof cmd,
                 "PETREL_PROGRESS_AFTER=0 %s generate -m %s -f %s -n 4 --greedy -b 16 -t 2 %s "
                 "2>%s",
                 bin(), model(), prompt, flags[k], errf);
        CHECKF(t_run(cmd, outs[k], sizeof outs[k]) == 0, "%s: %s", flags[k], outs[k]);
        errs[k] = t_read_file(errf, NULL);
    }
    const char *e = errs[0] ? errs[0] : "";
    /* the prompt's size from the statistics line; every progress line names it */
    const char *st = strstr(e, "[prompt ");
    int n_prompt = 0, lines = 0, bad = 0, last_done = -1, done = 0, total = 0;
    CHECKF(st && sscanf(st, "[prompt %d tokens", &n_prompt) == 1 && n_prompt > 200,
           "no statistics line: %s", e);
    for (const char *p = e; (p = strstr(p, "[prefill ")); p++) {
        lines++;
        if (sscanf(p, "[prefill %d/%d tokens | ", &done, &total) != 2 || total != n_prompt ||
            done <= last_done || done > total || !strstr(p, " tok/s | "))
            bad++;
        last_done = done;
    }
    CHECKF(lines >= 3 && lines <= 12 && bad == 0, "%d progress lines, %d bad:\n%s", lines, bad, e);
    /* the last line: every token done, and how long it took */
    const char *last = e;
    for (const char *p = e; (p = strstr(p, "[prefill ")); p++)
        last = p;
    char want[64];
    snprintf(want, sizeof want, "[prefill %d/%d tokens | ", n_prompt, n_prompt);
    CHECKF(!strncmp(last, want, strlen(want)) && strstr(last, "| done in ") &&
               strstr(last, "[prompt ") > last,
           "last progress line: %s", last);
    CHECKF(!strchr(e, '\r') && !strchr(e, '\033'), "control characters on stderr: %s", e);
    /* stdout is the same with and without the line; --quiet and --json show none */
    CHECKF(!strcmp(outs[0], outs[1]) && !strcmp(outs[0], outs[2]), "stdout differs: '%s' '%s' '%s'",
           outs[0], outs[1], outs[2]);
    CHECKF(!strstr(outs[0], "prefill"), "progress on stdout: %s", outs[0]);
    CHECKF(errs[1] && !errs[1][0], "--quiet wrote to stderr: %s", errs[1] ? errs[1] : "");
    CHECKF(errs[2] && !strstr(errs[2], "[prefill"), "--json shows progress: %s",
           errs[2] ? errs[2] : "");
    for (int k = 0; k < 3; k++)
        free(errs[k]);
    /* on a terminal (script(1) gives it one): one line rewritten in place, erased before the
     * statistics line */
    if (t_run("command -v script >/dev/null", NULL, 0) == 0) {
        static char tty[1 << 16];
        snprintf(
            cmd, sizeof cmd,
            "script -qec \"PETREL_PROGRESS_AFTER=0 %s generate -m %s -f %s -n 2 --greedy -b 16 "
            "-t 2 >/dev/null\" /dev/null",
            bin(), model(), prompt);
        CHECKF(t_run(cmd, tty, sizeof tty) == 0, "script: %s", tty);
        const char *first = strstr(tty, "\r\033[K[prefill "), *lastp = NULL;
        for (const char *p = tty; (p = strstr(p, "\r\033[K[prefill ")); p++)
            lastp = p;
        const char *stats = strstr(tty, "[prompt ");
        const char *erase = lastp ? strstr(lastp + 1, "\r\033[K") : NULL;
        CHECKF(first && stats && erase && erase < stats && !strstr(tty, "| done in "),
               "terminal output: %s", tty);
    }
    /* petrel chat: the same line for a long turn */
    snprintf(cmd, sizeof cmd,
             "(cat %s; echo) | PETREL_PROGRESS_AFTER=0 %s chat -m %s -n 3 --greedy -b 16 -t 2 "
             "2>%s",
             prompt, bin(), model(), errf);
    CHECKF(t_run(cmd, out, sizeof out) == 0, "chat: %s", out);
    char *ce = t_read_file(errf, NULL);
    CHECKF(ce && strstr(ce, "[prefill ") && strstr(ce, "| done in "), "chat stderr: %s",
           ce ? ce : "");
    CHECKF(!strstr(out, "prefill"), "chat: progress on stdout: %s", out);
    free(ce);
}

/* The KV cache in the statistics: --json names the context, the positions held, the types
 * (-ctk/-ctv), the bytes in RAM and the prefix hits; chat's line after each turn shows them,
 * the second turn's prefix hits being the positions it reused. */
static void test_chat_cli_kv_stats(void) {
    char args[8192], errf[512];
    snprintf(errf, sizeof errf, "%s/kv_err.txt", t_tmpdir());
    snprintf(args, sizeof args,
             "generate -m %s -p 'Once upon a time' -n 5 --greedy -c 256 -ctk q8_0 -ctv q8_0 --json",
             t_fixture("qwen3moe-rq2k.gguf"));
    CHECK(run_io("", args, errf, out, sizeof out) == 0);
    char *err = t_read_file(errf, NULL);
    json_t *j = err ? json_loads(err, 0, NULL) : NULL;
    CHECKF(j, "--json: %s", err ? err : "");
    if (j) {
        const int np = (int)json_integer_value(json_object_get(j, "prompt_tokens"));
        const int held = (int)json_integer_value(json_object_get(j, "kv_positions"));
        const char *types = json_string_value(json_object_get(j, "kv_types"));
        CHECKF(json_integer_value(json_object_get(j, "n_ctx")) == 256 && held == np + 4 && types &&
                   !strcmp(types, "q8_0") &&
                   json_integer_value(json_object_get(j, "kv_ram_bytes")) > 0 &&
                   json_integer_value(json_object_get(j, "prefix_hits")) == 0,
               "%s", err);
        json_decref(j);
    }
    free(err);
    /* K and V of different types are named apart */
    snprintf(args, sizeof args, "generate -m %s -p 'Once upon a time' -n 2 -c 128 -ctk q8_0",
             t_fixture("qwen3moe-rq2k.gguf"));
    CHECK(run_io("", args, errf, out, sizeof out) == 0);
    err = t_read_file(errf, NULL);
    CHECK_STR_CONTAINS(err, "/128 K q8_0, V f16, ");
    free(err);
    /* chat: two turns; the second's prefix hits are its reused positions */
    snprintf(args, sizeof args, "chat -m %s --greedy -n 4 -t 2 -c 512",
             t_fixture("qwen3moe-rq2k.gguf"));
    CHECK(run_io("Hello there\\nTell me more\\n", args, errf, out, sizeof out) == 0);
    err = t_read_file(errf, NULL);
    int turns = 0;
    for (const char *p = err; p && (p = strstr(p, "[prompt ")); p++) {
        int np = 0, nr = 0, held = 0, ctx = 0, hits = -1;
        const char *kv = strstr(p, "| KV ");
        CHECKF(sscanf(p, "[prompt %d tokens (%d reused)", &np, &nr) == 2 && kv &&
                   sscanf(kv, "| KV %d/%d f16, ", &held, &ctx) == 2 &&
                   strstr(kv, " in RAM, prefix hits ") &&
                   sscanf(strstr(kv, "prefix hits "), "prefix hits %d (0 from disk)", &hits) == 1,
               "%s", err);
        CHECKF(ctx == 512 && held >= np && hits == nr && (turns == 0 || hits > 0),
               "turn %d: held %d of %d, hits %d, reused %d", turns + 1, held, ctx, hits, nr);
        turns++;
    }
    CHECKF(turns == 2, "%d statistics lines: %s", turns, err ? err : "");
    free(err);
}

static void test_chat_cli_bad_input(void) {
    char args[8192], errf[512];
    snprintf(errf, sizeof errf, "%s/bad_err.txt", t_tmpdir());
    /* empty prompt: usage error */
    snprintf(args, sizeof args, "generate -m %s -p ''", model());
    CHECK(run_io("", args, NULL, out, sizeof out) == 2);
    /* invalid UTF-8: raw mode tokenizes it (U+FFFD), chat mode replaces and warns */
    snprintf(args, sizeof args, "generate -m %s -p \"$(printf '\\377abc')\" -n 2", model());
    CHECK(run_io("", args, NULL, out, sizeof out) == 0);
    snprintf(args, sizeof args, "generate -m %s --chat -n 2", model());
    CHECK(run_io("\\377\\300abc", args, errf, out, sizeof out) == 0);
    char *err = t_read_file(errf, NULL);
    CHECK_STR_CONTAINS(err, "not valid UTF-8");
    free(err);
    /* longer than the context: one clear line, exit 1 */
    snprintf(args, sizeof args,
             "generate -m %s -c 8 -p 'one two three four five six seven eight nine ten'", model());
    CHECK(run_io("", args, errf, out, sizeof out) == 1);
    err = t_read_file(errf, NULL);
    CHECK_STR_CONTAINS(err, "context holds 8");
    free(err);
    /* in chat the turn is dropped and the chat goes on */
    snprintf(args, sizeof args, "chat -m %s -c 16 -n 2 --greedy", model());
    CHECK(run_io("one two three four five six seven eight nine ten eleven twelve\\nhi\\n", args,
                 errf, out, sizeof out) == 0);
    err = t_read_file(errf, NULL);
    CHECK_STR_CONTAINS(err, "context holds 16");
    CHECK_STR_CONTAINS(err, "[prompt ");
    free(err);
    /* unknown flags, missing values, bad values: usage, exit 2 */
    snprintf(args, sizeof args, "generate -m %s -p hi --frobnicate", model());
    CHECK(run_io("", args, NULL, out, sizeof out) == 2);
    snprintf(args, sizeof args, "chat -m %s --frobnicate", model());
    CHECK(run_io("", args, NULL, out, sizeof out) == 2);
    snprintf(args, sizeof args, "generate -m %s -p hi --top-p 2", model());
    CHECK(run_io("", args, NULL, out, sizeof out) == 2);
    snprintf(args, sizeof args, "generate -m %s -p hi --temp", model());
    CHECK(run_io("", args, NULL, out, sizeof out) == 2);
    /* without -m: the shipped demo model (models/), or a clear error when the
     * default model cannot be opened */
    CHECK(run_io("", "chat -n 4", NULL, out, sizeof out) == 0);
    CHECK(run_io("", "", NULL, out, sizeof out) == 0);
    {
        char cmd[4096];
        snprintf(cmd, sizeof cmd, "PETREL_MODEL=/no/such/model.gguf %s chat < /dev/null 2>&1",
                 bin());
        CHECK(t_run(cmd, out, sizeof out) == 1);
        CHECK_STR_CONTAINS(out, "/no/such/model.gguf");
    }
    /* a missing model: one line, exit 1 */
    CHECK(run_io("", "chat -m /nonexistent.gguf", errf, out, sizeof out) == 1);
    CHECK(run_io("", "generate -m /nonexistent.gguf -p hi", NULL, out, sizeof out) == 1);
    /* --help documents the flags */
    CHECK(run_io("", "chat --help", NULL, out, sizeof out) == 0);
    CHECK_STR_CONTAINS(out, "/think on|off");
    CHECK(run_io("", "generate --help", NULL, out, sizeof out) == 0);
    CHECK_STR_CONTAINS(out, "--repeat-penalty");
    CHECK_STR_CONTAINS(out, "--dump-logits");
}

/* The answer on stdout holds no reasoning scaffolding (<think>, </think>,
 * Gemma's channel markers); the reasoning goes to stderr, or to --json's
 * "reasoning" field, or nowhere with --hide-reasoning / --quiet. glm-dsa's
 * prompt opens a <think> block, so what the fixture generates is reasoning. */
static void test_chat_cli_reasoning_on_stderr(void) {
    char args[8192], errf[512];
    snprintf(errf, sizeof errf, "%s/reason_err.txt", t_tmpdir());
    snprintf(args, sizeof args, "generate -m %s --chat -p hi -n 12 --greedy --json", model());
    CHECK(run_io("", args, errf, out, sizeof out) == 0);
    CHECK(!strstr(out, "<think>") && !strstr(out, "</think>"));
    char *err = t_read_file(errf, NULL);
    const char *brace = err ? strrchr(err, '{') : NULL;
    json_t *j = brace ? json_loads(brace, 0, NULL) : NULL;
    CHECKF(j, "no JSON on stderr:\n%s", err ? err : "");
    char reasoning[4096] = "";
    if (j) {
        const char *r = json_string_value(json_object_get(j, "reasoning"));
        const char *c = json_string_value(json_object_get(j, "content"));
        CHECK(r && *r && c);
        /* its longest printable-ASCII run: the JSON field is repaired UTF-8, the
         * stream on stderr the model's raw bytes */
        size_t best = 0, bl = 0;
        for (size_t i = 0, k; r && r[i]; i += k ? k : 1) {
            for (k = 0; r[i + k] >= 0x20 && r[i + k] < 0x7f; k++)
                ;
            if (k > bl) best = i, bl = k;
        }
        if (bl >= 4) snprintf(reasoning, sizeof reasoning, "%.*s", (int)bl, r + best);
        /* stdout is exactly the content (and the newline that ends it) */
        if (c)
            CHECKF(!strncmp(out, c, strlen(c)) && !strcmp(out + strlen(c), "\n"),
                   "stdout '%s' vs content '%s'", out, c);
        CHECKF(*reasoning, "no readable reasoning from the fixture: '%s'", r ? r : "");
        CHECK(!strstr(reasoning, "<think>") && !strstr(reasoning, "</think>"));
        json_decref(j);
    }
    free(err);
    /* the default: the reasoning streams to stderr, stdout has none of it */
    snprintf(args, sizeof args, "generate -m %s --chat -p hi -n 12 --greedy", model());
    CHECK(run_io("", args, errf, out, sizeof out) == 0);
    CHECK(!strstr(out, "<think>") && !strstr(out, "</think>"));
    err = t_read_file(errf, NULL);
    if (*reasoning) CHECKF(err && strstr(err, reasoning), "no reasoning on stderr:\n%s", err);
    if (*reasoning) CHECK(!strstr(out, reasoning));
    free(err);
    /* --hide-reasoning: not printed; --quiet: nothing on stderr unless --show-reasoning */
    snprintf(args, sizeof args, "generate -m %s --chat -p hi -n 12 --greedy --hide-reasoning",
             model());
    CHECK(run_io("", args, errf, out, sizeof out) == 0);
    err = t_read_file(errf, NULL);
    if (*reasoning) CHECK(err && !strstr(err, reasoning) && strstr(err, "[prompt "));
    free(err);
    snprintf(args, sizeof args, "generate -m %s --chat -p hi -n 12 --greedy --quiet", model());
    CHECK(run_io("", args, errf, out, sizeof out) == 0);
    err = t_read_file(errf, NULL);
    CHECKF(err && !*err, "--quiet printed:\n%s", err);
    free(err);
    snprintf(args, sizeof args,
             "generate -m %s --chat -p hi -n 12 --greedy --quiet --show-reasoning", model());
    CHECK(run_io("", args, errf, out, sizeof out) == 0);
    err = t_read_file(errf, NULL);
    if (*reasoning) CHECK(err && strstr(err, reasoning) && !strstr(err, "[prompt "));
    free(err);
    /* the flags are for --chat */
    snprintf(args, sizeof args, "generate -m %s -p hi --show-reasoning", model());
    CHECK(run_io("", args, NULL, out, sizeof out) == 2);
    /* chat: the same split, turn after turn */
    snprintf(args, sizeof args, "chat -m %s -n 12 --greedy", model());
    CHECK(run_io("hi\\nhello\\n", args, errf, out, sizeof out) == 0);
    CHECK(!strstr(out, "<think>") && !strstr(out, "</think>"));
    err = t_read_file(errf, NULL);
    if (*reasoning) CHECKF(err && strstr(err, reasoning), "no reasoning on stderr:\n%s", err);
    free(err);
    snprintf(args, sizeof args, "chat -m %s -n 12 --greedy --hide-reasoning", model());
    CHECK(run_io("hi\\n", args, errf, out, sizeof out) == 0);
    err = t_read_file(errf, NULL);
    if (*reasoning) CHECK(err && !strstr(err, reasoning));
    free(err);
    /* the other families: no scaffolding on stdout either */
    const char *others[] = {"qwen3moe-mxfp4.gguf", "gemma4-rq2k.gguf", "deepseek2-q4_k_m.gguf"};
    for (size_t k = 0; k < sizeof others / sizeof others[0]; k++) {
        if (!t_need(others[k])) continue;
        snprintf(args, sizeof args, "generate -m %s --chat --think -p hi -n 24 --greedy --quiet",
                 t_fixture(others[k]));
        CHECK(run_io("", args, NULL, out, sizeof out) == 0);
        CHECKF(!strstr(out, "<think>") && !strstr(out, "</think>") && !strstr(out, "<|channel>") &&
                   !strstr(out, "<channel|>"),
               "%s: scaffolding on stdout:\n%s", others[k], out);
    }
}

/* --session FILE: a conversation continued in a second process from the file (its messages
 * and KV) answers as one process running both turns does, greedy, and reuses the KV; a
 * corrupt file is ignored with a warning. glm-dsa drafts with its MTP head (restored too). */
static void test_chat_cli_session_round_trip(void) {
    char args[8192], sess[2048], errf[2048], full[1 << 14];
    snprintf(sess, sizeof sess, "%s/chat.session", t_tmpdir());
    snprintf(errf, sizeof errf, "%s/session_err.txt", t_tmpdir());
    snprintf(args, sizeof args, "chat -m %s --greedy -n 8 -t 2", model());
    CHECK(run_io("Hello there\\nTell me about SSDs\\n", args, NULL, full, sizeof full) == 0);
    snprintf(args, sizeof args, "chat -m %s --greedy -n 8 -t 2 --session %s", model(), sess);
    CHECK(run_io("Hello there\\n", args, NULL, out, sizeof out) == 0);
    CHECK(run_io("Tell me about SSDs\\n", args, errf, out2, sizeof out2) == 0);
    char *err = t_read_file(errf, NULL);
    int np = 0, nr = 0;
    const char *stats = err ? strstr(err, "[prompt ") : NULL;
    CHECKF(err && strstr(err, "2 messages") && stats &&
               sscanf(stats, "[prompt %d tokens (%d reused)", &np, &nr) == 2 && nr > 0,
           "the second process restored nothing: %s", err ? err : "");
    static char both[1 << 18];
    snprintf(both, sizeof both, "%s%s", out, out2);
    CHECKF(!strcmp(both, full), "two processes:\n%s\n---\none process:\n%s", both, full);
    free(err);
    /* a corrupt file: a warning, a new conversation */
    size_t len = 0;
    unsigned char *b = t_read_file(sess, &len);
    CHECK(b && len > 200);
    if (b) b[len - 1] ^= 0x20, t_write_file(sess, b, len);
    free(b);
    CHECK(run_io("Hi\\n", args, errf, out2, sizeof out2) == 0);
    err = t_read_file(errf, NULL);
    CHECKF(err && strstr(err, "checksum") && strstr(err, "starting a new conversation"), "%s",
           err ? err : "");
    free(err);
}

T_SUITE(chat_cli) {
    T_ADD(test_chat_cli_session_round_trip);
    T_ADD(test_chat_cli_kv_reuse_invariant);
    T_ADD(test_chat_cli_commands);
    T_ADD(test_chat_cli_generate_text);
    T_ADD(test_chat_cli_progress_line);
    T_ADD(test_chat_cli_kv_stats);
    T_ADD(test_chat_cli_bad_input);
    T_ADD(test_chat_cli_reasoning_on_stderr);
}
