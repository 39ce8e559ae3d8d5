/* chat_qwen3.c — the qwen3 chat format (ChatML with <think>): the renderer,
 * the parser of its JSON tool calls and their grammar.
 *
 *   <|im_start|>system\n...<|im_end|>\n<|im_start|>user\n...<|im_end|>\n
 *   <|im_start|>assistant\n<think>\n...\n</think>\n\nanswer
 *   <tool_call>\n{"name": ..., "arguments": {...}}\n</tool_call><|im_end|>\n
 *
 * Tool results travel as a user turn of <tool_response> blocks. Reasoning is
 * kept only for assistant turns after the last real user query (a user
 * message that is itself a wrapped tool response does not count).
 */
#include <stdlib.h>

#include "text/chat_fmt.h"
#include "text/grammar.h"

/* ===== Rendering ===== */

static const char k_tools_head[] =
    "# Tools\n\nYou may call one or more functions to assist with the user query.\n\nYou are "
    "provided with function signatures within <tools></tools> XML tags:\n<tools>";
static const char k_tools_tail[] =
    "\n</tools>\n\nFor each function call, return a json object with function name and "
    "arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": "
    "<function-name>, \"arguments\": <args-json-object>}\n</tool_call><|im_end|>\n";

/* The system turn: the first message's text when it is a system message, then
 * the tools when there are any. 0 or -1 (oom). */
static int put_system(chat_out *o, const json_t *first, int first_sys, const json_t *tools) {
    if (chat_has_tools(tools)) {
        if (put_str(o, "<|im_start|>system\n")) return -1;
        if (first_sys) {
            json_t *c = json_object_get(first, "content");
            if (put_sv(o, chat_content_text(c, o->tmp)) || put_str(o, "\n\n")) return -1;
        }
        if (put_str(o, k_tools_head)) return -1;
        size_t i;
        json_t *t;
        json_array_foreach(tools, i, t) {
            if (put(o, "\n", 1) || put_json(o, t)) return -1;
        }
        return put_str(o, k_tools_tail);
    }
    if (first_sys)
        return put_str(o, "<|im_start|>system\n") ||
               put_sv(o, chat_content_text(json_object_get(first, "content"), o->tmp)) ||
               put_str(o, "<|im_end|>\n");
    return 0;
}

/* Index of the last real user query: a user message that is not a tool
 * response wrapped in <tool_response>...</tool_response>. */
static size_t last_query(const json_t *msgs, size_t n_msgs) {
    for (size_t k = n_msgs; k-- > 0;) {
        json_t *mk = json_array_get(msgs, k);
        json_t *c = json_object_get(mk, "content");
        if (!strcmp(chat_role(mk), "user") && json_is_string(c)) {
            sv s = {json_string_value(c), json_string_length(c)};
            int is_resp = s.n >= 15 + 16 && !memcmp(s.p, "<tool_response>", 15) &&
                          !memcmp(s.p + s.n - 16, "</tool_response>", 16);
            if (!is_resp) return k;
        }
    }
    return n_msgs ? n_msgs - 1 : 0;
}

/* One <tool_call> block; arguments given as a string are written as they are. */
static int put_tool_call(chat_out *o, const json_t *tc) {
    const json_t *fn = chat_call_fn(tc);
    return put_str(o, "<tool_call>\n{\"name\": \"") || put_text_str(o, chat_fn_name(fn)) ||
           put_str(o, "\", \"arguments\": ") ||
           chat_put_args(o, json_object_get(fn, "arguments")) || put_str(o, "}\n</tool_call>");
}

/* An assistant turn (message i of n_msgs; c its string content). 0 or -1 (oom). */
static int put_assistant(chat_out *o, const json_t *m, sv c, size_t i, size_t n_msgs,
                         size_t query) {
    sv reasoning = chat_assistant_reasoning(m, &c);
    if (i > query && (i == n_msgs - 1 || reasoning.n)) {
        if (put_str(o, "<|im_start|>assistant\n<think>\n") ||
            put_sv(o, sv_strip_chars(reasoning, 1, 1, '\n')) || put_str(o, "\n</think>\n\n") ||
            put_sv(o, sv_strip_chars(c, 1, 0, '\n')))
            return -1;
    } else if (put_str(o, "<|im_start|>assistant\n") || put_sv(o, c))
        return -1;
    json_t *tcs = json_object_get(m, "tool_calls");
    size_t k;
    json_t *tc;
    if (json_is_array(tcs)) json_array_foreach(tcs, k, tc) {
            if (((k > 0 || c.n) && put(o, "\n", 1)) || put_tool_call(o, tc)) return -1;
        }
    return put_str(o, "<|im_end|>\n");
}

