/* chat_deepseek3.c — the deepseek-v3 chat format (DeepSeek-V3.1): the
 * renderer, the parser of its tool calls and their grammar.
 *
 *   <｜begin▁of▁sentence｜>system<｜User｜>...<｜Assistant｜><think></think>answer<｜end▁of▁sentence｜>
 *   <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>NAME<｜tool▁sep｜>{args}<｜tool▁call▁end｜>...<｜tool▁calls▁end｜>
 *   <｜tool▁output▁begin｜>...<｜tool▁output▁end｜>
 *
 * The template ignores tool definitions (the model was trained with them in
 * the system text, which the caller writes). System messages are joined at
 * the top; an assistant turn's "...</think>" prefix is dropped unless it
 * follows a tool output.
 */
#include <stdlib.h>

#include "text/chat_fmt.h"
#include "text/grammar.h"

#define DS_BOS                                                                                     \
    "<\xef\xbd\x9c"                                                                                \
    "begin\xe2\x96\x81of\xe2\x96\x81sentence\xef\xbd\x9c>"
#define DS_EOS                                                                                     \
    "<\xef\xbd\x9c"                                                                                \
    "end\xe2\x96\x81of\xe2\x96\x81sentence\xef\xbd\x9c>"
#define DS_USER "<\xef\xbd\x9cUser\xef\xbd\x9c>"
#define DS_CALLS_BEGIN                                                                             \
    "<\xef\xbd\x9ctool\xe2\x96\x81"                                                                \
    "calls\xe2\x96\x81"                                                                            \
    "begin\xef\xbd\x9c>"
#define DS_CALLS_END                                                                               \
    "<\xef\xbd\x9ctool\xe2\x96\x81"                                                                \
    "calls\xe2\x96\x81"                                                                            \
    "end\xef\xbd\x9c>"
#define DS_CALL_BEGIN                                                                              \
    "<\xef\xbd\x9ctool\xe2\x96\x81"                                                                \
    "call\xe2\x96\x81"                                                                             \
    "begin\xef\xbd\x9c>"
#define DS_CALL_END                                                                                \
    "<\xef\xbd\x9ctool\xe2\x96\x81"                                                                \
    "call\xe2\x96\x81"                                                                             \
    "end\xef\xbd\x9c>"
#define DS_SEP "<\xef\xbd\x9ctool\xe2\x96\x81sep\xef\xbd\x9c>"
#define DS_OUT_BEGIN                                                                               \
    "<\xef\xbd\x9ctool\xe2\x96\x81output\xe2\x96\x81"                                              \
    "begin\xef\xbd\x9c>"
#define DS_OUT_END                                                                                 \
    "<\xef\xbd\x9ctool\xe2\x96\x81output\xe2\x96\x81"                                              \
    "end\xef\xbd\x9c>"
#define DS_ASSISTANT                                                                               \
    "<\xef\xbd\x9c"                                                                                \
    "Assistant\xef\xbd\x9c>"
/* what the template writes after <｜Assistant｜> when not thinking */
#define DS_NOTHINK "<think></think>"

/* ===== Rendering ===== */

/* The text (c) and the tool calls of an assistant turn, then its end. 0 or -1. */
static int put_tool_calls(chat_out *o, const json_t *tcs, sv c) {
    size_t k;
    json_t *tc;
    json_array_foreach(tcs, k, tc) {
        const json_t *fn = chat_call_fn(tc);
        if (k == 0 && (put_sv(o, c) || put_str(o, DS_CALLS_BEGIN))) return -1;
        if (put_str(o, DS_CALL_BEGIN) || put_text_str(o, chat_fn_name(fn)) || put_str(o, DS_SEP) ||
            chat_put_args(o, json_object_get(fn, "arguments")) || put_str(o, DS_CALL_END))
            return -1;
    }
    return put_str(o, DS_CALLS_END) || put_str(o, DS_EOS);
}

