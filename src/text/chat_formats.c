/* chat_formats.c — the table of chat formats (see chat_fmt.h), and what is
 * looked up in it: a format by name, the names, and a model's format from its
 * GGUF metadata. A new format is one file defining its chat_fmt, plus one line
 * in CHAT_FORMATS.
 *
 * The table's order is the order in which each stage of detection tries the
 * formats (chat_fmt.h), so it decides for a template that holds two formats'
 * markers: Gemma 4's "<|turn>" wins over GLM's "<|assistant|>" and DeepSeek's
 * "<｜Assistant｜>", and ChatML's "<|im_start|>", which many templates write,
 * loses to every other. It is also the order of the names (what the error for
 * an unknown format lists).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "text/chat_fmt.h"

extern const chat_fmt chat_gemma4_format;    /* gemma-4: Gemma 4 */
extern const chat_fmt chat_glm5_format;      /* glm-5: GLM-4.7 / GLM-5.x */
extern const chat_fmt chat_deepseek3_format; /* deepseek-v3: DeepSeek-V3.1 */
extern const chat_fmt chat_qwen3_format;     /* qwen3: Qwen3 (ChatML) */

static const chat_fmt *const CHAT_FORMATS[] = {&chat_gemma4_format, &chat_glm5_format,
                                               &chat_deepseek3_format, &chat_qwen3_format};

const chat_fmt *chat_fmt_at(int i) {
    return i >= 0 && (size_t)i < PT_ARRAY_LEN(CHAT_FORMATS) ? CHAT_FORMATS[i] : NULL;
}

const chat_fmt *chat_fmt_find(const char *name) {
    for (size_t i = 0; name && i < PT_ARRAY_LEN(CHAT_FORMATS); i++)
        if (!strcmp(name, CHAT_FORMATS[i]->name)) return CHAT_FORMATS[i];
    return NULL;
}

const char *chat_fmt_name(const chat_fmt *f) {
    return f ? f->name : "none";
}

void chat_fmt_names(char *out, size_t cap) {
    if (!cap) return;
    out[0] = 0;
    for (size_t i = 0, n = 0; i < PT_ARRAY_LEN(CHAT_FORMATS) && n < cap; i++)
        n += (size_t)snprintf(out + n, cap - n, "%s%s", i ? ", " : "", CHAT_FORMATS[i]->name);
}

/* ===== Detection ===== */

/* Whether value is one of names (a name ending in '*' matches every value with that prefix);
 * substring: whether value holds one of names. */
static int hint_matches(const char *const *names, const char *value, int substring) {
    for (; names && *names; names++) {
        size_t n = strlen(*names);
        if (substring                     ? strstr(value, *names) != NULL
            : n && (*names)[n - 1] == '*' ? !strncmp(value, *names, n - 1)
                                          : !strcmp(value, *names))
            return 1;
    }
    return 0;
}

const chat_fmt *chat_detect(const char *arch, const char *tmpl, const char *pre,
                            const char *tok_model) {
    /* the stages in order: what each reads, and the formats' hints for it */
    const char *value[] = {tmpl && *tmpl ? tmpl : NULL, arch, pre, tok_model};
    for (size_t stage = 0; stage < PT_ARRAY_LEN(value); stage++)
        for (size_t i = 0; value[stage] && i < PT_ARRAY_LEN(CHAT_FORMATS); i++) {
            const chat_hints *h = &CHAT_FORMATS[i]->detect;
            const char *const *const hints[] = {h->tmpl, h->arch, h->pre, h->tok_model};
            if (hint_matches(hints[stage], value[stage], stage == 0)) return CHAT_FORMATS[i];
        }
    return NULL;
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

const chat_fmt *chat_detect_gguf(const gguf_ctx *g) {
    char *arch = meta_str(g, "general.architecture"),
         *tmpl = meta_str(g, "tokenizer.chat_template");
    char *pre = meta_str(g, "tokenizer.ggml.pre"), *model = meta_str(g, "tokenizer.ggml.model");
    const chat_fmt *f = chat_detect(arch, tmpl, pre, model);
    free(arch);
    free(tmpl);
    free(pre);
    free(model);
    return f;
}
