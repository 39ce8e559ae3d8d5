/* chat.c — choosing a model's chat format, the conversation's validation and
 * the render entry point; the accessors every family's renderer shares.
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

#include "text/chat_internal.h"

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
            json_string_value(json_object_get(fn, "name"))
                ? json_string_value(json_object_get(fn, "name"))
                : "?");
    return NULL;
}

/* The name of a tool call, or NULL with err set. */
static const char *call_name(const json_t *tc, pt_err *err) {
    const char *n = json_string_value(json_object_get(chat_call_fn(tc), "name"));
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
            if (!json_is_object(t) || !json_string_value(json_object_get(chat_call_fn(t), "name")))
                return pt_errf(err, "chat: tool %zu has no function name", i);
        }
    }
    return 0;
}

int chat_has_tools(const json_t *tools) {
    return json_is_array(tools) && json_array_size(tools) > 0;
}

/* The templates' rule, in Python: reasoning = content.split('</think>')[0]
 * .rstrip('\n').split('<think>')[-1].lstrip('\n'); content =
 * content.split('</think>')[-1].lstrip('\n'). */
void chat_split_think(sv *content, sv *reasoning) {
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

/* ===== Selection and entry points ===== */

chat_format chat_detect(const char *arch, const char *tmpl, const char *pre,
                        const char *tok_model) {
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
    char *arch = meta_str(g, "general.architecture"),
         *tmpl = meta_str(g, "tokenizer.chat_template");
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

int chat_default_thinking(chat_format f) {
    return f == CHAT_GLM5 || f == CHAT_QWEN3;
}

int chat_prompt_opens_reasoning(chat_format f, int thinking) {
    if (thinking < 0) thinking = chat_default_thinking(f);
    return thinking && (f == CHAT_GLM5 || f == CHAT_DEEPSEEK3);
}

int chat_render(chat_format f, const json_t *messages, const json_t *tools, const chat_opts *o,
                tok_bytes *out, pt_err *err) {
    return chat_render_spans(f, messages, tools, o, out, NULL, err);
}

int chat_render_spans(chat_format f, const json_t *messages, const json_t *tools,
                      const chat_opts *o, tok_bytes *out, tok_spans *content, pt_err *err) {
    if (content) content->n = 0;
    if (check_conversation(messages, tools, err)) return -1;
    int think = o->thinking < 0 ? chat_default_thinking(f) : o->thinking != 0;
    int gen = o->add_generation_prompt;
    chat_out co = {.b = out, .content = content};
    switch (f) {
    case CHAT_GLM5: return chat_render_glm5(messages, tools, gen, think, &co, err);
    case CHAT_QWEN3: return chat_render_qwen3(messages, tools, gen, think, &co, err);
    case CHAT_DEEPSEEK3: return chat_render_deepseek3(messages, gen, think, &co, err);
    case CHAT_GEMMA4: return chat_render_gemma4(messages, tools, gen, think, &co, err);
    default: return pt_errf(err, "chat: the model has no known chat format");
    }
}
