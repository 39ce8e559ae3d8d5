/* kvref.c — reference logits from llama.cpp at a KV cache type, for
 * tests/test_kvtypes.c. Not part of petrel's build: compiled against a local
 * llama.cpp build (see README.md here for the exact commands).
 *
 *   kvref MODEL.gguf IDS.txt TYPE_K TYPE_V FA OUT.f32 [N_GEN]
 *
 * IDS.txt: the prompt's token ids, whitespace-separated. TYPE_K/TYPE_V:
 * f32 f16 bf16 q8_0 q4_0. FA: 0 or 1 (flash attention; llama.cpp needs it
 * for a quantised V cache). The context is set up as the fixtures' references
 * were (../../fixtures/README.md): CPU only, no weight repacking, 2 threads,
 * n_ctx = n_prompt + 32, the whole prompt one ubatch, swa_full. OUT gets the
 * teacher-forced logits [n_prompt][n_vocab], then, when N_GEN > 0, N_GEN
 * greedy steps' logits [N_GEN][n_vocab] (one token per decode). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "llama.h"

static enum ggml_type type_of(const char *s) {
    if (!strcmp(s, "f32")) return GGML_TYPE_F32;
    if (!strcmp(s, "f16")) return GGML_TYPE_F16;
    if (!strcmp(s, "bf16")) return GGML_TYPE_BF16;
    if (!strcmp(s, "q8_0")) return GGML_TYPE_Q8_0;
    if (!strcmp(s, "q4_0")) return GGML_TYPE_Q4_0;
    fprintf(stderr, "unknown type %s\n", s);
    exit(2);
}

static int argmax(const float *x, int n) {
    int b = 0;
    for (int i = 1; i < n; i++)
        if (x[i] > x[b]) b = i;
    return b;
}

int main(int argc, char **argv) {
    if (argc < 7) {
        fprintf(stderr, "usage: kvref MODEL IDS TYPE_K TYPE_V FA OUT [N_GEN]\n");
        return 2;
    }
    const int n_gen = argc > 7 ? atoi(argv[7]) : 0;
    llama_token ids[4096];
    int n = 0;
    FILE *f = fopen(argv[2], "r");
    if (!f) return perror(argv[2]), 1;
    while (n < 4096 && fscanf(f, "%d", &ids[n]) == 1)
        n++;
    fclose(f);
    llama_backend_init();
    struct llama_model_params mp = llama_model_default_params();
    mp.n_gpu_layers = 0;
    mp.use_extra_bufts = false;
    struct llama_model *model = llama_model_load_from_file(argv[1], mp);
    if (!model) return fprintf(stderr, "cannot load %s\n", argv[1]), 1;
    struct llama_context_params cp = llama_context_default_params();
    cp.n_ctx = (uint32_t)(n + 32);
    cp.n_batch = cp.n_ubatch = cp.n_ctx;
    cp.n_seq_max = 1;
    cp.n_threads = cp.n_threads_batch = 2;
    cp.type_k = type_of(argv[3]);
    cp.type_v = type_of(argv[4]);
    cp.flash_attn_type =
        atoi(argv[5]) ? LLAMA_FLASH_ATTN_TYPE_ENABLED : LLAMA_FLASH_ATTN_TYPE_DISABLED;
    cp.swa_full = true;
    struct llama_context *ctx = llama_init_from_model(model, cp);
    if (!ctx) return fprintf(stderr, "cannot create the context\n"), 1;
    const int n_vocab = llama_vocab_n_tokens(llama_model_get_vocab(model));
    struct llama_batch b = llama_batch_init(n, 0, 1);
    for (int i = 0; i < n; i++) {
        b.token[i] = ids[i];
        b.pos[i] = i;
        b.n_seq_id[i] = 1;
        b.seq_id[i][0] = 0;
        b.logits[i] = 1;
    }
    b.n_tokens = n;
    if (llama_decode(ctx, b)) return fprintf(stderr, "decode failed\n"), 1;
    FILE *out = fopen(argv[6], "wb");
    if (!out) return perror(argv[6]), 1;
    for (int i = 0; i < n; i++)
        fwrite(llama_get_logits_ith(ctx, i), sizeof(float), (size_t)n_vocab, out);
    llama_token tok = argmax(llama_get_logits_ith(ctx, n - 1), n_vocab);
    for (int j = 0; j < n_gen; j++) {
        struct llama_batch one = llama_batch_init(1, 0, 1);
        one.token[0] = tok;
        one.pos[0] = n + j;
        one.n_seq_id[0] = 1;
        one.seq_id[0][0] = 0;
        one.logits[0] = 1;
        one.n_tokens = 1;
        if (llama_decode(ctx, one)) return fprintf(stderr, "decode failed\n"), 1;
        const float *lg = llama_get_logits_ith(ctx, 0);
        fwrite(lg, sizeof(float), (size_t)n_vocab, out);
        printf("%d ", tok);
        tok = argmax(lg, n_vocab);
        llama_batch_free(one);
    }
    if (n_gen) printf("\n");
    fclose(out);
    llama_batch_free(b);
    llama_free(ctx);
    llama_model_free(model);
    return 0;
}
