/* gram_schema.c — JSON Schema -> GBNF, for constrained decoding of JSON (response_format
 * json_schema / json_object, text.format) and of tool-call arguments.
 *
 * The subset is what llama.cpp's json-schema-to-grammar covers for these uses: type (one or a
 * list), properties, required, additionalProperties, items, minItems / maxItems, minLength /
 * maxLength, enum, const, anyOf, oneOf, local $ref (#/$defs/NAME, #/definitions/NAME, recursion
 * allowed). Annotations (title, description, default, examples, $schema, $id, $comment,
 * deprecated, readOnly, writeOnly) are ignored. Any other keyword is refused by name: a grammar
 * that silently let through what the schema forbids would break "every output validates".
 *
 * Relaxations, each of which only narrows what is generated (outputs still validate):
 *   - properties are written in the schema's order;
 *   - where the schema lists properties, only those are generated, whatever
 *     additionalProperties says (an object schema without properties and with
 *     additionalProperties a schema is a map of such values; with neither, any object);
 *   - oneOf is generated as anyOf (validating outputs against oneOf's exclusivity is left to
 *     the schema's author: branches that overlap can both match);
 *   - numbers have at most 16 integer and 16 fraction digits, exponents at most 4;
 *   - whitespace is at most one space, or one newline and 20 spaces or tabs, between tokens.
 *
 * Dialect GRAM_GEMMA4 writes values as Gemma 4's tool calls do: {key:value,...} with bare keys,
 * strings between <|"|> marks (holding no '<'), no whitespace. */
#include <jansson.h>
#include <string.h>

#include "text/grammar.h"

typedef struct sconv {
    tok_bytes *out;
    pt_err *err;
    int dialect;
    const char *prefix;
    const json_t *top;
    int n; /* rules generated */
    int failed;
    unsigned prims;    /* PRIM_* bits used */
    char refs[64][96]; /* $ref targets given a rule */
    int n_refs;
    char names[16][128]; /* prim's names, one per primitive (bit i: names[i]) */
} sconv;

enum {
    PRIM_SPACE = 1,
    PRIM_STRING = 2,
    PRIM_CHAR = 4,
    PRIM_NUMBER = 8,
    PRIM_INTEGER = 16,
    PRIM_BOOLEAN = 32,
    PRIM_NULL = 64,
    PRIM_VALUE = 128,
    PRIM_OBJECT = 256,
    PRIM_ARRAY = 512,
    PRIM_INTPART = 1024,
    PRIM_KEY = 2048,
};

static int put(sconv *c, tok_bytes *b, const char *s) {
    if (tok_bytes_append(b, s, strlen(s))) {
        c->failed = 1;
        return pt_errf(c->err, "json schema: out of memory");
    }
    return 0;
}

static int putf(sconv *c, tok_bytes *b, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int putf(sconv *c, tok_bytes *b, const char *fmt, ...) {
    char tmp[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    return put(c, b, tmp);
}

/* A GBNF literal of s[0..n). */
static int put_lit(sconv *c, tok_bytes *b, const char *s, size_t n) {
    if (put(c, b, "\"")) return -1;
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)s[i];
        char e[8];
        if (ch == '"' || ch == '\\')
            snprintf(e, sizeof e, "\\%c", ch);
        else if (ch == '\n')
            snprintf(e, sizeof e, "\\n");
        else if (ch < 0x20 || ch == 0x7F)
            snprintf(e, sizeof e, "\\x%02X", ch);
        else
            e[0] = (char)ch, e[1] = 0;
        if (put(c, b, e)) return -1;
    }
    return put(c, b, "\"");
}

/* The name of primitive `what` (marking it used). */
static const char *prim(sconv *c, unsigned bit, const char *what) {
    c->prims |= bit;
    char *s = c->names[__builtin_ctz(bit)];
    snprintf(s, 128, "%s%s", c->prefix, what);
    return s;
}

static int fail(sconv *c, const char *path, const char *fmt, const char *what) {
    c->failed = 1;
    char m[300];
    snprintf(m, sizeof m, fmt, what);
    return pt_errf(c->err, "json schema: %s (at %s)", m, *path ? path : "/");
}

static int gen(sconv *c, const json_t *s, const char *path, int depth, tok_bytes *expr);

