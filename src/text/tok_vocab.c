/* tok_vocab.c — the vocabulary: read from a GGUF's tokenizer.* metadata into
 * a tok_vocab (tok_load / tok_free), the string table that interns every
 * token text, and the facts tokenizer.h exposes (ids of bos/eos, attributes,
 * lookups by text).
 *
 * What tok_load validates (the GGUF is hostile input): the tokenizer model is
 * one it knows, the token list is present, non-empty and without duplicates,
 * the type and score arrays are at least as long, and every special id read
 * from metadata is inside the vocabulary (one that is not is ignored, as
 * llama.cpp does). Every refusal names the file and the key.
 */
#include <stdlib.h>
#include <string.h>

#include "text/tok_internal.h"

/* ===== String table ===== */

uint64_t tok_hash_bytes(const void *p, size_t n) {
    const unsigned char *s = p;
    uint64_t h = 0xcbf29ce484222325ull ^ n;
    for (size_t i = 0; i < n; i++)
        h = (h ^ s[i]) * 0x100000001b3ull;
    return h ^ (h >> 29);
}

int32_t strtab_find(const strtab *t, const void *s, size_t n) {
    if (!t->slot) return -1;
    uint32_t i = (uint32_t)tok_hash_bytes(s, n) & t->mask;
    for (;;) {
        int32_t id = t->slot[i];
        if (id < 0) return -1;
        if (t->len[id] == n && (n == 0 || memcmp(t->bytes + t->off[id], s, n) == 0)) return id;
        i = (i + 1) & t->mask;
    }
}

int strtab_reserve(strtab *t, uint32_t want) {
    uint32_t size = 1024;
    while (size < want * 2u)
        size *= 2;
    int32_t *slot = malloc((size_t)size * sizeof *slot);
    if (!slot) return -1;
    memset(slot, 0xFF, (size_t)size * sizeof *slot);
    for (int32_t id = 0; id < t->n; id++) {
        uint32_t i = (uint32_t)tok_hash_bytes(t->bytes + t->off[id], t->len[id]) & (size - 1);
        while (slot[i] >= 0)
            i = (i + 1) & (size - 1);
        slot[i] = id;
    }
    free(t->slot);
    t->slot = slot;
    t->mask = size - 1;
    return 0;
}

int32_t strtab_intern(strtab *t, const void *s, size_t n, int *added) {
    *added = 0;
    int32_t id = strtab_find(t, s, n);
    if (id >= 0) return id;
    if (n > UINT32_MAX || t->n == INT32_MAX) return -1;
    if (!t->slot || (uint32_t)t->n * 2u + 2u > t->mask + 1u)
        if (strtab_reserve(t, (uint32_t)t->n + 1024u)) return -1;
    size_t need = (size_t)t->n + 1, cap_off = t->cap, cap_len = t->cap;
    if (pt_grow((void **)&t->off, &cap_off, need, sizeof *t->off) ||
        pt_grow((void **)&t->len, &cap_len, need, sizeof *t->len))
        return -1;
    t->cap = cap_off; /* the same policy grew both to the same size */
    /* one spare byte: bytes is allocated even when every string so far is empty (a
     * vocabulary may hold an empty token), so bytes + off is never arithmetic on NULL */
    if (pt_grow((void **)&t->bytes, &t->cap_bytes, t->n_bytes + n + 1, 1)) return -1;
    if (n) memcpy(t->bytes + t->n_bytes, s, n);
    id = t->n++;
    t->off[id] = t->n_bytes;
    t->len[id] = (uint32_t)n;
    t->n_bytes += n;
    uint32_t i = (uint32_t)tok_hash_bytes(s, n) & t->mask;
    while (t->slot[i] >= 0)
        i = (i + 1) & t->mask;
    t->slot[i] = id;
    *added = 1;
    return id;
}

void strtab_free(strtab *t) {
    free(t->bytes);
    free(t->off);
    free(t->len);
    free(t->slot);
}

/* ===== Reading metadata ===== */

const char *tok_gguf_path(const gguf_ctx *g) {
    return g->n_files && g->files[0].path ? g->files[0].path : "gguf";
}

