/* api_chat.c — the public chat functions of petrel.h over text/chat.c: formats
 * by name, rendering a conversation given as JSON text (with the byte ranges
 * of its content, which pt_tokenize_spans keeps from becoming special tokens),
 * the markup a streaming reader must know, and parsing generated text into
 * pt_chat_parsed.
 *
 * Conversations cross the public boundary as JSON text rather than jansson
 * values, so petrel.h depends on no JSON library; the cost is one parse per
 * turn, small beside a prefill. */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "engine/api_text.h"

static int fail(char *err, size_t err_len, const char *msg) {
    if (err && err_len) snprintf(err, err_len, "%s", msg);
    return -1;
}

const char *pt_engine_chat_format(const pt_engine *e) {
    return chat_fmt_name(engine_text_of(e)->fmt);
}

int pt_chat_format_known(const char *name) {
    return chat_fmt_find(name) != NULL;
}

const char *pt_chat_format_name(int i) {
    const chat_fmt *f = i >= 0 ? chat_fmt_at(i) : NULL;
    return f ? chat_fmt_name(f) : NULL;
}

int pt_chat_default_thinking(const char *format) {
    return chat_default_thinking(chat_fmt_find(format));
}

int pt_chat_opens_reasoning(const char *format, int thinking) {
    return chat_prompt_opens_reasoning(chat_fmt_find(format), thinking);
}

/* The format named, or NULL with a message naming the known ones. */
static const chat_fmt *format_of(const char *name, char *err, size_t err_len) {
    const chat_fmt *f = chat_fmt_find(name);
    if (!f && err && err_len) {
        char known[256];
        chat_fmt_names(known, sizeof known);
        snprintf(err, err_len, "%s chat format%s%s%s (known: %s)",
                 name && strcmp(name, "none") ? "unknown" : "no",
                 name && strcmp(name, "none") ? " '" : "", name && strcmp(name, "none") ? name : "",
                 name && strcmp(name, "none") ? "'" : "", known);
    }
    return f;
}

/* Parse JSON text that must be an array; NULL text gives NULL (no error). */
static int load_array(const char *what, const char *text, json_t **out, char *err, size_t err_len) {
    *out = NULL;
    if (!text) return 0;
    json_error_t je;
    json_t *j = json_loads(text, 0, &je);
    if (!j || !json_is_array(j)) {
        json_decref(j);
        if (err && err_len)
            snprintf(err, err_len, "%s: %s%s", what,
                     j ? "" : "not valid JSON: ", j ? "expected an array" : je.text);
        return -1;
    }
    *out = j;
    return 0;
}

int pt_chat_render(const char *format, const char *messages_json, const char *tools_json,
                   const pt_chat_opts *o, pt_buf *out, char *err, size_t err_len) {
    return pt_chat_render_spans(format, messages_json, tools_json, o, out, NULL, err, err_len);
}

int pt_chat_render_spans(const char *format, const char *messages_json, const char *tools_json,
                         const pt_chat_opts *o, pt_buf *out, pt_spans *content, char *err,
                         size_t err_len) {
    if (content) content->n = 0;
    const chat_fmt *f = format_of(format, err, err_len);
    if (!f) return -1;
    json_t *msgs, *tools;
    if (!messages_json) return fail(err, err_len, "messages: missing");
    if (load_array("messages", messages_json, &msgs, err, err_len)) return -1;
    if (load_array("tools", tools_json, &tools, err, err_len)) {
        json_decref(msgs);
        return -1;
    }
    chat_opts co = {.add_generation_prompt = o ? o->add_generation_prompt : 1,
                    .thinking = o ? o->thinking : -1};
    pt_err pe = {{0}};
    int rc = chat_render_spans(f, msgs, tools, &co, out, content, &pe);
    json_decref(msgs);
    json_decref(tools);
    if (rc) return fail(err, err_len, pe.msg);
    if (pt_buf_append(out, "", 0)) return fail(err, err_len, "out of memory");
    return 0;
}

int pt_chat_markers_of(const char *format, pt_chat_markers *m) {
    return chat_markers(chat_fmt_find(format), m);
}

int pt_chat_markup_tokens(const pt_engine *e, const char *format, unsigned char *show, int n) {
    const tok_vocab *v = engine_vocab(e, NULL, 0);
    const chat_fmt *f = chat_fmt_find(format);
    if (!v || !f) return -1;
    const char *markup[16];
    int n_markup = chat_reply_markup(f, markup, 16);
    int marked = 0;
    for (int32_t id = 0; id < n; id++) {
        show[id] = 0;
        if (id >= tok_n_vocab(v) || !(tok_attr(v, id) & TOK_ATTR_CONTROL)) continue;
        size_t len = 0;
        const char *p = pt_token_piece(e, id, PT_DETOKENIZE_RENDER_SPECIAL, &len);
        for (int k = 0; p && k < n_markup; k++)
            if (len == strlen(markup[k]) && !memcmp(p, markup[k], len)) show[id] = 1;
        marked += show[id];
    }
    return marked;
}

int pt_chat_parse(const char *format, const char *text, size_t len, int in_reasoning,
                  const char *tools_json, pt_chat_parsed *out, char *err, size_t err_len) {
    memset(out, 0, sizeof *out);
    const chat_fmt *f = format_of(format, err, err_len);
    if (!f) return -1;
    json_t *tools;
    if (load_array("tools", tools_json, &tools, err, err_len)) return -1;
    pt_err pe = {{0}};
    int rc = chat_parse(f, text, len, in_reasoning, tools, out, &pe);
    json_decref(tools);
    return rc ? fail(err, err_len, pe.msg) : 0;
}

void pt_chat_parsed_free(pt_chat_parsed *p) {
    chat_parsed_free(p);
}
