/* chat_common.c — what the chat-format files (chat_glm5.c, chat_qwen3.c,
 * chat_deepseek3.c, chat_gemma4.c) call in common: the conversation's
 * accessors (a message's text, role, calls and their arguments), the parts of
 * an assistant turn more than one template reads the same way, and the GBNF
 * pieces a format's call grammar is written with. Nothing here knows a format
 * or calls into one (see chat_fmt.h for which way calls go).
 */
#include <stdio.h>
#include <stdlib.h>

#include "text/chat_fmt.h"
#include "text/grammar.h"

/* ===== Conversation accessors ===== */

sv chat_content_text(const json_t *c, tok_bytes *tmp) {
    if (json_is_string(c)) return (sv){json_string_value(c), json_string_length(c)};
    if (json_is_array(c)) {
        tmp->n = 0;
        size_t i;
        json_t *it;
        json_array_foreach(c, i, it) {
            if (json_is_string(it)) {
                if (bput(tmp, json_string_value(it), json_string_length(it))) return (sv){NULL, 0};
            } else if (json_is_object(it)) {
                const char *ty = json_string_value(json_object_get(it, "type"));
                json_t *t = json_object_get(it, "text");
                if (ty && !strcmp(ty, "text") && json_is_string(t))
                    if (bput(tmp, json_string_value(t), json_string_length(t)))
                        return (sv){NULL, 0};
            }
        }
        return (sv){tmp->v ? tmp->v : "", tmp->n};
    }
    return (sv){"", 0};
}

const char *chat_role(const json_t *m) {
    return json_string_value(json_object_get(m, "role"));
}

const json_t *chat_call_fn(const json_t *tc) {
    const json_t *f = json_object_get(tc, "function");
    return json_is_object(f) ? f : tc;
}

const char *chat_fn_name(const json_t *fn) {
    return json_string_value(json_object_get(fn, "name"));
}

json_t *chat_call_args(const json_t *fn, json_t **owned, pt_err *err) {
    json_t *a = json_object_get(fn, "arguments");
    *owned = NULL;
    if (!a || json_is_null(a)) {
        *owned = json_object();
        return *owned;
    }
    if (json_is_object(a)) return a;
    if (json_is_string(a)) {
        json_t *p = json_loads(json_string_value(a), JSON_DECODE_ANY, NULL);
        if (json_is_object(p)) return *owned = p;
        json_decref(p);
    }
    pt_errf(err, "tool call '%s': arguments must be a JSON object or a string holding one",
            chat_fn_name(fn) ? chat_fn_name(fn) : "?");
    return NULL;
}

int chat_put_args(chat_out *o, const json_t *args) {
    if (json_is_string(args)) return put_jstr(o, args);
    return args ? put_json(o, args) : put_str(o, "{}");
}

int chat_has_tools(const json_t *tools) {
    return json_is_array(tools) && json_array_size(tools) > 0;
}

/* Reasoning split out of an assistant's content when it holds "</think>"; both left alone
 * otherwise. The templates' rule, in Python: reasoning = content.split('</think>')[0]
 * .rstrip('\n').split('<think>')[-1].lstrip('\n'); content =
 * content.split('</think>')[-1].lstrip('\n'). */
static void chat_split_think(sv *content, sv *reasoning) {
    const char *e = sv_find(*content, "</think>");
    if (!e) return;
    sv before = {content->p, (size_t)(e - content->p)};
    before = sv_strip_chars(before, 0, 1, '\n');
    const char *o = sv_rfind(before, "<think>");
    if (o) before = (sv){o + 7, (size_t)(before.p + before.n - (o + 7))};
    *reasoning = sv_strip_chars(before, 1, 0, '\n');
    const char *last = sv_rfind(*content, "</think>");
    sv after = {last + 8, (size_t)(content->p + content->n - (last + 8))};
    *content = sv_strip_chars(after, 1, 0, '\n');
}

sv chat_assistant_reasoning(const json_t *m, sv *content) {
    sv reasoning = {"", 0};
    json_t *rj = json_object_get(m, "reasoning_content");
    if (json_is_string(rj))
        reasoning = (sv){json_string_value(rj), json_string_length(rj)};
    else
        chat_split_think(content, &reasoning);
    return reasoning;
}

char *chat_sv_dup(sv s) {
    char *p = malloc(s.n + 1);
    if (!p) return NULL;
    memcpy(p, s.p, s.n);
    p[s.n] = 0;
    return p;
}

/* ===== A call's grammar ===== */

int chat_gbnf(tok_bytes *b, const char *s, pt_err *err) {
    if (tok_bytes_append(b, s, strlen(s))) return pt_errf(err, "tool grammar: out of memory");
    return 0;
}

int chat_gbnf_lit(tok_bytes *b, const char *s, pt_err *err) {
    if (chat_gbnf(b, "\"", err)) return -1;
    for (; *s; s++) {
        char e[8];
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            snprintf(e, sizeof e, "\\%c", c);
        else if (c < 0x20 || c == 0x7F)
            snprintf(e, sizeof e, "\\x%02X", c);
        else
            e[0] = (char)c, e[1] = 0;
        if (chat_gbnf(b, e, err)) return -1;
    }
    return chat_gbnf(b, "\"", err);
}

int chat_gbnf_call(tok_bytes *b, const char *pre, const char *name, const json_t *params,
                   int dialect, pt_err *err) {
    char rule[160];
    snprintf(rule, sizeof rule, "%sargs-", pre);
    if (gram_from_json_schema_value(params, dialect, rule, b, err)) {
        char m[sizeof err->msg];
        snprintf(m, sizeof m, "%s", err->msg);
        return pt_errf(err, "tool '%s': %s", name, m);
    }
    snprintf(rule, sizeof rule, "%scall ::= ", pre);
    return chat_gbnf(b, rule, err);
}

int chat_gbnf_args_root(tok_bytes *b, const char *pre, pt_err *err) {
    char rule[160];
    snprintf(rule, sizeof rule, "%sargs-root ", pre);
    return chat_gbnf(b, rule, err);
}
