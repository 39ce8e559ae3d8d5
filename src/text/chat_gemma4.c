/* chat_gemma4.c — the gemma-4 chat format (Gemma 4): the renderer, the parser
 * of its tool calls and their grammar.
 *
 *   <bos><|turn>system\n<|think|>\n...<|tool>declaration:NAME{...}<tool|><turn|>\n
 *   <|turn>user\n...<turn|>\n<|turn>model\n<|channel>thought\n...<channel|>answer
 *   <|tool_call>call:NAME{key:value,...}<tool_call|><|tool_response>response:NAME{...}<tool_response|>
 *
 * Gemma writes its own value syntax, not JSON: strings quoted by the <|"|>
 * token, object keys in sorted order (Jinja's dictsort), schema types upper
 * case, Python's True/False/None for scalars printed with {{ }}. The renderer
 * follows the template's macros (format_parameters, format_argument,
 * format_function_declaration, strip_thinking) one helper each; the parser
 * reads the value syntax back into JSON.
 */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <strings.h>

#include "text/chat_fmt.h"
#include "text/grammar.h"

#define GQ "<|\"|>" /* Gemma's string-quote token */

/* ===== Values ===== */

/* Object keys in sorted order (Jinja's dictsort). Returns a malloc'd array of
 * *n keys pointing into obj, or NULL (out of memory). */
static const char **sorted_keys(const json_t *obj, size_t *n) {
    *n = json_object_size(obj);
    const char **k = malloc((*n ? *n : 1) * sizeof *k);
    if (!k) return NULL;
    size_t i = 0;
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)obj, key, v) k[i++] = key;
    for (size_t a = 1; a < *n; a++) /* insertion sort: tool schemas are small */
        for (size_t b = a; b > 0 && strcmp(k[b - 1], k[b]) > 0; b--) {
            const char *t = k[b];
            k[b] = k[b - 1];
            k[b - 1] = t;
        }
    return k;
}

/* The template's `{{ x }}` of a scalar: Python str() (True/False/None). */
static int put_scalar(chat_out *o, const json_t *v) {
    char buf[32];
    switch (json_typeof(v)) {
    case JSON_STRING: return put_jstr(o, v);
    case JSON_INTEGER:
        snprintf(buf, sizeof buf, "%lld", (long long)json_integer_value(v));
        return put_text_str(o, buf);
    case JSON_REAL: {
        size_t from = o->b->n;
        return chat_json_real(json_real_value(v), o->b) || chat_mark(o, from);
    }
    case JSON_TRUE: return put_text_str(o, "True");
    case JSON_FALSE: return put_text_str(o, "False");
    case JSON_NULL: return put_text_str(o, "None");
    default: return put_json(o, v);
    }
}

static int put_arg(chat_out *o, const json_t *v, int escape_keys);

/* key:value,key:value... of an object in sorted key order, keys quoted when
 * escape_keys is set. 0 or -1 (oom). */
static int put_sorted_pairs(chat_out *o, const json_t *obj, int escape_keys) {
    size_t n;
    const char **k = sorted_keys(obj, &n);
    if (!k) return -1;
    int bad = 0;
    for (size_t i = 0; i < n && !bad; i++)
        bad = (i && put(o, ",", 1)) ||
              (escape_keys ? (put_str(o, GQ) || put_text_str(o, k[i]) || put_str(o, GQ))
                           : put_text_str(o, k[i])) ||
              put(o, ":", 1) || put_arg(o, json_object_get(obj, k[i]), escape_keys);
    free(k);
    return bad ? -1 : 0;
}

