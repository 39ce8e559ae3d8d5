/* test_hostile.c — crafted model files that once reached undefined behaviour or
 * a mid-generation error, each written into the case's t_tmpdir from a fixture:
 *
 *   - a padded output head (more output rows than the vocabulary has tokens, as
 *     many real models ship): the generation loop must never sample a padded
 *     row, greedy answers equal the unpadded model's, `petrel inspect` names
 *     the padding;
 *   - general.alignment = 1, which lets tensor data start at odd offsets the
 *     kernels would read in place (misaligned loads under UBSan): refused with
 *     the tensor and offset named;
 *   - a vocabulary with an empty token string (NULL + 0 pointer arithmetic and
 *     NULL passed to memcpy/memcmp in the string table): loads, tokenizes and
 *     decodes cleanly.
 *
 * They are meant to run under `make test SANITIZE=1` as well: a sanitizer
 * report fails the case. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "format/gguf.h"
#include "kernels/quant.h"
#include "petrel.h"
#include "petrel_tools.h"
#include "test.h"

/* CHECKF as an expression: 1 when cond holds, else 0 after reporting the failure. */
#define ENSURE(cond, ...) ((cond) ? 1 : (t_fail_at(__FILE__, __LINE__, __VA_ARGS__), 0))

#define PAD_ROWS 8
#define PAD_SCALE 16.0f /* padded output rows: rows 0..7 with their scales times this */

/* ===== Writing variants ===== */

/* Multiply every block scale of one row of `type` in place (d, and dmin where the block has
 * one), so that the row's dot products scale by f. 0, or -1 for a type this test does not
 * know. */
static int scale_row(uint32_t type, uint8_t *row, size_t row_bytes, float f) {
    size_t bs, at[2];
    int n_at;
    switch (type) {
    case 0: /* F32 */
        for (size_t i = 0; i + 4 <= row_bytes; i += 4) {
            float x;
            memcpy(&x, row + i, 4);
            x *= f;
            memcpy(row + i, &x, 4);
        }
        return 0;
    case 8: bs = 34, at[0] = 0, n_at = 1; break;              /* Q8_0: d first */
    case 12: bs = 144, at[0] = 0, at[1] = 2, n_at = 2; break; /* Q4_K: d, dmin */
    case 13: bs = 176, at[0] = 0, at[1] = 2, n_at = 2; break; /* Q5_K: d, dmin */
    case 14: bs = 210, at[0] = 208, n_at = 1; break;          /* Q6_K: d last */
    default: return -1;
    }
    for (size_t b = 0; b + bs <= row_bytes; b += bs)
        for (int k = 0; k < n_at; k++) {
            pt_f16 h;
            memcpy(&h, row + b + at[k], 2);
            h = qt_f32_to_f16(qt_f16_to_f32(h) * f);
            memcpy(row + b + at[k], &h, 2);
        }
    return 0;
}

/* Copy fixture src_name to path with PAD_ROWS more rows in token_embd.weight and
 * output.weight (the vocab_size key follows): the padded token rows repeat rows 0..7, the
 * padded output rows (token_embd's when the head is tied) are rows 0..7 scaled by PAD_SCALE,
 * so that their logits win unless they are masked. pad 0: an unpadded copy. alignment: the
 * writer's (1: with an odd-sized extra key, so that tensors start at odd offsets). 0, or -1 (the
 * fixture has an output type scale_row does not know). */
