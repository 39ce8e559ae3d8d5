/* test_tokenizer.c — the tokenizer against llama.cpp's reference tokenizations
 * (every ggml-vocab-*.gguf in fixtures/tokenizer/ with its .inp/.out pair),
 * round trips, special-token parsing on and off, the streaming decoder on
 * characters split across tokens, and the `petrel tokenize`/`detokenize`
 * commands (exit statuses, empty text); the library's UTF-8 repair and byte
 * buffer. */
#include <dirent.h>
#include <stdlib.h>
#include <string.h>

#include "format/gguf.h"
#include "test.h"
#include "text/tokenizer.h"
#include "text/utf8.h"

#define SEP "\n__ggml_vocab_test__\n"

static tok_vocab *load_vocab(const char *name) {
    pt_err err = {{0}};
    gguf_ctx *g = gguf_open(t_fixture(name), &err);
    CHECKF(g, "%s", err.msg);
    if (!g) return NULL;
    tok_vocab *v = tok_load(g, &err);
    CHECKF(v, "%s", err.msg);
    gguf_close(g);
    return v;
}

static int has_suffix(const char *s, const char *suf) {
    size_t a = strlen(s), b = strlen(suf);
    return a >= b && !strcmp(s + a - b, suf);
}

/* Parse one .out line ("1 2 3", maybe with a leading space) into ids. */
static void parse_ids(const char *line, size_t len, tok_ids *ids) {
    ids->n = 0;
    size_t i = 0;
    while (i < len) {
        while (i < len && line[i] == ' ')
            i++;
        if (i >= len) break;
        long x = 0;
        while (i < len && line[i] >= '0' && line[i] <= '9')
            x = x * 10 + (line[i++] - '0');
        if (ids->n == ids->cap) {
            ids->cap = ids->cap ? ids->cap * 2 : 64;
            ids->v = realloc(ids->v, ids->cap * sizeof *ids->v);
        }
        ids->v[ids->n++] = (int32_t)x;
        while (i < len && line[i] != ' ')
            i++;
    }
}

/* Run one vocabulary's .inp/.out pair; returns the number of cases checked. */
static int check_vocab_file(const char *name) {
    char path[512];
    snprintf(path, sizeof path, "tokenizer/%s", name);
    tok_vocab *v = load_vocab(path);
    if (!v) return 0;
    char inp_path[600], out_path[600];
    snprintf(inp_path, sizeof inp_path, "%s.inp", t_fixture(path));
    snprintf(out_path, sizeof out_path, "%s.out", t_fixture(path));
    size_t inp_len, out_len;
    char *inp = t_read_file(inp_path, &inp_len);
    char *outf = t_read_file(out_path, &out_len);
    CHECKF(inp && outf, "%s: missing .inp/.out", name);
    int cases = 0, failures = 0;
    tok_ids got = {0}, want = {0};
    tok_bytes dec = {0};
    const char *p = inp, *end = inp ? inp + inp_len : NULL;
    const char *o = outf, *oend = outf ? outf + out_len : NULL;
    const size_t sl = strlen(SEP);
    while (inp && outf && p < end) {
        const char *s = memmem(p, (size_t)(end - p), SEP, sl);
        if (!s) s = end; /* some files omit the last separator */
        const char *nl = memchr(o, '\n', (size_t)(oend - o));
        size_t ol = nl ? (size_t)(nl - o) : (size_t)(oend - o);
        parse_ids(o, ol, &want);
        o = nl ? nl + 1 : oend;
        pt_err err = {{0}};
        got.n = 0;
        int rc = tok_encode(v, p, (size_t)(s - p), 0, &got, &err);
        CHECKF(rc == 0, "%s: %s", name, err.msg);
        int same = got.n == want.n && (!got.n || !memcmp(got.v, want.v, got.n * sizeof *got.v));
        if (!same && failures++ < 5) {
            char gs[512] = "", ws[512] = "";
            for (size_t i = 0; i < got.n && strlen(gs) < 480; i++)
                snprintf(gs + strlen(gs), sizeof gs - strlen(gs), "%d ", got.v[i]);
            for (size_t i = 0; i < want.n && strlen(ws) < 480; i++)
                snprintf(ws + strlen(ws), sizeof ws - strlen(ws), "%d ", want.v[i]);
            t_fail_at(__FILE__, __LINE__, "%s case %d \"%.*s\": got [%s] want [%s]", name, cases,
                      (int)PT_MIN(s - p, 60), p, gs, ws);
        }
        /* round trip: valid UTF-8 without a literal U+2581 comes back byte for byte */
        dec.n = 0;
        CHECK(tok_decode(v, got.v, got.n, 0, &dec, &err) == 0);
        int has_marker = memmem(p, (size_t)(s - p), "\xe2\x96\x81", 3) != NULL;
        if (!has_marker)
            CHECKF(dec.n == (size_t)(s - p) && !memcmp(dec.v, p, dec.n),
                   "%s case %d: round trip \"%.*s\" -> \"%.*s\"", name, cases,
                   (int)PT_MIN(s - p, 60), p, (int)PT_MIN(dec.n, 60), dec.v);
        cases++;
        p = s == end ? end : s + sl;
    }
    CHECKF(cases > 0, "%s: no cases", name);
    CHECKF(o >= oend || *o == 0, "%s: .out has more lines than .inp has cases", name);
    tok_ids_free(&got);
    tok_ids_free(&want);
    tok_bytes_free(&dec);
    free(inp);
    free(outf);
    tok_free(v);
    return cases;
}