/* format_argument(argument, escape_keys) */
static int put_arg(chat_out *o, const json_t *v, int escape_keys) {
    if (json_is_string(v)) return put_str(o, GQ) || put_scalar(o, v) || put_str(o, GQ);
    if (json_is_boolean(v)) return put_text_str(o, json_is_true(v) ? "true" : "false");
    if (json_is_object(v))
        return put(o, "{", 1) || put_sorted_pairs(o, v, escape_keys) || put(o, "}", 1);
    if (json_is_array(v)) {
        if (put(o, "[", 1)) return -1;
        size_t i;
        json_t *it;
        json_array_foreach(v, i, it) {
            if ((i && put(o, ",", 1)) || put_arg(o, it, escape_keys)) return -1;
        }
        return put(o, "]", 1);
    }
    return put_scalar(o, v);
}

/* The elements of an array as <|"|>x<|"|>,... (a `required` list). 0 or -1. */
static int put_quoted_list(chat_out *o, const json_t *arr) {
    size_t r;
    json_t *rv;
    json_array_foreach(arr, r, rv) {
        if ((r && put(o, ",", 1)) || put_str(o, GQ) || put_scalar(o, rv) || put_str(o, GQ))
            return -1;
    }
    return 0;
}

/* ===== Tool schemas ===== */

/* `value['type'] | upper` for a string type ("" otherwise). */
static int put_type_upper(chat_out *o, const json_t *t) {
    const char *s = json_string_value(t);
    if (!s) return 0;
    for (; *s; s++) {
        char c = (char)toupper((unsigned char)*s);
        if (put_text(o, &c, 1)) return -1;
    }
    return 0;
}

static int type_is(const json_t *t, const char *upper) {
    const char *s = json_string_value(t);
    return s && !strcasecmp(s, upper);
}

/* `if add_comma %},{% else %}{% set add_comma = true %}` */
static int comma(int *add, chat_out *o) {
    if (*add) return put(o, ",", 1);
    *add = 1;
    return 0;
}

static int put_params(chat_out *o, const json_t *props);

/* One member of an array parameter's `items` schema. 0 or -1 (oom). */
static int put_items_member(chat_out *o, const char *key, const json_t *iv) {
    if (!strcmp(key, "properties"))
        return put_str(o, "properties:{") || (json_is_object(iv) && put_params(o, iv)) ||
               put(o, "}", 1);
    if (!strcmp(key, "required"))
        return put_str(o, "required:[") || put_quoted_list(o, iv) || put(o, "]", 1);
    if (!strcmp(key, "type"))
        return put_str(o, "type:" GQ) || put_type_upper(o, iv) || put_str(o, GQ);
    return put_text_str(o, key) || put(o, ":", 1) || put_arg(o, iv, 1);
}

/* items:{...} of an array parameter: its members in sorted order, nulls left
 * out. 0 or -1 (oom). */
static int put_items(chat_out *o, const json_t *items) {
    if (put_str(o, "items:{")) return -1;
    size_t n;
    const char **k = sorted_keys(items, &n);
    if (!k) return -1;
    int written = 0, bad = 0;
    for (size_t a = 0; a < n && !bad; a++) {
        json_t *iv = json_object_get(items, k[a]);
        if (json_is_null(iv)) continue;
        bad = (written && put(o, ",", 1)) || put_items_member(o, k[a], iv);
        written = 1;
    }
    free(k);
    return bad || put(o, "}", 1) ? -1 : 0;
}

/* The members of one parameter's schema after its description: enum, items,
 * nullable, nested properties and required, then the type. *add is the
 * template's add_comma. 0 or -1 (oom). */
