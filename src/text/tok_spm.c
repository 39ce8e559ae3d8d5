/* tok_spm.c — classic SentencePiece (`llama` vocabularies) as llama.cpp's
 * llm_tokenizer_spm runs it: spaces become U+2581 with one prepended to the
 * first fragment, adjacent symbols merge highest score first when their
 * concatenation is a token, and what is left is re-segmented through the
 * merges that built it down to tokens or byte fallbacks (<0xXX>, else the raw
 * byte's token, else unk).
 */
#include <stdlib.h>
#include <string.h>

#include "text/tok_internal.h"
#include "text/utf8.h"

/* Every byte's fallback token: <0xXX>, else the one-byte token, else unk. */
void tok_spm_init(tok_vocab *v) {
    for (int b = 0; b < 256; b++) {
        char hex[8];
        snprintf(hex, sizeof hex, "<0x%02X>", b);
        int32_t t = tok_find(v, hex, 6);
        if (t < 0) {
            char c = (char)b;
            t = tok_find(v, &c, 1);
        }
        v->byte_tok[b] = t >= 0 ? t : v->unk;
    }
}

/* rev_merge: symbol text -> the (left, right) symbols it was made from; the
 * last pair queued for a text wins, as in llama.cpp's std::map assignment. */
typedef struct rev_ent {
    int32_t off, len; /* text in the escaped fragment; len -1 = empty slot */
    int32_t left, right;
} rev_ent;

typedef struct spm_ctx {
    const tok_vocab *v;
    scratch *s;
    const char *t; /* escaped fragment */
    rev_ent *rev;
    uint32_t rev_mask;
    tok_ids *out;
} spm_ctx;

/* The slot of the text t[off..off+len): its entry, or the empty slot to fill. */
static rev_ent *rev_slot(spm_ctx *c, int32_t off, int32_t len) {
    uint32_t i = (uint32_t)tok_hash_bytes(c->t + off, (size_t)len) & c->rev_mask;
    for (;;) {
        rev_ent *e = &c->rev[i];
        if (e->len < 0) return e;
        if (e->len == len && memcmp(c->t + e->off, c->t + off, (size_t)len) == 0) return e;
        i = (i + 1) & c->rev_mask;
    }
}

/* Queue the merge of neighbours left and right when their concatenation is a
 * token, and remember which pair made that text. 0 or -1 (out of memory). */
static int spm_try(spm_ctx *c, int32_t left, int32_t right) {
    if (left < 0 || right < 0) return 0;
    sym *L = &c->s->syms[left], *R = &c->s->syms[right];
    int32_t len = L->len + R->len;
    int32_t t = strtab_find(&c->v->st, c->t + L->off, (size_t)len);
    if (t < 0 || t >= c->v->n_vocab) return 0;
    bigram b = {.score = c->v->score[t], .left = left, .right = right, .size = len};
    if (tok_heap_push(c->s, &b, 1)) return -1;
    rev_ent *e = rev_slot(c, L->off, len);
    e->off = L->off;
    e->len = len;
    e->left = left;
    e->right = right;
    return 0;
}

/* Emit the tokens of t[off..off+len): the token itself, else the two halves
 * that made it (recursively, at most 64 deep), else byte fallbacks. 0 or -1. */
static int spm_resegment(spm_ctx *c, int32_t off, int32_t len, int depth) {
    int32_t t = strtab_find(&c->v->st, c->t + off, (size_t)len);
    if (t >= 0 && t < c->v->n_vocab) return tok_ids_push(c->out, t);
    rev_ent *e = len > 0 && depth < 64 ? rev_slot(c, off, len) : NULL;
    if (!e || e->len < 0) {
        for (int32_t j = 0; j < len; j++) {
            int32_t b = c->v->byte_tok[(unsigned char)c->t[off + j]];
            if (b >= 0 && tok_ids_push(c->out, b)) return -1;
        }
        return 0;
    }
    const sym *L = &c->s->syms[e->left], *R = &c->s->syms[e->right];
    int32_t loff = L->off, roff = R->off;
    /* the symbols' current lengths may have grown since; the pair's text split is
     * at R->off, which never moves */
    if (spm_resegment(c, loff, roff - loff, depth + 1)) return -1;
    return spm_resegment(c, roff, off + len - roff, depth + 1);
}

/* Escape spaces, merge by score, re-segment every final symbol. */
int tok_spm_fragment(const tok_vocab *v, scratch *s, const char *text, size_t len, int prefix_space,
                     tok_ids *out, pt_err *err) {
    size_t need = 3 * (len + 1) + 1;
    if (pt_grow((void **)&s->buf, &s->buf_cap, need, 1))
        return pt_errf(err, "tokenizer: out of memory");
    size_t n = 0;
    if (prefix_space) memcpy(s->buf, TOK_SPACE_MARK, 3), n = 3;
    for (size_t i = 0; i < len; i++) {
        if (text[i] == ' ')
            memcpy(s->buf + n, TOK_SPACE_MARK, 3), n += 3;
        else
            s->buf[n++] = text[i];
    }
    if (n == 0) return 0;
    if (n > INT32_MAX / 4) return pt_errf(err, "tokenizer: text too long");
    if (pt_grow((void **)&s->syms, &s->cap_syms, n, sizeof(sym)))
        return pt_errf(err, "tokenizer: out of memory");
    int32_t ns = 0;
    for (size_t i = 0; i < n;) {
        size_t l = PT_MIN((size_t)utf8_seq_len((unsigned char)s->buf[i]), n - i);
        tok_sym_init(&s->syms[ns], ns, -1, i, l);
        ns++;
        i += l;
    }
    s->syms[ns - 1].next = -1;
    uint32_t rsize = 64;
    while (rsize < (uint32_t)ns * 4u)
        rsize *= 2;
    spm_ctx c = {.v = v, .s = s, .t = s->buf, .rev_mask = rsize - 1, .out = out};
    c.rev = malloc((size_t)rsize * sizeof *c.rev);
    if (!c.rev) return pt_errf(err, "tokenizer: out of memory");
    for (uint32_t i = 0; i < rsize; i++)
        c.rev[i].len = -1;
    int rc = 0;
    s->n_heap = 0;
    for (int32_t i = 1; i < ns && !rc; i++)
        rc = spm_try(&c, i - 1, i);
    while (!rc && s->n_heap) {
        bigram b = tok_heap_pop(s, 1);
        sym *L = &s->syms[b.left], *R = &s->syms[b.right];
        if (L->len == 0 || R->len == 0 || L->len + R->len != b.size) continue;
        L->len += R->len;
        R->len = 0;
        L->next = R->next;
        if (R->next >= 0) s->syms[R->next].prev = b.left;
        rc = spm_try(&c, L->prev, b.left);
        if (!rc) rc = spm_try(&c, b.left, L->next);
    }
    for (int32_t i = 0; !rc && i >= 0; i = s->syms[i].next)
        rc = spm_resegment(&c, s->syms[i].off, s->syms[i].len, 0);
    free(c.rev);
    return rc ? pt_errf(err, "tokenizer: out of memory") : 0;
}