static const char *const k_known[] = {
    "type",      "properties",  "required", "additionalProperties",
    "items",     "minItems",    "maxItems", "minLength",
    "maxLength", "enum",        "const",    "anyOf",
    "oneOf",     "$ref",        "$defs",    "definitions",
    "title",     "description", "default",  "examples",
    "$schema",   "$id",         "$comment", "deprecated",
    "readOnly",  "writeOnly",   NULL};

static int check_keywords(sconv *c, const json_t *s, const char *path) {
    const char *k;
    const json_t *v;
    json_object_foreach((json_t *)s, k, v) {
        int ok = 0;
        for (int i = 0; k_known[i] && !ok; i++)
            ok = !strcmp(k, k_known[i]);
        if (!ok) return fail(c, path, "keyword '%s' is not supported", k);
    }
    return 0;
}

/* A new rule name into nm. */
static void new_rule(sconv *c, char *nm, size_t cap, const char *what) {
    snprintf(nm, cap, "%s%s%d", c->prefix, what, c->n++);
}

static int get_count(sconv *c, const json_t *s, const char *key, const char *path, long *v) {
    const json_t *j = json_object_get(s, key);
    *v = -1;
    if (!j) return 0;
    if (!json_is_integer(j) || json_integer_value(j) < 0 || json_integer_value(j) > 10000)
        return fail(c, path, "'%s' must be an integer in [0, 10000]", key);
    *v = (long)json_integer_value(j);
    return 0;
}

/* A JSON value (enum / const) as a literal. */
static int put_value_lit(sconv *c, tok_bytes *b, const json_t *v, const char *path) {
    if (c->dialect == GRAM_GEMMA4 && json_is_string(v)) {
        return put(c, b, "\"<|\\\"|>\" ") ||
               put_lit(c, b, json_string_value(v), json_string_length(v)) ||
               put(c, b, " \"<|\\\"|>\"");
    }
    if (c->dialect == GRAM_GEMMA4 && (json_is_object(v) || json_is_array(v)))
        return fail(c, path, "%s",
                    "an object or array in enum/const is not supported for Gemma 4 tool calls");
    char *t = json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT);
    if (!t) return fail(c, path, "%s", "an enum/const value that cannot be written");
    int rc = put_lit(c, b, t, strlen(t));
    free(t);
    if (rc ||
        (c->dialect != GRAM_GEMMA4 && (put(c, b, " ") || put(c, b, prim(c, PRIM_SPACE, "space")))))
        return -1;
    return 0;
}

static int gen_string(sconv *c, const json_t *s, const char *path, tok_bytes *e) {
    long mn, mx;
    if (get_count(c, s, "minLength", path, &mn) || get_count(c, s, "maxLength", path, &mx))
        return -1;
    char rep[48] = "*";
    if (mn >= 0 || mx >= 0) {
        if (mx >= 0 && mn > mx) return fail(c, path, "%s", "minLength above maxLength");
        if (mx >= 0)
            snprintf(rep, sizeof rep, "{%ld,%ld}", mn < 0 ? 0 : mn, mx);
        else
            snprintf(rep, sizeof rep, "{%ld,}", mn);
    }
    if (c->dialect == GRAM_GEMMA4) return putf(c, e, "(\"<|\\\"|>\" [^<]%s \"<|\\\"|>\")", rep);
    if (!strcmp(rep, "*")) return put(c, e, prim(c, PRIM_STRING, "string"));
    return putf(c, e, "(\"\\\"\" %s%s \"\\\"\" %s)", prim(c, PRIM_CHAR, "char"), rep,
                prim(c, PRIM_SPACE, "space"));
}

