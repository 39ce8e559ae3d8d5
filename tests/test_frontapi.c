/* test_frontapi.c — the front ends live on the public API.
 *
 * 1. The include check: every file of the front ends (src/cli, src/server and
 *    what they share, src/front) may include only include/petrel.h (and
 *    include/petrel_tools.h), headers of the front ends themselves, and system
 *    or third-party headers. Anything else fails the case with file:line.
 *    Run it alone: PETREL_BIN=build/petrel build/test_petrel frontapi_includes
 *    (from the repository root: it reads src/).
 * 2. The public text, chat, sampling and generation functions give what the
 *    internal modules they wrap give (the tests may include internal headers),
 *    and one front-end turn reuses the cache the way the CLI and server rely on.
 */
#include <dirent.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "format/gguf.h"
#include "front/front.h"
#include "petrel.h"
#include "test.h"
#include "text/chat.h"
#include "text/sampler.h"
#include "text/tokenizer.h"

/* ===== The include check ===== */

static const char *const FRONT_DIRS[] = {"src/cli", "src/server", "src/front"};

static int is_file(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

/* A quoted include is allowed when it names the public header(s) or a file of
 * a front-end folder, written relative to the including file's folder or to
 * src/ (the -Isrc path). */
static int allowed_quoted(const char *dir, const char *inc) {
    if (!strcmp(inc, "petrel.h") || !strcmp(inc, "petrel_tools.h")) return 1;
    if (strstr(inc, "..")) return 0;
    char p[1024];
    snprintf(p, sizeof p, "%s/%s", dir, inc);
    if (!strchr(inc, '/') && is_file(p)) return 1;
    for (size_t i = 0; i < sizeof FRONT_DIRS / sizeof FRONT_DIRS[0]; i++) {
        const char *sub = FRONT_DIRS[i] + 4; /* "cli", "server", "front" */
        size_t n = strlen(sub);
        if (!strncmp(inc, sub, n) && inc[n] == '/') {
            snprintf(p, sizeof p, "src/%s", inc);
            return is_file(p);
        }
    }
    return 0;
}

/* Check one file's text; each offending line is reported (as file:line) into
 * report and counted. dir: the folder the file is in. */
static int check_text(const char *path, const char *dir, const char *text, char *report,
                      size_t cap) {
    int bad = 0, line = 1;
    for (const char *l = text; *l; line++) {
        const char *e = strchr(l, '\n');
        size_t n = e ? (size_t)(e - l) : strlen(l);
        const char *p = l;
        while (p < l + n && (*p == ' ' || *p == '\t'))
            p++;
        if (p < l + n && *p == '#') {
            p++;
            while (p < l + n && (*p == ' ' || *p == '\t'))
                p++;
            if ((size_t)(l + n - p) > 7 && !strncmp(p, "include", 7)) {
                p += 7;
                while (p < l + n && (*p == ' ' || *p == '\t'))
                    p++;
                char open = p < l + n ? *p : 0, close = open == '"' ? '"' : '>';
                const char *q = open ? memchr(p + 1, close, (size_t)(l + n - p - 1)) : NULL;
                char inc[512] = "";
                if ((open == '"' || open == '<') && q && (size_t)(q - p - 1) < sizeof inc) {
                    memcpy(inc, p + 1, (size_t)(q - p - 1));
                    inc[q - p - 1] = 0;
                }
                int ok;
                char ip[1024];
                snprintf(ip, sizeof ip, "src/%s", inc);
                if (!inc[0])
                    ok = 0; /* a computed include: not allowed either */
                else if (open == '"')
                    ok = allowed_quoted(dir, inc);
                else
                    ok = !is_file(ip) ||
                         allowed_quoted(dir, inc); /* <text/chat.h> would reach src/ too */
                if (!ok) {
                    bad++;
                    size_t used = strlen(report);
                    snprintf(report + used, cap - used,
                             "%s:%d: #include %c%s%c: front ends include only petrel.h, "
                             "their own headers and system/third-party ones\n",
                             path, line, open ? open : '?', inc, open == '<' ? '>' : '"');
                }
            }
        }
        l += n + (e ? 1 : 0);
    }
    return bad;
}

static void test_frontapi_includes(void) {
    char report[16384] = "";
    int files = 0, bad = 0;
    for (size_t d = 0; d < sizeof FRONT_DIRS / sizeof FRONT_DIRS[0]; d++) {
        DIR *dir = opendir(FRONT_DIRS[d]);
        CHECKF(dir, "%s: cannot read (run the tests from the repository root)", FRONT_DIRS[d]);
        if (!dir) continue;
        struct dirent *ent;
        while ((ent = readdir(dir))) {
            size_t n = strlen(ent->d_name);
            if (n < 3 || ent->d_name[n - 2] != '.' ||
                (ent->d_name[n - 1] != 'c' && ent->d_name[n - 1] != 'h'))
                continue;
            char path[1024];
            snprintf(path, sizeof path, "%s/%s", FRONT_DIRS[d], ent->d_name);
            char *text = t_read_file(path, NULL);
            CHECKF(text, "%s: cannot read", path);
            if (!text) continue;
            files++;
            bad += check_text(path, FRONT_DIRS[d], text, report, sizeof report);
            free(text);
        }
        closedir(dir);
    }
    CHECKF(files >= 10, "only %d front-end files found", files);
    CHECKF(bad == 0, "%d front-end includes of internal headers:\n%s", bad, report);
    /* the checker itself: internal headers are caught, however written; public ones pass */
    char r2[2048] = "";
    const char *sample =
        "#include <stdio.h>\n#include <jansson.h>\n#include \"petrel.h\"\n#include \"cli.h\"\n"
        "#include \"front/front.h\"\n#include \"server/oai.h\"\n  #  include \"text/chat.h\"\n"
        "#include <format/gguf.h>\n#include \"common.h\"\n#include \"../text/gen.c\"\n";
    CHECK(check_text("sample.c", "src/cli", sample, r2, sizeof r2) == 4);
    CHECK_STR_CONTAINS(r2, "sample.c:7: #include \"text/chat.h\"");
    CHECK_STR_CONTAINS(r2, "sample.c:8: #include <format/gguf.h>");
    CHECK_STR_CONTAINS(r2, "sample.c:9: #include \"common.h\"");
}

/* No front end's header includes another front end's: a header of src/cli may include
 * src/cli and src/front headers, not src/server ones (what both need lives in src/front), and
 * the other way round. (A .c file may: cli/serve.c starts the server.) */
static void test_frontapi_headers_stay_home(void) {
    char report[4096] = "";
    int bad = 0;
    for (size_t d = 0; d < sizeof FRONT_DIRS / sizeof FRONT_DIRS[0]; d++) {
        DIR *dir = opendir(FRONT_DIRS[d]);
        CHECKF(dir, "%s: cannot read (run the tests from the repository root)", FRONT_DIRS[d]);
        if (!dir) continue;
        const char *own = FRONT_DIRS[d] + 4; /* "cli", "server", "front" */
        struct dirent *ent;
        while ((ent = readdir(dir))) {
            const size_t n = strlen(ent->d_name);
            if (n < 3 || strcmp(ent->d_name + n - 2, ".h")) continue;
            char path[1024];
            snprintf(path, sizeof path, "%s/%s", FRONT_DIRS[d], ent->d_name);
            char *text = t_read_file(path, NULL);
            for (const char *p = text ? strstr(text, "#include \"") : NULL; p;
                 p = strstr(p + 1, "#include \"")) {
                const char *inc = p + 10, *slash = strchr(inc, '/'), *q = strchr(inc, '"');
                if (!slash || !q || slash > q) continue; /* the folder's own header */
                const size_t dl = (size_t)(slash - inc);
                const int other_front =
                    (dl == 3 && !strncmp(inc, "cli", 3)) || (dl == 6 && !strncmp(inc, "server", 6));
                if (!other_front || (dl == strlen(own) && !strncmp(inc, own, dl))) continue;
                bad++;
                const size_t used = strlen(report);
                snprintf(report + used, sizeof report - used, "%s: #include \"%.*s\"\n", path,
                         (int)(q - inc), inc);
            }
            free(text);
        }
        closedir(dir);
    }
    CHECKF(bad == 0, "front-end headers that include another front end's:\n%s", report);
}

/* ===== The public API against what it wraps ===== */

static pt_engine *vocab_engine(const char *fixture) {
    char err[512] = "";
    pt_engine_params ep = {.model_path = t_fixture(fixture), .vocab_only = 1};
    pt_engine *e = pt_engine_open(&ep, err, sizeof err);
    CHECKF(e, "%s: %s", fixture, err);
    return e;
}

static void test_frontapi_vocab(void) {
    const char *fx = "tokenizer/ggml-vocab-fixture-glm-dsa.gguf";
    pt_engine *e = vocab_engine(fx);
    if (!e) return;
    pt_err perr = {{0}};
    gguf_ctx *g = gguf_open(t_fixture(fx), &perr);
    tok_vocab *v = g ? tok_load(g, &perr) : NULL;
    CHECKF(v, "%s", perr.msg);
    if (!v) {
        gguf_close(g);
        pt_engine_close(e);
        return;
    }
    char err[512];
    CHECK(pt_engine_has_vocab(e, err, sizeof err) == 1);
    CHECK(pt_vocab_size(e) == tok_n_vocab(v) && pt_engine_n_vocab(e) == tok_n_vocab(v));
    CHECK(pt_token_bos(e) == tok_bos(v) && pt_token_eos(e) == tok_eos(v) &&
          pt_token_eot(e) == tok_eot(v));
    const char *text = "Hello world! <|user|> héllo 123\n\xff";
    for (int flags = 0; flags < 4; flags++) {
        pt_ids a = {0};
        tok_ids b = {0};
        CHECK(pt_tokenize(e, text, strlen(text), flags, &a, err, sizeof err) == 0);
        CHECK(tok_encode(v, text, strlen(text), flags, &b, &perr) == 0);
        CHECKF(a.n == b.n && a.n && !memcmp(a.v, b.v, a.n * sizeof *a.v),
               "flags %d: %zu vs %zu ids", flags, a.n, b.n);
        for (int df = 0; df < 2; df++) {
            pt_buf x = {0};
            tok_bytes y = {0};
            CHECK(pt_detokenize(e, a.v, a.n, df, &x, err, sizeof err) == 0);
            CHECK(tok_decode(v, b.v, b.n, df, &y, &perr) == 0);
            CHECK(x.n == y.n && !memcmp(x.v, y.v, x.n) && x.v[x.n] == 0);
            pt_buf_free(&x);
            tok_bytes_free(&y);
        }
        for (size_t i = 0; i < a.n; i++) {
            size_t l1, l2;
            const char *p1 = pt_token_piece(e, a.v[i], PT_DETOKENIZE_RENDER_SPECIAL, &l1);
            const char *p2 = tok_piece(v, a.v[i], TOK_RENDER_SPECIAL, &l2);
            CHECK(l1 == l2 && (!l1 || !memcmp(p1, p2, l1)));
        }
        pt_ids_free(&a);
        tok_ids_free(&b);
    }
    CHECK(tok_eos(v) < 0 || pt_token_is_eog(e, tok_eos(v)) == 1);
    CHECK(pt_token_is_eog(e, 0) == tok_is_eog(v, 0));
    /* an id outside the vocabulary is an error, not a crash */
    int32_t badid = tok_n_vocab(v) + 5;
    pt_buf x = {0};
    CHECK(pt_detokenize(e, &badid, 1, 0, &x, err, sizeof err) == -1);
    CHECK_STR_CONTAINS(err, "outside the vocabulary");
    pt_buf_free(&x);
    /* the chat format and the sampling defaults come from the same open file */
    CHECK(!strcmp(pt_engine_chat_format(e), chat_format_name(chat_detect_gguf(g))));
    sampler_params sp;
    sampler_params_default(&sp);
    sampler_params_from_gguf(&sp, g);
    pt_sampling ps;
    pt_engine_sampling(e, &ps);
    CHECK(ps.temp == sp.temp && ps.top_k == sp.top_k && ps.top_p == sp.top_p &&
          ps.min_p == sp.min_p);
    /* a vocabulary-only engine runs no session */
    CHECK(pt_session_new(e, NULL, err, sizeof err) == NULL);
    CHECK_STR_CONTAINS(err, "vocabulary only");
    tok_free(v);
    gguf_close(g);
    pt_engine_close(e);
    /* a file without a vocabulary is refused for vocab_only, with the reason */
    char junk[600];
    snprintf(junk, sizeof junk, "%s/not-a-model.gguf", t_tmpdir());
    CHECK(t_write_file(junk, "GGUF", 4) == 0);
    pt_engine_params ep = {.model_path = junk, .vocab_only = 1};
    CHECK(pt_engine_open(&ep, err, sizeof err) == NULL && err[0]);
}

static void test_frontapi_chat(void) {
    const char *msgs_json =
        "[{\"role\":\"system\",\"content\":\"Be brief.\"},{\"role\":\"user\",\"content\":"
        "\"What is the weather in Paris?\"}]";
    const char *tools_json =
        "[{\"type\":\"function\",\"function\":{\"name\":\"get_weather\",\"description\":\"d\","
        "\"parameters\":{\"type\":\"object\",\"properties\":{\"city\":{\"type\":\"string\"}}}}}]";
    json_t *msgs = json_loads(msgs_json, 0, NULL), *tools = json_loads(tools_json, 0, NULL);
    const char *names[] = {"glm-5", "deepseek-v3", "gemma-4", "qwen3"};
    char err[512];
    for (int i = 0; i < 4; i++) {
        CHECK(pt_chat_format_known(names[i]));
        chat_format f = chat_format_from_name(names[i]);
        CHECK(pt_chat_default_thinking(names[i]) == chat_default_thinking(f));
        for (int th = -1; th <= 1; th++) {
            CHECK(pt_chat_opens_reasoning(names[i], th) == chat_prompt_opens_reasoning(f, th));
            pt_buf a = {0};
            tok_bytes b = {0};
            pt_err pe = {{0}};
            pt_chat_opts o = {.add_generation_prompt = 1, .thinking = th};
            chat_opts co = {.add_generation_prompt = 1, .thinking = th};
            CHECKF(pt_chat_render(names[i], msgs_json, tools_json, &o, &a, err, sizeof err) == 0,
                   "%s", err);
            CHECK(chat_render(f, msgs, tools, &co, &b, &pe) == 0);
            CHECKF(a.n == b.n && !memcmp(a.v, b.v, a.n), "%s: the rendering differs", names[i]);
            pt_buf_free(&a);
            tok_bytes_free(&b);
        }
        pt_chat_markers m;
        CHECK(pt_chat_markers_of(names[i], &m) == 0 && m.reasoning_open && m.reasoning_close &&
              m.n_tool_calls >= 1);
    }
    pt_chat_markers m;
    CHECK(pt_chat_markers_of("none", &m) == -1 && pt_chat_markers_of("jinja", &m) == -1);
    CHECK(!pt_chat_format_known("none") && !pt_chat_format_known(NULL));
    pt_buf out = {0};
    CHECK(pt_chat_render("chatml", msgs_json, NULL, NULL, &out, err, sizeof err) == -1);
    CHECK_STR_CONTAINS(err, "unknown chat format 'chatml'");
    CHECK(pt_chat_render("qwen3", "[{", NULL, NULL, &out, err, sizeof err) == -1);
    CHECK_STR_CONTAINS(err, "messages: not valid JSON");
    CHECK(pt_chat_render("qwen3", "{}", NULL, NULL, &out, err, sizeof err) == -1);
    CHECK(pt_chat_render("qwen3", "[{\"content\":\"x\"}]", NULL, NULL, &out, err, sizeof err) ==
              -1 &&
          err[0]);
    pt_buf_free(&out);
    /* parsing: the same split as chat_parse, moved into the public type */
    const char *gen =
        "<think>\nweather\n</think>\n\nLet me check.\n<tool_call>\n{\"name\": \"get_weather\", "
        "\"arguments\": {\"city\": \"Paris\"}}\n</tool_call>";
    pt_chat_parsed p;
    CHECK(pt_chat_parse("qwen3", gen, strlen(gen), 0, tools_json, &p, err, sizeof err) == 0);
    CHECK(!strcmp(p.reasoning, "weather") && !strcmp(p.content, "Let me check.") && p.n_calls == 1);
    CHECK(p.n_calls == 1 && !strcmp(p.calls[0].name, "get_weather") &&
          strstr(p.calls[0].arguments, "Paris"));
    pt_chat_parsed_free(&p);
    CHECK(p.content == NULL && p.n_calls == 0);
    CHECK(pt_chat_parse("none", gen, strlen(gen), 0, NULL, &p, err, sizeof err) == -1);
    json_decref(msgs);
    json_decref(tools);
}

static void test_frontapi_sampling(void) {
    pt_sampling d, with, p;
    pt_sampling_default(&d);
    sampler_params sp;
    sampler_params_default(&sp);
    CHECK(d.temp == sp.temp && d.top_p == sp.top_p && d.top_k == sp.top_k && d.min_p == sp.min_p &&
          d.repeat_penalty == sp.repeat_penalty && d.penalty_last_n == sp.penalty_last_n &&
          d.seed == sp.seed);
    with = (pt_sampling){.temp = 0,
                         .top_k = 7,
                         .top_p = 0.5f,
                         .min_p = 0.1f,
                         .repeat_penalty = 1.3f,
                         .frequency_penalty = 0.2f,
                         .presence_penalty = 0.4f,
                         .penalty_last_n = 9,
                         .seed = 42};
    p = d;
    pt_sampling_override(&p, &with, 0);
    CHECK(!memcmp(&p, &d, sizeof p));
    pt_sampling_override(&p, &with, PT_SAMPLING_TEMP | PT_SAMPLING_SEED);
    CHECK(p.temp == 0 && p.seed == 42 && p.top_k == d.top_k && p.top_p == d.top_p &&
          p.repeat_penalty == d.repeat_penalty);
    unsigned all = PT_SAMPLING_TEMP | PT_SAMPLING_TOP_K | PT_SAMPLING_TOP_P | PT_SAMPLING_MIN_P |
                   PT_SAMPLING_REPEAT | PT_SAMPLING_FREQUENCY | PT_SAMPLING_PRESENCE |
                   PT_SAMPLING_LAST_N | PT_SAMPLING_SEED;
    pt_sampling_override(&p, &with, all);
    CHECK(!memcmp(&p, &with, sizeof p));
    /* the public sampler draws what the internal one draws */
    char err[512];
    with.temp = 0.8f;
    pt_sampler *a = pt_sampler_new(&with, 64, err, sizeof err);
    sampler_params ip = {.temp = 0.8f,
                         .top_k = 7,
                         .top_p = 0.5f,
                         .min_p = 0.1f,
                         .repeat_penalty = 1.3f,
                         .frequency_penalty = 0.2f,
                         .presence_penalty = 0.4f,
                         .penalty_last_n = 9,
                         .seed = 42};
    pt_err pe = {{0}};
    sampler *b = sampler_new(&ip, 64, &pe);
    CHECK(a && b);
    if (a && b) {
        for (int step = 0; step < 32; step++) {
            float la[64], lb[64];
            for (int i = 0; i < 64; i++)
                la[i] = lb[i] = (float)((i * 37 + step * 11) % 23) * 0.25f;
            int32_t x = pt_sampler_sample(a, la), y = sampler_sample(b, lb);
            CHECK(x == y);
            pt_sampler_accept(a, x);
            sampler_accept(b, y);
        }
    }
    pt_sampler_free(a);
    sampler_free(b);
    with.top_p = -1;
    CHECK(pt_sampler_new(&with, 64, err, sizeof err) == NULL && err[0]);
}

/* One front-end turn on a real model: raw text, then the same prompt again,
 * which the session serves from its cache but for the last token. */
static void test_frontapi_turn(void) {
    char err[512];
    pt_engine_params ep = {
        .model_path = t_fixture("glm-dsa-rq2k.gguf"), .n_threads = 2, .usage_dir = t_tmpdir()};
    pt_engine *e = pt_engine_open(&ep, err, sizeof err);
    CHECKF(e, "%s", err);
    if (!e) return;
    pt_session_params spp = {.n_ctx = 64};
    pt_session *s = pt_session_new(e, &spp, err, sizeof err);
    pt_sampling sp;
    pt_engine_sampling(e, &sp);
    sp.temp = 0;
    pt_gen *g = s ? pt_gen_new(s, &sp, err, sizeof err) : NULL;
    CHECKF(g, "%s", err);
    if (g) {
        CHECK(pt_gen_session(g) == s && pt_session_engine(s) == e);
        fe_turn t = {.text = "one two three", .text_len = 13, .gen = {.max_tokens = 4}};
        fe_turn_result r = {0}, r2 = {0};
        CHECKF(fe_turn_run(g, &t, &r, err, sizeof err) == 0, "%s", err);
        CHECK(r.n_prompt > 0 && r.n_reused == 0 && r.gen.n_tokens <= 4 && r.text.v);
        CHECKF(fe_turn_run(g, &t, &r2, err, sizeof err) == 0, "%s", err);
        CHECK(r2.n_prompt == r.n_prompt && r2.n_reused == r.n_prompt - 1);
        CHECK(r2.gen.text.n == r.gen.text.n && !memcmp(r2.gen.text.v, r.gen.text.v, r.gen.text.n));
        /* too long for the context: refused before the cache is touched */
        char big[1024];
        memset(big, 'a', sizeof big);
        for (size_t i = 0; i < sizeof big; i += 3)
            big[i] = ' ';
        fe_turn tl = {.text = big, .text_len = sizeof big, .gen = {.max_tokens = 1}};
        int held = pt_session_n_past(s);
        CHECK(fe_turn_run(g, &tl, &r2, err, sizeof err) == FE_TURN_TOO_LONG);
        CHECK_STR_CONTAINS(err, "context holds 64");
        CHECK(pt_session_n_past(s) == held);
        /* a stop already set: cancelled, the cache untouched */
        volatile sig_atomic_t stop = 1;
        t.stop = &stop;
        CHECK(fe_turn_run(g, &t, &r2, err, sizeof err) == FE_TURN_CANCELLED &&
              pt_session_n_past(s) == held);
        fe_turn_result_free(&r);
        fe_turn_result_free(&r2);
    }
    pt_gen_free(g);
    pt_session_free(s);
    pt_engine_close(e);
}

/* --chat-format overrides the model's format; an unknown name is a usage error. */
static void test_frontapi_cli_chat_format(void) {
    const char *bin = getenv("PETREL_BIN");
    if (!bin || !*bin) bin = "build/petrel";
    char cmd[8192], out[8192];
    snprintf(cmd, sizeof cmd, "echo hi | %s chat -m %s --greedy -n 2 -t 2 --chat-format qwen3", bin,
             t_fixture("glm-dsa-rq2k.gguf"));
    CHECK(t_run(cmd, out, sizeof out) == 0);
    CHECK_STR_CONTAINS(out, "(qwen3 format");
    snprintf(cmd, sizeof cmd, "echo hi | %s chat -m %s -n 2 -t 2", bin,
             t_fixture("glm-dsa-rq2k.gguf"));
    CHECK(t_run(cmd, out, sizeof out) == 0);
    CHECK_STR_CONTAINS(out, "(glm-5 format");
    snprintf(cmd, sizeof cmd, "%s chat -m %s --chat-format chatml", bin,
             t_fixture("glm-dsa-rq2k.gguf"));
    CHECK(t_run(cmd, out, sizeof out) == 2);
    CHECK_STR_CONTAINS(out, "unknown chat format 'chatml'");
}

T_SUITE(frontapi) {
    T_ADD(test_frontapi_cli_chat_format);
    T_ADD(test_frontapi_includes);
    T_ADD(test_frontapi_headers_stay_home);
    T_ADD(test_frontapi_vocab);
    T_ADD(test_frontapi_chat);
    T_ADD(test_frontapi_sampling);
    T_ADD(test_frontapi_turn);
}
