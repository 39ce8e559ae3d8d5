/* chat.c — native chat formats (GLM-5, DeepSeek-V3.1, Gemma 4, Qwen3) and the
 * parsing of generated text into reasoning, content and tool calls.
 *
 * Each renderer transcribes one family's Jinja template (the one named in
 * ../shared/fixtures/templates/README.md) statement by statement, quirks
 * included (GLM-5 drops the reasoning of turns before the last user message,
 * DeepSeek-V3.1 ignores tool definitions, Gemma 4 sorts keys and upper-cases
 * types): the goal is the byte string the model was trained on, which the
 * golden tests check. See chat.h for the conversation's JSON shape.
 */
#include "text/chat.h"

#include <ctype.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ===== Small string helpers ===== */

static int put(tok_bytes *b, const char *s, size_t n) {
    if (n == 0) return 0;
    if (b->n + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->n + n + 1) cap *= 2;
        char *v = realloc(b->v, cap);
        if (!v) return -1;
        b->v = v;
        b->cap = cap;
    }
    memcpy(b->v + b->n, s, n);
    b->n += n;
    b->v[b->n] = 0; /* always NUL-terminated for the helpers below; n excludes it */
    return 0;
}
static int puts_(tok_bytes *b, const char *s) { return put(b, s, strlen(s)); }

/* A view into a string (not NUL-terminated). */
typedef struct sv {
    const char *p;
    size_t n;
} sv;

static sv sv_of(const char *s) { return (sv){s, s ? strlen(s) : 0}; }
static int is_ws(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'; }
/* Python's str.strip() (ASCII whitespace), or strip of one character. */
static sv sv_strip_chars(sv s, int left, int right, char only) {
    while (left && s.n && (only ? s.p[0] == only : is_ws(s.p[0]))) s.p++, s.n--;
    while (right && s.n && (only ? s.p[s.n - 1] == only : is_ws(s.p[s.n - 1]))) s.n--;
    return s;
}
static sv sv_strip(sv s) { return sv_strip_chars(s, 1, 1, 0); }
static const char *sv_find(sv s, const char *needle) {
    size_t m = strlen(needle);
    if (m > s.n) return NULL;
    for (size_t i = 0; i + m <= s.n; i++)
        if (!memcmp(s.p + i, needle, m)) return s.p + i;
    return NULL;
}
static const char *sv_rfind(sv s, const char *needle) {
    size_t m = strlen(needle);
    if (m > s.n) return NULL;
    for (size_t i = s.n - m + 1; i-- > 0;)
        if (!memcmp(s.p + i, needle, m)) return s.p + i;
    return NULL;
}
static int put_sv(tok_bytes *b, sv s) { return put(b, s.p, s.n); }

/* ===== JSON helpers ===== */

/* The text of a message's content: a string, or the concatenated "text" parts
 * of an array. NULL/other → "". The result points into the JSON or into tmp. */
static sv content_text(const json_t *c, tok_bytes *tmp) {
    if (json_is_string(c)) return (sv){json_string_value(c), json_string_length(c)};
    if (json_is_array(c)) {
        tmp->n = 0;
        size_t i;
        json_t *it;
        json_array_foreach(c, i, it) {
            if (json_is_string(it)) {
                if (put(tmp, json_string_value(it), json_string_length(it))) return (sv){NULL, 0};
            } else if (json_is_object(it)) {
                const char *ty = json_string_value(json_object_get(it, "type"));
                json_t *t = json_object_get(it, "text");
                if (ty && !strcmp(ty, "text") && json_is_string(t))
                    if (put(tmp, json_string_value(t), json_string_length(t))) return (sv){NULL, 0};
            }
        }
        return (sv){tmp->v ? tmp->v : "", tmp->n};
    }
    return (sv){"", 0};
}

static const char *role_of(const json_t *m) { return json_string_value(json_object_get(m, "role")); }

/* Python repr of a float, near enough: the shortest %.Ng that reads back, with ".0"
 * when it looks like an integer. */
static int dump_real(double d, tok_bytes *out) {
    char buf[64];
    if (isnan(d)) return puts_(out, "NaN");
    if (isinf(d)) return puts_(out, d > 0 ? "Infinity" : "-Infinity");
    for (int prec = 1; prec <= 17; prec++) {
        snprintf(buf, sizeof buf, "%.*g", prec, d);
        if (strtod(buf, NULL) == d) break;
    }
    if (!strpbrk(buf, ".eEn")) strcat(buf, ".0");
    return puts_(out, buf);
}

static int dump_string(const char *s, size_t n, tok_bytes *out) {
    if (put(out, "\"", 1)) return -1;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        char esc[8];
        const char *e = NULL;
        switch (c) {
        case '"': e = "\\\""; break;
        case '\\': e = "\\\\"; break;
        case '\n': e = "\\n"; break;
        case '\r': e = "\\r"; break;
        case '\t': e = "\\t"; break;
        case '\b': e = "\\b"; break;
        case '\f': e = "\\f"; break;
        default:
            if (c < 0x20 || c == 0x7f) {
                snprintf(esc, sizeof esc, "\\u%04x", c);
                e = esc;
            }
        }
        if (e ? puts_(out, e) : put(out, (const char *)&s[i], 1)) return -1;
    }
    return put(out, "\"", 1);
}

int chat_json_dump(const json_t *j, tok_bytes *out) {
    char buf[32];
    switch (json_typeof(j)) {
    case JSON_OBJECT: {
        if (put(out, "{", 1)) return -1;
        const char *k;
        json_t *v;
        int first = 1;
        json_object_foreach((json_t *)j, k, v) {
            if ((!first && puts_(out, ", ")) || dump_string(k, strlen(k), out) || puts_(out, ": ") ||
                chat_json_dump(v, out))
                return -1;
            first = 0;
        }
        return put(out, "}", 1);
    }
    case JSON_ARRAY: {
        if (put(out, "[", 1)) return -1;
        size_t i;
        json_t *v;
        json_array_foreach(j, i, v) {
            if ((i && puts_(out, ", ")) || chat_json_dump(v, out)) return -1;
        }
        return put(out, "]", 1);
    }
    case JSON_STRING: return dump_string(json_string_value(j), json_string_length(j), out);
    case JSON_INTEGER:
        snprintf(buf, sizeof buf, "%lld", (long long)json_integer_value(j));
        return puts_(out, buf);
    case JSON_REAL: return dump_real(json_real_value(j), out);
    case JSON_TRUE: return puts_(out, "true");
    case JSON_FALSE: return puts_(out, "false");
    case JSON_NULL: return puts_(out, "null");
    }
    return -1;
}

/* A tool call's function object ({name, arguments}); accepts the call itself
 * when it has no "function" member. */
static const json_t *call_fn(const json_t *tc) {
    const json_t *f = json_object_get(tc, "function");
    return json_is_object(f) ? f : tc;
}

/* The arguments of a call as an object: *owned is set when it was parsed from
 * a string and must be json_decref'd. NULL with err when it is neither. */
