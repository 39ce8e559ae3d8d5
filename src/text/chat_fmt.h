/* chat_fmt.h — the contract between the generic chat code and a chat format, and what the
 * format files share. A chat format is an ops table (chat_fmt, below), the way a model family
 * is one (model/family.h): each format is one file that ends in a `const chat_fmt`, and
 * chat_formats.c lists them all in one table. Not for use outside src/text/chat*.c; the
 * library's interface is chat.h.
 *
 *   chat_formats.c   the table: names, lookup, detection from a GGUF's metadata
 *   chat.c           conversation checks, the render entry, thinking defaults, reply markers
 *   chat_parse.c     the parsing of a reply: reasoning split, tool-call scan
 *   chat_grammar.c   GBNF of a reply: reasoning frame, tool calls, no calls, JSON
 *   chat_common.c    what format files call: conversation accessors, assistant turns' parts,
 *                    GBNF pieces of a call's grammar
 *   chat_json.c      JSON written the way Jinja's tojson does
 *   chat_glm5.c      GLM-5: renderer, <arg_key>/<arg_value> calls and their grammar
 *   chat_qwen3.c     Qwen3 (ChatML): renderer, JSON calls and their grammar
 *   chat_deepseek3.c DeepSeek-V3.1: renderer, <｜tool▁sep｜> calls and their grammar
 *   chat_gemma4.c    Gemma 4: renderer (schemas, sorted keys), call:NAME{...} calls and their
 *                    grammar
 *
 * Calls go one way: the generic files reach a format only through its chat_fmt, a format file
 * calls only the common files (chat_common.c, chat_json.c, the GBNF of JSON Schema), and no
 * format file calls another.
 */
#ifndef PT_CHAT_FMT_H
#define PT_CHAT_FMT_H

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
    tok_bytes *tmp;     /* scratch for a message's text joined from its parts
                           (chat_content_text), owned by chat_render_spans */
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
/* JSON from the request as tojson writes it (chat_json_dump), recorded as the
 * request's text. 0 or -1 (oom). */
static inline int put_json(chat_out *o, const json_t *j) {
    size_t from = o->b->n;
    return chat_json_dump(j, o->b) || chat_mark(o, from);
}
/* chat_json.c: Python's repr of a float (what Jinja writes for one). */
int chat_json_real(double d, tok_bytes *out);

/* A renderer's failure for want of memory: -1 with err set. */
static inline int chat_oom(pt_err *err) {
    return pt_errf(err, "chat: out of memory");
}

/* ===== Conversation accessors (chat_common.c) ===== */

/* The text of a message's content: a string, or the concatenated "text" parts
 * of an array. NULL/other → "". The result points into the JSON or into tmp;
 * {NULL, 0} on out of memory. */
sv chat_content_text(const json_t *c, tok_bytes *tmp);
/* A message's role (validated by chat_render before any renderer runs). */
const char *chat_role(const json_t *m);
/* A tool call's function object ({name, arguments}); the call itself when it
 * has no "function" member. Tool definitions have the same shape. */
const json_t *chat_call_fn(const json_t *tc);
/* The "name" of a function object (chat_call_fn), or NULL. */
const char *chat_fn_name(const json_t *fn);
/* The arguments of a call as an object: *owned is set when it was parsed from
 * a string (or made empty) and must be json_decref'd. NULL with err set when
 * the arguments are neither an object nor a string holding one. */
json_t *chat_call_args(const json_t *fn, json_t **owned, pt_err *err);
/* A call's arguments as the templates that write them as JSON do: a string's
 * text as it is (it holds the JSON already), other JSON as tojson, "{}" (the
 * template's own text) when absent. 0 or -1 (oom). */
int chat_put_args(chat_out *o, const json_t *args);
/* 1 when tools is a non-empty array. */
int chat_has_tools(const json_t *tools);
/* The reasoning of assistant message m: its reasoning_content when that is a
 * string, else the reasoning split out of *content when it holds "</think>" (the
 * Qwen3 / GLM templates' rule; content is left alone otherwise). */
sv chat_assistant_reasoning(const json_t *m, sv *content);

/* ===== A call's grammar (chat_common.c) ===== */

/* Append GBNF text s. 0, or -1 with err ("tool grammar: out of memory"). */
int chat_gbnf(tok_bytes *b, const char *s, pt_err *err);
/* Append s as a GBNF literal (bytes as they are; quotes, backslashes and controls escaped).
 * 0, or -1 with err. */