static void tok_reference_files(void) {
    DIR *d = opendir(t_fixture("tokenizer"));
    CHECKF(d, "no fixtures folder %s", t_fixture("tokenizer"));
    if (!d) return;
    int files = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (strncmp(e->d_name, "ggml-vocab-", 11) || !has_suffix(e->d_name, ".gguf")) continue;
        char name[256];
        snprintf(name, sizeof name, "%s", e->d_name);
        check_vocab_file(name);
        files++;
    }
    closedir(d);
    CHECKF(files >= 7, "only %d vocabularies found", files);
}

static int encode(const tok_vocab *v, const char *s, int flags, tok_ids *ids) {
    pt_err err = {{0}};
    ids->n = 0;
    int rc = tok_encode(v, s, strlen(s), flags, ids, &err);
    CHECKF(rc == 0, "%s", err.msg);
    return rc;
}

static void tok_special_parsing(void) {
    tok_vocab *v = load_vocab("tokenizer/ggml-vocab-fixture-glm-dsa.gguf");
    if (!v) return;
    tok_ids ids = {0};
    /* off: the text is ordinary characters */
    encode(v, "<|user|>hi", 0, &ids);
    CHECK(ids.n > 2);
    for (size_t i = 0; i < ids.n; i++)
        CHECK(ids.v[i] < 498);
    /* on: one token each */
    encode(v, "[gMASK]<sop><|user|>hi<|assistant|>", TOK_PARSE_SPECIAL, &ids);
    CHECK(ids.n >= 4 && ids.v[0] == 500 && ids.v[1] == 502 && ids.v[2] == 505);
    CHECK(ids.v[ids.n - 1] == 506);
    /* add_special: glm4 adds no BOS unless the file says so */
    encode(v, "hi", TOK_ADD_SPECIAL, &ids);
    CHECK(ids.n >= 1 && ids.v[0] != 500);
    /* decoding renders control tokens only when asked */
    int32_t seq[] = {505, 506};
    tok_bytes b = {0};
    pt_err err = {{0}};
    CHECK(tok_decode(v, seq, 2, 0, &b, &err) == 0 && b.n == 0);
    CHECK(tok_decode(v, seq, 2, TOK_RENDER_SPECIAL, &b, &err) == 0);
    CHECK(b.n == 21 && !memcmp(b.v, "<|user|><|assistant|>", 21));
    int32_t bad = 512;
    CHECK(tok_decode(v, &bad, 1, 0, &b, &err) == -1);
    CHECK_STR_CONTAINS(err.msg, "outside the vocabulary");
    CHECK(tok_is_eog(v, 498) && tok_is_eog(v, 505) && !tok_is_eog(v, 500));
    tok_bytes_free(&b);
    tok_free(v);

    /* Gemma 4: BOS added with add_special; user-defined tokens always match */
    v = load_vocab("tokenizer/ggml-vocab-fixture-gemma4.gguf");
    if (!v) return;
    encode(v, "hi", TOK_ADD_SPECIAL, &ids);
    CHECK(ids.n >= 2 && ids.v[0] == 2);
    encode(v, "<|turn>", 0, &ids);
    CHECK(!(ids.n == 1 && ids.v[0] == 5));
    encode(v, "<|turn>user", TOK_PARSE_SPECIAL, &ids);
    CHECK(ids.n >= 2 && ids.v[0] == 5);
    encode(v, "a<|\"|>b", 0, &ids); /* USER_DEFINED: parsed even without the flag */
    int found = 0;
    for (size_t i = 0; i < ids.n; i++)
        found |= ids.v[i] == 14;
    CHECK(found);
    tok_free(v);

    /* deepseek-v3: add_bos_token true */
    v = load_vocab("tokenizer/ggml-vocab-fixture-deepseek2.gguf");
    if (!v) return;
    encode(v, "x", TOK_ADD_SPECIAL, &ids);
    CHECK(ids.n >= 2 && ids.v[0] == 0);
    encode(v, "", TOK_ADD_SPECIAL, &ids);
    CHECK(ids.n == 1 && ids.v[0] == 0);
    encode(v, "", 0, &ids);
    CHECK(ids.n == 0);
    tok_free(v);
    tok_ids_free(&ids);
}