static int gen_array(sconv *c, const json_t *s, const char *path, int depth, tok_bytes *e) {
    long mn, mx;
    if (get_count(c, s, "minItems", path, &mn) || get_count(c, s, "maxItems", path, &mx)) return -1;
    if (mn < 0) mn = 0;
    if (mx >= 0 && mn > mx) return fail(c, path, "%s", "minItems above maxItems");
    const json_t *items = json_object_get(s, "items");
    if (items && !json_is_object(items) && !json_is_boolean(items))
        return fail(c, path, "%s", "'items' must be a schema (tuples are not supported)");
    char nm[128], p2[512];
    new_rule(c, nm, sizeof nm, "arr");
    snprintf(p2, sizeof p2, "%s/items", path);
    tok_bytes item = {0}, r = {0};
    int rc =
        items ? gen(c, items, p2, depth + 1, &item) : put(c, &item, prim(c, PRIM_VALUE, "value"));
    const int js = c->dialect != GRAM_GEMMA4;
    const char *sp = js ? prim(c, PRIM_SPACE, "space") : "";
    rc = rc || putf(c, &r, "%s ::= \"[\" %s ", nm, sp);
    if (!rc && (mx < 0 || mx > 0)) {
        char rep[48];
        if (mx < 0)
            snprintf(rep, sizeof rep, "{%ld,}", mn > 0 ? mn - 1 : 0);
        else
            snprintf(rep, sizeof rep, "{%ld,%ld}", mn > 0 ? mn - 1 : 0, mx - 1);
        rc = put(c, &r, mn > 0 ? "(" : "(") || put(c, &r, item.v) ||
             putf(c, &r, " (\",\" %s %s)%s)%s ", sp, item.v, rep, mn > 0 ? "" : "?");
    }
    rc = rc || putf(c, &r, "\"]\" %s\n", sp) || put(c, c->out, r.v) || put(c, e, nm);
    tok_bytes_free(&item);
    tok_bytes_free(&r);
    return rc ? -1 : 0;
}

static int gen_object(sconv *c, const json_t *s, const char *path, int depth, tok_bytes *e) {
    const json_t *props = json_object_get(s, "properties");
    const json_t *req = json_object_get(s, "required");
    const json_t *add = json_object_get(s, "additionalProperties");
    if (props && !json_is_object(props))
        return fail(c, path, "%s", "'properties' must be an object");
    if (req && !json_is_array(req)) return fail(c, path, "%s", "'required' must be an array");
    if (add && !json_is_object(add) && !json_is_boolean(add))
        return fail(c, path, "%s", "'additionalProperties' must be a boolean or a schema");
    const int js = c->dialect != GRAM_GEMMA4;
    const char *sp = js ? prim(c, PRIM_SPACE, "space") : "";
    /* the properties: declared ones in order, then required names nothing declares */
    size_t np = json_object_size(props), nreq = json_array_size(req);
    if (np + nreq > 4096) return fail(c, path, "%s", "more than 4096 properties");
    const char **keys = calloc(np + nreq + 1, sizeof *keys);
    const json_t **sch = calloc(np + nreq + 1, sizeof *sch);
    int *isreq = calloc(np + nreq + 1, sizeof *isreq);
    size_t n = 0;
    int rc = 0;
    if (!keys || !sch || !isreq) {
        rc = fail(c, path, "%s", "out of memory");
        goto done;
    }
    const char *k;
    const json_t *v;
    json_object_foreach((json_t *)props, k, v) keys[n] = k, sch[n] = v, n++;
    for (size_t i = 0; i < nreq; i++) {
        const char *rk = json_string_value(json_array_get(req, i));
        if (!rk) {
            rc = fail(c, path, "%s", "'required' must list strings");
            goto done;
        }
        size_t j = 0;
        while (j < n && strcmp(keys[j], rk))
            j++;
        if (j == n) keys[n] = rk, sch[n] = NULL, n++;
        isreq[j] = 1;
    }
    char nm[128];
    new_rule(c, nm, sizeof nm, "obj");
    if (n == 0) { /* no properties: a map of additionalProperties' schema, or any object */
        if (add && json_is_false(add)) {
            rc = putf(c, c->out, "%s ::= \"{\" %s \"}\" %s\n", nm, sp, sp) || put(c, e, nm);
            goto done;
        }
        if (!add || json_is_true(add)) {
            rc = put(c, e, prim(c, PRIM_OBJECT, "object"));
            goto done;
        }
        tok_bytes val = {0};
        char p2[512];
        snprintf(p2, sizeof p2, "%s/additionalProperties", path);
        const char *key = js ? prim(c, PRIM_STRING, "string") : prim(c, PRIM_KEY, "key");
        rc = gen(c, add, p2, depth + 1, &val) ||
             putf(c, c->out,
                  "%s ::= \"{\" %s (%s \":\" %s %s (\",\" %s %s \":\" %s %s)*)? \"}\" %s\n", nm, sp,
                  key, sp, val.v, sp, key, sp, val.v, sp) ||
             put(c, e, nm);
        tok_bytes_free(&val);
        goto done;
    }
    /* kv rules, then first_i (nothing written yet) and after_i (something written) chains */
    for (size_t i = 0; i < n && !rc; i++) {
        tok_bytes val = {0}, key = {0};
        char p2[512];
        snprintf(p2, sizeof p2, "%s/properties/%s", path, keys[i]);
        if (sch[i])
            rc = gen(c, sch[i], p2, depth + 1, &val);
        else
            rc = put(c, &val, prim(c, PRIM_VALUE, "value"));
        if (!rc && js) {
            json_t *ks = json_string(keys[i]);
            char *kt = ks ? json_dumps(ks, JSON_ENCODE_ANY) : NULL;
            json_decref(ks);
            rc = !kt ? fail(c, path, "%s", "a property name that is not UTF-8")
                     : put_lit(c, &key, kt, strlen(kt));
            free(kt);
        } else if (!rc)
            rc = put_lit(c, &key, keys[i], strlen(keys[i]));
        rc = rc || putf(c, c->out, "%s-kv%zu ::= %s %s \":\" %s %s\n", nm, i, key.v, sp, sp, val.v);
        tok_bytes_free(&val);
        tok_bytes_free(&key);
    }
    for (size_t i = 0; i <= n && !rc; i++) {
        if (i == n) {
            rc = putf(c, c->out, "%s-a%zu ::= \n%s-f%zu ::= \n", nm, i, nm, i);
            break;
        }
        rc = putf(c, c->out, "%s-a%zu ::= %s\",\" %s %s-kv%zu%s %s-a%zu\n", nm, i,
                  isreq[i] ? "" : "(", sp, nm, i, isreq[i] ? "" : ")?", nm, i + 1) ||
             putf(c, c->out, "%s-f%zu ::= %s-kv%zu %s-a%zu", nm, i, nm, i, nm, i + 1) ||
             (isreq[i] ? put(c, c->out, "\n") : putf(c, c->out, " | %s-f%zu\n", nm, i + 1));
    }
    rc = rc || putf(c, c->out, "%s ::= \"{\" %s %s-f0 \"}\" %s\n", nm, sp, nm, sp) || put(c, e, nm);
done:
    free(keys);
    free(sch);
    free(isreq);
    return rc ? -1 : 0;
}

