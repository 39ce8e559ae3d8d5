/* tokenizer.c — the encoding pipeline (tok_encode), the growable id and byte
 * arrays of tokenizer.h, and what the encoders share: the per-call scratch and
 * the heap of candidate merges. See tokenizer.h for the contract and
 * tok_internal.h for which file holds which stage.
 *
 * Encoding pipeline (one call of tok_encode):
 *   1. special-token partition: the text is cut around special-token texts the
 *      caller allows, in llama.cpp's order (longest token first, left to right
 *      inside each remaining text fragment), so results match it even when
 *      special texts overlap; tok_encode_spans allows control tokens only
 *      outside the caller's plain ranges (a chat prompt's content);
 *   2. each remaining fragment is made valid UTF-8 the way llama.cpp reads it
 *      (a byte that does not start a well-formed sequence becomes U+FFFD);
 *   3. the pre-tokenizer's regexes split the fragment into words. Several
 *      regexes apply in turn, each one splitting the pieces the previous one
 *      left, and the text between matches is kept as pieces too;
 *   4. BPE merges each word by merge rank (gpt2, gemma4) or SentencePiece
 *      merges by score (llama); symbols that are not tokens fall back to byte
 *      tokens.
 *
 * Non-goals: WordPiece/Unigram/RWKV vocabularies; llama.cpp's per-model LSTRIP
 * and RSTRIP attributes (no GGUF stores them); its detokenizer's
 * "clean_up_tokenization_spaces" pass (see tok_decode.c).
 */
#include <stdlib.h>
#include <string.h>

#include "text/tok_internal.h"

/* ===== Growable arrays ===== */

void tok_ids_free(tok_ids *a) {
    free(a->v);
    a->v = NULL;
    a->n = a->cap = 0;
}

void tok_bytes_free(tok_bytes *b) {
    free(b->v);
    b->v = NULL;
    b->n = b->cap = 0;
}

void tok_spans_free(tok_spans *s) {
    free(s->v);
    s->v = NULL;
    s->n = s->cap = 0;
}

int tok_spans_add(tok_spans *s, size_t off, size_t len) {
    if (!len) return 0;
    if (s->n && s->v[s->n - 1].off + s->v[s->n - 1].len == off) {
        s->v[s->n - 1].len += len;
        return 0;
    }
    if (pt_grow((void **)&s->v, &s->cap, s->n + 1, sizeof *s->v)) return -1;
    s->v[s->n++] = (tok_span){off, len};
    return 0;
}

int tok_ids_push(tok_ids *a, int32_t id) {
    if (pt_grow((void **)&a->v, &a->cap, a->n + 1, sizeof *a->v)) return -1;
    a->v[a->n++] = id;
    return 0;
}

int tok_bytes_append(tok_bytes *b, const void *src, size_t n) {
    if (n >= SIZE_MAX - b->n || pt_grow((void **)&b->v, &b->cap, b->n + n + 1, 1)) return -1;
    if (n) memcpy(b->v + b->n, src, n);
    b->n += n;
    b->v[b->n] = 0;
    return 0;
}

/* ===== Encoding scratch and the merge heap ===== */

static void scratch_free(scratch *s) {
    free(s->buf);
    free(s->segs[0]);
    free(s->segs[1]);
    free(s->syms);
    free(s->heap);
    free(s->wbuf);
    free(s->wc);
    free(s->wc_bytes);
    free(s->wc_ids);
    if (s->md) pcre2_match_data_free(s->md);
    if (s->mctx) pcre2_match_context_free(s->mctx);
    if (s->jit) pcre2_jit_stack_free(s->jit);
}

/* Heap ordered by (rank, left) ascending: the lowest-rank merge, leftmost first. */
static int bg_less(const bigram *a, const bigram *b) {
    return a->rank < b->rank || (a->rank == b->rank && a->left < b->left);
}

/* SPM heap: highest score first, then leftmost. */
static int bg_less_spm(const bigram *a, const bigram *b) {
    return a->score > b->score || (a->score == b->score && a->left < b->left);
}