/* Feed ids one at a time; no emitted chunk may end inside a character and
 * the concatenation must equal the plain decode. */
static void stream_check(const tok_vocab *v, const char *text) {
    tok_ids ids = {0};
    encode(v, text, 0, &ids);
    tok_stream st = {0};
    tok_bytes all = {0}, chunk = {0};
    pt_err err = {{0}};
    for (size_t i = 0; i < ids.n; i++) {
        chunk.n = 0;
        CHECK(tok_stream_push(v, &st, ids.v[i], 0, &chunk, &err) == 0);
        if (chunk.n) {
            unsigned char last = (unsigned char)chunk.v[chunk.n - 1];
            /* the chunk ends on a boundary: its last lead byte has all its continuations */
            size_t k = chunk.n;
            while (k > 0 && ((unsigned char)chunk.v[k - 1] & 0xC0) == 0x80)
                k--;
            CHECK(k > 0);
            unsigned char lead = k ? (unsigned char)chunk.v[k - 1] : 0;
            size_t want = lead >= 0xF0 ? 4 : lead >= 0xE0 ? 3 : lead >= 0xC0 ? 2 : 1;
            CHECKF(chunk.n - (k - 1) == want, "chunk ends mid-character (last byte %02x)", last);
        }
        if (chunk.n) {
            all.v = realloc(all.v, all.n + chunk.n);
            memcpy(all.v + all.n, chunk.v, chunk.n);
            all.n += chunk.n;
        }
    }
    chunk.n = 0;
    CHECK(tok_stream_flush(&st, &chunk, &err) == 0);
    CHECK(chunk.n == 0);
    CHECKF(all.n == strlen(text) && !memcmp(all.v, text, all.n), "stream of \"%s\"", text);
    tok_ids_free(&ids);
    tok_bytes_free(&all);
    tok_bytes_free(&chunk);
}

static void tok_stream_utf8(void) {
    /* tiny vocabularies: multi-byte characters become byte tokens, split across ids */
    const char *files[] = {"tokenizer/ggml-vocab-fixture-glm-dsa.gguf",
                           "tokenizer/ggml-vocab-fixture-gemma4.gguf",
                           "tokenizer/ggml-vocab-gpt-2.gguf"};
    for (size_t f = 0; f < PT_ARRAY_LEN(files); f++) {
        tok_vocab *v = load_vocab(files[f]);
        if (!v) continue;
        stream_check(v, "h\xc3\xa9llo w\xc3\xb6rld \xe4\xb8\xad\xe6\x96\x87 \xf0\x9f\x98\x80!");
        stream_check(v, "x \xf0\x9f\xa6\x99\xf0\x9f\xa6\x99\xd0\xb6");
        tok_free(v);
    }
    /* invalid bytes held back are released, never lost */
    tok_vocab *v = load_vocab("tokenizer/ggml-vocab-fixture-gemma4.gguf");
    if (!v) return;
    int32_t e2 = tok_find(v, "<0xE2>", 6), a = tok_find(v, "a", 1);
    CHECK(e2 >= 0 && a >= 0);
    tok_stream st = {0};
    tok_bytes out = {0};
    pt_err err = {{0}};
    CHECK(tok_stream_push(v, &st, e2, 0, &out, &err) == 0 && out.n == 0);
    CHECK(tok_stream_push(v, &st, a, 0, &out, &err) == 0);
    CHECK(out.n == 2 && (unsigned char)out.v[0] == 0xE2 && out.v[1] == 'a');
    out.n = 0;
    CHECK(tok_stream_push(v, &st, e2, 0, &out, &err) == 0 && out.n == 0);
    CHECK(tok_stream_flush(&st, &out, &err) == 0 && out.n == 1);
    tok_bytes_free(&out);
    tok_free(v);
}

