/* chat_parse.c — the parsing of generated text into reasoning, content and
 * tool calls, for every format (see chat.h for the contract). What differs
 * between formats — the markers, how one call's body reads, the content's
 * last tidying — is the format's chat_syntax (chat_fmt.h); the steps are the
 * same:
 *
 *   1. reasoning: the text up to the closing marker when the prompt opened a
 *      reasoning block or the text starts with the opening marker (all of the
 *      text when the block never closes: generation was cut short);
 *   2. tool calls: every well-formed call between the call markers becomes a
 *      chat_tool_call and leaves the content; a malformed or unterminated one
 *      stays in the content as text and is counted in n_bad;
 *   3. the content is tidied (the wrapper of the calls, whatever the format's
 *      tidy op drops) and stripped.
 *
 * Generated text is hostile input: nothing here fails on content.
 */
#include <stdio.h>
#include <stdlib.h>

#include "text/chat_fmt.h"

/* The syntax when no format is known: the reasoning markers are recognised at
 * the start of the text (and dropped) but no block is split out. */
static const chat_syntax k_none_syntax = {.think_open = "<think>", .think_close = "</think>"};

/* Count a malformed call; the first one's reason is kept. */
static void note_bad(chat_parsed *out, const char *fmt, const char *detail) {
    if (!out->n_bad++) snprintf(out->bad, sizeof out->bad, fmt, detail);
}

/* Append a call (name stripped, arguments compact JSON). 0; 1 when the
 * arguments cannot be written as JSON (not UTF-8): nothing is added; -1 (oom). */
static int add_call(chat_parsed *out, sv name, json_t *args) {
    chat_tool_call *c = realloc(out->calls, (size_t)(out->n_calls + 1) * sizeof *c);
    if (!c) return -1;
    out->calls = c;
    /* jansson refuses to write a string that is not UTF-8, and an argument value
     * the model wrote may hold any bytes (kept as text when it is not JSON): such
     * a call is malformed, not an out-of-memory failure (found by
     * tests/fuzz/fuzz_chat_parse.c) */
    char *a = json_dumps(args, JSON_COMPACT | JSON_PRESERVE_ORDER);
    if (!a) return 1;
    char *nm = chat_sv_dup(sv_strip(name));
    if (!nm) {
        free(a);
        return -1;
    }
    c[out->n_calls].name = nm;
    c[out->n_calls].arguments = a;
    out->n_calls++;
    return 0;
}

/* Step 1: split the reasoning block off *t (which is left holding the rest).
 * split is 0 without a format, which only drops a leading opening marker. */
static sv split_reasoning(const chat_syntax *sy, int split, int in_reasoning, sv *t) {
    sv reasoning = {"", 0};
    size_t open_n = strlen(sy->think_open), close_n = strlen(sy->think_close);
    sv lead = sv_strip_chars(*t, 1, 0, 0);
    if (!in_reasoning && lead.n >= open_n && !memcmp(lead.p, sy->think_open, open_n)) {
        in_reasoning = 1;
        *t = (sv){lead.p + open_n, lead.n - open_n};
        size_t label_n = sy->think_label ? strlen(sy->think_label) : 0;
        if (label_n && t->n >= label_n && !memcmp(t->p, sy->think_label, label_n))
            t->p += label_n, t->n -= label_n;
    }
    if (in_reasoning && split) {
        const char *e = sv_find(*t, sy->think_close);
        if (e) {
            reasoning = (sv){t->p, (size_t)(e - t->p)};
            *t = sv_from(*t, e + close_n);
        } else { /* never closed: all of it is reasoning (generation was cut short) */
            reasoning = *t;
            *t = (sv){"", 0};
        }
    }
    return sv_strip(reasoning);
}

/* Step 2 for the call starting at b (its opening marker): a well-formed call
 * goes to out, anything else is copied to content. Returns where scanning
 * goes on, or NULL on out of memory. */
static const char *take_call(const chat_syntax *sy, const char *b, const char *end,
                             const json_t *tools, chat_parsed *out, tok_bytes *content) {
    const char *bs = b + strlen(sy->call_open);
    sv after = {bs, (size_t)(end - bs)};
    const char *e = sv_find(after, sy->call_close);
    const char *nb = sv_find(after, sy->call_open);
    if (!e || (nb && nb < e)) {
        note_bad(out, "unterminated tool call (no %s)", sy->call_close);
        const char *stop = nb ? nb : end;
        return bput(content, b, (size_t)(stop - b)) ? NULL : stop;
    }
    const char *next = e + strlen(sy->call_close);
    sv body = {bs, (size_t)(e - bs)}, name = {0};
    const char *why = "malformed";
    char *name_owned = NULL;
    json_t *args = sy->parse_call(body, tools, &name, &name_owned, &why);
    int oom;
    if (args) {
        oom = add_call(out, name, args);
        json_decref(args);
        if (oom == 1) why = "arguments are not valid UTF-8";
    }
    if (!args || oom == 1) {
        note_bad(out, "malformed tool call: %s", why);
        oom = bput(content, b, (size_t)(next - b));
    }
    free(name_owned);
    return oom ? NULL : next;
}

/* Step 2: the text t with the calls cut out into content. 0 or -1 (oom). */
static int take_calls(const chat_syntax *sy, sv t, const json_t *tools, chat_parsed *out,
                      tok_bytes *content) {
    const char *p = t.p, *end = t.p + t.n;
    while (sy->call_open) {
        const char *b = sv_find((sv){p, (size_t)(end - p)}, sy->call_open);
        if (!b) break;
        if (bput(content, p, (size_t)(b - p))) return -1;
        p = take_call(sy, b, end, tools, out, content);
        if (!p) return -1;
    }
    return bput(content, p, (size_t)(end - p));
}

/* Step 3: drop every calls_open / calls_close wrapper from *content (into scratch): it
 * carries nothing once the calls are out. 0 or -1 (oom). */
static int drop_wrappers(const chat_syntax *sy, sv *content, tok_bytes *scratch) {
    const char *q = content->p, *end = content->p + content->n;
    int oom = 0;
    while (q < end && !oom) {
        sv r = {q, (size_t)(end - q)};
        const char *a = sv_find(r, sy->calls_open), *b = sv_find(r, sy->calls_close);
        const char *x = a && (!b || a < b) ? a : b;
        size_t xl = x == a ? strlen(sy->calls_open) : strlen(sy->calls_close);
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

int chat_parse(const chat_fmt *f, const char *text, size_t len, int in_reasoning,
               const json_t *tools, chat_parsed *out, pt_err *err) {
    memset(out, 0, sizeof *out);
    const chat_syntax *sy = f ? &f->syntax : &k_none_syntax;
    sv t = {text ? text : "", text ? len : 0};
    sv reasoning = split_reasoning(sy, f != NULL, in_reasoning, &t);
    tok_bytes content = {0}, scratch = {0};
    int oom = take_calls(sy, t, tools, out, &content) != 0;
    sv c = {content.v ? content.v : "", content.n};
    if (!oom && sy->calls_open) oom = drop_wrappers(sy, &c, &scratch) != 0;
    if (!oom && sy->tidy) oom = sy->tidy(&c, &scratch) != 0;
    out->content = chat_sv_dup(sv_strip(c));
    out->reasoning = chat_sv_dup(reasoning);
    tok_bytes_free(&content);
    tok_bytes_free(&scratch);
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
