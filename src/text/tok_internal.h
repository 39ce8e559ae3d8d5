/* tok_internal.h — what the tokenizer's files share: the vocabulary struct,
 * the string table, the merge table, the per-call encoding scratch and each
 * stage's entry point. Not for use outside src/text/tok*.c; the library's
 * interface is tokenizer.h.
 *
 *   tokenizer.c    the encoding pipeline (tok_encode), scratch, bigram heap
 *   tok_vocab.c    loading from GGUF (tok_load/tok_free), string table, facts
 *   tok_special.c  special tokens: attributes from texts, the partition of text
 *   tok_pretok.c   pre-tokenizer regexes (PCRE2): table, compile, split
 *   tok_bpe.c      byte-level and raw-UTF-8 BPE: merges, byte tables, words
 *   tok_spm.c      classic SentencePiece (score-ordered merges)
 *   tok_decode.c   token pieces, decoding, streaming UTF-8 decoding
 *
 * Data layout: every string the BPE can meet (vocabulary tokens, both sides of
 * every merge and every merge result) is interned once in a strtab; a string
 * id ("sid") equals the token id for the first n_vocab strings. A merge is
 * then a lookup of the integer pair (sid_left, sid_right) -> (rank,
 * sid_merged), so the BPE loop never hashes or copies strings.
 */
#ifndef PT_TOK_INTERNAL_H
#define PT_TOK_INTERNAL_H

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "text/tokenizer.h"

#define TOK_MAX_RE 8 /* regexes one pre-tokenizer may apply in turn */

enum { KIND_BPE = 1, KIND_SPM = 2 };

/* "▁" (U+2581), SentencePiece's visible space, as UTF-8 */
#define TOK_SPACE_MARK "\xe2\x96\x81"

/* ===== String table: interned byte strings, ids in insertion order ===== */

typedef struct strtab {
    char *bytes; /* [n_bytes] all strings back to back */
    size_t n_bytes, cap_bytes;
    uint64_t *off; /* [n] start of string i in bytes */
    uint32_t *len; /* [n] length of string i */
    int32_t n;     /* strings interned; the next sid */
    size_t cap;    /* room in off[] and len[] */
    int32_t *slot; /* [mask+1] open-addressing table of sids, -1 = empty */
    uint32_t mask;
} strtab;

/* FNV-1a over n bytes, folded: the hash of every byte-keyed table here. */
uint64_t tok_hash_bytes(const void *p, size_t n);

/* Sid of the string s[0..n), or -1. */
int32_t strtab_find(const strtab *t, const void *s, size_t n);
/* Size the slot table for `want` strings (rehashing those present). 0 or -1. */
int strtab_reserve(strtab *t, uint32_t want);
/* Intern a string; returns its sid (existing or new), -1 on out of memory.
 * *added tells whether it was new. */
int32_t strtab_intern(strtab *t, const void *s, size_t n, int *added);
void strtab_free(strtab *t);

/* ===== Merge table: (sid_left, sid_right) -> (rank, sid_merged) ===== */

typedef struct merge_ent {
    uint64_t key; /* (left << 32 | right) + 1; 0 = empty */
    int32_t rank; /* position in tokenizer.ggml.merges (lower merges first) */
    int32_t res;  /* sid of left+right */
} merge_ent;

/* ===== The vocabulary ===== */

struct tok_vocab {
    int kind;       /* KIND_BPE or KIND_SPM */
    char model[32]; /* tokenizer.ggml.model */
    char pre[64];   /* pre-tokenizer in effect */
    int32_t n_vocab;
    strtab st;     /* sids 0..n_vocab-1 are the tokens */
    uint8_t *attr; /* [n_vocab] TOK_ATTR_* */
    float *score;  /* [n_vocab] SentencePiece scores (0 when absent) */
    uint8_t *eog;  /* [n_vocab] 1 when the token ends generation */

    merge_ent *merges; /* [merge_mask+1] */
    uint32_t merge_mask;

