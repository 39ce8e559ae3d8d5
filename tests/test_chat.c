/* test_chat.c — chat formats against the golden renderings of the models' real
 * Jinja templates (../shared/fixtures/templates, every case byte for byte), and
 * the parsing of generated text into reasoning, content and tool calls,
 * malformed inputs included. */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "test.h"
#include "text/chat.h"

static void test_chat_golden_templates(void) {
    char path[4096];
    if (!t_need("templates/cases.json")) return;
    snprintf(path, sizeof path, "%s", t_fixture("templates/cases.json"));
    json_error_t je;
    json_t *cases = json_load_file(path, JSON_PRESERVE_ORDER, &je);
    CHECKF(cases, "%s: %s", path, je.text);
    if (!cases) return;
    const char *name;
    json_t *c;
    int n = 0;
    json_object_foreach(cases, name, c) {
        const char *family = json_string_value(json_object_get(c, "family"));
        json_t *in = json_object_get(c, "input");
        const chat_fmt *f = chat_fmt_find(family);
        CHECKF(f != NULL, "%s: unknown family %s", name, family);
        CHECK(!strcmp(chat_fmt_name(f), family));
        json_t *et = json_object_get(in, "enable_thinking");
        chat_opts o = {.add_generation_prompt = 1, .thinking = et ? json_is_true(et) : -1};
        tok_bytes out = {0};
        pt_err err = {{0}};
        int rc = chat_render(f, json_object_get(in, "messages"), json_object_get(in, "tools"), &o,
                             &out, &err);
        CHECKF(rc == 0, "%s: %s", name, err.msg);
        size_t len = 0;
        char *want =
            t_read_file(t_fixture((snprintf(path, sizeof path, "templates/%s",
                                            json_string_value(json_object_get(c, "output_file"))),
                                   path)),
                        &len);
        CHECKF(want != NULL, "%s: cannot read golden", name);
        if (want) {
            int same = out.n == len && !memcmp(out.v, want, len);
            CHECKF(same, "%s: rendered\n---\n%.*s\n--- expected\n%s\n---", name, (int)out.n,
                   out.v ? out.v : "", want);
        }
        free(want);
        tok_bytes_free(&out);
        n++;
    }
    CHECKF(n == 24, "expected 24 cases, ran %d", n);
    json_decref(cases);
}

static void test_chat_detect(void) {
    const chat_fmt *glm5 = chat_fmt_find("glm-5"), *ds3 = chat_fmt_find("deepseek-v3");
    const chat_fmt *gemma4 = chat_fmt_find("gemma-4"), *qwen3 = chat_fmt_find("qwen3");
    CHECK(glm5 && ds3 && gemma4 && qwen3);
    CHECK(chat_detect("glm-dsa", NULL, NULL, NULL) == glm5);
    CHECK(chat_detect("deepseek2", NULL, NULL, NULL) == ds3);
    CHECK(chat_detect("gemma4", NULL, NULL, NULL) == gemma4);
    CHECK(chat_detect("qwen3moe", NULL, NULL, NULL) == qwen3);
    CHECK(chat_detect("llama", "{{ '<|im_start|>' }}", NULL, NULL) == qwen3);
    CHECK(chat_detect("unknown", "[gMASK]<sop>", NULL, NULL) == glm5);
    CHECK(chat_detect("unknown", NULL, "glm4", NULL) == glm5);
    CHECK(chat_detect("unknown", NULL, NULL, "gemma4") == gemma4);
    CHECK(chat_detect(NULL, NULL, NULL, NULL) == NULL);
    /* the template's text decides before the architecture; '*' hints are prefixes */
    CHECK(chat_detect("qwen3moe", "<|turn>", NULL, NULL) == gemma4);
    CHECK(chat_detect("glm4moe", NULL, NULL, NULL) == glm5);
    CHECK(chat_detect("glm", NULL, NULL, NULL) == NULL);
    CHECK(chat_fmt_find("qwen3") == qwen3);
    CHECK(chat_fmt_find("nope") == NULL && chat_fmt_find("none") == NULL);
    CHECK(!strcmp(chat_fmt_name(NULL), "none"));
    /* a template with two formats' markers: the table's order decides */
    CHECK(chat_detect(NULL, "<|assistant|><|turn>", NULL, NULL) == gemma4);
    CHECK(chat_detect(NULL,
                      "[gMASK]<\xef\xbd\x9c"
                      "Assistant\xef\xbd\x9c>",
                      NULL, NULL) == glm5);
    CHECK(chat_detect(NULL, "<|im_start|><|assistant|>", NULL, NULL) == glm5);
    /* the table: every format once, names in its order */
    char names[256];
    chat_fmt_names(names, sizeof names);
    CHECK(!strcmp(names, "gemma-4, glm-5, deepseek-v3, qwen3"));
    CHECK(chat_fmt_at(0) == gemma4 && chat_fmt_at(3) == qwen3 && chat_fmt_at(4) == NULL &&
          chat_fmt_at(-1) == NULL);
}

