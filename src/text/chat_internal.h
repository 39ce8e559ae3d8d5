/* chat_internal.h — what the chat-format files share: string views, the
 * renderers' output (chat_out: the prompt, with the template's scaffolding
 * kept apart from the request's text) and its appends, the conversation
 * accessors every renderer uses, and each family's renderer and output
 * syntax. Not for use outside src/text/chat*.c; the library's interface is
 * chat.h.
 *
 *   chat.c           format detection, names, conversation checks, render entry
 *   chat_json.c      JSON written the way Jinja's tojson does
 *   chat_parse.c     the parsing machinery: reasoning split, tool-call scan
 *   chat_glm5.c      GLM-5: renderer, <arg_key>/<arg_value> call parser
 *   chat_qwen3.c     Qwen3 (ChatML): renderer, JSON call parser
 *   chat_deepseek3.c DeepSeek-V3.1: renderer, <｜tool▁sep｜> call parser
 *   chat_gemma4.c    Gemma 4: renderer (schemas, sorted keys), call:NAME{...} parser
 */
#ifndef PT_CHAT_INTERNAL_H
#define PT_CHAT_INTERNAL_H

#include <string.h>

#include "text/chat.h"

/* ===== String views ===== */

/* A view into a string (not NUL-terminated). */
typedef struct sv {
    const char *p;
    size_t n;
} sv;

static inline sv sv_of(const char *s) {
    return (sv){s, s ? strlen(s) : 0};
}
static inline int is_ws(char c) {
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}
/* Python's str.strip() (ASCII whitespace) on the sides asked for, or strip of
 * one character when `only` is not 0. */
static inline sv sv_strip_chars(sv s, int left, int right, char only) {
    while (left && s.n && (only ? s.p[0] == only : is_ws(s.p[0])))
        s.p++, s.n--;
    while (right && s.n && (only ? s.p[s.n - 1] == only : is_ws(s.p[s.n - 1])))
        s.n--;
    return s;
}
static inline sv sv_strip(sv s) {
    return sv_strip_chars(s, 1, 1, 0);
}
/* First / last occurrence of needle in s, or NULL. */
static inline const char *sv_find(sv s, const char *needle) {
    size_t m = strlen(needle);
    if (m > s.n) return NULL;
    for (size_t i = 0; i + m <= s.n; i++)
        if (!memcmp(s.p + i, needle, m)) return s.p + i;
    return NULL;
}
static inline const char *sv_rfind(sv s, const char *needle) {
    size_t m = strlen(needle);
    if (m > s.n) return NULL;
    for (size_t i = s.n - m + 1; i-- > 0;)
        if (!memcmp(s.p + i, needle, m)) return s.p + i;
    return NULL;
}
/* The text from p to the end of s. */
static inline sv sv_from(sv s, const char *p) {
    return (sv){p, (size_t)(s.p + s.n - p)};
}
/* A malloc'd NUL-terminated copy, or NULL (out of memory). */
char *chat_sv_dup(sv s);

/* ===== The renderers' output ===== */

/* What a renderer writes into: the prompt, and the byte ranges of it that came
 * from the conversation rather than from the template (chat_render_spans).
 * Two kinds of append keep the two apart: put / put_str write the template's
 * own text (its scaffolding: role markers, turn ends, tool-call markup, fixed
 * instructions); put_text, put_sv, put_jstr, put_json, and chat_mark after a
 * compound write, write text taken from the request (message content,
 * reasoning, names, arguments, tool results, tool definitions) and record its
 * range. Only scaffolding may become special tokens, so a renderer must send
 * every byte it copies from the request through the second kind. */
typedef struct chat_out {
    tok_bytes *b;       /* the prompt */
    tok_spans *content; /* the request's ranges of b, in order; NULL: not recorded */
} chat_out;

/* ===== Appends (0, or -1 on out of memory; the buffer stays NUL-terminated) ===== */

/* To a plain byte buffer (scratch, JSON, parse results). */
static inline int bput(tok_bytes *b, const char *s, size_t n) {
    return tok_bytes_append(b, s, n);
}
static inline int bput_str(tok_bytes *b, const char *s) {
    return bput(b, s, strlen(s));
}

/* The template's text. */
static inline int put(chat_out *o, const char *s, size_t n) {
    return tok_bytes_append(o->b, s, n);
}
static inline int put_str(chat_out *o, const char *s) {
    return put(o, s, strlen(s));
}
/* Record [from, end of the prompt) as the request's text (from: o->b->n before
 * a compound write of request text). 0 or -1 (oom). */
