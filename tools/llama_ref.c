/* llama_ref.c — a llama.cpp client that writes a compact long-prompt reference
 * for tests/test_exact.c (format in tests/data/exact/README.md). Compiled and
 * run by tools/mkref_exact.sh against an existing llama.cpp build
 * (LLAMA_CPP_DIR); it is not part of petrel's build and links nothing of it.
 *
 *   llama_ref MODEL OUT N_PROMPT N_GEN STRIDE F16 SEED [VOCAB_LO VOCAB_HI]
 *
 * The prompt is N_PROMPT pseudo-random token ids in [VOCAB_LO, VOCAB_HI)
 * (default [0, 256), the byte tokens), drawn by a 64-bit LCG from SEED. The
 * settings are the fixtures' oracle's: CPU only, no weight repacking, two
 * threads, F32 K and V cache, flash attention off, the whole prompt in ONE
 * ubatch with logits at every position; then N_GEN greedy tokens, one per
 * llama_decode (llama.cpp's one-token path).
 *
 * LLAMA_REF_KV=TYPE (f16, bf16, q8_0, q4_0) sets the K and V cache type
 * instead (--cache-type-k/-v); q8_0 and q4_0 run with flash attention, which
 * llama.cpp requires for a quantised V cache (as tests/data/kv/kvref.c). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "llama.h"

static uint64_t lcg(uint64_t *s) {
    *s = *s * 6364136223846793005ULL + 1442695040888963407ULL;
    return *s >> 33;
}

static int argmax(const float *x, int n) {
    int b = 0;
    for (int i = 1; i < n; i++)
        if (x[i] > x[b]) b = i;
    return b;
}

/* the 5 largest (ties: lower id first) */
static void top5(const float *x, int n, uint16_t *id, float *v) {
    int k[5] = {-1, -1, -1, -1, -1};
    for (int i = 0; i < n; i++) {
        int p = 5;
        while (p > 0 && (k[p - 1] < 0 || x[i] > x[k[p - 1]]))
            p--;
        if (p >= 5) continue;
        for (int q = 4; q > p; q--)
            k[q] = k[q - 1];
        k[p] = i;
    }
    for (int j = 0; j < 5; j++) {
        id[j] = (uint16_t)k[j];
        v[j] = x[k[j]];
    }
}

