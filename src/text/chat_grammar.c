/* chat_grammar.c — GBNF grammars for tool calls in each chat format's own syntax (tool_choice
 * "required" or a named tool; parallel_tool_calls), so constrained decoding can force a reply
 * that pt_chat_parse reads as calls of the allowed tools with arguments valid against their
 * schemas. One call of one tool is the format's call_grammar op (chat_<format>.c), written in
 * the syntax its renderer writes for an assistant's calls and its parser reads:
 *
 *   qwen3        <tool_call>\n{"name": "NAME", "arguments": ARGS}\n</tool_call>, calls joined
 *                by "\n"
 *   deepseek-v3  <｜tool▁calls▁begin｜> (<｜tool▁call▁begin｜>NAME<｜tool▁sep｜>ARGS
 *                <｜tool▁call▁end｜>)+ <｜tool▁calls▁end｜>
 *   glm-5        <tool_call>NAME(<arg_key>K</arg_key><arg_value>V</arg_value>)*</tool_call>,
 *                V raw text for string-typed parameters (no '<'), JSON otherwise
 *   gemma-4      <|tool_call>call:NAME{K:V,...}<tool_call|>, values in Gemma's syntax
 *
 * What is the same for every format is here: the choice of tools, one call or several (joined
 * by the format's calls_sep), the wrapper of the calls (calls_open / calls_close), and the
 * frame of reasoning before them.
 *
 * chat_no_tool_grammar (tool_choice "none") is the same frame around any text that does not
 * hold the format's call marker (nor the calls' wrapper), so nothing in the reply parses as a
 * call.
 *
 * chat_json_grammar is the same frame around a JSON Schema's grammar (response_format): the
 * reasoning the format allows, then the JSON.
 *
 * ARGS is the JSON of the tool's parameters schema (text/gram_schema.c). The calls may follow a
 * reasoning block: the rest of the one the prompt opened, or an optional whole one. Reasoning
 * text is any text without the closing marker: a rule per state of the marker's KMP automaton
 * (right-recursive, so matching it keeps constant depth). */
#include <jansson.h>
#include <string.h>

#include "text/chat_fmt.h"
#include "text/grammar.h"
#include "text/utf8.h"

static void put_cp_escaped(char *o, size_t cap, uint32_t cp) {
    if (cp <= 0xFFFF)
        snprintf(o, cap, "\\u%04X", cp);
    else
        snprintf(o, cap, "\\U%08X", cp);
}

/* Rules NAME0..: any text holding none of markers[0..n_markers), then (unless forbid) the one
 * marker; with forbid the text may end anywhere. The rules are the states of the markers'
 * matching automaton: a state is the longest suffix of the text so far that begins a marker, so
 * each rule reads one character and goes on in constant depth. */
