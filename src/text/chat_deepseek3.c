/* chat_deepseek3.c — DeepSeek-V3.1: the renderer and the parser of its tool
 * calls.
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

#include "text/chat_internal.h"

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
/* what the template writes after <｜Assistant｜> when not thinking */
#define DS_NOTHINK "<think></think>"

/* ===== Rendering ===== */

/* The text (c) and the tool calls of an assistant turn, then its end. 0 or -1. */
static int put_tool_calls(chat_out *o, const json_t *tcs, sv c) {
    size_t k;
    json_t *tc;
    json_array_foreach(tcs, k, tc) {
        const json_t *fn = chat_call_fn(tc);
        json_t *a = json_object_get(fn, "arguments");
        if (k == 0 && (put_sv(o, c) || put_str(o, DS_CALLS_BEGIN))) return -1;
        if (put_str(o, DS_CALL_BEGIN) ||
            put_text_str(o, json_string_value(json_object_get(fn, "name"))) || put_str(o, DS_SEP) ||
            (json_is_string(a) ? put_jstr(o, a) : (a ? put_json(o, a) : put_str(o, "{}"))) ||
            put_str(o, DS_CALL_END))
            return -1;
    }
    return put_str(o, DS_CALLS_END) || put_str(o, DS_EOS);
}

int chat_render_deepseek3(const json_t *msgs, int add_gen, int think, chat_out *o, pt_err *err) {
    tok_bytes tmp = {0};
    size_t i;
    json_t *m;
    int first_sp = 1, is_tool = 0, is_last_user = 0;
    if (put_str(o, DS_BOS)) goto oom;
    json_array_foreach(msgs, i, m) {
        if (strcmp(chat_role(m), "system")) continue;
        if ((!first_sp && put_str(o, "\n\n")) ||
            put_sv(o, chat_content_text(json_object_get(m, "content"), &tmp)))
            goto oom;
        first_sp = 0;
    }
    json_array_foreach(msgs, i, m) {
        const char *r = chat_role(m);
        sv c = chat_content_text(json_object_get(m, "content"), &tmp);
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
    tok_bytes_free(&tmp);
    return 0;
oom:
    tok_bytes_free(&tmp);
    return pt_errf(err, "chat: out of memory");
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

/* The calls_begin / calls_end wrappers around the calls carry nothing: drop
 * every one of them from the content. */
static int tidy(sv *content, tok_bytes *scratch) {
    const char *q = content->p, *end = content->p + content->n;
    int oom = 0;
    while (q < end && !oom) {
        sv r = {q, (size_t)(end - q)};
        const char *a = sv_find(r, DS_CALLS_BEGIN), *b = sv_find(r, DS_CALLS_END);
        const char *x = a && (!b || a < b) ? a : b;
        size_t xl = x == a ? strlen(DS_CALLS_BEGIN) : strlen(DS_CALLS_END);
        if (!x) {
            oom |= bput(scratch, q, r.n);
            break;
        }
        oom |= bput(scratch, q, (size_t)(x - q));
        q = x + xl;
    }
    *content = (sv){scratch->v ? scratch->v : "", scratch->n};
    return oom ? -1 : 0;
}

static const char *const k_markup[] = {DS_CALLS_BEGIN, DS_CALLS_END, DS_SEP, NULL};

const chat_syntax chat_deepseek3_syntax = {
    .think_open = "<think>",
    .think_close = "</think>",
    .call_open = DS_CALL_BEGIN,
    .call_close = DS_CALL_END,
    .parse_call = parse_call,
    .tidy = tidy,
    .markup = k_markup,
};
