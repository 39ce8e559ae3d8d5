/* test_grammar.c — constrained decoding (src/text/grammar.c, gram_schema.c, chat_grammar.c):
 * GBNF parse errors with their positions, the matcher on texts, hostile grammars, JSON Schema
 * conversion per keyword, token masks against a per-token check on real vocabularies, sampled
 * generations of the demo model and of a fixture model validated against their schema (a small
 * validator of the covered subset lives here), and tool-call grammars of every chat format
 * whose sampled replies pt_chat_parse reads as valid calls. */
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "petrel.h"
#include "test.h"
#include "text/grammar.h"
#include "text/sampler.h"

#define DEMO_MODEL "models/petrel-demo-glm.gguf"

/* ===== Helpers ===== */

static gram *parse(const char *text, pt_err *e) {
    return gram_parse(text, strlen(text), e);
}

/* 1 when text is a whole sentence of the grammar. */
static int accepts(const char *grammar, const char *text) {
    pt_err e = {{0}};
    gram *g = parse(grammar, &e);
    if (!g) {
        t_fail_at(__FILE__, __LINE__, "grammar did not parse: %s", e.msg);
        return -1;
    }
    gram_match *m = gram_match_new(g, NULL, &e);
    int ok = m && !gram_match_text(m, text, strlen(text)) && gram_match_can_end(m);
    gram_match_free(m);
    gram_free(g);
    return ok;
}

/* ===== Parsing ===== */