static json_t *call_args(const json_t *fn, json_t **owned, pt_err *err) {
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
            json_string_value(json_object_get(fn, "name")) ? json_string_value(json_object_get(fn, "name"))
                                                          : "?");
    return NULL;
}

static const char *call_name(const json_t *tc, pt_err *err) {
    const char *n = json_string_value(json_object_get(call_fn(tc), "name"));
    if (!n) pt_errf(err, "a tool call has no function name");
    return n;
}

/* Validate the shape every renderer relies on. */
static int check_conversation(const json_t *messages, const json_t *tools, pt_err *err) {
    if (!json_is_array(messages)) return pt_errf(err, "chat: messages must be a JSON array");
    size_t i;
    json_t *m;
    json_array_foreach(messages, i, m) {
        const char *r = role_of(m);
        if (!json_is_object(m) || !r)
            return pt_errf(err, "chat: message %zu has no role", i);
        if (strcmp(r, "system") && strcmp(r, "user") && strcmp(r, "assistant") && strcmp(r, "tool") &&
            strcmp(r, "developer"))
            return pt_errf(err, "chat: message %zu has unknown role '%s' (expected system, user, "
                                "assistant or tool)", i, r);
        json_t *tcs = json_object_get(m, "tool_calls");
        if (tcs && !json_is_null(tcs)) {
            if (!json_is_array(tcs)) return pt_errf(err, "chat: message %zu: tool_calls must be an array", i);
            size_t k;
            json_t *tc;
            json_array_foreach(tcs, k, tc) {
                if (!json_is_object(tc) || !call_name(tc, err)) return -1;
            }
        }
    }
    if (tools && !json_is_null(tools)) {
        if (!json_is_array(tools)) return pt_errf(err, "chat: tools must be a JSON array");
        json_t *t;
        json_array_foreach(tools, i, t) {
            if (!json_is_object(t) || !json_string_value(json_object_get(call_fn(t), "name")))
                return pt_errf(err, "chat: tool %zu has no function name", i);
        }
    }
    return 0;
}

static int has_tools(const json_t *tools) { return json_is_array(tools) && json_array_size(tools) > 0; }

/* Reasoning split out of an assistant's content when it holds "</think>"
 * (Qwen3 / GLM templates): reasoning = content.split('</think>')[0]
 * .rstrip('\n').split('<think>')[-1].lstrip('\n'); content =
 * content.split('</think>')[-1].lstrip('\n'). */
