/* chat_glm5.c — the glm-5 chat format (GLM-4.7 / GLM-5.x): the renderer (the
 * GLM-4.7-Flash template), the parser of its tool calls and their grammar.
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
#include <stdio.h>
#include <stdlib.h>

#include "text/chat_fmt.h"
#include "text/grammar.h"

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
    int bad = put_str(o, "<tool_call>") || put_text_str(o, chat_fn_name(fn));
    const char *key;
    json_t *v;
    json_object_foreach(args, key, v) {
        bad = bad || put_str(o, "<arg_key>") || put_text_str(o, key) ||
              put_str(o, "</arg_key><arg_value>") ||
              (json_is_string(v) ? put_jstr(o, v) : put_json(o, v)) || put_str(o, "</arg_value>");
    }
    bad = bad || put_str(o, "</tool_call>");
    json_decref(owned);
    return bad ? chat_oom(err) : 0;
}

/* An assistant turn: reasoning (kept only after the last user message), the
 * stripped answer, the tool calls. 0, or -1 with err set. */
static int put_assistant(chat_out *o, const json_t *m, int after_last_user, pt_err *err) {
    sv c = chat_content_text(json_object_get(m, "content"), o->tmp);
    sv reasoning = chat_assistant_reasoning(m, &c);
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
    return chat_oom(err);
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

static int render(const json_t *msgs, const json_t *tools, int add_gen, int think, chat_out *o,
                  pt_err *err) {
    if (put_str(o, "[gMASK]<sop>")) goto oom;
    if (chat_has_tools(tools) && put_tools(o, tools)) goto oom;
    long last_user = -1;
    size_t i;
    json_t *m;
    json_array_foreach(msgs, i, m) if (!strcmp(chat_role(m), "user")) last_user = (long)i;
    json_array_foreach(msgs, i, m) {
        const char *r = chat_role(m);
        if (!strcmp(r, "user")) {
            sv c = chat_content_text(json_object_get(m, "content"), o->tmp);
            if (put_str(o, "<|user|>") || put_sv(o, c)) goto oom;
        } else if (!strcmp(r, "assistant")) {
            if (put_assistant(o, m, (long)i > last_user, err)) return -1;
        } else if (!strcmp(r, "tool")) {
            if (put_tool(o, msgs, i)) goto oom;
        } else if (!strcmp(r, "system")) {
            sv c = chat_content_text(json_object_get(m, "content"), o->tmp);
            if (put_str(o, "<|system|>") || put_sv(o, c)) goto oom;
        }
    }
    if (add_gen && (put_str(o, "<|assistant|>") || put_str(o, think ? "<think>" : "</think>")))
        goto oom;
    return 0;
oom:
    return chat_oom(err);
}

/* ===== Parsing ===== */

/* The declared JSON type of a tool's parameter ("string", ...) or NULL. */
static const char *param_type(const json_t *tools, sv fname, const char *key) {
    size_t i;
    json_t *t;
    if (!json_is_array(tools)) return NULL;
    json_array_foreach(tools, i, t) {
        const json_t *fn = chat_call_fn(t);
        const char *n = chat_fn_name(fn);
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

/* ===== The grammar of a call ===== */

/* The rules of the parameters' values (into rules) and the <arg_key>/<arg_value> pairs that
 * use them (into seq): a pair per property, required ones always, the others optional, in the
 * schema's order. A string's value is raw text without '<' (what the parser keeps as a
 * string), any other value JSON. 0, or -1 with err. */
static int put_args_grammar(tok_bytes *rules, tok_bytes *seq, const char *pre, const json_t *params,
                            pt_err *err) {
    const json_t *props = json_object_get(params, "properties");
    const json_t *req = json_object_get(params, "required");
    const char *k;
    const json_t *v;
    size_t i = 0;
    int rc = 0;
    json_object_foreach((json_t *)props, k, v) {
        int is_req = 0;
        for (size_t r = 0; r < json_array_size(req); r++)
            is_req |= json_is_string(json_array_get(req, r)) &&
                      !strcmp(json_string_value(json_array_get(req, r)), k);
        char nm[200], line[320];
        snprintf(nm, sizeof nm, "%sp%zu-", pre, i);
        const char *ty = json_string_value(json_object_get(v, "type"));
        if (ty && !strcmp(ty, "string")) {
            const json_t *en = json_object_get(v, "enum");
            snprintf(line, sizeof line, "%sroot ::= ", nm);
            rc = rc || chat_gbnf(rules, line, err);
            if (json_is_array(en) && json_array_size(en)) {
                for (size_t e = 0; e < json_array_size(en) && !rc; e++) {
                    const char *s = json_string_value(json_array_get(en, e));
                    if (!s) {
                        rc = pt_errf(err, "tool grammar: a string enum lists a non-string");
                        break;
                    }
                    rc = (e && chat_gbnf(rules, " | ", err)) || chat_gbnf_lit(rules, s, err);
                }
                rc = rc || chat_gbnf(rules, "\n", err);
            } else {
                const json_t *mn = json_object_get(v, "minLength"),
                             *mx = json_object_get(v, "maxLength");
                char rep[64] = "*";
                if (json_is_integer(mx))
                    snprintf(rep, sizeof rep, "{%d,%d}",
                             json_is_integer(mn) ? (int)json_integer_value(mn) : 0,
                             (int)json_integer_value(mx));
                else if (json_is_integer(mn))
                    snprintf(rep, sizeof rep, "{%d,}", (int)json_integer_value(mn));
                snprintf(line, sizeof line, "[^<]%s\n", rep);
                rc = rc || chat_gbnf(rules, line, err);
            }
        } else
            rc = rc || gram_from_json_schema_value(v, GRAM_JSON, nm, rules, err);
        rc = rc || chat_gbnf(seq, is_req ? " " : " (", err) ||
             chat_gbnf(seq, "\"<arg_key>\" ", err) || chat_gbnf_lit(seq, k, err) ||
             chat_gbnf(seq, " \"</arg_key><arg_value>\" ", err);
        snprintf(line, sizeof line, "%sroot \"</arg_value>\"%s", nm, is_req ? "" : ")?");
        rc = rc || chat_gbnf(seq, line, err);
        i++;
    }
    return rc;
}

/* PREcall ::= "<tool_call>" NAME pairs "</tool_call>", then the values' rules. */
static int call_grammar(tok_bytes *b, const char *pre, const char *name, const json_t *params,
                        pt_err *err) {
    char line[160];
    snprintf(line, sizeof line, "%scall ::= ", pre);
    int rc = chat_gbnf(b, line, err) || chat_gbnf(b, "\"<tool_call>\" ", err) ||
             chat_gbnf_lit(b, name, err) || chat_gbnf(b, " ", err);
    snprintf(line, sizeof line, "%sargs", pre);
    tok_bytes rules = {0}, seq = {0};
    rc = rc || put_args_grammar(&rules, &seq, line, params, err);
    if (!rc && (tok_bytes_append(b, seq.v ? seq.v : "", seq.n) ||
                chat_gbnf(b, " \"</tool_call>\"\n", err) ||
                tok_bytes_append(b, rules.v ? rules.v : "", rules.n)))
        rc = pt_errf(err, "tool grammar: out of memory");
    tok_bytes_free(&rules);
    tok_bytes_free(&seq);
    return rc;
}

/* ===== The format ===== */

static const char *const k_markup[] = {"<arg_key>", "</arg_key>", "<arg_value>", "</arg_value>",
                                       NULL};

const chat_fmt chat_glm5_format = {
    .name = "glm-5",
    .detect = {.tmpl = CHAT_LIST("[gMASK]", "<|assistant|>"),
               .arch = CHAT_LIST("glm-dsa", "glm4*"),
               .pre = CHAT_LIST("glm4")},
    .default_thinking = 1,
    .prompt_opens_reasoning = 1, /* "<think>" ends the generation prompt */
    .render = render,
    .syntax = {.think_open = "<think>",
               .think_close = "</think>",
               .call_open = "<tool_call>",
               .call_close = "</tool_call>",
               .parse_call = parse_call,
               .markup = k_markup},
    .call_grammar = call_grammar,
};
