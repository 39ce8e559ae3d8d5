/* grammar.c — GBNF grammars: the parser, the pushdown matcher over code points, and the token
 * masks of constrained decoding (see grammar.h for the syntax and the contract).
 *
 * ===== Representation =====
 * A parsed grammar is one array of elements: each rule's alternatives back to back, each ended
 * by EL_END; an element is a character class (ranges, maybe negated) or a reference to a rule.
 * Repetitions and groups become generated rules (`x*` is `r ::= x r |`, `x?` is `r ::= x |`,
 * `x{2,4}` is `x x o2` with `o2 ::= x o1 |`, `o1 ::= x |`), so the matcher knows only
 * sequences, alternatives and references.
 *
 * ===== Matching =====
 * A position in the grammar is a set of stacks. A stack is a persistent list of nodes (pos,
 * parent): pos is the element to match next, parent the node to continue with once pos's
 * sequence ends (-1: the root's end). Nodes are interned (equal (pos, parent) pairs get one id),
 * so a stack is named by its top node. Expanding a stack follows references (pushing a node for
 * what comes after the reference; none when the reference is its sequence's last element, so
 * right recursion such as `x*` runs in constant depth) and sequence ends (popping) until every
 * top is a character class: those tops are the position's "leaves". Left recursion would expand
 * forever and is refused when the grammar is parsed.
 *
 * A set of leaves plus "the root can end here" is interned too: a state. Advancing a state over
 * a code point keeps the leaves whose class matches, moves past them and expands again; the
 * result is cached per (state, code point) (a table of 128 for ASCII, a hash for the rest). The
 * states and their transitions thus form a DFA built lazily, a few states per distinct place in
 * the grammar (inside a JSON string the state is the same after every ordinary character).
 *
 * ===== Token masks =====
 * The vocabulary's token texts form a byte trie stored in pre-order with each node's subtree
 * end. One linear pass over it keeps the DFA state of every depth: a node's state is its
 * parent's advanced by its byte (a character's bytes accumulate until it is whole, then one
 * transition), and a rejected node skips its whole subtree. Most nodes cost one table lookup.
 * Masks are kept per state in a small cache, so a state met again (the next character of a
 * string, the next digit) costs a copy. The tables grow while a generation meets new states and
 * are rebuilt from the current stacks alone when they pass a bound, so memory stays bounded. */
#include "text/grammar.h"

#include <stdlib.h>
#include <string.h>

#include "text/tok_internal.h"
#include "text/utf8.h"

/* ===== Grammar ===== */

enum { EL_END = 0, EL_CHAR = 1, EL_RULE = 2 };

typedef struct gelem {
    uint8_t type; /* EL_* */
    uint8_t neg;  /* EL_CHAR: the class is negated */
    int32_t a;    /* EL_CHAR: first range in gram.rng; EL_RULE: rule id */
    int32_t b;    /* EL_CHAR: ranges */
} gelem;

#define GRAM_MAX_ELEMS (1 << 22)
#define GRAM_MAX_RULES (1 << 20)
#define GRAM_MAX_REPEAT 10000

typedef struct evec {
    gelem *v;
    size_t n, cap;
} evec;

typedef struct grule {
    char *name;
    int defined;
    const char *where;    /* first reference or the definition: for error positions */
    evec body;            /* while parsing */
    int32_t alt0, n_alts; /* after: alternatives' starts are alt_start[alt0 .. alt0+n_alts) */
} grule;

struct gram {
    gelem *el; /* [n_el] every rule's alternatives, each ended by EL_END */
    size_t n_el;
    uint32_t *rng; /* [n_rng][2] inclusive code-point ranges of the classes */
    size_t n_rng, cap_rng;
    grule *rules; /* [n_rules] */
    int32_t n_rules, cap_rules;
    int32_t *alt_start; /* element index of every alternative */
    int32_t root;
    tok_bytes lits;     /* the literals' UTF-8 text, each followed by a NUL */
    int32_t *name_slot; /* [name_mask+1] rule ids by name hash, -1 empty */
    uint32_t name_mask;
};

typedef struct gparse {
    gram *g;
    const char *s, *p, *end;
    pt_err *err;
    int failed;
    int gen; /* generated rules so far */
} gparse;

static int gp_fail(gparse *ps, const char *at, const char *fmt, const char *detail) {
    if (ps->failed) return -1;
    ps->failed = 1;
    int line = 1, col = 1;
    for (const char *q = ps->s; q < at && q < ps->end; q++) {
        if (*q == '\n')
            line++, col = 1;
        else if (((unsigned char)*q & 0xC0) != 0x80)
            col++;
    }
    char what[200];
    snprintf(what, sizeof what, fmt, detail ? detail : "");
    return pt_errf(ps->err, "grammar: line %d, column %d: %s", line, col, what);
}

static int evec_push(gparse *ps, evec *e, gelem x) {
    if (e->n >= GRAM_MAX_ELEMS) return gp_fail(ps, ps->p, "grammar too large%s", NULL);
    if (pt_grow((void **)&e->v, &e->cap, e->n + 1, sizeof *e->v))
        return gp_fail(ps, ps->p, "out of memory%s", NULL);
    e->v[e->n++] = x;
    return 0;
}

static int32_t add_range(gparse *ps, uint32_t lo, uint32_t hi) {
    gram *g = ps->g;
    if (g->n_rng >= GRAM_MAX_ELEMS) return gp_fail(ps, ps->p, "grammar too large%s", NULL);
    if (pt_grow((void **)&g->rng, &g->cap_rng, 2 * (g->n_rng + 1), sizeof *g->rng))
        return gp_fail(ps, ps->p, "out of memory%s", NULL);
    g->rng[2 * g->n_rng] = lo;
    g->rng[2 * g->n_rng + 1] = hi;
    return (int32_t)g->n_rng++;
}

static uint32_t name_hash(const char *s, size_t n) {
    return (uint32_t)tok_hash_bytes(s, n);
}

/* The id of rule name[0..n), created undefined when new; -1 on failure. */
static int32_t rule_id(gparse *ps, const char *name, size_t n, const char *where) {
    gram *g = ps->g;
    if (g->n_rules * 2 >= (int32_t)g->name_mask) {
        uint32_t nm = g->name_mask ? g->name_mask * 2 + 1 : 255;
        int32_t *ns = malloc(((size_t)nm + 1) * sizeof *ns);
        if (!ns) return gp_fail(ps, where, "out of memory%s", NULL);
        memset(ns, 0xff, ((size_t)nm + 1) * sizeof *ns);
        for (int32_t r = 0; r < g->n_rules; r++) {
            uint32_t h = name_hash(g->rules[r].name, strlen(g->rules[r].name)) & nm;
            while (ns[h] >= 0)
                h = (h + 1) & nm;
            ns[h] = r;
        }
        free(g->name_slot);
        g->name_slot = ns, g->name_mask = nm;
    }
    uint32_t h = name_hash(name, n) & g->name_mask;
    while (g->name_slot[h] >= 0) {
        const char *rn = g->rules[g->name_slot[h]].name;
        if (strlen(rn) == n && !memcmp(rn, name, n)) return g->name_slot[h];
        h = (h + 1) & g->name_mask;
    }
    if (g->n_rules >= GRAM_MAX_RULES) return gp_fail(ps, where, "too many rules%s", NULL);
    size_t cap = (size_t)g->cap_rules;
    if (pt_grow((void **)&g->rules, &cap, (size_t)g->n_rules + 1, sizeof *g->rules))
        return gp_fail(ps, where, "out of memory%s", NULL);
    g->cap_rules = (int32_t)cap;
    grule *r = &g->rules[g->n_rules];
    memset(r, 0, sizeof *r);
    r->name = malloc(n + 1);
    if (!r->name) return gp_fail(ps, where, "out of memory%s", NULL);
    memcpy(r->name, name, n);
    r->name[n] = 0;
    r->where = where;
    g->name_slot[h] = g->n_rules;
    return g->n_rules++;
}

