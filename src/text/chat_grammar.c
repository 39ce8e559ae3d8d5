/* chat_grammar.c — GBNF grammars for tool calls in each chat format's own syntax (tool_choice
 * "required" or a named tool; parallel_tool_calls), so constrained decoding can force a reply
 * that pt_chat_parse reads as calls of the allowed tools with arguments valid against their
 * schemas. The syntax written is the one the format's renderer writes for an assistant's calls
 * (chat_<family>.c) and its parser reads (chat_parse.c):
 *
 *   qwen3        <tool_call>\n{"name": "NAME", "arguments": ARGS}\n</tool_call>, calls joined
 *                by "\n"
 *   deepseek-v3  <｜tool▁calls▁begin｜> (<｜tool▁call▁begin｜>NAME<｜tool▁sep｜>ARGS
 *                <｜tool▁call▁end｜>)+ <｜tool▁calls▁end｜>
 *   glm-5        <tool_call>NAME(<arg_key>K</arg_key><arg_value>V</arg_value>)*</tool_call>,
 *                V raw text for string-typed parameters (no '<'), JSON otherwise
 *   gemma-4      <|tool_call>call:NAME{K:V,...}<tool_call|>, values in Gemma's syntax
 *
 * chat_no_tool_grammar (tool_choice "none") is the same frame around any text that does not
 * hold the format's call marker, so nothing in the reply parses as a call.
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

#include "text/chat.h"
#include "text/chat_internal.h"
#include "text/grammar.h"
#include "text/utf8.h"

/* DeepSeek's markers, as chat_deepseek3.c writes them (its call_open / call_close are read from
 * chat_deepseek3_syntax) */
#define DSG_CALLS_BEGIN                                                                            \
    "<\xef\xbd\x9ctool\xe2\x96\x81"                                                                \
    "calls\xe2\x96\x81"                                                                            \
    "begin\xef\xbd\x9c>"
#define DSG_CALLS_END                                                                              \
    "<\xef\xbd\x9ctool\xe2\x96\x81"                                                                \
    "calls\xe2\x96\x81"                                                                            \
    "end\xef\xbd\x9c>"
#define DSG_SEP "<\xef\xbd\x9ctool\xe2\x96\x81sep\xef\xbd\x9c>"

static int gput(tok_bytes *b, const char *s, pt_err *err) {
    if (tok_bytes_append(b, s, strlen(s))) return pt_errf(err, "tool grammar: out of memory");
    return 0;
}

/* A GBNF literal of s (bytes as they are; quotes, backslashes and controls escaped). */
static int put_lit(tok_bytes *b, const char *s, pt_err *err) {
    if (gput(b, "\"", err)) return -1;
    for (; *s; s++) {
        char e[8];
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            snprintf(e, sizeof e, "\\%c", c);
        else if (c < 0x20 || c == 0x7F)
            snprintf(e, sizeof e, "\\x%02X", c);
        else
            e[0] = (char)c, e[1] = 0;
        if (gput(b, e, err)) return -1;
    }
    return gput(b, "\"", err);
}

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
        if (gput(b, line, err)) return -1;
        if (forbid && gput(b, "\"\" | ", err)) return -1;
        if (!forbid && st == 0 && (put_lit(b, markers[0], err) || gput(b, " | ", err))) return -1;
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
                if (gput(b, line, err)) return -1;
            }
        if (gput(b, "[^", err)) return -1;
        for (int m = 0; m < n_markers; m++)
            for (int i = 0; i < len[m]; i++) {
                put_cp_escaped(esc, sizeof esc, cp[m][i]);
                if (gput(b, esc, err)) return -1;
            }
        snprintf(line, sizeof line, "] %s0\n", name);
        if (gput(b, line, err)) return -1;
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

/* GLM-5: NAME, then an <arg_key>/<arg_value> pair per property (required ones always, the
 * others optional, in the schema's order). */
