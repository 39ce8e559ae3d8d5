/* chat.h — the native chat formats of the model families petrel runs, and the
 * parsing of what a model generates back into content, reasoning and tool calls.
 *
 * There is no Jinja engine: each family's format is written out in C, one
 * file and one ops table (chat_fmt, text/chat_fmt.h) per format, and tested
 * byte for byte against strings rendered by the models' real templates
 * (../shared/fixtures/templates). The format is chosen from the GGUF: the text
 * of tokenizer.chat_template when there is one, else the architecture, else the
 * pre-tokenizer.
 *
 *   glm-5        GLM-4.7 / GLM-5.x  [gMASK]<sop><|user|>...<|assistant|><think>
 *   deepseek-v3  DeepSeek-V3.1 <｜begin▁of▁sentence｜><｜User｜>...<｜Assistant｜><think></think>
 *   gemma-4      Gemma 4            <bos><|turn>user\n...<turn|>\n<|turn>model\n
 *   qwen3        Qwen3 (ChatML)     <|im_start|>user\n...<|im_end|>\n<|im_start|>assistant\n
 *
 * A conversation is JSON in the OpenAI shape (so the CLI, the server and the
 * tests share it): `messages` is an array of {role, content, reasoning_content?,
 * tool_calls?, tool_call_id?, name?} with role system/user/assistant/tool,
 * content a string or an array of {type:"text", text} parts; `tools` is an
 * array of {type:"function", function:{name, description, parameters}}; a tool
 * call is {id?, type, function:{name, arguments}} with arguments an object or
 * a JSON string. JSON is rendered the way Jinja's `tojson` does (Python's
 * json.dumps: ", " and ": " separators, key order kept, UTF-8 unescaped).
 *
 * The rendered text contains the special tokens as text (BOS included where the
 * template writes it), and the conversation's text copied verbatim, as the real
 * templates do. Tokenizing the whole prompt with TOK_PARSE_SPECIAL (what
 * llama.cpp does) would make text such as "<|user|>" inside a message that
 * special token: any document an agent reads could forge turns. So the
 * renderers record which byte ranges came from the conversation
 * (chat_render_spans), and the prompt is tokenized with TOK_PARSE_SPECIAL
 * outside those ranges only (tok_encode_spans, without TOK_ADD_SPECIAL). A
 * conversation without special-token text tokenizes exactly as before.
 *
 * Nothing here prints or exits; generated text is hostile input to the parser:
 * a malformed tool call is reported in chat_parsed and left in the content.
 */
#ifndef PT_CHAT_H
#define PT_CHAT_H

#include <jansson.h>
#include <stddef.h>

#include "common.h"
#include "format/gguf.h"
#include "text/tokenizer.h"

/* A chat format: an ops table (text/chat_fmt.h), one file per format
 * (chat_glm5.c...), every one listed in text/chat_formats.c. The functions below
 * take one, or NULL: no chat format known, raw text only. */
typedef struct chat_fmt chat_fmt;

/* The format for a model: from the chat template text (may be NULL), else the
 * architecture (glm-dsa, deepseek2, gemma4, qwen3moe...), else the tokenizer's
 * pre-tokenizer / model name. NULL when nothing matches. */
const chat_fmt *chat_detect(const char *arch, const char *tmpl, const char *pre,
                            const char *tok_model);
/* The same, reading general.architecture, tokenizer.chat_template,
 * tokenizer.ggml.pre and tokenizer.ggml.model from a GGUF. */
const chat_fmt *chat_detect_gguf(const gguf_ctx *g);

/* The format called name ("glm-5", "deepseek-v3", "gemma-4", "qwen3"); NULL when
 * unknown (and for "none"). */
const chat_fmt *chat_fmt_find(const char *name);
/* The i-th format of the table (from 0), NULL past the last. */
const chat_fmt *chat_fmt_at(int i);
/* A format's name; "none" for NULL. */
const char *chat_fmt_name(const chat_fmt *f);
/* Every format's name in the table's order, ", "-separated, into out[cap] (cut to fit,
 * NUL-terminated). */
void chat_fmt_names(char *out, size_t cap);

/* The format's reply markup (reasoning and tool-call markers, and the other markup its
 * parser reads), NULL-terminated, into out[cap]; returns the count. */
