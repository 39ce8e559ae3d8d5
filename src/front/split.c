/* split.c — a chat answer split into reasoning, content and tool-call markup as it streams.
 * See split.h. */
#include "front/split.h"

#include <string.h>

/* ===== The streaming splitter ===== */

void fe_split_init(fe_split *s, const char *format, int in_reasoning, int tools, int raw) {
    memset(s, 0, sizeof *s);
    pt_chat_markers mk;
    s->raw = raw || pt_chat_markers_of(format, &mk) != 0;
    if (!s->raw) {
        s->open = mk.reasoning_open;
        s->close = mk.reasoning_close;
        for (int i = 0; tools && i < mk.n_tool_calls && i < 2; i++)
            s->calls[s->n_calls++] = mk.tool_calls[i];
    }
    s->mode = !s->raw && in_reasoning ? FE_SPLIT_REASONING : FE_SPLIT_CONTENT;
    s->may_open = !s->raw && !in_reasoning;
}

void fe_split_free(fe_split *s) {
    pt_buf_free(&s->text);
    pt_buf_free(&s->content);
}

/* Longest suffix of p[0..n) that is a proper prefix of marker m. */
static size_t partial_suffix(const char *p, size_t n, const char *m) {
    size_t ml = strlen(m);
    for (size_t k = ml - 1 < n ? ml - 1 : n; k > 0; k--)
        if (!memcmp(p + n - k, m, k)) return k;
    return 0;
}

static const char *find(const char *p, size_t n, const char *m) {
    return memmem(p, n, m, strlen(m));
}

static int is_blank(char c) {
    return c == ' ' || c == '\n' || c == '\t' || c == '\r';
}

static int split_emit(fe_split *s, int kind, const char *p, size_t n, fe_delta_fn fn, void *ud) {
    if (!s->started) { /* sections are shown without their leading blank lines, as chat_parse strips
                          them */
        while (n && is_blank(*p))
            p++, n--;
        if (!n) return 0;
        s->started = 1;
    }
    if (!n) return 0;
    if (kind == FE_CONTENT && pt_buf_append(&s->content, p, n)) return -1;
    return fn(ud, kind, p, n) ? -1 : 0;
}

int fe_split_push(fe_split *s, const char *p, size_t n, int final, fe_delta_fn fn, void *ud) {
    if (pt_buf_append(&s->text, p, n)) return -1;
    for (;;) {
        const char *a = s->text.v + s->pos;
        size_t avail = s->text.n - s->pos;
        if (s->raw) {
            s->pos = s->text.n;
            s->started = 1;
            return avail && fn(ud, FE_CONTENT, a, avail) ? -1 : 0;
        }
        if (s->mode == FE_SPLIT_TOOLS) {
            s->pos = s->text.n;
            return 0;
        }
        if (s->mode == FE_SPLIT_CONTENT && s->may_open) {
            size_t k = 0;
            while (k < avail && is_blank(a[k]))
                k++;
            s->pos += k, a += k, avail -= k;
            if (!avail) return 0;
            size_t ol = strlen(s->open);
            if (avail >= ol && !memcmp(a, s->open, ol)) {
                s->pos += ol;
                s->mode = FE_SPLIT_REASONING;
                s->may_open = 0;
                s->started = 0;
                continue;
            }
            if (avail < ol && !memcmp(a, s->open, avail) && !final) return 0;
            s->may_open = 0;
        }
        if (s->mode == FE_SPLIT_REASONING) {
            const char *e = find(a, avail, s->close);
            if (e) {
                if (split_emit(s, FE_REASONING, a, (size_t)(e - a), fn, ud)) return -1;
                s->pos += (size_t)(e - a) + strlen(s->close);
                s->mode = FE_SPLIT_CONTENT;
                s->started = 0;
                continue;
            }
            size_t hold = final ? 0 : partial_suffix(a, avail, s->close);
            s->pos += avail - hold;
            return split_emit(s, FE_REASONING, a, avail - hold, fn, ud);
        }
        /* content */
        const char *first = NULL;
        for (int i = 0; i < s->n_calls; i++) {
            const char *c = find(a, avail, s->calls[i]);
            if (c && (!first || c < first)) first = c;
        }
        if (first) {
            if (split_emit(s, FE_CONTENT, a, (size_t)(first - a), fn, ud)) return -1;
            s->mode = FE_SPLIT_TOOLS;
            s->pos = s->text.n;
            return 0;
        }
        size_t hold = 0;
        for (int i = 0; !final && i < s->n_calls; i++) {
            size_t h = partial_suffix(a, avail, s->calls[i]);
            if (h > hold) hold = h;
        }
        s->pos += avail - hold;
        return split_emit(s, FE_CONTENT, a, avail - hold, fn, ud);
    }
}
