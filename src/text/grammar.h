/* grammar.h — constrained decoding: GBNF grammars, the matcher over UTF-8 text,
 * per-step token masks over a vocabulary, and JSON Schema -> GBNF.
 *
 * A gram is a parsed, checked GBNF grammar (llama.cpp's syntax: `name ::= ...` rules, "literals",
 * [classes] with ranges and ^negation, `.`, ( groups ), `|`, `* + ?`, {m}, {m,}, {m,n}, {,n},
 * # comments; the start rule is `root`). It is immutable and may be shared.
 *
 * A gram_vocab is a vocabulary's token texts as a byte trie (pre-order, with each node's subtree
 * end), built once per engine. Control tokens are kept aside: a grammar allows one only where
 * its rendered text is accepted and appears inside one of the grammar's literals (the markup of a
 * tool call); end-of-generation tokens only where the grammar can end; unused / unknown tokens
 * never.
 *
 * A gram_match is one generation's position in a grammar: a set of pushdown stacks, interned as
 * a lazily built DFA state (see grammar.c for how), plus the bytes of a character a token left
 * unfinished. gram_match_mask walks the trie once from that state, pruning every subtree whose
 * prefix the grammar rejects; masks are cached per state. */
#ifndef PT_GRAMMAR_H
#define PT_GRAMMAR_H

#include <stddef.h>
#include <stdint.h>

#include "common.h"
#include "text/tokenizer.h"

typedef struct gram gram;
typedef struct gram_vocab gram_vocab;
typedef struct gram_match gram_match;

/* The public pt_grammar (petrel.h) is this pair: a parsed grammar and the vocabulary trie its
 * masks are over (an engine's, built and kept by it; NULL: made without an engine, for text
 * matching only). pt_grammar_new makes one (engine/api_grammar.c); the sampler reads it. */
struct pt_grammar {
    gram *g;
    const gram_vocab *gv;
};

/* Parse and check GBNF text[0..len). NULL with err "grammar: line L, column C: what" for a
 * syntax error, an undefined rule, a missing root, left recursion or a grammar too large. */
gram *gram_parse(const char *text, size_t len, pt_err *err);
void gram_free(gram *g);
int gram_n_rules(const gram *g);

/* The trie of v's token texts. NULL with err (out of memory). */
gram_vocab *gram_vocab_new(const tok_vocab *v, pt_err *err);
void gram_vocab_free(gram_vocab *gv);
int gram_vocab_n_nodes(const gram_vocab *gv);
int gram_vocab_n_vocab(const gram_vocab *gv);

/* A matcher at the grammar's start. gv may be NULL (text matching only: no masks). */
gram_match *gram_match_new(const gram *g, const gram_vocab *gv, pt_err *err);
void gram_match_free(gram_match *m);
void gram_match_reset(gram_match *m); /* back to the start */

/* Advance over bytes s[0..n). 0; -1 when the grammar rejects them (the state is unchanged). */
int gram_match_text(gram_match *m, const char *s, size_t n);
/* Advance over a token of gv (an EOG token is accepted where the grammar can end and changes
 * nothing). 0; -1 when the grammar does not allow it here (the state is unchanged). */
int gram_match_token(gram_match *m, int32_t tok);
/* 1 when what was matched is a whole sentence of the grammar (no character left half). */
int gram_match_can_end(const gram_match *m);
/* The tokens allowed next, a bitset over [0, n_vocab) (bit t of word t/64), valid until the
 * next call on m; *n_allowed receives how many (0: the grammar is stuck: no token of the
 * vocabulary continues it). NULL when m has no vocabulary or memory ran out. */
const uint64_t *gram_match_mask(gram_match *m, int *n_allowed);

/* ===== JSON Schema ===== */

enum {
    GRAM_JSON = 0,      /* values are JSON */
    GRAM_GEMMA4 = 1,    /* Gemma 4's tool-call values: {key:value}, strings in <|"|> */
    GRAM_JSON_TOOL = 2, /* JSON whose strings hold no raw '<' (\u003c instead), so no
                           argument can spell a tool-call marker the parser would cut at */
};
/* Append to out the GBNF rules of a schema (JSON text) under the rule name `root` (prefix:
 * the names of the rules it adds start with it; "" gives the whole grammar's `root`). The
 * subset of llama.cpp's json-schema-to-grammar: type (string, number, integer, boolean, null,
 * object, array, or a list of them), properties, required, additionalProperties (false, true or
 * a schema), items, minItems, maxItems, minLength, maxLength, enum, const, anyOf, oneOf (as
 * anyOf), $ref to #/$defs/NAME or #/definitions/NAME; annotations are ignored. Any other keyword
 * is an error naming it. 0, or -1 with err. */
int gram_from_json_schema(const char *schema, size_t len, int dialect, const char *prefix,
                          tok_bytes *out, pt_err *err);
/* The same for a parsed schema (a jansson json_t *). */
int gram_from_json_schema_value(const void *schema_json_t, int dialect, const char *prefix,
                                tok_bytes *out, pt_err *err);

#endif
