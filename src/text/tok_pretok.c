/* tok_pretok.c — the pre-tokenizers of byte-level BPE vocabularies: the
 * regexes llama.cpp's llama-vocab.cpp applies for each tokenizer.ggml.pre
 * value, compiled with PCRE2 (UTF-8, Unicode properties, JIT when available),
 * and the split of a fragment into words with them.
 *
 * Whitespace: llama.cpp's \s is Unicode White_Space; PCRE2's \s under UCP
 * differs at U+0085, so patterns are written with \s and rewritten to an
 * explicit White_Space class at compile time.
 */
#include <stdlib.h>
#include <string.h>

#include "text/tok_internal.h"

/* ===== The regexes (as in llama.cpp's llama-vocab.cpp) ===== */

#define RE_CONTRACTIONS "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])"
#define RE_GPT2 "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)"
#define RE_LLAMA3                                                                                  \
    RE_CONTRACTIONS "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|"   \
                    "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
#define RE_QWEN2                                                                                   \
    RE_CONTRACTIONS "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|"        \
                    "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
#define RE_QWEN35                                                                                  \
    RE_CONTRACTIONS "|[^\\r\\n\\p{L}\\p{N}]?[\\p{L}\\p{M}]+|\\p{N}| ?[^\\s\\p{L}\\p{M}\\p{N}]+"    \
                    "[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
#define RE_CJK_DS "[\\x{4E00}-\\x{9FA5}\\x{0800}-\\x{4E00}\\x{AC00}-\\x{D7FF}]+"
/* deepseek-v3: llama.cpp runs this one on a "collapsed" text in which '~' is
 * neither \p{P} nor \p{S}; the two '~' terms reproduce that. */
#define RE_DEEPSEEK3                                                                               \
    "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|(?:[^\\r\\n\\p{L}\\p{P}\\p{S}]|~)?"     \
    "[\\p{L}\\p{M}]+| ?(?:(?!~)[\\p{P}\\p{S}])+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
#define RE_GPT4O                                                                                   \
    "[^\\r\\n\\p{L}\\p{N}]?((?=[\\p{L}])([^a-z]))*((?=[\\p{L}])([^A-Z]))+" RE_CONTRACTIONS         \
    "?|[^\\r\\n\\p{L}\\p{N}]?((?=[\\p{L}])([^a-z]))+((?=[\\p{L}])([^A-Z]))*" RE_CONTRACTIONS       \
    "?|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
#define RE_TEKKEN                                                                                  \
    "[^\\r\\n\\p{L}\\p{N}]?((?=[\\p{L}])([^a-z]))*((?=[\\p{L}])([^A-Z]))+|[^\\r\\n\\p{L}\\p{N}]?"  \
    "((?=[\\p{L}])([^a-z]))+((?=[\\p{L}])([^A-Z]))*|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|"       \
    "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
#define RE_DSLLM_LETTERS                                                                           \
    "\\s?[A-Za-z\\x{B5}\\x{C0}-\\x{D6}\\x{D8}-\\x{F6}\\x{F8}-\\x{1BA}\\x{1BC}-\\x{1BF}\\x{1C4}-"   \
    "\\x{293}\\x{295}-\\x{2AF}\\x{370}-\\x{373}\\x{376}\\x{377}\\x{37B}-\\x{37D}\\x{37F}"          \
    "\\x{386}\\x{388}-\\x{38A}\\x{38C}\\x{38E}-\\x{3A1}\\x{3A3}-\\x{3F5}\\x{3F7}-\\x{481}"         \
    "\\x{48A}-\\x{52F}\\x{531}-\\x{556}\\x{10A0}-\\x{10C5}\\x{13A0}-\\x{13F5}\\x{13F8}-"           \
    "\\x{13FD}\\x{1C90}-\\x{1CBA}\\x{1CBD}-\\x{1CBF}\\x{1D00}-\\x{1D2B}\\x{1D6B}-\\x{1D77}"        \
    "\\x{1D79}-\\x{1D9A}\\x{1E00}-\\x{1F15}\\x{1F18}-\\x{1F1D}\\x{1F20}-\\x{1F45}\\x{1F48}-"       \
    "\\x{1F4D}\\x{1F50}-\\x{1F57}\\x{1F59}\\x{1F5B}\\x{1F5D}\\x{1F5F}-\\x{1F7D}\\x{1F80}-"         \
    "\\x{1FB4}\\x{1FB6}-\\x{1FBC}\\x{1FBE}\\x{1FC2}-\\x{1FC4}\\x{1FC6}-\\x{1FCC}\\x{1FD0}-"        \
    "\\x{1FD3}\\x{1FD6}-\\x{1FDB}\\x{1FE0}-\\x{1FEC}\\x{1FF2}-\\x{1FF4}\\x{1FF6}-\\x{1FFC}"        \
    "\\x{2102}\\x{2107}\\x{210A}-\\x{2113}\\x{2115}\\x{2119}-\\x{211D}\\x{2124}\\x{2126}"          \
    "\\x{2128}\\x{212A}-\\x{212D}\\x{212F}-\\x{2134}\\x{2139}\\x{213C}-\\x{213F}\\x{2145}-"        \
    "\\x{2149}\\x{214E}\\x{2183}\\x{2184}\\x{2C00}-\\x{2C7B}\\x{2C7E}-\\x{2CE4}\\x{2CEB}-"         \
    "\\x{2CEE}\\x{2CF2}\\x{2CF3}\\x{A640}-\\x{A66D}\\x{A680}-\\x{A69B}\\x{A722}-\\x{A76F}"         \
    "\\x{A771}-\\x{A787}\\x{A78B}-\\x{A78E}\\x{AB70}-\\x{ABBF}\\x{FB00}-\\x{FB06}\\x{FB13}-"       \
    "\\x{FB17}\\x{FF21}-\\x{FF3A}\\x{FF41}-\\x{FF5A}\\x{10400}-\\x{1044F}\\x{104B0}-"              \
    "\\x{104D3}\\x{104D8}-\\x{104FB}\\x{10C80}-\\x{10CB2}\\x{10CC0}-\\x{10CF2}\\x{118A0}-"         \
    "\\x{118DF}\\x{1E900}-\\x{1E943}]+"

