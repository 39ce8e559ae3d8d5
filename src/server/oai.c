/* oai.c — OpenAI request parsing and reply / stream-event JSON (the streaming
 * splitter is front/split.c). See oai.h. */
#include "server/oai.h"

#include <ctype.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "front/front.h"

/* ===== Small helpers ===== */

/* Append one server-sent event: "data: JSON\n\n" (with "event: TYPE\n" first
 * when type is given); steals j. */
static int sse(pt_buf *out, const char *type, json_t *j) {
    if (!j) return -1;
    char *s = json_dumps(j, JSON_COMPACT);
    json_decref(j);
    if (!s) return -1;
    int rc = 0;
    if (type)
        rc |= pt_buf_append(out, "event: ", 7) | pt_buf_append(out, type, strlen(type)) |
              pt_buf_append(out, "\n", 1);
    rc |= pt_buf_append(out, "data: ", 6) | pt_buf_append(out, s, strlen(s)) |
          pt_buf_append(out, "\n\n", 2);
    free(s);
    return rc;
}

char *oai_error_body(const char *type, const char *code, const char *param, const char *message) {
    pt_buf m = {0};
    if (pt_utf8_repair(message, strlen(message), &m) < 0) return NULL;
    json_t *j = json_pack("{s:{s:s, s:s, s:s?, s:s?}}", "error", "message", m.v, "type", type,
                          "param", param && *param ? param : NULL, "code", code);
    pt_buf_free(&m);
    char *s = j ? json_dumps(j, JSON_COMPACT) : NULL;
    json_decref(j);
    return s;
}

/* ===== Requests ===== */

/* Where a request's error goes: the caller's buffer, and the field it names
 * (OpenAI's error.param; empty when the error is not about one field). */
typedef struct errbuf {
    char *s;
    size_t n;
    char param[OAI_PARAM_MAX];
    int omitted; /* image / audio / file parts replaced by a placeholder so far */
} errbuf;

static int vbad(errbuf *err, const char *fmt, va_list ap) __attribute__((format(printf, 2, 0)));
static int vbad(errbuf *err, const char *fmt, va_list ap) {
    if (err->s && err->n) vsnprintf(err->s, err->n, fmt, ap);
    return -1;
}