static void test_chat_render_errors(void) {
    tok_bytes out = {0};
    pt_err err = {{0}};
    chat_opts o = {.add_generation_prompt = 1, .thinking = -1};
    json_t *bad = json_loads("[{\"content\": \"x\"}]", 0, NULL);
    CHECK(chat_render(chat_fmt_find("glm-5"), bad, NULL, &o, &out, &err) == -1);
    CHECK_STR_CONTAINS(err.msg, "no role");
    json_decref(bad);
    bad = json_loads("[{\"role\": \"wizard\", \"content\": \"x\"}]", 0, NULL);
    CHECK(chat_render(chat_fmt_find("qwen3"), bad, NULL, &o, &out, &err) == -1);
    CHECK_STR_CONTAINS(err.msg, "wizard");
    json_decref(bad);
    bad =
        json_loads("[{\"role\": \"assistant\", \"content\": \"\", \"tool_calls\": [{\"function\": "
                   "{\"name\": \"f\", \"arguments\": \"not json\"}}]}]",
                   0, NULL);
    CHECK(chat_render(chat_fmt_find("glm-5"), bad, NULL, &o, &out, &err) == -1);
    CHECK_STR_CONTAINS(err.msg, "arguments");
    json_decref(bad);
    CHECK(chat_render(chat_fmt_find("glm-5"), NULL, NULL, &o, &out, &err) == -1);
    tok_bytes_free(&out);
}

/* Python json.dumps spacing, key order, floats, escapes, UTF-8 kept. */
static void test_chat_json_dump(void) {
    json_t *j =
        json_loads("{\"b\": [1, 2.5, 1.0, true, null], \"a\": \"x\\n\\\"é\\u0001\", \"c\": {}}",
                   JSON_PRESERVE_ORDER, NULL);
    tok_bytes out = {0};
    CHECK(chat_json_dump(j, &out) == 0);
    const char *want = "{\"b\": [1, 2.5, 1.0, true, null], \"a\": \"x\\n\\\"é\\u0001\", \"c\": {}}";
    CHECKF(out.n == strlen(want) && !memcmp(out.v, want, out.n), "got %.*s", (int)out.n, out.v);
    tok_bytes_free(&out);
    json_decref(j);
}

/* Parse text in the format called fmt ("none": no format). */
static void parse(const char *fmt, const char *text, int in_reasoning, const json_t *tools,
                  chat_parsed *p) {
    pt_err err = {{0}};
    int rc = chat_parse(chat_fmt_find(fmt), text, strlen(text), in_reasoning, tools, p, &err);
    CHECKF(rc == 0, "chat_parse: %s", err.msg);
}

static void test_chat_parse_glm(void) {
    chat_parsed p;
    parse("glm-5",
          "Let me check.</think>Sure.<tool_call>get_weather<arg_key>city</arg_key><arg_value>Rome"
          "</arg_value><arg_key>days</arg_key><arg_value>2</arg_value></tool_call>",
          1, NULL, &p);
    CHECK(!strcmp(p.reasoning, "Let me check."));
    CHECK(!strcmp(p.content, "Sure."));
    CHECK(p.n_calls == 1 && p.n_bad == 0);
    if (p.n_calls == 1) {
        CHECK(!strcmp(p.calls[0].name, "get_weather"));
        CHECKF(!strcmp(p.calls[0].arguments, "{\"city\":\"Rome\",\"days\":2}"), "%s",
               p.calls[0].arguments);
    }
    chat_parsed_free(&p);
    /* a string-typed parameter stays a string even when it looks like JSON */
    json_t *tools =
        json_loads("[{\"type\":\"function\",\"function\":{\"name\":\"f\",\"parameters\":{\"type\":"
                   "\"object\",\"properties\":{\"zip\":{\"type\":\"string\"}}}}}]",
                   0, NULL);
    parse("glm-5", "<tool_call>f<arg_key>zip</arg_key><arg_value>00100</arg_value></tool_call>", 0,
          tools, &p);
    CHECK(p.n_calls == 1 && p.calls && !strcmp(p.calls[0].arguments, "{\"zip\":\"00100\"}"));
    chat_parsed_free(&p);
    json_decref(tools);
    /* thinking off: all content; two calls */
    parse("glm-5",
          "<tool_call>a</tool_call><tool_call>b<arg_key>x</arg_key><arg_value>[1]</arg_value></"
          "tool_call>",
          0, NULL, &p);
    CHECK(p.n_calls == 2 && !strcmp(p.content, "") && !strcmp(p.reasoning, ""));
    if (p.n_calls == 2) CHECK(!strcmp(p.calls[1].arguments, "{\"x\":[1]}"));
    chat_parsed_free(&p);
}