static void split_think(sv *content, sv *reasoning) {
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

/* ===== GLM-5 (GLM-4.7-Flash template) ===== */

static int render_glm5(const json_t *msgs, const json_t *tools, int add_gen, int think, tok_bytes *o,
                       pt_err *err) {
    tok_bytes tmp = {0};
    int rc = -1;
    if (puts_(o, "[gMASK]<sop>")) goto oom;
    if (has_tools(tools)) {
        if (puts_(o, "<|system|>\n# Tools\n\nYou may call one or more functions to assist with the user "
                     "query.\n\nYou are provided with function signatures within <tools></tools> XML "
                     "tags:\n<tools>\n"))
            goto oom;
        size_t i;
        json_t *t;
        json_array_foreach(tools, i, t) {
            if (chat_json_dump(t, o) || put(o, "\n", 1)) goto oom;
        }
        if (puts_(o, "</tools>\n\nFor each function call, output the function name and arguments within "
                     "the following XML format:\n<tool_call>{function-name}<arg_key>{arg-key-1}</arg_key>"
                     "<arg_value>{arg-value-1}</arg_value><arg_key>{arg-key-2}</arg_key><arg_value>"
                     "{arg-value-2}</arg_value>...</tool_call>"))
            goto oom;
    }
    long last_user = -1;
    size_t i;
    json_t *m;
    json_array_foreach(msgs, i, m) if (!strcmp(role_of(m), "user")) last_user = (long)i;
    json_array_foreach(msgs, i, m) {
        const char *r = role_of(m);
        if (!strcmp(r, "user")) {
            sv c = content_text(json_object_get(m, "content"), &tmp);
            if (puts_(o, "<|user|>") || put_sv(o, c)) goto oom;
        } else if (!strcmp(r, "assistant")) {
            sv c = content_text(json_object_get(m, "content"), &tmp), reasoning = {"", 0};
            json_t *rc_ = json_object_get(m, "reasoning_content");
            if (json_is_string(rc_)) reasoning = (sv){json_string_value(rc_), json_string_length(rc_)};
            else split_think(&c, &reasoning);
            if (puts_(o, "<|assistant|>")) goto oom;
            if ((long)i > last_user && reasoning.n) {
                if (puts_(o, "<think>") || put_sv(o, sv_strip(reasoning)) || puts_(o, "</think>")) goto oom;
            } else if (puts_(o, "</think>"))
                goto oom;
            if (put_sv(o, sv_strip(c))) goto oom;
            json_t *tcs = json_object_get(m, "tool_calls");
            size_t k;
            json_t *tc;
            if (json_is_array(tcs)) json_array_foreach(tcs, k, tc) {
                    const json_t *fn = call_fn(tc);
                    json_t *owned;
                    json_t *args = call_args(fn, &owned, err);
                    if (!args) goto fail;
                    int bad = puts_(o, "<tool_call>") || puts_(o, json_string_value(json_object_get(fn, "name")));
                    const char *key;
                    json_t *v;
                    json_object_foreach(args, key, v) {
                        bad = bad || puts_(o, "<arg_key>") || puts_(o, key) || puts_(o, "</arg_key><arg_value>") ||
                              (json_is_string(v) ? put(o, json_string_value(v), json_string_length(v))
                                                 : chat_json_dump(v, o)) ||
                              puts_(o, "</arg_value>");
                    }
                    bad = bad || puts_(o, "</tool_call>");
                    json_decref(owned);
                    if (bad) goto oom;
                }
        } else if (!strcmp(r, "tool")) {
            json_t *c = json_object_get(m, "content");
            if (json_is_string(c)) {
                if (i == 0 || strcmp(role_of(json_array_get(msgs, i - 1)), "tool"))
                    if (puts_(o, "<|observation|>")) goto oom;
                if (puts_(o, "<tool_response>") || put(o, json_string_value(c), json_string_length(c)) ||
                    puts_(o, "</tool_response>"))
                    goto oom;
            } else {
                if (puts_(o, "<|observation|>")) goto oom;
                size_t k;
                json_t *tr;
                if (json_is_array(c)) json_array_foreach(c, k, tr) {
                        json_t *out = json_object_get(tr, "output");
                        const json_t *x = out ? out : tr;
                        if (puts_(o, "\n<tool_response>") ||
                            (json_is_string(x) ? put(o, json_string_value(x), json_string_length(x))
                                               : chat_json_dump(x, o)) ||
                            puts_(o, "</tool_response>"))
                            goto oom;
                    }
            }
        } else if (!strcmp(r, "system")) {
            sv c = content_text(json_object_get(m, "content"), &tmp);
            if (puts_(o, "<|system|>") || put_sv(o, c)) goto oom;
        }
    }
    if (add_gen && (puts_(o, "<|assistant|>") || puts_(o, think ? "<think>" : "</think>"))) goto oom;
    rc = 0;
    goto fail;
oom:
    pt_errf(err, "chat: out of memory");
fail:
    tok_bytes_free(&tmp);
    return rc;
}

/* ===== Qwen3 (ChatML with <think>) ===== */

static int render_qwen3(const json_t *msgs, const json_t *tools, int add_gen, int think, tok_bytes *o,
                        pt_err *err) {
    size_t n = json_array_size(msgs), i;
    json_t *m, *first = json_array_get(msgs, 0);
    int first_sys = first && !strcmp(role_of(first), "system");
    tok_bytes tmp = {0};
    int rc = -1;
    if (has_tools(tools)) {
        if (puts_(o, "<|im_start|>system\n")) goto oom;
        if (first_sys) {
            json_t *c = json_object_get(first, "content");
            if (put_sv(o, content_text(c, &tmp)) || puts_(o, "\n\n")) goto oom;
        }
        if (puts_(o, "# Tools\n\nYou may call one or more functions to assist with the user query.\n\nYou are "
                     "provided with function signatures within <tools></tools> XML tags:\n<tools>"))
            goto oom;
        json_t *t;
        json_array_foreach(tools, i, t) {
            if (put(o, "\n", 1) || chat_json_dump(t, o)) goto oom;
        }
        if (puts_(o, "\n</tools>\n\nFor each function call, return a json object with function name and "
                     "arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": "
                     "<function-name>, \"arguments\": <args-json-object>}\n</tool_call><|im_end|>\n"))
            goto oom;
    } else if (first_sys) {
        if (puts_(o, "<|im_start|>system\n") || put_sv(o, content_text(json_object_get(first, "content"), &tmp)) ||
            puts_(o, "<|im_end|>\n"))
            goto oom;
    }
    /* the last real user query (not a tool response passed as a user message) */
    size_t last_query = n ? n - 1 : 0;
    for (size_t k = n; k-- > 0;) {
        json_t *mk = json_array_get(msgs, k);
        json_t *c = json_object_get(mk, "content");
        if (!strcmp(role_of(mk), "user") && json_is_string(c)) {
            sv s = {json_string_value(c), json_string_length(c)};
            int is_resp = s.n >= 15 + 16 && !memcmp(s.p, "<tool_response>", 15) &&
                          !memcmp(s.p + s.n - 16, "</tool_response>", 16);
            if (!is_resp) {
                last_query = k;
                break;
            }
        }
    }
    json_array_foreach(msgs, i, m) {
        const char *r = role_of(m);
        json_t *cj = json_object_get(m, "content");
        sv c = json_is_string(cj) ? (sv){json_string_value(cj), json_string_length(cj)} : (sv){"", 0};
        if (!strcmp(r, "user") || (!strcmp(r, "system") && i != 0)) {
            if (puts_(o, "<|im_start|>") || puts_(o, r) || put(o, "\n", 1) || put_sv(o, c) ||
                puts_(o, "<|im_end|>\n"))
                goto oom;
        } else if (!strcmp(r, "assistant")) {
            sv reasoning = {"", 0};
            json_t *rj = json_object_get(m, "reasoning_content");
            if (json_is_string(rj)) reasoning = (sv){json_string_value(rj), json_string_length(rj)};
            else split_think(&c, &reasoning);
            if (i > last_query && (i == n - 1 || reasoning.n)) {
                if (puts_(o, "<|im_start|>assistant\n<think>\n") ||
                    put_sv(o, sv_strip_chars(reasoning, 1, 1, '\n')) || puts_(o, "\n</think>\n\n") ||
                    put_sv(o, sv_strip_chars(c, 1, 0, '\n')))
                    goto oom;
            } else if (puts_(o, "<|im_start|>assistant\n") || put_sv(o, c))
                goto oom;
            json_t *tcs = json_object_get(m, "tool_calls");
            size_t k;
            json_t *tc;
            if (json_is_array(tcs)) json_array_foreach(tcs, k, tc) {
                    if ((k > 0 || c.n) && put(o, "\n", 1)) goto oom;
                    const json_t *fn = call_fn(tc);
                    json_t *a = json_object_get(fn, "arguments");
                    if (puts_(o, "<tool_call>\n{\"name\": \"") ||
                        puts_(o, json_string_value(json_object_get(fn, "name"))) || puts_(o, "\", \"arguments\": ") ||
                        (json_is_string(a) ? put(o, json_string_value(a), json_string_length(a))
                                           : (a ? chat_json_dump(a, o) : puts_(o, "{}"))) ||
                        puts_(o, "}\n</tool_call>"))
                        goto oom;
                }
            if (puts_(o, "<|im_end|>\n")) goto oom;
        } else if (!strcmp(r, "tool")) {
            json_t *prev = i ? json_array_get(msgs, i - 1) : NULL, *next = json_array_get(msgs, i + 1);
            if ((!prev || strcmp(role_of(prev), "tool")) && puts_(o, "<|im_start|>user")) goto oom;
            if (puts_(o, "\n<tool_response>\n") || put_sv(o, c) || puts_(o, "\n</tool_response>")) goto oom;
            if ((!next || strcmp(role_of(next), "tool")) && puts_(o, "<|im_end|>\n")) goto oom;
        }
    }
    if (add_gen) {
        if (puts_(o, "<|im_start|>assistant\n")) goto oom;
        if (!think && puts_(o, "<think>\n\n</think>\n\n")) goto oom;
    }
    rc = 0;
    goto done;
oom:
    pt_errf(err, "chat: out of memory");
done:
    tok_bytes_free(&tmp);
    return rc;
}

/* ===== DeepSeek-V3.1 ===== */

#define DS_BOS "<\xef\xbd\x9c" "begin\xe2\x96\x81of\xe2\x96\x81sentence\xef\xbd\x9c>"
#define DS_EOS "<\xef\xbd\x9c" "end\xe2\x96\x81of\xe2\x96\x81sentence\xef\xbd\x9c>"
#define DS_USER "<\xef\xbd\x9cUser\xef\xbd\x9c>"
#define DS_ASSISTANT "<\xef\xbd\x9c" "Assistant\xef\xbd\x9c>"
#define DS_CALLS_BEGIN "<\xef\xbd\x9ctool\xe2\x96\x81" "calls\xe2\x96\x81" "begin\xef\xbd\x9c>"
#define DS_CALLS_END "<\xef\xbd\x9ctool\xe2\x96\x81" "calls\xe2\x96\x81" "end\xef\xbd\x9c>"
#define DS_CALL_BEGIN "<\xef\xbd\x9ctool\xe2\x96\x81" "call\xe2\x96\x81" "begin\xef\xbd\x9c>"
#define DS_CALL_END "<\xef\xbd\x9ctool\xe2\x96\x81" "call\xe2\x96\x81" "end\xef\xbd\x9c>"
#define DS_SEP "<\xef\xbd\x9ctool\xe2\x96\x81sep\xef\xbd\x9c>"
#define DS_OUT_BEGIN "<\xef\xbd\x9ctool\xe2\x96\x81output\xe2\x96\x81" "begin\xef\xbd\x9c>"
#define DS_OUT_END "<\xef\xbd\x9ctool\xe2\x96\x81output\xe2\x96\x81" "end\xef\xbd\x9c>"
/* what the template writes after <｜Assistant｜> when not thinking */
#define DS_NOTHINK "<think></think>"

static int render_deepseek3(const json_t *msgs, int add_gen, int think, tok_bytes *o, pt_err *err) {
    tok_bytes tmp = {0};
    size_t i;
    json_t *m;
    int first_sp = 1, is_tool = 0, is_last_user = 0;
    if (puts_(o, DS_BOS)) goto oom;
    json_array_foreach(msgs, i, m) {
        if (strcmp(role_of(m), "system")) continue;
        if ((!first_sp && puts_(o, "\n\n")) || put_sv(o, content_text(json_object_get(m, "content"), &tmp)))
            goto oom;
        first_sp = 0;
    }
    json_array_foreach(msgs, i, m) {
        const char *r = role_of(m);
        sv c = content_text(json_object_get(m, "content"), &tmp);
        json_t *tcs = json_object_get(m, "tool_calls");
        if (!strcmp(r, "user")) {
            is_tool = 0;
            is_last_user = 1;
            if (puts_(o, DS_USER) || put_sv(o, c)) goto oom;
        } else if (!strcmp(r, "assistant") && tcs && !json_is_null(tcs)) {
            if (is_last_user && (puts_(o, DS_ASSISTANT) || puts_(o, DS_NOTHINK))) goto oom;
            is_last_user = 0;
            is_tool = 0;
            size_t k;
            json_t *tc;
            json_array_foreach(tcs, k, tc) {
                const json_t *fn = call_fn(tc);
                json_t *a = json_object_get(fn, "arguments");
                if (k == 0 && put_sv(o, c)) goto oom;
                if (k == 0 && puts_(o, DS_CALLS_BEGIN)) goto oom;
                if (puts_(o, DS_CALL_BEGIN) || puts_(o, json_string_value(json_object_get(fn, "name"))) ||
                    puts_(o, DS_SEP) ||
                    (json_is_string(a) ? put(o, json_string_value(a), json_string_length(a))
                                       : (a ? chat_json_dump(a, o) : puts_(o, "{}"))) ||
                    puts_(o, DS_CALL_END))
                    goto oom;
            }
            if (puts_(o, DS_CALLS_END) || puts_(o, DS_EOS)) goto oom;
        } else if (!strcmp(r, "assistant")) {
            if (is_last_user && (puts_(o, DS_ASSISTANT) || puts_(o, DS_NOTHINK))) goto oom;
            is_last_user = 0;
            if (!is_tool) {
                const char *e = sv_find(c, "</think>");
                if (e) c = (sv){e + 8, (size_t)(c.p + c.n - (e + 8))};
            }
            is_tool = 0;
            if (put_sv(o, c) || puts_(o, DS_EOS)) goto oom;
        } else if (!strcmp(r, "tool")) {
            is_last_user = 0;
            is_tool = 1;
            if (puts_(o, DS_OUT_BEGIN) || put_sv(o, c) || puts_(o, DS_OUT_END)) goto oom;
        }
    }
    if (add_gen && is_last_user && !is_tool)
        if (puts_(o, DS_ASSISTANT) || puts_(o, think ? "<think>" : DS_NOTHINK)) goto oom;
    tok_bytes_free(&tmp);
    return 0;
oom:
    tok_bytes_free(&tmp);
    return pt_errf(err, "chat: out of memory");
}

/* ===== Gemma 4 ===== */

#define GQ "<|\"|>" /* Gemma's string-quote token */

/* Object keys in sorted order (Jinja's dictsort). Returns a malloc'd array. */
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
static int gemma_scalar(const json_t *v, tok_bytes *o) {
    char buf[32];
    switch (json_typeof(v)) {
    case JSON_STRING: return put(o, json_string_value(v), json_string_length(v));
    case JSON_INTEGER:
        snprintf(buf, sizeof buf, "%lld", (long long)json_integer_value(v));
        return puts_(o, buf);
    case JSON_REAL: return dump_real(json_real_value(v), o);
    case JSON_TRUE: return puts_(o, "True");
    case JSON_FALSE: return puts_(o, "False");
    case JSON_NULL: return puts_(o, "None");
    default: return chat_json_dump(v, o);
    }
}

/* format_argument(argument, escape_keys) */
static int gemma_arg(const json_t *v, int escape_keys, tok_bytes *o) {
    if (json_is_string(v)) return puts_(o, GQ) || gemma_scalar(v, o) || puts_(o, GQ);
    if (json_is_boolean(v)) return puts_(o, json_is_true(v) ? "true" : "false");
    if (json_is_object(v)) {
        size_t n;
        const char **k = sorted_keys(v, &n);
        if (!k || put(o, "{", 1)) return free(k), -1;
        for (size_t i = 0; i < n; i++) {
            int bad = (i && put(o, ",", 1)) ||
                      (escape_keys ? (puts_(o, GQ) || puts_(o, k[i]) || puts_(o, GQ)) : puts_(o, k[i])) ||
                      put(o, ":", 1) || gemma_arg(json_object_get(v, k[i]), escape_keys, o);
            if (bad) return free(k), -1;
        }
        free(k);
        return put(o, "}", 1);
    }
    if (json_is_array(v)) {
        if (put(o, "[", 1)) return -1;
        size_t i;
        json_t *it;
        json_array_foreach(v, i, it) {
            if ((i && put(o, ",", 1)) || gemma_arg(it, escape_keys, o)) return -1;
        }
        return put(o, "]", 1);
    }
    return gemma_scalar(v, o);
}

/* `value['type'] | upper` for a string type ("" otherwise). */
static int gemma_type_upper(const json_t *t, tok_bytes *o) {
    const char *s = json_string_value(t);
    if (!s) return 0;
    for (; *s; s++) {
        char c = (char)toupper((unsigned char)*s);
        if (put(o, &c, 1)) return -1;
    }
    return 0;
}
static int type_is(const json_t *t, const char *upper) {
    const char *s = json_string_value(t);
    return s && !strcasecmp(s, upper);
}

static int gemma_params(const json_t *props, tok_bytes *o);

/* `if add_comma %},{% else %}{% set add_comma = true %}` */
static int comma(int *add, tok_bytes *o) {
    if (*add) return put(o, ",", 1);
    *add = 1;
    return 0;
}

/* format_parameters(properties, required) */
static int gemma_params(const json_t *props, tok_bytes *o) {
    static const char *const standard[] = {"description", "type", "properties", "required", "nullable"};
    size_t n;
    const char **k = sorted_keys(props, &n);
    if (!k) return -1;
    int found_first = 0, rc = -1;
    for (size_t i = 0; i < n; i++) {
        int std = 0;
        for (size_t s = 0; s < PT_ARRAY_LEN(standard); s++) std |= !strcmp(k[i], standard[s]);
        if (std) continue;
        const json_t *v = json_object_get(props, k[i]);
        json_t *ty = json_object_get(v, "type");
        int add = 0;
        if ((found_first && put(o, ",", 1)) || puts_(o, k[i]) || puts_(o, ":{")) goto out;
        found_first = 1;
        const char *d = json_string_value(json_object_get(v, "description"));
        if (d && *d) {
            if (puts_(o, "description:" GQ) || puts_(o, d) || puts_(o, GQ)) goto out;
            add = 1;
        }
        if (type_is(ty, "STRING")) {
            json_t *en = json_object_get(v, "enum");
            if (json_is_array(en) && json_array_size(en)) {
                if (comma(&add, o) || puts_(o, "enum:") || gemma_arg(en, 1, o)) goto out;
            }
        } else if (type_is(ty, "ARRAY")) {
            json_t *items = json_object_get(v, "items");
            if (json_is_object(items) && json_object_size(items)) {
                if (comma(&add, o) || puts_(o, "items:{")) goto out;
                size_t ni;
                const char **ik = sorted_keys(items, &ni);
                if (!ik) goto out;
                int ff = 0, bad = 0;
                for (size_t a = 0; a < ni && !bad; a++) {
                    json_t *iv = json_object_get(items, ik[a]);
                    if (json_is_null(iv)) continue;
                    bad = ff && put(o, ",", 1);
                    ff = 1;
                    if (bad) break;
                    if (!strcmp(ik[a], "properties")) {
                        bad = puts_(o, "properties:{") || (json_is_object(iv) && gemma_params(iv, o)) ||
                              put(o, "}", 1);
                    } else if (!strcmp(ik[a], "required")) {
                        bad = puts_(o, "required:[");
                        size_t r;
                        json_t *rv;
                        json_array_foreach(iv, r, rv) {
                            bad = bad || (r && put(o, ",", 1)) || puts_(o, GQ) || gemma_scalar(rv, o) ||
                                  puts_(o, GQ);
                        }
                        bad = bad || put(o, "]", 1);
                    } else if (!strcmp(ik[a], "type")) {
                        bad = puts_(o, "type:" GQ) || gemma_type_upper(iv, o) || puts_(o, GQ);
                    } else {
                        bad = puts_(o, ik[a]) || put(o, ":", 1) || gemma_arg(iv, 1, o);
                    }
                }
                free(ik);
                if (bad || put(o, "}", 1)) goto out;
            }
        }
        if (json_is_true(json_object_get(v, "nullable"))) {
            if (comma(&add, o) || puts_(o, "nullable:true")) goto out;
        }
        if (type_is(ty, "OBJECT")) {
            json_t *p = json_object_get(v, "properties");
            if (json_is_object(p)) {
                if (comma(&add, o) || puts_(o, "properties:{") || gemma_params(p, o) || put(o, "}", 1)) goto out;
            } else if (json_is_object(v)) {
                if (comma(&add, o) || puts_(o, "properties:{") || gemma_params(v, o) || put(o, "}", 1)) goto out;
            }
            json_t *req = json_object_get(v, "required");
            if (json_is_array(req) && json_array_size(req)) {
                if (comma(&add, o) || puts_(o, "required:[")) goto out;
                size_t r;
                json_t *rv;
                json_array_foreach(req, r, rv) {
                    if ((r && put(o, ",", 1)) || puts_(o, GQ) || gemma_scalar(rv, o) || puts_(o, GQ)) goto out;
                }
                if (put(o, "]", 1)) goto out;
            }
        }
        if (comma(&add, o) || puts_(o, "type:" GQ) || gemma_type_upper(ty, o) || puts_(o, GQ "}")) goto out;
    }
    rc = 0;
out:
    free(k);
    return rc;
}

/* format_function_declaration(tool) */
static int gemma_decl(const json_t *tool, tok_bytes *o) {
    const json_t *fn = call_fn(tool);
    const char *d = json_string_value(json_object_get(fn, "description"));
    if (puts_(o, "declaration:") || puts_(o, json_string_value(json_object_get(fn, "name"))) ||
        puts_(o, "{description:" GQ) || puts_(o, d ? d : "") || puts_(o, GQ))
        return -1;
    json_t *p = json_object_get(fn, "parameters");
    if (json_is_object(p) && json_object_size(p)) {
        if (puts_(o, ",parameters:{")) return -1;
        json_t *props = json_object_get(p, "properties"), *req = json_object_get(p, "required");
        if (json_is_object(props) && json_object_size(props))
            if (puts_(o, "properties:{") || gemma_params(props, o) || puts_(o, "},")) return -1;
        if (json_is_array(req) && json_array_size(req)) {
            if (puts_(o, "required:[")) return -1;
            size_t r;
            json_t *rv;
            json_array_foreach(req, r, rv) {
                if ((r && put(o, ",", 1)) || puts_(o, GQ) || gemma_scalar(rv, o) || puts_(o, GQ)) return -1;
            }
            if (puts_(o, "],")) return -1;
        }
        json_t *ty = json_object_get(p, "type");
        if (json_string_value(ty) && *json_string_value(ty))
            if (puts_(o, "type:" GQ) || gemma_type_upper(ty, o) || puts_(o, GQ "}")) return -1;
    }
    return put(o, "}", 1);
}

/* strip_thinking(text): drop every <|channel>...<channel|> block, then trim. */
static int gemma_strip_thinking(sv text, tok_bytes *o) {
    tok_bytes t = {0};
    const char *p = text.p, *end = text.p + text.n;
    int bad = 0;
    while (!bad) {
        sv rest = {p, (size_t)(end - p)};
        const char *cl = sv_find(rest, "<channel|>");
        sv part = {p, cl ? (size_t)(cl - p) : rest.n};
        const char *op = sv_find(part, "<|channel>");
        if (op) part.n = (size_t)(op - p);
        bad = put_sv(&t, part);
        if (!cl) break;
        p = cl + 10;
    }
    bad = bad || put_sv(o, sv_strip((sv){t.v ? t.v : "", t.n}));
    tok_bytes_free(&t);
    return bad ? -1 : 0;
}

static int gemma_tool_response(const char *name, const json_t *resp, sv text, tok_bytes *o) {
    if (puts_(o, "<|tool_response>response:") || puts_(o, name) || put(o, "{", 1)) return -1;
    if (json_is_object(resp)) {
        size_t n;
        const char **k = sorted_keys(resp, &n);
        if (!k) return -1;
        for (size_t i = 0; i < n; i++)
            if ((i && put(o, ",", 1)) || puts_(o, k[i]) || put(o, ":", 1) ||
                gemma_arg(json_object_get(resp, k[i]), 0, o))
                return free(k), -1;
        free(k);
    } else if (resp) {
        if (puts_(o, "value:") || gemma_arg(resp, 0, o)) return -1;
    } else if (puts_(o, "value:" GQ) || put_sv(o, text) || puts_(o, GQ)) {
        return -1;
    }
    return puts_(o, "}<tool_response|>");
}

static int render_gemma4(const json_t *msgs, const json_t *tools, int add_gen, int think, tok_bytes *o,
                         pt_err *err) {
    tok_bytes tmp = {0};
    size_t n = json_array_size(msgs), start = 0;
    json_t *first = json_array_get(msgs, 0);
    const char *r0 = first ? role_of(first) : NULL;
    int first_sys = r0 && (!strcmp(r0, "system") || !strcmp(r0, "developer"));
    enum { PREV_NONE, PREV_TOOL_CALL, PREV_TOOL_RESPONSE } prev = PREV_NONE;
    if (puts_(o, "<bos>")) goto oom;
    if (think || has_tools(tools) || first_sys) {
        if (puts_(o, "<|turn>system\n")) goto oom;
        if (think && puts_(o, "<|think|>\n")) goto oom;
        if (first_sys) {
            if (put_sv(o, sv_strip(content_text(json_object_get(first, "content"), &tmp)))) goto oom;
            start = 1;
        }
        if (has_tools(tools)) {
            size_t i;
            json_t *t;
            json_array_foreach(tools, i, t) {
                tok_bytes d = {0};
                int bad = gemma_decl(t, &d) || puts_(o, "<|tool>") ||
                          put_sv(o, sv_strip((sv){d.v ? d.v : "", d.n})) || puts_(o, "<tool|>");
                tok_bytes_free(&d);
                if (bad) goto oom;
            }
        }
        if (puts_(o, "<turn|>\n")) goto oom;
    }
    long last_user = -1;
    for (size_t i = start; i < n; i++)
        if (!strcmp(role_of(json_array_get(msgs, i)), "user")) last_user = (long)(i - start);
    for (size_t i = start; i < n; i++) {
        json_t *m = json_array_get(msgs, i);
        const char *r = role_of(m);
        if (!strcmp(r, "tool")) continue;
        prev = PREV_NONE;
        int model = !strcmp(r, "assistant");
        const char *prev_role = NULL;
        for (size_t j = i; j-- > start;) {
            const char *rj = role_of(json_array_get(msgs, j));
            if (strcmp(rj, "tool")) {
                prev_role = rj;
                break;
            }
        }
        if (!(model && prev_role && !strcmp(prev_role, "assistant")))
            if (puts_(o, "<|turn>") || puts_(o, model ? "model" : r) || put(o, "\n", 1)) goto oom;
        json_t *tcs = json_object_get(m, "tool_calls");
        int has_calls = json_is_array(tcs) && json_array_size(tcs);
        const char *thinking = json_string_value(json_object_get(m, "reasoning"));
        if (!thinking || !*thinking) thinking = json_string_value(json_object_get(m, "reasoning_content"));
        if (thinking && *thinking && (long)(i - start) > last_user && has_calls)
            if (puts_(o, "<|channel>thought\n") || puts_(o, thinking) || puts_(o, "\n<channel|>")) goto oom;
        if (has_calls) {
            size_t k;
            json_t *tc;
            json_array_foreach(tcs, k, tc) {
                const json_t *fn = call_fn(tc);
                json_t *a = json_object_get(fn, "arguments");
                if (puts_(o, "<|tool_call>call:") || puts_(o, json_string_value(json_object_get(fn, "name"))) ||
                    put(o, "{", 1))
                    goto oom;
                if (json_is_object(a)) {
                    size_t na;
                    const char **ks = sorted_keys(a, &na);
                    if (!ks) goto oom;
                    int bad = 0;
                    for (size_t q = 0; q < na && !bad; q++)
                        bad = (q && put(o, ",", 1)) || puts_(o, ks[q]) || put(o, ":", 1) ||
                              gemma_arg(json_object_get(a, ks[q]), 0, o);
                    free(ks);
                    if (bad) goto oom;
                } else if (json_is_string(a) && put(o, json_string_value(a), json_string_length(a))) {
                    goto oom;
                }
                if (puts_(o, "}<tool_call|>")) goto oom;
            }
            prev = PREV_TOOL_CALL;
        }
        int tr_out = 0;
        if (has_calls) {
            for (size_t k = i + 1; k < n; k++) {
                json_t *f = json_array_get(msgs, k);
                if (strcmp(role_of(f), "tool")) break;
                const char *name = json_string_value(json_object_get(f, "name"));
                const char *id = json_string_value(json_object_get(f, "tool_call_id"));
                size_t q;
                json_t *tc;
                json_array_foreach(tcs, q, tc) {
                    const char *tid = json_string_value(json_object_get(tc, "id"));
                    if (id && tid && !strcmp(id, tid)) name = json_string_value(json_object_get(call_fn(tc), "name"));
                }
                json_t *body = json_object_get(f, "content");
                int bad;
                if (json_is_string(body) || json_is_array(body))
                    bad = gemma_tool_response(name ? name : "unknown", NULL, content_text(body, &tmp), o);
                else
                    bad = gemma_tool_response(name ? name : "unknown", body, (sv){"", 0}, o);
                if (bad) goto oom;
                tr_out = 1;
                prev = PREV_TOOL_RESPONSE;
            }
        }
        json_t *c = json_object_get(m, "content");
        if (json_is_string(c)) {
            sv s = {json_string_value(c), json_string_length(c)};
            if (model ? gemma_strip_thinking(s, o) : put_sv(o, sv_strip(s))) goto oom;
        } else if (json_is_array(c)) {
            size_t q;
            json_t *it;
            json_array_foreach(c, q, it) {
                const char *ty = json_string_value(json_object_get(it, "type"));
                json_t *t = json_object_get(it, "text");
                if (!ty) continue;
                if (!strcmp(ty, "text") && json_is_string(t)) {
                    sv s = {json_string_value(t), json_string_length(t)};
                    if (model ? gemma_strip_thinking(s, o) : put_sv(o, sv_strip(s))) goto oom;
                }
            }
        }
        int content_truthy = (json_is_string(c) && json_string_length(c)) || (json_is_array(c) && json_array_size(c));
        if (prev == PREV_TOOL_CALL && !tr_out) {
            if (puts_(o, "<|tool_response>")) goto oom;
        } else if (!(tr_out && !content_truthy)) {
            if (puts_(o, "<turn|>\n")) goto oom;
        }
    }
    if (add_gen && prev != PREV_TOOL_RESPONSE && prev != PREV_TOOL_CALL) {
        if (puts_(o, "<|turn>model\n")) goto oom;
        if (!think && puts_(o, "<|channel>thought\n<channel|>")) goto oom;
    }
    tok_bytes_free(&tmp);
    return 0;
oom:
    tok_bytes_free(&tmp);
    return pt_errf(err, "chat: out of memory");
}

/* ===== Selection and entry points ===== */

chat_format chat_detect(const char *arch, const char *tmpl, const char *pre, const char *tok_model) {
    if (tmpl && *tmpl) {
        if (strstr(tmpl, "<|turn>")) return CHAT_GEMMA4;
        if (strstr(tmpl, "[gMASK]") || strstr(tmpl, "<|assistant|>")) return CHAT_GLM5;
        if (strstr(tmpl, DS_ASSISTANT)) return CHAT_DEEPSEEK3;
        if (strstr(tmpl, "<|im_start|>")) return CHAT_QWEN3;
    }
    if (arch) {
        if (!strcmp(arch, "glm-dsa") || !strncmp(arch, "glm4", 4)) return CHAT_GLM5;
        if (!strcmp(arch, "deepseek2") || !strcmp(arch, "deepseek3")) return CHAT_DEEPSEEK3;
        if (!strncmp(arch, "gemma4", 6)) return CHAT_GEMMA4;
        if (!strncmp(arch, "qwen3", 5) || !strncmp(arch, "qwen2", 5)) return CHAT_QWEN3;
    }
    if (pre) {
        if (!strcmp(pre, "glm4")) return CHAT_GLM5;
        if (!strcmp(pre, "deepseek-v3")) return CHAT_DEEPSEEK3;
        if (!strncmp(pre, "qwen", 4)) return CHAT_QWEN3;
    }
    if (tok_model && !strcmp(tok_model, "gemma4")) return CHAT_GEMMA4;
    return CHAT_NONE;
}

/* A metadata string copied into a malloc'd NUL-terminated buffer (NULL when absent). */
static char *meta_str(const gguf_ctx *g, const char *key) {
    const gguf_kv *kv = gguf_find(g, key);
    if (!kv || kv->val.type != GGUF_STRING) return NULL;
    char *s = malloc(kv->val.str.len + 1);
    if (!s) return NULL;
    memcpy(s, kv->val.str.ptr, kv->val.str.len);
    s[kv->val.str.len] = 0;
    return s;
}

chat_format chat_detect_gguf(const gguf_ctx *g) {
    char *arch = meta_str(g, "general.architecture"), *tmpl = meta_str(g, "tokenizer.chat_template");
    char *pre = meta_str(g, "tokenizer.ggml.pre"), *model = meta_str(g, "tokenizer.ggml.model");
    chat_format f = chat_detect(arch, tmpl, pre, model);
    free(arch);
    free(tmpl);
    free(pre);
    free(model);
    return f;
}

const char *chat_format_name(chat_format f) {
    switch (f) {
    case CHAT_GLM5: return "glm-5";
    case CHAT_DEEPSEEK3: return "deepseek-v3";
    case CHAT_GEMMA4: return "gemma-4";
    case CHAT_QWEN3: return "qwen3";
    default: return "none";
    }
}

chat_format chat_format_from_name(const char *name) {
    for (int f = CHAT_GLM5; f <= CHAT_QWEN3; f++)
        if (name && !strcmp(name, chat_format_name((chat_format)f))) return (chat_format)f;
    return CHAT_NONE;
}

int chat_default_thinking(chat_format f) { return f == CHAT_GLM5 || f == CHAT_QWEN3; }

int chat_prompt_opens_reasoning(chat_format f, int thinking) {
    if (thinking < 0) thinking = chat_default_thinking(f);
    return thinking && (f == CHAT_GLM5 || f == CHAT_DEEPSEEK3);
}

int chat_render(chat_format f, const json_t *messages, const json_t *tools, const chat_opts *o,
                tok_bytes *out, pt_err *err) {
    if (check_conversation(messages, tools, err)) return -1;
    int think = o->thinking < 0 ? chat_default_thinking(f) : o->thinking != 0;
    int gen = o->add_generation_prompt;
    switch (f) {
    case CHAT_GLM5: return render_glm5(messages, tools, gen, think, out, err);
    case CHAT_QWEN3: return render_qwen3(messages, tools, gen, think, out, err);
    case CHAT_DEEPSEEK3: return render_deepseek3(messages, gen, think, out, err);
    case CHAT_GEMMA4: return render_gemma4(messages, tools, gen, think, out, err);
    default: return pt_errf(err, "chat: the model has no known chat format");
    }
}

/* ===== Parsing generated text ===== */

static char *dup_sv(sv s) {
    char *p = malloc(s.n + 1);
    if (!p) return NULL;
    memcpy(p, s.p, s.n);
    p[s.n] = 0;
    return p;
}

static void note_bad(chat_parsed *out, const char *fmt, const char *detail) {
    if (!out->n_bad++) snprintf(out->bad, sizeof out->bad, fmt, detail);
}

static int add_call(chat_parsed *out, sv name, json_t *args) {
    chat_tool_call *c = realloc(out->calls, (size_t)(out->n_calls + 1) * sizeof *c);
    if (!c) return -1;
    out->calls = c;
    char *a = json_dumps(args, JSON_COMPACT | JSON_PRESERVE_ORDER);
    char *nm = dup_sv(sv_strip(name));
    if (!a || !nm) {
        free(a);
        free(nm);
        return -1;
    }
    c[out->n_calls].name = nm;
    c[out->n_calls].arguments = a;
    out->n_calls++;
    return 0;
}

/* The declared JSON type of a tool's parameter ("string", ...) or NULL. */
static const char *param_type(const json_t *tools, sv fname, const char *key) {
    size_t i;
    json_t *t;
    if (!json_is_array(tools)) return NULL;
    json_array_foreach(tools, i, t) {
        const json_t *fn = call_fn(t);
        const char *n = json_string_value(json_object_get(fn, "name"));
        if (!n || strlen(n) != fname.n || memcmp(n, fname.p, fname.n)) continue;
        json_t *p = json_object_get(json_object_get(json_object_get(fn, "parameters"), "properties"), key);
        return json_string_value(json_object_get(p, "type"));
    }
    return NULL;
}

/* GLM: NAME<arg_key>k</arg_key><arg_value>v</arg_value>... (the inside of <tool_call>). */
static json_t *parse_glm_call(sv body, const json_t *tools, sv *name, const char **why) {
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
        char *kz = dup_sv(key);
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

/* Qwen3: {"name": ..., "arguments": {...}} */
static json_t *parse_json_call(sv body, sv *name, char **name_owned, const char **why) {
    json_error_t je;
    json_t *j = json_loadb(body.p, body.n, 0, &je);
    if (!json_is_object(j)) {
        json_decref(j);
        *why = "not a JSON object";
        return NULL;
    }
    const char *n = json_string_value(json_object_get(j, "name"));
    json_t *a = json_object_get(j, "arguments");
    if (json_is_string(a)) a = json_loads(json_string_value(a), 0, NULL);
    else if (a) json_incref(a);
    else a = json_object();
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

/* Gemma 4's argument syntax: {key:value,...} with <|"|> quoted strings. */
typedef struct gp {
    const char *p, *end;
    int depth;
} gp;
static void gp_ws(gp *g) {
    while (g->p < g->end && is_ws(*g->p)) g->p++;
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
            while (g->p < g->end && *g->p != ':' && *g->p != ',' && *g->p != '}') g->p++;
            sv k = sv_strip((sv){s, (size_t)(g->p - s)});
            if (k.n >= 2 && k.p[0] == '"' && k.p[k.n - 1] == '"') k.p++, k.n -= 2;
            key = k.n ? dup_sv(k) : NULL;
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
    if (gp_lit(g, GQ)) v = gp_string(g);
    else if (gp_lit(g, "{")) v = gp_object(g);
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
        while (g->p < g->end && *g->p != ',' && *g->p != '}' && *g->p != ']') g->p++;
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
static json_t *parse_gemma_call(sv body, sv *name, const char **why) {
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

/* DeepSeek: <｜tool▁call▁begin｜>NAME<｜tool▁sep｜>ARGS<｜tool▁call▁end｜> (inside calls_begin/end) */

int chat_parse(chat_format f, const char *text, size_t len, int in_reasoning, const json_t *tools,
               chat_parsed *out, pt_err *err) {
    memset(out, 0, sizeof *out);
    sv t = {text ? text : "", text ? len : 0};
    sv reasoning = {"", 0};
    /* 1. reasoning */
    const char *open = f == CHAT_GEMMA4 ? "<|channel>" : "<think>";
    const char *close = f == CHAT_GEMMA4 ? "<channel|>" : "</think>";
    sv lead = sv_strip_chars(t, 1, 0, 0);
    if (!in_reasoning && lead.n >= strlen(open) && !memcmp(lead.p, open, strlen(open))) {
        in_reasoning = 1;
        t = (sv){lead.p + strlen(open), lead.n - strlen(open)};
        if (f == CHAT_GEMMA4 && t.n >= 8 && !memcmp(t.p, "thought\n", 8)) t.p += 8, t.n -= 8;
    }
    if (in_reasoning && f != CHAT_NONE) {
        const char *e = sv_find(t, close);
        if (e) {
            reasoning = (sv){t.p, (size_t)(e - t.p)};
            t = (sv){e + strlen(close), (size_t)(t.p + t.n - (e + strlen(close)))};
        } else { /* never closed: all of it is reasoning (generation was cut short) */
            reasoning = t;
            t = (sv){"", 0};
        }
    }
    reasoning = sv_strip(reasoning);
    /* 2. tool calls, removed from the content when well formed */
    tok_bytes content = {0};
    const char *cb = NULL, *ce = NULL;
    switch (f) {
    case CHAT_GLM5:
    case CHAT_QWEN3: cb = "<tool_call>", ce = "</tool_call>"; break;
    case CHAT_GEMMA4: cb = "<|tool_call>", ce = "<tool_call|>"; break;
    case CHAT_DEEPSEEK3: cb = DS_CALL_BEGIN, ce = DS_CALL_END; break;
    default: break;
    }
    const char *p = t.p, *end = t.p + t.n;
    int oom = 0;
    while (cb && !oom) {
        sv rest = {p, (size_t)(end - p)};
        const char *b = sv_find(rest, cb);
        if (!b) break;
        oom |= put(&content, p, (size_t)(b - p));
        const char *bs = b + strlen(cb);
        sv after = {bs, (size_t)(end - bs)};
        const char *e = sv_find(after, ce);
        const char *nb = sv_find(after, cb);
        if (!e || (nb && nb < e)) {
            note_bad(out, "unterminated tool call (no %s)", ce);
            const char *stop = nb ? nb : end;
            oom |= put(&content, b, (size_t)(stop - b));
            p = stop;
            continue;
        }
        sv body = {bs, (size_t)(e - bs)}, name = {0};
        const char *why = "malformed";
        char *name_owned = NULL;
        json_t *args = NULL;
        if (f == CHAT_GLM5) args = parse_glm_call(body, tools, &name, &why);
        else if (f == CHAT_QWEN3) args = parse_json_call(body, &name, &name_owned, &why);
        else if (f == CHAT_GEMMA4) args = parse_gemma_call(body, &name, &why);
        else {
            const char *sep = sv_find(body, DS_SEP);
            if (!sep) why = "no tool separator";
            else {
                name = (sv){body.p, (size_t)(sep - body.p)};
                sv a = sv_strip((sv){sep + strlen(DS_SEP), (size_t)(body.p + body.n - (sep + strlen(DS_SEP)))});
                if (a.n >= 7 && !memcmp(a.p, "```json", 7)) { /* V3's fenced form */
                    a.p += 7, a.n -= 7;
                    a = sv_strip(a);
                    if (a.n >= 3 && !memcmp(a.p + a.n - 3, "```", 3)) a.n -= 3;
                }
                args = json_loadb(a.p, a.n, 0, NULL);
                if (!json_is_object(args)) {
                    json_decref(args);
                    args = NULL;
                    why = "arguments are not a JSON object";
                } else if (!sv_strip(name).n) {
                    json_decref(args);
                    args = NULL;
                    why = "missing function name";
                }
            }
        }
        if (args) {
            oom |= add_call(out, name, args);
            json_decref(args);
        } else {
            note_bad(out, "malformed tool call: %s", why);
            oom |= put(&content, b, (size_t)(e + strlen(ce) - b));
        }
        free(name_owned);
        p = e + strlen(ce);
    }
    oom |= put(&content, p, (size_t)(end - p));
    /* DeepSeek's wrapper tokens around the calls carry nothing */
    sv c = {content.v ? content.v : "", content.n};
    tok_bytes c2 = {0};
    if (f == CHAT_DEEPSEEK3) {
        const char *q = c.p, *ce2 = c.p + c.n;
        while (q < ce2 && !oom) {
            sv r = {q, (size_t)(ce2 - q)};
            const char *a = sv_find(r, DS_CALLS_BEGIN), *b = sv_find(r, DS_CALLS_END);
            const char *x = a && (!b || a < b) ? a : b;
            size_t xl = x == a ? strlen(DS_CALLS_BEGIN) : strlen(DS_CALLS_END);
            if (!x) {
                oom |= put(&c2, q, r.n);
                break;
            }
            oom |= put(&c2, q, (size_t)(x - q));
            q = x + xl;
        }
        c = (sv){c2.v ? c2.v : "", c2.n};
    } else if (f == CHAT_GEMMA4) {
        /* a tool call is followed by <|tool_response> (the stop token) */
        sv s = sv_strip(c);
        if (s.n >= 16 && !memcmp(s.p + s.n - 16, "<|tool_response>", 16)) c.n = (size_t)(s.p + s.n - 16 - c.p);
    }
    out->content = dup_sv(sv_strip(c));
    out->reasoning = dup_sv(reasoning);
    tok_bytes_free(&content);
    tok_bytes_free(&c2);
    if (oom || !out->content || !out->reasoning) {
        chat_parsed_free(out);
        return pt_errf(err, "chat: out of memory");
    }
    return 0;
}

void chat_parsed_free(chat_parsed *p) {
    for (int i = 0; i < p->n_calls; i++) {
        free(p->calls[i].name);
        free(p->calls[i].arguments);
    }
    free(p->calls);
    free(p->content);
    free(p->reasoning);
    memset(p, 0, sizeof *p);
}