static int put_glm_args(tok_bytes *b, const char *pre, const json_t *params, pt_err *err) {
    const json_t *props = json_object_get(params, "properties");
    const json_t *req = json_object_get(params, "required");
    tok_bytes seq = {0};
    const char *k;
    const json_t *v;
    size_t i = 0;
    int rc = 0;
    json_object_foreach((json_t *)props, k, v) {
        int is_req = 0;
        for (size_t r = 0; r < json_array_size(req); r++)
            is_req |= json_is_string(json_array_get(req, r)) &&
                      !strcmp(json_string_value(json_array_get(req, r)), k);
        char nm[200], line[320];
        snprintf(nm, sizeof nm, "%sp%zu-", pre, i);
        const char *ty = json_string_value(json_object_get(v, "type"));
        if (ty && !strcmp(ty, "string")) {
            const json_t *en = json_object_get(v, "enum");
            snprintf(line, sizeof line, "%sroot ::= ", nm);
            rc = rc || gput(b, line, err);
            if (json_is_array(en) && json_array_size(en)) {
                for (size_t e = 0; e < json_array_size(en) && !rc; e++) {
                    const char *s = json_string_value(json_array_get(en, e));
                    if (!s) {
                        rc = pt_errf(err, "tool grammar: a string enum lists a non-string");
                        break;
                    }
                    rc = (e && gput(b, " | ", err)) || put_lit(b, s, err);
                }
                rc = rc || gput(b, "\n", err);
            } else {
                const json_t *mn = json_object_get(v, "minLength"),
                             *mx = json_object_get(v, "maxLength");
                char rep[64] = "*";
                if (json_is_integer(mx))
                    snprintf(rep, sizeof rep, "{%d,%d}",
                             json_is_integer(mn) ? (int)json_integer_value(mn) : 0,
                             (int)json_integer_value(mx));
                else if (json_is_integer(mn))
                    snprintf(rep, sizeof rep, "{%d,}", (int)json_integer_value(mn));
                snprintf(line, sizeof line, "[^<]%s\n", rep);
                rc = rc || gput(b, line, err);
            }
        } else
            rc = rc || gram_from_json_schema_value(v, GRAM_JSON, nm, b, err);
        rc = rc || gput(&seq, is_req ? " " : " (", err) || gput(&seq, "\"<arg_key>\" ", err) ||
             put_lit(&seq, k, err) || gput(&seq, " \"</arg_key><arg_value>\" ", err);
        snprintf(line, sizeof line, "%sroot \"</arg_value>\"%s", nm, is_req ? "" : ")?");
        rc = rc || gput(&seq, line, err);
        i++;
    }
    if (!rc && seq.n) rc = gput(b, seq.v, err);
    tok_bytes_free(&seq);
    return rc;
}

/* pre-call ::= the call of one tool. */
static int put_call(chat_format f, tok_bytes *b, const char *pre, const json_t *fn, pt_err *err) {
    const char *name = json_string_value(json_object_get(fn, "name"));
    if (!name || !*name) return pt_errf(err, "tool grammar: a tool has no function name");
    json_t *params = tool_params(fn);
    char line[160];
    int rc = 0;
    tok_bytes args = {0};
    if (f != CHAT_GLM5) {
        snprintf(line, sizeof line, "%sargs-", pre);
        rc = gram_from_json_schema_value(params, f == CHAT_GEMMA4 ? GRAM_GEMMA4 : GRAM_JSON_TOOL,
                                         line, b, err);
        if (rc) {
            char m[sizeof err->msg];
            snprintf(m, sizeof m, "%s", err->msg);
            pt_errf(err, "tool '%s': %s", name, m);
        }
    }
    snprintf(line, sizeof line, "%scall ::= ", pre);
    rc = rc || gput(b, line, err);
    switch (f) {
    case CHAT_QWEN3:
        rc = rc || gput(b, "\"<tool_call>\\n{\\\"name\\\": \" ", err);
        json_t *js = json_string(name);
        char *jn = js ? json_dumps(js, JSON_ENCODE_ANY) : NULL;
        json_decref(js);
        rc = rc || !jn || put_lit(b, jn, err) || gput(b, " \", \\\"arguments\\\": \" ", err);
        free(jn);
        snprintf(line, sizeof line, "%sargs-root \"}\\n</tool_call>\"\n", pre);
        rc = rc || gput(b, line, err);
        break;
    case CHAT_DEEPSEEK3:
        rc = rc || put_lit(b, chat_deepseek3_syntax.call_open, err) || gput(b, " ", err) ||
             put_lit(b, name, err) || gput(b, " ", err) || put_lit(b, DSG_SEP, err);
        snprintf(line, sizeof line, " %sargs-root ", pre);
        rc = rc || gput(b, line, err) || put_lit(b, chat_deepseek3_syntax.call_close, err) ||
             gput(b, "\n", err);
        break;
    case CHAT_GEMMA4:
        rc = rc || gput(b, "\"<|tool_call>call:\" ", err) || put_lit(b, name, err);
        snprintf(line, sizeof line, " %sargs-root \"<tool_call|>\"\n", pre);
        rc = rc || gput(b, line, err);
        break;
    case CHAT_GLM5:
        rc = rc || gput(b, "\"<tool_call>\" ", err) || put_lit(b, name, err) || gput(b, " ", err);
        snprintf(line, sizeof line, "%sargs", pre);
        tok_bytes rules = {0};
        rc = rc || put_glm_args(&rules, line, params, err);
        /* put_glm_args wrote the value rules then the sequence: split them */
        if (!rc) {
            const char *seq = rules.v ? rules.v : "";
            const char *last_nl = strrchr(seq, '\n');
            const char *tail = last_nl ? last_nl + 1 : seq;
            rc = tok_bytes_append(b, tail, strlen(tail)) || gput(b, " \"</tool_call>\"\n", err) ||
                 tok_bytes_append(b, seq, (size_t)(tail - seq));
            if (rc) pt_errf(err, "tool grammar: out of memory");
        }
        tok_bytes_free(&rules);
        break;
    default: rc = pt_errf(err, "tool grammar: the format has no tool calls");
    }
    tok_bytes_free(&args);
    json_decref(params);
    return rc;
}