static void test_grammar_parse_errors(void) {
    static const struct {
        const char *g, *want;
    } cases[] = {
        {"root ::= \"a", "line 1, column 10: unterminated literal"},
        {"root ::= [a-", "line 1, column 10"},
        {"root ::= foo", "line 1, column 10: undefined rule 'foo'"},
        {"a ::= \"x\"", "no rule named 'root'"},
        {"root ::= \"a\"\nroot ::= \"b\"", "line 2, column 1: rule 'root' is defined twice"},
        {"root ::= root \"a\" | \"b\"", "rule 'root' is left-recursive"},
        {"root ::= x\nx ::= \"y\"? root", "left-recursive"},
        {"root ::= (\"a\"", "line 1, column 10: unclosed '('"},
        {"root ::= \"a\" )", "line 1, column 14: unexpected character ')'"},
        {"root ::= *", "line 1, column 10: a repetition needs an element"},
        {"root ::= \"a\"{3,1}", "n below m"},
        {"root ::= \"a\"{99999}", "above 10000"},
        {"root ::= \"\\q\"", "unknown escape"},
        {"root ::= [z-a]", "a range ends below its start"},
        {"root \"a\"", "line 1, column 6: expected '::='"},
        {"  \n ::= \"a\"", "line 2, column 2: expected a rule name"},
        {"root ::= \"\xff\"", "invalid UTF-8"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        pt_err e = {{0}};
        gram *g = parse(cases[i].g, &e);
        CHECKF(!g, "case %zu parsed: %s", i, cases[i].g);
        CHECKF(strstr(e.msg, cases[i].want), "case %zu: '%s' lacks '%s'", i, e.msg, cases[i].want);
        gram_free(g);
    }
    /* the public entry point says the same */
    char err[256] = "";
    CHECK(!pt_grammar_new(NULL, "root ::= nope", 13, err, sizeof err));
    CHECK(strstr(err, "undefined rule 'nope'"));
}

static void test_grammar_match(void) {
    const char *g1 = "# a comment\nroot ::= greeting \" \" name  # trailing\n"
                     "greeting ::= \"hello\" | \"hi\"\nname ::= [A-Z] [a-z]*\n";
    CHECK(accepts(g1, "hello Bob") == 1);
    CHECK(accepts(g1, "hi X") == 1);
    CHECK(accepts(g1, "hi") == 0);
    CHECK(accepts(g1, "hey Bob") == 0);
    CHECK(accepts(g1, "hi bob") == 0);
    /* repetitions */
    CHECK(accepts("root ::= \"ab\"{2,3}", "abab") == 1);
    CHECK(accepts("root ::= \"ab\"{2,3}", "ababab") == 1);
    CHECK(accepts("root ::= \"ab\"{2,3}", "ab") == 0);
    CHECK(accepts("root ::= \"ab\"{2,3}", "abababab") == 0);
    CHECK(accepts("root ::= [0-9]{2,}", "1234567") == 1);
    CHECK(accepts("root ::= [0-9]{2,}", "1") == 0);
    CHECK(accepts("root ::= [0-9]{,2}", "") == 1);
    CHECK(accepts("root ::= [0-9]{,2}", "123") == 0);
    CHECK(accepts("root ::= \"x\"+ \"y\"?", "xxx") == 1);
    CHECK(accepts("root ::= \"x\"+ \"y\"?", "xxxy") == 1);
    CHECK(accepts("root ::= \"x\"+ \"y\"?", "y") == 0);
    /* classes: negation, escapes, any, multi-byte code points */
    CHECK(accepts("root ::= [^a-c\\n]+", "xyz") == 1);
    CHECK(accepts("root ::= [^a-c\\n]+", "xbz") == 0);
    CHECK(accepts("root ::= [^a-c\\n]+", "x\n") == 0);
    CHECK(accepts("root ::= . . .", "a\xc3\xa9\xe6\x97\xa5") == 1); /* a é 日 */
    CHECK(accepts("root ::= [\\u00e0-\\u00ff]", "\xc3\xa9") == 1);
    CHECK(accepts("root ::= [\\u00e0-\\u00ff]", "\xc3\x80") == 0);
    CHECK(accepts("root ::= \"\\x41\\u00e9\\U0001F600\"", "A\xc3\xa9\xf0\x9f\x98\x80") == 1);
    CHECK(accepts("root ::= \"\\\"\\\\\"", "\"\\") == 1);
    /* alternatives over lines, nesting, recursion (right and middle) */
    const char *g2 = "root ::= item\n      | \"[\" list? \"]\"\nlist ::= root (\",\" root)*\n"
                     "item ::= [a-z]+\n";
    CHECK(accepts(g2, "[a,[b,[c,d]],[]]") == 1);
    CHECK(accepts(g2, "[a,[b]") == 0);
    /* deep nesting runs (the stack is a persistent list, not C recursion) */
    char *deep = malloc(20002);
    for (int i = 0; i < 10000; i++)
        deep[i] = '[', deep[10001 + i] = ']';
    deep[10000] = 'x';
    deep[20001] = 0;
    CHECK(accepts("root ::= \"[\" root \"]\" | \"x\"", deep) == 1);
    deep[20000] = 0; /* one ] short */
    CHECK(accepts("root ::= \"[\" root \"]\" | \"x\"", deep) == 0);
    free(deep);
    /* incremental: a prefix is accepted but cannot end; a rejected byte leaves the state */
    pt_err e = {{0}};
    gram *g = parse("root ::= \"ab\" \"c\"*", &e);
    gram_match *m = gram_match_new(g, NULL, &e);
    CHECK(gram_match_text(m, "a", 1) == 0);
    CHECK(!gram_match_can_end(m));
    CHECK(gram_match_text(m, "x", 1) == -1);
    CHECK(gram_match_text(m, "b", 1) == 0);
    CHECK(gram_match_can_end(m));
    CHECK(gram_match_text(m, "\xc3", 1) == -1); /* no class could take it */
    gram_match_reset(m);
    CHECK(gram_match_text(m, "abccc", 5) == 0 && gram_match_can_end(m));
    gram_match_free(m);
    gram_free(g);
    /* a character split across calls */
    g = parse("root ::= \"\xc3\xa9\xc3\xa9\"", &e);
    m = gram_match_new(g, NULL, &e);
    CHECK(gram_match_text(m, "\xc3", 1) == 0 && !gram_match_can_end(m));
    CHECK(gram_match_text(m, "\xa9\xc3", 2) == 0 && !gram_match_can_end(m));
    CHECK(gram_match_text(m, "\xa9", 1) == 0 && gram_match_can_end(m));
    gram_match_free(m);
    gram_free(g);
}

/* Past MAX_STATES the matcher's tables are rebuilt from the current stacks (grammar.c): a
 * grammar that meets a new state at every character (a counted repetition) still matches. */
static void test_grammar_rebuild(void) {
    pt_err e = {{0}};
    gram *g = parse("root ::= \"x\"{0,10000} \"y\"{0,10000} \"z\"", &e);
    CHECKF(g, "%s", e.msg);
    if (!g) return;
    gram_match *m = gram_match_new(g, NULL, &e);
    char *t = malloc(20001);
    memset(t, 'x', 10000);
    memset(t + 10000, 'y', 10000);
    t[20000] = 'z';
    int ok = 1;
    for (int i = 0; i < 20001 && ok; i++)
        ok = !gram_match_text(m, t + i, 1);
    CHECK(ok && gram_match_can_end(m));
    CHECK(gram_match_text(m, "z", 1) == -1);
    gram_match_reset(m);
    CHECK(!gram_match_text(m, "xyz", 3) && gram_match_can_end(m));
    gram_match_reset(m);
    CHECK(gram_match_text(m, t, 10001) == 0 && !gram_match_can_end(m)); /* 10000 x then a y */
    free(t);
    gram_match_free(m);
    gram_free(g);
}

/* Hostile grammars end with an error or a grammar, quickly, never a crash. */
static void test_grammar_hostile(void) {
    pt_err e = {{0}};
    /* deeply nested groups: refused past 200, not a stack overflow */
    char *s = malloc(100000);
    strcpy(s, "root ::= ");
    size_t n = strlen(s);
    for (int i = 0; i < 5000; i++)
        s[n++] = '(';
    s[n++] = '"', s[n++] = 'a', s[n++] = '"';
    for (int i = 0; i < 5000; i++)
        s[n++] = ')';
    s[n] = 0;
    gram *g = parse(s, &e);
    CHECK(!g && strstr(e.msg, "nested too deep"));
    /* a long chain of rules (recursion in the checks would overflow) */
    n = 0;
    n += (size_t)sprintf(s + n, "root ::= r0\n");
    for (int i = 0; i < 5000; i++)
        n += (size_t)sprintf(s + n, "r%d ::= r%d\n", i, i + 1);
    n += (size_t)sprintf(s + n, "r5000 ::= \"z\"\n");
    g = parse(s, &e);
    CHECKF(g, "%s", e.msg);
    if (g) {
        gram_match *m = gram_match_new(g, NULL, &e);
        CHECK(m && !gram_match_text(m, "z", 1) && gram_match_can_end(m));
        gram_match_free(m);
    }
    gram_free(g);
    /* a left-recursive cycle through nullable rules and generated ones */
    g = parse("root ::= a\na ::= b? c\nb ::= \"x\"\nc ::= (\"\")* a", &e);
    CHECK(!g && strstr(e.msg, "left-recursive"));
    /* exponential ambiguity stays linear: the state is a set */
    g = parse("root ::= x*\nx ::= \"a\" | \"a\" | [a] | \"a\"?\"a\"", &e);
    CHECK(!g || 1);
    gram_free(g);
    g = parse("root ::= (\"a\" | \"a\" | [a])*", &e);
    CHECKF(g, "%s", e.msg);
    if (g) {
        gram_match *m = gram_match_new(g, NULL, &e);
        char as[5001];
        memset(as, 'a', 5000);
        as[5000] = 0;
        CHECK(m && !gram_match_text(m, as, 5000) && gram_match_can_end(m));
        gram_match_free(m);
    }
    gram_free(g);
    /* random bytes: no crash */
    uint64_t x = 88172645463325252ull;
    for (int k = 0; k < 2000; k++) {
        size_t len = 1 + k % 60;
        for (size_t i = 0; i < len; i++) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            static const char alphabet[] = "root ::= |()*+?{}[]^-\"\\ab.#\n0123,";
            s[i] = alphabet[x % (sizeof alphabet - 1)];
        }
        memcpy(s + len, "", 1);
        char t[80];
        snprintf(t, sizeof t, "root ::= %s", s);
        g = gram_parse(t, strlen(t), &e);
        if (g) {
            gram_match *m = gram_match_new(g, NULL, &e);
            if (m) gram_match_text(m, "ab(a", 4);
            gram_match_free(m);
        }
        gram_free(g);
    }
    free(s);
}

/* ===== JSON Schema ===== */

/* A validator of the covered subset. 1 valid, 0 not (why in why). */
static int validate(const json_t *v, const json_t *s, const json_t *top, char *why, size_t wn);

static int type_ok(const json_t *v, const char *t) {
    if (!strcmp(t, "string")) return json_is_string(v);
    if (!strcmp(t, "number")) return json_is_number(v);
    if (!strcmp(t, "integer"))
        return json_is_integer(v) ||
               (json_is_real(v) && json_real_value(v) == floor(json_real_value(v)));
    if (!strcmp(t, "boolean")) return json_is_boolean(v);
    if (!strcmp(t, "null")) return json_is_null(v);
    if (!strcmp(t, "object")) return json_is_object(v);
    if (!strcmp(t, "array")) return json_is_array(v);
    return 0;
}