/* A new rule for a group or a repetition, named after its parent (with a character a grammar's
 * own names cannot hold). */
static int32_t gen_rule(gparse *ps, const char *where) {
    char nm[48];
    int n = snprintf(nm, sizeof nm, "~%d", ps->gen++);
    return rule_id(ps, nm, (size_t)n, where);
}

static int is_word(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
           c == '_' || c == '.';
}

static void skip_space(gparse *ps, int newline_ok) {
    while (ps->p < ps->end) {
        char c = *ps->p;
        if (c == ' ' || c == '\t' || ((c == '\n' || c == '\r') && newline_ok))
            ps->p++;
        else if (c == '#') {
            while (ps->p < ps->end && *ps->p != '\n' && *ps->p != '\r')
                ps->p++;
        } else
            break;
    }
}

/* One UTF-8 code point of the grammar text; -1 when malformed. */
static long utf8_cp(gparse *ps) {
    const unsigned char *p = (const unsigned char *)ps->p, *e = (const unsigned char *)ps->end;
    unsigned c = p[0];
    int n = c < 0x80             ? 1
            : (c & 0xE0) == 0xC0 ? 2
            : (c & 0xF0) == 0xE0 ? 3
            : (c & 0xF8) == 0xF0 ? 4
                                 : 0;
    if (!n || (long)(e - p) < n) return -1;
    uint32_t cp = n == 1 ? c : n == 2 ? c & 0x1F : n == 3 ? c & 0x0F : c & 0x07;
    for (int i = 1; i < n; i++) {
        if ((p[i] & 0xC0) != 0x80) return -1;
        cp = cp << 6 | (p[i] & 0x3F);
    }
    static const uint32_t min[5] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < min[n] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return -1;
    ps->p += n;
    return (long)cp;
}

static int hexval(char c) {
    return c >= '0' && c <= '9'   ? c - '0'
           : c >= 'a' && c <= 'f' ? c - 'a' + 10
           : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                  : -1;
}

/* A character of a literal or class, escapes included; -1 after an error. */
static long parse_char(gparse *ps) {
    const char *at = ps->p;
    if (ps->p >= ps->end) return gp_fail(ps, at, "unexpected end of the grammar%s", NULL);
    if (*ps->p != '\\') {
        long cp = utf8_cp(ps);
        return cp < 0 ? gp_fail(ps, at, "invalid UTF-8%s", NULL) : cp;
    }
    if (ps->end - ps->p < 2) return gp_fail(ps, at, "unfinished escape%s", NULL);
    char c = ps->p[1];
    ps->p += 2;
    int digits = c == 'x' ? 2 : c == 'u' ? 4 : c == 'U' ? 8 : 0;
    if (digits) {
        uint32_t v = 0;
        for (int i = 0; i < digits; i++) {
            int h = ps->p < ps->end ? hexval(*ps->p) : -1;
            if (h < 0)
                return gp_fail(ps, at, "expected %s hexadecimal digits",
                               c == 'x'   ? "2"
                               : c == 'u' ? "4"
                                          : "8");
            v = v << 4 | (uint32_t)h;
            ps->p++;
        }
        if (v > 0x10FFFF) return gp_fail(ps, at, "code point past U+10FFFF%s", NULL);
        return (long)v;
    }
    switch (c) {
    case 'n': return '\n';
    case 'r': return '\r';
    case 't': return '\t';
    case '\\':
    case '"':
    case '[':
    case ']':
    case '-':
    case '/':
    case '^': return c;
    default: return gp_fail(ps, at, "unknown escape%s", NULL);
    }
}

static int parse_alternates(gparse *ps, evec *out, int nested, int depth);

/* The element(s) out[start..n) repeated per the operator at ps->p. */
static int repeat(gparse *ps, const char *at, evec *out, size_t start, long min, long max) {
    if (start >= out->n) return gp_fail(ps, at, "a repetition needs an element before it%s", NULL);
    gelem x;
    if (out->n - start == 1)
        x = out->v[start];
    else { /* several: a rule for the group */
        int32_t r = gen_rule(ps, at);
        if (r < 0) return -1;
        grule *gr = &ps->g->rules[r];
        for (size_t i = start; i < out->n; i++)
            if (evec_push(ps, &gr->body, out->v[i])) return -1;
        if (evec_push(ps, &gr->body, (gelem){.type = EL_END})) return -1;
        gr->defined = 1;
        x = (gelem){.type = EL_RULE, .a = r};
    }
    out->n = start;
    for (long i = 0; i < min; i++)
        if (evec_push(ps, out, x)) return -1;
    if (max < 0) { /* star: r ::= x r | */
        int32_t r = gen_rule(ps, at);
        if (r < 0) return -1;
        evec *b = &ps->g->rules[r].body;
        if (evec_push(ps, b, x) || evec_push(ps, b, (gelem){.type = EL_RULE, .a = r}) ||
            evec_push(ps, b, (gelem){.type = EL_END}) || evec_push(ps, b, (gelem){.type = EL_END}))
            return -1;
        ps->g->rules[r].defined = 1;
        return evec_push(ps, out, (gelem){.type = EL_RULE, .a = r});
    }
    int32_t inner = -1; /* o_k ::= x o_{k-1} | */
    for (long k = 0; k < max - min; k++) {
        int32_t r = gen_rule(ps, at);
        if (r < 0) return -1;
        evec *b = &ps->g->rules[r].body;
        if (evec_push(ps, b, x) ||
            (inner >= 0 && evec_push(ps, b, (gelem){.type = EL_RULE, .a = inner})) ||
            evec_push(ps, b, (gelem){.type = EL_END}) || evec_push(ps, b, (gelem){.type = EL_END}))
            return -1;
        ps->g->rules[r].defined = 1;
        inner = r;
    }
    return inner >= 0 ? evec_push(ps, out, (gelem){.type = EL_RULE, .a = inner}) : 0;
}

static long parse_int(gparse *ps) {
    long v = -1;
    while (ps->p < ps->end && *ps->p >= '0' && *ps->p <= '9') {
        v = (v < 0 ? 0 : v) * 10 + (*ps->p - '0');
        if (v > GRAM_MAX_REPEAT) return -2;
        ps->p++;
    }
    return v;
}