/* The template ignores the tool definitions. */
static int render(const json_t *msgs, const json_t *tools, int add_gen, int think, chat_out *o,
                  pt_err *err) {
    (void)tools;
    size_t i;
    json_t *m;
    int first_sp = 1, is_tool = 0, is_last_user = 0;
    if (put_str(o, DS_BOS)) goto oom;
    json_array_foreach(msgs, i, m) {
        if (strcmp(chat_role(m), "system")) continue;
        if ((!first_sp && put_str(o, "\n\n")) ||
            put_sv(o, chat_content_text(json_object_get(m, "content"), o->tmp)))
            goto oom;
        first_sp = 0;
    }
    json_array_foreach(msgs, i, m) {
        const char *r = chat_role(m);
        sv c = chat_content_text(json_object_get(m, "content"), o->tmp);
        json_t *tcs = json_object_get(m, "tool_calls");
        if (!strcmp(r, "user")) {
            is_tool = 0;
            is_last_user = 1;
            if (put_str(o, DS_USER) || put_sv(o, c)) goto oom;
        } else if (!strcmp(r, "assistant") && tcs && !json_is_null(tcs)) {
            if (is_last_user && (put_str(o, DS_ASSISTANT) || put_str(o, DS_NOTHINK))) goto oom;
            is_last_user = 0;
            is_tool = 0;
            if (put_tool_calls(o, tcs, c)) goto oom;
        } else if (!strcmp(r, "assistant")) {
            if (is_last_user && (put_str(o, DS_ASSISTANT) || put_str(o, DS_NOTHINK))) goto oom;
            is_last_user = 0;
            if (!is_tool) {
                const char *e = sv_find(c, "</think>");
                if (e) c = sv_from(c, e + 8);
            }
            is_tool = 0;
            if (put_sv(o, c) || put_str(o, DS_EOS)) goto oom;
        } else if (!strcmp(r, "tool")) {
            is_last_user = 0;
            is_tool = 1;
            if (put_str(o, DS_OUT_BEGIN) || put_sv(o, c) || put_str(o, DS_OUT_END)) goto oom;
        }
    }
    if (add_gen && is_last_user && !is_tool)
        if (put_str(o, DS_ASSISTANT) || put_str(o, think ? "<think>" : DS_NOTHINK)) goto oom;
    return 0;
oom:
    return chat_oom(err);
}

/* ===== Parsing ===== */

/* NAME<｜tool▁sep｜>ARGS (inside call_begin/end); ARGS a JSON object, bare or
 * in V3's ```json fence. */
static json_t *parse_call(sv body, const json_t *tools, sv *name, char **name_owned,
                          const char **why) {
    (void)tools, (void)name_owned;
    const char *sep = sv_find(body, DS_SEP);
    if (!sep) {
        *why = "no tool separator";
        return NULL;
    }
    *name = (sv){body.p, (size_t)(sep - body.p)};
    sv a = sv_strip(sv_from(body, sep + strlen(DS_SEP)));
    if (a.n >= 7 && !memcmp(a.p, "```json", 7)) { /* V3's fenced form */
        a.p += 7, a.n -= 7;
        a = sv_strip(a);
        if (a.n >= 3 && !memcmp(a.p + a.n - 3, "```", 3)) a.n -= 3;
    }
    json_t *args = json_loadb(a.p, a.n, 0, NULL);
    if (!json_is_object(args)) {
        json_decref(args);
        *why = "arguments are not a JSON object";
        return NULL;
    }
    if (!sv_strip(*name).n) {
        json_decref(args);
        *why = "missing function name";
        return NULL;
    }
    return args;
}

/* ===== The grammar of a call ===== */

/* PREcall ::= <｜tool▁call▁begin｜>NAME<｜tool▁sep｜>ARGS<｜tool▁call▁end｜>, ARGS in JSON
 * whose strings spell no '<'. */
static int call_grammar(tok_bytes *b, const char *pre, const char *name, const json_t *params,
                        pt_err *err) {
    return chat_gbnf_call(b, pre, name, params, GRAM_JSON_TOOL, err) ||
                   chat_gbnf_lit(b, DS_CALL_BEGIN, err) || chat_gbnf(b, " ", err) ||
                   chat_gbnf_lit(b, name, err) || chat_gbnf(b, " ", err) ||
                   chat_gbnf_lit(b, DS_SEP, err) || chat_gbnf(b, " ", err) ||
                   chat_gbnf_args_root(b, pre, err) || chat_gbnf_lit(b, DS_CALL_END, err) ||
                   chat_gbnf(b, "\n", err)
               ? -1
               : 0;
}

/* ===== The format ===== */

static const char *const k_markup[] = {DS_SEP, NULL};

const chat_fmt chat_deepseek3_format = {
    .name = "deepseek-v3",
    .detect = {.tmpl = CHAT_LIST(DS_ASSISTANT),
               .arch = CHAT_LIST("deepseek2", "deepseek3"),
               .pre = CHAT_LIST("deepseek-v3")},
    .prompt_opens_reasoning = 1, /* thinking on: "<think>" ends the generation prompt */
    .render = render,
    .syntax = {.think_open = "<think>",
               .think_close = "</think>",
               .call_open = DS_CALL_BEGIN,
               .call_close = DS_CALL_END,
               .calls_open = DS_CALLS_BEGIN,
               .calls_close = DS_CALLS_END,
               .parse_call = parse_call,
               .markup = k_markup},
    .call_grammar = call_grammar,
};
