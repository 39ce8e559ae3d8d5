/* utf8.h — the library's one copy of UTF-8 reading, writing and repair.
 *
 * Two repairs exist on purpose, for two different readers:
 *   utf8_sanitize  what the tokenizer feeds its regexes: llama.cpp's reading of
 *                  bytes (lenient about overlong forms, which it re-encodes
 *                  shortest), so token ids match llama.cpp's;
 *   utf8_repair    what goes into JSON and out to users: strict (overlong
 *                  forms, surrogates and NUL are replaced too).
 * Both replace a byte that cannot start a sequence with U+FFFD and go on at
 * the next byte. Nothing here allocates except utf8_repair (into a tok_bytes).
 */
#ifndef PT_UTF8_H
#define PT_UTF8_H

#include <stddef.h>
#include <stdint.h>

#include "text/tokenizer.h"

/* Write code point cp (at most U+10FFFF) as UTF-8 into o (4 bytes of room).
 * Returns the bytes written, 1 to 4. */
int utf8_encode(uint32_t cp, unsigned char *o);

/* Length of a UTF-8 sequence from its lead byte, as llama.cpp's
 * unicode_len_utf8 (a continuation byte counts as 1). */
int utf8_seq_len(unsigned char lead);

/* Decode one code point the way llama.cpp does: lenient about overlong forms,
 * strict about continuation bytes and truncation. s holds n >= 1 bytes.
 * Returns the bytes consumed, or 0 when s[0] does not start a sequence it
 * accepts. */
int utf8_decode_lenient(const unsigned char *s, size_t n, uint32_t *cp);

/* Rewrite n bytes of text as valid UTF-8 into out, which must hold 3n bytes:
 * ill-formed bytes become U+FFFD, overlong forms are re-encoded shortest, and
 * code points PCRE2 cannot hold (surrogates, > U+10FFFF) become U+FFFD. When
 * escape_space is set, ' ' becomes U+2581. Returns the length written. */
size_t utf8_sanitize(const char *text, size_t n, int escape_space, char *out);

/* Strict repair: out (emptied first) receives s[0..n) with every byte that
 * does not start a well-formed, shortest-form, non-surrogate sequence of a
 * code point in 1..U+10FFFF replaced by U+FFFD (so NUL is replaced too), then
 * a NUL terminator not counted in out->n. Returns the number of replaced
 * bytes, or -1 on out of memory. */
int utf8_repair(const char *s, size_t n, tok_bytes *out);

/* Bytes at the end of buf[0..n) that start a UTF-8 character not yet complete
 * (0 when the buffer ends on a character boundary, or when the tail can never
 * become valid and should be emitted as is). */
int utf8_incomplete_tail(const unsigned char *buf, int n);

#endif