static const chat_syntax *syntax_of(chat_format f) {
    return f == CHAT_GLM5        ? &chat_glm5_syntax
           : f == CHAT_QWEN3     ? &chat_qwen3_syntax
           : f == CHAT_DEEPSEEK3 ? &chat_deepseek3_syntax
           : f == CHAT_GEMMA4    ? &chat_gemma4_syntax
                                 : NULL;
}

/* root ::= the reasoning the format allows, then `body`. */
static int put_root(tok_bytes *out, const chat_syntax *sy, int in_reasoning, pt_err *err) {
    int rc = put_until(out, "think", &sy->think_close, 1, 0, err);
    rc = rc || gput(out, "ws ::= [ \\n]{0,4}\n", err);
    if (in_reasoning < 0) return rc || gput(out, "root ::= ws body\n", err); /* thinking off */
    if (in_reasoning) return rc || gput(out, "root ::= think0 ws body\n", err);
    rc = rc || gput(out, "root ::= (", err) || put_lit(out, sy->think_open, err) ||
         gput(out, " ", err);
    if (sy->think_label) rc = rc || put_lit(out, sy->think_label, err) || gput(out, "? ", err);
    return rc || gput(out, "think0 ws)? body\n", err);
}

int chat_json_grammar(chat_format f, const json_t *schema, int in_reasoning, tok_bytes *out,
                      pt_err *err) {
    const chat_syntax *sy = syntax_of(f);
    if (!sy) return gram_from_json_schema_value(schema, GRAM_JSON, "", out, err);
    return gram_from_json_schema_value(schema, GRAM_JSON, "json-", out, err) ||
                   gput(out, "body ::= json-root\n", err) || put_root(out, sy, in_reasoning, err)
               ? -1
               : 0;
}

int chat_no_tool_grammar(chat_format f, int in_reasoning, tok_bytes *out, pt_err *err) {
    const chat_syntax *sy = syntax_of(f);
    if (!sy) return pt_errf(err, "tool grammar: unknown chat format");
    /* the call marker, and DeepSeek's wrapper of the calls (a streaming reader holds text back
     * at either: pt_chat_markers_of) */
    const char *forbidden[2] = {sy->call_open, DSG_CALLS_BEGIN};
    return put_until(out, "free", forbidden, f == CHAT_DEEPSEEK3 ? 2 : 1, 1, err) ||
                   gput(out, "body ::= free0\n", err) || put_root(out, sy, in_reasoning, err)
               ? -1
               : 0;
}

int chat_tool_grammar(chat_format f, const json_t *tools, const char *name, int parallel,
                      int in_reasoning, tok_bytes *out, pt_err *err) {
    const chat_syntax *sy = syntax_of(f);
    if (!sy) return pt_errf(err, "tool grammar: unknown chat format");
    tok_bytes any = {0};
    int rc = 0, n = 0;
    for (size_t i = 0; i < json_array_size(tools) && !rc; i++) {
        const json_t *fn = tool_fn(json_array_get(tools, i));
        const char *tn = json_string_value(json_object_get(fn, "name"));
        if (name && (!tn || strcmp(tn, name))) continue;
        char pre[32];
        snprintf(pre, sizeof pre, "t%zu-", i);
        rc = put_call(f, out, pre, fn, err) || gput(&any, n ? " | " : "", err) ||
             gput(&any, pre, err) || gput(&any, "call", err);
        n++;
    }
    if (!rc && !n)
        rc = name ? pt_errf(err, "tool grammar: no tool named '%s' in the tools", name)
                  : pt_errf(err, "tool grammar: no tools");
    rc = rc || gput(out, "call ::= ", err) || gput(out, any.v, err) || gput(out, "\n", err);
    const char *sep = f == CHAT_QWEN3 ? "\"\\n\" " : "";
    char line[256];
    snprintf(line, sizeof line, "calls ::= call%s%s%s\n", parallel ? " (" : "", parallel ? sep : "",
             parallel ? "call)*" : "");
    rc = rc || gput(out, line, err);
    if (f == CHAT_DEEPSEEK3)
        rc = rc || gput(out, "body ::= ", err) || put_lit(out, DSG_CALLS_BEGIN, err) ||
             gput(out, " calls ", err) || put_lit(out, DSG_CALLS_END, err) || gput(out, "\n", err);
    else
        rc = rc || gput(out, "body ::= calls\n", err);
    rc = rc || put_root(out, sy, in_reasoning, err);
    tok_bytes_free(&any);
    return rc ? -1 : 0;
}