/* The message of a 400; -1, so that a reader can `return bad(...)`. */
static int bad(errbuf *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int bad(errbuf *err, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vbad(err, fmt, ap);
    va_end(ap);
    return -1;
}

/* bad() for an error about one field: param is its path ("messages[0].content"),
 * which becomes error.param. */
static int bad_at(errbuf *err, const char *param, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int bad_at(errbuf *err, const char *param, const char *fmt, ...) {
    snprintf(err->param, sizeof err->param, "%s", param);
    va_list ap;
    va_start(ap, fmt);
    vbad(err, fmt, ap);
    va_end(ap);
    return -1;
}

/* An optional number field in [lo, hi]: 0 absent (or null), 1 set, -1 bad. */
static int opt_num(const json_t *o, const char *key, double lo, double hi, double *out,
                   errbuf *err) {
    const json_t *v = json_object_get(o, key);
    if (!v || json_is_null(v)) return 0;
    if (!json_is_number(v)) return bad_at(err, key, "'%s' must be a number", key);
    double d = json_number_value(v);
    if (!(d >= lo && d <= hi))
        return bad_at(err, key, "'%s' is %g; expected a value in [%g, %g]", key, d, lo, hi);
    *out = d;
    return 1;
}

static int opt_int(const json_t *o, const char *key, long long lo, long long hi, long long *out,
                   errbuf *err) {
    const json_t *v = json_object_get(o, key);
    if (!v || json_is_null(v)) return 0;
    if (!json_is_integer(v)) return bad_at(err, key, "'%s' must be an integer", key);
    long long d = json_integer_value(v);
    if (d < lo || d > hi)
        return bad_at(err, key, "'%s' is %lld; expected an integer in [%lld, %lld]", key, d, lo,
                      hi);
    *out = d;
    return 1;
}

static int opt_bool(const json_t *o, const char *key, int *out, errbuf *err) {
    const json_t *v = json_object_get(o, key);
    if (!v || json_is_null(v)) return 0;
    if (!json_is_boolean(v)) return bad_at(err, key, "'%s' must be true or false", key);
    *out = json_is_true(v);
    return 1;
}

/* What stands in for a part the model cannot read (NULL: a part type nobody sends). Replacing
 * it, rather than refusing the request, keeps a client that resends its whole history (Codex
 * after `--image` or its view_image tool) working on every later turn. */
static const char *omitted_part(const char *ty) {
    if (!strcmp(ty, "image_url") || !strcmp(ty, "input_image") || !strcmp(ty, "image"))
        return "[image omitted: this model reads text only]";
    if (!strcmp(ty, "input_audio") || !strcmp(ty, "audio"))
        return "[audio omitted: this model reads text only]";
    if (!strcmp(ty, "file") || !strcmp(ty, "input_file"))
        return "[file omitted: this model reads text only]";
    return NULL;
}

/* Text of a content value: a string, null, or an array of text parts (image, audio and file
 * parts become a placeholder, counted in err->omitted). */
static int content_text(const json_t *c, const char *where, pt_buf *out, errbuf *err) {
    out->n = 0;
    if (pt_buf_append(out, "", 0)) return bad(err, "out of memory");
    if (!c || json_is_null(c)) return 0;
    if (json_is_string(c))
        return pt_buf_append(out, json_string_value(c), json_string_length(c)) ? -1 : 0;
    if (!json_is_array(c))
        return bad(err, "%s: 'content' must be a string or an array of parts", where);
    size_t i;
    const json_t *part;
    json_array_foreach(c, i, part) {
        const char *ty = json_string_value(json_object_get(part, "type"));
        const json_t *t = json_object_get(part, "text");
        if (!json_is_object(part) || !ty)
            return bad(err, "%s: content part %zu has no 'type'", where, i);
        const char *instead = omitted_part(ty);
        if (instead) {
            err->omitted++;
            if (pt_buf_append(out, instead, strlen(instead))) return bad(err, "out of memory");
            continue;
        }
        if (strcmp(ty, "text") && strcmp(ty, "input_text") && strcmp(ty, "output_text") &&
            strcmp(ty, "refusal"))
            return bad(err, "%s: content part type '%s' is not supported", where, ty);
        if (!strcmp(ty, "refusal")) t = json_object_get(part, "refusal");
        if (!json_is_string(t))
            return bad(err, "%s: content part %zu has no 'text' string", where, i);
        if (pt_buf_append(out, json_string_value(t), json_string_length(t)))
            return bad(err, "out of memory");
    }
    return 0;
}

/* OpenAI's checks of one message before its content is read: a known role, content unless an
 * assistant message carries tool_calls or a refusal, and a tool message's tool_call_id. `where` is
 * the message's path ("messages[2]"); 0, or -1 with err. */
static int check_message(const json_t *m, const char *where, const char *role, errbuf *err) {
    char field[OAI_PARAM_MAX];
    snprintf(field, sizeof field, "%s.role", where);
    if (strcmp(role, "system") && strcmp(role, "user") && strcmp(role, "assistant") &&
        strcmp(role, "tool"))
        return bad_at(err, field,
                      "%s: unknown role '%s' (system, developer, user, assistant, tool)", where,
                      role);
    const json_t *tc = json_object_get(m, "tool_calls");
    const json_t *content = json_object_get(m, "content");
    int may_omit = !strcmp(role, "assistant") && ((json_is_array(tc) && json_array_size(tc)) ||
                                                  json_is_string(json_object_get(m, "refusal")));
    if ((!content || json_is_null(content)) && !may_omit) {
        snprintf(field, sizeof field, "%s.content", where);
        return bad_at(err, field,
                      "%s.content is missing: a %s message needs content (only an assistant "
                      "message with tool_calls or a refusal may omit it)",
                      where, role);
    }
    if (!strcmp(role, "tool") && !json_is_string(json_object_get(m, "tool_call_id"))) {
        snprintf(field, sizeof field, "%s.tool_call_id", where);
        return bad_at(err, field,
                      "%s.tool_call_id is missing: a tool message names the call it answers",
                      where);
    }
    return 0;
}

/* An assistant message's tool_calls: an array of calls that each name their function. */
static int check_tool_calls(const json_t *tc, const char *where, errbuf *err) {
    if (tc && !json_is_null(tc) && !json_is_array(tc))
        return bad(err, "%s: 'tool_calls' must be an array", where);
    size_t k;
    const json_t *call;
    json_array_foreach(tc, k, call) {
        const json_t *fn = json_object_get(call, "function");
        if (!json_is_object(fn) || !json_is_string(json_object_get(fn, "name")))
            return bad(err, "%s: tool_calls[%zu] needs function.name", where, k);
    }
    return 0;
}

/* Check one chat message and return the normalised copy chat_render takes
 * (developer -> system, content as a string). NULL with err. `list` is the
 * array's name in the request ("messages", "input"), for error.param. */
static json_t *norm_message(const json_t *m, const char *list, size_t i, errbuf *err) {
    char where[48], field[OAI_PARAM_MAX];
    snprintf(where, sizeof where, "%s[%zu]", list, i);
    if (!json_is_object(m)) return bad_at(err, where, "%s must be an object", where), NULL;
    const char *role = json_string_value(json_object_get(m, "role"));
    snprintf(field, sizeof field, "%s.role", where);
    if (!role) return bad_at(err, field, "%s: 'role' is missing or not a string", where), NULL;
    if (!strcmp(role, "developer")) role = "system";
    const json_t *tc = json_object_get(m, "tool_calls");
    pt_buf c = {0};
    if (check_message(m, where, role, err) ||
        content_text(json_object_get(m, "content"), where, &c, err) ||
        check_tool_calls(tc, where, err)) {
        pt_buf_free(&c);
        return NULL;
    }
    json_t *o = json_pack("{s:s, s:s%}", "role", role, "content", c.v, c.n);
    pt_buf_free(&c);
    if (!o) return bad(err, "out of memory"), NULL;
    const json_t *rc = json_object_get(m, "reasoning_content");
    if (!rc) rc = json_object_get(m, "reasoning");
    if (json_is_string(rc)) json_object_set(o, "reasoning_content", (json_t *)rc);
    if (tc && !json_is_null(tc)) json_object_set(o, "tool_calls", (json_t *)tc);
    const json_t *id = json_object_get(m, "tool_call_id");
    if (json_is_string(id)) json_object_set(o, "tool_call_id", (json_t *)id);
    const json_t *nm = json_object_get(m, "name");
    if (json_is_string(nm)) json_object_set(o, "name", (json_t *)nm);
    return o;
}

/* tool_choice: none, auto, required, or an object naming one function (r->tool_name; the
 * function must then be among the tools). */
static int read_tool_choice(const json_t *choice, oai_req *r, errbuf *err) {
    if (!choice || json_is_null(choice)) return 0;
    if (json_is_string(choice)) {
        const char *c = json_string_value(choice);
        if (!strcmp(c, "none"))
            r->tool_mode = OAI_TOOLS_NONE;
        else if (!strcmp(c, "required"))
            r->tool_mode = OAI_TOOLS_REQUIRED;
        else if (strcmp(c, "auto"))
            return bad_at(err, "tool_choice",
                          "'tool_choice' must be none, auto, required or a function");
        return 0;
    }
    if (!json_is_object(choice)) return bad(err, "'tool_choice' must be a string or an object");
    const json_t *fn = json_object_get(choice, "function");
    const char *only =
        json_string_value(fn ? json_object_get(fn, "name") : json_object_get(choice, "name"));
    if (!only) return bad_at(err, "tool_choice", "'tool_choice' names no function");
    r->tool_mode = OAI_TOOLS_REQUIRED;
    if (!(r->tool_name = strdup(only))) return bad(err, "out of memory");
    return 0;
}

/* One function tool as pt_chat_render takes it: {type:"function", function:{name,
 * description, parameters}} (parameters default to an empty object schema). */
static json_t *chat_tool(const json_t *fn, const char *name) {
    const json_t *params = json_object_get(fn, "parameters");
    json_t *f = json_pack("{s:s}", "name", name);
    const json_t *d = json_object_get(fn, "description");
    if (json_is_string(d)) json_object_set(f, "description", (json_t *)d);
    json_object_set_new(f, "parameters",
                        json_is_object(params)
                            ? json_incref((json_t *)params)
                            : json_pack("{s:s, s:{}}", "type", "object", "properties"));
    return json_pack("{s:s, s:o}", "type", "function", "function", f);
}

/* The tools array (chat: {type:"function", function:{name,...}}; flat, as the Responses API
 * writes them: {type:"function", name,...}) into r->tools, the function tool_choice names
 * alone when it names one; NULL when no function tool is left. */
static int read_tool_list(const json_t *tools, int flat, oai_req *r, errbuf *err) {
    if (!json_is_array(tools)) return bad(err, "'tools' must be an array");
    const char *only = r->tool_name;
    json_t *t = json_array();
    size_t i;
    const json_t *tool;
    json_array_foreach(tools, i, tool) {
        const char *ty = json_string_value(json_object_get(tool, "type"));
        if (!json_is_object(tool) || !ty) {
            json_decref(t);
            return bad(err, "tools[%zu] must be an object with a 'type'", i);
        }
        if (strcmp(ty, "function"))
            continue; /* built-in tools (web_search, ...) are not ours to run */
        const json_t *fn = flat ? tool : json_object_get(tool, "function");
        const char *name = json_string_value(json_object_get(fn, "name"));
        const json_t *params = json_object_get(fn, "parameters");
        if (!name || !*name) {
            char field[OAI_PARAM_MAX];
            snprintf(field, sizeof field, flat ? "tools[%zu].name" : "tools[%zu].function.name", i);
            json_decref(t);
            return bad_at(err, field, "%s is missing: a function tool needs a non-empty name",
                          field);
        }
        if (!json_is_object(fn) || (params && !json_is_null(params) && !json_is_object(params))) {
            json_decref(t);
            return bad(err, "tools[%zu]: a function needs a 'name' string and 'parameters' object",
                       i);
        }
        if (!only || !strcmp(only, name)) json_array_append_new(t, chat_tool(fn, name));
    }
    if (only && json_array_size(t) == 0) {
        json_decref(t);
        return bad(err, "'tool_choice' names '%s', which is not in 'tools'", only);
    }
    if (json_array_size(t))
        r->tools = t;
    else
        json_decref(t);
    return 0;
}

/* tools and tool_choice, and what they leave for the caller to constrain (r->tool_mode). */
static int read_tools(const json_t *j, int api, oai_req *r, errbuf *err) {
    const json_t *tools = json_object_get(j, "tools"), *choice = json_object_get(j, "tool_choice");
    int no_tools = !tools || json_is_null(tools);
    /* Chat Completions refuses a tool_choice without tools, as OpenAI does (Responses clients,
     * Codex among them, may send tool_choice on its own). */
    if (api != OAI_RESPONSES && choice && !json_is_null(choice) && no_tools)
        return bad_at(err, "tool_choice", "'tool_choice' is only allowed when 'tools' is given");
    if (read_tool_choice(choice, r, err)) return -1;
    if (!no_tools && read_tool_list(tools, api == OAI_RESPONSES, r, err)) return -1;
    /* no tools (none offered, or only built-in ones): nothing to constrain */
    if (!r->tools) r->tool_mode = OAI_TOOLS_AUTO;
    if (r->tool_mode == OAI_TOOLS_REQUIRED && r->json_schema)
        return bad_at(
            err, "tool_choice",
            "'tool_choice' forcing a call cannot be combined with a JSON response format");
    if (r->json_schema) r->tool_mode = OAI_TOOLS_AUTO; /* the JSON grammar holds no calls */
    return 0;
}

/* A function_call input item: a call of the assistant message just before it, or of a new
 * assistant message (which takes the reasoning item before it, *pending). */
static int input_function_call(const json_t *it, size_t i, json_t *msgs, const char **pending,
                               errbuf *err) {
    json_t *last = json_array_size(msgs) ? json_array_get(msgs, json_array_size(msgs) - 1) : NULL;
    const char *last_role = last ? json_string_value(json_object_get(last, "role")) : NULL;
    const char *name = json_string_value(json_object_get(it, "name"));
    const char *args = json_string_value(json_object_get(it, "arguments"));
    const char *cid = json_string_value(json_object_get(it, "call_id"));
    if (!name || !args)
        return bad(err, "input[%zu]: a function_call needs 'name' and 'arguments'", i);
    json_t *call = json_pack("{s:s, s:s, s:{s:s, s:s}}", "id", cid ? cid : "", "type", "function",
                             "function", "name", name, "arguments", args);
    json_t *calls = last && last_role && !strcmp(last_role, "assistant")
                        ? json_object_get(last, "tool_calls")
                        : NULL;
    if (calls) {
        json_array_append_new(calls, call);
    } else if (last && last_role && !strcmp(last_role, "assistant")) {
        json_object_set_new(last, "tool_calls", json_pack("[o]", call));
    } else {
        json_t *m =
            json_pack("{s:s, s:s, s:[o]}", "role", "assistant", "content", "", "tool_calls", call);
        if (*pending) json_object_set_new(m, "reasoning_content", json_string(*pending));
        *pending = NULL;
        json_array_append_new(msgs, m);
    }
    return 0;
}

/* A function_call_output input item: the tool message answering call_id. */
static int input_call_output(const json_t *it, json_t *msgs, errbuf *err) {
    const char *cid = json_string_value(json_object_get(it, "call_id"));
    pt_buf c = {0};
    if (content_text(json_object_get(it, "output"), "function_call_output", &c, err)) {
        pt_buf_free(&c);
        return -1;
    }
    json_array_append_new(msgs, json_pack("{s:s, s:s%, s:s}", "role", "tool", "content", c.v, c.n,
                                          "tool_call_id", cid ? cid : ""));
    pt_buf_free(&c);
    return 0;
}

/* Responses API input items -> chat messages. */
static int responses_input(const json_t *body, json_t *msgs, errbuf *err) {
    const json_t *ins = json_object_get(body, "instructions");
    if (ins && !json_is_null(ins)) {
        if (!json_is_string(ins)) return bad(err, "'instructions' must be a string");
        json_array_append_new(msgs, json_pack("{s:s, s:O}", "role", "system", "content", ins));
    }
    const json_t *in = json_object_get(body, "input");
    if (!in) return bad(err, "'input' is required");
    if (json_is_string(in)) {
        json_array_append_new(msgs, json_pack("{s:s, s:O}", "role", "user", "content", in));
        return 0;
    }
    if (!json_is_array(in)) return bad(err, "'input' must be a string or an array of items");
    const char *pending_reasoning = NULL; /* a reasoning item's text, for the answer after it */
    size_t i;
    const json_t *it;
    json_array_foreach(in, i, it) {
        if (!json_is_object(it)) return bad(err, "input[%zu] must be an object", i);
        const char *ty = json_string_value(json_object_get(it, "type"));
        const char *role = json_string_value(json_object_get(it, "role"));
        if (!ty && role) ty = "message";
        if (!ty) return bad(err, "input[%zu] has no 'type'", i);
        if (!strcmp(ty, "message")) {
            json_t *m = norm_message(it, "input", i, err);
            if (!m) return -1;
            if (pending_reasoning && !strcmp(role, "assistant"))
                json_object_set_new(m, "reasoning_content", json_string(pending_reasoning));
            pending_reasoning = NULL;
            json_array_append_new(msgs, m);
        } else if (!strcmp(ty, "function_call")) {
            if (input_function_call(it, i, msgs, &pending_reasoning, err)) return -1;
        } else if (!strcmp(ty, "function_call_output")) {
            if (input_call_output(it, msgs, err)) return -1;
        } else if (!strcmp(ty, "reasoning")) {
            /* the text of a reasoning item we produced comes back in content[] or summary[] */
            const json_t *parts = json_object_get(it, "content");
            if (!json_is_array(parts)) parts = json_object_get(it, "summary");
            const json_t *p0 = json_is_array(parts) ? json_array_get(parts, 0) : NULL;
            pending_reasoning = json_string_value(json_object_get(p0, "text"));
        } else {
            /* other item kinds (web search calls, images...) carry nothing this model can read */
        }
    }
    return 0;
}

/* logit_bias: {"token id": bias in [-100, 100]} (chat, completions). A key is a
 * token id written as OpenAI's clients write it (decimal digits, no sign, no
 * leading zero), so two keys never name one token. */
static int read_bias(const json_t *o, oai_req *r, errbuf *err) {
    const json_t *lb = json_object_get(o, "logit_bias");
    if (!lb || json_is_null(lb)) return 0;
    if (!json_is_object(lb))
        return bad_at(err, "logit_bias", "'logit_bias' must be an object of token id -> bias");
    size_t n = json_object_size(lb);
    if (!n) return 0;
    r->bias = calloc(n, sizeof *r->bias);
    if (!r->bias) return bad(err, "out of memory");
    const char *key;
    const json_t *v;
    int i = 0;
    json_object_foreach((json_t *)lb, key, v) {
        size_t kl = strlen(key);
        int digits = kl > 0 && kl <= 10 && (key[0] != '0' || kl == 1);
        for (size_t k = 0; digits && k < kl; k++)
            digits = key[k] >= '0' && key[k] <= '9';
        long long id = digits ? strtoll(key, NULL, 10) : -1;
        if (id < 0 || id > INT32_MAX)
            return bad_at(err, "logit_bias", "'logit_bias' key '%s' is not a token id", key);
        if (!json_is_number(v) || !(json_number_value(v) >= -100 && json_number_value(v) <= 100))
            return bad_at(err, "logit_bias",
                          "'logit_bias' for token %lld must be a number in [-100, 100]", id);
        r->bias[i].token = (int32_t)id;
        r->bias[i].bias = (float)json_number_value(v);
        i++;
    }
    r->sp.logit_bias = r->bias;
    r->sp.n_logit_bias = i;
    r->sp_set |= PT_SAMPLING_LOGIT_BIAS;
    return 0;
}

int oai_bias_check(const oai_req *r, int n_vocab, char *err, size_t err_len) {
    for (int i = 0; i < r->sp.n_logit_bias; i++)
        if (r->bias[i].token >= n_vocab)
            return snprintf(err, err_len,
                            "'logit_bias' names token %d; the vocabulary's ids are 0 to %d",
                            (int)r->bias[i].token, n_vocab - 1),
                   -1;
    return 0;
}

void oai_req_free(oai_req *r) {
    free(r->bias);
    json_decref(r->messages);
    json_decref(r->tools);
    free(r->prompt);
    free(r->prev_id);
    free(r->json_schema);
    free(r->tool_name);
    for (int i = 0; i < r->n_stops; i++)
        free(r->stops[i]);
    memset(r, 0, sizeof *r);
}

/* ===== Which request fields mean what =====
 *
 * Every top-level field of the three endpoints as the openai SDK's types list
 * them, and the extensions petrel reads. `refused` names why petrel cannot do
 * what the field asks: such a field is a 400 naming it unless it is absent or
 * says "off" (null, false, 0, "" or []). The others are read below, or
 * accepted and ignored for the reason the README's request-field table gives.
 * A field in no row is ignored and named in the server's log line. Fields
 * refused only for some values (n, best_of, modalities, response_format,
 * text.format, include, truncation) are checked where they are read. */
enum { F_CHAT = 1u << OAI_CHAT, F_COMP = 1u << OAI_COMPLETIONS, F_RESP = 1u << OAI_RESPONSES };
#define F_ALL (F_CHAT | F_COMP | F_RESP)
static const struct {
    const char *name;
    unsigned apis;
    const char *refused;
} FIELDS[] = {
    {"model", F_ALL, NULL},
    {"messages", F_CHAT, NULL},
    {"prompt", F_COMP, NULL},
    {"prompt", F_RESP, "stored prompt templates are OpenAI's; send the input itself"},
    {"input", F_RESP, NULL},
    {"previous_response_id", F_RESP, NULL},
    {"instructions", F_RESP, NULL},
    {"stream", F_ALL, NULL},
    {"stream_options", F_ALL, NULL},
    {"temperature", F_ALL, NULL},
    {"top_p", F_ALL, NULL},
    {"top_k", F_ALL, NULL},
    {"min_p", F_ALL, NULL},
    {"repeat_penalty", F_ALL, NULL},
    {"presence_penalty", F_CHAT | F_COMP, NULL},
    {"frequency_penalty", F_CHAT | F_COMP, NULL},
    {"seed", F_CHAT | F_COMP, NULL},
    {"logprobs", F_CHAT | F_COMP, NULL},
    {"top_logprobs", F_CHAT, NULL},
    {"echo", F_COMP, NULL},
    {"logit_bias", F_CHAT | F_COMP, NULL},
    {"stop", F_CHAT | F_COMP, NULL},
    {"n", F_CHAT | F_COMP, NULL},
    {"best_of", F_COMP, NULL},
    {"max_tokens", F_CHAT | F_COMP, NULL},
    {"max_completion_tokens", F_CHAT, NULL},
    {"max_output_tokens", F_RESP, NULL},
    {"tools", F_CHAT | F_RESP, NULL},
    {"tool_choice", F_CHAT | F_RESP, NULL},
    {"parallel_tool_calls", F_CHAT | F_RESP, NULL},
    {"reasoning_effort", F_CHAT, NULL},
    {"reasoning", F_RESP, NULL},
    {"chat_template_kwargs", F_CHAT | F_RESP, NULL},
    {"think", F_CHAT | F_RESP, NULL},
    {"modalities", F_CHAT, NULL},
    {"response_format", F_CHAT, NULL},
    {"text", F_RESP, NULL},
    {"include", F_RESP, NULL},
    {"truncation", F_RESP, NULL},
    {"user", F_ALL, NULL},
    {"metadata", F_CHAT | F_RESP, NULL},
    {"safety_identifier", F_CHAT | F_RESP, NULL},
    {"service_tier", F_CHAT | F_RESP, NULL},
    {"store", F_CHAT | F_RESP, NULL},
    {"prompt_cache_key", F_CHAT | F_RESP, NULL},
    {"prompt_cache_retention", F_CHAT | F_RESP, NULL},
    {"verbosity", F_CHAT, NULL},
    {"prediction", F_CHAT, NULL},
    {"context_management", F_RESP, NULL},
    {"client_metadata", F_RESP, NULL},
    {"audio", F_CHAT, "petrel generates text only"},
    {"function_call", F_CHAT, "the deprecated functions API; use 'tool_choice'"},
    {"functions", F_CHAT, "the deprecated functions API; use 'tools'"},
    {"web_search_options", F_CHAT, "petrel has no web search"},
    {"suffix", F_COMP, "no fill-in-the-middle template is applied"},
    {"background", F_RESP, "responses run in the foreground only"},
    {"conversation", F_RESP, "conversation objects are not kept; use previous_response_id"},
};

static int is_off(const json_t *v) {
    return json_is_null(v) || json_is_false(v) ||
           (json_is_number(v) && json_number_value(v) == 0) ||
           (json_is_string(v) && !json_string_length(v)) ||
           (json_is_array(v) && !json_array_size(v));
}

/* A field name as it may appear in a log line: letters, digits, _ . - only. */
static void add_ignored(oai_req *r, const char *key) {
    size_t n = strlen(r->ignored), cap = sizeof r->ignored;
    if (n + 6 >= cap) return;
    if (n) r->ignored[n++] = ',', r->ignored[n++] = ' ';
    for (const char *c = key; *c && n + 4 < cap; c++)
        r->ignored[n++] = (isalnum((unsigned char)*c) || strchr("_.-", *c)) ? *c : '?';
    if (n + 4 >= cap) memcpy(r->ignored + n, "...", 3), n += 3;
    r->ignored[n] = 0;
}

/* The table's verdict on each top-level field of body j. */
static int check_fields(const json_t *j, int api, oai_req *r, errbuf *err) {
    const char *key;
    const json_t *v;
    json_object_foreach((json_t *)j, key, v) {
        size_t i = 0, n = sizeof FIELDS / sizeof FIELDS[0];
        while (i < n && !(FIELDS[i].apis & (1u << api) && !strcmp(FIELDS[i].name, key)))
            i++;
        if (i == n)
            add_ignored(r, key);
        else if (FIELDS[i].refused && !is_off(v))
            return bad_at(err, key, "'%s' is not supported: %s", key, FIELDS[i].refused);
    }
    return 0;
}

/* ===== Reading a request, one concern at a time =====
 *
 * oai_parse_request runs the readers below in a fixed order, which is the order their errors
 * take precedence in: a request with two wrong fields hears of the first. Each reads the
 * fields of one concern into the oai_req, or refuses with a message for a 400. */

/* best_of (completions: 1 only) and modalities (text only). */
static int check_outputs(const json_t *j, int api, errbuf *err) {
    long long n;
    if (api == OAI_COMPLETIONS && opt_int(j, "best_of", 1, 1, &n, err) < 0) return -1;
    const json_t *mod = json_object_get(j, "modalities");
    if (!mod || json_is_null(mod)) return 0;
    if (!json_is_array(mod)) return bad_at(err, "modalities", "'modalities' must be an array");
    size_t i;
    const json_t *m;
    json_array_foreach(mod, i, m) {
        if (!json_is_string(m) || strcmp(json_string_value(m), "text"))
            return bad_at(err, "modalities", "'modalities' may only hold \"text\"");
    }
    return 0;
}

/* response_format (chat) / text.format (responses): json_object and json_schema constrain the
 * reply to the schema in r->json_schema (the caller compiles it into a grammar); text is the
 * default. */
static int read_response_format(const json_t *j, int api, oai_req *r, errbuf *err) {
    const json_t *fmt = json_object_get(j, "response_format");
    const char *where = "response_format";
    if (api == OAI_RESPONSES) {
        const json_t *text = json_object_get(j, "text");
        if (text && !json_is_null(text) && !json_is_object(text))
            return bad_at(err, "text", "'text' must be an object");
        fmt = json_object_get(text, "format");
        where = "text.format";
    }
    if (!fmt || json_is_null(fmt)) return 0;
    const char *ty = json_string_value(json_object_get(fmt, "type"));
    if (!ty) return bad_at(err, where, "'%s' must be an object with a 'type'", where);
    const json_t *schema = NULL;
    if (!strcmp(ty, "json_schema")) {
        /* chat: {"type":"json_schema","json_schema":{"name","schema","strict"}};
         * responses: {"type":"json_schema","name","schema","strict"} */
        const json_t *js = api == OAI_RESPONSES ? fmt : json_object_get(fmt, "json_schema");
        schema = json_object_get(js, "schema");
        if (!json_is_object(schema))
            return bad_at(err, where, "'%s' json_schema needs a 'schema' object", where);
    } else if (strcmp(ty, "json_object") && strcmp(ty, "text")) {
        return bad_at(err, where, "'%s' type '%s': expected text, json_object or json_schema",
                      where, ty);
    }
    if (!strcmp(ty, "text")) return 0;
    r->json_schema = schema ? json_dumps(schema, JSON_COMPACT) : strdup(PT_JSON_OBJECT_SCHEMA);
    if (!r->json_schema) return bad(err, "out of memory");
    snprintf(r->format_param, sizeof r->format_param, "%s", where);
    return 0;
}

/* The Responses API's include (no log probabilities) and truncation (petrel never drops
 * input: "disabled" only). */
static int check_responses_options(const json_t *j, int api, errbuf *err) {
    if (api != OAI_RESPONSES) return 0;
    const json_t *inc = json_object_get(j, "include");
    if (inc && !json_is_null(inc)) {
        size_t i;
        const json_t *s;
        if (!json_is_array(inc)) return bad_at(err, "include", "'include' must be an array");
        json_array_foreach(inc, i, s) {
            if (!json_is_string(s)) return bad_at(err, "include", "'include' holds strings");
            if (strstr(json_string_value(s), "logprobs"))
                return bad_at(err, "include", "'include' %s is not supported: %s",
                              json_string_value(s), "log probabilities are not returned");
        }
    }
    const char *tr = json_string_value(json_object_get(j, "truncation"));
    if (tr && strcmp(tr, "disabled"))
        return bad_at(err, "truncation",
                      "'truncation' '%s' is not supported: petrel never drops input; a prompt "
                      "longer than the context is a 400 (as with \"disabled\")",
                      tr);
    return 0;
}

/* parallel_tool_calls, model (any string: one model is served) and stream / stream_options. */
static int read_options(const json_t *j, int api, oai_req *r, errbuf *err) {
    int b;
    if (api != OAI_COMPLETIONS) {
        if (opt_bool(j, "parallel_tool_calls", &b, err) < 0) return -1;
        r->one_tool_call = json_is_false(json_object_get(j, "parallel_tool_calls"));
    }
    const json_t *model = json_object_get(j, "model");
    if (model && !json_is_string(model) && !json_is_null(model))
        return bad(err, "'model' must be a string");
    if (opt_bool(j, "stream", &r->stream, err) < 0) return -1;
    const json_t *so = json_object_get(j, "stream_options");
    if (!so || json_is_null(so)) return 0;
    if (!json_is_object(so)) return bad(err, "'stream_options' must be an object");
    return opt_bool(so, "include_usage", &r->include_usage, err) < 0 ? -1 : 0;
}

/* The sampling fields (r->sp, each one set named in r->sp_set for pt_sampling_override), n (1
 * only) and logit_bias. */
static int read_sampling(const json_t *j, int api, oai_req *r, errbuf *err) {
    double d;
    long long n;
    int b;
    if ((b = opt_num(j, "temperature", 0, 100, &d, err)) < 0) return -1;
    if (b) r->sp.temp = (float)d, r->sp_set |= PT_SAMPLING_TEMP;
    if ((b = opt_num(j, "top_p", 0, 1, &d, err)) < 0) return -1;
    if (b) r->sp.top_p = d > 0 ? (float)d : 1e-6f, r->sp_set |= PT_SAMPLING_TOP_P;
    if ((b = opt_int(j, "top_k", 0, 1 << 24, &n, err)) < 0) return -1;
    if (b) r->sp.top_k = (int)n, r->sp_set |= PT_SAMPLING_TOP_K;
    if ((b = opt_num(j, "min_p", 0, 1, &d, err)) < 0) return -1;
    if (b) r->sp.min_p = (float)d, r->sp_set |= PT_SAMPLING_MIN_P;
    if ((b = opt_num(j, "presence_penalty", -2, 2, &d, err)) < 0) return -1;
    if (b) r->sp.presence_penalty = (float)d, r->sp_set |= PT_SAMPLING_PRESENCE;
    if ((b = opt_num(j, "frequency_penalty", -2, 2, &d, err)) < 0) return -1;
    if (b) r->sp.frequency_penalty = (float)d, r->sp_set |= PT_SAMPLING_FREQUENCY;
    if ((b = opt_num(j, "repeat_penalty", 1e-3, 100, &d, err)) < 0) return -1;
    if (b) r->sp.repeat_penalty = (float)d, r->sp_set |= PT_SAMPLING_REPEAT;
    if ((b = opt_int(j, "seed", INT64_MIN, INT64_MAX, &n, err)) < 0) return -1;
    if (b) r->sp.seed = (uint64_t)n, r->sp_set |= PT_SAMPLING_SEED;
    if (opt_int(j, "n", 1, 1, &n, err) < 0) return -1;
    return api != OAI_RESPONSES ? read_bias(j, r, err) : 0;
}

/* Log-probabilities: chat's logprobs + top_logprobs; completions' logprobs N (each token's and
 * the N most likely, OpenAI: at most 5) and echo. */
static int read_logprobs(const json_t *j, int api, oai_req *r, errbuf *err) {
    long long n;
    int b;
    if (api == OAI_CHAT) {
        if (opt_bool(j, "logprobs", &r->logprobs, err) < 0) return -1;
        if ((b = opt_int(j, "top_logprobs", 0, PT_MAX_TOP_LOGPROBS, &n, err)) < 0) return -1;
        if (b && n > 0 && !r->logprobs)
            return bad_at(err, "top_logprobs", "'top_logprobs' needs 'logprobs': true");
        if (b) r->top_logprobs = (int)n;
    } else if (api == OAI_COMPLETIONS) {
        if ((b = opt_int(j, "logprobs", 0, 5, &n, err)) < 0) return -1;
        if (b) r->logprobs = 1, r->top_logprobs = (int)n;
        if (opt_bool(j, "echo", &r->echo, err) < 0) return -1;
        if (r->echo && r->logprobs)
            return bad_at(err, "echo",
                          "'echo' with 'logprobs' (the prompt's log-probabilities) is not "
                          "supported");
    }
    return 0;
}

/* max_tokens (chat, completions), max_completion_tokens (chat: it wins), max_output_tokens
 * (responses). */
static int read_max_tokens(const json_t *j, int api, oai_req *r, errbuf *err) {
    long long n;
    int b;
    const char *mt = api == OAI_RESPONSES ? "max_output_tokens" : "max_tokens";
    if ((b = opt_int(j, mt, 1, 1 << 24, &n, err)) < 0) return -1;
    if (b) r->max_tokens = (int)n;
    if (api == OAI_CHAT) {
        if ((b = opt_int(j, "max_completion_tokens", 1, 1 << 24, &n, err)) < 0) return -1;
        if (b) r->max_tokens = (int)n;
    }
    return 0;
}

/* stop: a string or up to OAI_MAX_STOPS non-empty strings ("" alone: none). */
static int read_stops(const json_t *j, oai_req *r, errbuf *err) {
    const json_t *stop = json_object_get(j, "stop");
    if (!stop || json_is_null(stop)) return 0;
    if (json_is_string(stop)) {
        if (json_string_length(stop)) r->stops[r->n_stops++] = strdup(json_string_value(stop));
    } else if (json_is_array(stop)) {
        if (json_array_size(stop) > OAI_MAX_STOPS)
            return bad(err, "'stop' has %zu strings; at most %d", json_array_size(stop),
                       OAI_MAX_STOPS);
        size_t i;
        const json_t *s;
        json_array_foreach(stop, i, s) {
            if (!json_is_string(s) || !json_string_length(s))
                return bad(err, "'stop' must hold non-empty strings");
            r->stops[r->n_stops++] = strdup(json_string_value(s));
        }
    } else {
        return bad(err, "'stop' must be a string or an array of strings");
    }
    for (int i = 0; i < r->n_stops; i++)
        if (!r->stops[i]) return bad(err, "out of memory");
    return 0;
}

/* Thinking on or off, as the servers clients know spell it: chat_template_kwargs.
 * enable_thinking (vLLM / llama.cpp), "think" (ollama), reasoning_effort "none" /
 * reasoning.effort "none". A value of the wrong type is no error, only ignored. */
static void read_thinking(const json_t *j, oai_req *r, errbuf *err) {
    int b;
    const json_t *kw = json_object_get(j, "chat_template_kwargs");
    if (json_is_object(kw) && opt_bool(kw, "enable_thinking", &b, err) > 0) r->thinking = b;
    if (opt_bool(j, "think", &b, err) > 0) r->thinking = b;
    const json_t *reff = json_object_get(j, "reasoning_effort");
    const json_t *rs = json_object_get(j, "reasoning");
    if (!reff && json_is_object(rs)) reff = json_object_get(rs, "effort");
    if (json_is_string(reff))
        r->thinking = strcmp(json_string_value(reff), "none") ? (r->thinking == 0 ? 0 : 1) : 0;
    if (err->n) err->s[0] = 0;
}

/* Completions' prompt: one non-empty string (or an array of exactly one), as valid UTF-8. */
static int read_prompt(const json_t *j, oai_req *r, errbuf *err) {
    const json_t *p = json_object_get(j, "prompt");
    if (json_is_array(p) && json_array_size(p) == 1) p = json_array_get(p, 0);
    if (!json_is_string(p)) return bad(err, "'prompt' is required and must be a string");
    if (!json_string_length(p)) return bad(err, "'prompt' is empty");
    pt_buf t = {0};
    if (pt_utf8_repair(json_string_value(p), json_string_length(p), &t) < 0)
        return bad(err, "out of memory");
    r->prompt = t.v;
    return 0;
}

/* Chat's messages, each checked and normalised (norm_message). */
static int read_messages(const json_t *j, oai_req *r, errbuf *err) {
    const json_t *ms = json_object_get(j, "messages");
    if (!json_is_array(ms) || !json_array_size(ms))
        return bad(err, "'messages' is required and must be a non-empty array");
    size_t i;
    const json_t *m;
    json_array_foreach(ms, i, m) {
        json_t *nm = norm_message(m, "messages", i, err);
        if (!nm) return -1;
        json_array_append_new(r->messages, nm);
    }
    return 0;
}

/* The Responses API's conversation: instructions and input (responses_input), the response
 * it continues (previous_response_id: the caller splices that conversation in) and store. */
static int read_responses(const json_t *j, oai_req *r, errbuf *err) {
    if (responses_input(j, r->messages, err)) return -1;
    r->n_instr = json_is_string(json_object_get(j, "instructions"));
    const json_t *prev = json_object_get(j, "previous_response_id");
    if (prev && !json_is_null(prev)) {
        if (!json_is_string(prev) || !json_string_length(prev) || json_string_length(prev) > 128)
            return bad_at(err, "previous_response_id",
                          "'previous_response_id' must be a response id string");
        if (!(r->prev_id = strdup(json_string_value(prev)))) return bad(err, "out of memory");
    }
    r->store = 1; /* OpenAI's default */
    return opt_bool(j, "store", &r->store, err) < 0 ? -1 : 0;
}

/* Chat and Responses: the conversation as chat-shaped messages, and its tools. */
static int read_conversation(const json_t *j, int api, oai_req *r, errbuf *err) {
    r->messages = json_array();
    if (api == OAI_CHAT ? read_messages(j, r, err) : read_responses(j, r, err)) return -1;
    if (!json_array_size(r->messages)) return bad(err, "the conversation is empty");
    return read_tools(j, api, r, err);
}

/* Every reader in turn on the body's object. */
static int read_body(const json_t *j, int api, oai_req *r, errbuf *err) {
    if (check_fields(j, api, r, err) || check_outputs(j, api, err) ||
        read_response_format(j, api, r, err) || check_responses_options(j, api, err))
        return -1;
    if (read_options(j, api, r, err) || read_sampling(j, api, r, err) ||
        read_logprobs(j, api, r, err) || read_max_tokens(j, api, r, err) || read_stops(j, r, err))
        return -1;
    read_thinking(j, r, err);
    return api == OAI_COMPLETIONS ? read_prompt(j, r, err) : read_conversation(j, api, r, err);
}

int oai_parse_request(int api, const char *body, size_t len, oai_req *r, char *err_s,
                      size_t err_len) {
    errbuf eb = {err_s, err_len, "", 0};
    memset(r, 0, sizeof *r);
    r->api = api;
    r->max_tokens = -1;
    r->thinking = -1;
    json_error_t je;
    json_t *j = json_loadb(body, len, JSON_REJECT_DUPLICATES, &je);
    if (!j)
        return bad(&eb, "the body is not valid JSON: %s (line %d, column %d)", je.text, je.line,
                   je.column);
    int rc =
        json_is_object(j) ? read_body(j, api, r, &eb) : bad(&eb, "the body must be a JSON object");
    json_decref(j);
    if (rc) {
        oai_req_free(r);
        memcpy(r->err_param, eb.param, sizeof r->err_param);
        return -1;
    }
    r->n_omitted = eb.omitted;
    return 0;
}

/* ===== Replies ===== */

json_t *oai_tool_calls(const pt_chat_parsed *p, const char *id_base) {
    if (!p || p->n_calls <= 0) return NULL;
    json_t *a = json_array();
    for (int i = 0; i < p->n_calls; i++) {
        char id[96];
        snprintf(id, sizeof id, "call_%s_%d", id_base, i);
        json_array_append_new(a, json_pack("{s:s, s:s, s:{s:s, s:s}}", "id", id, "type", "function",
                                           "function", "name", p->calls[i].name, "arguments",
                                           p->calls[i].arguments));
    }
    return a;
}

const char *oai_finish_reason(int reason, int n_calls) {
    if (reason == PT_GEN_LENGTH || reason == PT_GEN_CONTEXT) return "length";
    return n_calls > 0 ? "tool_calls" : "stop";
}

static json_t *usage_json(int api, const oai_result *r) {
    if (api == OAI_RESPONSES)
        return json_pack("{s:i, s:{s:i}, s:i, s:{s:i}, s:i}", "input_tokens", r->prompt_tokens,
                         "input_tokens_details", "cached_tokens", r->cached_tokens, "output_tokens",
                         r->completion_tokens, "output_tokens_details", "reasoning_tokens",
                         r->reasoning_tokens, "total_tokens",
                         r->prompt_tokens + r->completion_tokens);
    return json_pack("{s:i, s:i, s:i, s:{s:i}, s:{s:i}}", "prompt_tokens", r->prompt_tokens,
                     "completion_tokens", r->completion_tokens, "total_tokens",
                     r->prompt_tokens + r->completion_tokens, "prompt_tokens_details",
                     "cached_tokens", r->cached_tokens, "completion_tokens_details",
                     "reasoning_tokens", r->reasoning_tokens);
}

/* The function_call output item of the response's i-th call: ids "fc_<id>_<i>" and the call_id
 * "call_<id>_<i>" (as oai_response_turn names the call for the next turn). */
static json_t *function_call_item(const oai_result *r, int i, const char *status,
                                  const char *arguments) {
    char id[96], cid[96];
    snprintf(id, sizeof id, "fc_%s_%d", r->id + 5, i);
    snprintf(cid, sizeof cid, "call_%s_%d", r->id + 5, i);
    return json_pack("{s:s, s:s, s:s, s:s, s:s, s:s}", "id", id, "type", "function_call", "status",
                     status, "call_id", cid, "name", r->parsed->calls[i].name, "arguments",
                     arguments);
}

/* The output items of a finished response: reasoning, message, function calls. */
static json_t *responses_items(const oai_result *r) {
    json_t *out = json_array();
    const pt_chat_parsed *p = r->parsed;
    if (p->reasoning[0])
        json_array_append_new(out, json_pack("{s:s+, s:s, s:[], s:[{s:s, s:s}]}", "id", "rs_",
                                             r->id + 5, "type", "reasoning", "summary", "content",
                                             "type", "reasoning_text", "text", p->reasoning));
    if (p->content[0] || !p->n_calls)
        json_array_append_new(out, json_pack("{s:s+, s:s, s:s, s:s, s:[{s:s, s:s, s:[]}]}", "id",
                                             "msg_", r->id + 5, "type", "message", "status",
                                             "completed", "role", "assistant", "content", "type",
                                             "output_text", "text", p->content, "annotations"));
    for (int i = 0; i < p->n_calls; i++)
        json_array_append_new(out, function_call_item(r, i, "completed", p->calls[i].arguments));
    return out;
}

static json_t *response_object(const oai_result *r, const char *status, json_t *output,
                               int with_usage) {
    json_t *o = json_pack("{s:s, s:s, s:I, s:s, s:s, s:o, s:n}", "id", r->id, "object", "response",
                          "created_at", (json_int_t)r->created, "status", status, "model", r->model,
                          "output", output ? output : json_array(), "error");
    json_object_set_new(o, "previous_response_id",
                        r->previous_response_id ? json_string(r->previous_response_id)
                                                : json_null());
    json_object_set_new(o, "store", json_boolean(r->store));
    if (!strcmp(status, "incomplete"))
        json_object_set_new(o, "incomplete_details",
                            json_pack("{s:s}", "reason", "max_output_tokens"));
    else
        json_object_set_new(o, "incomplete_details", json_null());
    json_object_set_new(o, "usage", with_usage ? usage_json(OAI_RESPONSES, r) : json_null());
    return o;
}

/* {token, logprob, bytes} of one token. */
static json_t *lp_item(const pt_engine *e, int flags, const pt_logprob *t) {
    size_t n = 0;
    const char *p = pt_token_piece(e, t->id, flags, &n);
    pt_buf s = {0};
    if (pt_utf8_repair(p ? p : "", p ? n : 0, &s) < 0) return NULL;
    json_t *bytes = json_array();
    for (size_t i = 0; p && i < n; i++)
        json_array_append_new(bytes, json_integer((unsigned char)p[i]));
    json_t *o = json_pack("{s:s%, s:f, s:o}", "token", s.v ? s.v : "", s.n, "logprob",
                          (double)t->logprob, "bytes", bytes);
    pt_buf_free(&s);
    return o;
}

json_t *oai_logprob_entry(const pt_engine *e, int flags, const pt_logprob *sampled,
                          const pt_logprob *top, int n_top) {
    json_t *o = lp_item(e, flags, sampled);
    json_t *alts = json_array();
    for (int i = 0; o && alts && i < n_top; i++)
        json_array_append_new(alts, lp_item(e, flags, &top[i]));
    if (o) json_object_set_new(o, "top_logprobs", alts);
    return o;
}

/* Completions' legacy shape of entries: {tokens, token_logprobs, top_logprobs, text_offset},
 * offsets counted from `offset` in bytes; *end: the offset after the last token. */
static json_t *legacy_logprobs(const json_t *entries, size_t offset, size_t *end) {
    json_t *toks = json_array(), *lps = json_array(), *tops = json_array(), *offs = json_array();
    size_t i;
    const json_t *x;
    json_array_foreach(entries, i, x) {
        json_array_append(toks, json_object_get(x, "token"));
        json_array_append(lps, json_object_get(x, "logprob"));
        json_t *m = json_object();
        size_t k;
        const json_t *a;
        json_array_foreach(json_object_get(x, "top_logprobs"), k, a) {
            const char *t = json_string_value(json_object_get(a, "token"));
            if (t && !json_object_get(m, t)) json_object_set(m, t, json_object_get(a, "logprob"));
        }
        json_array_append_new(tops, m);
        json_array_append_new(offs, json_integer((json_int_t)offset));
        offset += json_array_size(json_object_get(x, "bytes"));
    }
    if (end) *end = offset;
    return json_pack("{s:o, s:o, s:o, s:o}", "tokens", toks, "token_logprobs", lps, "top_logprobs",
                     tops, "text_offset", offs);
}

json_t *oai_response_turn(const oai_result *r) {
    const pt_chat_parsed *p = r->parsed;
    json_t *m = json_pack("{s:s, s:s}", "role", "assistant", "content", p->content);
    if (m && p->reasoning[0])
        json_object_set_new(m, "reasoning_content", json_string(p->reasoning));
    /* the call ids the output items carry (function_call_item) */
    json_t *calls = m ? oai_tool_calls(p, r->id + 5) : NULL;
    if (calls) json_object_set_new(m, "tool_calls", calls);
    return m;
}

char *oai_reply(int api, const oai_result *r) {
    json_t *j = NULL;
    if (api == OAI_COMPLETIONS) {
        j = json_pack("{s:s, s:s, s:I, s:s, s:[{s:s, s:i, s:o, s:s}], s:o}", "id", r->id, "object",
                      "text_completion", "created", (json_int_t)r->created, "model", r->model,
                      "choices", "text", r->text, "index", 0, "logprobs",
                      r->logprobs ? legacy_logprobs(r->logprobs, 0, NULL) : json_null(),
                      "finish_reason", oai_finish_reason(r->reason, 0), "usage",
                      usage_json(api, r));
    } else if (api == OAI_CHAT) {
        const pt_chat_parsed *p = r->parsed;
        json_t *calls = oai_tool_calls(p, r->id + 9);
        json_t *msg = json_pack("{s:s}", "role", "assistant");
        json_object_set_new(msg, "content",
                            p->content[0] || !calls ? json_string(p->content) : json_null());
        if (p->reasoning[0])
            json_object_set_new(msg, "reasoning_content", json_string(p->reasoning));
        if (calls) json_object_set_new(msg, "tool_calls", calls);
        json_t *lp =
            r->logprobs ? json_pack("{s:O, s:n}", "content", r->logprobs, "refusal") : json_null();
        j = json_pack("{s:s, s:s, s:I, s:s, s:[{s:i, s:o, s:o, s:s}], s:o}", "id", r->id, "object",
                      "chat.completion", "created", (json_int_t)r->created, "model", r->model,
                      "choices", "index", 0, "message", msg, "logprobs", lp, "finish_reason",
                      oai_finish_reason(r->reason, p->n_calls), "usage", usage_json(api, r));
    } else {
        int incomplete = r->reason == PT_GEN_LENGTH || r->reason == PT_GEN_CONTEXT;
        j = response_object(r, incomplete ? "incomplete" : "completed", responses_items(r), 1);
    }
    char *s = j ? json_dumps(j, JSON_COMPACT) : NULL;
    json_decref(j);
    return s;
}

/* ===== Streams ===== */

/* A chunk of a chat / completions stream; it carries the logprob entries that are waiting. */
static json_t *chat_chunk(oai_stream *st, json_t *delta, const char *finish) {
    const char *obj = st->api == OAI_COMPLETIONS ? "text_completion" : "chat.completion.chunk";
    json_t *choice = json_pack("{s:i, s:n}", "index", 0, "logprobs");
    if (st->lp && json_array_size(st->lp)) {
        json_object_set_new(choice, "logprobs",
                            st->api == OAI_COMPLETIONS
                                ? legacy_logprobs(st->lp, st->lp_offset, &st->lp_offset)
                                : json_pack("{s:O, s:n}", "content", st->lp, "refusal"));
        json_decref(st->lp); /* the chunk holds its entries; later ones start a new array */
        st->lp = json_array();
    }
    if (st->api == OAI_COMPLETIONS) {
        json_t *t = json_object_get(delta, "text");
        json_object_set_new(choice, "text", t ? json_incref(t) : json_string(""));
        json_decref(delta);
    } else {
        json_object_set_new(choice, "delta", delta);
    }
    json_object_set_new(choice, "finish_reason", finish ? json_string(finish) : json_null());
    return json_pack("{s:s, s:s, s:I, s:s, s:[o]}", "id", st->id, "object", obj, "created",
                     (json_int_t)st->created, "model", st->model, "choices", choice);
}

static int resp_event(oai_stream *st, const char *type, json_t *j, pt_buf *out) {
    if (!j) return -1;
    json_object_set_new(j, "type", json_string(type));
    json_object_set_new(j, "sequence_number", json_integer(st->seq++));
    return sse(out, type, j);
}

int oai_stream_begin(oai_stream *st, int api, const char *id, const char *model, long created,
                     int include_usage, pt_buf *out) {
    memset(st, 0, sizeof *st);
    st->api = api, st->id = id, st->model = model, st->created = created,
    st->include_usage = include_usage;
    if (api == OAI_CHAT)
        return sse(
            out, NULL,
            chat_chunk(st, json_pack("{s:s, s:s}", "role", "assistant", "content", ""), NULL));
    if (api == OAI_COMPLETIONS) return 0;
    st->output = json_array();
    oai_result r = {.id = id, .model = model, .created = created};
    int rc = resp_event(st, "response.created",
                        json_pack("{s:o}", "response", response_object(&r, "in_progress", NULL, 0)),
                        out);
    rc |= resp_event(st, "response.in_progress",
                     json_pack("{s:o}", "response", response_object(&r, "in_progress", NULL, 0)),
                     out);
    return rc;
}

/* Close the open reasoning / message item of a Responses stream. */
static int resp_close_item(oai_stream *st, pt_buf *out) {
    if (!st->item) return 0;
    int rc = 0;
    const char *text = st->item_text.v ? st->item_text.v : "";
    json_t *item;
    rc |=
        resp_event(st, st->item == 1 ? "response.reasoning_text.done" : "response.output_text.done",
                   json_pack("{s:s, s:i, s:i, s:s}", "item_id", st->item_id, "output_index",
                             st->out_index, "content_index", 0, "text", text),
                   out);
    if (st->item == 1) {
        item = json_pack("{s:s, s:s, s:[], s:[{s:s, s:s}]}", "id", st->item_id, "type", "reasoning",
                         "summary", "content", "type", "reasoning_text", "text", text);
    } else {
        json_t *part =
            json_pack("{s:s, s:s, s:[]}", "type", "output_text", "text", text, "annotations");
        rc |= resp_event(st, "response.content_part.done",
                         json_pack("{s:s, s:i, s:i, s:O}", "item_id", st->item_id, "output_index",
                                   st->out_index, "content_index", 0, "part", part),
                         out);
        item = json_pack("{s:s, s:s, s:s, s:s, s:[o]}", "id", st->item_id, "type", "message",
                         "status", "completed", "role", "assistant", "content", part);
    }
    rc |= resp_event(st, "response.output_item.done",
                     json_pack("{s:i, s:O}", "output_index", st->out_index, "item", item), out);
    json_array_append_new(st->output, item);
    st->item = 0;
    st->out_index++;
    st->item_text.n = 0;
    return rc;
}

/* Open a reasoning (1) or message (2) item. */
static int resp_open_item(oai_stream *st, int kind, pt_buf *out) {
    int rc = resp_close_item(st, out);
    st->item = kind;
    snprintf(st->item_id, sizeof st->item_id, "%s_%s_%d", kind == 1 ? "rs" : "msg", st->id + 5,
             st->out_index);
    json_t *item =
        kind == 1 ? json_pack("{s:s, s:s, s:[]}", "id", st->item_id, "type", "reasoning", "summary")
                  : json_pack("{s:s, s:s, s:s, s:s, s:[]}", "id", st->item_id, "type", "message",
                              "status", "in_progress", "role", "assistant", "content");
    rc |= resp_event(st, "response.output_item.added",
                     json_pack("{s:i, s:o}", "output_index", st->out_index, "item", item), out);
    if (kind == 2)
        rc |= resp_event(st, "response.content_part.added",
                         json_pack("{s:s, s:i, s:i, s:{s:s, s:s, s:[]}}", "item_id", st->item_id,
                                   "output_index", st->out_index, "content_index", 0, "part",
                                   "type", "output_text", "text", "", "annotations"),
                         out);
    return rc;
}

int oai_stream_delta(oai_stream *st, int kind, const char *s, size_t n, pt_buf *out) {
    if (!n) return 0;
    if (st->api == OAI_COMPLETIONS)
        return sse(out, NULL, chat_chunk(st, json_pack("{s:s%}", "text", s, n), NULL));
    if (st->api == OAI_CHAT)
        return sse(
            out, NULL,
            chat_chunk(
                st,
                json_pack("{s:s%}", kind == FE_REASONING ? "reasoning_content" : "content", s, n),
                NULL));
    int want = kind == FE_REASONING ? 1 : 2, rc = 0;
    if (st->item != want) rc |= resp_open_item(st, want, out);
    rc |= pt_buf_append(&st->item_text, s, n);
    rc |= resp_event(
        st, kind == FE_REASONING ? "response.reasoning_text.delta" : "response.output_text.delta",
        json_pack("{s:s, s:i, s:i, s:s%}", "item_id", st->item_id, "output_index", st->out_index,
                  "content_index", 0, "delta", s, n),
        out);
    return rc;
}

/* The end of a chat / completions stream: the tool calls (chat), the finish reason, the usage
 * when asked for, [DONE]. */
static int chat_stream_end(oai_stream *st, const oai_result *r, pt_buf *out) {
    int rc = 0;
    int n_calls = r->parsed ? r->parsed->n_calls : 0;
    if (st->api == OAI_CHAT && n_calls) {
        json_t *calls = oai_tool_calls(r->parsed, r->id + 9);
        size_t i;
        json_t *c;
        json_array_foreach(calls, i, c)
            json_object_set_new(c, "index", json_integer((json_int_t)i));
        rc |= sse(out, NULL, chat_chunk(st, json_pack("{s:o}", "tool_calls", calls), NULL));
    }
    json_t *fin = st->api == OAI_COMPLETIONS ? json_pack("{s:s}", "text", "") : json_object();
    rc |= sse(out, NULL, chat_chunk(st, fin, oai_finish_reason(r->reason, n_calls)));
    if (st->include_usage) {
        json_t *u =
            json_pack("{s:s, s:s, s:I, s:s, s:[], s:o}", "id", st->id, "object",
                      st->api == OAI_COMPLETIONS ? "text_completion" : "chat.completion.chunk",
                      "created", (json_int_t)st->created, "model", st->model, "choices", "usage",
                      usage_json(st->api, r));
        rc |= sse(out, NULL, u);
    }
    rc |= pt_buf_append(out, "data: [DONE]\n\n", 14);
    return rc;
}

/* The i-th tool call of a Responses stream: its item added, its arguments (in one delta: they
 * were parsed whole at the end), the item done. */
static int resp_function_call(oai_stream *st, const oai_result *r, int i, pt_buf *out) {
    const char *args = r->parsed->calls[i].arguments;
    json_t *item = function_call_item(r, i, "completed", args);
    const char *id = json_string_value(json_object_get(item, "id"));
    int rc = resp_event(st, "response.output_item.added",
                        json_pack("{s:i, s:o}", "output_index", st->out_index, "item",
                                  function_call_item(r, i, "in_progress", "")),
                        out);
    rc |= resp_event(
        st, "response.function_call_arguments.delta",
        json_pack("{s:s, s:i, s:s}", "item_id", id, "output_index", st->out_index, "delta", args),
        out);
    rc |= resp_event(st, "response.function_call_arguments.done",
                     json_pack("{s:s, s:i, s:s}", "item_id", id, "output_index", st->out_index,
                               "arguments", args),
                     out);
    rc |= resp_event(st, "response.output_item.done",
                     json_pack("{s:i, s:O}", "output_index", st->out_index, "item", item), out);
    json_array_append_new(st->output, item);
    st->out_index++;
    return rc;
}

int oai_stream_end(oai_stream *st, const oai_result *r, pt_buf *out) {
    if (st->api != OAI_RESPONSES) return chat_stream_end(st, r, out);
    int rc = resp_close_item(st, out);
    for (int i = 0; r->parsed && i < r->parsed->n_calls; i++)
        rc |= resp_function_call(st, r, i, out);
    int incomplete = r->reason == PT_GEN_LENGTH || r->reason == PT_GEN_CONTEXT;
    const char *ev = incomplete ? "response.incomplete" : "response.completed";
    json_t *resp =
        response_object(r, incomplete ? "incomplete" : "completed", json_incref(st->output), 1);
    rc |= resp_event(st, ev, json_pack("{s:o}", "response", resp), out);
    return rc;
}

int oai_stream_error(oai_stream *st, const char *message, pt_buf *out) {
    pt_buf m = {0};
    if (pt_utf8_repair(message, strlen(message), &m) < 0) return -1;
    int rc;
    if (st->api == OAI_RESPONSES) {
        oai_result r = {.id = st->id, .model = st->model, .created = st->created};
        json_t *resp = response_object(&r, "failed", json_incref(st->output), 0);
        json_object_set_new(resp, "error",
                            json_pack("{s:s, s:s}", "code", "server_error", "message", m.v));
        rc = resp_event(st, "response.failed", json_pack("{s:o}", "response", resp), out);
    } else {
        rc = sse(out, NULL,
                 json_pack("{s:{s:s, s:s, s:n, s:n}}", "error", "message", m.v, "type",
                           "server_error", "param", "code"));
        rc |= pt_buf_append(out, "data: [DONE]\n\n", 14);
    }
    pt_buf_free(&m);
    return rc;
}

void oai_stream_free(oai_stream *st) {
    pt_buf_free(&st->item_text);
    json_decref(st->output);
    json_decref(st->lp);
    memset(st, 0, sizeof *st);
}