static int put_param_body(chat_out *o, const json_t *v, int *add) {
    json_t *ty = json_object_get(v, "type");
    if (type_is(ty, "STRING")) {
        json_t *en = json_object_get(v, "enum");
        if (json_is_array(en) && json_array_size(en))
            if (comma(add, o) || put_str(o, "enum:") || put_arg(o, en, 1)) return -1;
    } else if (type_is(ty, "ARRAY")) {
        json_t *items = json_object_get(v, "items");
        if (json_is_object(items) && json_object_size(items))
            if (comma(add, o) || put_items(o, items)) return -1;
    }
    if (json_is_true(json_object_get(v, "nullable")))
        if (comma(add, o) || put_str(o, "nullable:true")) return -1;
    if (type_is(ty, "OBJECT")) {
        json_t *p = json_object_get(v, "properties");
        const json_t *props = json_is_object(p) ? p : json_is_object(v) ? v : NULL;
        if (props &&
            (comma(add, o) || put_str(o, "properties:{") || put_params(o, props) || put(o, "}", 1)))
            return -1;
        json_t *req = json_object_get(v, "required");
        if (json_is_array(req) && json_array_size(req))
            if (comma(add, o) || put_str(o, "required:[") || put_quoted_list(o, req) ||
                put(o, "]", 1))
                return -1;
    }
    return comma(add, o) || put_str(o, "type:" GQ) || put_type_upper(o, ty) || put_str(o, GQ "}");
}

/* format_parameters(properties, required): NAME:{description:...,...} for
 * every property but the schema's own keywords, in sorted order. 0 or -1. */
static int put_params(chat_out *o, const json_t *props) {
    static const char *const standard[] = {"description", "type", "properties", "required",
                                           "nullable"};
    size_t n;
    const char **k = sorted_keys(props, &n);
    if (!k) return -1;
    int found_first = 0, bad = 0;
    for (size_t i = 0; i < n && !bad; i++) {
        int std = 0;
        for (size_t s = 0; s < PT_ARRAY_LEN(standard); s++)
            std |= !strcmp(k[i], standard[s]);
        if (std) continue;
        const json_t *v = json_object_get(props, k[i]);
        int add = 0;
        bad = (found_first && put(o, ",", 1)) || put_text_str(o, k[i]) || put_str(o, ":{");
        found_first = 1;
        const char *d = json_string_value(json_object_get(v, "description"));
        if (!bad && d && *d) {
            bad = put_str(o, "description:" GQ) || put_text_str(o, d) || put_str(o, GQ);
            add = 1;
        }
        bad = bad || put_param_body(o, v, &add);
    }
    free(k);
    return bad ? -1 : 0;
}

/* format_function_declaration(tool) */
static int put_decl(chat_out *o, const json_t *tool) {
    const json_t *fn = chat_call_fn(tool);
    const char *d = json_string_value(json_object_get(fn, "description"));
    if (put_str(o, "declaration:") || put_text_str(o, chat_fn_name(fn)) ||
        put_str(o, "{description:" GQ) || put_text_str(o, d ? d : "") || put_str(o, GQ))
        return -1;
    json_t *p = json_object_get(fn, "parameters");
    if (json_is_object(p) && json_object_size(p)) {
        if (put_str(o, ",parameters:{")) return -1;
        json_t *props = json_object_get(p, "properties"), *req = json_object_get(p, "required");
        if (json_is_object(props) && json_object_size(props))
            if (put_str(o, "properties:{") || put_params(o, props) || put_str(o, "},")) return -1;
        if (json_is_array(req) && json_array_size(req))
            if (put_str(o, "required:[") || put_quoted_list(o, req) || put_str(o, "],")) return -1;
        json_t *ty = json_object_get(p, "type");
        if (json_string_value(ty) && *json_string_value(ty))
            if (put_str(o, "type:" GQ) || put_type_upper(o, ty) || put_str(o, GQ "}")) return -1;
    }
    return put(o, "}", 1);
}

/* ===== Rendering ===== */

/* What the last thing written for a message was (the template's loop state). */
typedef enum { PREV_NONE, PREV_TOOL_CALL, PREV_TOOL_RESPONSE } gemma_prev;

