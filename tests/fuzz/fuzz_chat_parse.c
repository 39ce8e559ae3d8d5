/* fuzz_chat_parse.c — libFuzzer target for what the model writes back: the
 * chat output parser (chat_parse: reasoning, content and tool calls) of every
 * chat format on arbitrary bytes, and the server's streaming splitter
 * (fe_split) fed the same bytes in pieces. Built and run by `make fuzz` /
 * `make fuzz-ci` (clang, ASan, UBSan).
 *
 * Input: byte 0 picks the format (bits 0-2, modulo one more than the number
 * of formats: none, then the table's formats in order), whether the prompt
 * opened a reasoning block (bit 3), whether tools were offered (bit 4) and the
 * streaming piece size (bits 5-7); the rest is the generated text. The parser
 * never fails on content: -1 is a bug, as is any crash, overread or leak;
 * every string it returns must be NUL-terminated and every tool call's
 * arguments a JSON object (which may hold \u0000: the model wrote it).
 */
#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "server/oai.h"
#include "text/chat.h"

static const char TOOLS[] =
    "[{\"type\":\"function\",\"function\":{\"name\":\"get_weather\",\"description\":\"w\","
    "\"parameters\":{\"type\":\"object\",\"properties\":{\"city\":{\"type\":\"string\"},"
    "\"days\":{\"type\":\"integer\"},\"metric\":{\"type\":\"boolean\"}},"
    "\"required\":[\"city\"]}}}]";

static json_t *tools;

static int on_delta(void *ud, int kind, const char *s, size_t n) {
    (void)ud, (void)kind;
    volatile char sink = 0;
    for (size_t i = 0; i < n; i++)
        sink ^= s[i];
    (void)sink;
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    if (!tools) tools = json_loads(TOOLS, 0, NULL);
    int n_fmt = 0;
    while (chat_fmt_at(n_fmt))
        n_fmt++;
    const int pick = (data[0] & 7) % (n_fmt + 1); /* 0: none, else the table's format pick-1 */
    const chat_fmt *f = pick ? chat_fmt_at(pick - 1) : NULL;
    const int in_reasoning = (data[0] >> 3) & 1, with_tools = (data[0] >> 4) & 1;
    const size_t piece = 1 + (size_t)(data[0] >> 5) * 3;
    const size_t n = size - 1;
    char *text = malloc(n ? n : 1); /* exact size: ASan catches reads past the end */
    if (!text) return 0;
    memcpy(text, data + 1, n);

    chat_parsed p;
    pt_err err = {{0}};
    if (chat_parse(f, text, n, in_reasoning, with_tools ? tools : NULL, &p, &err) != 0) abort();
    if (strlen(p.content) > n || strlen(p.reasoning) > n) abort();
    for (int i = 0; i < p.n_calls; i++) {
        json_t *args = json_loads(p.calls[i].arguments, JSON_ALLOW_NUL, NULL);
        if (!p.calls[i].name || !json_is_object(args)) abort();
        json_decref(args);
    }
    chat_parsed_free(&p);

    fe_split s;
    fe_split_init(&s, chat_fmt_name(f), in_reasoning, with_tools, 0);
    for (size_t at = 0; at < n; at += piece)
        if (fe_split_push(&s, text + at, PT_MIN(piece, n - at), 0, on_delta, NULL)) break;
    fe_split_push(&s, "", 0, 1, on_delta, NULL);
    fe_split_free(&s);
    free(text);
    return 0;
}