static size_t utf8_len(const char *s) {
    size_t n = 0;
    for (; *s; s++)
        n += ((unsigned char)*s & 0xC0) != 0x80;
    return n;
}

static int validate(const json_t *v, const json_t *s, const json_t *top, char *why, size_t wn) {
    if (json_is_true(s)) return 1;
    const json_t *j;
    if ((j = json_object_get(s, "$ref"))) {
        const char *r = json_string_value(j);
        const json_t *d = !strncmp(r, "#/$defs/", 8)
                              ? json_object_get(json_object_get(top, "$defs"), r + 8)
                              : json_object_get(json_object_get(top, "definitions"), r + 14);
        return validate(v, d, top, why, wn);
    }
    if ((j = json_object_get(s, "const")) && !json_equal((json_t *)j, (json_t *)v))
        return snprintf(why, wn, "not the const"), 0;
    if ((j = json_object_get(s, "enum"))) {
        int ok = 0;
        for (size_t i = 0; i < json_array_size(j) && !ok; i++)
            ok = json_equal(json_array_get(j, i), (json_t *)v);
        if (!ok) return snprintf(why, wn, "not in the enum"), 0;
    }
    const json_t *any = json_object_get(s, "anyOf");
    if (!any) any = json_object_get(s, "oneOf");
    if (any) {
        int ok = 0;
        for (size_t i = 0; i < json_array_size(any) && !ok; i++)
            ok = validate(v, json_array_get(any, i), top, why, wn);
        if (!ok) return snprintf(why, wn, "no anyOf branch matches"), 0;
    }
    if ((j = json_object_get(s, "type"))) {
        int ok = 0;
        if (json_is_string(j)) ok = type_ok(v, json_string_value(j));
        for (size_t i = 0; json_is_array(j) && i < json_array_size(j) && !ok; i++)
            ok = type_ok(v, json_string_value(json_array_get(j, i)));
        if (!ok) return snprintf(why, wn, "wrong type"), 0;
    }
    if (json_is_string(v)) {
        size_t n = utf8_len(json_string_value(v));
        if ((j = json_object_get(s, "minLength")) && n < (size_t)json_integer_value(j))
            return snprintf(why, wn, "string too short"), 0;
        if ((j = json_object_get(s, "maxLength")) && n > (size_t)json_integer_value(j))
            return snprintf(why, wn, "string too long"), 0;
    }
    if (json_is_array(v)) {
        size_t n = json_array_size(v);
        if ((j = json_object_get(s, "minItems")) && n < (size_t)json_integer_value(j))
            return snprintf(why, wn, "too few items"), 0;
        if ((j = json_object_get(s, "maxItems")) && n > (size_t)json_integer_value(j))
            return snprintf(why, wn, "too many items"), 0;
        const json_t *it = json_object_get(s, "items");
        for (size_t i = 0; it && i < n; i++)
            if (!validate(json_array_get(v, i), it, top, why, wn)) return 0;
    }
    if (json_is_object(v)) {
        const json_t *props = json_object_get(s, "properties"),
                     *req = json_object_get(s, "required");
        const json_t *add = json_object_get(s, "additionalProperties");
        for (size_t i = 0; i < json_array_size(req); i++)
            if (!json_object_get(v, json_string_value(json_array_get(req, i))))
                return snprintf(why, wn, "missing required '%s'",
                                json_string_value(json_array_get(req, i))),
                       0;
        const char *k;
        json_t *x;
        json_object_foreach((json_t *)v, k, x) {
            const json_t *ps = json_object_get(props, k);
            if (ps) {
                if (!validate(x, ps, top, why, wn)) return 0;
            } else if (json_is_false(add))
                return snprintf(why, wn, "additional property '%s'", k), 0;
            else if (json_is_object(add) && !validate(x, add, top, why, wn))
                return 0;
        }
    }
    return 1;
}

/* The schema's grammar accepts good[] and rejects bad[]; every good one validates. */
static void schema_case(const char *schema, const char *const *good, const char *const *bad) {
    pt_buf b = {0};
    char err[512] = "";
    CHECKF(!pt_json_schema_to_gbnf(schema, &b, err, sizeof err), "%s: %s", schema, err);
    pt_grammar *g = b.v ? pt_grammar_new(NULL, b.v, b.n, err, sizeof err) : NULL;
    CHECKF(g, "%s: %s\n%s", schema, err, b.v ? b.v : "");
    json_t *sj = json_loads(schema, 0, NULL);
    for (int i = 0; g && good && good[i]; i++) {
        CHECKF(pt_grammar_match(g, good[i], strlen(good[i])), "%s should accept %s\n%s", schema,
               good[i], b.v);
        json_t *v = json_loads(good[i], JSON_DECODE_ANY, NULL);
        char why[128] = "";
        CHECKF(v && validate(v, sj, sj, why, sizeof why), "validator on %s: %s", good[i], why);
        json_decref(v);
    }
    for (int i = 0; g && bad && bad[i]; i++)
        CHECKF(!pt_grammar_match(g, bad[i], strlen(bad[i])), "%s should reject %s", schema, bad[i]);
    json_decref(sj);
    pt_grammar_free(g);
    pt_buf_free(&b);
}

#define L(...)                                                                                     \
    (const char *const[]) {                                                                        \
        __VA_ARGS__, NULL                                                                          \
    }

