/* fuzz_request.c — libFuzzer target for a request's way in: an OpenAI request
 * body (oai_parse_request: Chat Completions, Completions or Responses) rendered
 * in a fixture's chat format (chat_render), tokenized with that fixture's
 * vocabulary (tok_encode, control-token text parsed as `petrel serve` does)
 * and decoded back. Built and run by `make fuzz` / `make fuzz-ci` (clang,
 * ASan, UBSan) from the repository root, where the vocabularies are
 * (tests/fixtures/tokenizer/ggml-vocab-fixture-*.gguf).
 *
 * Input: byte 0 picks the fixture (bits 0-1), the API (bits 2-3), the
 * generation prompt (bit 4) and the thinking setting (bits 5-6); the rest is
 * the request body. A body may be refused with a message; anything else —
 * a crash, an overread, a leak, a render error on a request the parser
 * accepted that is not the conversation's fault — is a bug.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "format/gguf.h"
#include "server/oai.h"
#include "text/chat.h"
#include "text/tokenizer.h"

static const char *const VOCABS[4] = {
    "tests/fixtures/tokenizer/ggml-vocab-fixture-glm-dsa.gguf",
    "tests/fixtures/tokenizer/ggml-vocab-fixture-deepseek2.gguf",
    "tests/fixtures/tokenizer/ggml-vocab-fixture-gemma4.gguf",
    "tests/fixtures/tokenizer/ggml-vocab-fixture-qwen3moe.gguf",
};

static struct {
    gguf_ctx *g; /* kept open: the vocabulary may point into it */
    tok_vocab *v;
    const chat_fmt *f;
} fx[4];

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    for (int i = 0; i < 4; i++) {
        pt_err err = {{0}};
        fx[i].g = gguf_open(VOCABS[i], &err);
        if (fx[i].g) fx[i].v = tok_load(fx[i].g, &err);
        if (!fx[i].v) {
            fprintf(stderr, "fuzz_request: %s (run from the repository root)\n", err.msg);
            exit(1);
        }
        fx[i].f = chat_detect_gguf(fx[i].g);
    }
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    const int fi = data[0] & 3, api = 1 + ((data[0] >> 2) & 3) % 3;
    const int gen = (data[0] >> 4) & 1, think = ((data[0] >> 5) & 3) % 3 - 1;
    /* an exact-size copy so ASan catches reads past the end */
    char *body = malloc(size - 1 ? size - 1 : 1);
    if (!body) return 0;
    memcpy(body, data + 1, size - 1);
    oai_req r;
    char msg[512];
    if (oai_parse_request(api, body, size - 1, &r, msg, sizeof msg) == 0) {
        tok_bytes text = {0};
        pt_err err = {{0}};
        int rc = 0;
        if (r.messages) {
            chat_opts o = {.add_generation_prompt = gen,
                           .thinking = r.thinking >= 0 ? r.thinking : think};
            rc = chat_render(fx[fi].f, r.messages, r.tools, &o, &text, &err);
        } else if (r.prompt) {
            rc = tok_bytes_append(&text, r.prompt, strlen(r.prompt));
        }
        if (rc == 0) {
            tok_ids ids = {0};
            if (tok_encode(fx[fi].v, text.v, text.n, TOK_ADD_SPECIAL | TOK_PARSE_SPECIAL, &ids,
                           &err) == 0) {
                tok_bytes back = {0};
                tok_decode(fx[fi].v, ids.v, ids.n, TOK_RENDER_SPECIAL, &back, &err);
                tok_bytes_free(&back);
            }
            tok_ids_free(&ids);
        }
        tok_bytes_free(&text);
    }
    oai_req_free(&r);
    free(body);
    return 0;
}