/* strip_thinking(text): drop every <|channel>...<channel|> block, then trim. */
static int put_stripped_thinking(chat_out *o, sv text) {
    tok_bytes t = {0};
    const char *p = text.p, *end = text.p + text.n;
    int bad = 0;
    while (!bad) {
        sv rest = {p, (size_t)(end - p)};
        const char *cl = sv_find(rest, "<channel|>");
        sv part = {p, cl ? (size_t)(cl - p) : rest.n};
        const char *op = sv_find(part, "<|channel>");
        if (op) part.n = (size_t)(op - p);
        bad = bput(&t, part.p, part.n);
        if (!cl) break;
        p = cl + 10;
    }
    bad = bad || put_sv(o, sv_strip((sv){t.v ? t.v : "", t.n}));
    tok_bytes_free(&t);
    return bad ? -1 : 0;
}

/* The system turn: thinking switch, the first message when it is a system or
 * developer message, the tool declarations. 0 or -1 (oom). */
static int put_system(chat_out *o, const json_t *first, int first_sys, const json_t *tools,
                      int think) {
    if (put_str(o, "<|turn>system\n")) return -1;
    if (think && put_str(o, "<|think|>\n")) return -1;
    if (first_sys &&
        put_sv(o, sv_strip(chat_content_text(json_object_get(first, "content"), o->tmp))))
        return -1;
    if (chat_has_tools(tools)) {
        size_t i;
        json_t *t;
        /* the template strips each declaration: a no-op, it starts with
         * "declaration:" and ends with "}" */
        json_array_foreach(tools, i, t) {
            if (put_str(o, "<|tool>") || put_decl(o, t) || put_str(o, "<tool|>")) return -1;
        }
    }
    return put_str(o, "<turn|>\n");
}

/* The role of the nearest message before i (not before start) that is not a
 * tool message, or NULL. */
static const char *prev_role(const json_t *msgs, size_t start, size_t i) {
    for (size_t j = i; j-- > start;) {
        const char *rj = chat_role(json_array_get(msgs, j));
        if (strcmp(rj, "tool")) return rj;
    }
    return NULL;
}

/* Every call as <|tool_call>call:NAME{k:v,...}<tool_call|>. 0 or -1 (oom). */
static int put_tool_calls(chat_out *o, const json_t *tcs) {
    size_t k;
    json_t *tc;
    json_array_foreach(tcs, k, tc) {
        const json_t *fn = chat_call_fn(tc);
        json_t *a = json_object_get(fn, "arguments");
        if (put_str(o, "<|tool_call>call:") || put_text_str(o, chat_fn_name(fn)) || put(o, "{", 1))
            return -1;
        if (json_is_object(a) ? put_sorted_pairs(o, a, 0) : json_is_string(a) && put_jstr(o, a))
            return -1;
        if (put_str(o, "}<tool_call|>")) return -1;
    }
    return 0;
}

/* One <|tool_response>: an object result as sorted pairs, another JSON value
 * as value:..., text (resp NULL) as a quoted value. 0 or -1 (oom). */
static int put_tool_response(chat_out *o, const char *name, const json_t *resp, sv text) {
    if (put_str(o, "<|tool_response>response:") || put_text_str(o, name) || put(o, "{", 1))
        return -1;
    if (json_is_object(resp)) {
        if (put_sorted_pairs(o, resp, 0)) return -1;
    } else if (resp) {
        if (put_str(o, "value:") || put_arg(o, resp, 0)) return -1;
    } else if (put_str(o, "value:" GQ) || put_sv(o, text) || put_str(o, GQ)) {
        return -1;
    }
    return put_str(o, "}<tool_response|>");
}

/* The tool messages that follow message i (which made the calls tcs), each as
 * a response named after its call (matched by tool_call_id) or its own name.
 * *written is set when there was at least one. 0 or -1 (oom). */