static int write_padded(const char *src_name, const char *path, uint32_t alignment, int pad) {
    pt_err err = {{0}};
    gguf_ctx *src = gguf_open(t_fixture(src_name), &err);
    if (!src) return -1;
    gguf_writer *w = gguf_writer_new(alignment);
    int rc = 0;
    for (uint64_t i = 0; i < src->n_kv && !rc; i++) {
        const gguf_kv *kv = &src->kv[i];
        const size_t kl = kv->key.len;
        if (pad && kl > 11 && !memcmp(kv->key.ptr + kl - 11, ".vocab_size", 11)) {
            uint64_t v = kv->val.u64 + (uint64_t)pad;
            char key[128];
            snprintf(key, sizeof key, "%.*s", (int)kl, kv->key.ptr);
            rc = gguf_writer_kv_u32(w, key, (uint32_t)v, &err);
            continue;
        }
        if (kl == 17 && !memcmp(kv->key.ptr, "general.alignment", 17)) continue;
        rc = gguf_writer_kv_copy(w, kv, &err);
    }
    /* 35 bytes of header (8 + 15 key, 4 type, 8 + 0 value): with alignment 1 the data
     * section, and so the first tensor, then starts at an odd offset */
    if (alignment == 1 && !rc) rc = gguf_writer_kv_str(w, "petrel.test.pad", "", &err);
    for (uint64_t i = 0; i < src->n_tensors && !rc; i++) {
        const gguf_tensor *t = &src->tensors[i];
        int64_t ne[4] = {t->ne[0], t->ne[1], t->ne[2], t->ne[3]};
        if (pad && (!strcmp(t->name, "token_embd.weight") || !strcmp(t->name, "output.weight")))
            ne[1] += pad;
        rc = gguf_writer_add_tensor(w, t->name, t->type, t->n_dims, ne, &err);
    }
    rc = rc || gguf_writer_begin(w, path, &err);
    for (uint64_t i = 0; i < src->n_tensors && !rc; i++) {
        const gguf_tensor *t = &src->tensors[i];
        rc = gguf_writer_write(w, t->data, t->nbytes, &err);
        /* the logits' rows: output.weight, else the tied token_embd.weight */
        const int is_out =
            !strcmp(t->name, "output.weight") ||
            (!gguf_find_tensor(src, "output.weight") && !strcmp(t->name, "token_embd.weight"));
        if (rc || !pad || !(is_out || !strcmp(t->name, "token_embd.weight"))) continue;
        const size_t row = (size_t)(t->nbytes / (uint64_t)t->ne[1]);
        uint8_t *extra = malloc(row * (size_t)pad);
        memcpy(extra, t->data, row * (size_t)pad);
        for (int r = 0; r < pad && is_out && !rc; r++)
            rc = scale_row(t->type, extra + (size_t)r * row, row, PAD_SCALE);
        rc = rc || gguf_writer_write(w, extra, row * (size_t)pad, &err);
        free(extra);
    }
    rc = rc || gguf_writer_finish(w, &err);
    if (rc && err.msg[0]) fprintf(stderr, "write_padded: %s\n", err.msg);
    gguf_writer_free(w);
    gguf_close(src);
    return rc;
}

/* ===== Padded output rows ===== */

/* The text pt_gen (the loop the server runs) produces in max tokens after prompt with
 * sampling sp, into *out (the caller frees), and in *all_in_vocab whether every token the
 * session then holds is inside the vocabulary. 0, or -1 after reporting the failure. */
static int gen_text(pt_engine *e, const pt_sampling *sp, const int32_t *prompt, int n, int max,
                    pt_buf *out, int *all_in_vocab) {
    char err[512] = "";
    pt_session_params spp = {.n_ctx = 128};
    pt_session *s = pt_session_new(e, &spp, err, sizeof err);
    pt_gen *g = s ? pt_gen_new(s, sp, err, sizeof err) : NULL;
    int rc = -1;
    if (g && pt_gen_prefill(g, prompt, n, NULL, err, sizeof err) == 0) {
        const pt_gen_opts o = {.max_tokens = max, .ignore_eog = 1};
        pt_gen_result r = {0};
        rc = pt_gen_run(g, &o, NULL, NULL, NULL, &r, err, sizeof err);
        CHECKF(rc == 0, "generation failed: %s", err);
        *out = r.text;
        *all_in_vocab = 1;
        const int32_t *ids = pt_session_tokens(s);
        for (int i = 0; i < pt_session_n_past(s); i++)
            if (ids[i] < 0 || ids[i] >= pt_vocab_size(e)) *all_in_vocab = 0;
    } else {
        CHECKF(0, "%s", err);
    }
    pt_gen_free(g);
    pt_session_free(s);
    return rc;
}

