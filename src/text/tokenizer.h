/* tokenizer.h — text <-> token ids, built from the vocabulary inside a GGUF.
 *
 * Supported `tokenizer.ggml.model` values:
 *   gpt2    byte-level BPE (GPT-2 byte-to-unicode alphabet) with a pre-tokenizer
 *           split chosen by `tokenizer.ggml.pre` (glm4, qwen2, qwen35,
 *           deepseek-llm, deepseek-v3, llama-bpe, gpt-2, default and aliases),
 *           run with PCRE2 (UTF-8, Unicode properties, JIT).
 *   gemma4  SentencePiece-style BPE on raw UTF-8: spaces become U+2581 "▁",
 *           merges by rank, bytes missing from the vocabulary fall back to
 *           `<0xXX>` tokens.
 *   llama   classic SentencePiece (score-ordered merges, `▁` prefix space,
 *           byte fallback).
 * The results reproduce llama.cpp's tokenizer (its `test-tokenizer-0` files
 * are the tests), including its treatment of invalid UTF-8 (each bad byte
 * becomes U+FFFD before tokenization).
 *
 * Special tokens: CONTROL/UNKNOWN tokens written in the text are recognised
 * only when the caller passes TOK_PARSE_SPECIAL; USER_DEFINED tokens are always
 * recognised (as llama.cpp and HF tokenizers do). Without the flag, text such
 * as "<|user|>" is tokenised like any other text — user content can never
 * forge a control token. tok_encode_spans parses them in part of a text only:
 * a chat prompt's scaffolding, not the conversation's text inside it.
 *
 * A tok_vocab is immutable after tok_load and may be shared by threads; every
 * call allocates its own scratch. Nothing here prints or exits.
 */
#ifndef PT_TOKENIZER_H
#define PT_TOKENIZER_H

#include <stddef.h>
#include <stdint.h>

#include "common.h"
#include "format/gguf.h"
#include "petrel.h"

typedef struct tok_vocab tok_vocab;

/* Token attributes (GGUF tokenizer.ggml.token_type values mapped to bits, as llama.cpp). */
enum {
    TOK_ATTR_NORMAL = 1 << 0,
    TOK_ATTR_UNKNOWN = 1 << 1,
    TOK_ATTR_CONTROL = 1 << 2,
    TOK_ATTR_USER_DEFINED = 1 << 3,
    TOK_ATTR_UNUSED = 1 << 4,
    TOK_ATTR_BYTE = 1 << 5,
};

/* Encode flags. */
enum {
    TOK_ADD_SPECIAL = 1 << 0,   /* add BOS/EOS as the vocabulary's add_bos/add_eos say */
    TOK_PARSE_SPECIAL = 1 << 1, /* recognise control-token text as the token */
};

/* Decode flags. */
enum {
    TOK_RENDER_SPECIAL =
        1 << 0, /* write control/unknown tokens' text (else they decode to nothing) */
};

/* A growable array of token ids; zero-initialise, free with tok_ids_free.
 * The public pt_ids itself (petrel.h): one array type inside and out. */
typedef pt_ids tok_ids;

/* A growable byte buffer; zero-initialise, free with tok_bytes_free. Appends
 * through tok_bytes_append keep a NUL after the last byte (not counted in n). */
typedef pt_buf tok_bytes; /* the public pt_buf (petrel.h): one byte buffer inside and out */

/* Byte ranges of a text, in order, not touching; zero-initialise, free with
 * tok_spans_free. The public pt_spans itself (petrel.h). */
typedef pt_span tok_span;
typedef pt_spans tok_spans;

void tok_ids_free(tok_ids *a);
void tok_bytes_free(tok_bytes *b);
void tok_spans_free(tok_spans *s);
/* Add [off, off + len) after the last range (off >= the last range's end): a
 * range that touches the last one extends it, an empty one is dropped. 0, or -1
 * on out of memory (s unchanged). */
int tok_spans_add(tok_spans *s, size_t off, size_t len);