    int byte_encode;   /* words are GPT-2 byte-encoded before BPE */
    int escape_ws;     /* ' ' -> U+2581 before BPE, back when decoding */
    int ignore_merges; /* a word that is a whole token is taken as is (llama3) */
    int newline_words; /* gemma4: a run of '\n' that is a token is taken whole */
    int add_space_prefix;
    int32_t byte_sid[256];          /* byte-level BPE: sid of the GPT-2 character of each byte */
    int32_t ascii_sid[128];         /* raw-UTF-8 BPE: sid of each one-byte character */
    int32_t marker_sid;             /* raw-UTF-8 BPE: sid of U+2581 */
    int32_t byte_tok[256];          /* the token a raw byte falls back to, -1 if none */
    unsigned char byte_enc[256][2]; /* GPT-2 character of each byte, UTF-8 (2 bytes max) */
    uint8_t byte_enc_len[256];

    int n_re;
    pcre2_code *re[TOK_MAX_RE];

    int32_t *special; /* [n_special] control/user-defined/unknown ids, longest text first */
    int32_t n_special;
    int32_t fb_start[257]; /* specials by first byte: fb_list[fb_start[c]..fb_start[c+1]) */
    int32_t *fb_list;      /* [n_special] indices into special[] */

    char *pieces;        /* decoded bytes of every token, back to back */
    uint64_t *piece_off; /* [n_vocab+1] */

    int32_t bos, eos, eot, eom, unk, sep, pad, mask;
    int add_bos, add_eos;
};

/* ===== Encoding scratch (one per tok_encode call) ===== */

typedef struct seg {
    size_t off, len; /* bytes, in the sanitized fragment */
} seg;

typedef struct sym {
    int32_t sid;        /* interned string id of the symbol's text, -1 if not interned */
    int32_t off, len;   /* bytes in the word; len 0 once merged away */
    int32_t prev, next; /* neighbours, -1 at the ends */
} sym;

/* Set up symbol number ns of a word being split: text at off, len bytes,
 * linked to its neighbours ns-1 and ns+1 (the caller ends the list). */
static inline void tok_sym_init(sym *y, int32_t ns, int32_t sid, size_t off, size_t len) {
    y->sid = sid;
    y->off = (int32_t)off;
    y->len = (int32_t)len;
    y->prev = ns - 1;
    y->next = ns + 1;
}

typedef struct bigram {
    int32_t rank; /* merge rank (BPE) */
    float score;  /* SPM only */
    int32_t left, right;
    int32_t l_sid, r_sid, res;
    int32_t size; /* SPM: byte length of left+right when queued */
} bigram;

typedef struct wc_ent {
    uint64_t hash;     /* 0 = empty */
    uint32_t off, len; /* word text in wc_bytes */
    uint32_t ids, n;   /* its ids in wc_ids */
} wc_ent;

typedef struct scratch {
    char *buf; /* sanitized fragment */
    size_t buf_cap;
    seg *segs[2]; /* words before / after one regex (two buffers, swapped) */
    size_t n_segs[2], cap_segs[2];
    sym *syms; /* [cap_syms] symbols of the word being merged */
    size_t cap_syms;
    bigram *heap; /* [n_heap] candidate merges */
    size_t n_heap, cap_heap;
    char *wbuf; /* byte-encoded word (ignore_merges) */
    size_t wbuf_cap;
    pcre2_match_data *md;
    pcre2_match_context *mctx;
    pcre2_jit_stack *jit;
    /* word cache: words repeat (Zipf), so each distinct word is merged once
     * per call; its ids are then copied. Bounded: inserts stop when full. */
    wc_ent *wc;     /* [WC_SLOTS] */
    char *wc_bytes; /* word texts */
    size_t wc_nbytes, wc_capbytes;
    int32_t *wc_ids; /* their token ids */
    size_t wc_nids, wc_capids;
    uint32_t wc_used;
} scratch;