static void test_chat_parse_others(void) {
    chat_parsed p;
    parse("qwen3",
          "<think>\nhmm\n</think>\n\nOK<tool_call>\n{\"name\": \"get_weather\", \"arguments\": "
          "{\"city\": \"Rome\"}}\n</tool_call>",
          0, NULL, &p);
    CHECK(!strcmp(p.reasoning, "hmm") && !strcmp(p.content, "OK") && p.n_calls == 1);
    if (p.n_calls) CHECK(!strcmp(p.calls[0].arguments, "{\"city\":\"Rome\"}"));
    chat_parsed_free(&p);
    /* arguments given as a JSON string */
    parse("qwen3", "<tool_call>{\"name\": \"f\", \"arguments\": \"{\\\"a\\\": 1}\"}</tool_call>", 0,
          NULL, &p);
    CHECK(p.n_calls == 1 && !strcmp(p.calls[0].arguments, "{\"a\":1}"));
    chat_parsed_free(&p);
    parse("deepseek-v3",
          "thinking</think>Calling."
          "<\xef\xbd\x9ctool\xe2\x96\x81"
          "calls\xe2\x96\x81"
          "begin\xef\xbd\x9c><\xef\xbd\x9ctool\xe2\x96\x81"
          "call\xe2\x96\x81"
          "begin\xef\xbd\x9c>get_weather<\xef\xbd\x9ctool\xe2\x96\x81sep\xef\xbd\x9c>{\"city\": "
          "\"Rome\"}<\xef\xbd\x9ctool\xe2\x96\x81"
          "call\xe2\x96\x81"
          "end\xef\xbd\x9c><\xef\xbd\x9ctool\xe2\x96\x81"
          "calls\xe2\x96\x81"
          "end\xef\xbd\x9c>",
          1, NULL, &p);
    CHECK(!strcmp(p.reasoning, "thinking") && !strcmp(p.content, "Calling.") && p.n_calls == 1);
    if (p.n_calls) CHECK(!strcmp(p.calls[0].name, "get_weather"));
    chat_parsed_free(&p);
    parse("gemma-4",
          "<|channel>thought\nplan<channel|>Here.<|tool_call>call:get_weather{city:<|\"|>Rome, "
          "IT<|\"|>,days:2,"
          "opts:{deep:true,tags:[<|\"|>a<|\"|>,1.5]}}<tool_call|><|tool_response>",
          0, NULL, &p);
    CHECK(!strcmp(p.reasoning, "plan"));
    CHECKF(!strcmp(p.content, "Here."), "content '%s'", p.content);
    CHECK(p.n_calls == 1);
    if (p.n_calls)
        CHECKF(
            !strcmp(
                p.calls[0].arguments,
                "{\"city\":\"Rome, IT\",\"days\":2,\"opts\":{\"deep\":true,\"tags\":[\"a\",1.5]}}"),
            "%s", p.calls[0].arguments);
    chat_parsed_free(&p);
}

