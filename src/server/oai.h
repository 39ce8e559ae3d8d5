/* oai.h — the OpenAI API shapes `petrel serve` speaks, with no HTTP in sight:
 * reading Chat Completions, Completions and Responses requests into one
 * generation request, and the JSON of replies, stream events (SSE) and errors
 * (the streaming splitter that separates reasoning, answer and tool-call markup
 * as the model's text arrives is front/split.h, shared with the CLI). Kept apart from the HTTP
 * layer (server.c) so the tests can drive every mapping directly.
 *
 * Request bodies are hostile input: every field is type-checked and a wrong
 * one gives a one-line message for a 400 (the caller wraps it with
 * oai_error_body). Text that goes out is valid UTF-8 (invalid bytes the model
 * produced become U+FFFD, pt_utf8_repair), so jansson never refuses a string.
 * Public API only (petrel.h): chat formats are names, the reasoning and tool-
 * call markup comes from pt_chat_markers_of, parsed answers are pt_chat_parsed.
 */
#ifndef PT_OAI_H
#define PT_OAI_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "front/split.h"
#include "petrel.h"

enum { OAI_CHAT = 1, OAI_COMPLETIONS, OAI_RESPONSES };
enum { OAI_TOOLS_AUTO = 0, OAI_TOOLS_NONE, OAI_TOOLS_REQUIRED };

#define OAI_MAX_STOPS 16
#define OAI_PARAM_MAX 96 /* the longest error.param (a field's path) kept */

typedef struct oai_req {
    int api;             /* OAI_* */
    int stream;          /* reply as server-sent events */
    int include_usage;   /* chat stream: a last chunk with usage (stream_options.include_usage) */
    json_t *messages;    /* chat / responses: chat-shaped messages for pt_chat_render (owned) */
    json_t *tools;       /* NULL or chat-shaped tools for pt_chat_render (owned) */
    char *prompt;        /* completions: the text (owned, NUL-terminated) */
    int max_tokens;      /* -1: until end of generation or the context is full */
    pt_sampling sp;      /* only the fields named in sp_set are meaningful */
    unsigned sp_set;     /* PT_SAMPLING_* bits: the fields the request set (pt_sampling_override) */
    pt_logit_bias *bias; /* [sp.n_logit_bias] logit_bias (owned; sp.logit_bias points here); ids
                            are checked against the vocabulary by the caller (oai_bias_check) */
    char *stops[OAI_MAX_STOPS]; /* owned */
    int n_stops;
    int thinking;      /* -1: the server's default */
    int one_tool_call; /* parallel_tool_calls false: return the first call only */
    int n_omitted; /* image / audio / file parts the model cannot read, replaced by a placeholder */
    /* responses: */
    char *prev_id; /* previous_response_id (owned), or NULL: the caller splices its conversation */
    int store;     /* keep this response (store, default true) */
    int n_instr;   /* 1: messages[0] is the instructions (not carried to a later turn) */
    /* chat / completions: */
    int logprobs;     /* report each token's log-probability */
    int top_logprobs; /* ... and this many alternatives (0..PT_MAX_TOP_LOGPROBS) */
    int echo;         /* completions: the prompt precedes the completion in the text */
    /* Constraints the caller compiles into a grammar (pt_chat_json_grammar / tool grammars): */
    char *json_schema;     /* response_format / text.format json_*: the schema (owned), or NULL */
    char format_param[16]; /* ... the field that asked for it, for a 400 ("text.format") */
    int tool_mode;         /* OAI_TOOLS_AUTO, _NONE (tools given, calls forbidden), _REQUIRED */
    char *tool_name;       /* tool_choice naming one function (owned; tool_mode REQUIRED) */
    char ignored[128];     /* fields no table row names, for the log ("" none) */
    char err_param[OAI_PARAM_MAX]; /* after a failed parse: the field the error names, or "" */
} oai_req;

/* Read a request body of `api`. 0, or -1 with a message for a 400 in err
 * (malformed JSON, a field of the wrong type or out of range, a missing
 * field). The request is emptied on failure, but for err_param (the path of
 * the field the error names, "messages[0].content", for error.param); free
 * with oai_req_free. */