static void test_grammar_json_schema(void) {
    schema_case("{\"type\":\"string\"}", L("\"\"", "\"a b\\n\\u00e9 \xc3\xa9\"", "\"\\\"\""),
                L("\"a", "'a'", "\"\n\"", "1"));
    schema_case("{\"type\":\"string\",\"minLength\":2,\"maxLength\":3}", L("\"ab\"", "\"abc\""),
                L("\"a\"", "\"abcd\""));
    schema_case("{\"type\":\"integer\"}", L("0", "-12", "123456"), L("01", "1.5", "-", "+1"));
    schema_case("{\"type\":\"number\"}", L("0", "-1.25", "3e10", "2.5E-3"), L(".5", "1.", "1e"));
    schema_case("{\"type\":\"boolean\"}", L("true", "false"), L("True", "1"));
    schema_case("{\"type\":\"null\"}", L("null"), L("nul", "\"null\""));
    schema_case("{\"type\":[\"string\",\"null\"]}", L("\"x\"", "null"), L("1"));
    schema_case("{\"enum\":[\"red\",1,null,\"a\\\"b\"]}", L("\"red\"", "1", "null", "\"a\\\"b\""),
                L("\"blue\"", "2"));
    schema_case("{\"const\":{\"k\":[1,2]}}", L("{\"k\":[1,2]}"), L("{\"k\":[1]}"));
    schema_case("{\"anyOf\":[{\"type\":\"integer\"},{\"type\":\"array\",\"items\":{\"type\":"
                "\"boolean\"}}]}",
                L("5", "[true, false]", "[]"), L("[1]", "\"x\""));
    schema_case("{\"oneOf\":[{\"type\":\"integer\"},{\"type\":\"string\"}]}", L("5", "\"5\""),
                L("true"));
    schema_case("{\"type\":\"array\",\"items\":{\"type\":\"integer\"},\"minItems\":1,\"maxItems\":"
                "3}",
                L("[1]", "[1, 2,3]", "[ 1 ]"), L("[]", "[1,2,3,4]", "[1,]"));
    schema_case("{\"type\":\"array\",\"maxItems\":0}", L("[]"), L("[1]"));
    schema_case("{\"type\":\"array\"}", L("[]", "[1,\"a\",{\"b\":null},[true]]"), L("[,]"));
    /* objects: required, optional, order, additionalProperties */
    const char *obj = "{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"},\"b\":{"
                      "\"type\":\"string\"},\"c\":{\"type\":\"boolean\"}},\"required\":[\"b\"],"
                      "\"additionalProperties\":false}";
    schema_case(obj,
                L("{\"b\":\"x\"}", "{\"a\":1,\"b\":\"x\"}", "{\"a\":1,\"b\":\"x\",\"c\":true}",
                  "{\"b\":\"x\",\"c\":false}", "{ \"b\" : \"x\" }"),
                L("{}", "{\"a\":1}", "{\"b\":\"x\",\"d\":1}", "{\"b\":\"x\",}", "{,\"b\":\"x\"}"));
    const char *opt = "{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"},\"b\":{"
                      "\"type\":\"integer\"}}}";
    schema_case(opt, L("{}", "{\"a\":1}", "{\"b\":2}", "{\"a\":1,\"b\":2}"),
                L("{,}", "{\"b\":2,\"a\":1}"));
    schema_case("{\"type\":\"object\"}", L("{}", "{\"x\":[1,{\"y\":null}],\"z\":\"w\"}"),
                L("[]", "{\"x\"}"));
    schema_case("{\"type\":\"object\",\"additionalProperties\":{\"type\":\"integer\"}}",
                L("{}", "{\"p\":1,\"q\":2}"), L("{\"p\":\"1\"}"));
    schema_case("{\"type\":\"object\",\"additionalProperties\":false}", L("{}"), L("{\"a\":1}"));
    schema_case("{\"required\":[\"id\"]}", L("{\"id\":[1]}"), L("{}"));
    /* nested, $ref (recursive), annotations ignored */
    schema_case("{\"$defs\":{\"node\":{\"type\":\"object\",\"properties\":{\"v\":{\"type\":"
                "\"integer\"},\"kids\":{\"type\":\"array\",\"items\":{\"$ref\":\"#/$defs/node\"}}},"
                "\"required\":[\"v\"],\"additionalProperties\":false}},\"$ref\":\"#/$defs/node\","
                "\"title\":\"tree\",\"description\":\"d\"}",
                L("{\"v\":1}", "{\"v\":1,\"kids\":[{\"v\":2,\"kids\":[]},{\"v\":3}]}"),
                L("{\"v\":1,\"kids\":[{}]}"));
    /* unsupported keywords are named */
    static const struct {
        const char *s, *want;
    } bad[] = {
        {"{\"type\":\"string\",\"pattern\":\"^a\"}", "keyword 'pattern' is not supported (at /)"},
        {"{\"type\":\"object\",\"properties\":{\"x\":{\"type\":\"string\",\"format\":\"date\"}}}",
         "keyword 'format' is not supported (at /properties/x)"},
        {"{\"allOf\":[]}", "keyword 'allOf'"},
        {"{\"type\":\"integer\",\"minimum\":0}", "keyword 'minimum'"},
        {"{\"type\":\"wat\"}", "unknown type 'wat'"},
        {"{\"$ref\":\"http://x\"}", "$ref 'http://x'"},
        {"{\"type\":\"array\",\"items\":[{}]}", "tuples are not supported"},
        {"[1", "not JSON"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        pt_buf b = {0};
        char err[512] = "";
        CHECKF(pt_json_schema_to_gbnf(bad[i].s, &b, err, sizeof err) == -1, "%s converted",
               bad[i].s);
        CHECKF(strstr(err, bad[i].want), "'%s' lacks '%s'", err, bad[i].want);
        pt_buf_free(&b);
    }
}

/* ===== Masks ===== */

/* The mask at each point of a walk through `text` equals a per-token check. */
static void mask_against_naive(const char *vocab_file, const char *grammar, const char *text,
                               int stride) {
    const char *path = t_need(vocab_file);
    if (!path) return;
    pt_engine_params ep = {.model_path = path, .vocab_only = 1};
    char err[512] = "";
    pt_engine *e = pt_engine_open(&ep, err, sizeof err);
    CHECKF(e, "%s", err);
    if (!e) return;
    pt_grammar *pg = pt_grammar_new(e, grammar, strlen(grammar), err, sizeof err);
    CHECKF(pg, "%s", err);
    pt_err pe = {{0}};
    gram_match *m = gram_match_new(pg->g, pg->gv, &pe);
    gram_match *probe = gram_match_new(pg->g, pg->gv, &pe);
    const int nv = pt_vocab_size(e);
    pt_ids ids = {0};
    CHECK(!pt_tokenize(e, text, strlen(text), 0, &ids, err, sizeof err));
    int mismatches = 0, steps = 0;
    for (size_t k = 0; k <= ids.n && mismatches < 5; k++) {
        int n_allowed = 0;
        const uint64_t *mask = gram_match_mask(m, &n_allowed);
        CHECK(mask);
        if (!mask) break;
        steps++;
        int count = 0;
        for (int t = 0; t < nv; t++) {
            int bit = (int)(mask[t >> 6] >> (t & 63) & 1);
            count += bit;
            if (t % stride && !bit) continue; /* check every allowed token, a sample of the rest */
            /* the naive check: replay the text so far, then the token */
            gram_match_reset(probe);
            int ok = 1;
            for (size_t q = 0; q < k && ok; q++)
                ok = !gram_match_token(probe, ids.v[q]);
            ok = ok && !gram_match_token(probe, t);
            if (ok != bit && mismatches++ < 5)
                t_fail_at(__FILE__, __LINE__, "%s step %zu token %d: mask %d, check %d", vocab_file,
                          k, t, bit, ok);
        }
        CHECK(count == n_allowed);
        if (k < ids.n) CHECKF(!gram_match_token(m, ids.v[k]), "token %zu of the text refused", k);
    }
    CHECK(steps > 3);
    pt_ids_free(&ids);
    gram_match_free(m);
    gram_match_free(probe);
    pt_grammar_free(pg);
    pt_engine_close(e);
}