static void tok_invalid_utf8(void) {
    /* each bad byte becomes U+FFFD, as llama.cpp; nothing crashes */
    tok_vocab *v = load_vocab("tokenizer/ggml-vocab-gpt-2.gguf");
    if (!v) return;
    tok_ids a = {0}, b = {0};
    pt_err err = {{0}};
    CHECK(tok_encode(v, "x\xff y\xc3", 5, 0, &a, &err) == 0);
    CHECK(tok_encode(v, "x\xef\xbf\xbd y\xef\xbf\xbd", 9, 0, &b, &err) == 0);
    CHECK(a.n == b.n && !memcmp(a.v, b.v, a.n * sizeof *a.v));
    tok_ids_free(&a);
    tok_ids_free(&b);
    tok_free(v);
}

/* utf8_repair: strict (overlong, surrogate, > U+10FFFF, truncated, NUL all
 * become U+FFFD, one per bad byte), NUL-terminated, counts what it replaced. */
static void tok_utf8_repair(void) {
    static const struct {
        const char *in;
        size_t n;
        const char *want;
        int bad;
    } cases[] = {
        {"", 0, "", 0},
        {"plain \xc3\xa9 \xe6\x97\xa5 \xf0\x9f\xa6\x99", 17,
         "plain \xc3\xa9 \xe6\x97\xa5 \xf0\x9f\xa6\x99", 0},
        {"a\xc0\xaf"
         "b",
         4,
         "a\xef\xbf\xbd\xef\xbf\xbd"
         "b",
         2},                                                            /* overlong '/' */
        {"\xed\xa0\x80", 3, "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd", 3}, /* surrogate */
        {"\xf4\x90\x80\x80", 4, "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd",
         4},                                              /* > U+10FFFF */
        {"x\xe2\x82", 3, "x\xef\xbf\xbd\xef\xbf\xbd", 2}, /* truncated */
        {"n\0n", 3, "n\xef\xbf\xbdn", 1},                 /* NUL */
        {"\x80\xff", 2, "\xef\xbf\xbd\xef\xbf\xbd", 2},
    };
    tok_bytes out = {0};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int bad = utf8_repair(cases[i].in, cases[i].n, &out);
        CHECKF(bad == cases[i].bad, "case %zu: %d bad bytes, want %d", i, bad, cases[i].bad);
        CHECKF(out.v && out.n == strlen(cases[i].want) && !memcmp(out.v, cases[i].want, out.n) &&
                   out.v[out.n] == 0,
               "case %zu: wrong repair", i);
    }
    tok_bytes_free(&out);
    /* the buffer's appends keep a terminator, also after an empty append */
    CHECK(tok_bytes_append(&out, "", 0) == 0 && out.v && out.n == 0 && out.v[0] == 0);
    CHECK(tok_bytes_append(&out, "ab", 2) == 0 && out.n == 2 && !strcmp(out.v, "ab"));
    tok_bytes_free(&out);
}

static void tok_model_file_vocab(void) {
    pt_err err = {{0}};
    if (!t_need("glm-dsa-rq2k.gguf")) return;
    gguf_ctx *g = gguf_open(t_fixture("glm-dsa-rq2k.gguf"), &err);
    CHECKF(g, "%s", err.msg);
    if (!g) return;
    tok_vocab *v = tok_load(g, &err); /* a real model has a vocabulary too */
    CHECKF(v, "%s", err.msg);
    tok_free(v);
    gguf_close(g);
}

/* ===== CLI ===== */

static char out[1 << 16];

static const char *bin(void) {
    const char *b = getenv("PETREL_BIN");
    return b && *b ? b : "build/petrel";
}

static int run(const char *args) {
    char cmd[8192];
    snprintf(cmd, sizeof cmd, "%s %s", bin(), args);
    return t_run(cmd, out, sizeof out);
}

