/* tok_bpe.c — BPE as llama.cpp runs it for `gpt2` (byte-level: every byte is
 * first mapped to a printable character of the GPT-2 alphabet) and `gemma4`
 * (raw UTF-8 with spaces as U+2581, bytes missing from the vocabulary falling
 * back to <0xXX> tokens) vocabularies: the merge table read from
 * tokenizer.ggml.merges, the per-byte tables, and the merging of one word.
 *
 * A word is merged lowest rank first (leftmost among equals) with a heap of
 * candidate pairs; entries made stale by an earlier merge are skipped when
 * popped rather than removed. Words repeat, so a per-call cache keeps the ids
 * of each distinct word.
 */
#include <stdlib.h>
#include <string.h>

#include "text/tok_internal.h"
#include "text/utf8.h"

#define WC_SLOTS 65536u /* word cache slots; a power of two */
#define WC_MAX_WORD 256 /* longer words are not cached */

/* ===== The GPT-2 byte alphabet ===== */

/* The GPT-2 byte-to-unicode alphabet: printable Latin-1 bytes map to
 * themselves, the other 68 bytes to U+0100.. in byte order. */
uint32_t tok_gpt2_byte_cp(int b) {
    if ((b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF))
        return (uint32_t)b;
    int n = 0;
    for (int c = 0; c < b; c++)
        if (!((c >= 0x21 && c <= 0x7E) || (c >= 0xA1 && c <= 0xAC) || (c >= 0xAE && c <= 0xFF)))
            n++;
    return 256u + (uint32_t)n;
}

/* ===== Merge table ===== */

static uint32_t merge_hash(uint64_t k) {
    return (uint32_t)((k * 0x9E3779B97F4A7C15ull) >> 32);
}

/* Record merge (a, b) -> res at rank; a pair already present keeps its first
 * (lowest) rank, as llama.cpp's emplace. The table has room (sized at load). */
static int add_merge(tok_vocab *v, int32_t a, int32_t b, int32_t rank, int32_t res) {
    uint64_t key = (((uint64_t)(uint32_t)a << 32) | (uint32_t)b) + 1;
    uint32_t i = merge_hash(key) & v->merge_mask;
    while (v->merges[i].key) {
        if (v->merges[i].key == key)
            return 0; /* first (lowest rank) wins, as llama.cpp's emplace */
        i = (i + 1) & v->merge_mask;
    }
    v->merges[i].key = key;
    v->merges[i].rank = rank;
    v->merges[i].res = res;
    return 0;
}

/* The merge of the pair of sids (a, b), or NULL. */
static const merge_ent *find_merge(const tok_vocab *v, int32_t a, int32_t b) {
    if (!v->merges || a < 0 || b < 0) return NULL;
    uint64_t key = (((uint64_t)(uint32_t)a << 32) | (uint32_t)b) + 1;
    uint32_t i = merge_hash(key) & v->merge_mask;
    while (v->merges[i].key) {
        if (v->merges[i].key == key) return &v->merges[i];
        i = (i + 1) & v->merge_mask;
    }
    return NULL;
}

/* Intern both sides and the result of every "left right" entry of
 * tokenizer.ggml.merges. 0, or -1 with err set. */
static int load_merges(tok_vocab *v, const gguf_ctx *g, pt_err *err) {
    int bad;
    const gguf_value *m = tok_gguf_array(g, "tokenizer.ggml.merges", GGUF_STRING, 1, err, &bad);
    if (!m) return -1;
    if (m->arr.n > (uint64_t)INT32_MAX / 4)
        return pt_errf(err, "%s: %llu merges is too many", tok_gguf_path(g),
                       (unsigned long long)m->arr.n);
    uint32_t size = 1024;
    while (size < m->arr.n * 2)
        size *= 2;
    v->merges = calloc(size, sizeof *v->merges);
    if (!v->merges) return pt_errf(err, "tokenizer: out of memory");
    v->merge_mask = size - 1;
    char *tmp = NULL;
    size_t tmp_cap = 0;
    for (uint64_t i = 0; i < m->arr.n; i++) {
        const gguf_str *s = &m->arr.items[i].str;
        /* "left right": the first space after position 0 separates them */
        const char *sp = s->len > 1 ? memchr(s->ptr + 1, ' ', s->len - 1) : NULL;
        const char *l = "", *r = "";
        size_t ln = 0, rn = 0;
        if (sp) {
            l = s->ptr;
            ln = (size_t)(sp - s->ptr);
            r = sp + 1;
            rn = s->len - ln - 1;
        }
        int added;
        int32_t a = strtab_intern(&v->st, l, ln, &added);
        int32_t b = strtab_intern(&v->st, r, rn, &added);
        if (pt_grow((void **)&tmp, &tmp_cap, ln + rn, 1)) {
            free(tmp);
            return pt_errf(err, "tokenizer: out of memory");
        }
        if (ln) memcpy(tmp, l, ln);
        if (rn) memcpy(tmp + ln, r, rn);
        int32_t ab = strtab_intern(&v->st, tmp ? tmp : "", ln + rn, &added);
        if (a < 0 || b < 0 || ab < 0) {
            free(tmp);
            return pt_errf(err, "tokenizer: out of memory");
        }
        add_merge(v, a, b, (int32_t)i, ab);
    }
    free(tmp);
    return 0;
}