/* The schema s under one of its types. */
static int gen_typed(sconv *c, const json_t *s, const char *type, const char *path, int depth,
                     tok_bytes *e) {
    if (!strcmp(type, "string")) return gen_string(c, s, path, e);
    if (!strcmp(type, "number")) return put(c, e, prim(c, PRIM_NUMBER, "number"));
    if (!strcmp(type, "integer")) return put(c, e, prim(c, PRIM_INTEGER, "integer"));
    if (!strcmp(type, "boolean")) return put(c, e, prim(c, PRIM_BOOLEAN, "boolean"));
    if (!strcmp(type, "null")) return put(c, e, prim(c, PRIM_NULL, "null"));
    if (!strcmp(type, "object")) return gen_object(c, s, path, depth, e);
    if (!strcmp(type, "array")) return gen_array(c, s, path, depth, e);
    return fail(c, path, "unknown type '%s'", type);
}

static int gen_ref(sconv *c, const char *ref, const char *path, int depth, tok_bytes *e) {
    const char *name = NULL, *where = NULL;
    if (!strncmp(ref, "#/$defs/", 8)) name = ref + 8, where = "$defs";
    if (!strncmp(ref, "#/definitions/", 14)) name = ref + 14, where = "definitions";
    const json_t *target = name ? json_object_get(json_object_get(c->top, where), name) : NULL;
    if (!target)
        return fail(c, path, "$ref '%s' is not a local #/$defs/NAME or #/definitions/NAME", ref);
    char nm[160];
    int k = 0;
    while (k < c->n_refs && strcmp(c->refs[k], ref))
        k++;
    snprintf(nm, sizeof nm, "%sref%d", c->prefix, k);
    if (k < c->n_refs) return put(c, e, nm);
    if (c->n_refs >= 64 || strlen(ref) >= sizeof c->refs[0])
        return fail(c, path, "%s", "more than 64 $ref targets, or a $ref longer than 95 bytes");
    snprintf(c->refs[c->n_refs++], sizeof c->refs[0], "%s", ref);
    tok_bytes body = {0};
    char p2[512];
    snprintf(p2, sizeof p2, "%s", ref + 1);
    int rc = gen(c, target, p2, depth + 1, &body) || putf(c, c->out, "%s ::= ", nm) ||
             put(c, c->out, body.v) || put(c, c->out, "\n") || put(c, e, nm);
    tok_bytes_free(&body);
    return rc ? -1 : 0;
}

