/* fuzz_gguf.c — libFuzzer target for the GGUF parser and the model-info pass
 * that runs on every parsed file. Built and run by `make fuzz` (clang, ASan,
 * UBSan). Any crash, overread, leak or huge allocation is a bug: the parser
 * must turn every input into either a valid context or a clear error. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "format/gguf.h"
#include "model/info.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    /* Copy to an exact-size heap block so ASan catches reads past the end. */
    uint8_t *buf = malloc(size ? size : 1);
    if (!buf) return 0;
    memcpy(buf, data, size);
    pt_err err;
    gguf_ctx *g = gguf_parse(buf, size, "fuzz.gguf", &err);
    if (g) {
        /* touch everything a consumer might read */
        for (uint64_t i = 0; i < g->n_kv; i++) {
            const gguf_value *v = &g->kv[i].val;
            int64_t x;
            double d;
            if (v->type == GGUF_ARRAY)
                for (uint64_t j = 0; j < v->arr.n && j < 64; j++) {
                    gguf_array_i64(v, j, &x);
                    gguf_array_f64(v, j, &d);
                }
        }
        volatile uint8_t sink = 0;
        for (uint64_t i = 0; i < g->n_tensors; i++) {
            const gguf_tensor *t = &g->tensors[i];
            if (t->nbytes) sink ^= t->data[0] ^ t->data[t->nbytes - 1];
            (void)gguf_find_tensor(g, t->name);
        }
        (void)sink;
        model_info mi;
        if (model_info_get(g, &mi, &err) == 0) model_info_free(&mi);
        gguf_close(g);
    }
    free(buf);
    return 0;
}