/* The merges, then for every byte its GPT-2 character and the sid of it, and
 * the token it falls back to. */
int tok_bpe_init(tok_vocab *v, const gguf_ctx *g, pt_err *err) {
    if (load_merges(v, g, err)) return -1;
    for (int b = 0; b < 256; b++) {
        unsigned char enc[4];
        int l = utf8_encode(tok_gpt2_byte_cp(b), enc);
        memcpy(v->byte_enc[b], enc, 2);
        v->byte_enc_len[b] = (uint8_t)l;
        v->byte_sid[b] = strtab_find(&v->st, enc, (size_t)l);
        if (v->byte_encode) {
            v->byte_tok[b] = v->byte_sid[b] < v->n_vocab ? v->byte_sid[b] : -1;
        } else {
            char hex[8];
            snprintf(hex, sizeof hex, "<0x%02X>", b);
            v->byte_tok[b] = tok_find(v, hex, 6);
        }
    }
    for (int c = 0; c < 128; c++) {
        char ch = (char)c;
        v->ascii_sid[c] = strtab_find(&v->st, &ch, 1);
    }
    v->marker_sid = strtab_find(&v->st, TOK_SPACE_MARK, 3);
    return 0;
}

/* ===== Merging one word ===== */

/* Queue the merge of neighbours left and right when the pair has one. 0 or -1. */
static int try_bigram(const tok_vocab *v, scratch *s, int32_t left, int32_t right) {
    if (left < 0 || right < 0) return 0;
    const merge_ent *m = find_merge(v, s->syms[left].sid, s->syms[right].sid);
    if (!m) return 0;
    bigram b = {.rank = m->rank,
                .left = left,
                .right = right,
                .l_sid = s->syms[left].sid,
                .r_sid = s->syms[right].sid,
                .res = m->res};
    return tok_heap_push(s, &b, 0);
}

/* Emit the tokens of word w[0..n) (already byte-level or raw as the vocab
 * wants; for byte-level BPE `w` holds the original bytes). */
static int bpe_word(const tok_vocab *v, scratch *s, const char *w, size_t n, tok_ids *out) {
    if (n == 0) return 0;
    /* whole-word shortcuts */
    if (v->ignore_merges || v->newline_words) {
        int all_nl = 1;
        for (size_t i = 0; i < n && all_nl; i++)
            all_nl = w[i] == '\n';
        if (v->ignore_merges || all_nl) {
            const char *key = w;
            size_t kn = n;
            if (v->byte_encode) {
                if (pt_grow((void **)&s->wbuf, &s->wbuf_cap, 2 * n, 1)) return -1;
                kn = 0;
                for (size_t i = 0; i < n; i++) {
                    unsigned char b = (unsigned char)w[i];
                    memcpy(s->wbuf + kn, v->byte_enc[b], v->byte_enc_len[b]);
                    kn += v->byte_enc_len[b];
                }
                key = s->wbuf;
            }
            int32_t t = strtab_find(&v->st, key, kn);
            if (t >= 0 && t < v->n_vocab) return tok_ids_push(out, t);
        }
    }
    /* initial symbols: bytes (byte-level) or UTF-8 characters */
    if (pt_grow((void **)&s->syms, &s->cap_syms, n, sizeof(sym))) return -1;
    int32_t ns = 0;
    for (size_t i = 0; i < n;) {
        size_t l = v->byte_encode ? 1 : PT_MIN((size_t)utf8_seq_len((unsigned char)w[i]), n - i);
        unsigned char c0 = (unsigned char)w[i];
        int32_t sid = v->byte_encode                                ? v->byte_sid[c0]
                      : c0 < 0x80                                   ? v->ascii_sid[c0]
                      : l == 3 && !memcmp(w + i, TOK_SPACE_MARK, 3) ? v->marker_sid
                                                                    : strtab_find(&v->st, w + i, l);
        tok_sym_init(&s->syms[ns], ns, sid, i, l);
        ns++;
        i += l;
    }
    s->syms[ns - 1].next = -1;
    s->n_heap = 0;
    for (int32_t i = 1; i < ns; i++)
        if (try_bigram(v, s, i - 1, i)) return -1;
    while (s->n_heap) {
        bigram b = tok_heap_pop(s, 0);
        sym *L = &s->syms[b.left], *R = &s->syms[b.right];
        if (L->len == 0 || R->len == 0 || L->next != b.right || L->sid != b.l_sid ||
            R->sid != b.r_sid)
            continue; /* stale */
        L->len += R->len;
        L->sid = b.res;
        R->len = 0;
        L->next = R->next;
        if (R->next >= 0) s->syms[R->next].prev = b.left;
        if (try_bigram(v, s, L->prev, b.left) || try_bigram(v, s, b.left, L->next)) return -1;
    }
    for (int32_t i = 0; i >= 0; i = s->syms[i].next) {
        const sym *y = &s->syms[i];
        if (y->sid >= 0 && y->sid < v->n_vocab) {
            if (tok_ids_push(out, y->sid)) return -1;
            continue;
        }
        for (int32_t j = 0; j < y->len; j++) { /* byte fallback */
            int32_t t = v->byte_tok[(unsigned char)w[y->off + j]];
            if (t >= 0 && tok_ids_push(out, t)) return -1;
        }
    }
    return 0;
}

