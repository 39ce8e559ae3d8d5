/* tok_decode.c — from ids back to bytes: the table of the bytes each token
 * decodes to (built once at load, as llama.cpp's token_to_piece with special
 * set), plain decoding, and the streaming decoder that holds back a UTF-8
 * character split across tokens.
 *
 * Decoding is exact concatenation of pieces, so decode(encode(x)) == x for
 * valid UTF-8 x; llama.cpp's "clean_up_tokenization_spaces" pass is a
 * non-goal.
 */
#include <stdlib.h>
#include <string.h>

#include "text/tok_internal.h"
#include "text/utf8.h"

/* ===== The piece table ===== */

/* Value of a hex digit, or -1. */
static int hexval(char c) {
    return c >= '0' && c <= '9'   ? c - '0'
           : c >= 'A' && c <= 'F' ? c - 'A' + 10
           : c >= 'a' && c <= 'f' ? c - 'a' + 10
                                  : -1;
}

/* The bytes a token decodes to (llama.cpp's token_to_piece with special = true). */
int tok_build_pieces(tok_vocab *v) {
    tok_bytes b = {0};
    v->piece_off = malloc(((size_t)v->n_vocab + 1) * sizeof *v->piece_off);
    if (!v->piece_off) return -1;
    /* reverse GPT-2 map: code point -> byte, for code points < 0x144 */
    int16_t rev[0x144];
    for (int i = 0; i < 0x144; i++)
        rev[i] = -1;
    for (int c = 0; c < 256; c++)
        rev[tok_gpt2_byte_cp(c)] = (int16_t)c;
    for (int32_t id = 0; id < v->n_vocab; id++) {
        v->piece_off[id] = b.n;
        const char *t = v->st.bytes + v->st.off[id];
        size_t n = v->st.len[id];
        int a = v->attr[id];
        int rc = 0;
        if (a & (TOK_ATTR_CONTROL | TOK_ATTR_UNKNOWN | TOK_ATTR_USER_DEFINED)) {
            rc = tok_bytes_append(&b, t, n);
        } else if (a & TOK_ATTR_NORMAL) {
            if (v->byte_encode) {
                const unsigned char *s = (const unsigned char *)t;
                for (size_t i = 0; i < n && !rc;) {
                    uint32_t cp;
                    int l = utf8_decode_lenient(s + i, n - i, &cp);
                    if (l == 0) {
                        rc = tok_bytes_append(&b, s + i, 1);
                        i++;
                    } else if (cp < 0x144 && rev[cp] >= 0) {
                        unsigned char byte = (unsigned char)rev[cp];
                        rc = tok_bytes_append(&b, &byte, 1);
                        i += (size_t)l;
                    } else { /* not in the byte alphabet: keep the character */
                        rc = tok_bytes_append(&b, s + i, (size_t)l);
                        i += (size_t)l;
                    }
                }
            } else if (v->escape_ws) {
                for (size_t i = 0; i < n && !rc;) {
                    if (i + 3 <= n && memcmp(t + i, TOK_SPACE_MARK, 3) == 0) {
                        rc = tok_bytes_append(&b, " ", 1);
                        i += 3;
                    } else {
                        rc = tok_bytes_append(&b, t + i, 1);
                        i++;
                    }
                }
            } else {
                rc = tok_bytes_append(&b, t, n);
            }
        } else if (a & TOK_ATTR_BYTE) {
            int hi = n == 6 ? hexval(t[3]) : -1, lo = n == 6 ? hexval(t[4]) : -1;
            if (n == 6 && !memcmp(t, "<0x", 3) && t[5] == '>' && hi >= 0 && lo >= 0) {
                unsigned char byte = (unsigned char)(hi * 16 + lo);
                rc = tok_bytes_append(&b, &byte, 1);
            } else {
                rc = tok_bytes_append(&b, t, n);
            }
        } /* unused/undefined tokens decode to nothing, as in llama.cpp */
        if (rc) {
            tok_bytes_free(&b);
            return -1;
        }
    }
    v->piece_off[v->n_vocab] = b.n;
    v->pieces = b.v ? b.v : malloc(1);
    return v->pieces ? 0 : -1;
}

/* ===== Decoding ===== */

const char *tok_piece(const tok_vocab *v, int32_t id, int flags, size_t *len) {
    if (id < 0 || id >= v->n_vocab) {
        *len = 0;
        return NULL;
    }
    if (!(flags & TOK_RENDER_SPECIAL) && (v->attr[id] & (TOK_ATTR_CONTROL | TOK_ATTR_UNKNOWN))) {
        *len = 0;
        return v->pieces;
    }
    *len = (size_t)(v->piece_off[id + 1] - v->piece_off[id]);
    return v->pieces + v->piece_off[id];
}

int tok_decode(const tok_vocab *v, const int32_t *ids, size_t n, int flags, tok_bytes *out,
               pt_err *err) {
    for (size_t i = 0; i < n; i++) {
        size_t l;
        const char *p = tok_piece(v, ids[i], flags, &l);
        if (!p)
            return pt_errf(err, "token id %d is outside the vocabulary (0..%d)", ids[i],
                           v->n_vocab - 1);
        if (tok_bytes_append(out, p, l)) return pt_errf(err, "tokenizer: out of memory");
    }
    return 0;
}

/* ===== Streaming ===== */

int tok_stream_push(const tok_vocab *v, tok_stream *s, int32_t id, int flags, tok_bytes *out,
                    pt_err *err) {
    size_t l;
    const char *p = tok_piece(v, id, flags, &l);
    if (!p)
        return pt_errf(err, "token id %d is outside the vocabulary (0..%d)", id, v->n_vocab - 1);
    if (l == 0) return 0;
    /* append held-back bytes + piece, then take back an incomplete last character */
    if (tok_bytes_append(out, s->pend, (size_t)s->n_pend) || tok_bytes_append(out, p, l))
        return pt_errf(err, "tokenizer: out of memory");
    size_t total = (size_t)s->n_pend + l;
    int k = (int)PT_MIN(total, (size_t)4);
    int n_tail = utf8_incomplete_tail((const unsigned char *)out->v + out->n - k, k);
    out->n -= (size_t)n_tail;
    memcpy(s->pend, out->v + out->n, (size_t)n_tail);
    out->v[out->n] = 0; /* keep the terminator tok_bytes_append promises */
    s->n_pend = n_tail;
    return 0;
}

int tok_stream_flush(tok_stream *s, tok_bytes *out, pt_err *err) {
    if (tok_bytes_append(out, s->pend, (size_t)s->n_pend))
        return pt_errf(err, "tokenizer: out of memory");
    s->n_pend = 0;
    return 0;
}
