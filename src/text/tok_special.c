/* tok_special.c — special tokens: which tokens are control / end-of-generation
 * whatever the file says (llama.cpp's lists of texts), the table of special
 * token texts by first byte, and the partition of input text around the
 * special-token texts the caller allows.
 *
 * The partition reproduces llama.cpp's order (longest token first, left to
 * right inside each remaining text fragment), so results match it even when
 * special texts overlap. Without TOK_PARSE_SPECIAL only USER_DEFINED tokens
 * are recognised, so user text can never forge a control token; with it, the
 * caller's plain ranges (a chat prompt's content) are still read that way.
 */
#include <stdlib.h>
#include <string.h>

#include "text/tok_internal.h"

/* ===== Attributes from token texts ===== */

/* Texts llama.cpp marks as control tokens and, for the first list, as
 * end-of-generation, whatever the file's token_type says. */
static const char *const k_eog_texts[] = {"<|eot_id|>",
                                          "<|im_end|>",
                                          "<|end|>",
                                          "<|return|>",
                                          "<|call|>",
                                          "<|flush|>",
                                          "<|calls|>",
                                          "<end_of_turn>",
                                          "<|endoftext|>",
                                          "</s>",
                                          "<|eom_id|>",
                                          "<EOT>",
                                          "_<EOT>",
                                          "[EOT]",
                                          "[EOS]",
                                          "<|end_of_text|>",
                                          "<end_of_utterance>",
                                          "<eos>",
                                          "<turn|>",
                                          "<|tool_response>",
                                          ("<\xef\xbd\x9c"
                                           "end\xe2\x96\x81of\xe2\x96\x81sentence\xef\xbd\x9c>"),
                                          "[e~["};
static const char *const k_fim_texts[] = {"<|fim_prefix|>",
                                          "<fim-prefix>",
                                          "<fim_prefix>",
                                          "<\xef\xbd\x9c"
                                          "fim\xe2\x96\x81"
                                          "begin\xef\xbd\x9c>",
                                          "<PRE>",
                                          "\xe2\x96\x81<PRE>",
                                          "<|code_prefix|>",
                                          "<|prefix|>",
                                          "<|fim_suffix|>",
                                          "<fim-suffix>",
                                          "<fim_suffix>",
                                          "<\xef\xbd\x9c"
                                          "fim\xe2\x96\x81hole\xef\xbd\x9c>",
                                          "<SUF>",
                                          "\xe2\x96\x81<SUF>",
                                          "<|code_suffix|>",
                                          "<|suffix|>",
                                          "<|fim_middle|>",
                                          "<fim-middle>",
                                          "<fim_middle>",
                                          "<\xef\xbd\x9c"
                                          "fim\xe2\x96\x81"
                                          "end\xef\xbd\x9c>",
                                          "<MID>",
                                          "\xe2\x96\x81<MID>",
                                          "<|code_middle|>",
                                          "<|middle|>",
                                          "<|fim_pad|>",
                                          "<fim-pad>",
                                          "<fim_pad>",
                                          "<PAD>",
                                          "[PAD]",
                                          "<|fim_repo|>",
                                          "<|repo_name|>",
                                          "<fim-repo>",
                                          "<REPO>",
                                          "<reponame>",
                                          "<|file_sep|>"};

void tok_special_attrs(tok_vocab *v) {
    for (size_t k = 0; k < PT_ARRAY_LEN(k_fim_texts); k++) {
        int32_t id = tok_find(v, k_fim_texts[k], strlen(k_fim_texts[k]));
        if (id >= 0) v->attr[id] |= TOK_ATTR_CONTROL;
    }
    for (size_t k = 0; k < PT_ARRAY_LEN(k_eog_texts); k++) {
        int32_t id = tok_find(v, k_eog_texts[k], strlen(k_eog_texts[k]));
        if (id >= 0) v->attr[id] |= TOK_ATTR_CONTROL, v->eog[id] = 1;
    }
    static const char *const user_defined[] = {"<|channel|>", "<|message|>", "<|start|>",
                                               "<|constrain|>"};
    for (size_t k = 0; k < PT_ARRAY_LEN(user_defined); k++) {
        int32_t id = tok_find(v, user_defined[k], strlen(user_defined[k]));
        if (id >= 0) v->attr[id] = TOK_ATTR_USER_DEFINED;
    }
    if (v->eos >= 0) v->eog[v->eos] = 1;
    if (v->eot >= 0) v->eog[v->eot] = 1;
    if (v->eom >= 0) v->eog[v->eom] = 1;
    /* Gemma 4: "</s>" is an ordinary token there, not an end of generation */
    int32_t tr = tok_find(v, "<|tool_response>", 16), s = tok_find(v, "</s>", 4);
    if (tr >= 0 && s >= 0 && v->eog[tr] && s != v->eos) {
        v->eog[s] = 0;
        v->attr[s] = TOK_ATTR_NORMAL;
    }
}

/* ===== The table of special texts ===== */

typedef struct len_id {
    uint32_t len;
    int32_t id;
} len_id;

/* Longest text first (llama.cpp's order); equal lengths by id, for determinism. */
static int cmp_len_id(const void *a, const void *b) {
    const len_id *x = a, *y = b;
    if (x->len != y->len) return x->len > y->len ? -1 : 1;
    return x->id < y->id ? -1 : x->id > y->id;
}