static void cli_tokenize(void) {
    char args[4096], m[512]; /* t_fixture's buffer is reused: keep a copy */
    snprintf(m, sizeof m, "%s", t_fixture("tokenizer/ggml-vocab-fixture-glm-dsa.gguf"));
    /* the first .inp case of this vocabulary: "ied 4 ½ months" */
    snprintf(args, sizeof args, "tokenize -m %s -p 'ied 4 \xc2\xbd months' 2>/dev/null", m);
    CHECK(run(args) == 0);
    char want[256];
    size_t ol;
    char path[600];
    snprintf(path, sizeof path, "%s.out", m);
    char *o = t_read_file(path, &ol);
    CHECK(o != NULL);
    if (o) {
        const char *s = o;
        while (*s == ' ')
            s++;
        const char *nl = strchr(s, '\n');
        snprintf(want, sizeof want, "%.*s\n", (int)(nl - s), s);
        CHECKF(!strcmp(out, want), "got '%s' want '%s'", out, want);
        free(o);
    }
    /* empty text: an empty line, exit 0 */
    snprintf(args, sizeof args, "tokenize -m %s -p '' 2>/dev/null", m);
    CHECK(run(args) == 0);
    CHECK(!strcmp(out, "\n"));
    /* special text is plain unless --parse-special */
    snprintf(args, sizeof args, "tokenize -m %s -p '<|user|>' 2>/dev/null", m);
    CHECK(run(args) == 0);
    CHECK(strcmp(out, "505\n") != 0);
    snprintf(args, sizeof args, "tokenize -m %s --parse-special -p '<|user|>' 2>/dev/null", m);
    CHECK(run(args) == 0);
    CHECK(!strcmp(out, "505\n"));
    /* --add-special on deepseek2 adds its BOS (0) */
    snprintf(args, sizeof args, "tokenize -m %s --add-special -p 'x' 2>/dev/null",
             t_fixture("tokenizer/ggml-vocab-fixture-deepseek2.gguf"));
    CHECK(run(args) == 0);
    CHECK(!strncmp(out, "0 ", 2));
    /* -f FILE reads the text verbatim (trailing newline included) */
    char f[512];
    snprintf(f, sizeof f, "%s/tok_in.txt", t_tmpdir());
    CHECK(t_write_file(f, "hi\n", 3) == 0);
    snprintf(args, sizeof args, "tokenize -m %s -f %s 2>/dev/null", m, f);
    CHECK(run(args) == 0);
    char ids_line[256];
    size_t il = strnlen(out, sizeof ids_line - 1);
    memcpy(ids_line, out, il);
    ids_line[il] = 0;
    /* and detokenize gives the text back */
    ids_line[strcspn(ids_line, "\n")] = 0;
    for (char *c = ids_line; *c; c++)
        if (*c == ' ') *c = ',';
    snprintf(args, sizeof args, "detokenize -m %s --ids %s 2>/dev/null", m, ids_line);
    CHECK(run(args) == 0);
    CHECK(!strcmp(out, "hi\n"));
    snprintf(args, sizeof args, "detokenize -m %s --ids 505,506 2>/dev/null", m);
    CHECK(run(args) == 0);
    CHECKF(!strcmp(out, "<|user|><|assistant|>"), "got '%s'", out);
    /* ids on stdin */
    snprintf(args, sizeof args, "echo '505 506' | %s detokenize -m %s 2>/dev/null", bin(), m);
    CHECK(t_run(args, out, sizeof out) == 0);
    CHECKF(!strcmp(out, "<|user|><|assistant|>"), "got '%s'", out);
}

static void cli_tokenize_errors(void) {
    char args[4096], m[512];
    snprintf(m, sizeof m, "%s", t_fixture("tokenizer/ggml-vocab-fixture-glm-dsa.gguf"));
    snprintf(args, sizeof args, "PETREL_MODEL=/no/such.gguf %s tokenize -p hi", bin());
    CHECK(t_run(args, out, sizeof out) == 1);         /* no -m: the default model (here missing) */
    snprintf(args, sizeof args, "tokenize -m %s", m); /* no text */
    CHECK(run(args) == 2);
    snprintf(args, sizeof args, "tokenize -m %s -p hi --bogus", m);
    CHECK(run(args) == 2);
    CHECK(run("tokenize -m /nonexistent.gguf -p hi") == 1);
    CHECK_STR_CONTAINS(out, "petrel: ");
    snprintf(args, sizeof args, "tokenize -m %s -f /nonexistent.txt", m);
    CHECK(run(args) == 1);
    snprintf(args, sizeof args, "detokenize -m %s --ids 1,x", m);
    CHECK(run(args) == 2);
    snprintf(args, sizeof args, "detokenize -m %s --ids 99999", m);
    CHECK(run(args) == 1);
    CHECK_STR_CONTAINS(out, "outside the vocabulary");
    CHECK(run("tokenize --help") == 0);
    CHECK_STR_CONTAINS(out, "--parse-special");
    CHECK(run("detokenize --help") == 0);
}

T_SUITE(tok) {
    T_ADD(tok_reference_files);
    T_ADD(tok_special_parsing);
    T_ADD(tok_stream_utf8);
    T_ADD(tok_invalid_utf8);
    T_ADD(tok_utf8_repair);
    T_ADD(tok_model_file_vocab);
    T_ADD(cli_tokenize);
    T_ADD(cli_tokenize_errors);
}