static void test_grammar_mask(void) {
    const char *schema_g = NULL;
    pt_buf b = {0};
    char err[256];
    CHECK(!pt_json_schema_to_gbnf("{\"type\":\"object\",\"properties\":{\"name\":{\"type\":"
                                  "\"string\"},\"n\":{\"type\":\"integer\"},\"tags\":{\"type\":"
                                  "\"array\",\"items\":{\"enum\":[\"x\",\"y\"]}}},\"required\":["
                                  "\"name\",\"n\"]}",
                                  &b, err, sizeof err));
    schema_g = b.v;
    const char *text =
        "{\"name\": \"h\xc3\xa9llo w\xe6\x97\xa5rld\", \"n\": -42, \"tags\": [\"x\"]}";
    mask_against_naive("tokenizer/ggml-vocab-glm4.gguf", schema_g, text, 7);
    mask_against_naive("tokenizer/ggml-vocab-fixture-qwen3moe.gguf", schema_g, text, 1);
    mask_against_naive("tokenizer/ggml-vocab-gemma-4.gguf", schema_g, text, 97);
    mask_against_naive("tokenizer/ggml-vocab-gemma-4.gguf", "root ::= [^x]* \"x\"", "ab\xc3\xa9 cx",
                       211);
    pt_buf_free(&b);
}

/* ===== Sampled generations ===== */

typedef struct gen_stats {
    int runs, ended, cut, valid, invalid, parsed_bad;
} gen_stats;

/* Sample `runs` generations under the schema; every one that ended by EOG must parse and
 * validate. */
static gen_stats sample_schema(const char *model, const char *schema, int runs, int max_tokens) {
    gen_stats st = {0};
    pt_engine_params ep = {.model_path = model, .n_threads = 2, .usage_dir = t_usage_dir()};
    char err[512] = "";
    pt_engine *e = pt_engine_open(&ep, err, sizeof err);
    CHECKF(e, "%s", err);
    if (!e) return st;
    pt_grammar *g = pt_grammar_from_json_schema(e, schema, err, sizeof err);
    CHECKF(g, "%s", err);
    pt_session_params spp = {.n_ctx = 256};
    pt_session *s = pt_session_new(e, &spp, err, sizeof err);
    pt_sampling sp;
    pt_sampling_default(&sp);
    sp.temp = 1.0f, sp.top_p = 1.0f, sp.grammar = g;
    pt_gen *gen = g && s ? pt_gen_new(s, &sp, err, sizeof err) : NULL;
    CHECKF(gen, "%s", err);
    pt_ids prompt = {0};
    const char *ptext = "Reply in JSON:";
    CHECK(!pt_tokenize(e, ptext, strlen(ptext), PT_TOKENIZE_ADD_SPECIAL, &prompt, err, sizeof err));
    json_t *sj = json_loads(schema, 0, NULL);
    pt_gen_result r = {0};
    for (int i = 0; gen && i < runs; i++) {
        sp.seed = 1000 + (uint64_t)i;
        CHECK(!pt_gen_set_sampling(gen, &sp, err, sizeof err));
        CHECKF(pt_gen_prefill(gen, prompt.v, (int)prompt.n, NULL, err, sizeof err) >= 0, "%s", err);
        pt_gen_opts o = {.max_tokens = max_tokens};
        int rc = pt_gen_run(gen, &o, NULL, NULL, NULL, &r, err, sizeof err);
        CHECKF(rc == 0, "%s", err);
        if (rc) break;
        st.runs++;
        if (r.reason == PT_GEN_EOG) {
            st.ended++;
            CHECK(r.grammar_done);
            json_error_t je;
            json_t *v = json_loadb(r.text.v, r.text.n, 0, &je);
            char why[128] = "";
            if (!v) {
                st.parsed_bad++;
                t_fail_at(__FILE__, __LINE__, "seed %d: ended but not JSON (%s): %s", i, je.text,
                          r.text.v);
            } else if (!validate(v, sj, sj, why, sizeof why)) {
                st.invalid++;
                t_fail_at(__FILE__, __LINE__, "seed %d: invalid (%s): %s", i, why, r.text.v);
            } else
                st.valid++;
            json_decref(v);
        } else {
            CHECKF(r.reason == PT_GEN_LENGTH, "seed %d: reason %d", i, r.reason);
            CHECK(!r.grammar_done || r.text.n > 0);
            if (st.cut++ < 2) fprintf(stderr, "  cut by max_tokens: %s\n", r.text.v);
        }
    }
    json_decref(sj);
    pt_buf_free(&r.text);
    pt_ids_free(&prompt);
    pt_gen_free(gen);
    pt_session_free(s);
    pt_grammar_free(g);
    pt_engine_close(e);
    return st;
}

static const char k_small_schema[] =
    "{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\",\"maxLength\":6},"
    "\"age\":{\"type\":\"integer\"},\"ok\":{\"type\":\"boolean\"},\"tags\":{\"type\":\"array\","
    "\"items\":{\"enum\":[\"a\",\"b\",\"c\"]},\"maxItems\":2},\"kind\":{\"anyOf\":[{\"type\":"
    "\"null\"},{\"type\":\"number\"}]}},\"required\":[\"name\",\"age\"],"
    "\"additionalProperties\":false}";

static void test_grammar_sampled_demo(void) {
    FILE *f = fopen(DEMO_MODEL, "rb");
    CHECKF(f, "%s is missing", DEMO_MODEL);
    if (!f) return;
    fclose(f);
    gen_stats st = sample_schema(DEMO_MODEL, k_small_schema, 300, 64);
    fprintf(stderr, "  demo: %d runs, %d ended by the grammar (%d valid), %d cut by max_tokens\n",
            st.runs, st.ended, st.valid, st.cut);
    CHECK(st.runs == 300);
    CHECK(st.valid == st.ended && st.ended + st.cut == st.runs);
    CHECKF(st.ended >= 60, "only %d of 300 ended: the test proves little", st.ended);
}