int tok_heap_push(scratch *s, const bigram *b, int spm) {
    if (pt_grow((void **)&s->heap, &s->cap_heap, s->n_heap + 1, sizeof(bigram))) return -1;
    size_t i = s->n_heap++;
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (!(spm ? bg_less_spm(b, &s->heap[p]) : bg_less(b, &s->heap[p]))) break;
        s->heap[i] = s->heap[p];
        i = p;
    }
    s->heap[i] = *b;
    return 0;
}

bigram tok_heap_pop(scratch *s, int spm) {
    bigram top = s->heap[0];
    bigram last = s->heap[--s->n_heap];
    size_t i = 0, n = s->n_heap;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= n) break;
        if (c + 1 < n && (spm ? bg_less_spm(&s->heap[c + 1], &s->heap[c])
                              : bg_less(&s->heap[c + 1], &s->heap[c])))
            c++;
        if (!(spm ? bg_less_spm(&s->heap[c], &last) : bg_less(&s->heap[c], &last))) break;
        s->heap[i] = s->heap[c];
        i = c;
    }
    if (n) s->heap[i] = last;
    return top;
}

/* ===== The pipeline ===== */

int tok_encode(const tok_vocab *v, const char *text, size_t len, int flags, tok_ids *out,
               pt_err *err) {
    return tok_encode_spans(v, text, len, flags, NULL, out, err);
}

int tok_encode_spans(const tok_vocab *v, const char *text, size_t len, int flags,
                     const tok_spans *plain, tok_ids *out, pt_err *err) {
    for (size_t i = 0, end = 0; plain && i < plain->n; i++) { /* in order, inside the text */
        const tok_span *r = &plain->v[i];
        if (r->off < end || r->off > len || r->len > len - r->off)
            return pt_errf(err,
                           "tokenizer: plain range %zu [%zu, +%zu) is out of order or past the "
                           "text's %zu bytes",
                           i, r->off, r->len, len);
        end = r->off + r->len;
    }
    int add_special = !!(flags & TOK_ADD_SPECIAL);
    if (add_special && v->add_bos && tok_ids_push(out, v->bos))
        return pt_errf(err, "tokenizer: out of memory");
    occ *acc = NULL;
    long n_acc =
        len ? tok_special_find(v, text, len, !!(flags & TOK_PARSE_SPECIAL), plain, &acc) : 0;
    if (n_acc < 0) return pt_errf(err, "tokenizer: out of memory");
    scratch s = {0};
    int rc = 0;
    if (v->kind == KIND_BPE) {
        s.md = pcre2_match_data_create(4, NULL);
        s.mctx = pcre2_match_context_create(NULL);
        s.jit = pcre2_jit_stack_create(32 * 1024, 8 * 1024 * 1024, NULL);
        if (!s.md || !s.mctx || !s.jit) {
            scratch_free(&s);
            free(acc);
            return pt_errf(err, "tokenizer: out of memory");
        }
        pcre2_jit_stack_assign(s.mctx, NULL, s.jit);
    }
    size_t pos = 0;
    int prev_special =
        1; /* SPM: a fragment at the start or after a special gets the prefix space */
    for (long i = 0; i <= n_acc && !rc; i++) {
        size_t end = i < n_acc ? acc[i].pos : len;
        if (end > pos) {
            if (v->kind == KIND_BPE)
                rc = tok_bpe_fragment(v, &s, text + pos, end - pos, out, err);
            else
                rc = tok_spm_fragment(v, &s, text + pos, end - pos,
                                      v->add_space_prefix && prev_special, out, err);
            prev_special = 0;
        }
        if (i < n_acc && !rc) {
            int32_t id = v->special[acc[i].order];
            if (tok_ids_push(out, id)) rc = pt_errf(err, "tokenizer: out of memory");
            pos = acc[i].pos + v->st.len[id];
            prev_special = 1;
        }
    }
    scratch_free(&s);
    free(acc);
    if (!rc && add_special && v->add_eos && tok_ids_push(out, v->eos))
        rc = pt_errf(err, "tokenizer: out of memory");
    return rc;
}