static int gen(sconv *c, const json_t *s, const char *path, int depth, tok_bytes *e) {
    if (c->failed) return -1;
    if (depth > 64) return fail(c, path, "%s", "schemas nested deeper than 64");
    if (json_is_true(s)) return put(c, e, prim(c, PRIM_VALUE, "value"));
    if (!json_is_object(s)) return fail(c, path, "%s", "a schema must be an object or true");
    if (check_keywords(c, s, path)) return -1;
    const json_t *j;
    if ((j = json_object_get(s, "$ref"))) {
        if (!json_is_string(j)) return fail(c, path, "%s", "'$ref' must be a string");
        return gen_ref(c, json_string_value(j), path, depth, e);
    }
    if ((j = json_object_get(s, "const")))
        return put(c, e, "(") || put_value_lit(c, e, j, path) || put(c, e, ")");
    if ((j = json_object_get(s, "enum"))) {
        if (!json_is_array(j) || !json_array_size(j))
            return fail(c, path, "%s", "'enum' must be a non-empty array");
        if (put(c, e, "(")) return -1;
        for (size_t i = 0; i < json_array_size(j); i++)
            if ((i && put(c, e, " | ")) || put_value_lit(c, e, json_array_get(j, i), path))
                return -1;
        return put(c, e, ")");
    }
    const json_t *any = json_object_get(s, "anyOf");
    if (!any) any = json_object_get(s, "oneOf");
    if (any) {
        if (!json_is_array(any) || !json_array_size(any))
            return fail(c, path, "%s", "'anyOf' / 'oneOf' must be a non-empty array");
        if (put(c, e, "(")) return -1;
        for (size_t i = 0; i < json_array_size(any); i++) {
            char p2[512];
            snprintf(p2, sizeof p2, "%s/anyOf/%zu", path, i);
            if ((i && put(c, e, " | ")) || gen(c, json_array_get(any, i), p2, depth + 1, e))
                return -1;
        }
        return put(c, e, ")");
    }
    const json_t *t = json_object_get(s, "type");
    if (json_is_string(t)) return gen_typed(c, s, json_string_value(t), path, depth, e);
    if (json_is_array(t) && json_array_size(t)) {
        if (put(c, e, "(")) return -1;
        for (size_t i = 0; i < json_array_size(t); i++) {
            const char *ty = json_string_value(json_array_get(t, i));
            if (!ty) return fail(c, path, "%s", "'type' lists a non-string");
            if ((i && put(c, e, " | ")) || gen_typed(c, s, ty, path, depth, e)) return -1;
        }
        return put(c, e, ")");
    }
    if (t) return fail(c, path, "%s", "'type' must be a string or a non-empty array of strings");
    if (json_object_get(s, "properties") || json_object_get(s, "additionalProperties") ||
        json_object_get(s, "required"))
        return gen_object(c, s, path, depth, e);
    if (json_object_get(s, "items")) return gen_array(c, s, path, depth, e);
    return put(c, e, prim(c, PRIM_VALUE, "value"));
}