static void test_grammar_sampled_fixture(void) {
    const char *f = t_need("qwen3moe-q4_k_m.gguf");
    if (!f) return;
    char path[1024];
    snprintf(path, sizeof path, "%s", f);
    gen_stats st = sample_schema(path, k_small_schema, 200, 128);
    fprintf(stderr, "  qwen3moe fixture: %d runs, %d ended (%d valid), %d cut\n", st.runs, st.ended,
            st.valid, st.cut);
    CHECK(st.runs == 200);
    CHECK(st.valid == st.ended && st.ended + st.cut == st.runs);
    CHECKF(st.ended >= 10, "only %d of 200 ended", st.ended);
}

/* ===== Tool calls ===== */

static const char k_tools[] =
    "[{\"type\":\"function\",\"function\":{\"name\":\"get_weather\",\"parameters\":{\"type\":"
    "\"object\",\"properties\":{\"city\":{\"type\":\"string\",\"maxLength\":8},\"days\":{\"type\":"
    "\"integer\"},\"unit\":{\"enum\":[\"c\",\"f\"]}},\"required\":[\"city\"],"
    "\"additionalProperties\":false}}},"
    "{\"type\":\"function\",\"function\":{\"name\":\"stop\",\"parameters\":{\"type\":\"object\","
    "\"properties\":{}}}}]";

/* Sample replies under the tool grammar of `format` with random logits over `vocab_file`'s
 * vocabulary; every reply that ended must parse into valid calls. */
static void tools_case(const char *format, const char *vocab_file, int parallel, const char *name,
                       int in_reasoning) {
    const char *path = t_need(vocab_file);
    if (!path) return;
    pt_engine_params ep = {.model_path = path, .vocab_only = 1};
    char err[512] = "";
    pt_engine *e = pt_engine_open(&ep, err, sizeof err);
    CHECKF(e, "%s", err);
    if (!e) return;
    pt_buf gb = {0};
    CHECKF(
        !pt_chat_tool_grammar(format, k_tools, name, parallel, in_reasoning, &gb, err, sizeof err),
        "%s: %s", format, err);
    pt_grammar *g = gb.v ? pt_grammar_new(e, gb.v, gb.n, err, sizeof err) : NULL;
    CHECKF(g, "%s: %s\n%s", format, err, gb.v ? gb.v : "");
    const int nv = pt_engine_n_vocab(e);
    float *logits = malloc((size_t)nv * sizeof *logits);
    json_t *tools = json_loads(k_tools, 0, NULL);
    int ended = 0, calls = 0;
    uint64_t x = 12345;
    pt_buf text = {0};
    for (int run = 0; g && run < 40; run++) {
        pt_sampling sp;
        pt_sampling_default(&sp);
        sp.temp = 1.0f, sp.top_p = 1.0f, sp.top_k = 64, sp.grammar = g, sp.seed = (uint64_t)run;
        pt_sampler *smp = pt_sampler_new(&sp, nv, err, sizeof err);
        CHECKF(smp, "%s", err);
        if (!smp) break;
        text.n = 0;
        int done = 0;
        for (int step = 0; step < 200 && !done; step++) {
            for (int t = 0; t < nv; t++) { /* random logits, a bias toward ending */
                x ^= x << 13, x ^= x >> 7, x ^= x << 17;
                logits[t] = (float)(x % 1000) / 250.0f;
                if (pt_token_is_eog(e, t)) logits[t] += 6;
            }
            int32_t tok = pt_sampler_sample(smp, logits);
            CHECKF(tok >= 0, "%s: stuck after: %s", format, text.v ? text.v : "");
            if (tok < 0) break;
            if (pt_token_is_eog(e, tok)) {
                done = 1;
                CHECK(pt_sampler_grammar_done(smp));
                break;
            }
            CHECK(pt_sampler_accept(smp, tok) == 0);
            size_t n;
            const char *p = pt_token_piece(e, tok, PT_DETOKENIZE_RENDER_SPECIAL, &n);
            pt_buf_append(&text, p, n);
        }
        pt_sampler_free(smp);
        if (!done) continue;
        ended++;
        pt_chat_parsed out = {0};
        int opens = in_reasoning;
        CHECK(!pt_chat_parse(format, text.v ? text.v : "", text.n, opens, k_tools, &out, err,
                             sizeof err));
        CHECKF(out.n_calls >= 1 && out.n_bad == 0, "%s: %d calls, %d bad (%s) in: %s", format,
               out.n_calls, out.n_bad, out.bad, text.v);
        CHECKF(parallel || out.n_calls == 1, "%s: %d calls without parallel", format, out.n_calls);
        for (int c = 0; c < out.n_calls; c++) {
            calls++;
            const json_t *fn = NULL;
            for (size_t i = 0; i < json_array_size(tools); i++) {
                const json_t *f = json_object_get(json_array_get(tools, i), "function");
                if (!strcmp(json_string_value(json_object_get(f, "name")), out.calls[c].name))
                    fn = f;
            }
            CHECKF(fn, "%s: unknown tool '%s'", format, out.calls[c].name);
            CHECKF(!name || !strcmp(out.calls[c].name, name), "%s: called %s", format,
                   out.calls[c].name);
            json_t *args = json_loads(out.calls[c].arguments, 0, NULL);
            const json_t *ps = json_object_get(fn, "parameters");
            char why[128] = "";
            CHECKF(fn && args && validate(args, ps, ps, why, sizeof why), "%s: arguments %s: %s",
                   format, out.calls[c].arguments, why);
            json_decref(args);
        }
        pt_chat_parsed_free(&out);
    }
    fprintf(stderr, "  %s (%s%s%s): %d of 40 replies ended, %d calls, all valid\n", format,
            parallel ? "parallel" : "one call", name ? ", named " : "", name ? name : "", ended,
            calls);
    CHECKF(ended >= 5, "%s: only %d replies ended", format, ended);
    pt_buf_free(&text);
    json_decref(tools);
    free(logits);
    pt_grammar_free(g);
    pt_buf_free(&gb);
    pt_engine_close(e);
}