static int parse_sequence(gparse *ps, evec *out, int nested, int depth) {
    size_t last = out->n; /* where the last element began */
    for (;;) {
        skip_space(ps, nested);
        if (ps->p >= ps->end) return 0;
        const char *at = ps->p;
        char c = *ps->p;
        if (c == '"') {
            last = out->n;
            ps->p++;
            size_t lit0 = ps->g->lits.n;
            while (ps->p < ps->end && *ps->p != '"') {
                const char *c0 = ps->p;
                long cp = parse_char(ps);
                if (cp < 0) return -1;
                int32_t r = add_range(ps, (uint32_t)cp, (uint32_t)cp);
                if (r < 0 || evec_push(ps, out, (gelem){.type = EL_CHAR, .a = r, .b = 1}))
                    return -1;
                unsigned char u[4];
                int un = utf8_encode((uint32_t)cp, u);
                if (*c0 == '\\' && tok_bytes_append(&ps->g->lits, u, (size_t)un))
                    return gp_fail(ps, at, "out of memory%s", NULL);
                if (*c0 != '\\' && tok_bytes_append(&ps->g->lits, c0, (size_t)(ps->p - c0)))
                    return gp_fail(ps, at, "out of memory%s", NULL);
            }
            if (ps->p >= ps->end) return gp_fail(ps, at, "unterminated literal%s", NULL);
            ps->p++;
            if (ps->g->lits.n > lit0 && tok_bytes_append(&ps->g->lits, "", 1))
                return gp_fail(ps, at, "out of memory%s", NULL);
        } else if (c == '[') {
            last = out->n;
            ps->p++;
            int neg = ps->p < ps->end && *ps->p == '^';
            if (neg) ps->p++;
            int32_t first = (int32_t)ps->g->n_rng, n = 0;
            while (ps->p < ps->end && *ps->p != ']') {
                long lo = parse_char(ps), hi = lo;
                if (lo < 0) return -1;
                if (ps->end - ps->p >= 2 && ps->p[0] == '-' && ps->p[1] != ']') {
                    ps->p++;
                    hi = parse_char(ps);
                    if (hi < 0) return -1;
                    if (hi < lo) return gp_fail(ps, at, "a range ends below its start%s", NULL);
                }
                if (add_range(ps, (uint32_t)lo, (uint32_t)hi) < 0) return -1;
                n++;
            }
            if (ps->p >= ps->end) return gp_fail(ps, at, "unterminated character class%s", NULL);
            ps->p++;
            if (evec_push(ps, out,
                          (gelem){.type = EL_CHAR, .neg = (uint8_t)neg, .a = first, .b = n}))
                return -1;
        } else if (c == '.') {
            last = out->n;
            ps->p++;
            if (evec_push(ps, out, (gelem){.type = EL_CHAR, .neg = 1, .a = 0, .b = 0})) return -1;
        } else if (is_word(c)) {
            last = out->n;
            const char *s = ps->p;
            while (ps->p < ps->end && is_word(*ps->p))
                ps->p++;
            int32_t r = rule_id(ps, s, (size_t)(ps->p - s), s);
            if (r < 0 || evec_push(ps, out, (gelem){.type = EL_RULE, .a = r})) return -1;
        } else if (c == '(') {
            last = out->n;
            if (depth > 200) return gp_fail(ps, at, "groups nested too deep%s", NULL);
            ps->p++;
            int32_t r = gen_rule(ps, at);
            if (r < 0) return -1;
            evec body = {0};
            if (parse_alternates(ps, &body, 1, depth + 1)) {
                free(body.v);
                return -1;
            }
            ps->g->rules[r].body = body;
            ps->g->rules[r].defined = 1;
            skip_space(ps, 1);
            if (ps->p >= ps->end || *ps->p != ')') return gp_fail(ps, at, "unclosed '('%s", NULL);
            ps->p++;
            if (evec_push(ps, out, (gelem){.type = EL_RULE, .a = r})) return -1;
        } else if (c == '*' || c == '+' || c == '?') {
            ps->p++;
            if (repeat(ps, at, out, last, c == '+' ? 1 : 0, c == '?' ? 1 : -1)) return -1;
        } else if (c == '{') {
            ps->p++;
            skip_space(ps, 0);
            long mn = parse_int(ps), mx;
            skip_space(ps, 0);
            if (mn == -2) return gp_fail(ps, at, "repetition count above 10000%s", NULL);
            if (ps->p < ps->end && *ps->p == ',') {
                ps->p++;
                skip_space(ps, 0);
                mx = parse_int(ps);
                if (mx == -2) return gp_fail(ps, at, "repetition count above 10000%s", NULL);
                if (mn < 0) mn = 0;
            } else {
                if (mn < 0) return gp_fail(ps, at, "expected a number after '{'%s", NULL);
                mx = mn;
            }
            skip_space(ps, 0);
            if (ps->p >= ps->end || *ps->p != '}') return gp_fail(ps, at, "expected '}'%s", NULL);
            ps->p++;
            if (mx >= 0 && mx < mn) return gp_fail(ps, at, "{m,n} with n below m%s", NULL);
            if (repeat(ps, at, out, last, mn, mx)) return -1;
        } else
            return 0;
    }
}

static int parse_alternates(gparse *ps, evec *out, int nested, int depth) {
    for (;;) {
        if (parse_sequence(ps, out, nested, depth) || evec_push(ps, out, (gelem){.type = EL_END}))
            return -1;
        skip_space(ps, nested);
        if (!nested && ps->p < ps->end && (*ps->p == '\n' || *ps->p == '\r')) {
            /* a top-level rule may go on with '|' at the start of its next line */
            const char *save = ps->p;
            skip_space(ps, 1);
            if (ps->p >= ps->end || *ps->p != '|') {
                ps->p = save;
                return 0;
            }
        }
        if (ps->p >= ps->end || *ps->p != '|') return 0;
        ps->p++;
        skip_space(ps, 1);
    }
}

/* Nullable rules, then refuse left recursion (a rule reachable from itself through references
 * that only nullable elements precede). */
static int check_left_recursion(gparse *ps) {
    gram *g = ps->g;
    int32_t R = g->n_rules;
    uint8_t *nul = calloc((size_t)R, 1), *color = calloc((size_t)R, 1);
    int32_t *stk = malloc((size_t)R * 2 * sizeof *stk);
    int rc = 0;
    if (!nul || !color || !stk) {
        rc = gp_fail(ps, ps->s, "out of memory%s", NULL);
        goto done;
    }
    for (int changed = 1; changed;) {
        changed = 0;
        for (int32_t r = 0; r < R; r++) {
            if (nul[r]) continue;
            for (int32_t a = 0; a < g->rules[r].n_alts && !nul[r]; a++) {
                int all = 1;
                for (const gelem *e = &g->el[g->alt_start[g->rules[r].alt0 + a]]; e->type != EL_END;
                     e++)
                    if (e->type == EL_CHAR || !nul[e->a]) {
                        all = 0;
                        break;
                    }
                if (all) nul[r] = 1, changed = 1;
            }
        }
    }
    /* iterative DFS over the left-corner edges; stk holds (rule, next alternative index) */
    for (int32_t r0 = 0; r0 < R && !rc; r0++) {
        if (color[r0]) continue;
        int32_t sp = 0;
        stk[sp++] = r0, stk[sp++] = 0;
        color[r0] = 1;
        while (sp && !rc) {
            int32_t r = stk[sp - 2], k = stk[sp - 1];
            /* k enumerates the left-corner references of r: walk alternatives in order */
            int32_t found = -1, idx = 0;
            for (int32_t a = 0; a < g->rules[r].n_alts && found < 0; a++)
                for (const gelem *e = &g->el[g->alt_start[g->rules[r].alt0 + a]];
                     e->type == EL_RULE; e++) {
                    if (idx++ == k) {
                        found = e->a;
                        break;
                    }
                    if (!nul[e->a]) break;
                }
            if (found < 0) {
                color[r] = 2;
                sp -= 2;
                continue;
            }
            stk[sp - 1] = k + 1;
            if (color[found] == 1) {
                int32_t named = found; /* name a rule the grammar wrote, not a generated one */
                for (int32_t i = sp - 2; i >= 0 && g->rules[named].name[0] == '~'; i -= 2)
                    named = stk[i];
                rc = gp_fail(ps, g->rules[named].where, "rule '%s' is left-recursive",
                             g->rules[named].name);
            } else if (!color[found]) {
                color[found] = 1;
                stk[sp++] = found, stk[sp++] = 0;
            }
        }
    }
done:
    free(nul);
    free(color);
    free(stk);
    return rc;
}