static int put_tool_responses(chat_out *o, const json_t *msgs, size_t i, const json_t *tcs,
                              int *written) {
    size_t n_msgs = json_array_size(msgs);
    for (size_t k = i + 1; k < n_msgs; k++) {
        json_t *f = json_array_get(msgs, k);
        if (strcmp(chat_role(f), "tool")) break;
        const char *name = json_string_value(json_object_get(f, "name"));
        const char *id = json_string_value(json_object_get(f, "tool_call_id"));
        size_t q;
        json_t *tc;
        json_array_foreach(tcs, q, tc) {
            const char *tid = json_string_value(json_object_get(tc, "id"));
            if (id && tid && !strcmp(id, tid))
                name = json_string_value(json_object_get(chat_call_fn(tc), "name"));
        }
        json_t *body = json_object_get(f, "content");
        int bad;
        if (json_is_string(body) || json_is_array(body))
            bad = put_tool_response(o, name ? name : "unknown", NULL,
                                    chat_content_text(body, o->tmp));
        else
            bad = put_tool_response(o, name ? name : "unknown", body, (sv){"", 0});
        if (bad) return -1;
        *written = 1;
    }
    return 0;
}

/* A message's text: a string, or its text parts; a model turn's thinking
 * blocks are stripped, other text trimmed. 0 or -1 (oom). */
static int put_content(chat_out *o, const json_t *c, int model) {
    if (json_is_string(c)) {
        sv s = {json_string_value(c), json_string_length(c)};
        return model ? put_stripped_thinking(o, s) : put_sv(o, sv_strip(s));
    }
    if (!json_is_array(c)) return 0;
    size_t q;
    json_t *it;
    json_array_foreach(c, q, it) {
        const char *ty = json_string_value(json_object_get(it, "type"));
        json_t *t = json_object_get(it, "text");
        if (!ty || strcmp(ty, "text") || !json_is_string(t)) continue;
        sv s = {json_string_value(t), json_string_length(t)};
        if (model ? put_stripped_thinking(o, s) : put_sv(o, sv_strip(s))) return -1;
    }
    return 0;
}

/* Message i (not a tool message): its turn, reasoning, calls, the responses
 * that follow it, its text and the turn's end. *prev is the template's loop
 * state. 0 or -1 (oom). */
static int put_message(chat_out *o, const json_t *msgs, size_t start, size_t i, long last_user,
                       gemma_prev *prev) {
    json_t *m = json_array_get(msgs, i);
    const char *r = chat_role(m);
    *prev = PREV_NONE;
    int model = !strcmp(r, "assistant");
    const char *before = prev_role(msgs, start, i);
    if (!(model && before && !strcmp(before, "assistant")))
        if (put_str(o, "<|turn>") || put_str(o, model ? "model" : r) || put(o, "\n", 1)) return -1;
    json_t *tcs = json_object_get(m, "tool_calls");
    int has_calls = json_is_array(tcs) && json_array_size(tcs);
    const char *thinking = json_string_value(json_object_get(m, "reasoning"));
    if (!thinking || !*thinking)
        thinking = json_string_value(json_object_get(m, "reasoning_content"));
    if (thinking && *thinking && (long)(i - start) > last_user && has_calls)
        if (put_str(o, "<|channel>thought\n") || put_text_str(o, thinking) ||
            put_str(o, "\n<channel|>"))
            return -1;
    int responses = 0;
    if (has_calls) {
        if (put_tool_calls(o, tcs)) return -1;
        *prev = PREV_TOOL_CALL;
        if (put_tool_responses(o, msgs, i, tcs, &responses)) return -1;
        if (responses) *prev = PREV_TOOL_RESPONSE;
    }
    json_t *c = json_object_get(m, "content");
    if (put_content(o, c, model)) return -1;
    int content_truthy =
        (json_is_string(c) && json_string_length(c)) || (json_is_array(c) && json_array_size(c));
    if (*prev == PREV_TOOL_CALL && !responses) return put_str(o, "<|tool_response>");
    if (!(responses && !content_truthy)) return put_str(o, "<turn|>\n");
    return 0;
}