/* pt_chat_json_grammar: the reply, parsed, has the JSON as its content. */
static void test_grammar_chat_json(void) {
    const char *path = t_need("tokenizer/ggml-vocab-fixture-qwen3moe.gguf");
    if (!path) return;
    pt_engine_params ep = {.model_path = path, .vocab_only = 1};
    char err[512] = "";
    pt_engine *e = pt_engine_open(&ep, err, sizeof err);
    CHECKF(e, "%s", err);
    if (!e) return;
    pt_buf gb = {0};
    CHECKF(!pt_chat_json_grammar("qwen3", k_small_schema, 0, &gb, err, sizeof err), "%s", err);
    pt_grammar *g = pt_grammar_new(e, gb.v, gb.n, err, sizeof err);
    CHECKF(g, "%s\n%s", err, gb.v);
    json_t *sj = json_loads(k_small_schema, 0, NULL);
    const int nv = pt_engine_n_vocab(e);
    float *logits = malloc((size_t)nv * sizeof *logits);
    uint64_t x = 99;
    int ended = 0;
    pt_buf text = {0};
    for (int run = 0; g && run < 60; run++) {
        pt_sampling sp;
        pt_sampling_default(&sp);
        sp.temp = 1.0f, sp.top_p = 1.0f, sp.grammar = g, sp.seed = (uint64_t)run;
        pt_sampler *smp = pt_sampler_new(&sp, nv, err, sizeof err);
        text.n = 0;
        int done = 0;
        for (int step = 0; smp && step < 200 && !done; step++) {
            for (int t = 0; t < nv; t++) {
                x ^= x << 13, x ^= x >> 7, x ^= x << 17;
                logits[t] = (float)(x % 1000) / 250.0f + (pt_token_is_eog(e, t) ? 6 : 0);
            }
            int32_t tok = pt_sampler_sample(smp, logits);
            if (tok < 0) break;
            if (pt_token_is_eog(e, tok)) {
                done = 1;
                break;
            }
            pt_sampler_accept(smp, tok);
            size_t n;
            const char *p = pt_token_piece(e, tok, PT_DETOKENIZE_RENDER_SPECIAL, &n);
            pt_buf_append(&text, p, n);
        }
        pt_sampler_free(smp);
        if (!done) continue;
        ended++;
        pt_chat_parsed out = {0};
        CHECK(
            !pt_chat_parse("qwen3", text.v ? text.v : "", text.n, 0, NULL, &out, err, sizeof err));
        json_t *v = json_loads(out.content ? out.content : "", 0, NULL);
        char why[128] = "";
        CHECKF(v && validate(v, sj, sj, why, sizeof why), "content '%s' (%s) of: %s", out.content,
               why, text.v);
        json_decref(v);
        pt_chat_parsed_free(&out);
    }
    fprintf(stderr, "  qwen3 JSON replies: %d of 60 ended, all valid\n", ended);
    CHECK(ended >= 5);
    /* a reasoning block the prompt opened comes first */
    pt_buf b2 = {0};
    CHECK(!pt_chat_json_grammar("glm-5", "{\"type\":\"integer\"}", 1, &b2, err, sizeof err));
    pt_grammar *g2 = pt_grammar_new(NULL, b2.v, b2.n, err, sizeof err);
    CHECK(g2 && pt_grammar_match(g2, "hmm</think>\n42", 14));
    CHECK(g2 && !pt_grammar_match(g2, "42", 2));
    CHECK(pt_chat_json_grammar("qwen3", "{\"type\":\"string\",\"format\":\"uri\"}", 0, &b2, err,
                               sizeof err) == -1 &&
          strstr(err, "'format'"));
    pt_grammar_free(g2);
    pt_buf_free(&b2);
    pt_buf_free(&text);
    free(logits);
    json_decref(sj);
    pt_grammar_free(g);
    pt_buf_free(&gb);
    pt_engine_close(e);
}

/* pt_chat_no_tool_grammar: however hard the sampler is pushed toward markup, no reply parses
 * as a call (nor as a malformed one). */
static void no_tools_case(const char *format, const char *vocab_file) {
    const char *path = t_need(vocab_file);
    if (!path) return;
    pt_engine_params ep = {.model_path = path, .vocab_only = 1};
    char err[512] = "";
    pt_engine *e = pt_engine_open(&ep, err, sizeof err);
    CHECKF(e, "%s", err);
    if (!e) return;
    pt_buf gb = {0};
    CHECKF(!pt_chat_no_tool_grammar(format, 0, &gb, err, sizeof err), "%s", err);
    pt_grammar *g = pt_grammar_new(e, gb.v, gb.n, err, sizeof err);
    CHECKF(g, "%s\n%s", err, gb.v);
    pt_chat_markers mk;
    CHECK(!pt_chat_markers_of(format, &mk));
    for (int i = 0; i < mk.n_tool_calls; i++) {
        char t[128];
        snprintf(t, sizeof t, "a %s b", mk.tool_calls[i]);
        CHECKF(g && !pt_grammar_match(g, t, strlen(t)), "%s: %s", format, t);
    }
    CHECK(g && pt_grammar_match(g, "plain text", 10));
    const int nv = pt_engine_n_vocab(e);
    float *logits = malloc((size_t)nv * sizeof *logits);
    uint64_t x = 5;
    pt_buf text = {0};
    int runs = 0;
    for (int run = 0; g && run < 20; run++) {
        pt_sampling sp;
        pt_sampling_default(&sp);
        sp.temp = 1.0f, sp.top_k = 64, sp.grammar = g, sp.seed = (uint64_t)run;
        pt_sampler *smp = pt_sampler_new(&sp, nv, err, sizeof err);
        text.n = 0;
        for (int step = 0; smp && step < 80; step++) {
            for (int t = 0; t < nv; t++) { /* markup first: tokens that start with '<' */
                x ^= x << 13, x ^= x >> 7, x ^= x << 17;
                size_t n;
                const char *p = pt_token_piece(e, t, PT_DETOKENIZE_RENDER_SPECIAL, &n);
                logits[t] = (float)(x % 1000) / 250.0f + (n && p[0] == '<' ? 8 : 0);
            }
            int32_t tok = pt_sampler_sample(smp, logits);
            if (tok < 0 || pt_token_is_eog(e, tok)) break;
            pt_sampler_accept(smp, tok);
            size_t n;
            const char *p = pt_token_piece(e, tok, PT_DETOKENIZE_RENDER_SPECIAL, &n);
            pt_buf_append(&text, p, n);
        }
        pt_sampler_free(smp);
        pt_chat_parsed out = {0};
        CHECK(!pt_chat_parse(format, text.v ? text.v : "", text.n, 0, k_tools, &out, err,
                             sizeof err));
        CHECKF(out.n_calls == 0 && out.n_bad == 0, "%s: %d calls, %d bad in: %s", format,
               out.n_calls, out.n_bad, text.v);
        pt_chat_parsed_free(&out);
        runs++;
    }
    CHECK(runs == 20);
    pt_buf_free(&text);
    free(logits);
    pt_grammar_free(g);
    pt_buf_free(&gb);
    pt_engine_close(e);
}

static void test_grammar_no_tools(void) {
    no_tools_case("qwen3", "tokenizer/ggml-vocab-fixture-qwen3moe.gguf");
    no_tools_case("glm-5", "tokenizer/ggml-vocab-glm4.gguf");
    no_tools_case("deepseek-v3", "tokenizer/ggml-vocab-fixture-deepseek2.gguf");
    no_tools_case("gemma-4", "tokenizer/ggml-vocab-gemma-4.gguf");
}

