/* tokenizer.c — byte-level BPE, SentencePiece-style BPE and classic SentencePiece
 * tokenizers built from GGUF metadata (see tokenizer.h for the contract).
 *
 * Encoding pipeline (one call of tok_encode):
 *   1. special-token partition: the text is cut around special-token texts the
 *      caller allows, in llama.cpp's order (longest token first, left to right
 *      inside each remaining text fragment), so results match it even when
 *      special texts overlap;
 *   2. each remaining fragment is made valid UTF-8 the way llama.cpp reads it
 *      (a byte that does not start a well-formed sequence becomes U+FFFD);
 *   3. the pre-tokenizer's regexes split the fragment into words. Several
 *      regexes apply in turn, each one splitting the pieces the previous one
 *      left, and the text between matches is kept as pieces too;
 *   4. BPE merges each word by merge rank (gpt2, gemma4) or SentencePiece
 *      merges by score (llama); symbols that are not tokens fall back to byte
 *      tokens.
 *
 * Data layout: every string the BPE can meet (vocabulary tokens, both sides of
 * every merge and every merge result) is interned once; a string id ("sid")
 * equals the token id for the first n_vocab strings. A merge is then a lookup
 * of the integer pair (sid_left, sid_right) -> (rank, sid_merged), so the BPE
 * loop never hashes or copies strings.
 *
 * Whitespace: llama.cpp's \s is Unicode White_Space; PCRE2's \s under UCP
 * differs at U+0085, so patterns are written with \s and rewritten to an
 * explicit White_Space class at load time.
 *
 * Non-goals: WordPiece/Unigram/RWKV vocabularies; llama.cpp's per-model LSTRIP
 * and RSTRIP attributes (no GGUF stores them); its detokenizer's
 * "clean_up_tokenization_spaces" pass (decoding here is exact concatenation, so
 * decode(encode(x)) == x for valid UTF-8 x).
 */
#define PCRE2_CODE_UNIT_WIDTH 8
#include "text/tokenizer.h"

#include <pcre2.h>
#include <stdlib.h>
#include <string.h>

#define TOK_MAX_RE 8

enum { KIND_BPE = 1, KIND_SPM = 2 };

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

static int ids_push(tok_ids *a, int32_t id) {
    if (a->n == a->cap) {
        size_t cap = a->cap ? a->cap * 2 : 64;
        int32_t *p = realloc(a->v, cap * sizeof *p);
        if (!p) return -1;
        a->v = p;
        a->cap = cap;
    }
    a->v[a->n++] = id;
    return 0;
}

static int bytes_append(tok_bytes *b, const void *src, size_t n) {
    if (b->cap - b->n < n) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap - b->n < n) cap *= 2;
        char *p = realloc(b->v, cap);
        if (!p) return -1;
        b->v = p;
        b->cap = cap;
    }
    if (n) memcpy(b->v + b->n, src, n);
    b->n += n;
    return 0;
}

/* ===== UTF-8 ===== */