struct pre_def {
    const char *names; /* '|'-separated tokenizer.ggml.pre values */
    int flags;         /* PRE_* bits */
    const char *re[TOK_MAX_RE];
};

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

/* 1 when name is one of the '|'-separated names in list. */
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

const pre_def *tok_pretok_find(const char *pre) {
    const pre_def *pd = NULL;
    for (size_t i = 0; i < PT_ARRAY_LEN(k_pre); i++) /* the last entry naming it wins */
        if (name_in_list(k_pre[i].names, pre)) pd = &k_pre[i];
    return pd;
}

int tok_pretok_flags(const pre_def *pd) {
    return pd->flags;
}

/* ===== Compiling ===== */

/* Unicode White_Space, the set llama.cpp's \s stands for. */
#define WS_CLASS                                                                                   \
    "\\t\\n\\x{0B}\\f\\r \\x{85}\\x{A0}\\x{1680}\\x{2000}-\\x{200A}\\x{2028}\\x{2029}"             \
    "\\x{202F}\\x{205F}\\x{3000}"

/* Copy pattern `re` into `out` with \s and \S replaced by explicit classes.
 * Returns 0, or -1 when out (cap bytes) is too small. */
static int rewrite_ws(const char *re, char *out, size_t cap) {
    size_t k = 0;
    int in_class = 0;
#define PUT(str)                                                                                   \
    do {                                                                                           \
        size_t l_ = strlen(str);                                                                   \
        if (k + l_ + 1 > cap) return -1;                                                           \
        memcpy(out + k, str, l_);                                                                  \
        k += l_;                                                                                   \
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
        if (*p == '[' && !in_class)
            in_class = 1;
        else if (*p == ']' && in_class)
            in_class = 0;
        char one[2] = {*p, 0};
        PUT(one);
    }
    out[k] = 0;
    return 0;
#undef PUT
}

int tok_pretok_compile(tok_vocab *v, const pre_def *pd, pt_err *err) {
    for (int i = 0; i < TOK_MAX_RE && pd->re[i]; i++) {
        char buf[8192];
        if (rewrite_ws(pd->re[i], buf, sizeof buf))
            return pt_errf(err, "tokenizer: pre-tokenizer '%s': regex too long", v->pre);
        int ec;
        PCRE2_SIZE eo;
        pcre2_code *re =
            pcre2_compile((PCRE2_SPTR)buf, PCRE2_ZERO_TERMINATED,
                          PCRE2_UTF | PCRE2_UCP | PCRE2_DOLLAR_ENDONLY, &ec, &eo, NULL);
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

/* ===== Splitting ===== */

static int seg_push(scratch *s, int w, size_t off, size_t len) {
    if (pt_grow((void **)&s->segs[w], &s->cap_segs[w], s->n_segs[w] + 1, sizeof(seg))) return -1;
    s->segs[w][s->n_segs[w]].off = off;
    s->segs[w][s->n_segs[w]].len = len;
    s->n_segs[w]++;
    return 0;
}

/* Several regexes apply in turn, each one splitting the pieces the previous
 * one left; the text between matches is kept as pieces too. */
int tok_pretok_split(const tok_vocab *v, scratch *s, size_t len, pt_err *err) {
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