static void test_grammar_tools(void) {
    tools_case("qwen3", "tokenizer/ggml-vocab-fixture-qwen3moe.gguf", 1, NULL, 0);
    tools_case("glm-5", "tokenizer/ggml-vocab-glm4.gguf", 1, NULL, 0);
    tools_case("deepseek-v3", "tokenizer/ggml-vocab-fixture-deepseek2.gguf", 1, NULL, 0);
    tools_case("gemma-4", "tokenizer/ggml-vocab-gemma-4.gguf", 1, NULL, 0);
    tools_case("qwen3", "tokenizer/ggml-vocab-fixture-qwen3moe.gguf", 0, "get_weather", 0);
    tools_case("gemma-4", "tokenizer/ggml-vocab-gemma-4.gguf", 0, "get_weather", 0);
    /* the rest of a reasoning block the prompt opened, then the calls */
    pt_buf b0 = {0};
    char e0[256] = "";
    CHECK(!pt_chat_tool_grammar("glm-5", k_tools, NULL, 0, 1, &b0, e0, sizeof e0));
    pt_grammar *g0 = pt_grammar_new(NULL, b0.v, b0.n, e0, sizeof e0);
    CHECKF(g0, "%s", e0);
    static const char good[] = "I think </thin then</think>\n<tool_call>get_weather<arg_key>city"
                               "</arg_key><arg_value>Paris</arg_value></tool_call>";
    static const char bad[] = "I think </think>x<tool_call>get_weather<arg_key>city"
                              "</arg_key><arg_value>Paris</arg_value></tool_call>";
    CHECK(g0 && pt_grammar_match(g0, good, strlen(good)));
    CHECK(g0 && !pt_grammar_match(g0, bad, strlen(bad)));
    pt_grammar_free(g0);
    pt_buf_free(&b0);
    char err[256] = "";
    pt_buf b = {0};
    CHECK(pt_chat_tool_grammar("qwen3", k_tools, "nope", 1, 0, &b, err, sizeof err) == -1);
    CHECK(strstr(err, "no tool named 'nope'"));
    CHECK(pt_chat_tool_grammar("none", k_tools, NULL, 1, 0, &b, err, sizeof err) == -1);
    pt_buf_free(&b);
}

/* ===== The command line ===== */

static int run_cli(const char *args, char *out, size_t cap) {
    const char *b = getenv("PETREL_BIN");
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "%s %s", b && *b ? b : "build/petrel", args);
    return t_run(cmd, out, cap);
}

static void test_grammar_cli(void) {
    static char out[1 << 16];
    const char *m = "-m " DEMO_MODEL;
    char a[2048];
    static const struct {
        const char *args, *want1, *want2;
    } bad[] = {
        {"-p x --grammar 'root ::= foo'", "--grammar", "undefined rule 'foo'"},
        {"-p x --grammar 'root ::= \"a'", "--grammar", "line 1, column 10"},
        {"-p x -j '{\"type\":\"string\",\"pattern\":\"a\"}'", "-j", "'pattern'"},
        {"-p x --json-schema '{'", "--json-schema", "not JSON"},
        {"-p x --grammar-file /nonexistent/g.gbnf", "--grammar-file", "No such file"},
        {"-p x --json-schema-file /nonexistent/s.json", "--json-schema-file", "No such file"},
        {"-p x --grammar 'root ::= \"a\"' -j '{}'", "--grammar and -j", "contradict"},
        {"--tokens 1,2 --grammar 'root ::= \"a\"'", "--grammar", "text prompt"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        snprintf(a, sizeof a, "generate %s %s 2>&1", m, bad[i].args);
        int rc = run_cli(a, out, sizeof out);
        CHECKF(rc == 2, "%s: exit %d: %s", bad[i].args, rc, out);
        CHECKF(strstr(out, bad[i].want1) && strstr(out, bad[i].want2), "%s: %s", bad[i].args, out);
    }
    snprintf(a, sizeof a, "chat %s --grammar 'root ::= nope' </dev/null 2>&1", m);
    CHECK(run_cli(a, out, sizeof out) == 2 && strstr(out, "undefined rule 'nope'"));
    snprintf(a, sizeof a, "serve %s --grammar 'root ::= \"a\"' 2>&1", m);
    CHECK(run_cli(a, out, sizeof out) == 2); /* the server takes grammars per request */
    /* a grammar decides the whole answer; the end of generation follows it */
    for (int seed = 1; seed <= 5; seed++) {
        snprintf(a, sizeof a,
                 "generate %s -p 'Answer:' --grammar 'root ::= (\"yes\" | \"no\")' -n 8 --seed %d "
                 "--quiet 2>/dev/null",
                 m, seed);
        CHECK(run_cli(a, out, sizeof out) == 0);
        CHECKF(!strcmp(out, "yes\n") || !strcmp(out, "no\n"), "seed %d: '%s'", seed, out);
    }
    snprintf(a, sizeof a,
             "generate %s -p 'Color:' -j '{\"enum\":[\"red\",\"green\"]}' -n 32 --seed 2 "
             "--quiet 2>/dev/null",
             m);
    CHECK(run_cli(a, out, sizeof out) == 0);
    json_t *v = json_loads(out, JSON_DECODE_ANY, NULL);
    CHECKF(json_is_string(v) &&
               (!strcmp(json_string_value(v), "red") || !strcmp(json_string_value(v), "green")),
           "'%s'", out);
    json_decref(v);
    /* a cut output says so */
    snprintf(a, sizeof a, "generate %s -p x --grammar 'root ::= \"a\"{5}' -n 2 2>&1 >/dev/null", m);
    CHECK(run_cli(a, out, sizeof out) == 0);
    CHECKF(strstr(out, "stopped (length) before the end of the --grammar grammar"), "%s", out);
}

T_SUITE(grammar) {
    T_ADD(test_grammar_rebuild);
    T_ADD(test_grammar_cli);
    T_ADD(test_grammar_parse_errors);
    T_ADD(test_grammar_match);
    T_ADD(test_grammar_hostile);
    T_ADD(test_grammar_json_schema);
    T_ADD(test_grammar_mask);
    T_ADD(test_grammar_sampled_demo);
    T_ADD(test_grammar_sampled_fixture);
    T_ADD_TIMEOUT(test_grammar_tools, 900); /* ~1 min; minutes under ASan on a loaded machine */
    T_ADD(test_grammar_chat_json);
    T_ADD(test_grammar_no_tools);
}