static void hostile_padded_vocab_masked(void) {
    const char *fixtures[] = {"qwen3moe-rq2k.gguf", "gemma4-rq2k.gguf"};
    for (size_t f = 0; f < sizeof fixtures / sizeof *fixtures; f++) {
        char path[512], err[512] = "";
        snprintf(path, sizeof path, "%s/padded-%zu.gguf", t_tmpdir(), f);
        if (!ENSURE(write_padded(fixtures[f], path, 32, PAD_ROWS) == 0, "%s", fixtures[f]))
            continue;
        pt_engine_params ep = {.model_path = path, .n_threads = 1, .usage_dir = t_usage_dir()};
        pt_engine *e = pt_engine_open(&ep, err, sizeof err);
        ep.model_path = t_fixture(fixtures[f]);
        pt_engine *plain = pt_engine_open(&ep, err, sizeof err);
        if (!ENSURE(e && plain, "%s: %s", fixtures[f], err)) {
            pt_engine_close(e);
            pt_engine_close(plain);
            continue;
        }
        const int nv = pt_engine_n_vocab(e), nt = pt_vocab_size(e);
        CHECKF(nv == nt + PAD_ROWS && nt == pt_vocab_size(plain), "%s: %d rows, %d tokens",
               fixtures[f], nv, nt);
        const int32_t prompt[] = {2, 10, 20, 30, 40};
        const int np = (int)(sizeof prompt / sizeof *prompt);
        /* the premise: unmasked, a padded row would win */
        pt_session_params spp = {.n_ctx = 16};
        pt_session *s = pt_session_new(e, &spp, err, sizeof err);
        float *logits = malloc((size_t)nv * sizeof *logits);
        CHECK(s && pt_session_eval(s, prompt, np, logits, 0, NULL, err, sizeof err) == 0);
        int best = 0;
        for (int i = 1; i < nv; i++)
            if (logits[i] > logits[best]) best = i;
        CHECKF(best >= nt,
               "%s: the best raw logit is row %d, not a padded row: the test "
               "would not notice a missing mask",
               fixtures[f], best);
        free(logits);
        pt_session_free(s);
        /* greedy: the answer of the unpadded model; sampled: only ids in the vocabulary */
        pt_sampling greedy;
        pt_sampling_default(&greedy);
        greedy.temp = 0;
        pt_buf a = {0}, b = {0};
        int in_a = 0, in_b = 0;
        if (gen_text(e, &greedy, prompt, np, 16, &a, &in_a) == 0 &&
            gen_text(plain, &greedy, prompt, np, 16, &b, &in_b) == 0)
            CHECKF(in_a && a.n == b.n && !memcmp(a.v, b.v, a.n),
                   "%s: the padded model's greedy answer differs from the plain model's",
                   fixtures[f]);
        pt_buf_free(&a);
        pt_sampling hot;
        pt_sampling_default(&hot);
        hot.temp = 1.5f, hot.top_p = 1.0f, hot.seed = 7;
        if (gen_text(e, &hot, prompt, np, 48, &a, &in_a) == 0)
            CHECKF(in_a, "%s: a sampled token is outside the vocabulary", fixtures[f]);
        pt_buf_free(&a);
        pt_buf_free(&b);
        /* the tools API (and petrel inspect) report the padding */
        pt_model *m = pt_model_open(path, err, sizeof err);
        pt_model_info mi;
        if (ENSURE(m && pt_model_info_get(m, &mi, err, sizeof err) == 0, "%s", err)) {
            CHECK(mi.n_output_rows == (uint64_t)nv && mi.n_vocab_tokens == (uint64_t)nt);
            pt_model_info_free(&mi);
        }
        pt_model_close(m);
        const char *bin = getenv("PETREL_BIN");
        if (bin) {
            char cmd[1200], out[16384], want[128];
            snprintf(cmd, sizeof cmd, "%s inspect %s", bin, path);
            CHECK(t_run(cmd, out, sizeof out) == 0);
            snprintf(want, sizeof want, "output rows %d, vocabulary %d: %d padded rows masked", nv,
                     nt, PAD_ROWS);
            CHECK_STR_CONTAINS(out, want);
        }
        pt_engine_close(e);
        pt_engine_close(plain);
    }
}

/* ===== Alignment ===== */

static void hostile_unaligned_tensors_refused(void) {
    char path[512], err[512] = "";
    snprintf(path, sizeof path, "%s/align1.gguf", t_tmpdir());
    if (!ENSURE(write_padded("qwen3moe-rq2k.gguf", path, 1, 0) == 0, "cannot write")) return;
    pt_engine_params ep = {.model_path = path, .n_threads = 1, .usage_dir = t_usage_dir()};
    pt_engine *e = pt_engine_open(&ep, err, sizeof err);
    CHECKF(e == NULL, "a model with tensors at odd offsets was accepted");
    if (e) { /* then it must at least run cleanly (under UBSan: no misaligned loads) */
        pt_session_params sp = {.n_ctx = 8};
        pt_session *s = pt_session_new(e, &sp, err, sizeof err);
        const int32_t toks[3] = {1, 2, 3};
        CHECK(s && pt_session_eval(s, toks, 3, NULL, 0, NULL, err, sizeof err) == 0);
        pt_session_free(s);
        err[0] = 0;
    }
    pt_engine_close(e);
    CHECK_STR_CONTAINS(err, "general.alignment 1");
    CHECK_STR_CONTAINS(err, "not a multiple of");
    /* the tools refuse it the same way */
    pt_model *m = pt_model_open(path, err, sizeof err);
    CHECK(m == NULL);
    pt_model_close(m);
    CHECK_STR_CONTAINS(err, "general.alignment 1");
    /* an alignment of 8 keeps every tensor where the kernels can read it */
    snprintf(path, sizeof path, "%s/align8.gguf", t_tmpdir());
    if (!ENSURE(write_padded("qwen3moe-rq2k.gguf", path, 8, 0) == 0, "cannot write")) return;
    e = pt_engine_open(&ep, err, sizeof err);
    CHECKF(e != NULL, "%s", err);
    if (e) {
        pt_session_params sp = {.n_ctx = 8};
        pt_session *s = pt_session_new(e, &sp, err, sizeof err);
        const int32_t toks[3] = {1, 2, 3};
        CHECKF(s && pt_session_eval(s, toks, 3, NULL, 0, NULL, err, sizeof err) == 0, "%s", err);
        pt_session_free(s);
    }
    pt_engine_close(e);
}