static int render(const json_t *msgs, const json_t *tools, int add_gen, int think, chat_out *o,
                  pt_err *err) {
    size_t n_msgs = json_array_size(msgs), start = 0;
    json_t *first = json_array_get(msgs, 0);
    const char *r0 = first ? chat_role(first) : NULL;
    int first_sys = r0 && (!strcmp(r0, "system") || !strcmp(r0, "developer"));
    gemma_prev prev = PREV_NONE;
    if (put_str(o, "<bos>")) goto oom;
    if (think || chat_has_tools(tools) || first_sys) {
        if (put_system(o, first, first_sys, tools, think)) goto oom;
        start = first_sys ? 1 : 0;
    }
    long last_user = -1;
    for (size_t i = start; i < n_msgs; i++)
        if (!strcmp(chat_role(json_array_get(msgs, i)), "user")) last_user = (long)(i - start);
    for (size_t i = start; i < n_msgs; i++) {
        if (!strcmp(chat_role(json_array_get(msgs, i)), "tool")) continue;
        if (put_message(o, msgs, start, i, last_user, &prev)) goto oom;
    }
    if (add_gen && prev != PREV_TOOL_RESPONSE && prev != PREV_TOOL_CALL) {
        if (put_str(o, "<|turn>model\n")) goto oom;
        if (!think && put_str(o, "<|channel>thought\n<channel|>")) goto oom;
    }
    return 0;
oom:
    return chat_oom(err);
}

/* ===== Parsing ===== */

/* Gemma 4's argument syntax: {key:value,...} with <|"|> quoted strings. */
typedef struct gp {
    const char *p, *end;
    int depth;
} gp;
static void gp_ws(gp *g) {
    while (g->p < g->end && is_ws(*g->p))
        g->p++;
}
static int gp_lit(gp *g, const char *s) {
    size_t n = strlen(s);
    if ((size_t)(g->end - g->p) >= n && !memcmp(g->p, s, n)) {
        g->p += n;
        return 1;
    }
    return 0;
}
static json_t *gp_value(gp *g);
static json_t *gp_string(gp *g) { /* after the opening quote */
    sv rest = {g->p, (size_t)(g->end - g->p)};
    const char *e = sv_find(rest, GQ);
    if (!e) return NULL;
    json_t *s = json_stringn_nocheck(g->p, (size_t)(e - g->p));
    g->p = e + 5;
    return s;
}
static json_t *gp_object(gp *g) { /* after '{' */
    json_t *o = json_object();
    gp_ws(g);
    if (gp_lit(g, "}")) return o;
    while (o) {
        gp_ws(g);
        char *key = NULL;
        if (gp_lit(g, GQ)) {
            json_t *k = gp_string(g);
            key = k ? strdup(json_string_value(k)) : NULL;
            json_decref(k);
        } else {
            const char *s = g->p;
            while (g->p < g->end && *g->p != ':' && *g->p != ',' && *g->p != '}')
                g->p++;
            sv k = sv_strip((sv){s, (size_t)(g->p - s)});
            if (k.n >= 2 && k.p[0] == '"' && k.p[k.n - 1] == '"') k.p++, k.n -= 2;
            key = k.n ? chat_sv_dup(k) : NULL;
        }
        gp_ws(g);
        json_t *v = key && gp_lit(g, ":") ? gp_value(g) : NULL;
        if (!v) {
            free(key);
            json_decref(o);
            return NULL;
        }
        json_object_set_new(o, key, v);
        free(key);
        gp_ws(g);
        if (gp_lit(g, "}")) return o;
        if (!gp_lit(g, ",")) break;
    }
    json_decref(o);
    return NULL;
}
static json_t *gp_value(gp *g) {
    if (++g->depth > 64) return NULL;
    json_t *v = NULL;
    gp_ws(g);
    if (gp_lit(g, GQ))
        v = gp_string(g);
    else if (gp_lit(g, "{"))
        v = gp_object(g);
    else if (gp_lit(g, "[")) {
        v = json_array();
        gp_ws(g);
        if (!gp_lit(g, "]"))
            for (;;) {
                json_t *it = gp_value(g);
                if (!it) {
                    json_decref(v);
                    v = NULL;
                    break;
                }
                json_array_append_new(v, it);
                gp_ws(g);
                if (gp_lit(g, "]")) break;
                if (!gp_lit(g, ",")) {
                    json_decref(v);
                    v = NULL;
                    break;
                }
            }
    } else {
        const char *s = g->p;
        while (g->p < g->end && *g->p != ',' && *g->p != '}' && *g->p != ']')
            g->p++;
        sv t = sv_strip((sv){s, (size_t)(g->p - s)});
        if (t.n) {
            v = json_loadb(t.p, t.n, JSON_DECODE_ANY, NULL);
            if (!v && t.n == 4 && !memcmp(t.p, "True", 4)) v = json_true();
            if (!v && t.n == 5 && !memcmp(t.p, "False", 5)) v = json_false();
            if (!v && t.n == 4 && !memcmp(t.p, "None", 4)) v = json_null();
            if (!v) v = json_stringn_nocheck(t.p, t.n);
        }
    }
    g->depth--;
    return v;
}
/* call:NAME{...} */
static json_t *parse_call(sv body, const json_t *tools, sv *name, char **name_owned,
                          const char **why) {
    (void)tools, (void)name_owned;
    sv b = sv_strip(body);
    if (b.n < 5 || memcmp(b.p, "call:", 5)) {
        *why = "expected call:NAME{...}";
        return NULL;
    }
    const char *br = memchr(b.p, '{', b.n);
    if (!br) {
        *why = "no argument object";
        return NULL;
    }
    *name = sv_strip((sv){b.p + 5, (size_t)(br - (b.p + 5))});
    if (!name->n) {
        *why = "missing function name";
        return NULL;
    }
    gp g = {br + 1, b.p + b.n, 0};
    json_t *a = gp_object(&g);
    gp_ws(&g);
    if (!a || g.p != g.end) {
        json_decref(a);
        *why = "malformed arguments";
        return NULL;
    }
    return a;
}

