/* test_fuzzfound.c — inputs the fuzz targets (tests/fuzz, `make fuzz`) found
 * to break a contract, kept as regression tests beside the seed corpora.
 */
#include <jansson.h>
#include <string.h>

#include "test.h"
#include "text/chat.h"

/* fuzz_chat_parse: a GLM-5 or Gemma 4 tool call whose argument value is not
 * UTF-8 (kept as a string because it is not JSON) made chat_parse fail with
 * "out of memory" (json_dumps refuses such a string), which `petrel serve`
 * turned into a failed request. The call is now malformed and stays in the
 * content as text, like any other malformed call. */
static void fuzzfound_chat_parse_non_utf8_arguments(void) {
    static const struct {
        const char *fmt;
        const char *text;
    } cases[] = {
        {"glm-5", "ok<tool_call>f<arg_key>x</arg_key><arg_value>[2\x98</arg_value></tool_call>"},
        {"gemma-4", "ok<|tool_call>call:f{a:\xff\xfe}<tool_call|>"},
        {"glm-5", "</think>Sure.<tk>Sure.<tool_call>get_weather<><tool_call>b<arg_key>x</arg_key>"
                  "<arg_value>[2ey>\x98"
                  "ays</arg_key><arg_value>1</arg_value></tool_call>"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        chat_parsed p;
        pt_err err = {{0}};
        int rc = chat_parse(chat_fmt_find(cases[i].fmt), cases[i].text, strlen(cases[i].text), 0,
                            NULL, &p, &err);
        CHECKF(rc == 0, "case %zu: %s", i, err.msg);
        if (rc) continue;
        CHECKF(p.n_calls == 0 && p.n_bad >= 1, "case %zu: %d calls, %d bad", i, p.n_calls, p.n_bad);
        CHECK_STR_CONTAINS(p.content, "tool_call");
        if (i < 2) CHECK_STR_CONTAINS(p.bad, "not valid UTF-8");
        chat_parsed_free(&p);
    }
    /* valid UTF-8 in the same place still makes a call */
    chat_parsed p;
    pt_err err = {{0}};
    const char *ok =
        "<tool_call>f<arg_key>x</arg_key><arg_value>caf\xc3\xa9</arg_value></tool_call>";
    CHECK(chat_parse(chat_fmt_find("glm-5"), ok, strlen(ok), 0, NULL, &p, &err) == 0);
    CHECK(p.n_calls == 1 && !strcmp(p.calls[0].arguments, "{\"x\":\"caf\xc3\xa9\"}"));
    chat_parsed_free(&p);
}

T_SUITE(fuzzfound) {
    T_ADD(fuzzfound_chat_parse_non_utf8_arguments);
}