int oai_parse_request(int api, const char *body, size_t len, oai_req *r, char *err, size_t err_len);
void oai_req_free(oai_req *r);
/* logit_bias ids against a vocabulary of n_vocab tokens: 0, or -1 with a
 * message for a 400 naming logit_bias (the parser knows no vocabulary). */
int oai_bias_check(const oai_req *r, int n_vocab, char *err, size_t err_len);

/* {"error": {"message", "type", "param", "code"}} as a malloc'd string;
 * param and code are null when NULL (param also when ""). */
char *oai_error_body(const char *type, const char *code, const char *param, const char *message);

/* ===== Replies ===== */

/* What one finished generation produced. */
typedef struct oai_result {
    const char *id; /* "chatcmpl-...", "cmpl-...", "resp_..." */
    const char *model;
    long created; /* unix seconds */
    const pt_chat_parsed
        *parsed;      /* chat / responses: content, reasoning, tool calls (NUL-terminated UTF-8) */
    const char *text; /* completions: the text (UTF-8) */
    int reason;       /* PT_GEN_* */
    int prompt_tokens, cached_tokens, completion_tokens, reasoning_tokens;
    const char *previous_response_id; /* responses: echoed; NULL: none */
    int store;                        /* responses: whether it is kept */
    const json_t *logprobs; /* chat / completions: every token's oai_logprob_entry, or NULL */
} oai_result;

/* A generated token's log-probability as chat completions report it: {token, logprob, bytes,
 * top_logprobs: [{token, logprob, bytes}]}, the texts decoded from e with flags
 * (PT_DETOKENIZE_*; a piece that is not whole UTF-8 gets U+FFFD in token, its exact bytes in
 * bytes). Completions show the same entries in their legacy shape. */
json_t *oai_logprob_entry(const pt_engine *e, int flags, const pt_logprob *sampled,
                          const pt_logprob *top, int n_top);

/* responses: this answer as the chat-shaped assistant message a later turn renders (content,
 * reasoning_content, tool_calls with the call ids the output items carry). */
json_t *oai_response_turn(const oai_result *r);

/* The OpenAI tool_calls array for parsed calls: [{id, type:"function",
 * function:{name, arguments}}] with arguments a JSON string; ids are
 * "call_<id_base>_<i>". NULL when there are none. */
json_t *oai_tool_calls(const pt_chat_parsed *p, const char *id_base);
/* "stop", "length", "tool_calls" (chat) for a PT_GEN_* reason. */
const char *oai_finish_reason(int reason, int n_calls);

/* The non-streaming reply body of `api` (malloc'd JSON text). */
char *oai_reply(int api, const oai_result *r);

/* ===== Streams ===== */

typedef struct oai_stream {
    int api;
    const char *id, *model;
    long created;
    int include_usage;
    int seq;       /* responses: sequence_number of the next event */
    int out_index; /* responses: output_index of the open / next item */
    int item;      /* responses: 0 none open, 1 reasoning, 2 message */
    char item_id[64];
    pt_buf item_text; /* responses: the open item's text so far */
    json_t *output;   /* responses: finished output items */
    json_t *lp;       /* chat / completions: logprob entries the next chunk carries (or NULL) */
    size_t lp_offset; /* completions: text bytes before the next chunk (text_offset) */
} oai_stream;

/* Events that open the stream (chat: the role chunk; responses:
 * response.created and response.in_progress), appended to out as SSE. */
int oai_stream_begin(oai_stream *st, int api, const char *id, const char *model, long created,
                     int include_usage, pt_buf *out);
/* A text delta (kind FE_REASONING / FE_CONTENT, valid UTF-8). */
int oai_stream_delta(oai_stream *st, int kind, const char *s, size_t n, pt_buf *out);
/* The closing events: tool calls, finish reason, usage, [DONE] (chat /
 * completions) or the items' done events and response.completed /
 * response.incomplete (responses). */
int oai_stream_end(oai_stream *st, const oai_result *r, pt_buf *out);
/* An error after the stream began (an error event, then the end). */
int oai_stream_error(oai_stream *st, const char *message, pt_buf *out);
void oai_stream_free(oai_stream *st);

#endif
