/* fuzz_grammar.c — libFuzzer target for constrained decoding's hostile inputs: GBNF text
 * (gram_parse), JSON Schemas (gram_from_json_schema, then the GBNF it writes must parse), and
 * the matcher driven over arbitrary bytes. Built and run by `make fuzz` / `make fuzz-ci`
 * (clang, ASan, UBSan).
 *
 * Input: byte 0 picks the mode (bit 0: the rest is a JSON Schema, else GBNF; bits 1-2: the
 * dialect of a schema); the input up to the first NUL byte is the grammar or schema, what follows
 * the NUL is text fed to the matcher one byte at a time. A schema that converts must give a
 * grammar that parses (else the converter wrote bad GBNF: abort); nothing may crash, hang,
 * overread or leak.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "text/grammar.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    const int mode = data[0];
    const char *src = (const char *)data + 1;
    size_t n = size - 1;
    const char *nul = memchr(src, 0, n);
    size_t glen = nul ? (size_t)(nul - src) : n;
    const char *text = nul ? nul + 1 : "";
    size_t tlen = nul ? n - glen - 1 : 0;
    pt_err err = {{0}};
    gram *g = NULL;
    if (mode & 1) {
        tok_bytes out = {0};
        int rc =
            gram_from_json_schema(src, glen, (mode >> 1) % 3, (mode & 8) ? "p-" : "", &out, &err);
        if (!rc) {
            /* the root rule is named after the prefix; give it a root to parse as a whole */
            if ((mode & 8) && tok_bytes_append(&out, "root ::= p-root\n", 16)) abort();
            g = gram_parse(out.v, out.n, &err);
            if (!g) abort(); /* the converter wrote GBNF that does not parse */
        }
        tok_bytes_free(&out);
    } else
        g = gram_parse(src, glen, &err);
    if (!g) return 0;
    gram_match *m = gram_match_new(g, NULL, &err);
    for (size_t i = 0; m && i < tlen; i++)
        (void)gram_match_text(m, text + i, 1);
    if (m) (void)gram_match_can_end(m);
    gram_match_free(m);
    gram_free(g);
    return 0;
}