/* Push a candidate merge; the heap is ordered by (rank, left) ascending, or
 * with spm set by (score descending, left). 0 or -1 (out of memory). */
int tok_heap_push(scratch *s, const bigram *b, int spm);
/* Pop the best candidate (the heap must not be empty). */
bigram tok_heap_pop(scratch *s, int spm);

/* ===== The stages ===== */

/* tok_vocab.c: an array-valued metadata key of element type elem_type
 * (GGUF_NTYPES: any numeric). NULL when absent (err set and *bad = 1 when
 * required) or of the wrong type (err set, *bad = 1). */
const gguf_value *tok_gguf_array(const gguf_ctx *g, const char *key, uint32_t elem_type,
                                 int required, pt_err *err, int *bad);
const char *tok_gguf_path(const gguf_ctx *g); /* for messages */

/* tok_special.c: the control / end-of-generation / user-defined attributes
 * llama.cpp derives from token texts, whatever token_type says. */
void tok_special_attrs(tok_vocab *v);
/* tok_special.c: the table of special tokens by first byte. 0 or -1 (oom). */
int tok_special_build(tok_vocab *v);

/* A special token found in the text: where, and which (its priority). */
typedef struct occ {
    int32_t order; /* index into v->special (priority) */
    size_t pos;
} occ;

/* tok_special.c: the special tokens to cut out of text, in llama.cpp's order.
 * With parse_special, CONTROL/UNKNOWN tokens are candidates too, except where
 * their text would overlap a range of plain (NULL: none; checked by the
 * caller: in order, within len). Returns the accepted occurrences sorted by
 * position in *acc (malloc'd), their count, or -1 on out of memory. */
long tok_special_find(const tok_vocab *v, const char *text, size_t len, int parse_special,
                      const tok_spans *plain, occ **acc);

typedef struct pre_def pre_def;
/* tok_pretok.c: the pre-tokenizer named by tokenizer.ggml.pre, or NULL. */
const pre_def *tok_pretok_find(const char *pre);
int tok_pretok_flags(const pre_def *pd);
enum {
    PRE_IGNORE_MERGES = 1, /* whole-token words skip BPE */
    PRE_ADD_BOS = 2,       /* add_bos defaults to true */
    PRE_NO_BOS = 4,        /* the default bos id is none (glm4) */
    PRE_RAW_UTF8 = 8,      /* no GPT-2 byte encoding; spaces escaped to U+2581 */
};
/* tok_pretok.c: compile pd's regexes into v->re. 0, or -1 with err set. */
int tok_pretok_compile(tok_vocab *v, const pre_def *pd, pt_err *err);
/* tok_pretok.c: split s->buf[0..len) by the vocabulary's regexes; the words
 * end in s->segs[w] where w is returned (or -1 with err set). */
int tok_pretok_split(const tok_vocab *v, scratch *s, size_t len, pt_err *err);

/* tok_bpe.c: merges from tokenizer.ggml.merges and the byte tables. 0, or -1
 * with err set. */
int tok_bpe_init(tok_vocab *v, const gguf_ctx *g, pt_err *err);
/* tok_bpe.c: the GPT-2 byte-to-unicode alphabet (code point of byte b). */
uint32_t tok_gpt2_byte_cp(int b);
/* tok_bpe.c: encode one fragment (no special tokens in it). 0, or -1 with err. */
int tok_bpe_fragment(const tok_vocab *v, scratch *s, const char *text, size_t len, tok_ids *out,
                     pt_err *err);

/* tok_spm.c: the byte-fallback table of a SentencePiece vocabulary. */
void tok_spm_init(tok_vocab *v);
/* tok_spm.c: encode one fragment; prefix_space adds the leading "▁". 0 or -1. */
int tok_spm_fragment(const tok_vocab *v, scratch *s, const char *text, size_t len, int prefix_space,
                     tok_ids *out, pt_err *err);

/* tok_decode.c: the bytes every token decodes to (v->pieces). 0 or -1 (oom). */
int tok_build_pieces(tok_vocab *v);

#endif
