/* chat_glm5.c — GLM-4.7 / GLM-5.x: the renderer (the GLM-4.7-Flash template)
 * and the parser of its tool calls.
 *
 *   [gMASK]<sop><|system|>...<|user|>...<|assistant|><think>...</think>answer
 *   <tool_call>NAME<arg_key>k</arg_key><arg_value>v</arg_value>...</tool_call>
 *   <|observation|><tool_response>...</tool_response>
 *
 * The reasoning of assistant turns before the last user message is dropped
 * (an empty "</think>" stands in for it), as the template does. String
 * argument values are written raw, others as JSON; the parser reads them
 * back by the same rule, with the tool's schema deciding for text that would
 * also parse as JSON.
 */
#include <stdlib.h>

#include "text/chat_internal.h"

/* ===== Rendering ===== */

static const char k_tools_head[] =
    "<|system|>\n# Tools\n\nYou may call one or more functions to assist with the user "
    "query.\n\nYou are provided with function signatures within <tools></tools> XML "
    "tags:\n<tools>\n";
static const char k_tools_tail[] =
    "</tools>\n\nFor each function call, output the function name and arguments within "
    "the following XML format:\n<tool_call>{function-name}<arg_key>{arg-key-1}</arg_key>"
    "<arg_value>{arg-value-1}</arg_value><arg_key>{arg-key-2}</arg_key><arg_value>"
    "{arg-value-2}</arg_value>...</tool_call>";

/* The system block that lists the tools, one JSON line each. 0 or -1 (oom). */
static int put_tools(chat_out *o, const json_t *tools) {
    if (put_str(o, k_tools_head)) return -1;
    size_t i;
    json_t *t;
    json_array_foreach(tools, i, t) {
        if (put_json(o, t) || put(o, "\n", 1)) return -1;
    }
    return put_str(o, k_tools_tail);
}

/* One <tool_call>: string values raw, others as JSON. 0, or -1 with err set. */
static int put_tool_call(chat_out *o, const json_t *tc, pt_err *err) {
    const json_t *fn = chat_call_fn(tc);
    json_t *owned;
    json_t *args = chat_call_args(fn, &owned, err);
    if (!args) return -1;
    int bad = put_str(o, "<tool_call>") ||
              put_text_str(o, json_string_value(json_object_get(fn, "name")));
    const char *key;
    json_t *v;
    json_object_foreach(args, key, v) {
        bad = bad || put_str(o, "<arg_key>") || put_text_str(o, key) ||
              put_str(o, "</arg_key><arg_value>") ||
              (json_is_string(v) ? put_jstr(o, v) : put_json(o, v)) || put_str(o, "</arg_value>");
    }
    bad = bad || put_str(o, "</tool_call>");
    json_decref(owned);
    return bad ? pt_errf(err, "chat: out of memory") : 0;
}

/* An assistant turn: reasoning (kept only after the last user message), the
 * stripped answer, the tool calls. 0, or -1 with err set. */
static int put_assistant(chat_out *o, const json_t *m, int after_last_user, tok_bytes *tmp,
                         pt_err *err) {
    sv c = chat_content_text(json_object_get(m, "content"), tmp), reasoning = {"", 0};
    json_t *rj = json_object_get(m, "reasoning_content");
    if (json_is_string(rj))
        reasoning = (sv){json_string_value(rj), json_string_length(rj)};
    else
        chat_split_think(&c, &reasoning);
    if (put_str(o, "<|assistant|>")) goto oom;
    if (after_last_user && reasoning.n) {
        if (put_str(o, "<think>") || put_sv(o, sv_strip(reasoning)) || put_str(o, "</think>"))
            goto oom;
    } else if (put_str(o, "</think>"))
        goto oom;
    if (put_sv(o, sv_strip(c))) goto oom;
    json_t *tcs = json_object_get(m, "tool_calls");
    size_t k;
    json_t *tc;
    if (json_is_array(tcs)) json_array_foreach(tcs, k, tc) {
            if (put_tool_call(o, tc, err)) return -1;
        }
    return 0;
oom:
    return pt_errf(err, "chat: out of memory");
}

/* A tool message: a string joins the previous tool message's observation
 * block; a list of results opens its own. 0 or -1 (oom). */
static int put_tool(chat_out *o, const json_t *msgs, size_t i) {
    json_t *c = json_object_get(json_array_get(msgs, i), "content");
    if (json_is_string(c)) {
        if (i == 0 || strcmp(chat_role(json_array_get(msgs, i - 1)), "tool"))
            if (put_str(o, "<|observation|>")) return -1;
        return put_str(o, "<tool_response>") || put_jstr(o, c) || put_str(o, "</tool_response>");
    }
    if (put_str(o, "<|observation|>")) return -1;
    size_t k;
    json_t *tr;
    if (json_is_array(c)) json_array_foreach(c, k, tr) {
            json_t *out = json_object_get(tr, "output");
            const json_t *x = out ? out : tr;
            if (put_str(o, "\n<tool_response>") ||
                (json_is_string(x) ? put_jstr(o, x) : put_json(o, x)) ||
                put_str(o, "</tool_response>"))
                return -1;
        }
    return 0;
}