gram *gram_parse(const char *text, size_t len, pt_err *err) {
    gram *g = calloc(1, sizeof *g);
    if (!g) return pt_errf(err, "grammar: out of memory"), NULL;
    gparse ps = {.g = g, .s = text, .p = text, .end = text + len, .err = err};
    g->root = -1;
    /* the class `.` is negated with no ranges: range 0 is a placeholder so a = 0 is valid */
    if (add_range(&ps, 1, 0) < 0) goto fail;
    skip_space(&ps, 1);
    while (ps.p < ps.end) {
        const char *at = ps.p;
        while (ps.p < ps.end && is_word(*ps.p))
            ps.p++;
        if (ps.p == at) {
            gp_fail(&ps, at, "expected a rule name%s", NULL);
            goto fail;
        }
        int32_t r = rule_id(&ps, at, (size_t)(ps.p - at), at);
        if (r < 0) goto fail;
        skip_space(&ps, 0);
        if (ps.end - ps.p < 3 || memcmp(ps.p, "::=", 3)) {
            gp_fail(&ps, ps.p, "expected '::=' after the rule name%s", NULL);
            goto fail;
        }
        if (g->rules[r].defined) {
            gp_fail(&ps, at, "rule '%s' is defined twice", g->rules[r].name);
            goto fail;
        }
        g->rules[r].defined = 1;
        g->rules[r].where = at;
        ps.p += 3;
        skip_space(&ps, 0);
        const char *body_at = ps.p;
        skip_space(&ps, 1); /* a body may start on the next line, unless a rule starts there */
        const char *q = ps.p;
        while (q < ps.end && is_word(*q))
            q++;
        while (q < ps.end && (*q == ' ' || *q == '\t'))
            q++;
        if (q > ps.p && ps.end - q >= 3 && !memcmp(q, "::=", 3)) ps.p = body_at;
        evec body = {0};
        if (parse_alternates(&ps, &body, 0, 0)) {
            free(body.v);
            goto fail;
        }
        g->rules[r].body = body;
        skip_space(&ps, 0);
        if (ps.p < ps.end && *ps.p != '\n' && *ps.p != '\r') {
            gp_fail(&ps, ps.p, "unexpected character '%s'", (char[2]){*ps.p, 0});
            goto fail;
        }
        skip_space(&ps, 1);
    }
    for (int32_t r = 0; r < g->n_rules; r++)
        if (!g->rules[r].defined) {
            gp_fail(&ps, g->rules[r].where, "undefined rule '%s'", g->rules[r].name);
            goto fail;
        }
    g->root = -1;
    for (int32_t r = 0; r < g->n_rules; r++)
        if (!strcmp(g->rules[r].name, "root")) g->root = r;
    if (g->root < 0) {
        gp_fail(&ps, ps.end, "no rule named 'root'%s", NULL);
        goto fail;
    }
    /* flatten the bodies into one element array */
    size_t total = 0, alts = 0;
    for (int32_t r = 0; r < g->n_rules; r++) {
        total += g->rules[r].body.n;
        for (size_t i = 0; i < g->rules[r].body.n; i++)
            alts += g->rules[r].body.v[i].type == EL_END;
    }
    g->el = malloc((total + 1) * sizeof *g->el);
    g->alt_start = malloc((alts + 1) * sizeof *g->alt_start);
    if (!g->el || !g->alt_start) {
        gp_fail(&ps, ps.s, "out of memory%s", NULL);
        goto fail;
    }
    size_t ne = 0, na = 0;
    for (int32_t r = 0; r < g->n_rules; r++) {
        grule *gr = &g->rules[r];
        gr->alt0 = (int32_t)na;
        for (size_t i = 0; i < gr->body.n; i++) {
            if (i == 0 || gr->body.v[i - 1].type == EL_END) g->alt_start[na++] = (int32_t)(ne + i);
        }
        gr->n_alts = (int32_t)na - gr->alt0;
        memcpy(g->el + ne, gr->body.v, gr->body.n * sizeof *g->el);
        ne += gr->body.n;
        free(gr->body.v);
        gr->body = (evec){0};
    }
    g->el[ne] = (gelem){.type = EL_END};
    g->n_el = ne;
    if (check_left_recursion(&ps)) goto fail;
    return g;
fail:
    gram_free(g);
    return NULL;
}

void gram_free(gram *g) {
    if (!g) return;
    for (int32_t r = 0; r < g->n_rules; r++) {
        free(g->rules[r].name);
        free(g->rules[r].body.v);
    }
    free(g->rules);
    free(g->el);
    free(g->rng);
    free(g->alt_start);
    free(g->name_slot);
    tok_bytes_free(&g->lits);
    free(g);
}

int gram_n_rules(const gram *g) {
    return g->n_rules;
}

static int class_has(const gram *g, const gelem *e, uint32_t cp) {
    const uint32_t *r = g->rng + 2 * (size_t)e->a;
    int in = 0;
    for (int32_t i = 0; i < e->b && !in; i++)
        in = cp >= r[2 * i] && cp <= r[2 * i + 1];
    return in != e->neg;
}

/* Whether the class holds some code point of [lo, hi]. */
static int class_meets(const gram *g, const gelem *e, uint32_t lo, uint32_t hi) {
    const uint32_t *r = g->rng + 2 * (size_t)e->a;
    if (!e->neg) {
        for (int32_t i = 0; i < e->b; i++)
            if (r[2 * i] <= hi && r[2 * i + 1] >= lo) return 1;
        return 0;
    }
    for (uint32_t x = lo;;) { /* the first point of [x, hi] no range covers */
        int moved = 0;
        for (int32_t i = 0; i < e->b; i++)
            if (r[2 * i] <= x && r[2 * i + 1] >= x) {
                if (r[2 * i + 1] >= hi) return 0;
                x = r[2 * i + 1] + 1, moved = 1;
            }
        if (!moved) return 1;
    }
}

/* ===== Vocabulary trie ===== */

struct gram_vocab {
    int32_t n_vocab;
    int32_t n_nodes;    /* node 0 is the root (the empty prefix) */
    uint8_t *byte;      /* [n_nodes] the byte of the edge into the node */
    uint16_t *depth;    /* [n_nodes] bytes from the root */
    int32_t *end;       /* [n_nodes] one past the node's subtree (pre-order) */
    int32_t *tok_first; /* [n_nodes] first token whose text ends here, -1 */
    int32_t *tok_next;  /* [n_vocab] next token with the same text, -1 */
    int max_depth;
    int32_t *spec; /* [n_spec] control tokens (not EOG) with a rendered text */
    int32_t n_spec;
    int32_t *eog; /* [n_eog] end-of-generation tokens */
    int32_t n_eog;
    const tok_vocab *v;
};

#define GRAM_MAX_TOKEN 1024 /* bytes; a longer token is never allowed */

static int cmp_piece(const void *a, const void *b, void *ud) {
    const tok_vocab *v = ud;
    size_t la, lb;
    const char *pa = tok_piece(v, *(const int32_t *)a, 0, &la);
    const char *pb = tok_piece(v, *(const int32_t *)b, 0, &lb);
    int c = memcmp(pa, pb, la < lb ? la : lb);
    if (c) return c;
    return la < lb   ? -1
           : la > lb ? 1
                     : (*(const int32_t *)a > *(const int32_t *)b) -
                           (*(const int32_t *)a < *(const int32_t *)b);
}