/* The primitive rules used (and those they use). */
static int put_prims(sconv *c) {
    const char *P = c->prefix;
    unsigned u = c->prims;
    if (u & PRIM_VALUE)
        u |= PRIM_OBJECT | PRIM_ARRAY | PRIM_STRING | PRIM_NUMBER | PRIM_BOOLEAN | PRIM_NULL;
    if (u & PRIM_OBJECT) u |= c->dialect != GRAM_GEMMA4 ? PRIM_STRING : PRIM_KEY;
    if (u & (PRIM_OBJECT | PRIM_ARRAY))
        u |= PRIM_VALUE | PRIM_OBJECT | PRIM_ARRAY | PRIM_STRING | PRIM_NUMBER | PRIM_BOOLEAN |
             PRIM_NULL;
    if (u & (PRIM_NUMBER | PRIM_INTEGER)) u |= PRIM_INTPART;
    const int js = c->dialect != GRAM_GEMMA4;
    if (js) u |= PRIM_SPACE;
    if (js && (u & PRIM_STRING)) u |= PRIM_CHAR;
    const char *sp = js ? "space" : "nospace";
    if (!js && putf(c, c->out, "%snospace ::= \n", P)) return -1;
    if ((u & PRIM_SPACE) && putf(c, c->out, "%sspace ::= | \" \" | \"\\n\" [ \\t]{0,20}\n", P))
        return -1;
    if ((u & PRIM_CHAR) && putf(c, c->out,
                                "%schar ::= [^\"\\\\%s\\x7F\\x00-\\x1F] | \"\\\\\" ([\"\\\\/bfnrt] "
                                "| \"u\" [0-9a-fA-F]{4})\n",
                                P, c->dialect == GRAM_JSON_TOOL ? "<" : ""))
        return -1;
    if (u & PRIM_STRING) {
        if (js && putf(c, c->out, "%sstring ::= \"\\\"\" %schar* \"\\\"\" %sspace\n", P, P, P))
            return -1;
        if (!js && putf(c, c->out, "%sstring ::= \"<|\\\"|>\" [^<]* \"<|\\\"|>\"\n", P)) return -1;
    }
    if ((u & PRIM_KEY) && putf(c, c->out, "%skey ::= [a-zA-Z0-9_-]+\n", P)) return -1;
    if ((u & PRIM_INTPART) && putf(c, c->out, "%sintpart ::= \"0\" | [1-9] [0-9]{0,15}\n", P))
        return -1;
    if ((u & PRIM_NUMBER) &&
        putf(c, c->out,
             "%snumber ::= \"-\"? %sintpart (\".\" [0-9]{1,16})? ([eE] [-+]? [0-9]{1,4})? %s%s\n",
             P, P, P, sp))
        return -1;
    if ((u & PRIM_INTEGER) && putf(c, c->out, "%sinteger ::= \"-\"? %sintpart %s%s\n", P, P, P, sp))
        return -1;
    if ((u & PRIM_BOOLEAN) &&
        putf(c, c->out, "%sboolean ::= (\"true\" | \"false\") %s%s\n", P, P, sp))
        return -1;
    if ((u & PRIM_NULL) && putf(c, c->out, "%snull ::= \"null\" %s%s\n", P, P, sp)) return -1;
    if ((u & PRIM_VALUE) &&
        putf(c, c->out,
             "%svalue ::= %sobject | %sarray | %sstring | %snumber | %sboolean | %snull\n", P, P, P,
             P, P, P, P))
        return -1;
    if (u & PRIM_OBJECT) {
        const char *key = js ? "string" : "key";
        if (putf(c, c->out,
                 "%sobject ::= \"{\" %s%s (%s%s \":\" %s%s %svalue (\",\" %s%s %s%s \":\" %s%s "
                 "%svalue)*)? \"}\" %s%s\n",
                 P, P, sp, P, key, P, sp, P, P, sp, P, key, P, sp, P, P, sp))
            return -1;
    }
    if ((u & PRIM_ARRAY) &&
        putf(c, c->out, "%sarray ::= \"[\" %s%s (%svalue (\",\" %s%s %svalue)*)? \"]\" %s%s\n", P,
             P, sp, P, P, sp, P, P, sp))
        return -1;
    return 0;
}

int gram_from_json_schema_value(const void *schema, int dialect, const char *prefix, tok_bytes *out,
                                pt_err *err) {
    sconv c = {
        .out = out, .err = err, .dialect = dialect, .prefix = prefix ? prefix : "", .top = schema};
    tok_bytes e = {0};
    int rc = gen(&c, schema, "", 0, &e) || putf(&c, out, "%sroot ::= ", c.prefix) ||
             put(&c, out, e.v) || put(&c, out, "\n") || put_prims(&c);
    tok_bytes_free(&e);
    return rc ? -1 : 0;
}

int gram_from_json_schema(const char *schema, size_t len, int dialect, const char *prefix,
                          tok_bytes *out, pt_err *err) {
    json_error_t je;
    json_t *j = json_loadb(schema, len, 0, &je);
    if (!j)
        return pt_errf(err, "json schema: not JSON: %s (line %d, column %d)", je.text, je.line,
                       je.column);
    int rc = gram_from_json_schema_value(j, dialect, prefix, out, err);
    json_decref(j);
    return rc;
}