int chat_render_glm5(const json_t *msgs, const json_t *tools, int add_gen, int think, chat_out *o,
                     pt_err *err) {
    tok_bytes tmp = {0};
    int rc = -1;
    if (put_str(o, "[gMASK]<sop>")) goto oom;
    if (chat_has_tools(tools) && put_tools(o, tools)) goto oom;
    long last_user = -1;
    size_t i;
    json_t *m;
    json_array_foreach(msgs, i, m) if (!strcmp(chat_role(m), "user")) last_user = (long)i;
    json_array_foreach(msgs, i, m) {
        const char *r = chat_role(m);
        if (!strcmp(r, "user")) {
            sv c = chat_content_text(json_object_get(m, "content"), &tmp);
            if (put_str(o, "<|user|>") || put_sv(o, c)) goto oom;
        } else if (!strcmp(r, "assistant")) {
            if (put_assistant(o, m, (long)i > last_user, &tmp, err)) goto fail;
        } else if (!strcmp(r, "tool")) {
            if (put_tool(o, msgs, i)) goto oom;
        } else if (!strcmp(r, "system")) {
            sv c = chat_content_text(json_object_get(m, "content"), &tmp);
            if (put_str(o, "<|system|>") || put_sv(o, c)) goto oom;
        }
    }
    if (add_gen && (put_str(o, "<|assistant|>") || put_str(o, think ? "<think>" : "</think>")))
        goto oom;
    rc = 0;
    goto fail;
oom:
    pt_errf(err, "chat: out of memory");
fail:
    tok_bytes_free(&tmp);
    return rc;
}

/* ===== Parsing ===== */

/* The declared JSON type of a tool's parameter ("string", ...) or NULL. */
static const char *param_type(const json_t *tools, sv fname, const char *key) {
    size_t i;
    json_t *t;
    if (!json_is_array(tools)) return NULL;
    json_array_foreach(tools, i, t) {
        const json_t *fn = chat_call_fn(t);
        const char *n = json_string_value(json_object_get(fn, "name"));
        if (!n || strlen(n) != fname.n || memcmp(n, fname.p, fname.n)) continue;
        json_t *p =
            json_object_get(json_object_get(json_object_get(fn, "parameters"), "properties"), key);
        return json_string_value(json_object_get(p, "type"));
    }
    return NULL;
}

/* GLM: NAME<arg_key>k</arg_key><arg_value>v</arg_value>... (the inside of <tool_call>). */
static json_t *parse_call(sv body, const json_t *tools, sv *name, char **name_owned,
                          const char **why) {
    (void)name_owned;
    const char *k0 = sv_find(body, "<arg_key>");
    *name = sv_strip((sv){body.p, k0 ? (size_t)(k0 - body.p) : body.n});
    if (!name->n || sv_find(*name, "<") || sv_find(*name, "\n")) {
        *why = "missing or invalid function name";
        return NULL;
    }
    json_t *args = json_object();
    const char *p = k0, *end = body.p + body.n;
    while (args && p) {
        sv rest = {p, (size_t)(end - p)};
        if (!sv_strip(rest).n) break;
        const char *ke = sv_find(rest, "</arg_key>");
        if (rest.n < 9 || memcmp(p, "<arg_key>", 9) || !ke) {
            *why = "expected <arg_key>...</arg_key>";
            goto bad;
        }
        sv key = {p + 9, (size_t)(ke - (p + 9))};
        sv r2 = sv_strip_chars((sv){ke + 10, (size_t)(end - (ke + 10))}, 1, 0, 0);
        const char *ve = sv_find(r2, "</arg_value>");
        if (r2.n < 11 || memcmp(r2.p, "<arg_value>", 11) || !ve) {
            *why = "expected <arg_value>...</arg_value>";
            goto bad;
        }
        sv val = {r2.p + 11, (size_t)(ve - (r2.p + 11))};
        char *kz = chat_sv_dup(key);
        if (!kz) goto bad;
        const char *ty = param_type(tools, *name, kz);
        json_t *v = NULL;
        if (!ty || strcmp(ty, "string")) v = json_loadb(val.p, val.n, JSON_DECODE_ANY, NULL);
        if (!v) v = json_stringn_nocheck(val.p, val.n);
        json_object_set_new(args, kz, v);
        free(kz);
        p = ve + 12;
        const char *np = sv_find((sv){p, (size_t)(end - p)}, "<arg_key>");
        if (!np) {
            if (sv_strip((sv){p, (size_t)(end - p)}).n) {
                *why = "stray text after the arguments";
                goto bad;
            }
            break;
        }
        p = np;
    }
    return args;
bad:
    json_decref(args);
    return NULL;
}

static const char *const k_markup[] = {"<arg_key>", "</arg_key>", "<arg_value>", "</arg_value>",
                                       NULL};

const chat_syntax chat_glm5_syntax = {
    .think_open = "<think>",
    .think_close = "</think>",
    .call_open = "<tool_call>",
    .call_close = "</tool_call>",
    .parse_call = parse_call,
    .markup = k_markup,
};