gram_vocab *gram_vocab_new(const tok_vocab *v, pt_err *err) {
    const int32_t N = tok_n_vocab(v);
    gram_vocab *gv = calloc(1, sizeof *gv);
    int32_t *ids = malloc(((size_t)N + 1) * sizeof *ids);
    if (!gv || !ids) goto oom;
    gv->v = v;
    gv->n_vocab = N;
    gv->tok_next = malloc(((size_t)N + 1) * sizeof *gv->tok_next);
    gv->spec = malloc(((size_t)N + 1) * sizeof *gv->spec);
    gv->eog = malloc(((size_t)N + 1) * sizeof *gv->eog);
    if (!gv->tok_next || !gv->spec || !gv->eog) goto oom;
    int32_t n = 0;
    size_t bytes = 0;
    for (int32_t t = 0; t < N; t++) {
        gv->tok_next[t] = -1;
        int attr = tok_attr(v, t);
        size_t len;
        if (tok_is_eog(v, t)) {
            gv->eog[gv->n_eog++] = t;
            continue;
        }
        if (attr & (TOK_ATTR_UNKNOWN | TOK_ATTR_UNUSED)) continue;
        if (attr & TOK_ATTR_CONTROL) {
            if (tok_piece(v, t, TOK_RENDER_SPECIAL, &len) && len) gv->spec[gv->n_spec++] = t;
            continue;
        }
        if (!tok_piece(v, t, 0, &len) || !len || len > GRAM_MAX_TOKEN) continue;
        ids[n++] = t;
        bytes += len;
    }
    qsort_r(ids, (size_t)n, sizeof *ids, cmp_piece, (void *)v);
    size_t cap = bytes + 1; /* an upper bound on the nodes */
    gv->byte = malloc(cap);
    gv->depth = malloc(cap * sizeof *gv->depth);
    gv->end = malloc(cap * sizeof *gv->end);
    gv->tok_first = malloc(cap * sizeof *gv->tok_first);
    int32_t path[GRAM_MAX_TOKEN + 1];
    if (!gv->byte || !gv->depth || !gv->end || !gv->tok_first) goto oom;
    gv->byte[0] = 0, gv->depth[0] = 0, gv->tok_first[0] = -1;
    gv->n_nodes = 1;
    path[0] = 0;
    int plen = 0; /* depth of the path's last node */
    const char *prev = "";
    size_t prev_len = 0;
    int32_t last_tok_at = -1, last_tok = -1;
    for (int32_t i = 0; i < n; i++) {
        size_t len;
        const char *p = tok_piece(v, ids[i], 0, &len);
        size_t common = 0;
        while (common < len && common < prev_len && common < (size_t)plen &&
               p[common] == prev[common])
            common++;
        while (plen > (int)common)
            gv->end[path[plen--]] = gv->n_nodes;
        for (size_t k = common; k < len; k++) {
            int32_t nd = gv->n_nodes++;
            gv->byte[nd] = (uint8_t)p[k];
            gv->depth[nd] = (uint16_t)(k + 1);
            gv->tok_first[nd] = -1;
            path[++plen] = nd;
        }
        int32_t at = path[plen];
        if (at == last_tok_at)
            gv->tok_next[last_tok] = ids[i]; /* same text as the token before */
        else
            gv->tok_first[at] = ids[i];
        last_tok_at = at, last_tok = ids[i];
        if ((int)len > gv->max_depth) gv->max_depth = (int)len;
        prev = p, prev_len = len;
    }
    while (plen > 0)
        gv->end[path[plen--]] = gv->n_nodes;
    gv->end[0] = gv->n_nodes;
    free(ids);
    return gv;
oom:
    free(ids);
    gram_vocab_free(gv);
    return pt_errf(err, "grammar: out of memory for the token trie of %d tokens", N), NULL;
}

void gram_vocab_free(gram_vocab *gv) {
    if (!gv) return;
    free(gv->byte);
    free(gv->depth);
    free(gv->end);
    free(gv->tok_first);
    free(gv->tok_next);
    free(gv->spec);
    free(gv->eog);
    free(gv);
}

int gram_vocab_n_nodes(const gram_vocab *gv) {
    return gv->n_nodes;
}

int gram_vocab_n_vocab(const gram_vocab *gv) {
    return gv->n_vocab;
}

/* ===== Matcher ===== */

#define DEAD (-1)
#define UNKNOWN (-2)
#define MAX_STATES (1 << 14) /* past these, the tables are rebuilt from the current state */
#define MAX_NODES (1 << 21)
#define MASK_CACHE 64

/* A character left half by a token: its bytes so far and how many more it needs. */
typedef struct gpend {
    uint32_t acc;  /* the code point's bits so far */
    uint8_t need;  /* continuation bytes still expected (0: none pending) */
    uint8_t len;   /* the sequence's whole length */
    uint8_t first; /* its lead byte */
} gpend;

struct gram_match {
    const gram *g;
    const gram_vocab *gv;
    /* stack nodes (pos, parent), interned */
    int32_t *npos, *npar;
    uint32_t *nmark; /* [cap] expansion epoch that visited the node */
    size_t n_nodes, cap_nodes;
    int32_t *nslot; /* [nmask+1] open addressing, -1 empty */
    uint32_t nmask;
    uint32_t epoch;
    long budget; /* expansion steps left in this transition (GRAM_STEP_BUDGET) */
    /* states: leaves[soff[s] .. soff[s]+slen[s]) sorted, sacc[s] the root can end */
    size_t *soff;
    int32_t *slen;
    uint8_t *sacc;
    uint8_t *suni; /* [n_states] every leaf class treats all code points >= 0x80 alike */
    int32_t *shi;  /* [n_states] the transition over any code point >= 0x80 when suni */
    size_t n_states, cap_states;
    int32_t *leaves;
    size_t n_leaves, cap_leaves;
    int32_t *sslot;
    uint32_t smask;
    int32_t *ascii; /* [cap_states][128] transitions, UNKNOWN / DEAD / a state */
    size_t cap_ascii;
    uint64_t *tkey; /* (state << 32 | code point) + 1 of non-ASCII transitions; 0 empty */
    int32_t *tval;
    size_t tn;
    uint32_t tmask;
    /* expansion scratch */
    int32_t *work; /* pairs (pos, parent) */
    size_t n_work, cap_work;
    int32_t *tmp; /* leaves of the state being built */
    size_t n_tmp, cap_tmp;
    int tmp_acc;
    /* where the generation is */
    int32_t start, cur;
    gpend pend;
    /* masks */
    int32_t *spec; /* [n_spec] the vocabulary's control tokens this grammar's literals hold */
    int32_t n_spec;
    size_t n_words;  /* words of a mask */
    uint64_t *masks; /* [MASK_CACHE][n_words] */
    int32_t mkey_state[MASK_CACHE];
    gpend mkey_pend[MASK_CACHE];
    int mkey_n[MASK_CACHE]; /* allowed tokens; -1: empty slot */
    int next_slot;
    int32_t *dstate; /* [max_depth+1] the walk's state per depth */
    gpend *dpend;    /* [max_depth+1] */
    int oom;
};

static int grow(void **p, size_t *cap, size_t need, size_t elem, int *oom) {
    if (need <= *cap) return 0;
    if (pt_grow(p, cap, need, elem)) {
        *oom = 1;
        return -1;
    }
    return 0;
}

static uint32_t mix32(uint64_t x) {
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    return (uint32_t)x;
}

static int rehash_nodes(gram_match *m, uint32_t mask) {
    int32_t *ns = malloc(((size_t)mask + 1) * sizeof *ns);
    if (!ns) return m->oom = 1, -1;
    memset(ns, 0xff, ((size_t)mask + 1) * sizeof *ns);
    for (size_t i = 0; i < m->n_nodes; i++) {
        uint32_t h = mix32((uint64_t)(uint32_t)m->npos[i] << 32 | (uint32_t)m->npar[i]) & mask;
        while (ns[h] >= 0)
            h = (h + 1) & mask;
        ns[h] = (int32_t)i;
    }
    free(m->nslot);
    m->nslot = ns, m->nmask = mask;
    return 0;
}