/* Append one id. 0, or -1 on out of memory (a unchanged). */
int tok_ids_push(tok_ids *a, int32_t id);
/* Append n bytes (n may be 0) and keep a NUL after the last one, not counted
 * in b->n, so the text can be read as a C string; after any successful call
 * b->v is not NULL. 0, or -1 on out of memory (b unchanged). The library's one
 * growable byte buffer: every module appends through this. */
int tok_bytes_append(tok_bytes *b, const void *src, size_t n);

/* Build the tokenizer from a GGUF's tokenizer.* metadata (the ctx may be closed
 * afterwards: everything needed is copied). Returns NULL with err set when the
 * vocabulary is missing, malformed or of an unsupported kind. */
tok_vocab *tok_load(const gguf_ctx *g, pt_err *err);
void tok_free(tok_vocab *v);

/* Tokenize `len` bytes of text, appending the ids to `out`. Returns 0, or -1
 * with err set (out of memory, regex engine failure). Never fails on content:
 * any byte string tokenizes. */
int tok_encode(const tok_vocab *v, const char *text, size_t len, int flags, tok_ids *out,
               pt_err *err);
/* tok_encode, with TOK_PARSE_SPECIAL in effect only outside the ranges `plain`
 * (NULL: none): a CONTROL/UNKNOWN token's text is cut out as the token only
 * where it overlaps no plain range. Fragments between the tokens cut out are
 * encoded whole, whatever ranges they cross, so plain ranges without special
 * text change nothing. -1 with err also for ranges out of order or past len. */
int tok_encode_spans(const tok_vocab *v, const char *text, size_t len, int flags,
                     const tok_spans *plain, tok_ids *out, pt_err *err);

/* Append the bytes of the ids to `out` (plain concatenation of the pieces; no
 * space cleanup). Returns 0, or -1 with err set for an id outside the
 * vocabulary or out of memory. */
int tok_decode(const tok_vocab *v, const int32_t *ids, size_t n, int flags, tok_bytes *out,
               pt_err *err);

/* The bytes one token decodes to (NULL and *len = 0 for an invalid id). With
 * TOK_RENDER_SPECIAL unset, control/unknown tokens give an empty piece. */
const char *tok_piece(const tok_vocab *v, int32_t id, int flags, size_t *len);

/* Streaming decoder: feeds ids one at a time and emits only whole UTF-8
 * characters; a character split across tokens (byte fallback, byte-level BPE)
 * is held back until it is complete. Bytes that can never complete a valid
 * character are emitted as they are, so nothing is lost. Zero-initialise. */
typedef struct tok_stream {
    unsigned char pend[8]; /* held-back bytes of an incomplete character */
    int n_pend;
} tok_stream;

/* Append to `out` what can be printed after feeding `id`. 0 or -1 (err). */
int tok_stream_push(const tok_vocab *v, tok_stream *s, int32_t id, int flags, tok_bytes *out,
                    pt_err *err);
/* Append whatever is still held back (end of stream). 0 or -1 (err). */
int tok_stream_flush(tok_stream *s, tok_bytes *out, pt_err *err);

/* Facts about the vocabulary. Ids are -1 when the vocabulary has none. */
int32_t tok_n_vocab(const tok_vocab *v);
int32_t tok_bos(const tok_vocab *v);
int32_t tok_eos(const tok_vocab *v);
int32_t tok_eot(const tok_vocab *v);
int tok_attr(const tok_vocab *v, int32_t id); /* TOK_ATTR_* bits; 0 for an invalid id */
int tok_is_eog(const tok_vocab *v,
               int32_t id); /* ends generation (eos, eot, eom, <|im_end|>, ...) */
/* The token's text as stored in the vocabulary; NULL for an invalid id. */
const char *tok_text(const tok_vocab *v, int32_t id, size_t *len);
/* Id of a token by exact text, or -1. */
int32_t tok_find(const tok_vocab *v, const char *text, size_t len);
const char *tok_model_name(const tok_vocab *v); /* "gpt2", "gemma4", "llama" */
const char *tok_pre_name(const tok_vocab *v);   /* the pre-tokenizer in effect */

#endif