/* Malformed calls are reported and kept as text; nothing crashes. */
static void test_chat_parse_malformed(void) {
    static const struct {
        const char *fmt;
        const char *text;
    } bad[] = {
        {"glm-5", "<tool_call>get_weather<arg_key>city</arg_key>Rome</tool_call>"},
        {"glm-5", "<tool_call><arg_key>x</arg_key><arg_value>1</arg_value></tool_call>"},
        {"glm-5", "<tool_call>f<arg_key>city"},
        {"qwen3", "<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": </tool_call>"},
        {"qwen3", "<tool_call>[1,2]</tool_call>"},
        {"qwen3", "<tool_call>{\"arguments\": {}}</tool_call>"},
        {"qwen3", "<tool_call>{\"name\": \"f\", \"arguments\": 3}</tool_call>"},
        {"gemma-4", "<|tool_call>call:f{a:<|\"|>unterminated}<tool_call|>"},
        {"gemma-4", "<|tool_call>call:{}<tool_call|>"},
        {"gemma-4", "<|tool_call>f{a:1}<tool_call|>"},
        {"gemma-4", "<|tool_call>call:f{a:[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[["
                    "[[[[[[[[[[[[[[[[[[[[[["
                    "<tool_call|>"},
        {"deepseek-v3", "<\xef\xbd\x9ctool\xe2\x96\x81"
                        "call\xe2\x96\x81"
                        "begin\xef\xbd\x9c>f{}<\xef\xbd\x9ctool"
                        "\xe2\x96\x81"
                        "call\xe2\x96\x81"
                        "end\xef\xbd\x9c>"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        chat_parsed p;
        parse(bad[i].fmt, bad[i].text, 0, NULL, &p);
        CHECKF(p.n_calls == 0 && p.n_bad >= 1, "case %zu: calls %d bad %d", i, p.n_calls, p.n_bad);
        CHECKF(p.content && strlen(p.content) > 0, "case %zu: malformed call not kept as text", i);
        CHECKF(p.bad[0] != 0, "case %zu: no reason", i);
        chat_parsed_free(&p);
    }
    /* a good call after a bad one is still found */
    chat_parsed p;
    parse("qwen3",
          "<tool_call>oops</tool_call><tool_call>{\"name\": \"g\", \"arguments\": {}}</tool_call>",
          0, NULL, &p);
    CHECK(p.n_calls == 1 && p.n_bad == 1);
    chat_parsed_free(&p);
    /* an unterminated opener before a good call */
    parse("qwen3", "<tool_call><tool_call>{\"name\": \"f\"}</tool_call>", 0, NULL, &p);
    CHECK(p.n_calls == 1 && p.n_bad == 1 && !strcmp(p.content, "<tool_call>"));
    chat_parsed_free(&p);
    /* reasoning never closed (cut short): everything is reasoning */
    parse("glm-5", "still thinking", 1, NULL, &p);
    CHECK(!strcmp(p.reasoning, "still thinking") && !strcmp(p.content, ""));
    chat_parsed_free(&p);
    /* invalid UTF-8 and NUL-free garbage go through */
    parse("qwen3", "\xff\xfe<tool_call>\xc3</tool_call>", 0, NULL, &p);
    CHECK(p.n_bad == 1);
    chat_parsed_free(&p);
    parse("none", "<think>x</think>y", 0, NULL, &p);
    CHECK(p.n_calls == 0);
    chat_parsed_free(&p);
}

/* Rendering what the parser returned reproduces the golden tool round trip:
 * parse ∘ render agree on the call format of each family. */
static void test_chat_parse_render_roundtrip(void) {
    static const char *const fs[] = {"glm-5", "qwen3", "gemma-4", "deepseek-v3"};
    for (size_t i = 0; i < 4; i++) {
        json_t *msgs = json_loads(
            "[{\"role\":\"assistant\",\"content\":\"\",\"tool_calls\":[{\"type\":\"function\","
            "\"function\":{\"name\":\"get_weather\",\"arguments\":{\"city\":\"Rome\",\"days\":2}}}]"
            "}]",
            JSON_PRESERVE_ORDER, NULL);
        tok_bytes out = {0};
        pt_err err = {{0}};
        chat_opts o = {.add_generation_prompt = 0, .thinking = 0};
        CHECK(chat_render(chat_fmt_find(fs[i]), msgs, NULL, &o, &out, &err) == 0);
        chat_parsed p;
        parse(fs[i], out.v ? out.v : "", 0, NULL, &p);
        CHECKF(p.n_calls == 1, "%s: %d calls in %.*s", fs[i], p.n_calls, (int)out.n, out.v);
        if (p.n_calls) {
            CHECK(!strcmp(p.calls[0].name, "get_weather"));
            CHECKF(!strcmp(p.calls[0].arguments, "{\"city\":\"Rome\",\"days\":2}"), "%s: %s", fs[i],
                   p.calls[0].arguments);
        }
        chat_parsed_free(&p);
        tok_bytes_free(&out);
        json_decref(msgs);
    }
}

T_SUITE(chat) {
    T_ADD(test_chat_golden_templates);
    T_ADD(test_chat_detect);
    T_ADD(test_chat_render_errors);
    T_ADD(test_chat_json_dump);
    T_ADD(test_chat_parse_glm);
    T_ADD(test_chat_parse_others);
    T_ADD(test_chat_parse_malformed);
    T_ADD(test_chat_parse_render_roundtrip);
}
