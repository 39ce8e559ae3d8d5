/* gates.h — comparing petrel's logits with reference logits, and the gates of
 * the fixtures README, shared by the whole-model test suites, and the fixture
 * variants their refusal tests load.
 *
 * Per prompt, over rows: cosine (min, mean), max |diff|, and top-1
 * disagreements counted with the reference's own top-1/top-2 margin.
 * F32 gate: max |diff| <= a tolerance and no flip at a margin >= 0.1.
 * Quantised gate: cos min >= 0.99, cos mean >= 0.9998, every flip at a
 * reference margin < 0.1, at most max(1, 6% of rows) flips. */
#ifndef PT_TEST_GATES_H
#define PT_TEST_GATES_H

#include <stddef.h>
#include <stdint.h>

typedef struct gate_stats {
    double cos_min, cos_mean, max_diff;
    int rows, flips, bad_flips; /* bad: at a reference margin >= 0.1 */
} gate_stats;

/* Compare rows of got vs want ([rows][n]). */
gate_stats gate_compare(const float *got, const float *want, int rows, int n);

/* f32_tol > 0: the F32 gate with that max |diff|; 0: the quantised gate. */
int gate_ok(const gate_stats *s, double f32_tol);

/* A fixture file of exactly count floats (malloc'd), or NULL. */
float *gate_read_f32(const char *fixture_name, size_t count);

/* Index of the largest value (ties: the lowest index, as the references). */
int gate_argmax(const float *x, int n);

/* Writes to path a copy of the fixture src_name with one change: the metadata key drop_key
 * left out, the tensor drop_tensor left out, or the u32 key u32_key set to u32_val (NULL:
 * no such change). 0, or -1. */
int fixture_variant(const char *src_name, const char *path, const char *drop_key,
                    const char *drop_tensor, const char *u32_key, uint32_t u32_val);

/* Opens the fixture NAME (NAME.gguf and NAME.ref.json): its reference JSON in *ref and an
 * engine on it with an F32 KV cache (the references' own) and 2 threads. NULL when a file
 * is missing (a named skip) or the engine does not open (a failed check), *ref then NULL. */
typedef struct json_t json_t;
typedef struct pt_engine pt_engine;
pt_engine *fixture_open(const char *name, json_t **ref);

#endif