int tok_special_build(tok_vocab *v) {
    int32_t n = 0;
    for (int32_t i = 0; i < v->n_vocab; i++)
        if ((v->attr[i] & (TOK_ATTR_CONTROL | TOK_ATTR_USER_DEFINED | TOK_ATTR_UNKNOWN)) &&
            v->st.len[i] > 0)
            n++;
    v->special = malloc((size_t)(n ? n : 1) * sizeof *v->special);
    v->fb_list = malloc((size_t)(n ? n : 1) * sizeof *v->fb_list);
    if (!v->special || !v->fb_list) return -1;
    n = 0;
    for (int32_t i = 0; i < v->n_vocab; i++)
        if ((v->attr[i] & (TOK_ATTR_CONTROL | TOK_ATTR_USER_DEFINED | TOK_ATTR_UNKNOWN)) &&
            v->st.len[i] > 0)
            v->special[n++] = i;
    v->n_special = n;
    len_id *tmp = malloc((size_t)(n ? n : 1) * sizeof *tmp);
    if (!tmp) return -1;
    for (int32_t i = 0; i < n; i++)
        tmp[i] = (len_id){v->st.len[v->special[i]], v->special[i]};
    qsort(tmp, (size_t)n, sizeof *tmp, cmp_len_id);
    for (int32_t i = 0; i < n; i++)
        v->special[i] = tmp[i].id;
    free(tmp);
    int32_t count[256] = {0};
    for (int32_t i = 0; i < n; i++)
        count[(unsigned char)v->st.bytes[v->st.off[v->special[i]]]]++;
    v->fb_start[0] = 0;
    for (int c = 0; c < 256; c++)
        v->fb_start[c + 1] = v->fb_start[c] + count[c];
    int32_t fill[256];
    memcpy(fill, v->fb_start, sizeof fill);
    for (int32_t i = 0; i < n; i++) /* in priority order inside each bucket */
        v->fb_list[fill[(unsigned char)v->st.bytes[v->st.off[v->special[i]]]]++] = i;
    return 0;
}

/* ===== Partition of the input ===== */

static int cmp_occ(const void *a, const void *b) {
    const occ *x = a, *y = b;
    if (x->order != y->order) return x->order < y->order ? -1 : 1;
    return x->pos < y->pos ? -1 : x->pos > y->pos;
}

static int cmp_accept(const void *a, const void *b) {
    const occ *x = a, *y = b;
    return x->pos < y->pos ? -1 : x->pos > y->pos;
}

/* llama.cpp's order: every allowed special token, longest first, claims its
 * non-overlapping occurrences left to right inside text that no earlier token
 * claimed. A control token is allowed where parse_special says and no plain
 * range overlaps it; leaving such occurrences out before the claiming is what
 * llama.cpp's partition does for a text without them, so a plain range
 * without special text changes nothing. */
long tok_special_find(const tok_vocab *v, const char *text, size_t len, int parse_special,
                      const tok_spans *plain, occ **acc) {
    *acc = NULL;
    occ *all = NULL;
    size_t n_all = 0, cap_all = 0, r = 0; /* plain->v[r]: the first range ending after p */
    size_t n_plain = plain ? plain->n : 0;
    for (size_t p = 0; p < len; p++) {
        unsigned char c = (unsigned char)text[p];
        while (r < n_plain && plain->v[r].off + plain->v[r].len <= p)
            r++;
        for (int32_t k = v->fb_start[c]; k < v->fb_start[c + 1]; k++) {
            int32_t order = v->fb_list[k];
            int32_t id = v->special[order];
            size_t tl = v->st.len[id];
            if (v->attr[id] & (TOK_ATTR_CONTROL | TOK_ATTR_UNKNOWN)) {
                if (!parse_special) continue;
                if (r < n_plain && plain->v[r].off < p + tl) continue; /* in plain text */
            }
            if (tl > len - p || memcmp(text + p, v->st.bytes + v->st.off[id], tl) != 0) continue;
            if (pt_grow((void **)&all, &cap_all, n_all + 1, sizeof(occ))) {
                free(all);
                return -1;
            }
            all[n_all].order = order;
            all[n_all].pos = p;
            n_all++;
        }
    }
    if (n_all == 0) return 0;
    qsort(all, n_all, sizeof *all, cmp_occ);
    uint8_t *claimed = calloc(len, 1);
    if (!claimed) {
        free(all);
        return -1;
    }
    size_t n_acc = 0, own_end = 0;
    int32_t cur = -1;
    for (size_t i = 0; i < n_all; i++) {
        if (all[i].order != cur) {
            cur = all[i].order;
            own_end = 0;
        }
        size_t p = all[i].pos, tl = v->st.len[v->special[cur]];
        if (p < own_end) continue; /* overlaps this token's previous match */
        int free_run = 1;
        for (size_t j = p; j < p + tl && free_run; j++)
            free_run = !claimed[j];
        if (!free_run) continue;
        memset(claimed + p, 1, tl);
        own_end = p + tl;
        all[n_acc++] = all[i];
    }
    free(claimed);
    qsort(all, n_acc, sizeof *all, cmp_accept);
    *acc = all;
    return (long)n_acc;
}