static int put_until(tok_bytes *b, const char *name, const char *const *markers, int n_markers,
                     int forbid, pt_err *err) {
    enum { MAXC = 64, MAXM = 4 };
    uint32_t cp[MAXM][MAXC];
    int len[MAXM];
    for (int m = 0; m < n_markers && m < MAXM; m++) {
        len[m] = 0;
        for (size_t i = 0, n = strlen(markers[m]); i < n && len[m] < MAXC;) {
            uint32_t c;
            int k = utf8_decode_lenient((const unsigned char *)markers[m] + i, n - i, &c);
            if (k <= 0) return pt_errf(err, "tool grammar: a marker is not UTF-8");
            cp[m][len[m]++] = c;
            i += (size_t)k;
        }
    }
    /* the states: every proper prefix of a marker, as (marker, length), distinct texts only */
    int sm[MAXM * MAXC], sl[MAXM * MAXC], ns = 0;
    for (int m = 0; m < n_markers; m++)
        for (int l = 0; l < len[m]; l++) {
            int dup = 0;
            for (int q = 0; q < ns && !dup; q++)
                dup = sl[q] == l && !memcmp(cp[sm[q]], cp[m], (size_t)l * sizeof(uint32_t));
            if (!dup) sm[ns] = m, sl[ns] = l, ns++;
        }
    char line[256], esc[16];
    uint32_t w[MAXC + 1];
    for (int st = 0; st < ns; st++) {
        snprintf(line, sizeof line, "%s%d ::= ", name, st);
        if (chat_gbnf(b, line, err)) return -1;
        if (forbid && chat_gbnf(b, "\"\" | ", err)) return -1;
        if (!forbid && st == 0 && (chat_gbnf_lit(b, markers[0], err) || chat_gbnf(b, " | ", err)))
            return -1;
        /* each distinct character of the markers: the state after it, or the end */
        for (int m = 0; m < n_markers; m++)
            for (int i = 0; i < len[m]; i++) {
                int dup = 0;
                for (int m2 = 0; m2 <= m && !dup; m2++)
                    for (int j = 0; j < (m2 == m ? i : len[m2]) && !dup; j++)
                        dup = cp[m2][j] == cp[m][i];
                if (dup) continue;
                const int wl = sl[st] + 1;
                memcpy(w, cp[sm[st]], (size_t)sl[st] * sizeof *w);
                w[wl - 1] = cp[m][i];
                int hit = 0, next = 0;
                for (int q = 0; q < n_markers && !hit; q++) /* a marker ends here */
                    hit =
                        len[q] <= wl && !memcmp(w + wl - len[q], cp[q], (size_t)len[q] * sizeof *w);
                for (int q = 0; q < ns && !hit; q++) /* the longest suffix that is a state */
                    if (sl[q] > sl[next] && sl[q] <= wl &&
                        !memcmp(w + wl - sl[q], cp[sm[q]], (size_t)sl[q] * sizeof *w))
                        next = q;
                put_cp_escaped(esc, sizeof esc, cp[m][i]);
                if (hit && forbid) continue;
                if (hit)
                    snprintf(line, sizeof line, "[%s] | ", esc);
                else
                    snprintf(line, sizeof line, "[%s] %s%d | ", esc, name, next);
                if (chat_gbnf(b, line, err)) return -1;
            }
        if (chat_gbnf(b, "[^", err)) return -1;
        for (int m = 0; m < n_markers; m++)
            for (int i = 0; i < len[m]; i++) {
                put_cp_escaped(esc, sizeof esc, cp[m][i]);
                if (chat_gbnf(b, esc, err)) return -1;
            }
        snprintf(line, sizeof line, "] %s0\n", name);
        if (chat_gbnf(b, line, err)) return -1;
    }
    return 0;
}

static const json_t *tool_fn(const json_t *t) {
    const json_t *fn = json_object_get(t, "function");
    return fn ? fn : t;
}

/* The schema of a tool's parameters (an empty object when it has none). */
static json_t *tool_params(const json_t *fn) {
    json_t *p = json_object_get(fn, "parameters");
    if (p) return json_incref(p);
    return json_pack("{s:s, s:b}", "type", "object", "additionalProperties", 0);
}

/* pre-call ::= the call of one tool, in f's syntax. */
static int put_call(const chat_fmt *f, tok_bytes *b, const char *pre, const json_t *fn,
                    pt_err *err) {
    const char *name = chat_fn_name(fn);
    if (!name || !*name) return pt_errf(err, "tool grammar: a tool has no function name");
    json_t *params = tool_params(fn);
    int rc = f->call_grammar(b, pre, name, params, err);
    json_decref(params);
    return rc;
}

/* root ::= the reasoning the format allows, then `body`. */
static int put_root(tok_bytes *out, const chat_syntax *sy, int in_reasoning, pt_err *err) {
    int rc = put_until(out, "think", &sy->think_close, 1, 0, err);
    rc = rc || chat_gbnf(out, "ws ::= [ \\n]{0,4}\n", err);
    if (in_reasoning < 0) return rc || chat_gbnf(out, "root ::= ws body\n", err); /* thinking off */
    if (in_reasoning) return rc || chat_gbnf(out, "root ::= think0 ws body\n", err);
    rc = rc || chat_gbnf(out, "root ::= (", err) || chat_gbnf_lit(out, sy->think_open, err) ||
         chat_gbnf(out, " ", err);
    if (sy->think_label)
        rc = rc || chat_gbnf_lit(out, sy->think_label, err) || chat_gbnf(out, "? ", err);
    return rc || chat_gbnf(out, "think0 ws)? body\n", err);
}

