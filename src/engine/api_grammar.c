/* api_grammar.c — the public grammar functions of petrel.h over text/grammar.h: a pt_grammar is
 * a parsed grammar plus the engine's token trie (built once per engine, on first use, and kept
 * by it); JSON Schema and tool-call grammars are returned as GBNF text so a front end can show,
 * log or combine them before compiling. */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "engine/api_text.h"
#include "text/chat.h"
#include "text/grammar.h"

static void put_err(char *err, size_t err_len, const char *msg) {
    if (err && err_len) snprintf(err, err_len, "%s", msg);
}

pt_grammar *pt_grammar_new(const pt_engine *e, const char *gbnf, size_t len, char *err,
                           size_t err_len) {
    pt_err pe = {{0}};
    const gram_vocab *gv = NULL;
    if (e && !(gv = engine_gram_vocab(e, err, err_len))) return NULL;
    gram *g = gram_parse(gbnf ? gbnf : "", gbnf ? len : 0, &pe);
    if (!g) return put_err(err, err_len, pe.msg), NULL;
    pt_grammar *pg = malloc(sizeof *pg);
    if (!pg) {
        gram_free(g);
        return put_err(err, err_len, "grammar: out of memory"), NULL;
    }
    pg->g = g, pg->gv = gv;
    return pg;
}

pt_grammar *pt_grammar_from_json_schema(const pt_engine *e, const char *schema_json, char *err,
                                        size_t err_len) {
    pt_buf b = {0};
    if (pt_json_schema_to_gbnf(schema_json, &b, err, err_len)) return NULL;
    pt_grammar *g = pt_grammar_new(e, b.v, b.n, err, err_len);
    pt_buf_free(&b);
    return g;
}

void pt_grammar_free(pt_grammar *g) {
    if (!g) return;
    gram_free(g->g);
    free(g);
}

int pt_grammar_match(const pt_grammar *g, const char *text, size_t len) {
    gram_match *m = gram_match_new(g->g, NULL, NULL);
    int ok = m && !gram_match_text(m, text, len) && gram_match_can_end(m);
    gram_match_free(m);
    return ok;
}

int pt_json_schema_to_gbnf(const char *schema_json, pt_buf *out, char *err, size_t err_len) {
    pt_err pe = {{0}};
    const char *s = schema_json ? schema_json : "";
    if (gram_from_json_schema(s, strlen(s), GRAM_JSON, "", out, &pe))
        return put_err(err, err_len, pe.msg), -1;
    return 0;
}

int pt_chat_tool_grammar(const char *format, const char *tools_json, const char *tool_name,
                         int parallel, int in_reasoning, pt_buf *out, char *err, size_t err_len) {
    pt_err pe = {{0}};
    const chat_fmt *f = chat_fmt_find(format);
    if (!f) {
        put_err(err, err_len, "tool grammar: unknown chat format");
        return -1;
    }
    json_error_t je;
    json_t *tools = tools_json ? json_loads(tools_json, 0, &je) : NULL;
    if (!json_is_array(tools) || !json_array_size(tools)) {
        json_decref(tools);
        put_err(err, err_len, "tool grammar: tools must be a non-empty JSON array");
        return -1;
    }
    int rc = chat_tool_grammar(f, tools, tool_name, parallel, in_reasoning, out, &pe);
    json_decref(tools);
    if (rc) put_err(err, err_len, pe.msg);
    return rc;
}

int pt_chat_json_grammar(const char *format, const char *schema_json, int in_reasoning, pt_buf *out,
                         char *err, size_t err_len) {
    pt_err pe = {{0}};
    json_error_t je;
    json_t *schema = json_loads(schema_json ? schema_json : "", 0, &je);
    if (!schema) {
        if (err && err_len)
            snprintf(err, err_len, "json schema: not JSON: %s (line %d, column %d)", je.text,
                     je.line, je.column);
        return -1;
    }
    int rc = chat_json_grammar(chat_fmt_find(format), schema, in_reasoning, out, &pe);
    json_decref(schema);
    if (rc) put_err(err, err_len, pe.msg);
    return rc;
}

int pt_chat_no_tool_grammar(const char *format, int in_reasoning, pt_buf *out, char *err,
                            size_t err_len) {
    pt_err pe = {{0}};
    int rc = chat_no_tool_grammar(chat_fmt_find(format), in_reasoning, out, &pe);
    if (rc) put_err(err, err_len, pe.msg);
    return rc;
}