/* The node (pos, par); -1 on out of memory. */
static int32_t node_of(gram_match *m, int32_t pos, int32_t par) {
    if (m->n_nodes * 2 >= m->nmask && rehash_nodes(m, m->nmask * 2 + 1)) return -1;
    uint32_t h = mix32((uint64_t)(uint32_t)pos << 32 | (uint32_t)par) & m->nmask;
    for (int32_t id; (id = m->nslot[h]) >= 0; h = (h + 1) & m->nmask)
        if (m->npos[id] == pos && m->npar[id] == par) return id;
    size_t c1 = m->cap_nodes, c2 = m->cap_nodes, c3 = m->cap_nodes;
    if (grow((void **)&m->npos, &c1, m->n_nodes + 1, sizeof *m->npos, &m->oom) ||
        grow((void **)&m->npar, &c2, m->n_nodes + 1, sizeof *m->npar, &m->oom) ||
        grow((void **)&m->nmark, &c3, m->n_nodes + 1, sizeof *m->nmark, &m->oom))
        return -1;
    m->cap_nodes = c1 < c2 ? (c1 < c3 ? c1 : c3) : (c2 < c3 ? c2 : c3);
    int32_t id = (int32_t)m->n_nodes++;
    m->npos[id] = pos, m->npar[id] = par, m->nmark[id] = 0;
    m->nslot[h] = id;
    return id;
}

/* Expansion steps one transition may take. Stacked repetitions of ambiguous alternatives
 * ("(a | b)++++...") make the stacks of one position grow without bound; past this the
 * transition fails like an allocation would, so a hostile grammar costs bounded time per
 * character instead of hanging the request. Real grammars need a few thousand. */
#define GRAM_STEP_BUDGET 100000L

static void expand_begin(gram_match *m) {
    if (++m->epoch == 0) { /* wrapped: forget every mark */
        memset(m->nmark, 0, m->n_nodes * sizeof *m->nmark);
        m->epoch = 1;
    }
    m->n_work = m->n_tmp = 0;
    m->tmp_acc = 0;
    m->budget = GRAM_STEP_BUDGET;
}

static int expand_push(gram_match *m, int32_t pos, int32_t par) {
    if (grow((void **)&m->work, &m->cap_work, m->n_work + 2, sizeof *m->work, &m->oom)) return -1;
    m->work[m->n_work++] = pos;
    m->work[m->n_work++] = par;
    return 0;
}

/* Expand the pushed (pos, parent) pairs until every stack's top is a character class. */
static int expand_run(gram_match *m) {
    const gram *g = m->g;
    while (m->n_work) {
        int32_t par = m->work[--m->n_work], pos = m->work[--m->n_work];
        for (;;) {
            if (--m->budget < 0) return -1;
            const gelem *e = &g->el[pos];
            if (e->type == EL_END) {
                if (par < 0) {
                    m->tmp_acc = 1;
                    break;
                }
                pos = m->npos[par], par = m->npar[par];
                continue;
            }
            int32_t id = node_of(m, pos, par);
            if (id < 0) return -1;
            if (m->nmark[id] == m->epoch) break;
            m->nmark[id] = m->epoch;
            if (e->type == EL_CHAR) {
                if (grow((void **)&m->tmp, &m->cap_tmp, m->n_tmp + 1, sizeof *m->tmp, &m->oom))
                    return -1;
                m->tmp[m->n_tmp++] = id;
                break;
            }
            int32_t cont = par; /* a reference last in its sequence returns straight to par */
            if (g->el[pos + 1].type != EL_END && (cont = node_of(m, pos + 1, par)) < 0) return -1;
            const grule *r = &g->rules[e->a];
            for (int32_t a = 0; a < r->n_alts; a++)
                if (expand_push(m, g->alt_start[r->alt0 + a], cont)) return -1;
            break;
        }
    }
    return 0;
}