int chat_gbnf_lit(tok_bytes *b, const char *s, pt_err *err);
/* Append the rules of a tool's arguments (its parameters schema) in a dialect of
 * gram_from_json_schema_value (text/grammar.h), rooted at PREargs-root, then the head of the
 * call's rule, "PREcall ::= ". 0, or -1 with err naming the tool. */
int chat_gbnf_call(tok_bytes *b, const char *pre, const char *name, const json_t *params,
                   int dialect, pt_err *err);
/* Append "PREargs-root ", the arguments in the call's rule. 0, or -1 with err. */
int chat_gbnf_args_root(tok_bytes *b, const char *pre, pt_err *err);

/* ===== A format ===== */

/* A NULL-terminated list of strings, for the lists of a chat_fmt. */
#define CHAT_LIST(...)                                                                             \
    (const char *const[]) {                                                                        \
        __VA_ARGS__, NULL                                                                          \
    }

/* What chat_detect looks for in a GGUF's metadata, each a NULL-terminated list (may be NULL).
 * Detection goes stage by stage: the template's text first (a substring of
 * tokenizer.chat_template), then general.architecture, then tokenizer.ggml.pre, then
 * tokenizer.ggml.model (names; a trailing '*' matches any name with that prefix); at each
 * stage the first format of the table (chat_formats.c) that matches wins. */
typedef struct chat_hints {
    const char *const *tmpl;      /* text the chat template holds */
    const char *const *arch;      /* general.architecture */
    const char *const *pre;       /* tokenizer.ggml.pre */
    const char *const *tok_model; /* tokenizer.ggml.model */
} chat_hints;

/* How a format writes its replies: the reasoning block and the tool calls. chat_parse.c reads
 * replies with it, chat_grammar.c frames grammars with it, chat.c lists its markers. */
typedef struct chat_syntax {
    const char *think_open, *think_close; /* reasoning block markers */
    const char *think_label;              /* text right after think_open to drop, or NULL */
    const char *call_open, *call_close;   /* one tool call's markers; NULL: no tool calls */
    /* A wrapper around all of a reply's calls (DeepSeek's tool▁calls▁begin/end; both or
     * neither): it carries nothing, so the parser drops it from the content, and a grammar
     * writes it around the calls. */
    const char *calls_open, *calls_close;
    /* The call between the markers: its arguments (an object the caller
     * json_decref's) and name (a view into body, or into *name_owned which the
     * caller frees); NULL with *why set when malformed. tools (may be NULL)
     * are the request's definitions. */
    json_t *(*parse_call)(sv body, const json_t *tools, sv *name, char **name_owned,
                          const char **why);
    /* Tidy the content left once the calls are cut out (a trailing stop marker); may write
     * into scratch; NULL: nothing to tidy. 0 or -1 (out of memory). */
    int (*tidy)(sv *content, tok_bytes *scratch);
    /* Other markup the model writes in its answer and the parser reads (NULL-terminated;
     * may be NULL): with the markers above, the control tokens a reply may show. */
    const char *const *markup;
} chat_syntax;

/* A chat format: everything that differs between formats, so that chat.c, chat_parse.c and
 * chat_grammar.c never ask which format they hold. A format file ends in one of these; the
 * table in chat_formats.c lists them. */
struct chat_fmt {
    const char *name; /* what petrel.h's chat functions take: "glm-5" */
    chat_hints detect;
    int default_thinking;       /* enable_thinking unset means on (what the template does) */
    int prompt_opens_reasoning; /* with thinking on, the generation prompt ends inside the
                                   reasoning block (it writes think_open) */
    /* Render messages (checked by chat_render) with the format's template:
     * add_gen = add_generation_prompt, think = resolved thinking (0/1). 0, or -1
     * with err set (chat_oom, or a malformed tool call). */
    int (*render)(const json_t *msgs, const json_t *tools, int add_gen, int think, chat_out *o,
                  pt_err *err);
    chat_syntax syntax;
    /* Append the rules PREcall (one call of the tool `name` with these parameters, a schema)
     * and those it needs, in the syntax above (chat_tool_grammar writes the rest). 0, or -1
     * with err. NULL when the format has no tool calls. */
    int (*call_grammar)(tok_bytes *out, const char *pre, const char *name, const json_t *params,
                        pt_err *err);
    const char *calls_sep; /* GBNF written between two parallel calls, a space after it; NULL:
                              none */
};

#endif