/* bpe_word through the per-call word cache. */
static int cached_word(const tok_vocab *v, scratch *s, const char *w, size_t n, tok_ids *out) {
    if (n > WC_MAX_WORD) return bpe_word(v, s, w, n, out);
    if (!s->wc) {
        s->wc = calloc(WC_SLOTS, sizeof *s->wc);
        if (!s->wc) return bpe_word(v, s, w, n, out);
    }
    uint64_t h = tok_hash_bytes(w, n) | 1;
    uint32_t i = (uint32_t)h & (WC_SLOTS - 1);
    for (;;) {
        wc_ent *e = &s->wc[i];
        if (!e->hash) break;
        if (e->hash == h && e->len == n && !memcmp(s->wc_bytes + e->off, w, n)) {
            for (uint32_t j = 0; j < e->n; j++)
                if (tok_ids_push(out, s->wc_ids[e->ids + j])) return -1;
            return 0;
        }
        i = (i + 1) & (WC_SLOTS - 1);
    }
    size_t before = out->n;
    if (bpe_word(v, s, w, n, out)) return -1;
    size_t nid = out->n - before;
    if (s->wc_used >= WC_SLOTS / 2 || s->wc_nbytes + n > UINT32_MAX ||
        s->wc_nids + nid > UINT32_MAX)
        return 0; /* full: just stop caching */
    if (pt_grow((void **)&s->wc_bytes, &s->wc_capbytes, s->wc_nbytes + n, 1) ||
        pt_grow((void **)&s->wc_ids, &s->wc_capids, s->wc_nids + nid, sizeof(int32_t)))
        return 0;
    wc_ent *e = &s->wc[i];
    e->hash = h;
    e->off = (uint32_t)s->wc_nbytes;
    e->len = (uint32_t)n;
    e->ids = (uint32_t)s->wc_nids;
    e->n = (uint32_t)nid;
    memcpy(s->wc_bytes + s->wc_nbytes, w, n);
    s->wc_nbytes += n;
    memcpy(s->wc_ids + s->wc_nids, out->v + before, nid * sizeof(int32_t));
    s->wc_nids += nid;
    s->wc_used++;
    return 0;
}

/* Sanitize the fragment, split it into words, merge each word. */
int tok_bpe_fragment(const tok_vocab *v, scratch *s, const char *text, size_t len, tok_ids *out,
                     pt_err *err) {
    if (pt_grow((void **)&s->buf, &s->buf_cap, 3 * len + 1, 1))
        return pt_errf(err, "tokenizer: out of memory");
    size_t n = utf8_sanitize(text, len, v->escape_ws, s->buf);
    int w = tok_pretok_split(v, s, n, err);
    if (w < 0) return -1;
    for (size_t k = 0; k < s->n_segs[w]; k++) {
        const seg *sg = &s->segs[w][k];
        if (cached_word(v, s, s->buf + sg->off, sg->len, out))
            return pt_errf(err, "tokenizer: out of memory");
    }
    return 0;
}
