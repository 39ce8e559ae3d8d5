/* chat.c — what every chat format shares around its ops (chat_fmt.h): the
 * conversation's validation and the render entry point, the thinking defaults,
 * and the markers a reply's reader watches for.
 *
 * Each renderer (chat_glm5.c, chat_qwen3.c, chat_deepseek3.c, chat_gemma4.c)
 * transcribes one family's Jinja template (the one named in
 * ../shared/fixtures/templates/README.md) statement by statement, quirks
 * included (GLM-5 drops the reasoning of turns before the last user message,
 * DeepSeek-V3.1 ignores tool definitions, Gemma 4 sorts keys and upper-cases
 * types): the goal is the byte string the model was trained on, which the
 * golden tests check. See chat.h for the conversation's JSON shape.
 */
#include <stdio.h>
#include <stdlib.h>

#include "text/chat_fmt.h"

/* The name of a tool call, or NULL with err set. */
static const char *call_name(const json_t *tc, pt_err *err) {
    const char *n = chat_fn_name(chat_call_fn(tc));
    if (!n) pt_errf(err, "a tool call has no function name");
    return n;
}

/* Validate the shape every renderer relies on. 0, or -1 with err set. */
static int check_conversation(const json_t *messages, const json_t *tools, pt_err *err) {
    if (!json_is_array(messages)) return pt_errf(err, "chat: messages must be a JSON array");
    size_t i;
    json_t *m;
    json_array_foreach(messages, i, m) {
        const char *r = chat_role(m);
        if (!json_is_object(m) || !r) return pt_errf(err, "chat: message %zu has no role", i);
        if (strcmp(r, "system") && strcmp(r, "user") && strcmp(r, "assistant") &&
            strcmp(r, "tool") && strcmp(r, "developer"))
            return pt_errf(err,
                           "chat: message %zu has unknown role '%s' (expected system, user, "
                           "assistant or tool)",
                           i, r);
        json_t *tcs = json_object_get(m, "tool_calls");
        if (tcs && !json_is_null(tcs)) {
            if (!json_is_array(tcs))
                return pt_errf(err, "chat: message %zu: tool_calls must be an array", i);
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
            if (!json_is_object(t) || !chat_fn_name(chat_call_fn(t)))
                return pt_errf(err, "chat: tool %zu has no function name", i);
        }
    }
    return 0;
}

int chat_default_thinking(const chat_fmt *f) {
    return f && f->default_thinking;
}

int chat_prompt_opens_reasoning(const chat_fmt *f, int thinking) {
    if (thinking < 0) thinking = chat_default_thinking(f);
    return thinking && f && f->prompt_opens_reasoning;
}

int chat_render(const chat_fmt *f, const json_t *messages, const json_t *tools, const chat_opts *o,
                tok_bytes *out, pt_err *err) {
    return chat_render_spans(f, messages, tools, o, out, NULL, err);
}

int chat_render_spans(const chat_fmt *f, const json_t *messages, const json_t *tools,
                      const chat_opts *o, tok_bytes *out, tok_spans *content, pt_err *err) {
    if (content) content->n = 0;
    if (check_conversation(messages, tools, err)) return -1;
    if (!f) return pt_errf(err, "chat: the model has no known chat format");
    int think = o->thinking < 0 ? chat_default_thinking(f) : o->thinking != 0;
    tok_bytes tmp = {0};
    chat_out co = {.b = out, .content = content, .tmp = &tmp};
    int rc = f->render(messages, tools, o->add_generation_prompt, think, &co, err);
    tok_bytes_free(&tmp);
    return rc;
}

/* ===== What a reply's reader watches for ===== */

int chat_reply_markup(const chat_fmt *f, const char **out, int cap) {
    int n = 0;
    if (f) {
        const chat_syntax *sy = &f->syntax;
        const char *fixed[] = {sy->think_open, sy->think_close, sy->call_open,
                               sy->call_close, sy->calls_open,  sy->calls_close};
        for (size_t i = 0; i < PT_ARRAY_LEN(fixed) && n + 1 < cap; i++)
            if (fixed[i]) out[n++] = fixed[i];
        for (int i = 0; sy->markup && sy->markup[i] && n + 1 < cap; i++)
            out[n++] = sy->markup[i];
    }
    out[n] = NULL;
    return n;
}

int chat_markers(const chat_fmt *f, pt_chat_markers *m) {
    memset(m, 0, sizeof *m);
    if (!f) return -1;
    m->reasoning_open = f->syntax.think_open;
    m->reasoning_close = f->syntax.think_close;
    /* a wrapper of the calls comes before the first call's marker */
    if (f->syntax.calls_open) m->tool_calls[m->n_tool_calls++] = f->syntax.calls_open;
    if (f->syntax.call_open) m->tool_calls[m->n_tool_calls++] = f->syntax.call_open;
    return 0;
}