/* A tool message: consecutive ones share one user turn. 0 or -1 (oom). */
static int put_tool(chat_out *o, const json_t *msgs, size_t i, sv c) {
    json_t *prev = i ? json_array_get(msgs, i - 1) : NULL, *next = json_array_get(msgs, i + 1);
    if ((!prev || strcmp(chat_role(prev), "tool")) && put_str(o, "<|im_start|>user")) return -1;
    if (put_str(o, "\n<tool_response>\n") || put_sv(o, c) || put_str(o, "\n</tool_response>"))
        return -1;
    if ((!next || strcmp(chat_role(next), "tool")) && put_str(o, "<|im_end|>\n")) return -1;
    return 0;
}

static int render(const json_t *msgs, const json_t *tools, int add_gen, int think, chat_out *o,
                  pt_err *err) {
    size_t n_msgs = json_array_size(msgs), i;
    json_t *m, *first = json_array_get(msgs, 0);
    int first_sys = first && !strcmp(chat_role(first), "system");
    if (put_system(o, first, first_sys, tools)) goto oom;
    size_t query = last_query(msgs, n_msgs);
    json_array_foreach(msgs, i, m) {
        const char *r = chat_role(m);
        json_t *cj = json_object_get(m, "content");
        sv c =
            json_is_string(cj) ? (sv){json_string_value(cj), json_string_length(cj)} : (sv){"", 0};
        if (!strcmp(r, "user") || (!strcmp(r, "system") && i != 0)) {
            if (put_str(o, "<|im_start|>") || put_str(o, r) || put(o, "\n", 1) || put_sv(o, c) ||
                put_str(o, "<|im_end|>\n"))
                goto oom;
        } else if (!strcmp(r, "assistant")) {
            if (put_assistant(o, m, c, i, n_msgs, query)) goto oom;
        } else if (!strcmp(r, "tool")) {
            if (put_tool(o, msgs, i, c)) goto oom;
        }
    }
    if (add_gen) {
        if (put_str(o, "<|im_start|>assistant\n")) goto oom;
        if (!think && put_str(o, "<think>\n\n</think>\n\n")) goto oom;
    }
    return 0;
oom:
    return chat_oom(err);
}

/* ===== Parsing ===== */

/* {"name": ..., "arguments": {...}}, arguments possibly a string holding the
 * object. */
static json_t *parse_call(sv body, const json_t *tools, sv *name, char **name_owned,
                          const char **why) {
    (void)tools;
    json_error_t je;
    json_t *j = json_loadb(body.p, body.n, 0, &je);
    if (!json_is_object(j)) {
        json_decref(j);
        *why = "not a JSON object";
        return NULL;
    }
    const char *n = json_string_value(json_object_get(j, "name"));
    json_t *a = json_object_get(j, "arguments");
    if (json_is_string(a))
        a = json_loads(json_string_value(a), 0, NULL);
    else if (a)
        json_incref(a);
    else
        a = json_object();
    if (!n || !json_is_object(a)) {
        json_decref(a);
        json_decref(j);
        *why = !n ? "no \"name\"" : "\"arguments\" is not an object";
        return NULL;
    }
    *name_owned = strdup(n);
    *name = sv_of(*name_owned);
    json_decref(j);
    return a;
}

/* ===== The grammar of a call ===== */

/* PREcall ::= <tool_call>\n{"name": "NAME", "arguments": ARGS}\n</tool_call>, ARGS in JSON
 * whose strings spell no '<'. */
static int call_grammar(tok_bytes *b, const char *pre, const char *name, const json_t *params,
                        pt_err *err) {
    json_t *js = json_string(name);
    char *jn = js ? json_dumps(js, JSON_ENCODE_ANY) : NULL; /* the name as a JSON string */
    json_decref(js);
    int rc = chat_gbnf_call(b, pre, name, params, GRAM_JSON_TOOL, err) ||
             chat_gbnf(b, "\"<tool_call>\\n{\\\"name\\\": \" ", err) ||
             (jn ? chat_gbnf_lit(b, jn, err) : pt_errf(err, "tool grammar: out of memory")) ||
             chat_gbnf(b, " \", \\\"arguments\\\": \" ", err) || chat_gbnf_args_root(b, pre, err) ||
             chat_gbnf(b, "\"}\\n</tool_call>\"\n", err);
    free(jn);
    return rc ? -1 : 0;
}

/* ===== The format ===== */

const chat_fmt chat_qwen3_format = {
    .name = "qwen3",
    .detect = {.tmpl = CHAT_LIST("<|im_start|>"),
               .arch = CHAT_LIST("qwen3*", "qwen2*"),
               .pre = CHAT_LIST("qwen*")},
    .default_thinking = 1, /* the model opens "<think>" itself */
    .render = render,
    .syntax = {.think_open = "<think>",
               .think_close = "</think>",
               .call_open = "<tool_call>",
               .call_close = "</tool_call>",
               .parse_call = parse_call},
    .call_grammar = call_grammar,
    .calls_sep = "\"\\n\" ", /* parallel calls one a line */
};