int main(int argc, char **argv) {
    if (argc < 8) {
        fprintf(stderr, "usage: llama_ref MODEL OUT N_PROMPT N_GEN STRIDE F16 SEED [LO HI]\n");
        return 2;
    }
    const char *mpath = argv[1], *out = argv[2];
    const int np = atoi(argv[3]), ng = atoi(argv[4]), stride = atoi(argv[5]), f16 = atoi(argv[6]);
    uint64_t seed = strtoull(argv[7], NULL, 10);
    const int lo = argc > 8 ? atoi(argv[8]) : 0, hi = argc > 9 ? atoi(argv[9]) : 256;

    llama_backend_init();
    struct llama_model_params mp = llama_model_default_params();
    mp.n_gpu_layers = 0;
    mp.use_extra_bufts = false;
    struct llama_model *model = llama_model_load_from_file(mpath, mp);
    if (!model) return 1;
    const int nv = llama_vocab_n_tokens(llama_model_get_vocab(model));
    struct llama_context_params cp = llama_context_default_params();
    cp.n_ctx = (uint32_t)(np + ng + 32);
    cp.n_batch = cp.n_ubatch = cp.n_ctx;
    cp.n_seq_max = 1;
    cp.n_threads = cp.n_threads_batch = 2;
    cp.type_k = GGML_TYPE_F32;
    cp.type_v = GGML_TYPE_F32;
    cp.flash_attn_type = LLAMA_FLASH_ATTN_TYPE_DISABLED;
    const char *kv = getenv("LLAMA_REF_KV");
    if (kv && *kv && strcmp(kv, "f32")) {
        const enum ggml_type t = !strcmp(kv, "f16")    ? GGML_TYPE_F16
                                 : !strcmp(kv, "bf16") ? GGML_TYPE_BF16
                                 : !strcmp(kv, "q8_0") ? GGML_TYPE_Q8_0
                                 : !strcmp(kv, "q4_0") ? GGML_TYPE_Q4_0
                                                       : GGML_TYPE_COUNT;
        if (t == GGML_TYPE_COUNT) {
            fprintf(stderr, "LLAMA_REF_KV: unknown cache type '%s'\n", kv);
            return 2;
        }
        cp.type_k = cp.type_v = t;
        if (t == GGML_TYPE_Q8_0 || t == GGML_TYPE_Q4_0)
            cp.flash_attn_type = LLAMA_FLASH_ATTN_TYPE_ENABLED;
    }
    cp.swa_full = true;
    cp.kv_unified = true;
    struct llama_context *ctx = llama_init_from_model(model, cp);
    if (!ctx) return 1;

    const int nr = np + ng;
    int32_t *tok = malloc(sizeof(int32_t) * (size_t)(nr + 1));
    for (int i = 0; i < np; i++)
        tok[i] = (int32_t)(lo + (int)(lcg(&seed) % (uint64_t)(hi - lo)));
    float *rows = malloc(sizeof(float) * (size_t)nr * (size_t)nv);

    /* LLAMA_REF_CHUNK=n: the prompt in chunks of n tokens instead (1: llama.cpp's
     * one-token path for every row), to tell which path a difference is in */
    const char *ch = getenv("LLAMA_REF_CHUNK");
    const int chunk = ch && atoi(ch) > 0 ? atoi(ch) : np;
    struct llama_batch b = llama_batch_init(chunk, 0, 1);
    for (int i0 = 0; i0 < np; i0 += chunk) {
        const int n = np - i0 < chunk ? np - i0 : chunk;
        for (int i = 0; i < n; i++) {
            b.token[i] = tok[i0 + i];
            b.pos[i] = i0 + i;
            b.n_seq_id[i] = 1;
            b.seq_id[i][0] = 0;
            b.logits[i] = 1;
        }
        b.n_tokens = n;
        if (llama_decode(ctx, b)) return 1;
        for (int i = 0; i < n; i++)
            memcpy(rows + (size_t)(i0 + i) * nv, llama_get_logits_ith(ctx, i),
                   sizeof(float) * (size_t)nv);
    }
    llama_batch_free(b);
    /* greedy: token np = argmax of the last prompt row, fed one per decode */
    for (int j = 0; j < ng; j++) {
        tok[np + j] = argmax(rows + (size_t)(np + j - 1) * nv, nv);
        struct llama_batch one = llama_batch_init(1, 0, 1);
        one.token[0] = tok[np + j];
        one.pos[0] = np + j;
        one.n_seq_id[0] = 1;
        one.seq_id[0][0] = 0;
        one.logits[0] = 1;
        one.n_tokens = 1;
        if (llama_decode(ctx, one)) return 1;
        memcpy(rows + (size_t)(np + j) * nv, llama_get_logits_ith(ctx, 0),
               sizeof(float) * (size_t)nv);
        llama_batch_free(one);
    }

    FILE *f = fopen(out, "wb");
    if (!f) return 1;
    int nfull = 0;
    for (int r = 0; r < nr; r++)
        nfull += r % stride == 0 || r >= np - 1;
    const uint32_t hdr[6] = {(uint32_t)nv,     (uint32_t)np,  (uint32_t)ng,
                             (uint32_t)stride, (uint32_t)f16, (uint32_t)nfull};
    fwrite("PTREF01", 1, 8, f);
    fwrite(hdr, sizeof hdr, 1, f);
    fwrite(tok, sizeof(int32_t), (size_t)nr, f);
    for (int r = 0; r < nr; r++) {
        uint16_t id[5];
        float v[5];
        top5(rows + (size_t)r * nv, nv, id, v);
        fwrite(id, sizeof id, 1, f);
        fwrite(v, sizeof v, 1, f);
    }
    for (int r = 0; r < nr; r++) {
        if (!(r % stride == 0 || r >= np - 1)) continue;
        const float *x = rows + (size_t)r * nv;
        if (f16) {
            for (int i = 0; i < nv; i++) {
                ggml_fp16_t h = ggml_fp32_to_fp16(x[i]);
                fwrite(&h, sizeof h, 1, f);
            }
        } else {
            fwrite(x, sizeof(float), (size_t)nv, f);
        }
    }
    fclose(f);
    llama_free(ctx);
    llama_model_free(model);
    return 0;
}