int chat_json_grammar(const chat_fmt *f, const json_t *schema, int in_reasoning, tok_bytes *out,
                      pt_err *err) {
    if (!f) return gram_from_json_schema_value(schema, GRAM_JSON, "", out, err);
    return gram_from_json_schema_value(schema, GRAM_JSON, "json-", out, err) ||
                   chat_gbnf(out, "body ::= json-root\n", err) ||
                   put_root(out, &f->syntax, in_reasoning, err)
               ? -1
               : 0;
}

int chat_no_tool_grammar(const chat_fmt *f, int in_reasoning, tok_bytes *out, pt_err *err) {
    if (!f) return pt_errf(err, "tool grammar: unknown chat format");
    const chat_syntax *sy = &f->syntax;
    if (!sy->call_open) return pt_errf(err, "tool grammar: the format has no tool calls");
    /* the call marker, and the wrapper of the calls (a streaming reader holds text back at
     * either: pt_chat_markers_of) */
    const char *forbidden[2] = {sy->call_open, sy->calls_open};
    return put_until(out, "free", forbidden, sy->calls_open ? 2 : 1, 1, err) ||
                   chat_gbnf(out, "body ::= free0\n", err) || put_root(out, sy, in_reasoning, err)
               ? -1
               : 0;
}

int chat_tool_grammar(const chat_fmt *f, const json_t *tools, const char *name, int parallel,
                      int in_reasoning, tok_bytes *out, pt_err *err) {
    if (!f) return pt_errf(err, "tool grammar: unknown chat format");
    const chat_syntax *sy = &f->syntax;
    if (!f->call_grammar) return pt_errf(err, "tool grammar: the format has no tool calls");
    tok_bytes any = {0};
    int rc = 0, n = 0;
    for (size_t i = 0; i < json_array_size(tools) && !rc; i++) {
        const json_t *fn = tool_fn(json_array_get(tools, i));
        const char *tn = chat_fn_name(fn);
        if (name && (!tn || strcmp(tn, name))) continue;
        char pre[32];
        snprintf(pre, sizeof pre, "t%zu-", i);
        rc = put_call(f, out, pre, fn, err) || chat_gbnf(&any, n ? " | " : "", err) ||
             chat_gbnf(&any, pre, err) || chat_gbnf(&any, "call", err);
        n++;
    }
    if (!rc && !n)
        rc = name ? pt_errf(err, "tool grammar: no tool named '%s' in the tools", name)
                  : pt_errf(err, "tool grammar: no tools");
    rc = rc || chat_gbnf(out, "call ::= ", err) || chat_gbnf(out, any.v, err) ||
         chat_gbnf(out, "\n", err);
    const char *sep = f->calls_sep ? f->calls_sep : "";
    char line[256];
    snprintf(line, sizeof line, "calls ::= call%s%s%s\n", parallel ? " (" : "", parallel ? sep : "",
             parallel ? "call)*" : "");
    rc = rc || chat_gbnf(out, line, err);
    if (sy->calls_open)
        rc = rc || chat_gbnf(out, "body ::= ", err) || chat_gbnf_lit(out, sy->calls_open, err) ||
             chat_gbnf(out, " calls ", err) || chat_gbnf_lit(out, sy->calls_close, err) ||
             chat_gbnf(out, "\n", err);
    else
        rc = rc || chat_gbnf(out, "body ::= calls\n", err);
    rc = rc || put_root(out, sy, in_reasoning, err);
    tok_bytes_free(&any);
    return rc ? -1 : 0;
}