static inline int chat_mark(chat_out *o, size_t from) {
    return o->content ? tok_spans_add(o->content, from, o->b->n - from) : 0;
}
/* The request's text. */
static inline int put_text(chat_out *o, const char *s, size_t n) {
    size_t from = o->b->n;
    return tok_bytes_append(o->b, s, n) || chat_mark(o, from);
}
static inline int put_text_str(chat_out *o, const char *s) {
    return put_text(o, s, strlen(s));
}
static inline int put_sv(chat_out *o, sv s) {
    return put_text(o, s.p, s.n);
}
/* A JSON string's bytes, unquoted (may hold NULs). */
static inline int put_jstr(chat_out *o, const json_t *j) {
    return put_text(o, json_string_value(j), json_string_length(j));
}

/* ===== Conversation accessors (chat.c) ===== */

/* The text of a message's content: a string, or the concatenated "text" parts
 * of an array. NULL/other → "". The result points into the JSON or into tmp;
 * {NULL, 0} on out of memory. */
sv chat_content_text(const json_t *c, tok_bytes *tmp);
/* A message's role (validated by chat_render before any renderer runs). */
const char *chat_role(const json_t *m);
/* A tool call's function object ({name, arguments}); the call itself when it
 * has no "function" member. Tool definitions have the same shape. */
const json_t *chat_call_fn(const json_t *tc);
/* The arguments of a call as an object: *owned is set when it was parsed from
 * a string (or made empty) and must be json_decref'd. NULL with err set when
 * the arguments are neither an object nor a string holding one. */
json_t *chat_call_args(const json_t *fn, json_t **owned, pt_err *err);
/* 1 when tools is a non-empty array. */
int chat_has_tools(const json_t *tools);
/* Reasoning split out of an assistant's content when it holds "</think>"
 * (the Qwen3 / GLM templates' rule); leaves both alone otherwise. */
void chat_split_think(sv *content, sv *reasoning);

/* chat_json.c: Python's repr of a float (what Jinja writes for one). */
int chat_json_real(double d, tok_bytes *out);
/* JSON from the request as tojson writes it (chat_json_dump), recorded as the
 * request's text. 0 or -1 (oom). */
static inline int put_json(chat_out *o, const json_t *j) {
    size_t from = o->b->n;
    return chat_json_dump(j, o->b) || chat_mark(o, from);
}

/* ===== The families ===== */

/* Render messages (checked by chat_render) with the family's template:
 * add_gen = add_generation_prompt, think = resolved thinking (0/1). 0, or -1
 * with err set ("chat: out of memory", or a malformed tool call). */
int chat_render_glm5(const json_t *msgs, const json_t *tools, int add_gen, int think, chat_out *o,
                     pt_err *err);
int chat_render_qwen3(const json_t *msgs, const json_t *tools, int add_gen, int think, chat_out *o,
                      pt_err *err);
int chat_render_deepseek3(const json_t *msgs, int add_gen, int think, chat_out *o, pt_err *err);
int chat_render_gemma4(const json_t *msgs, const json_t *tools, int add_gen, int think, chat_out *o,
                       pt_err *err);

/* How a family writes its output: the reasoning block and the tool calls. */
typedef struct chat_syntax {
    const char *think_open, *think_close; /* reasoning block markers */
    const char *think_label;              /* text right after think_open to drop, or NULL */
    const char *call_open, *call_close;   /* tool call markers; NULL: no tool calls */
    /* The call between the markers: its arguments (an object the caller
     * json_decref's) and name (a view into body, or into *name_owned which the
     * caller frees); NULL with *why set when malformed. tools (may be NULL)
     * are the request's definitions. */
    json_t *(*parse_call)(sv body, const json_t *tools, sv *name, char **name_owned,
                          const char **why);
    /* Tidy the content left once the calls are cut out (wrapper tokens, a
     * trailing stop marker); may write into scratch. 0 or -1 (out of memory). */
    int (*tidy)(sv *content, tok_bytes *scratch);
    /* Other markup the model writes in its answer and the parser reads (NULL-terminated;
     * may be NULL): with the markers above, the control tokens a reply may show. */
    const char *const *markup;
} chat_syntax;

extern const chat_syntax chat_glm5_syntax;
extern const chat_syntax chat_qwen3_syntax;
extern const chat_syntax chat_deepseek3_syntax;
extern const chat_syntax chat_gemma4_syntax;

/* DeepSeek's "<｜Assistant｜>", which detection looks for in a template. */
#define DS_ASSISTANT                                                                               \
    "<\xef\xbd\x9c"                                                                                \
    "Assistant\xef\xbd\x9c>"

#endif