const gguf_value *tok_gguf_array(const gguf_ctx *g, const char *key, uint32_t elem_type,
                                 int required, pt_err *err, int *bad) {
    const gguf_kv *kv = gguf_find(g, key);
    *bad = 0;
    if (!kv) {
        if (required) {
            pt_errf(err, "%s: no vocabulary: missing metadata key '%s'", tok_gguf_path(g), key);
            *bad = 1;
        }
        return NULL;
    }
    if (kv->val.type != GGUF_ARRAY || (elem_type != GGUF_NTYPES && kv->val.arr.type != elem_type)) {
        pt_errf(err, "%s: metadata key '%s' has the wrong type (expected an array of %s)",
                tok_gguf_path(g), key,
                gguf_type_name(elem_type == GGUF_NTYPES ? GGUF_INT32 : elem_type));
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

/* Read an optional boolean key; keeps *out when absent or not a boolean. */
static void read_bool(const gguf_ctx *g, const char *key, int *out) {
    const gguf_kv *kv = gguf_find(g, key);
    if (kv && kv->val.type == GGUF_BOOL) *out = kv->val.b != 0;
}

/* ===== Loading ===== */

/* The kind of tokenizer from tokenizer.ggml.model (and .pre for BPE): sets
 * v->kind, v->pre and the flags the kind implies; *pd is the pre-tokenizer
 * (NULL for SentencePiece). 0, or -1 with err set. */
static int choose_kind(tok_vocab *v, const gguf_ctx *g, const pre_def **pd, int *pre_flags,
                       pt_err *err) {
    const char *path = tok_gguf_path(g);
    char pre[64] = "";
    if (!gguf_find(g, "tokenizer.ggml.model"))
        return pt_errf(err, "%s: no vocabulary (metadata key 'tokenizer.ggml.model' is missing)",
                       path);
    if (gguf_get_str(g, "tokenizer.ggml.model", v->model, sizeof v->model, err)) return -1;
    if (gguf_find(g, "tokenizer.ggml.pre") &&
        gguf_get_str(g, "tokenizer.ggml.pre", pre, sizeof pre, err))
        return -1;
    *pd = NULL;
    *pre_flags = 0;
    if (!strcmp(v->model, "gpt2") || !strcmp(v->model, "gemma4")) {
        v->kind = KIND_BPE;
        if (!strcmp(v->model, "gemma4")) snprintf(pre, sizeof pre, "gemma4");
        if (!pre[0]) snprintf(pre, sizeof pre, "default");
        *pd = tok_pretok_find(pre);
        if (!*pd)
            return pt_errf(err, "%s: unsupported pre-tokenizer '%s' (tokenizer.ggml.pre)", path,
                           pre);
        *pre_flags = tok_pretok_flags(*pd);
        v->byte_encode = !(*pre_flags & PRE_RAW_UTF8);
        v->escape_ws = !!(*pre_flags & PRE_RAW_UTF8);
        v->newline_words = !!(*pre_flags & PRE_RAW_UTF8);
        v->ignore_merges = !!(*pre_flags & PRE_IGNORE_MERGES);
        v->add_bos = !!(*pre_flags & PRE_ADD_BOS);
    } else if (!strcmp(v->model, "llama")) {
        v->kind = KIND_SPM;
        snprintf(pre, sizeof pre, "spm");
        v->escape_ws = 1;
        v->add_space_prefix = 1;
        v->add_bos = 1;
    } else if (!strcmp(v->model, "no_vocab") || !strcmp(v->model, "none")) {
        return pt_errf(err, "%s: the model has no vocabulary (tokenizer.ggml.model = '%s')", path,
                       v->model);
    } else {
        return pt_errf(err, "%s: unsupported tokenizer model '%s' (expected gpt2, gemma4 or llama)",
                       path, v->model);
    }
    snprintf(v->pre, sizeof v->pre, "%s", pre);
    return 0;
}

/* Tokens, their types and scores. 0, or -1 with err set. */
static int read_tokens(tok_vocab *v, const gguf_ctx *g, pt_err *err) {
    const char *path = tok_gguf_path(g);
    int bad;
    const gguf_value *toks = tok_gguf_array(g, "tokenizer.ggml.tokens", GGUF_STRING, 1, err, &bad);
    if (!toks) return -1;
    if (toks->arr.n == 0 || toks->arr.n > INT32_MAX / 2)
        return pt_errf(err, "%s: tokenizer.ggml.tokens has %llu entries", path,
                       (unsigned long long)toks->arr.n);
    v->n_vocab = (int32_t)toks->arr.n;
    const gguf_value *types =
        tok_gguf_array(g, "tokenizer.ggml.token_type", GGUF_NTYPES, 0, err, &bad);
    if (bad) return -1;
    const gguf_value *scores =
        tok_gguf_array(g, "tokenizer.ggml.scores", GGUF_NTYPES, 0, err, &bad);
    if (bad) return -1;
    if ((types && types->arr.n < toks->arr.n) || (scores && scores->arr.n < toks->arr.n))
        return pt_errf(err, "%s: token_type/scores arrays are shorter than the %d tokens", path,
                       v->n_vocab);
    v->attr = calloc((size_t)v->n_vocab, 1);
    v->score = calloc((size_t)v->n_vocab, sizeof *v->score);
    v->eog = calloc((size_t)v->n_vocab, 1);
    if (!v->attr || !v->score || !v->eog || strtab_reserve(&v->st, (uint32_t)v->n_vocab))
        return pt_errf(err, "tokenizer: out of memory");
    for (int32_t i = 0; i < v->n_vocab; i++) {
        const gguf_str *s = &toks->arr.items[i].str;
        int added;
        int32_t sid = strtab_intern(&v->st, s->ptr, s->len, &added);
        if (sid < 0) return pt_errf(err, "tokenizer: out of memory");
        if (!added)
            return pt_errf(err, "%s: duplicate token in vocabulary: '%.*s' has ids %d and %d", path,
                           (int)PT_MIN(s->len, 64), s->ptr, sid, i);
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
    return 0;
}

/* Special ids: the kind's defaults, then metadata; add_bos/add_eos. */
static void read_special_ids(tok_vocab *v, const gguf_ctx *g, int pre_flags) {
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
    if (!strcmp(v->pre, "gemma4")) v->add_bos = 1; /* llama.cpp overrides this for Gemma 4 */
    if (v->add_bos && v->bos < 0) v->add_bos = 0;
    if (v->add_eos && v->eos < 0) v->add_eos = 0;
}

tok_vocab *tok_load(const gguf_ctx *g, pt_err *err) {
    tok_vocab *v = calloc(1, sizeof *v);
    if (!v) {
        pt_errf(err, "tokenizer: out of memory");
        return NULL;
    }
    const pre_def *pd;
    int pre_flags;
    if (choose_kind(v, g, &pd, &pre_flags, err) || read_tokens(v, g, err)) goto fail;
    read_special_ids(v, g, pre_flags);
    tok_special_attrs(v);
    if (v->kind == KIND_BPE) {
        if (tok_bpe_init(v, g, err) || tok_pretok_compile(v, pd, err)) goto fail;
    } else {
        tok_spm_init(v);
    }
    if (tok_special_build(v) || tok_build_pieces(v)) {
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
    strtab_free(&v->st);
    free(v->attr);
    free(v->score);
    free(v->eog);
    free(v->merges);
    for (int i = 0; i < v->n_re; i++)
        pcre2_code_free(v->re[i]);
    free(v->special);
    free(v->fb_list);
    free(v->pieces);
    free(v->piece_off);
    free(v);
}

/* ===== Facts ===== */

int32_t tok_n_vocab(const tok_vocab *v) {
    return v->n_vocab;
}
int32_t tok_bos(const tok_vocab *v) {
    return v->bos;
}
int32_t tok_eos(const tok_vocab *v) {
    return v->eos;
}
int32_t tok_eot(const tok_vocab *v) {
    return v->eot;
}
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
    int32_t id = strtab_find(&v->st, text, len);
    return id < v->n_vocab ? id : -1;
}
const char *tok_model_name(const tok_vocab *v) {
    return v->model;
}
const char *tok_pre_name(const tok_vocab *v) {
    return v->pre;
}