/* ===== Empty token strings ===== */

/* Copy vocabulary fixture src to path with token `which` (0: the first, 1: the last)
 * replaced by the empty string. 0, or -1 (1: the fixture has a token with a NUL byte,
 * which a C string cannot carry). */
static int write_empty_token(const char *src, const char *path, int which) {
    pt_err err = {{0}};
    gguf_ctx *g = gguf_open(t_fixture(src), &err);
    if (!g) return -1;
    gguf_writer *w = gguf_writer_new(32);
    int rc = 0;
    for (uint64_t i = 0; i < g->n_kv && !rc; i++) {
        const gguf_kv *kv = &g->kv[i];
        if (kv->key.len != 21 || memcmp(kv->key.ptr, "tokenizer.ggml.tokens", 21)) {
            rc = gguf_writer_kv_copy(w, kv, &err);
            continue;
        }
        const uint64_t n = kv->val.arr.n;
        char **s = calloc(n, sizeof *s);
        for (uint64_t j = 0; j < n; j++) {
            const gguf_str *t = &kv->val.arr.items[j].str;
            const int empty = j == (which ? n - 1 : 0);
            s[j] = strndup(empty ? "" : t->ptr, empty ? 0 : (size_t)t->len);
            if (!empty && memchr(t->ptr, 0, t->len)) rc = 1;
        }
        rc = rc ||
             gguf_writer_kv_str_array(w, "tokenizer.ggml.tokens", (const char *const *)s, n, &err);
        for (uint64_t j = 0; j < n; j++)
            free(s[j]);
        free(s);
    }
    rc = rc || gguf_writer_begin(w, path, &err) || gguf_writer_finish(w, &err);
    gguf_writer_free(w);
    gguf_close(g);
    return rc;
}

static void hostile_empty_token_strings(void) {
    const char *vocabs[] = {"tokenizer/ggml-vocab-gpt-2.gguf", "tokenizer/ggml-vocab-gemma-4.gguf",
                            "tokenizer/ggml-vocab-fixture-qwen3moe.gguf",
                            "tokenizer/ggml-vocab-fixture-gemma4.gguf"};
    const char *text = "Hello world! <|im_start|> ok\n\t  12345 \xc3\xa9t\xc3\xa9 <bos>";
    for (size_t v = 0; v < sizeof vocabs / sizeof *vocabs; v++)
        for (int which = 0; which < 2; which++) {
            char path[512], err[512] = "";
            snprintf(path, sizeof path, "%s/empty-%zu-%d.gguf", t_tmpdir(), v, which);
            const int w = write_empty_token(vocabs[v], path, which);
            if (w == 1) continue;
            if (!ENSURE(w == 0, "%s", vocabs[v])) continue;
            pt_engine_params ep = {.model_path = path, .vocab_only = 1};
            pt_engine *e = pt_engine_open(&ep, err, sizeof err);
            if (!e) continue; /* refusing it is fine; what matters is no undefined behaviour */
            const int n = pt_vocab_size(e);
            for (int flags = 0; flags < 4; flags++) {
                pt_ids ids = {0};
                if (pt_tokenize(e, text, strlen(text), flags, &ids, err, sizeof err) == 0) {
                    pt_buf b = {0};
                    CHECKF(pt_detokenize(e, ids.v, ids.n, 0, &b, err, sizeof err) == 0, "%s", err);
                    pt_buf_free(&b);
                }
                pt_ids_free(&ids);
            }
            int32_t *all = malloc((size_t)n * sizeof *all);
            for (int i = 0; i < n; i++)
                all[i] = i;
            for (int flags = 0; flags < 2; flags++) {
                pt_buf b = {0};
                CHECKF(pt_detokenize(e, all, (size_t)n, flags, &b, err, sizeof err) == 0, "%s: %s",
                       vocabs[v], err);
                pt_buf_free(&b);
            }
            free(all);
            size_t len = 1;
            pt_token_piece(e, which ? n - 1 : 0, PT_DETOKENIZE_RENDER_SPECIAL, &len);
            CHECK(len == 0);
            pt_engine_close(e);
        }
}

T_SUITE(hostile) {
    T_ADD(hostile_padded_vocab_masked);
    T_ADD(hostile_unaligned_tensors_refused);
    T_ADD(hostile_empty_token_strings);
}