int chat_reply_markup(const chat_fmt *f, const char **out, int cap);
/* The markers a streaming reader watches for (pt_chat_markers_of): the reasoning block's, and
 * what opens the tool calls. 0, or -1 for NULL. */
int chat_markers(const chat_fmt *f, pt_chat_markers *m);

/* Whether the format thinks by default (enable_thinking unset): GLM-5 and
 * Qwen3 yes, DeepSeek-V3.1 and Gemma 4 no — what their templates do. */
int chat_default_thinking(const chat_fmt *f);

typedef struct chat_opts {
    int add_generation_prompt; /* end with the assistant's opening */
    int thinking;              /* -1: the family's default, 0: off, 1: on */
} chat_opts;

/* Render a conversation (messages: JSON array; tools: NULL or a JSON array)
 * into out (appended, not NUL-terminated). 0, or -1 with err for a malformed
 * conversation (a message without a role, a tool call without a name,
 * arguments that are not a JSON object...) or out of memory. */
int chat_render(const chat_fmt *f, const json_t *messages, const json_t *tools, const chat_opts *o,
                tok_bytes *out, pt_err *err);
/* chat_render, and content (emptied first; NULL: not recorded) receives the
 * byte ranges of out->v that hold text taken from the conversation (message
 * text, reasoning, tool-call names and arguments, tool results, tool
 * definitions), in order. The rest is the template's scaffolding: what
 * tok_encode_spans(TOK_PARSE_SPECIAL, plain = content) may read special
 * tokens from. 0, or -1 with err as chat_render. */
int chat_render_spans(const chat_fmt *f, const json_t *messages, const json_t *tools,
                      const chat_opts *o, tok_bytes *out, tok_spans *content, pt_err *err);

/* 1 when the generation prompt of `f` with this thinking setting leaves the
 * model inside a reasoning block (GLM-5 and DeepSeek open "<think>" in the
 * prompt), so generated text is reasoning until the closing tag. */
int chat_prompt_opens_reasoning(const chat_fmt *f, int thinking);

/* JSON as Jinja's tojson writes it (Python json.dumps, ensure_ascii off),
 * appended to out. 0 or -1 (out of memory). */
int chat_json_dump(const json_t *j, tok_bytes *out);

/* ===== Parsing generated text ===== */

/* The public types (petrel.h) themselves: a parse result goes out as it is. */
typedef pt_tool_call chat_tool_call;
typedef pt_chat_parsed chat_parsed;

/* Split the text a model generated after the generation prompt into
 * reasoning, content and tool calls. in_reasoning: the prompt opened a
 * reasoning block (chat_prompt_opens_reasoning). tools (may be NULL) lets
 * GLM-5's untyped <arg_value> text keep string-typed parameters as strings.
 * Never fails on content; -1 only for out of memory. Free with chat_parsed_free. */
int chat_parse(const chat_fmt *f, const char *text, size_t len, int in_reasoning,
               const json_t *tools, chat_parsed *out, pt_err *err);
void chat_parsed_free(chat_parsed *p);

/* ===== Tool-call grammars (chat_grammar.c) ===== */

/* Append to out a GBNF whose sentences are replies of tool calls only in f's syntax: calls of
 * the tools (an OpenAI tools array) — only the one called `name` when not NULL — with
 * arguments valid against each one's parameters schema; one call, or one or more when
 * parallel; after the rest of the reasoning block when in_reasoning, else after an optional
 * whole one. 0, or -1 with err. See pt_chat_tool_grammar (petrel.h). */
int chat_tool_grammar(const chat_fmt *f, const json_t *tools, const char *name, int parallel,
                      int in_reasoning, tok_bytes *out, pt_err *err);
/* Append a GBNF for a reply of f without tool calls: the reasoning as above, then any text not
 * holding the format's call marker. 0, or -1 with err. See pt_chat_no_tool_grammar. */
int chat_no_tool_grammar(const chat_fmt *f, int in_reasoning, tok_bytes *out, pt_err *err);
/* Append a GBNF for a reply of f that is a JSON text valid against schema, after the rest of
 * the reasoning block when in_reasoning, else after an optional whole one (NULL: the JSON
 * alone). 0, or -1 with err. See pt_chat_json_grammar. */
int chat_json_grammar(const chat_fmt *f, const json_t *schema, int in_reasoning, tok_bytes *out,
                      pt_err *err);

#endif