static int utf8_encode(uint32_t cp, unsigned char *o) {
    if (cp < 0x80) {
        o[0] = (unsigned char)cp;
        return 1;
    }
    if (cp < 0x800) {
        o[0] = (unsigned char)(0xC0 | (cp >> 6));
        o[1] = (unsigned char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        o[0] = (unsigned char)(0xE0 | (cp >> 12));
        o[1] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
        o[2] = (unsigned char)(0x80 | (cp & 0x3F));
        return 3;
    }
    o[0] = (unsigned char)(0xF0 | (cp >> 18));
    o[1] = (unsigned char)(0x80 | ((cp >> 12) & 0x3F));
    o[2] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
    o[3] = (unsigned char)(0x80 | (cp & 0x3F));
    return 4;
}

/* Length of a UTF-8 sequence from its lead byte, as llama.cpp's unicode_len_utf8. */
static int utf8_len(unsigned char c) {
    static const unsigned char lut[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
    return lut[c >> 4];
}

/* Decode one code point the way llama.cpp does (lenient about overlongs, strict
 * about continuation bytes and truncation). Returns the bytes consumed, or 0
 * when s[0] does not start a sequence it accepts. */
static int utf8_decode_lenient(const unsigned char *s, size_t n, uint32_t *cp) {
    unsigned char c = s[0];
    if (!(c & 0x80)) {
        *cp = c;
        return 1;
    }
    if (!(c & 0x40)) return 0;
    if (!(c & 0x20)) {
        if (n < 2 || (s[1] & 0xC0) != 0x80) return 0;
        *cp = ((uint32_t)(c & 0x1F) << 6) | (s[1] & 0x3F);
        return 2;
    }
    if (!(c & 0x10)) {
        if (n < 3 || (s[1] & 0xC0) != 0x80 || (s[2] & 0xC0) != 0x80) return 0;
        *cp = ((uint32_t)(c & 0x0F) << 12) | ((uint32_t)(s[1] & 0x3F) << 6) | (s[2] & 0x3F);
        return 3;
    }
    if (!(c & 0x08)) {
        if (n < 4 || (s[1] & 0xC0) != 0x80 || (s[2] & 0xC0) != 0x80 || (s[3] & 0xC0) != 0x80)
            return 0;
        *cp = ((uint32_t)(c & 0x07) << 18) | ((uint32_t)(s[1] & 0x3F) << 12) |
              ((uint32_t)(s[2] & 0x3F) << 6) | (s[3] & 0x3F);
        return 4;
    }
    return 0;
}

/* Rewrite `n` bytes of text as valid UTF-8 into out (which must hold 3n
 * bytes): ill-formed bytes become U+FFFD, overlong forms are re-encoded
 * shortest, and code points PCRE2 cannot hold (surrogates, > U+10FFFF) become
 * U+FFFD. When `escape_space` is set, ' ' becomes U+2581. Returns the length. */
static size_t utf8_sanitize(const char *text, size_t n, int escape_space, char *out) {
    const unsigned char *s = (const unsigned char *)text;
    unsigned char *o = (unsigned char *)out;
    size_t i = 0, k = 0;
    while (i < n) {
        unsigned char c = s[i];
        if (c < 0x80) {
            if (c == ' ' && escape_space) {
                o[k++] = 0xE2, o[k++] = 0x96, o[k++] = 0x81;
            } else {
                o[k++] = c;
            }
            i++;
            continue;
        }
        uint32_t cp;
        int l = utf8_decode_lenient(s + i, n - i, &cp);
        if (l == 0) {
            cp = 0xFFFD;
            l = 1;
        } else if ((cp >= 0xD800 && cp <= 0xDFFF) || cp > 0x10FFFF) {
            cp = 0xFFFD;
        }
        k += (size_t)utf8_encode(cp, o + k);
        i += (size_t)l;
    }
    return k;
}

/* The GPT-2 byte-to-unicode alphabet: printable Latin-1 bytes map to
 * themselves, the other 68 bytes to U+0100.. in byte order. */
static uint32_t gpt2_byte_cp(int b) {
    if ((b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF))
        return (uint32_t)b;
    int n = 0;
    for (int c = 0; c < b; c++)
        if (!((c >= 0x21 && c <= 0x7E) || (c >= 0xA1 && c <= 0xAC) || (c >= 0xAE && c <= 0xFF)))
            n++;
    return 256u + (uint32_t)n;
}

/* ===== String interning ===== */

typedef struct strtab {
    char *bytes;     /* [n_bytes] all strings back to back */
    size_t n_bytes, cap_bytes;
    uint64_t *off;   /* [n] start of string i in bytes */
    uint32_t *len;   /* [n] length of string i */
    int32_t n, cap;
    int32_t *slot;   /* [mask+1] open-addressing table of sids, -1 = empty */
    uint32_t mask;
} strtab;

static uint64_t hash_bytes(const void *p, size_t n) {
    const unsigned char *s = p;
    uint64_t h = 0xcbf29ce484222325ull ^ n;
    for (size_t i = 0; i < n; i++) h = (h ^ s[i]) * 0x100000001b3ull;
    return h ^ (h >> 29);
}

static int32_t st_find(const strtab *t, const void *s, size_t n) {
    if (!t->slot) return -1;
    uint32_t i = (uint32_t)hash_bytes(s, n) & t->mask;
    for (;;) {
        int32_t id = t->slot[i];
        if (id < 0) return -1;
        if (t->len[id] == n && memcmp(t->bytes + t->off[id], s, n) == 0) return id;
        i = (i + 1) & t->mask;
    }
}

static int st_grow_slots(strtab *t, uint32_t want) {
    uint32_t size = 1024;
    while (size < want * 2u) size *= 2;
    int32_t *slot = malloc((size_t)size * sizeof *slot);
    if (!slot) return -1;
    memset(slot, 0xFF, (size_t)size * sizeof *slot);
    for (int32_t id = 0; id < t->n; id++) {
        uint32_t i = (uint32_t)hash_bytes(t->bytes + t->off[id], t->len[id]) & (size - 1);
        while (slot[i] >= 0) i = (i + 1) & (size - 1);
        slot[i] = id;
    }
    free(t->slot);
    t->slot = slot;
    t->mask = size - 1;
    return 0;
}

/* Intern a string; returns its sid (existing or new), -1 on out of memory.
 * *added tells whether it was new. */
static int32_t st_intern(strtab *t, const void *s, size_t n, int *added) {
    *added = 0;
    int32_t id = st_find(t, s, n);
    if (id >= 0) return id;
    if (n > UINT32_MAX || t->n == INT32_MAX) return -1;
    if (!t->slot || (uint32_t)t->n * 2u + 2u > t->mask + 1u)
        if (st_grow_slots(t, (uint32_t)t->n + 1024u)) return -1;
    if (t->n == t->cap) {
        int32_t cap = t->cap ? t->cap * 2 : 1024;
        uint64_t *off = realloc(t->off, (size_t)cap * sizeof *off);
        if (!off) return -1;
        t->off = off;
        uint32_t *len = realloc(t->len, (size_t)cap * sizeof *len);
        if (!len) return -1;
        t->len = len;
        t->cap = cap;
    }
    if (t->cap_bytes - t->n_bytes < n) {
        size_t cap = t->cap_bytes ? t->cap_bytes : 65536;
        while (cap - t->n_bytes < n) cap *= 2;
        char *b = realloc(t->bytes, cap);
        if (!b) return -1;
        t->bytes = b;
        t->cap_bytes = cap;
    }
    memcpy(t->bytes + t->n_bytes, s, n);
    id = t->n++;
    t->off[id] = t->n_bytes;
    t->len[id] = (uint32_t)n;
    t->n_bytes += n;
    uint32_t i = (uint32_t)hash_bytes(s, n) & t->mask;
    while (t->slot[i] >= 0) i = (i + 1) & t->mask;
    t->slot[i] = id;
    *added = 1;
    return id;
}

static void st_free(strtab *t) {
    free(t->bytes);
    free(t->off);
    free(t->len);
    free(t->slot);
}

/* ===== Merge table: (sid_left, sid_right) -> (rank, sid_merged) ===== */

typedef struct merge_ent {
    uint64_t key;  /* (left << 32 | right) + 1; 0 = empty */
    int32_t rank;  /* position in tokenizer.ggml.merges (lower merges first) */
    int32_t res;   /* sid of left+right */
} merge_ent;

static uint32_t merge_hash(uint64_t k) { return (uint32_t)((k * 0x9E3779B97F4A7C15ull) >> 32); }

/* ===== The vocabulary ===== */

struct tok_vocab {
    int kind;            /* KIND_BPE or KIND_SPM */
    char model[32];      /* tokenizer.ggml.model */
    char pre[64];        /* pre-tokenizer in effect */
    int32_t n_vocab;
    strtab st;           /* sids 0..n_vocab-1 are the tokens */
    uint8_t *attr;       /* [n_vocab] TOK_ATTR_* */
    float *score;        /* [n_vocab] SentencePiece scores (0 when absent) */
    uint8_t *eog;        /* [n_vocab] 1 when the token ends generation */

    merge_ent *merges;   /* [merge_mask+1] */
    uint32_t merge_mask;

    int byte_encode;     /* words are GPT-2 byte-encoded before BPE */
    int escape_ws;       /* ' ' -> U+2581 before BPE, back when decoding */
    int ignore_merges;   /* a word that is a whole token is taken as is (llama3) */
    int newline_words;   /* gemma4: a run of '\n' that is a token is taken whole */
    int add_space_prefix;
    int32_t byte_sid[256]; /* byte-level BPE: sid of the GPT-2 character of each byte */
    int32_t ascii_sid[128]; /* raw-UTF-8 BPE: sid of each one-byte character */
    int32_t marker_sid;    /* raw-UTF-8 BPE: sid of U+2581 */
    int32_t byte_tok[256]; /* the token a raw byte falls back to, -1 if none */
    unsigned char byte_enc[256][2]; /* GPT-2 character of each byte, UTF-8 (2 bytes max) */
    uint8_t byte_enc_len[256];

    int n_re;
    pcre2_code *re[TOK_MAX_RE];

    int32_t *special;    /* [n_special] control/user-defined/unknown ids, longest text first */
    int32_t n_special;
    int32_t fb_start[257]; /* specials by first byte: fb_list[fb_start[c]..fb_start[c+1]) */
    int32_t *fb_list;    /* [n_special] indices into special[] */

    char *pieces;        /* decoded bytes of every token, back to back */
    uint64_t *piece_off; /* [n_vocab+1] */

    int32_t bos, eos, eot, eom, unk, sep, pad, mask;
    int add_bos, add_eos;
};

/* ===== Pre-tokenizers (regexes as in llama.cpp's llama-vocab.cpp) ===== */

#define RE_CONTRACTIONS "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])"
#define RE_GPT2 "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)"
#define RE_LLAMA3                                                                               \
    RE_CONTRACTIONS "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|" \
                    "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
#define RE_QWEN2                                                                            \
    RE_CONTRACTIONS "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|" \
                    "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
#define RE_QWEN35                                                                     \
    RE_CONTRACTIONS "|[^\\r\\n\\p{L}\\p{N}]?[\\p{L}\\p{M}]+|\\p{N}| ?[^\\s\\p{L}\\p{M}\\p{N}]+" \
                    "[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
#define RE_CJK_DS "[\\x{4E00}-\\x{9FA5}\\x{0800}-\\x{4E00}\\x{AC00}-\\x{D7FF}]+"
/* deepseek-v3: llama.cpp runs this one on a "collapsed" text in which '~' is
 * neither \p{P} nor \p{S}; the two '~' terms reproduce that. */
#define RE_DEEPSEEK3                                                                   \
    "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|(?:[^\\r\\n\\p{L}\\p{P}\\p{S}]|~)?" \
    "[\\p{L}\\p{M}]+| ?(?:(?!~)[\\p{P}\\p{S}])+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
#define RE_GPT4O                                                                                \
    "[^\\r\\n\\p{L}\\p{N}]?((?=[\\p{L}])([^a-z]))*((?=[\\p{L}])([^A-Z]))+" RE_CONTRACTIONS       \
    "?|[^\\r\\n\\p{L}\\p{N}]?((?=[\\p{L}])([^a-z]))+((?=[\\p{L}])([^A-Z]))*" RE_CONTRACTIONS     \
    "?|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
#define RE_TEKKEN                                                                               \
    "[^\\r\\n\\p{L}\\p{N}]?((?=[\\p{L}])([^a-z]))*((?=[\\p{L}])([^A-Z]))+|[^\\r\\n\\p{L}\\p{N}]?" \
    "((?=[\\p{L}])([^a-z]))+((?=[\\p{L}])([^A-Z]))*|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|"     \
    "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
#define RE_DSLLM_LETTERS                                                                        \
    "\\s?[A-Za-z\\x{B5}\\x{C0}-\\x{D6}\\x{D8}-\\x{F6}\\x{F8}-\\x{1BA}\\x{1BC}-\\x{1BF}\\x{1C4}-" \
    "\\x{293}\\x{295}-\\x{2AF}\\x{370}-\\x{373}\\x{376}\\x{377}\\x{37B}-\\x{37D}\\x{37F}"        \
    "\\x{386}\\x{388}-\\x{38A}\\x{38C}\\x{38E}-\\x{3A1}\\x{3A3}-\\x{3F5}\\x{3F7}-\\x{481}"       \
    "\\x{48A}-\\x{52F}\\x{531}-\\x{556}\\x{10A0}-\\x{10C5}\\x{13A0}-\\x{13F5}\\x{13F8}-"         \
    "\\x{13FD}\\x{1C90}-\\x{1CBA}\\x{1CBD}-\\x{1CBF}\\x{1D00}-\\x{1D2B}\\x{1D6B}-\\x{1D77}"      \
    "\\x{1D79}-\\x{1D9A}\\x{1E00}-\\x{1F15}\\x{1F18}-\\x{1F1D}\\x{1F20}-\\x{1F45}\\x{1F48}-"     \
    "\\x{1F4D}\\x{1F50}-\\x{1F57}\\x{1F59}\\x{1F5B}\\x{1F5D}\\x{1F5F}-\\x{1F7D}\\x{1F80}-"       \
    "\\x{1FB4}\\x{1FB6}-\\x{1FBC}\\x{1FBE}\\x{1FC2}-\\x{1FC4}\\x{1FC6}-\\x{1FCC}\\x{1FD0}-"      \
    "\\x{1FD3}\\x{1FD6}-\\x{1FDB}\\x{1FE0}-\\x{1FEC}\\x{1FF2}-\\x{1FF4}\\x{1FF6}-\\x{1FFC}"      \
    "\\x{2102}\\x{2107}\\x{210A}-\\x{2113}\\x{2115}\\x{2119}-\\x{211D}\\x{2124}\\x{2126}"        \
    "\\x{2128}\\x{212A}-\\x{212D}\\x{212F}-\\x{2134}\\x{2139}\\x{213C}-\\x{213F}\\x{2145}-"      \
    "\\x{2149}\\x{214E}\\x{2183}\\x{2184}\\x{2C00}-\\x{2C7B}\\x{2C7E}-\\x{2CE4}\\x{2CEB}-"       \
    "\\x{2CEE}\\x{2CF2}\\x{2CF3}\\x{A640}-\\x{A66D}\\x{A680}-\\x{A69B}\\x{A722}-\\x{A76F}"       \
    "\\x{A771}-\\x{A787}\\x{A78B}-\\x{A78E}\\x{AB70}-\\x{ABBF}\\x{FB00}-\\x{FB06}\\x{FB13}-"     \
    "\\x{FB17}\\x{FF21}-\\x{FF3A}\\x{FF41}-\\x{FF5A}\\x{10400}-\\x{1044F}\\x{104B0}-"            \
    "\\x{104D3}\\x{104D8}-\\x{104FB}\\x{10C80}-\\x{10CB2}\\x{10CC0}-\\x{10CF2}\\x{118A0}-"       \
    "\\x{118DF}\\x{1E900}-\\x{1E943}]+"

enum {
    PRE_IGNORE_MERGES = 1, /* whole-token words skip BPE */
    PRE_ADD_BOS = 2,       /* add_bos defaults to true */
    PRE_NO_BOS = 4,        /* the default bos id is none (glm4) */
    PRE_RAW_UTF8 = 8,      /* no GPT-2 byte encoding; spaces escaped to U+2581 */
};

typedef struct pre_def {
    const char *names; /* '|'-separated tokenizer.ggml.pre values */
    int flags;
    const char *re[TOK_MAX_RE];
} pre_def;

static const pre_def k_pre[] = {
    {"default", 0, {"[\\p{P}\\$\\+<=>\\^~\\|]+", RE_GPT2, "\\p{N}+", "[0-9][0-9][0-9]"}},
    {"llama3|llama-v3|llama-bpe|falcon3|falcon-h1|pixtral|midm-2.0|lfm2|jina-v5-nano",
     PRE_IGNORE_MERGES | PRE_ADD_BOS,
     {RE_LLAMA3}},
    {"dbrx|smaug-bpe", 0, {RE_LLAMA3}},
    {"glm4|chatglm-bpe", PRE_NO_BOS, {RE_LLAMA3}},
    {"qwen2|deepseek-r1-qwen|kormo|f2llmv2|megrez|stablelm2|hunyuan", 0, {RE_QWEN2}},
    {"qwen35", 0, {RE_QWEN35}},
    {"deepseek-llm",
     0,
     {"[\\r\\n]", RE_DSLLM_LETTERS,
      "\\s?[!-/:-~\\x{FF01}-\\x{FF0F}\\x{FF1A}-\\x{FF5E}\\x{2018}-\\x{201F}\\x{3000}-\\x{3002}]+",
      "\\s+$", RE_CJK_DS, "\\p{N}+"}},
    {"deepseek-coder", 0, {"[\\r\\n]", "\\s?\\p{L}+", "\\s?\\p{P}+", RE_CJK_DS, "\\p{N}"}},
    {"deepseek-v3|hunyuan-dense|joyai-llm|hy_v4",
     0,
     {"\\p{N}{1,3}", "[\\x{4E00}-\\x{9FA5}\\x{3040}-\\x{309F}\\x{30A0}-\\x{30FF}]+", RE_DEEPSEEK3}},
    {"gpt-2|phi-2|jina-es|jina-de|gigachat|jina-v2-es|jina-v2-de|a.x-4.0|mellum|modern-bert|mpt|"
     "olmo|exaone4|jina-v1-en|jina-v2-code|roberta-bpe",
     0,
     {RE_GPT2}},
    {"starcoder|refact|command-r|smollm|codeshell|exaone|minerva-7b", 0, {"\\p{N}", RE_GPT2}},
    {"falcon", 0, {"[\\p{P}\\$\\+<=>\\^~\\|`]+", RE_GPT2, "[0-9][0-9][0-9]"}},
    {"gpt-4o|llama4|kanana2|talkie|minimax-m2", 0, {RE_GPT4O}},
    {"tekken", PRE_IGNORE_MERGES | PRE_ADD_BOS, {RE_TEKKEN}},
    {"gemma4", PRE_RAW_UTF8, {"[^\\n]+|[\\n]+"}},
};

static int name_in_list(const char *list, const char *name) {
    size_t n = strlen(name);
    for (const char *p = list;;) {
        const char *e = strchr(p, '|');
        size_t l = e ? (size_t)(e - p) : strlen(p);
        if (l == n && memcmp(p, name, n) == 0) return 1;
        if (!e) return 0;
        p = e + 1;
    }
}

/* Unicode White_Space, the set llama.cpp's \s stands for. */
#define WS_CLASS                                                                     \
    "\\t\\n\\x{0B}\\f\\r \\x{85}\\x{A0}\\x{1680}\\x{2000}-\\x{200A}\\x{2028}\\x{2029}" \
    "\\x{202F}\\x{205F}\\x{3000}"

/* Copy pattern `re` into `out` with \s and \S replaced by explicit classes.
 * Returns 0, or -1 when out (cap bytes) is too small. */
static int rewrite_ws(const char *re, char *out, size_t cap) {
    size_t k = 0;
    int in_class = 0;
#define PUT(str)                                  \
    do {                                          \
        size_t l_ = strlen(str);                  \
        if (k + l_ + 1 > cap) return -1;          \
        memcpy(out + k, str, l_);                 \
        k += l_;                                  \
    } while (0)
    for (const char *p = re; *p; p++) {
        if (p[0] == '\\' && p[1]) {
            if (p[1] == 's') {
                PUT(in_class ? WS_CLASS : "[" WS_CLASS "]");
            } else if (p[1] == 'S' && !in_class) {
                PUT("[^" WS_CLASS "]");
            } else {
                char two[3] = {p[0], p[1], 0};
                PUT(two);
            }
            p++;
            continue;
        }
        if (*p == '[' && !in_class) in_class = 1;
        else if (*p == ']' && in_class) in_class = 0;
        char one[2] = {*p, 0};
        PUT(one);
    }
    out[k] = 0;
    return 0;
#undef PUT
}

static int compile_res(tok_vocab *v, const pre_def *pd, pt_err *err) {
    for (int i = 0; i < TOK_MAX_RE && pd->re[i]; i++) {
        char buf[8192];
        if (rewrite_ws(pd->re[i], buf, sizeof buf))
            return pt_errf(err, "tokenizer: pre-tokenizer '%s': regex too long", v->pre);
        int ec;
        PCRE2_SIZE eo;
        pcre2_code *re = pcre2_compile((PCRE2_SPTR)buf, PCRE2_ZERO_TERMINATED,
                                       PCRE2_UTF | PCRE2_UCP | PCRE2_DOLLAR_ENDONLY, &ec, &eo,
                                       NULL);
        if (!re) {
            PCRE2_UCHAR msg[256];
            pcre2_get_error_message(ec, msg, sizeof msg);
            return pt_errf(err, "tokenizer: pre-tokenizer '%s': regex %d at %zu: %s", v->pre, i,
                           (size_t)eo, (const char *)msg);
        }
        /* JIT is an optimisation: where it is unavailable the interpreter runs. */
        (void)pcre2_jit_compile(re, PCRE2_JIT_COMPLETE);
        v->re[v->n_re++] = re;
    }
    return 0;
}

/* ===== Loading ===== */

static const char *gguf_path(const gguf_ctx *g) {
    return g->n_files && g->files[0].path ? g->files[0].path : "gguf";
}

static const gguf_value *find_array(const gguf_ctx *g, const char *key, uint32_t elem_type,
                                    int required, pt_err *err, int *bad) {
    const gguf_kv *kv = gguf_find(g, key);
    *bad = 0;
    if (!kv) {
        if (required) {
            pt_errf(err, "%s: no vocabulary: missing metadata key '%s'", gguf_path(g), key);
            *bad = 1;
        }
        return NULL;
    }
    if (kv->val.type != GGUF_ARRAY ||
        (elem_type != GGUF_NTYPES && kv->val.arr.type != elem_type)) {
        pt_errf(err, "%s: metadata key '%s' has the wrong type (expected an array of %s)",
                gguf_path(g), key, gguf_type_name(elem_type == GGUF_NTYPES ? GGUF_INT32 : elem_type));
        *bad = 1;
        return NULL;
    }
    return &kv->val;
}

/* Read an optional token id key; keeps *id when absent or out of range. */
static void read_id(const gguf_ctx *g, const char *key, int32_t n_vocab, int32_t *id) {
    const gguf_kv *kv = gguf_find(g, key);
    int64_t x;
    if (!kv || kv->val.type == GGUF_BOOL || gguf_value_i64(&kv->val, &x)) return;
    if (x >= 0 && x < n_vocab) *id = (int32_t)x;
}

static void read_bool(const gguf_ctx *g, const char *key, int *out) {
    const gguf_kv *kv = gguf_find(g, key);
    if (kv && kv->val.type == GGUF_BOOL) *out = kv->val.b != 0;
}

/* Texts llama.cpp marks as control tokens and, for the first list, as
 * end-of-generation, whatever the file's token_type says. */
static const char *const k_eog_texts[] = {
    "<|eot_id|>", "<|im_end|>", "<|end|>", "<|return|>", "<|call|>", "<|flush|>", "<|calls|>",
    "<end_of_turn>", "<|endoftext|>", "</s>", "<|eom_id|>", "<EOT>", "_<EOT>", "[EOT]", "[EOS]",
    "<|end_of_text|>", "<end_of_utterance>", "<eos>", "<turn|>", "<|tool_response>",
    "<\xef\xbd\x9c" "end\xe2\x96\x81of\xe2\x96\x81sentence\xef\xbd\x9c>", "[e~["};
static const char *const k_fim_texts[] = {
    "<|fim_prefix|>", "<fim-prefix>", "<fim_prefix>", "<\xef\xbd\x9c" "fim\xe2\x96\x81" "begin\xef\xbd\x9c>",
    "<PRE>", "\xe2\x96\x81<PRE>", "<|code_prefix|>", "<|prefix|>", "<|fim_suffix|>",
    "<fim-suffix>", "<fim_suffix>", "<\xef\xbd\x9c" "fim\xe2\x96\x81hole\xef\xbd\x9c>", "<SUF>",
    "\xe2\x96\x81<SUF>", "<|code_suffix|>", "<|suffix|>", "<|fim_middle|>", "<fim-middle>",
    "<fim_middle>", "<\xef\xbd\x9c" "fim\xe2\x96\x81" "end\xef\xbd\x9c>", "<MID>", "\xe2\x96\x81<MID>",
    "<|code_middle|>", "<|middle|>", "<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>", "[PAD]",
    "<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>", "<reponame>", "<|file_sep|>"};

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

static int build_specials(tok_vocab *v) {
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
    for (int32_t i = 0; i < n; i++) tmp[i] = (len_id){v->st.len[v->special[i]], v->special[i]};
    qsort(tmp, (size_t)n, sizeof *tmp, cmp_len_id);
    for (int32_t i = 0; i < n; i++) v->special[i] = tmp[i].id;
    free(tmp);
    int32_t count[256] = {0};
    for (int32_t i = 0; i < n; i++)
        count[(unsigned char)v->st.bytes[v->st.off[v->special[i]]]]++;
    v->fb_start[0] = 0;
    for (int c = 0; c < 256; c++) v->fb_start[c + 1] = v->fb_start[c] + count[c];
    int32_t fill[256];
    memcpy(fill, v->fb_start, sizeof fill);
    for (int32_t i = 0; i < n; i++) /* in priority order inside each bucket */
        v->fb_list[fill[(unsigned char)v->st.bytes[v->st.off[v->special[i]]]]++] = i;
    return 0;
}

static int hexval(char c) {
    return c >= '0' && c <= '9' ? c - '0' : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                         : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

/* The bytes a token decodes to (llama.cpp's token_to_piece with special = true). */
static int build_pieces(tok_vocab *v) {
    tok_bytes b = {0};
    v->piece_off = malloc(((size_t)v->n_vocab + 1) * sizeof *v->piece_off);
    if (!v->piece_off) return -1;
    /* reverse GPT-2 map: code point -> byte, for code points < 0x144 */
    int16_t rev[0x144];
    for (int i = 0; i < 0x144; i++) rev[i] = -1;
    for (int c = 0; c < 256; c++) rev[gpt2_byte_cp(c)] = (int16_t)c;
    for (int32_t id = 0; id < v->n_vocab; id++) {
        v->piece_off[id] = b.n;
        const char *t = v->st.bytes + v->st.off[id];
        size_t n = v->st.len[id];
        int a = v->attr[id];
        int rc = 0;
        if (a & (TOK_ATTR_CONTROL | TOK_ATTR_UNKNOWN | TOK_ATTR_USER_DEFINED)) {
            rc = bytes_append(&b, t, n);
        } else if (a & TOK_ATTR_NORMAL) {
            if (v->byte_encode) {
                const unsigned char *s = (const unsigned char *)t;
                for (size_t i = 0; i < n && !rc;) {
                    uint32_t cp;
                    int l = utf8_decode_lenient(s + i, n - i, &cp);
                    if (l == 0) {
                        rc = bytes_append(&b, s + i, 1);
                        i++;
                    } else if (cp < 0x144 && rev[cp] >= 0) {
                        unsigned char byte = (unsigned char)rev[cp];
                        rc = bytes_append(&b, &byte, 1);
                        i += (size_t)l;
                    } else { /* not in the byte alphabet: keep the character */
                        rc = bytes_append(&b, s + i, (size_t)l);
                        i += (size_t)l;
                    }
                }
            } else if (v->escape_ws) {
                for (size_t i = 0; i < n && !rc;) {
                    if (i + 3 <= n && memcmp(t + i, "\xe2\x96\x81", 3) == 0) {
                        rc = bytes_append(&b, " ", 1);
                        i += 3;
                    } else {
                        rc = bytes_append(&b, t + i, 1);
                        i++;
                    }
                }
            } else {
                rc = bytes_append(&b, t, n);
            }
        } else if (a & TOK_ATTR_BYTE) {
            int hi = n == 6 ? hexval(t[3]) : -1, lo = n == 6 ? hexval(t[4]) : -1;
            if (n == 6 && !memcmp(t, "<0x", 3) && t[5] == '>' && hi >= 0 && lo >= 0) {
                unsigned char byte = (unsigned char)(hi * 16 + lo);
                rc = bytes_append(&b, &byte, 1);
            } else {
                rc = bytes_append(&b, t, n);
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

static int add_merge(tok_vocab *v, int32_t a, int32_t b, int32_t rank, int32_t res) {
    uint64_t key = (((uint64_t)(uint32_t)a << 32) | (uint32_t)b) + 1;
    uint32_t i = merge_hash(key) & v->merge_mask;
    while (v->merges[i].key) {
        if (v->merges[i].key == key) return 0; /* first (lowest rank) wins, as llama.cpp's emplace */
        i = (i + 1) & v->merge_mask;
    }
    v->merges[i].key = key;
    v->merges[i].rank = rank;
    v->merges[i].res = res;
    return 0;
}

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

static int load_merges(tok_vocab *v, const gguf_ctx *g, pt_err *err) {
    int bad;
    const gguf_value *m = find_array(g, "tokenizer.ggml.merges", GGUF_STRING, 1, err, &bad);
    if (!m) return -1;
    if (m->arr.n > (uint64_t)INT32_MAX / 4)
        return pt_errf(err, "%s: %llu merges is too many", gguf_path(g),
                       (unsigned long long)m->arr.n);
    uint32_t size = 1024;
    while (size < m->arr.n * 2) size *= 2;
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
        int32_t a = st_intern(&v->st, l, ln, &added);
        int32_t b = st_intern(&v->st, r, rn, &added);
        if (ln + rn > tmp_cap) {
            tmp_cap = (ln + rn) * 2 + 64;
            char *t = realloc(tmp, tmp_cap);
            if (!t) {
                free(tmp);
                return pt_errf(err, "tokenizer: out of memory");
            }
            tmp = t;
        }
        if (ln) memcpy(tmp, l, ln);
        if (rn) memcpy(tmp + ln, r, rn);
        int32_t ab = st_intern(&v->st, tmp ? tmp : "", ln + rn, &added);
        if (a < 0 || b < 0 || ab < 0) {
            free(tmp);
            return pt_errf(err, "tokenizer: out of memory");
        }
        add_merge(v, a, b, (int32_t)i, ab);
    }
    free(tmp);
    return 0;
}

tok_vocab *tok_load(const gguf_ctx *g, pt_err *err) {
    const char *path = gguf_path(g);
    tok_vocab *v = calloc(1, sizeof *v);
    if (!v) {
        pt_errf(err, "tokenizer: out of memory");
        return NULL;
    }
    char pre[64] = "";
    const gguf_kv *mk = gguf_find(g, "tokenizer.ggml.model");
    if (!mk) {
        pt_errf(err, "%s: no vocabulary (metadata key 'tokenizer.ggml.model' is missing)", path);
        goto fail;
    }
    if (gguf_get_str(g, "tokenizer.ggml.model", v->model, sizeof v->model, err)) goto fail;
    const gguf_kv *pk = gguf_find(g, "tokenizer.ggml.pre");
    if (pk && gguf_get_str(g, "tokenizer.ggml.pre", pre, sizeof pre, err)) goto fail;

    int pre_flags = 0;
    const pre_def *pd = NULL;
    if (!strcmp(v->model, "gpt2") || !strcmp(v->model, "gemma4")) {
        v->kind = KIND_BPE;
        if (!strcmp(v->model, "gemma4")) snprintf(pre, sizeof pre, "gemma4");
        if (!pre[0]) snprintf(pre, sizeof pre, "default");
        for (size_t i = 0; i < PT_ARRAY_LEN(k_pre); i++)
            if (name_in_list(k_pre[i].names, pre)) pd = &k_pre[i];
        if (!pd) {
            pt_errf(err, "%s: unsupported pre-tokenizer '%s' (tokenizer.ggml.pre)", path, pre);
            goto fail;
        }
        pre_flags = pd->flags;
        v->byte_encode = !(pre_flags & PRE_RAW_UTF8);
        v->escape_ws = !!(pre_flags & PRE_RAW_UTF8);
        v->newline_words = !!(pre_flags & PRE_RAW_UTF8);
        v->ignore_merges = !!(pre_flags & PRE_IGNORE_MERGES);
        v->add_bos = !!(pre_flags & PRE_ADD_BOS);
    } else if (!strcmp(v->model, "llama")) {
        v->kind = KIND_SPM;
        snprintf(pre, sizeof pre, "spm");
        v->escape_ws = 1;
        v->add_space_prefix = 1;
        v->add_bos = 1;
    } else if (!strcmp(v->model, "no_vocab") || !strcmp(v->model, "none")) {
        pt_errf(err, "%s: the model has no vocabulary (tokenizer.ggml.model = '%s')", path,
                v->model);
        goto fail;
    } else {
        pt_errf(err, "%s: unsupported tokenizer model '%s' (expected gpt2, gemma4 or llama)", path,
                v->model);
        goto fail;
    }
    snprintf(v->pre, sizeof v->pre, "%s", pre);

    /* tokens, types, scores */
    int bad;
    const gguf_value *toks = find_array(g, "tokenizer.ggml.tokens", GGUF_STRING, 1, err, &bad);
    if (!toks) goto fail;
    if (toks->arr.n == 0 || toks->arr.n > INT32_MAX / 2) {
        pt_errf(err, "%s: tokenizer.ggml.tokens has %llu entries", path,
                (unsigned long long)toks->arr.n);
        goto fail;
    }
    v->n_vocab = (int32_t)toks->arr.n;
    const gguf_value *types = find_array(g, "tokenizer.ggml.token_type", GGUF_NTYPES, 0, err, &bad);
    if (bad) goto fail;
    const gguf_value *scores = find_array(g, "tokenizer.ggml.scores", GGUF_NTYPES, 0, err, &bad);
    if (bad) goto fail;
    if ((types && types->arr.n < toks->arr.n) || (scores && scores->arr.n < toks->arr.n)) {
        pt_errf(err, "%s: token_type/scores arrays are shorter than the %d tokens", path,
                v->n_vocab);
        goto fail;
    }
    v->attr = calloc((size_t)v->n_vocab, 1);
    v->score = calloc((size_t)v->n_vocab, sizeof *v->score);
    v->eog = calloc((size_t)v->n_vocab, 1);
    if (!v->attr || !v->score || !v->eog || st_grow_slots(&v->st, (uint32_t)v->n_vocab)) {
        pt_errf(err, "tokenizer: out of memory");
        goto fail;
    }
    for (int32_t i = 0; i < v->n_vocab; i++) {
        const gguf_str *s = &toks->arr.items[i].str;
        int added;
        int32_t sid = st_intern(&v->st, s->ptr, s->len, &added);
        if (sid < 0) {
            pt_errf(err, "tokenizer: out of memory");
            goto fail;
        }
        if (!added) {
            pt_errf(err, "%s: duplicate token in vocabulary: '%.*s' has ids %d and %d", path,
                    (int)PT_MIN(s->len, 64), s->ptr, sid, i);
            goto fail;
        }
        int64_t ty = 1;
        if (types && gguf_array_i64(types, (uint64_t)i, &ty)) ty = 1;
        v->attr[i] = ty == 1   ? TOK_ATTR_NORMAL
                     : ty == 2 ? TOK_ATTR_UNKNOWN
                     : ty == 3 ? TOK_ATTR_CONTROL
                     : ty == 4 ? TOK_ATTR_USER_DEFINED
                     : ty == 5 ? TOK_ATTR_UNUSED
                     : ty == 6 ? TOK_ATTR_BYTE
                               : 0;
        double sc = 0;
        if (scores && !gguf_array_f64(scores, (uint64_t)i, &sc)) v->score[i] = (float)sc;
    }

    /* special ids: per-model defaults, then metadata */
    v->bos = v->eos = v->eot = v->eom = v->unk = v->sep = v->pad = v->mask = -1;
    if (v->kind == KIND_SPM) {
        v->bos = 1, v->eos = 2, v->unk = 0;
    } else if (!strcmp(v->model, "gpt2")) {
        v->bos = v->eos = 11; /* llama.cpp's default for gpt2 vocabularies */
        if (pre_flags & PRE_NO_BOS) v->bos = -1;
    }
    if (v->bos >= v->n_vocab) v->bos = -1;
    if (v->eos >= v->n_vocab) v->eos = -1;
    if (v->unk >= v->n_vocab) v->unk = -1;
    read_id(g, "tokenizer.ggml.bos_token_id", v->n_vocab, &v->bos);
    read_id(g, "tokenizer.ggml.eos_token_id", v->n_vocab, &v->eos);
    read_id(g, "tokenizer.ggml.eot_token_id", v->n_vocab, &v->eot);
    read_id(g, "tokenizer.ggml.eom_token_id", v->n_vocab, &v->eom);
    read_id(g, "tokenizer.ggml.unknown_token_id", v->n_vocab, &v->unk);
    read_id(g, "tokenizer.ggml.seperator_token_id", v->n_vocab, &v->sep);
    read_id(g, "tokenizer.ggml.padding_token_id", v->n_vocab, &v->pad);
    read_id(g, "tokenizer.ggml.mask_token_id", v->n_vocab, &v->mask);
    read_bool(g, "tokenizer.ggml.add_bos_token", &v->add_bos);
    read_bool(g, "tokenizer.ggml.add_eos_token", &v->add_eos);
    read_bool(g, "tokenizer.ggml.add_space_prefix", &v->add_space_prefix);
    if (!strcmp(pre, "gemma4")) v->add_bos = 1; /* llama.cpp overrides this for Gemma 4 */
    if (v->add_bos && v->bos < 0) v->add_bos = 0;
    if (v->add_eos && v->eos < 0) v->add_eos = 0;

    /* attributes llama.cpp derives from token texts */
    for (size_t k = 0; k < PT_ARRAY_LEN(k_fim_texts); k++) {
        int32_t id = tok_find(v, k_fim_texts[k], strlen(k_fim_texts[k]));
        if (id >= 0) v->attr[id] |= TOK_ATTR_CONTROL;
    }
    for (size_t k = 0; k < PT_ARRAY_LEN(k_eog_texts); k++) {
        int32_t id = tok_find(v, k_eog_texts[k], strlen(k_eog_texts[k]));
        if (id >= 0) v->attr[id] |= TOK_ATTR_CONTROL, v->eog[id] = 1;
    }
    {
        static const char *const user_defined[] = {"<|channel|>", "<|message|>", "<|start|>",
                                                   "<|constrain|>"};
        for (size_t k = 0; k < PT_ARRAY_LEN(user_defined); k++) {
            int32_t id = tok_find(v, user_defined[k], strlen(user_defined[k]));
            if (id >= 0) v->attr[id] = TOK_ATTR_USER_DEFINED;
        }
    }
    if (v->eos >= 0) v->eog[v->eos] = 1;
    if (v->eot >= 0) v->eog[v->eot] = 1;
    if (v->eom >= 0) v->eog[v->eom] = 1;
    {
        /* Gemma 4: "</s>" is an ordinary token there, not an end of generation */
        int32_t tr = tok_find(v, "<|tool_response>", 16), s = tok_find(v, "</s>", 4);
        if (tr >= 0 && s >= 0 && v->eog[tr] && s != v->eos) {
            v->eog[s] = 0;
            v->attr[s] = TOK_ATTR_NORMAL;
        }
    }

    /* BPE tables */
    if (v->kind == KIND_BPE) {
        if (load_merges(v, g, err)) goto fail;
        for (int b = 0; b < 256; b++) {
            unsigned char enc[4];
            int l = utf8_encode(gpt2_byte_cp(b), enc);
            memcpy(v->byte_enc[b], enc, 2);
            v->byte_enc_len[b] = (uint8_t)l;
            v->byte_sid[b] = st_find(&v->st, enc, (size_t)l);
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
            v->ascii_sid[c] = st_find(&v->st, &ch, 1);
        }
        v->marker_sid = st_find(&v->st, "\xe2\x96\x81", 3);
        if (compile_res(v, pd, err)) goto fail;
    } else {
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
    if (build_specials(v) || build_pieces(v)) {
        pt_errf(err, "tokenizer: out of memory");
        goto fail;
    }
    return v;
fail:
    tok_free(v);
    return NULL;
}

void tok_free(tok_vocab *v) {
    if (!v) return;
    st_free(&v->st);
    free(v->attr);
    free(v->score);
    free(v->eog);
    free(v->merges);
    for (int i = 0; i < v->n_re; i++) pcre2_code_free(v->re[i]);
    free(v->special);
    free(v->fb_list);
    free(v->pieces);
    free(v->piece_off);
    free(v);
}

/* ===== Encoding scratch ===== */

typedef struct seg {
    size_t off, len; /* bytes, in the sanitized fragment */
} seg;

typedef struct sym {
    int32_t sid;        /* interned string id of the symbol's text, -1 if not interned */
    int32_t off, len;   /* bytes in the word; len 0 once merged away */
    int32_t prev, next; /* neighbours, -1 at the ends */
} sym;

typedef struct bigram {
    int32_t rank;       /* merge rank (BPE); for SPM the score's order key */
    float score;        /* SPM only */
    int32_t left, right;
    int32_t l_sid, r_sid, res;
    int32_t size;       /* SPM: byte length of left+right when queued */
} bigram;

typedef struct wc_ent {
    uint64_t hash;      /* 0 = empty */
    uint32_t off, len;  /* word text in wc_bytes */
    uint32_t ids, n;    /* its ids in wc_ids */
} wc_ent;

#define WC_SLOTS 65536u   /* power of two */
#define WC_MAX_WORD 256   /* longer words are not cached */

typedef struct scratch {
    char *buf;          /* sanitized fragment */
    size_t buf_cap;
    seg *segs[2];
    size_t n_segs[2], cap_segs[2];
    sym *syms;
    size_t cap_syms;
    bigram *heap;
    size_t n_heap, cap_heap;
    char *wbuf;         /* byte-encoded word (ignore_merges) */
    size_t wbuf_cap;
    pcre2_match_data *md;
    pcre2_match_context *mctx;
    pcre2_jit_stack *jit;
    /* word cache: words repeat (Zipf), so each distinct word is merged once
     * per call; its ids are then copied. Bounded: inserts stop when full. */
    wc_ent *wc;         /* [WC_SLOTS] */
    char *wc_bytes;     /* word texts */
    size_t wc_nbytes, wc_capbytes;
    int32_t *wc_ids;    /* their token ids */
    size_t wc_nids, wc_capids;
    uint32_t wc_used;
} scratch;

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

static int grow(void **p, size_t *cap, size_t need, size_t elem) {
    if (need <= *cap) return 0;
    size_t c = *cap ? *cap : 64;
    while (c < need) c *= 2;
    void *q = realloc(*p, c * elem);
    if (!q) return -1;
    *p = q;
    *cap = c;
    return 0;
}

static int seg_push(scratch *s, int w, size_t off, size_t len) {
    if (grow((void **)&s->segs[w], &s->cap_segs[w], s->n_segs[w] + 1, sizeof(seg))) return -1;
    s->segs[w][s->n_segs[w]].off = off;
    s->segs[w][s->n_segs[w]].len = len;
    s->n_segs[w]++;
    return 0;
}

/* Heap ordered by (rank, left) ascending: the lowest-rank merge, leftmost first. */
static int bg_less(const bigram *a, const bigram *b) {
    return a->rank < b->rank || (a->rank == b->rank && a->left < b->left);
}

/* SPM heap: highest score first, then leftmost. */
static int bg_less_spm(const bigram *a, const bigram *b) {
    return a->score > b->score || (a->score == b->score && a->left < b->left);
}

static int heap_push(scratch *s, const bigram *b, int spm) {
    if (grow((void **)&s->heap, &s->cap_heap, s->n_heap + 1, sizeof(bigram))) return -1;
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

static bigram heap_pop(scratch *s, int spm) {
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

/* ===== Regex split ===== */

/* Split buf[0..len) by the vocabulary's regexes; the words end in s->segs[w]
 * where w is returned (or -1 with err set). */
static int split_words(const tok_vocab *v, scratch *s, size_t len, pt_err *err) {
    int w = 0;
    s->n_segs[0] = 0;
    if (seg_push(s, 0, 0, len)) return pt_errf(err, "tokenizer: out of memory");
    for (int r = 0; r < v->n_re; r++) {
        int nw = w ^ 1;
        s->n_segs[nw] = 0;
        for (size_t k = 0; k < s->n_segs[w]; k++) {
            seg sg = s->segs[w][k];
            PCRE2_SPTR subj = (PCRE2_SPTR)(s->buf + sg.off);
            size_t pos = 0, gap = 0;
            uint32_t opts = PCRE2_NO_UTF_CHECK;
            while (pos <= sg.len) {
                int rc = pcre2_match(v->re[r], subj, sg.len, pos, opts, s->md, s->mctx);
                if (rc == PCRE2_ERROR_JIT_STACKLIMIT) /* very long match: interpreter */
                    rc = pcre2_match(v->re[r], subj, sg.len, pos, opts | PCRE2_NO_JIT, s->md,
                                     s->mctx);
                if (rc == PCRE2_ERROR_NOMATCH) break;
                if (rc < 0) {
                    PCRE2_UCHAR msg[256];
                    pcre2_get_error_message(rc, msg, sizeof msg);
                    return pt_errf(err, "tokenizer: regex match failed: %s", (const char *)msg);
                }
                PCRE2_SIZE *ov = pcre2_get_ovector_pointer(s->md);
                size_t ms = ov[0], me = ov[1];
                if (me == ms) { /* empty match: look again from here, non-empty */
                    if (opts & PCRE2_NOTEMPTY_ATSTART) break;
                    opts |= PCRE2_NOTEMPTY_ATSTART;
                    pos = me;
                    continue;
                }
                opts = PCRE2_NO_UTF_CHECK;
                if (ms > gap && seg_push(s, nw, sg.off + gap, ms - gap))
                    return pt_errf(err, "tokenizer: out of memory");
                if (seg_push(s, nw, sg.off + ms, me - ms))
                    return pt_errf(err, "tokenizer: out of memory");
                gap = pos = me;
                if (pos == sg.len) break;
            }
            if (gap < sg.len && seg_push(s, nw, sg.off + gap, sg.len - gap))
                return pt_errf(err, "tokenizer: out of memory");
        }
        w = nw;
    }
    return w;
}

/* ===== BPE on one word ===== */

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
    return heap_push(s, &b, 0);
}

/* Emit the tokens of word w[0..n) (already byte-level or raw as the vocab
 * wants; for byte-level BPE `w` holds the original bytes). */
static int bpe_word(const tok_vocab *v, scratch *s, const char *w, size_t n, tok_ids *out) {
    if (n == 0) return 0;
    /* whole-word shortcuts */
    if (v->ignore_merges || v->newline_words) {
        int all_nl = 1;
        for (size_t i = 0; i < n && all_nl; i++) all_nl = w[i] == '\n';
        if (v->ignore_merges || all_nl) {
            const char *key = w;
            size_t kn = n;
            if (v->byte_encode) {
                if (grow((void **)&s->wbuf, &s->wbuf_cap, 2 * n, 1)) return -1;
                kn = 0;
                for (size_t i = 0; i < n; i++) {
                    unsigned char b = (unsigned char)w[i];
                    memcpy(s->wbuf + kn, v->byte_enc[b], v->byte_enc_len[b]);
                    kn += v->byte_enc_len[b];
                }
                key = s->wbuf;
            }
            int32_t t = st_find(&v->st, key, kn);
            if (t >= 0 && t < v->n_vocab) return ids_push(out, t);
        }
    }
    /* initial symbols: bytes (byte-level) or UTF-8 characters */
    if (grow((void **)&s->syms, &s->cap_syms, n, sizeof(sym))) return -1;
    int32_t ns = 0;
    for (size_t i = 0; i < n;) {
        size_t l = v->byte_encode ? 1 : PT_MIN((size_t)utf8_len((unsigned char)w[i]), n - i);
        sym *y = &s->syms[ns];
        unsigned char c0 = (unsigned char)w[i];
        y->sid = v->byte_encode                                           ? v->byte_sid[c0]
                 : c0 < 0x80                                             ? v->ascii_sid[c0]
                 : l == 3 && !memcmp(w + i, "\xe2\x96\x81", 3) ? v->marker_sid
                                                                         : st_find(&v->st, w + i, l);
        y->off = (int32_t)i;
        y->len = (int32_t)l;
        y->prev = ns - 1;
        y->next = ns + 1;
        ns++;
        i += l;
    }
    s->syms[ns - 1].next = -1;
    s->n_heap = 0;
    for (int32_t i = 1; i < ns; i++)
        if (try_bigram(v, s, i - 1, i)) return -1;
    while (s->n_heap) {
        bigram b = heap_pop(s, 0);
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
            if (ids_push(out, y->sid)) return -1;
            continue;
        }
        for (int32_t j = 0; j < y->len; j++) { /* byte fallback */
            int32_t t = v->byte_tok[(unsigned char)w[y->off + j]];
            if (t >= 0 && ids_push(out, t)) return -1;
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
    uint64_t h = hash_bytes(w, n) | 1;
    uint32_t i = (uint32_t)h & (WC_SLOTS - 1);
    for (;;) {
        wc_ent *e = &s->wc[i];
        if (!e->hash) break;
        if (e->hash == h && e->len == n && !memcmp(s->wc_bytes + e->off, w, n)) {
            for (uint32_t j = 0; j < e->n; j++)
                if (ids_push(out, s->wc_ids[e->ids + j])) return -1;
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
    if (grow((void **)&s->wc_bytes, &s->wc_capbytes, s->wc_nbytes + n, 1) ||
        grow((void **)&s->wc_ids, &s->wc_capids, s->wc_nids + nid, sizeof(int32_t)))
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

static int encode_bpe_fragment(const tok_vocab *v, scratch *s, const char *text, size_t len,
                               tok_ids *out, pt_err *err) {
    if (grow((void **)&s->buf, &s->buf_cap, 3 * len + 1, 1))
        return pt_errf(err, "tokenizer: out of memory");
    size_t n = utf8_sanitize(text, len, v->escape_ws, s->buf);
    int w = split_words(v, s, n, err);
    if (w < 0) return -1;
    for (size_t k = 0; k < s->n_segs[w]; k++) {
        const seg *sg = &s->segs[w][k];
        if (cached_word(v, s, s->buf + sg->off, sg->len, out))
            return pt_errf(err, "tokenizer: out of memory");
    }
    return 0;
}

/* ===== SentencePiece (llama) ===== */

/* rev_merge: symbol text -> the (left, right) symbols it was made from; the
 * last pair queued for a text wins, as in llama.cpp's std::map assignment. */
typedef struct rev_ent {
    int32_t off, len;   /* text in the escaped fragment; len -1 = empty slot */
    int32_t left, right;
} rev_ent;

typedef struct spm_ctx {
    const tok_vocab *v;
    scratch *s;
    const char *t;      /* escaped fragment */
    rev_ent *rev;
    uint32_t rev_mask;
    tok_ids *out;
} spm_ctx;

static rev_ent *rev_slot(spm_ctx *c, int32_t off, int32_t len) {
    uint32_t i = (uint32_t)hash_bytes(c->t + off, (size_t)len) & c->rev_mask;
    for (;;) {
        rev_ent *e = &c->rev[i];
        if (e->len < 0) return e;
        if (e->len == len && memcmp(c->t + e->off, c->t + off, (size_t)len) == 0) return e;
        i = (i + 1) & c->rev_mask;
    }
}

static int spm_try(spm_ctx *c, int32_t left, int32_t right) {
    if (left < 0 || right < 0) return 0;
    sym *L = &c->s->syms[left], *R = &c->s->syms[right];
    int32_t len = L->len + R->len;
    int32_t t = st_find(&c->v->st, c->t + L->off, (size_t)len);
    if (t < 0 || t >= c->v->n_vocab) return 0;
    bigram b = {.score = c->v->score[t], .left = left, .right = right, .size = len};
    if (heap_push(c->s, &b, 1)) return -1;
    rev_ent *e = rev_slot(c, L->off, len);
    e->off = L->off;
    e->len = len;
    e->left = left;
    e->right = right;
    return 0;
}

static int spm_resegment(spm_ctx *c, int32_t off, int32_t len, int depth) {
    int32_t t = st_find(&c->v->st, c->t + off, (size_t)len);
    if (t >= 0 && t < c->v->n_vocab) return ids_push(c->out, t);
    rev_ent *e = len > 0 && depth < 64 ? rev_slot(c, off, len) : NULL;
    if (!e || e->len < 0) {
        for (int32_t j = 0; j < len; j++) {
            int32_t b = c->v->byte_tok[(unsigned char)c->t[off + j]];
            if (b >= 0 && ids_push(c->out, b)) return -1;
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

static int encode_spm_fragment(const tok_vocab *v, scratch *s, const char *text, size_t len,
                               int prefix_space, tok_ids *out, pt_err *err) {
    size_t need = 3 * (len + 1) + 1;
    if (grow((void **)&s->buf, &s->buf_cap, need, 1)) return pt_errf(err, "tokenizer: out of memory");
    size_t n = 0;
    if (prefix_space) memcpy(s->buf, "\xe2\x96\x81", 3), n = 3;
    for (size_t i = 0; i < len; i++) {
        if (text[i] == ' ') memcpy(s->buf + n, "\xe2\x96\x81", 3), n += 3;
        else s->buf[n++] = text[i];
    }
    if (n == 0) return 0;
    if (n > INT32_MAX / 4) return pt_errf(err, "tokenizer: text too long");
    if (grow((void **)&s->syms, &s->cap_syms, n, sizeof(sym))) return pt_errf(err, "tokenizer: out of memory");
    int32_t ns = 0;
    for (size_t i = 0; i < n;) {
        size_t l = PT_MIN((size_t)utf8_len((unsigned char)s->buf[i]), n - i);
        sym *y = &s->syms[ns];
        y->sid = -1;
        y->off = (int32_t)i;
        y->len = (int32_t)l;
        y->prev = ns - 1;
        y->next = ns + 1;
        ns++;
        i += l;
    }
    s->syms[ns - 1].next = -1;
    uint32_t rsize = 64;
    while (rsize < (uint32_t)ns * 4u) rsize *= 2;
    spm_ctx c = {.v = v, .s = s, .t = s->buf, .rev_mask = rsize - 1, .out = out};
    c.rev = malloc((size_t)rsize * sizeof *c.rev);
    if (!c.rev) return pt_errf(err, "tokenizer: out of memory");
    for (uint32_t i = 0; i < rsize; i++) c.rev[i].len = -1;
    int rc = 0;
    s->n_heap = 0;
    for (int32_t i = 1; i < ns && !rc; i++) rc = spm_try(&c, i - 1, i);
    while (!rc && s->n_heap) {
        bigram b = heap_pop(s, 1);
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

/* ===== Special-token partition ===== */

typedef struct occ {
    int32_t order; /* index into v->special (priority) */
    size_t pos;
} occ;

static int cmp_occ(const void *a, const void *b) {
    const occ *x = a, *y = b;
    if (x->order != y->order) return x->order < y->order ? -1 : 1;
    return x->pos < y->pos ? -1 : x->pos > y->pos;
}

static int cmp_accept(const void *a, const void *b) {
    const occ *x = a, *y = b;
    return x->pos < y->pos ? -1 : x->pos > y->pos;
}

/* Find the special tokens to cut out of text, in llama.cpp's order: every
 * allowed special token, longest first, claims its non-overlapping occurrences
 * left to right inside text that no earlier token claimed. Returns the accepted
 * occurrences sorted by position in *acc (malloc'd), their count, or -1. */
static long find_specials(const tok_vocab *v, const char *text, size_t len, int parse_special,
                          occ **acc) {
    *acc = NULL;
    occ *all = NULL;
    size_t n_all = 0, cap_all = 0;
    for (size_t p = 0; p < len; p++) {
        unsigned char c = (unsigned char)text[p];
        for (int32_t k = v->fb_start[c]; k < v->fb_start[c + 1]; k++) {
            int32_t order = v->fb_list[k];
            int32_t id = v->special[order];
            if (!parse_special && (v->attr[id] & (TOK_ATTR_CONTROL | TOK_ATTR_UNKNOWN))) continue;
            size_t tl = v->st.len[id];
            if (tl > len - p || memcmp(text + p, v->st.bytes + v->st.off[id], tl) != 0) continue;
            if (grow((void **)&all, &cap_all, n_all + 1, sizeof(occ))) {
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
        for (size_t j = p; j < p + tl && free_run; j++) free_run = !claimed[j];
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

/* ===== Public encode / decode ===== */

int tok_encode(const tok_vocab *v, const char *text, size_t len, int flags, tok_ids *out,
               pt_err *err) {
    int add_special = !!(flags & TOK_ADD_SPECIAL);
    if (add_special && v->add_bos && ids_push(out, v->bos))
        return pt_errf(err, "tokenizer: out of memory");
    occ *acc = NULL;
    long n_acc = len ? find_specials(v, text, len, !!(flags & TOK_PARSE_SPECIAL), &acc) : 0;
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
    int prev_special = 1; /* SPM: a fragment at the start or after a special gets the prefix space */
    for (long i = 0; i <= n_acc && !rc; i++) {
        size_t end = i < n_acc ? acc[i].pos : len;
        if (end > pos) {
            if (v->kind == KIND_BPE)
                rc = encode_bpe_fragment(v, &s, text + pos, end - pos, out, err);
            else
                rc = encode_spm_fragment(v, &s, text + pos, end - pos,
                                         v->add_space_prefix && prev_special, out, err);
            prev_special = 0;
        }
        if (i < n_acc && !rc) {
            int32_t id = v->special[acc[i].order];
            if (ids_push(out, id)) rc = pt_errf(err, "tokenizer: out of memory");
            pos = acc[i].pos + v->st.len[id];
            prev_special = 1;
        }
    }
    scratch_free(&s);
    free(acc);
    if (!rc && add_special && v->add_eos && ids_push(out, v->eos))
        rc = pt_errf(err, "tokenizer: out of memory");
    return rc;
}

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
        if (bytes_append(out, p, l)) return pt_errf(err, "tokenizer: out of memory");
    }
    return 0;
}

/* Bytes at the end of buf[0..n) that start a UTF-8 character not yet
 * complete (0 when the buffer ends on a character boundary, or when the tail
 * can never become valid and should be emitted as is). */
static int incomplete_tail(const unsigned char *buf, int n) {
    for (int back = 1; back <= 3 && back <= n; back++) {
        unsigned char c = buf[n - back];
        if ((c & 0xC0) == 0x80) continue; /* continuation: keep looking for the lead */
        int need = c >= 0xF0 && c <= 0xF4 ? 4 : c >= 0xE0 ? 3 : c >= 0xC2 && c < 0xE0 ? 2 : 1;
        if (c >= 0xF5) need = 1;
        return need > back ? back : 0;
    }
    return 0;
}

int tok_stream_push(const tok_vocab *v, tok_stream *s, int32_t id, int flags, tok_bytes *out,
                    pt_err *err) {
    size_t l;
    const char *p = tok_piece(v, id, flags, &l);
    if (!p)
        return pt_errf(err, "token id %d is outside the vocabulary (0..%d)", id, v->n_vocab - 1);
    if (l == 0) return 0;
    /* append held-back bytes + piece, then take back an incomplete last character */
    if (bytes_append(out, s->pend, (size_t)s->n_pend) || bytes_append(out, p, l))
        return pt_errf(err, "tokenizer: out of memory");
    size_t total = (size_t)s->n_pend + l;
    int k = (int)PT_MIN(total, (size_t)4);
    int n_tail = incomplete_tail((const unsigned char *)out->v + out->n - k, k);
    out->n -= (size_t)n_tail;
    memcpy(s->pend, out->v + out->n, (size_t)n_tail);
    s->n_pend = n_tail;
    return 0;
}

int tok_stream_flush(tok_stream *s, tok_bytes *out, pt_err *err) {
    if (bytes_append(out, s->pend, (size_t)s->n_pend)) return pt_errf(err, "tokenizer: out of memory");
    s->n_pend = 0;
    return 0;
}

/* ===== Facts ===== */

int32_t tok_n_vocab(const tok_vocab *v) { return v->n_vocab; }
int32_t tok_bos(const tok_vocab *v) { return v->bos; }
int32_t tok_eos(const tok_vocab *v) { return v->eos; }
int32_t tok_eot(const tok_vocab *v) { return v->eot; }
int tok_add_bos(const tok_vocab *v) { return v->add_bos; }
int tok_add_eos(const tok_vocab *v) { return v->add_eos; }
int tok_attr(const tok_vocab *v, int32_t id) {
    return id >= 0 && id < v->n_vocab ? v->attr[id] : 0;
}
int tok_is_eog(const tok_vocab *v, int32_t id) {
    return id >= 0 && id < v->n_vocab && v->eog[id];
}
const char *tok_text(const tok_vocab *v, int32_t id, size_t *len) {
    if (id < 0 || id >= v->n_vocab) return NULL;
    *len = v->st.len[id];
    return v->st.bytes + v->st.off[id];
}
int32_t tok_find(const tok_vocab *v, const char *text, size_t len) {
    int32_t id = st_find(&v->st, text, len);
    return id < v->n_vocab ? id : -1;
}
const char *tok_model_name(const tok_vocab *v) { return v->model; }
const char *tok_pre_name(const tok_vocab *v) { return v->pre; }