/* A tool call is followed by <|tool_response> (the stop token): drop it. */
static int tidy(sv *content, tok_bytes *scratch) {
    (void)scratch;
    sv s = sv_strip(*content);
    if (s.n >= 16 && !memcmp(s.p + s.n - 16, "<|tool_response>", 16))
        content->n = (size_t)(s.p + s.n - 16 - content->p);
    return 0;
}

/* ===== The grammar of a call ===== */

/* PREcall ::= <|tool_call>call:NAME ARGS<tool_call|>, ARGS an object in Gemma's value syntax
 * ({K:V,...}). */
static int call_grammar(tok_bytes *b, const char *pre, const char *name, const json_t *params,
                        pt_err *err) {
    return chat_gbnf_call(b, pre, name, params, GRAM_GEMMA4, err) ||
                   chat_gbnf(b, "\"<|tool_call>call:\" ", err) || chat_gbnf_lit(b, name, err) ||
                   chat_gbnf(b, " ", err) || chat_gbnf_args_root(b, pre, err) ||
                   chat_gbnf(b, "\"<tool_call|>\"\n", err)
               ? -1
               : 0;
}

/* ===== The format ===== */

static const char *const k_markup[] = {GQ, "<|tool_response>", NULL};

const chat_fmt chat_gemma4_format = {
    .name = "gemma-4",
    .detect = {.tmpl = CHAT_LIST("<|turn>"),
               .arch = CHAT_LIST("gemma4*"),
               .tok_model = CHAT_LIST("gemma4")},
    .render = render,
    .syntax = {.think_open = "<|channel>",
               .think_close = "<channel|>",
               .think_label = "thought\n",
               .call_open = "<|tool_call>",
               .call_close = "<tool_call|>",
               .parse_call = parse_call,
               .tidy = tidy,
               .markup = k_markup},
    .call_grammar = call_grammar,
};