static int cmp_i32(const void *a, const void *b) {
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

static uint32_t state_hash(const int32_t *l, int32_t n, int acc) {
    uint64_t h = 1469598103934665603ull ^ (uint64_t)acc;
    for (int32_t i = 0; i < n; i++)
        h = (h ^ (uint32_t)l[i]) * 1099511628211ull;
    return mix32(h);
}

static int rehash_states(gram_match *m, uint32_t mask) {
    int32_t *ns = malloc(((size_t)mask + 1) * sizeof *ns);
    if (!ns) return m->oom = 1, -1;
    memset(ns, 0xff, ((size_t)mask + 1) * sizeof *ns);
    for (size_t s = 0; s < m->n_states; s++) {
        uint32_t h = state_hash(m->leaves + m->soff[s], m->slen[s], m->sacc[s]) & mask;
        while (ns[h] >= 0)
            h = (h + 1) & mask;
        ns[h] = (int32_t)s;
    }
    free(m->sslot);
    m->sslot = ns, m->smask = mask;
    return 0;
}

/* The state of the expansion just run: DEAD when it has no leaves and cannot end; -3 on out of
 * memory. */
static int32_t expand_finish(gram_match *m) {
    if (m->oom) return -3;
    if (!m->n_tmp && !m->tmp_acc) return DEAD;
    if (m->n_tmp > 1) qsort(m->tmp, m->n_tmp, sizeof *m->tmp, cmp_i32);
    if (m->n_states * 2 >= m->smask && rehash_states(m, m->smask * 2 + 1)) return -3;
    const int32_t n = (int32_t)m->n_tmp;
    uint32_t h = state_hash(m->tmp, n, m->tmp_acc) & m->smask;
    for (int32_t s; (s = m->sslot[h]) >= 0; h = (h + 1) & m->smask)
        if (m->slen[s] == n && m->sacc[s] == m->tmp_acc &&
            !memcmp(m->leaves + m->soff[s], m->tmp, (size_t)n * sizeof *m->tmp))
            return s;
    size_t c1 = m->cap_states, c2 = m->cap_states, c3 = m->cap_states, c4 = m->cap_states,
           c5 = m->cap_states;
    if (grow((void **)&m->soff, &c1, m->n_states + 1, sizeof *m->soff, &m->oom) ||
        grow((void **)&m->slen, &c2, m->n_states + 1, sizeof *m->slen, &m->oom) ||
        grow((void **)&m->sacc, &c3, m->n_states + 1, sizeof *m->sacc, &m->oom) ||
        grow((void **)&m->suni, &c4, m->n_states + 1, sizeof *m->suni, &m->oom) ||
        grow((void **)&m->shi, &c5, m->n_states + 1, sizeof *m->shi, &m->oom) ||
        grow((void **)&m->leaves, &m->cap_leaves, m->n_leaves + (size_t)n, sizeof *m->leaves,
             &m->oom))
        return -3;
    m->cap_states = PT_MIN(PT_MIN(c1, c2), PT_MIN(PT_MIN(c3, c4), c5));
    size_t need = (m->n_states + 1) * 128;
    if (need > m->cap_ascii) {
        size_t old = m->cap_ascii;
        if (grow((void **)&m->ascii, &m->cap_ascii, need, sizeof *m->ascii, &m->oom)) return -3;
        for (size_t i = old; i < m->cap_ascii; i++)
            m->ascii[i] = UNKNOWN;
    }
    int32_t s = (int32_t)m->n_states++;
    m->soff[s] = m->n_leaves;
    m->slen[s] = n;
    m->sacc[s] = (uint8_t)m->tmp_acc;
    /* a state whose classes only name ASCII treats every other code point alike: one cached
     * transition serves them all (the vocabulary's ~100k distinct ones in a string) */
    int uni = 1;
    for (int32_t i = 0; i < n && uni; i++) {
        const gelem *e = &m->g->el[m->npos[m->tmp[i]]];
        const uint32_t *r = m->g->rng + 2 * (size_t)e->a;
        for (int32_t k = 0; k < e->b && uni; k++)
            uni = r[2 * k + 1] < 0x80;
    }
    m->suni[s] = (uint8_t)uni;
    m->shi[s] = UNKNOWN;
    if (n) memcpy(m->leaves + m->n_leaves, m->tmp, (size_t)n * sizeof *m->tmp);
    m->n_leaves += (size_t)n;
    m->sslot[h] = s;
    return s;
}

static int32_t start_state(gram_match *m) {
    expand_begin(m);
    const grule *r = &m->g->rules[m->g->root];
    for (int32_t a = 0; a < r->n_alts; a++)
        if (expand_push(m, m->g->alt_start[r->alt0 + a], -1)) return -3;
    if (expand_run(m)) return -3;
    return expand_finish(m);
}

/* Compute the transition of state s over code point cp (no cache). */
static int32_t advance(gram_match *m, int32_t s, uint32_t cp) {
    expand_begin(m);
    const int32_t n = m->slen[s];
    for (int32_t i = 0; i < n; i++) {
        int32_t id = m->leaves[m->soff[s] + (size_t)i]; /* re-read: the pool may move */
        int32_t pos = m->npos[id];
        if (class_has(m->g, &m->g->el[pos], cp) && expand_push(m, pos + 1, m->npar[id])) return -3;
    }
    if (expand_run(m)) return -3;
    return expand_finish(m);
}

static int rehash_trans(gram_match *m, uint32_t mask) {
    uint64_t *nk = calloc((size_t)mask + 1, sizeof *nk);
    int32_t *nv = malloc(((size_t)mask + 1) * sizeof *nv);
    if (!nk || !nv) {
        free(nk);
        free(nv);
        return m->oom = 1, -1;
    }
    for (size_t i = 0; m->tkey && i <= m->tmask; i++) {
        if (!m->tkey[i]) continue;
        uint32_t h = mix32(m->tkey[i]) & mask;
        while (nk[h])
            h = (h + 1) & mask;
        nk[h] = m->tkey[i], nv[h] = m->tval[i];
    }
    free(m->tkey);
    free(m->tval);
    m->tkey = nk, m->tval = nv, m->tmask = mask;
    return 0;
}

/* The state after s reads code point cp: DEAD, a state, or -3 (out of memory). Cached. */
static int32_t trans(gram_match *m, int32_t s, uint32_t cp) {
    if (cp < 128) {
        int32_t t = m->ascii[(size_t)s * 128 + cp];
        if (t != UNKNOWN) return t;
        t = advance(m, s, cp);
        if (t >= DEAD) m->ascii[(size_t)s * 128 + cp] = t;
        return t;
    }
    if (!m->slen[s]) return DEAD;
    if (m->suni[s]) {
        if (m->shi[s] == UNKNOWN) {
            int32_t t = advance(m, s, cp);
            if (t < DEAD) return t;
            m->shi[s] = t;
        }
        return m->shi[s];
    }
    uint64_t key = ((uint64_t)(uint32_t)s << 32 | cp) + 1;
    if (m->tkey) {
        for (uint32_t h = mix32(key) & m->tmask; m->tkey[h]; h = (h + 1) & m->tmask)
            if (m->tkey[h] == key) return m->tval[h];
    }
    int32_t t = advance(m, s, cp);
    if (t < DEAD) return t;
    if ((m->tn + 1) * 2 > (size_t)m->tmask + (m->tkey ? 1 : 0) &&
        rehash_trans(m, m->tkey ? m->tmask * 2 + 1 : 1023))
        return -3;
    uint32_t h = mix32(key) & m->tmask;
    while (m->tkey[h])
        h = (h + 1) & m->tmask;
    m->tkey[h] = key, m->tval[h] = t;
    m->tn++;
    return t;
}

/* Whether some leaf of s could take a code point starting with the pending bytes. */
static int viable(gram_match *m, int32_t s, gpend p) {
    if (!p.need) return 1;
    uint32_t lo = p.acc << (6 * p.need), hi = lo | ((1u << (6 * p.need)) - 1);
    static const uint32_t min[5] = {0, 0, 0x80, 0x800, 0x10000};
    if (lo < min[p.len]) lo = min[p.len];
    if (hi > 0x10FFFF) hi = 0x10FFFF;
    if (lo > hi || (lo >= 0xD800 && hi <= 0xDFFF)) return 0; /* surrogates never complete */
    for (int32_t i = 0; i < m->slen[s]; i++) {
        int32_t id = m->leaves[m->soff[s] + (size_t)i];
        if (class_meets(m->g, &m->g->el[m->npos[id]], lo, hi)) return 1;
    }
    return 0;
}

/* Read one byte from (*s, *p): 0, or -1 when the grammar rejects it (then *s is DEAD), -3 on
 * out of memory. */
static int step_byte(gram_match *m, int32_t *s, gpend *p, uint8_t b) {
    if (!p->need) {
        if (b < 0x80) {
            *s = trans(m, *s, b);
            return *s >= 0 ? 0 : *s == DEAD ? -1 : -3;
        }
        int len = (b & 0xE0) == 0xC0 ? 2 : (b & 0xF0) == 0xE0 ? 3 : (b & 0xF8) == 0xF0 ? 4 : 0;
        if (!len || b == 0xC0 || b == 0xC1 || b > 0xF4) return *s = DEAD, -1;
        *p = (gpend){.acc = b & (len == 2   ? 0x1F
                                 : len == 3 ? 0x0F
                                            : 0x07),
                     .need = (uint8_t)(len - 1),
                     .len = (uint8_t)len,
                     .first = b};
        return 0;
    }
    if ((b & 0xC0) != 0x80) return *s = DEAD, -1;
    p->acc = p->acc << 6 | (b & 0x3F);
    if (--p->need) return 0;
    static const uint32_t min[5] = {0, 0, 0x80, 0x800, 0x10000};
    uint32_t cp = p->acc;
    *p = (gpend){0};
    if (cp < min[(cp >= 0x10000) ? 4
                 : (cp >= 0x800) ? 3
                                 : 2] ||
        cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
        return *s = DEAD, -1;
    *s = trans(m, *s, cp);
    return *s >= 0 ? 0 : *s == DEAD ? -1 : -3;
}

static int pend_eq(gpend a, gpend b) {
    return a.acc == b.acc && a.need == b.need && a.len == b.len && a.first == b.first;
}

static int spec_in_literals(const gram *g, const char *t, size_t n) {
    return n && g->lits.n && memmem(g->lits.v, g->lits.n, t, n) != NULL;
}

gram_match *gram_match_new(const gram *g, const gram_vocab *gv, pt_err *err) {
    gram_match *m = calloc(1, sizeof *m);
    if (!m) return pt_errf(err, "grammar: out of memory"), NULL;
    m->g = g, m->gv = gv;
    if (rehash_nodes(m, 1023) || rehash_states(m, 255)) goto oom;
    if (gv) {
        m->n_words = ((size_t)gv->n_vocab + 63) / 64;
        m->masks = malloc(MASK_CACHE * m->n_words * sizeof *m->masks + 8);
        m->spec = malloc(((size_t)gv->n_spec + 1) * sizeof *m->spec);
        m->dstate = malloc(((size_t)gv->max_depth + 1) * sizeof *m->dstate);
        m->dpend = malloc(((size_t)gv->max_depth + 1) * sizeof *m->dpend);
        if (!m->masks || !m->spec || !m->dstate || !m->dpend) goto oom;
        for (int32_t i = 0; i < gv->n_spec; i++) {
            size_t len;
            const char *t = tok_piece(gv->v, gv->spec[i], TOK_RENDER_SPECIAL, &len);
            if (spec_in_literals(g, t, len)) m->spec[m->n_spec++] = gv->spec[i];
        }
    }
    for (int i = 0; i < MASK_CACHE; i++)
        m->mkey_n[i] = -1;
    m->start = m->cur = start_state(m);
    if (m->start < DEAD) goto oom;
    return m;
oom:
    gram_match_free(m);
    return pt_errf(err, "grammar: out of memory"), NULL;
}

void gram_match_free(gram_match *m) {
    if (!m) return;
    free(m->npos);
    free(m->npar);
    free(m->nmark);
    free(m->nslot);
    free(m->soff);
    free(m->slen);
    free(m->sacc);
    free(m->suni);
    free(m->shi);
    free(m->leaves);
    free(m->sslot);
    free(m->ascii);
    free(m->tkey);
    free(m->tval);
    free(m->work);
    free(m->tmp);
    free(m->spec);
    free(m->masks);
    free(m->dstate);
    free(m->dpend);
    free(m);
}

/* Forget every state but the current one and the start (the tables past their bounds): the
 * current stacks are read out as paths of positions and interned again. */
static int rebuild(gram_match *m) {
    if (m->n_states <= MAX_STATES && m->n_nodes <= MAX_NODES) return 0;
    int32_t *paths = NULL; /* per leaf: length, then positions from the root down */
    size_t np = 0, cap = 0;
    int acc = m->cur >= 0 && m->sacc[m->cur];
    int32_t nl = m->cur >= 0 ? m->slen[m->cur] : 0;
    for (int32_t i = 0; i < nl; i++) {
        int32_t depth = 0;
        for (int32_t id = m->leaves[m->soff[m->cur] + (size_t)i]; id >= 0; id = m->npar[id])
            depth++;
        if (pt_grow((void **)&paths, &cap, np + (size_t)depth + 1, sizeof *paths)) {
            free(paths);
            return m->oom = 1, -1;
        }
        paths[np] = depth;
        int32_t k = depth;
        for (int32_t id = m->leaves[m->soff[m->cur] + (size_t)i]; id >= 0; id = m->npar[id])
            paths[np + (size_t)k--] = m->npos[id];
        np += (size_t)depth + 1;
    }
    m->n_nodes = m->n_states = m->n_leaves = m->tn = 0;
    memset(m->nslot, 0xff, ((size_t)m->nmask + 1) * sizeof *m->nslot);
    memset(m->sslot, 0xff, ((size_t)m->smask + 1) * sizeof *m->sslot);
    for (size_t i = 0; i < m->cap_ascii; i++)
        m->ascii[i] = UNKNOWN;
    if (m->tkey) memset(m->tkey, 0, ((size_t)m->tmask + 1) * sizeof *m->tkey);
    for (int i = 0; i < MASK_CACHE; i++)
        m->mkey_n[i] = -1;
    int was_dead = m->cur == DEAD;
    m->start = start_state(m);
    expand_begin(m);
    for (size_t q = 0; q < np;) {
        int32_t depth = paths[q], par = -1;
        for (int32_t k = 1; k <= depth; k++)
            if ((par = node_of(m, paths[q + (size_t)k], par)) < 0) break;
        if (par >= 0 && grow((void **)&m->tmp, &m->cap_tmp, m->n_tmp + 1, sizeof *m->tmp, &m->oom))
            par = -1;
        if (par < 0) break;
        m->tmp[m->n_tmp++] = par;
        q += (size_t)depth + 1;
    }
    m->tmp_acc = acc;
    free(paths);
    m->cur = was_dead ? DEAD : expand_finish(m);
    return m->oom || m->start < DEAD || m->cur < DEAD ? -1 : 0;
}

void gram_match_reset(gram_match *m) {
    m->cur = m->start;
    m->pend = (gpend){0};
}

int gram_match_text(gram_match *m, const char *s, size_t n) {
    int32_t st = m->cur;
    gpend p = m->pend;
    if (st < 0) return -1;
    for (size_t i = 0; i < n; i++)
        if (step_byte(m, &st, &p, (uint8_t)s[i])) return -1;
    if (p.need && !viable(m, st, p)) return -1;
    m->cur = st, m->pend = p;
    rebuild(m);
    return 0;
}

int gram_match_can_end(const gram_match *m) {
    return m->cur >= 0 && !m->pend.need && m->sacc[m->cur];
}

int gram_match_token(gram_match *m, int32_t tok) {
    const gram_vocab *gv = m->gv;
    if (!gv || tok < 0 || tok >= gv->n_vocab) return -1;
    const tok_vocab *v = gv->v;
    if (tok_is_eog(v, tok)) return gram_match_can_end(m) ? 0 : -1;
    int attr = tok_attr(v, tok);
    if (attr & (TOK_ATTR_UNKNOWN | TOK_ATTR_UNUSED)) return -1;
    size_t len;
    const char *t;
    if (attr & TOK_ATTR_CONTROL) {
        int ok = 0;
        for (int32_t i = 0; i < m->n_spec && !ok; i++)
            ok = m->spec[i] == tok;
        if (!ok) return -1;
        t = tok_piece(v, tok, TOK_RENDER_SPECIAL, &len);
    } else
        t = tok_piece(v, tok, 0, &len);
    if (!t || !len) return -1;
    return gram_match_text(m, t, len);
}

const uint64_t *gram_match_mask(gram_match *m, int *n_allowed) {
    const gram_vocab *gv = m->gv;
    *n_allowed = 0;
    if (!gv || m->oom) return NULL;
    for (int i = 0; i < MASK_CACHE; i++)
        if (m->mkey_n[i] >= 0 && m->mkey_state[i] == m->cur && pend_eq(m->mkey_pend[i], m->pend)) {
            *n_allowed = m->mkey_n[i];
            return m->masks + (size_t)i * m->n_words;
        }
    int slot = m->next_slot;
    m->next_slot = (m->next_slot + 1) % MASK_CACHE;
    uint64_t *mask = m->masks + (size_t)slot * m->n_words;
    memset(mask, 0, m->n_words * sizeof *mask);
    int count = 0;
    if (m->cur >= 0) {
        /* the trie walk: dstate[d] is the state after the first d bytes of the node's path */
        int32_t *ds = m->dstate;
        gpend *dp = m->dpend;
        ds[0] = m->cur, dp[0] = m->pend;
        const uint8_t *byte = gv->byte;
        const uint16_t *depth = gv->depth;
        const int32_t *end = gv->end, *tf = gv->tok_first;
        for (int32_t i = 1; i < gv->n_nodes;) {
            const int d = depth[i];
            int32_t s = ds[d - 1];
            gpend p = dp[d - 1];
            const uint8_t b = byte[i];
            if (!p.need && b < 0x80) { /* the common case, inline */
                int32_t t = m->ascii[(size_t)s * 128 + b];
                if (t == UNKNOWN) t = trans(m, s, b);
                if (t < DEAD) return m->oom = 1, NULL;
                s = t;
            } else if (step_byte(m, &s, &p, b) == -3)
                return m->oom = 1, NULL;
            if (s == DEAD) {
                i = end[i];
                continue;
            }
            ds[d] = s, dp[d] = p;
            if (tf[i] >= 0 && (!p.need || viable(m, s, p)))
                for (int32_t t = tf[i]; t >= 0; t = gv->tok_next[t]) {
                    mask[t >> 6] |= 1ull << (t & 63);
                    count++;
                }
            i++;
        }
        for (int32_t k = 0; k < m->n_spec; k++) {
            size_t len;
            const char *t = tok_piece(gv->v, m->spec[k], TOK_RENDER_SPECIAL, &len);
            int32_t s = m->cur;
            gpend p = m->pend;
            int ok = 1;
            for (size_t j = 0; j < len && ok; j++)
                ok = step_byte(m, &s, &p, (uint8_t)t[j]) == 0;
            if (ok && !p.need) {
                mask[m->spec[k] >> 6] |= 1ull << (m->spec[k] & 63);
                count++;
            }
        }
        if (gram_match_can_end(m))
            for (int32_t k = 0; k < gv->n_eog; k++) {
                mask[gv->eog[k] >> 6] |= 1ull << (gv->eog[k] & 63);
                count++;
            }
    }
    if (m->oom) return NULL;
    m->mkey_state[slot] = m->cur;
    m->mkey_pend[slot] = m->pend;
    m->mkey_n[slot] = count;
    *n_allowed = count;
    return mask;
}
