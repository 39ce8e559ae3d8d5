/* mkmodel.c — writes a synthetic MoE GGUF of realistic proportions with random
 * weights, for `make bench` and other measurements that need a big model and no
 * download. Four architectures (`--arch`):
 *
 *   build/mkmodel -o build/bench/glm-dsa-bench.gguf [--experts 64 --expert-type mix ...]
 *   build/mkmodel --arch gemma4 -o build/bench/gemma4-stream.gguf --raw-experts
 *
 * glm-dsa (the default; GLM-5.2 structure, scaled down): every metadata key
 * petrel's loader (src/model/glm_dsa.c) and llama.cpp's glm-dsa loader read, a
 * byte-level BPE tokenizer (`gpt2` / pre `glm4`: 256 byte tokens, then two-byte
 * merges up to the vocabulary size, then GLM's 14 control tokens), and the
 * tensors of `--layers` trunk layers (the first `--dense` with a dense FFN, the
 * others MoE with a shared expert), the DSA indexer on alternating full/shared
 * layers (full on even layers, as GLM-5.2's IndexShare), plus one NextN/MTP
 * block. Types follow the public GLM-5.2 Q2 build: routed experts Q4_K or Q2_K
 * (`--expert-type mix` alternates them layer by layer, Q4_K first), every other
 * matrix Q8_0 (`--attn-type`), norms, router and biases F32.
 *
 * deepseek2 (DeepSeek-V3 structure): glm-dsa's writer without the DSA indexer
 * and the MTP block, with DeepSeek-V3's keys (YaRN rope: factor 40 over 4096
 * positions; group-limited routing, `--groups` / `--groups-used`, 8 / 4 by
 * default) and glm-dsa's byte-level tokenizer (the prompts of the tests are
 * token ids, so which vocabulary does not matter to them).
 *
 * gemma4 (defaults: the real Gemma 4 26B-A4B shape, shared/REFERENCE.md §3,
 * about 14 GB): every key petrel's loader (src/model/gemma4.c) and llama.cpp's
 * gemma4 loader read. Every `--swa-period`-th layer is full attention
 * (`--kv-heads-full` heads of `--head-dim-full`, K = V so no attn_v,
 * proportional rope: rope_freqs lets a quarter of the pairs rotate), the others
 * sliding-window (`--window`, `--kv-heads` heads of `--head-dim`); every layer
 * has a dense GeGLU MLP (`--ff`) in parallel with the routed experts (fused
 * ffn_gate_up_exps, router input scale, per-expert output scale), Gemma's post
 * norms and layer_output_scale; embeddings are tied. The vocabulary is
 * SentencePiece-style BPE (`gemma4`): Gemma's 15 control tokens, "\n", "\n\n",
 * 256 byte-fallback tokens <0xXX>, the 94 printable ASCII characters and '▁'
 * (U+2581, the escaped space), then merges of two and then of three of those
 * characters up to the vocabulary size. Types follow a Q4_K_M build:
 * token_embd Q6_K (`--embd-type`), every matrix and the experts Q4_K; rows that
 * are not whole 256-wide super-blocks (ffn_down: 2112 inputs, ffn_down_exps:
 * 704) fall back as llama-quantize does (Q4_K -> Q5_0, Q5_K -> Q5_1, Q6_K ->
 * Q8_0; Q2_K/Q3_K -> Q4_0, where llama-quantize picks IQ4_NL, which mkmodel
 * cannot quantise). Norms, router and scales are F32.
 *
 * The weights are random but structured as the fixtures' generator describes
 * (shared/fixtures/README.md, "How the random weights are structured") so the
 * network is not chaotic: residual branches are scaled to a fraction of the
 * residual stream (glm-dsa: attn_output and ffn_down*; gemma4: the post-branch
 * norm gains), token embeddings share a common direction, norm gains are near
 * 1, the routed experts of a layer are a shared base plus an independent
 * deviation, and experts have fixed popularity tiers (glm-dsa: `exp_probs_b`;
 * gemma4's softmax router: rows leaning on the embeddings' common direction).
 * Gemma 4 specifics (attention scale 1): q/k norm gains are small, so that
 * attention scores have a standard deviation near 1.6, and the output-norm
 * gains have random signs (tied embeddings would otherwise make every token
 * predict itself).
 *
 * Determinism: every row of every tensor is drawn from its own generator,
 * seeded from (--seed, tensor index, row), so the file is byte-identical for
 * any --threads. Rows are generated and quantised in parallel (the reference
 * quantisers run at ~13 M weights/s per core for the K-quants, which makes
 * them the cost of this tool), in slabs written to the file in order.
 * `--raw-experts` writes routed experts as random valid blocks instead (disk
 * speed: the 14 GB gemma4 model takes about two minutes).
 *
 * Real shapes without the data (`--shape NAME --header-only`): the tensor
 * directory (names, types, shapes, offsets) and the metadata the loaders read of
 * a real model in the quantisation mix people download, with the data region
 * left as a hole (a sparse file of the real size: a few MB on disk). The engine
 * opens such a file with plan_only to show its memory plan (`petrel inspect
 * --ram`); nothing may read its weights (they read as zeros). No tokenizer is
 * written. Shapes (shared/REFERENCE.md; the mixes are approximations):
 *   glm-5.2      GLM-5.2 744B (glm-dsa), as GLM-5.2-UD-Q2_K_RoutedQ2K: routed
 *                experts Q2_K, every other matrix Q8_0, norms/router/biases F32,
 *                the DSA indexer in all 79 blocks (the public file's 1,809 tensors)
 *   deepseek-v3  DeepSeek-V3 671B (deepseek2), a Q2_K_XL-like mix: routed gate/up
 *                Q2_K, routed down Q3_K, other matrices Q4_K (Q5_0 where rows are
 *                not whole 256-blocks), output Q6_K; YaRN rope; no MTP block
 *                (llama.cpp's converter drops it)
 *   gemma4-26b   Gemma 4 26B-A4B (gemma4), the gemma4 defaults below (Q4_K_M-like)
 *   qwen3-235b   Qwen3-235B-A22B (qwen3moe), llama-quantize's Q4_K_M recipe: Q4_K,
 *                with Q6_K for output and for attn_v / ffn_down_exps on the layers
 *                its use_more_bits rule picks
 * qwen3moe (Qwen3-MoE structure): GQA attention (`--kv-heads`, `--head-dim`)
 * with per-head q/k norms, every layer MoE with a softmax router and no shared
 * expert, NEOX rope with base 1e6; glm-dsa's byte-level tokenizer, as for
 * deepseek2.
 *
 * Non-goals: meaningful text, reproducing the fixtures' exact generator.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include "common.h"
#include "format/gguf.h"
#include "kernels/quant.h"
#include "runtime/threadpool.h"

/* ===== Options ===== */

enum { ARCH_GLM_DSA, ARCH_GEMMA4, ARCH_DEEPSEEK2, ARCH_QWEN3MOE };

#define MK_SAME 0xffffffffu /* a type option meaning "as the related type" */

typedef struct mk_opts {
    const char *out;    /* output path */
    int arch;           /* ARCH_* */
    int n_embd;         /* hidden size */
    int n_layer;        /* trunk layers (glm-dsa: the MTP block comes on top) */
    int n_dense;        /* glm-dsa: leading dense layers */
    int n_ff;           /* dense FFN width (gemma4: the MLP beside the experts) */
    int n_expert;       /* routed experts per MoE layer */
    int n_used;         /* experts used per token */
    int n_ff_exp;       /* routed / shared expert width */
    int n_head;         /* attention (query) heads */
    int q_lora;         /* glm-dsa: q LoRA rank */
    int kv_lora;        /* glm-dsa: kv LoRA rank (the cached latent) */
    int qk_nope;        /* glm-dsa: per-head no-rope key dims */
    int qk_rope;        /* glm-dsa: per-head rope key dims (shared rope key) */
    int v_head;         /* glm-dsa: per-head value dims */
    int idx_head;       /* glm-dsa: DSA indexer heads */
    int idx_dim;        /* glm-dsa: DSA indexer head dims */
    int idx_top_k;      /* glm-dsa: DSA indexer top-k */
    int n_head_kv;      /* gemma4: KV heads of sliding-window layers; qwen3moe: KV heads */
    int n_head_kv_full; /* gemma4: KV heads of full-attention layers (K = V) */
    int head_dim;       /* gemma4: head dims of sliding-window layers; qwen3moe: head dims */
    int head_dim_full;  /* gemma4: head dims of full-attention layers */
    int window;         /* gemma4: sliding window (positions) */
    int swa_period;    /* gemma4: layers l with l % swa_period == swa_period-1 are full attention */
    int n_vocab;       /* vocabulary size */
    int expert_mix;    /* 1: alternate Q4_K / Q2_K by MoE layer */
    uint32_t exp_type; /* routed expert type when not mixed */
    uint32_t mat_type; /* every other matrix */
    uint32_t embd_type;     /* token_embd */
    uint32_t exp_down_type; /* routed ffn_down_exps (MK_SAME: the routed expert type) */
    uint32_t out_type;      /* output.weight (MK_SAME: mat_type) */
    int q4_k_m;       /* qwen3moe: Q6_K for attn_v and ffn_down_exps on use_more_bits layers */
    int n_nextn;      /* glm-dsa family: trailing MTP blocks (glm-dsa 1, deepseek2 0) */
    int n_group;      /* deepseek2: expert groups (group-limited routing; glm-dsa: 1) */
    int n_group_used; /* deepseek2: groups a token's experts are chosen from */
    int idx_all;      /* glm-dsa: indexer weights in every block (MTP too), all "full" */
    int n_ctx_train;  /* context_length */
    int yarn_orig;    /* deepseek2: YaRN's rope.scaling.original_context_length */
    uint64_t seed;
    int threads;
    int raw_experts;   /* 1: routed experts as random valid blocks (no quantiser) */
    int header_only;   /* 1: write the header only; the data region is a hole (sparse file) */
    const char *shape; /* --shape NAME, or NULL */
} mk_opts;

/* gemma4: is layer l full attention (else sliding window)? */
static int g4_full(const mk_opts *o, int l) {
    return l % o->swa_period == o->swa_period - 1;
}

/* gemma4 vocabulary: fixed tokens (15 control, "\n", "\n\n", 256 bytes), then
 * the base characters, then merges of two and three of them */
#define G4_FIXED (15 + 2 + 256)
#define G4_BASE 95
#define G4_MAX_VOCAB (G4_FIXED + G4_BASE + G4_BASE * G4_BASE + G4_BASE * G4_BASE * G4_BASE)

static void usage(FILE *f) {
    fprintf(
        f,
        "usage: mkmodel -o OUT.gguf [--arch glm-dsa|deepseek2|qwen3moe|gemma4] [options]\n"
        "       mkmodel -o OUT.gguf --shape glm-5.2|deepseek-v3|gemma4-26b|qwen3-235b "
        "--header-only\n"
        "defaults in brackets: glm-dsa, deepseek2 and qwen3moe / gemma4 (gemma4's are Gemma 4 "
        "26B-A4B's shape)\n"
        "  --arch A          glm-dsa, deepseek2 (no indexer, no MTP block), qwen3moe or gemma4\n"
        "                    [glm-dsa]\n"
        "  --embd N          hidden size [2048 / 2816]\n"
        "  --layers N        trunk layers, glm-dsa's MTP block not counted [8 / 30]\n"
        "  --ff N            dense FFN width [4096 / 2112]\n"
        "  --experts N       routed experts per MoE layer [64 / 128]\n"
        "  --used N          experts per token [8 / 8]\n"
        "  --ff-exp N        expert width [768 / 704]\n"
        "  --heads N         attention heads [16 / 16]\n"
        "  --vocab N         vocabulary size (>= 512) [32768 / 262144]\n"
        "  --expert-type T   q4_k, q2_k, ... or mix (glm-dsa: alternating per MoE layer) [mix / "
        "q4_k]\n"
        "  --attn-type T     type of every other matrix: q8_0, q4_k, q4_0, f16 ... [q8_0 / q4_k]\n"
        "  --embd-type T     type of token_embd [q8_0 / q6_k]\n"
        "  --seed N          random seed [1]\n"
        "  -t, --threads N   quantisation threads [all cores]\n"
        "  --raw-experts     write routed experts as random but valid Q4_K/Q2_K/Q5_0/Q4_0/Q8_0\n"
        "                    blocks (small finite scales, random quants) instead of quantising\n"
        "                    random floats: disk speed instead of ~6 MB/s per thread, for\n"
        "                    multi-GB I/O benchmarks (routing still comes from the F32 routers)\n"
        "  --shape NAME      a real model's shape and quantisation mix (see the top of "
        "mkmodel.c):\n"
        "                    glm-5.2, deepseek-v3, gemma4-26b, qwen3-235b; options after it "
        "override\n"
        "  --header-only     write metadata and tensor directory only; the data region is a hole\n"
        "                    (a sparse file of the real size), for memory plans (petrel inspect "
        "--ram)\n"
        "glm-dsa and deepseek2 (MLA):\n"
        "  --dense N         leading dense layers [1]\n"
        "  --q-lora N / --kv-lora N   LoRA ranks [768 / 512]\n"
        "  --groups N / --groups-used N   deepseek2: expert groups, used groups [8 / 4]\n"
        "  --yarn-orig N     deepseek2: YaRN's original context length [4096]\n"
        "  --idx-top-k N     DSA indexer top-k (glm-dsa) [2048]\n"
        "  --idx-heads N / --idx-dim N   DSA indexer heads and head dims [32 / 128]\n"
        "  --qk-nope N / --qk-rope N / --v-head N   MLA head dims [192 / 64 / 256]\n"
        "qwen3moe: --kv-heads N / --head-dim N   GQA KV heads and head dims [4 / 128]\n"
        "gemma4 only:\n"
        "  --kv-heads N / --head-dim N            sliding-window layers [8 / 256]\n"
        "  --kv-heads-full N / --head-dim-full N  full-attention layers [2 / 512]\n"
        "  --window N        sliding window [1024]\n"
        "  --swa-period N    every N-th layer is full attention [6]\n");
}

static int parse_type(const char *s, uint32_t *t) {
    static const struct {
        const char *name;
        uint32_t type;
    } names[] = {{"q4_k", QT_Q4_K}, {"q2_k", QT_Q2_K}, {"q3_k", QT_Q3_K}, {"q5_k", QT_Q5_K},
                 {"q6_k", QT_Q6_K}, {"q8_0", QT_Q8_0}, {"q4_0", QT_Q4_0}, {"q5_0", QT_Q5_0},
                 {"f16", QT_F16},   {"f32", QT_F32}};
    for (size_t i = 0; i < PT_ARRAY_LEN(names); i++)
        if (!strcasecmp(s, names[i].name)) {
            *t = names[i].type;
            return 0;
        }
    return -1;
}

/* --shape NAME: a real model's dimensions and quantisation mix (the top
 * comment says which mix; shared/REFERENCE.md has the dimensions). 0, or -1
 * for an unknown name. */
static int set_shape(mk_opts *o, const char *name);

/* The defaults of each architecture (see usage). */
static void set_defaults(mk_opts *o, int arch) {
    *o = (mk_opts){.arch = arch,
                   .n_dense = 1,
                   .q_lora = 768,
                   .kv_lora = 512,
                   .qk_nope = 192,
                   .qk_rope = 64,
                   .v_head = 256,
                   .idx_head = 32,
                   .idx_dim = 128,
                   .idx_top_k = 2048,
                   .n_head_kv = 8,
                   .n_head_kv_full = 2,
                   .head_dim = 256,
                   .head_dim_full = 512,
                   .window = 1024,
                   .swa_period = 6,
                   .n_used = 8,
                   .n_head = 16,
                   .seed = 1,
                   .exp_down_type = MK_SAME,
                   .out_type = MK_SAME,
                   .n_nextn = 1,
                   .n_group = 1,
                   .n_group_used = 1,
                   .n_ctx_train = 1048576,
                   .threads = (int)sysconf(_SC_NPROCESSORS_ONLN)};
    if (arch == ARCH_GEMMA4) {
        o->n_embd = 2816, o->n_layer = 30, o->n_ff = 2112, o->n_expert = 128, o->n_ff_exp = 704;
        o->n_vocab = 262144, o->expert_mix = 0, o->exp_type = QT_Q4_K, o->mat_type = QT_Q4_K;
        o->embd_type = QT_Q6_K, o->n_ctx_train = 262144;
    } else {
        o->n_embd = 2048, o->n_layer = 8, o->n_ff = 4096, o->n_expert = 64, o->n_ff_exp = 768;
        o->n_vocab = 32768, o->expert_mix = 1, o->exp_type = QT_Q4_K, o->mat_type = QT_Q8_0;
        o->embd_type = 0; /* 0: mat_type */
    }
    if (arch == ARCH_DEEPSEEK2) /* as glm-dsa, without MTP block; DeepSeek-V3's groups */
        o->n_nextn = 0, o->n_ctx_train = 163840, o->n_group = 8, o->n_group_used = 4,
        o->yarn_orig = 4096;
    if (arch == ARCH_QWEN3MOE) /* Qwen3-30B-A3B's attention: 32 / 4 heads of 128 */
        o->n_nextn = 0, o->n_dense = 0, o->n_ctx_train = 40960, o->n_head = 32, o->n_head_kv = 4,
        o->head_dim = 128;
}

static int parse_opts(int argc, char **argv, mk_opts *o) {
    /* --arch or --shape first: it decides the defaults the other options override */
    int arch = ARCH_GLM_DSA;
    const char *shape = NULL;
    for (int i = 1; i + 1 < argc; i++)
        if (!strcmp(argv[i], "--arch")) {
            if (!strcmp(argv[i + 1], "gemma4"))
                arch = ARCH_GEMMA4;
            else if (!strcmp(argv[i + 1], "glm-dsa"))
                arch = ARCH_GLM_DSA;
            else if (!strcmp(argv[i + 1], "deepseek2"))
                arch = ARCH_DEEPSEEK2;
            else if (!strcmp(argv[i + 1], "qwen3moe"))
                arch = ARCH_QWEN3MOE;
            else {
                fprintf(stderr,
                        "mkmodel: --arch '%s': expected glm-dsa, deepseek2, qwen3moe or gemma4\n",
                        argv[i + 1]);
                return -1;
            }
        } else if (!strcmp(argv[i], "--shape")) {
            shape = argv[i + 1];
        }
    set_defaults(o, arch);
    if (shape && set_shape(o, shape)) {
        fprintf(stderr,
                "mkmodel: --shape '%s': expected glm-5.2, deepseek-v3, gemma4-26b or qwen3-235b\n",
                shape);
        return -1;
    }
    static const struct {
        const char *flag;
        size_t off;
    } ints[] = {{"--embd", offsetof(mk_opts, n_embd)},
                {"--layers", offsetof(mk_opts, n_layer)},
                {"--dense", offsetof(mk_opts, n_dense)},
                {"--ff", offsetof(mk_opts, n_ff)},
                {"--experts", offsetof(mk_opts, n_expert)},
                {"--used", offsetof(mk_opts, n_used)},
                {"--ff-exp", offsetof(mk_opts, n_ff_exp)},
                {"--heads", offsetof(mk_opts, n_head)},
                {"--q-lora", offsetof(mk_opts, q_lora)},
                {"--kv-lora", offsetof(mk_opts, kv_lora)},
                {"--idx-top-k", offsetof(mk_opts, idx_top_k)},
                {"--idx-heads", offsetof(mk_opts, idx_head)},
                {"--idx-dim", offsetof(mk_opts, idx_dim)},
                {"--qk-nope", offsetof(mk_opts, qk_nope)},
                {"--qk-rope", offsetof(mk_opts, qk_rope)},
                {"--v-head", offsetof(mk_opts, v_head)},
                {"--vocab", offsetof(mk_opts, n_vocab)},
                {"--kv-heads", offsetof(mk_opts, n_head_kv)},
                {"--kv-heads-full", offsetof(mk_opts, n_head_kv_full)},
                {"--head-dim", offsetof(mk_opts, head_dim)},
                {"--head-dim-full", offsetof(mk_opts, head_dim_full)},
                {"--window", offsetof(mk_opts, window)},
                {"--swa-period", offsetof(mk_opts, swa_period)},
                {"--groups", offsetof(mk_opts, n_group)},
                {"--groups-used", offsetof(mk_opts, n_group_used)},
                {"--yarn-orig", offsetof(mk_opts, yarn_orig)},
                {"-t", offsetof(mk_opts, threads)},
                {"--threads", offsetof(mk_opts, threads)}};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            exit(0);
        }
        if (!strcmp(a, "--raw-experts")) {
            o->raw_experts = 1;
            continue;
        }
        if (!strcmp(a, "--header-only")) {
            o->header_only = 1;
            continue;
        }
        if (!v) {
            fprintf(stderr, "mkmodel: option %s needs a value (or is unknown)\n", a);
            return -1;
        }
        i++;
        if (!strcmp(a, "-o")) {
            o->out = v;
        } else if (!strcmp(a, "--arch") || !strcmp(a, "--shape")) {
            /* read above */
        } else if (!strcmp(a, "--expert-type")) {
            o->expert_mix = !strcasecmp(v, "mix");
            if (!o->expert_mix && parse_type(v, &o->exp_type)) {
                fprintf(stderr, "mkmodel: --expert-type '%s': expected q4_k, q2_k, ... or mix\n",
                        v);
                return -1;
            }
        } else if (!strcmp(a, "--attn-type") || !strcmp(a, "--embd-type")) {
            if (parse_type(v, a[2] == 'a' ? &o->mat_type : &o->embd_type)) {
                fprintf(stderr, "mkmodel: %s '%s': expected q8_0, q4_k, q4_0, f16, ...\n", a, v);
                return -1;
            }
        } else if (!strcmp(a, "--seed")) {
            o->seed = strtoull(v, NULL, 10);
        } else {
            size_t k = 0;
            while (k < PT_ARRAY_LEN(ints) && strcmp(a, ints[k].flag))
                k++;
            char *end;
            errno = 0;
            long n = strtol(v, &end, 10);
            if (k == PT_ARRAY_LEN(ints) || errno || *end || n < 0 || n > (1L << 24)) {
                fprintf(stderr, "mkmodel: bad option '%s %s'\n", a, v);
                return -1;
            }
            *(int *)((char *)o + ints[k].off) = (int)n;
        }
    }
    if (!o->out) {
        usage(stderr);
        return -1;
    }
    if (o->threads < 1) o->threads = 1;
    if (!o->embd_type) o->embd_type = o->mat_type;
    if (o->n_layer < 1 || o->n_used < 1 || o->n_used > o->n_expert || o->n_embd % 256 ||
        o->n_head < 1) {
        fprintf(stderr,
                "mkmodel: inconsistent shape (need layers >= 1, 1 <= used <= experts, heads >= 1, "
                "embd a multiple of 256)\n");
        return -1;
    }
    if (o->arch == ARCH_QWEN3MOE &&
        (o->n_vocab < 512 || (o->n_vocab > 65536 + 256 + 14 && !o->header_only) ||
         o->n_head_kv < 1 || o->n_head % o->n_head_kv || o->head_dim < 8 || o->head_dim % 8)) {
        fprintf(stderr, "mkmodel: inconsistent qwen3moe shape (need vocab in 512..65806 unless "
                        "--header-only, KV heads dividing heads, head dims a multiple of 8)\n");
        return -1;
    }
    /* the vocabulary limit is the byte-level tokenizer's; header-only files have none */
    if ((o->arch == ARCH_GLM_DSA || o->arch == ARCH_DEEPSEEK2) &&
        (o->n_dense > o->n_layer || o->n_vocab < 512 ||
         (o->n_vocab > 65536 + 256 + 14 && !o->header_only) || o->n_ff_exp % 256)) {
        fprintf(stderr,
                "mkmodel: inconsistent glm-dsa shape (need dense <= layers, vocab in 512..65806 "
                "unless --header-only, ff-exp a multiple of 256)\n");
        return -1;
    }
    /* llama.cpp's rule for group-limited routing: groups divide the experts, fewer groups
     * than experts, fewer used groups than groups */
    if (o->arch == ARCH_DEEPSEEK2 && o->n_group > 1 &&
        (o->n_expert % o->n_group || o->n_group >= o->n_expert || o->n_group_used < 1 ||
         o->n_group_used >= o->n_group)) {
        fprintf(stderr,
                "mkmodel: inconsistent expert groups %d/%d for %d experts (need groups dividing "
                "and below the experts, 1 <= groups-used < groups)\n",
                o->n_group_used, o->n_group, o->n_expert);
        return -1;
    }
    if (o->arch == ARCH_GEMMA4 &&
        (o->n_vocab < 512 || o->n_vocab > G4_MAX_VOCAB || o->n_ff % 32 || o->n_ff_exp % 32 ||
         o->n_ff < 32 || o->n_ff_exp < 32 || o->n_head_kv < 1 || o->n_head_kv_full < 1 ||
         o->n_head % o->n_head_kv || o->n_head % o->n_head_kv_full || o->head_dim < 8 ||
         o->head_dim % 8 || o->head_dim_full < 8 || o->head_dim_full % 8 || o->window < 1 ||
         o->swa_period < 1)) {
        fprintf(
            stderr,
            "mkmodel: inconsistent gemma4 shape (need vocab in 512..%d, ff and ff-exp multiples of "
            "32, KV heads dividing heads, head dims multiples of 8, window and swa-period >= 1)\n",
            G4_MAX_VOCAB);
        return -1;
    }
    return 0;
}

/* ===== Random numbers ===== */

static uint64_t splitmix(uint64_t x) {
    x += 0x9E3779B97F4A7C15ULL;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
    return x ^ (x >> 31);
}

static inline uint64_t xs_next(uint64_t *s) {
    *s ^= *s >> 12;
    *s ^= *s << 25;
    *s ^= *s >> 27;
    return *s * 0x2545F4914F6CDD1DULL;
}

/* Approximately standard normal: Irwin-Hall sum of four 16-bit uniforms,
 * centred and scaled to unit variance. Cheap, bounded (|x| < 3.47) and good
 * enough for weights whose distribution only has to look plausible. */
static inline float gauss(uint64_t *s) {
    uint64_t r = xs_next(s);
    float sum = (float)(r & 0xFFFF) + (float)((r >> 16) & 0xFFFF) + (float)((r >> 32) & 0xFFFF) +
                (float)(r >> 48);
    return (sum * (1.0f / 65536.0f) - 2.0f) * 1.7320508f;
}

/* Seed of row `row` of stream `stream` of tensor `ti`. */
static uint64_t row_seed(uint64_t seed, int ti, int stream, int64_t row) {
    uint64_t s =
        splitmix(seed ^ splitmix(((uint64_t)ti << 32) ^ ((uint64_t)stream << 60) ^ (uint64_t)row));
    return s ? s : 1;
}

/* ===== Tensor list ===== */

typedef enum {
    K_GAUSS,  /* scale * N(0,1) */
    K_NORM,   /* p + scale * N(0,1): RMSNorm / LayerNorm gains (p: their mean, usually 1) */
    K_EMBD,   /* scale * (common direction + N(0,1)): token embeddings */
    K_EXPERT, /* scale * (base_row + deviation): routed experts share a base per layer */
    K_TIERS,  /* exp_probs_b: fixed popularity tiers */
    K_SIGNED, /* +-p * (1 + scale * N(0,1)), random signs: gemma4's output norm */
    K_ROUTER, /* scale * N(0,1) + p * tier(row) * embedding direction: softmax-router rows */
    K_ROPE,   /* 1 for the first p values, 1e30 after: rope_freqs of proportional rope */
} mk_kind;

typedef struct mk_tensor {
    char name[96];
    uint32_t type;
    int n_dims;
    int64_t ne[3];
    mk_kind kind;
    float scale;
    float p; /* the kind's parameter (see mk_kind) */
} mk_tensor;

typedef struct mk_list {
    mk_tensor *t;
    int n, cap;
} mk_list;

static void add(mk_list *L, const char *name, uint32_t type, int n_dims, int64_t ne0, int64_t ne1,
                int64_t ne2, mk_kind kind, float scale) {
    if (L->n == L->cap) {
        L->cap = L->cap ? 2 * L->cap : 256;
        L->t = realloc(L->t, (size_t)L->cap * sizeof *L->t);
        if (!L->t) {
            fprintf(stderr, "mkmodel: out of memory\n");
            exit(1);
        }
    }
    mk_tensor *t = &L->t[L->n++];
    snprintf(t->name, sizeof t->name, "%s", name);
    t->type = type;
    t->n_dims = n_dims;
    t->ne[0] = ne0;
    t->ne[1] = ne1;
    t->ne[2] = ne2;
    t->kind = kind;
    t->scale = scale;
    t->p = 1.0f;
}

/* An F32 vector of kind `kind` with parameter p. */
static void add_vec(mk_list *L, const char *name, int64_t n, mk_kind kind, float p, float scale) {
    add(L, name, QT_F32, 1, n, 1, 1, kind, scale);
    L->t[L->n - 1].p = p;
}

/* The type llama-quantize falls back to when a row of ne0 weights is not a whole
 * number of `type`'s blocks (Gemma 4's 2112- and 704-wide down projections in a
 * K-quant). IQ4_NL, its choice for Q2_K/Q3_K, becomes Q4_0: mkmodel cannot
 * quantise IQ types. */
static uint32_t fit_type(uint32_t type, int64_t ne0) {
    const qt_traits *tr = qt_get(type);
    if (!tr || ne0 % tr->block == 0) return type;
    switch (type) {
    case QT_Q4_K: return QT_Q5_0;
    case QT_Q5_K: return QT_Q5_1;
    case QT_Q6_K: return QT_Q8_0;
    default: return QT_Q4_0;
    }
}

/* A matrix of n_in inputs: N(0, 1/n_in) keeps activations at unit scale. */
#define IN_SCALE(n) (1.0f / sqrtf((float)(n)))
/* Residual branches write this fraction of the residual stream's scale. */
#define RESID 0.25f

/* glm-dsa and deepseek2 (same MLA + sigmoid MoE; deepseek2 has no DSA indexer).
 * Matrices whose rows are not whole blocks of the wanted type fall back as
 * llama-quantize does (fit_type). */
static void build_glm_dsa(const mk_opts *o, mk_list *L) {
    const int E = o->n_embd, H = o->n_head, F = o->n_ff_exp;
    const uint32_t M = o->mat_type;
    char n[96];
#define MT(n_in) fit_type(M, n_in)
    add(L, "token_embd.weight", fit_type(o->embd_type, E), 2, E, o->n_vocab, 1, K_EMBD, 1.0f);
    add(L, "output_norm.weight", QT_F32, 1, E, 1, 1, K_NORM, 0.05f);
    add(L, "output.weight", fit_type(o->out_type == MK_SAME ? M : o->out_type, E), 2, E, o->n_vocab,
        1, K_GAUSS, 2.0f * IN_SCALE(E));
    int moe_seen = 0;
    for (int l = 0; l < o->n_layer + o->n_nextn; l++) { /* l >= n_layer: the MTP blocks */
        const int is_mtp = l >= o->n_layer, is_moe = l >= o->n_dense;
#define T(s) (snprintf(n, sizeof n, "blk.%d.%s", l, s), n)
        add(L, T("attn_norm.weight"), QT_F32, 1, E, 1, 1, K_NORM, 0.05f);
        add(L, T("attn_q_a.weight"), MT(E), 2, E, o->q_lora, 1, K_GAUSS, IN_SCALE(E));
        add(L, T("attn_q_a_norm.weight"), QT_F32, 1, o->q_lora, 1, 1, K_NORM, 0.05f);
        add(L, T("attn_q_b.weight"), MT(o->q_lora), 2, o->q_lora, H * (o->qk_nope + o->qk_rope), 1,
            K_GAUSS, IN_SCALE(o->q_lora));
        add(L, T("attn_kv_a_mqa.weight"), MT(E), 2, E, o->kv_lora + o->qk_rope, 1, K_GAUSS,
            IN_SCALE(E));
        add(L, T("attn_kv_a_norm.weight"), QT_F32, 1, o->kv_lora, 1, 1, K_NORM, 0.05f);
        add(L, T("attn_k_b.weight"), MT(o->qk_nope), 3, o->qk_nope, o->kv_lora, H, K_GAUSS,
            IN_SCALE(o->qk_nope));
        add(L, T("attn_v_b.weight"), MT(o->kv_lora), 3, o->kv_lora, o->v_head, H, K_GAUSS,
            IN_SCALE(o->kv_lora));
        add(L, T("attn_output.weight"), MT(H * o->v_head), 2, H * o->v_head, E, 1, K_GAUSS,
            RESID * IN_SCALE(H * o->v_head));
        add(L, T("ffn_norm.weight"), QT_F32, 1, E, 1, 1, K_NORM, 0.05f);
        /* "full" indexer layers: even ones (IndexShare: odd layers reuse them), or all */
        if (o->arch == ARCH_GLM_DSA && (o->idx_all || (!is_mtp && l % 2 == 0))) {
            add(L, T("indexer.attn_q_b.weight"), MT(o->q_lora), 2, o->q_lora,
                o->idx_head * o->idx_dim, 1, K_GAUSS, IN_SCALE(o->q_lora));
            add(L, T("indexer.attn_k.weight"), MT(E), 2, E, o->idx_dim, 1, K_GAUSS, IN_SCALE(E));
            add(L, T("indexer.k_norm.weight"), QT_F32, 1, o->idx_dim, 1, 1, K_NORM, 0.05f);
            add(L, T("indexer.k_norm.bias"), QT_F32, 1, o->idx_dim, 1, 1, K_GAUSS, 0.02f);
            add(L, T("indexer.proj.weight"), MT(E), 2, E, o->idx_head, 1, K_GAUSS, IN_SCALE(E));
        }
        if (!is_moe) {
            add(L, T("ffn_gate.weight"), MT(E), 2, E, o->n_ff, 1, K_GAUSS, IN_SCALE(E));
            add(L, T("ffn_up.weight"), MT(E), 2, E, o->n_ff, 1, K_GAUSS, IN_SCALE(E));
            add(L, T("ffn_down.weight"), MT(o->n_ff), 2, o->n_ff, E, 1, K_GAUSS,
                RESID * IN_SCALE(o->n_ff));
        } else {
            const uint32_t X = o->expert_mix ? (moe_seen % 2 ? QT_Q2_K : QT_Q4_K) : o->exp_type;
            const uint32_t XD = o->exp_down_type == MK_SAME ? X : o->exp_down_type;
            moe_seen++;
            add(L, T("ffn_gate_inp.weight"), QT_F32, 2, E, o->n_expert, 1, K_GAUSS, IN_SCALE(E));
            add(L, T("exp_probs_b.bias"), QT_F32, 1, o->n_expert, 1, 1, K_TIERS, 0.0f);
            add(L, T("ffn_gate_exps.weight"), X, 3, E, F, o->n_expert, K_EXPERT, IN_SCALE(E));
            add(L, T("ffn_up_exps.weight"), X, 3, E, F, o->n_expert, K_EXPERT, IN_SCALE(E));
            add(L, T("ffn_down_exps.weight"), XD, 3, F, E, o->n_expert, K_EXPERT,
                RESID * IN_SCALE(F));
            add(L, T("ffn_gate_shexp.weight"), MT(E), 2, E, F, 1, K_GAUSS, IN_SCALE(E));
            add(L, T("ffn_up_shexp.weight"), MT(E), 2, E, F, 1, K_GAUSS, IN_SCALE(E));
            add(L, T("ffn_down_shexp.weight"), MT(F), 2, F, E, 1, K_GAUSS, RESID * IN_SCALE(F));
        }
        if (is_mtp) {
            add(L, T("nextn.eh_proj.weight"), MT(2 * E), 2, 2 * E, E, 1, K_GAUSS, IN_SCALE(2 * E));
            add(L, T("nextn.enorm.weight"), QT_F32, 1, E, 1, 1, K_NORM, 0.05f);
            add(L, T("nextn.hnorm.weight"), QT_F32, 1, E, 1, 1, K_NORM, 0.05f);
            add(L, T("nextn.shared_head_norm.weight"), QT_F32, 1, E, 1, 1, K_NORM, 0.05f);
        }
#undef T
    }
#undef MT
}

/* llama-quantize's use_more_bits: the layers its Q4_K_M recipe gives Q6_K
 * (attn_v, ffn_down): the first and last eighth, and every third between. */
static int use_more_bits(int l, int n) {
    return l < n / 8 || l >= 7 * n / 8 || (l - n / 8) % 3 == 2;
}

/* qwen3moe: GQA attention with per-head q/k norms, every layer MoE (softmax
 * router) without a shared expert. */
static void build_qwen3moe(const mk_opts *o, mk_list *L) {
    const int E = o->n_embd, QD = o->n_head * o->head_dim, KVD = o->n_head_kv * o->head_dim,
              F = o->n_ff_exp;
    const uint32_t M = o->mat_type, Q6 = QT_Q6_K;
    char n[96];
    add(L, "token_embd.weight", fit_type(o->embd_type, E), 2, E, o->n_vocab, 1, K_EMBD, 1.0f);
    add(L, "output_norm.weight", QT_F32, 1, E, 1, 1, K_NORM, 0.05f);
    add(L, "output.weight", fit_type(o->out_type == MK_SAME ? M : o->out_type, E), 2, E, o->n_vocab,
        1, K_GAUSS, 2.0f * IN_SCALE(E));
    for (int l = 0; l < o->n_layer; l++) {
        const int more = o->q4_k_m && use_more_bits(l, o->n_layer);
        const uint32_t XD = o->exp_down_type == MK_SAME ? o->exp_type : o->exp_down_type;
#define T(s) (snprintf(n, sizeof n, "blk.%d.%s", l, s), n)
        add(L, T("attn_norm.weight"), QT_F32, 1, E, 1, 1, K_NORM, 0.05f);
        add(L, T("attn_q.weight"), fit_type(M, E), 2, E, QD, 1, K_GAUSS, IN_SCALE(E));
        add(L, T("attn_k.weight"), fit_type(M, E), 2, E, KVD, 1, K_GAUSS, IN_SCALE(E));
        add(L, T("attn_v.weight"), fit_type(more ? Q6 : M, E), 2, E, KVD, 1, K_GAUSS, IN_SCALE(E));
        add(L, T("attn_q_norm.weight"), QT_F32, 1, o->head_dim, 1, 1, K_NORM, 0.05f);
        add(L, T("attn_k_norm.weight"), QT_F32, 1, o->head_dim, 1, 1, K_NORM, 0.05f);
        add(L, T("attn_output.weight"), fit_type(M, QD), 2, QD, E, 1, K_GAUSS,
            RESID * IN_SCALE(QD));
        add(L, T("ffn_norm.weight"), QT_F32, 1, E, 1, 1, K_NORM, 0.05f);
        add(L, T("ffn_gate_inp.weight"), QT_F32, 2, E, o->n_expert, 1, K_GAUSS, IN_SCALE(E));
        add(L, T("ffn_gate_exps.weight"), fit_type(o->exp_type, E), 3, E, F, o->n_expert, K_EXPERT,
            IN_SCALE(E));
        add(L, T("ffn_up_exps.weight"), fit_type(o->exp_type, E), 3, E, F, o->n_expert, K_EXPERT,
            IN_SCALE(E));
        add(L, T("ffn_down_exps.weight"), fit_type(more ? Q6 : XD, F), 3, F, E, o->n_expert,
            K_EXPERT, RESID * IN_SCALE(F));
#undef T
    }
}

/* Gemma 4: a branch output is RMS-normed and then multiplied by its post norm,
 * so the post-norm gain is the branch's share of the residual stream (whose RMS
 * is about 1.3 after the embedding scale). */
#define G4_POST 0.6f
/* q/k norm gain giving attention scores (scale 1) a standard deviation of ~1.6
 * over D head dims: sqrt(D) * g^2 = 1.6 */
#define G4_QK_GAIN(D) sqrtf(1.6f / sqrtf((float)(D)))

static void build_gemma4(const mk_opts *o, mk_list *L) {
    const int E = o->n_embd, H = o->n_head, F = o->n_ff_exp, X = o->n_expert;
    const uint32_t M = o->mat_type, XT = o->expert_mix ? QT_Q4_K : o->exp_type;
    char n[96];
    /* tensor 0: the router rows lean on its common direction (fill_row, K_ROUTER) */
    add(L, "token_embd.weight", fit_type(o->embd_type, E), 2, E, o->n_vocab, 1, K_EMBD,
        1.28f * IN_SCALE(E));
    add_vec(L, "output_norm.weight", E, K_SIGNED, 5.0f, 0.05f);
    /* full layers: the first quarter of the dims rotate (pairs with factor 1), the rest do not */
    add_vec(L, "rope_freqs.weight", o->head_dim_full / 2, K_ROPE, (float)(o->head_dim_full / 8),
            0.0f);
    for (int l = 0; l < o->n_layer; l++) {
        const int full = g4_full(o, l), D = full ? o->head_dim_full : o->head_dim;
        const int KV = (full ? o->n_head_kv_full : o->n_head_kv) * D;
#define T(s) (snprintf(n, sizeof n, "blk.%d.%s", l, s), n)
#define MAT(s, n_in, n_out, sc) add(L, T(s), fit_type(M, n_in), 2, n_in, n_out, 1, K_GAUSS, sc)
        add_vec(L, T("attn_norm.weight"), E, K_NORM, 1.0f, 0.1f);
        MAT("attn_q.weight", E, H * D, IN_SCALE(E));
        MAT("attn_k.weight", E, KV, IN_SCALE(E));
        if (!full) MAT("attn_v.weight", E, KV, IN_SCALE(E)); /* full layers: V = K */
        add_vec(L, T("attn_q_norm.weight"), D, K_NORM, G4_QK_GAIN(D), 0.1f * G4_QK_GAIN(D));
        add_vec(L, T("attn_k_norm.weight"), D, K_NORM, G4_QK_GAIN(D), 0.1f * G4_QK_GAIN(D));
        MAT("attn_output.weight", H * D, E, IN_SCALE(H * D));
        add_vec(L, T("post_attention_norm.weight"), E, K_NORM, G4_POST, 0.1f);
        /* the dense MLP and the routed experts read the same input, each through its own norm */
        add_vec(L, T("ffn_norm.weight"), E, K_NORM, 1.0f, 0.1f);
        MAT("ffn_gate.weight", E, o->n_ff, IN_SCALE(E));
        MAT("ffn_up.weight", E, o->n_ff, IN_SCALE(E));
        MAT("ffn_down.weight", o->n_ff, E, IN_SCALE(o->n_ff));
        add_vec(L, T("post_ffw_norm_1.weight"), E, K_NORM, 1.0f, 0.1f);
        add_vec(L, T("pre_ffw_norm_2.weight"), E, K_NORM, 1.0f, 0.1f);
        /* router input: rms_norm(x) / sqrt(E) * scale, about unit length: gain 2 gives logits of
         * std 2 */
        add(L, T("ffn_gate_inp.weight"), QT_F32, 2, E, X, 1, K_ROUTER, 2.0f);
        L->t[L->n - 1].p = 1.5f;
        add_vec(L, T("ffn_gate_inp.scale"), E, K_NORM, 1.0f, 0.2f);
        add(L, T("ffn_gate_up_exps.weight"), fit_type(XT, E), 3, E, 2 * F, X, K_EXPERT,
            IN_SCALE(E));
        add(L, T("ffn_down_exps.weight"), fit_type(XT, F), 3, F, E, X, K_EXPERT, IN_SCALE(F));
        add_vec(L, T("ffn_down_exps.scale"), X, K_NORM, 1.0f, 0.2f);
        add_vec(L, T("post_ffw_norm_2.weight"), E, K_NORM, 1.0f, 0.1f);
        add_vec(L, T("post_ffw_norm.weight"), E, K_NORM, G4_POST, 0.1f);
        /* near 1: a smaller scalar would wash the embeddings' direction (and the router
         * tiers that lean on it) out of the residual stream within a few of 30 layers */
        add_vec(L, T("layer_output_scale.weight"), 1, K_NORM, 1.0f, 0.02f);
#undef MAT
#undef T
    }
}

/* ===== Generation ===== */

/* Row `row` (of ne0 values) of tensor ti, written into x. */
static void fill_row(const mk_opts *o, const mk_tensor *t, int ti, int64_t row, float *x) {
    const int64_t n = t->ne[0];
    uint64_t s = row_seed(o->seed, ti, 0, row);
    switch (t->kind) {
    case K_GAUSS:
        for (int64_t i = 0; i < n; i++)
            x[i] = t->scale * gauss(&s);
        break;
    case K_NORM:
        for (int64_t i = 0; i < n; i++)
            x[i] = t->p + t->scale * gauss(&s);
        break;
    case K_EMBD: {
        /* the common direction is stream 1, row 0: the same for every token */
        uint64_t c = row_seed(o->seed, ti, 1, 0);
        for (int64_t i = 0; i < n; i++)
            x[i] = t->scale * (0.6f * gauss(&c) + 0.8f * gauss(&s));
        break;
    }
    case K_EXPERT: {
        /* base row: stream 1, indexed by the row within one expert */
        uint64_t b = row_seed(o->seed, ti, 1, row % t->ne[1]);
        for (int64_t i = 0; i < n; i++)
            x[i] = t->scale * (0.6f * gauss(&b) + 0.8f * gauss(&s));
        break;
    }
    case K_TIERS:
        /* four popularity tiers by expert id, plus a little noise */
        for (int64_t i = 0; i < n; i++)
            x[i] = 0.06f * (float)(3 - (int)(i % 4)) - 0.09f + 0.01f * gauss(&s);
        break;
    case K_SIGNED:
        for (int64_t i = 0; i < n; i++) {
            const float m = t->p * (1.0f + t->scale * gauss(&s));
            x[i] = xs_next(&s) >> 63 ? -m : m;
        }
        break;
    case K_ROUTER: {
        /* expert `row` gets tier 3 - row % 4 along token_embd's (tensor 0) common
         * direction, normalised to unit length; the residual stream keeps a share of
         * that direction, so the tiers make some experts popular in every layer */
        uint64_t c = row_seed(o->seed, 0, 1, 0);
        const float tier = t->p * (float)(3 - (int)(row % 4)) / sqrtf((float)n);
        for (int64_t i = 0; i < n; i++)
            x[i] = t->scale * gauss(&s) + tier * gauss(&c);
        break;
    }
    case K_ROPE:
        for (int64_t i = 0; i < n; i++)
            x[i] = (float)i < t->p ? 1.0f : 1e30f;
        break;
    }
}

typedef struct slab_job {
    const mk_opts *o;
    const mk_tensor *t;
    int ti;
    int64_t row0, n_rows; /* rows of this slab */
    uint64_t row_bytes;
    uint8_t *out;   /* n_rows * row_bytes */
    float **rowbuf; /* per worker: ne0 floats */
} slab_job;

/* IEEE half of a positive normal float (truncating; enough for scales). */
static uint16_t half_of(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    int e = (int)((u >> 23) & 0xFF) - 127 + 15;
    if (e <= 0) return 0x0400; /* smallest normal half */
    if (e >= 31) return 0x7BFF;
    return (uint16_t)((e << 10) | ((u >> 13) & 0x3FF));
}

/* --raw-experts: the types a row can be written as random blocks, where the
 * f16 scale d (and dmin) sit in a block, and how they follow from the wanted
 * weight standard deviation for uniformly random quants and sub-block scales:
 * d = std / d_div, dmin = dmin_mul * std / d_div (which centres affine blocks). */
static const struct raw_fmt {
    uint32_t type;
    int d_off, dmin_off; /* byte offsets in the block; dmin_off -1: none */
    float d_div, dmin_mul;
} raw_fmts[] = {
    /* block_q4_K: d, dmin, scales[12], qs[128]; w = d*sc*q - dmin*m, sc, m in 0..63,
     * q in 0..15: std ~ 150 d, mean 0 when dmin = 7.5 d */
    {QT_Q4_K, 0, 2, 150.0f, 7.5f},
    /* block_q2_K: scales[16], qs[64], d, dmin; sc, m in 0..15, q in 0..3 */
    {QT_Q2_K, 80, 82, 10.0f, 1.5f},
    /* block_q5_0: d, qh[4], qs[16]; w = d*(q - 16), q in 0..31: std 9.23 d */
    {QT_Q5_0, 0, -1, 9.23f, 0.0f},
    /* block_q4_0: d, qs[16]; w = d*(q - 8), q in 0..15: std 4.61 d */
    {QT_Q4_0, 0, -1, 4.61f, 0.0f},
    /* block_q8_0: d, qs[32] (int8 in -128..127): std 73.9 d */
    {QT_Q8_0, 0, -1, 73.9f, 0.0f},
};

static const struct raw_fmt *raw_fmt_of(uint32_t type) {
    for (size_t i = 0; i < PT_ARRAY_LEN(raw_fmts); i++)
        if (raw_fmts[i].type == type) return &raw_fmts[i];
    return NULL;
}

/* --raw-experts: row `row` of an expert tensor as random valid blocks. Quants
 * and sub-block scales are uniform random bytes; the super-block scales d and
 * dmin are small finite halves chosen so that the decoded weights have roughly
 * zero mean and a standard deviation of about t->scale (like the quantised
 * random floats), so activations stay finite. */
static void raw_row(const mk_opts *o, const mk_tensor *t, int ti, int64_t row, uint8_t *out,
                    uint64_t row_bytes) {
    uint64_t s = row_seed(o->seed, ti, 2, row);
    for (uint64_t i = 0; i < row_bytes; i += 8) {
        uint64_t r = xs_next(&s);
        memcpy(out + i, &r, PT_MIN((uint64_t)8, row_bytes - i));
    }
    const struct raw_fmt *f = raw_fmt_of(t->type);
    const qt_traits *tr = qt_get(t->type);
    const uint64_t nb = (uint64_t)t->ne[0] / (uint64_t)tr->block, bb = (uint64_t)tr->bytes;
    const uint16_t d = half_of(t->scale / f->d_div),
                   dm = half_of(f->dmin_mul * t->scale / f->d_div);
    for (uint64_t b = 0; b < nb; b++) {
        memcpy(out + b * bb + f->d_off, &d, 2);
        if (f->dmin_off >= 0) memcpy(out + b * bb + f->dmin_off, &dm, 2);
    }
}

static void slab_worker(void *ctx, int ith, int nth) {
    slab_job *j = ctx;
    long lo, hi;
    tp_range((long)j->n_rows, ith, nth, &lo, &hi);
    float *x = j->rowbuf[ith];
    if (j->o->raw_experts && j->t->kind == K_EXPERT && raw_fmt_of(j->t->type)) {
        for (long r = lo; r < hi; r++)
            raw_row(j->o, j->t, j->ti, j->row0 + r, j->out + (uint64_t)r * j->row_bytes,
                    j->row_bytes);
        return;
    }
    for (long r = lo; r < hi; r++) {
        fill_row(j->o, j->t, j->ti, j->row0 + r, x);
        qt_quantize_ref(j->t->type, x, j->out + (uint64_t)r * j->row_bytes, j->t->ne[0]);
    }
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* ===== Metadata ===== */

/* GPT-2's byte-to-unicode order: printable bytes keep their code point, the
 * others map to 256, 257, ... Writes the UTF-8 of byte b's symbol into s. */
static void byte_symbol(int b, char *s) {
    int printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255);
    int cp = b;
    if (!printable) {
        int k = 0;
        for (int c = 0; c < b; c++)
            if (!((c >= 33 && c <= 126) || (c >= 161 && c <= 172) || (c >= 174 && c <= 255))) k++;
        cp = 256 + k;
    }
    if (cp < 0x80) {
        s[0] = (char)cp;
        s[1] = 0;
    } else {
        s[0] = (char)(0xC0 | (cp >> 6));
        s[1] = (char)(0x80 | (cp & 0x3F));
        s[2] = 0;
    }
}

static const char *const glm_specials[] = {
    "<|endoftext|>", "[MASK]",     "[gMASK]",     "[sMASK]",       "<sop>",
    "<eop>",         "<|system|>", "<|user|>",    "<|assistant|>", "<|observation|>",
    "<think>",       "</think>",   "<tool_call>", "</tool_call>"};

#define CHECK(x)                                                                                   \
    do {                                                                                           \
        if (x) {                                                                                   \
            fprintf(stderr, "mkmodel: %s\n", err.msg);                                             \
            return 1;                                                                              \
        }                                                                                          \
    } while (0)

static int write_tokenizer_glm(const mk_opts *o, gguf_writer *w) {
    pt_err err = {{0}};
    const int V = o->n_vocab, n_spec = (int)PT_ARRAY_LEN(glm_specials), n_merge = V - 256 - n_spec;
    char(*sym)[4] = malloc(256 * sizeof *sym);
    char **tok = calloc((size_t)V, sizeof *tok);
    char **merges = calloc((size_t)n_merge, sizeof *merges);
    int32_t *ttype = malloc((size_t)V * sizeof *ttype);
    if (!sym || !tok || !merges || !ttype) {
        fprintf(stderr, "mkmodel: out of memory\n");
        return 1;
    }
    /* token ids 0..255 in byte-to-unicode order (printable bytes first) */
    int order[256], k = 0;
    for (int b = 0; b < 256; b++)
        byte_symbol(b, sym[b]);
    for (int pass = 0; pass < 2; pass++)
        for (int b = 0; b < 256; b++) {
            int printable =
                (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255);
            if (printable == !pass) order[k++] = b;
        }
    for (int i = 0; i < 256; i++)
        tok[i] = strdup(sym[order[i]]);
    /* merges of two byte tokens, in id order: all distinct two-symbol strings */
    for (int m = 0; m < n_merge; m++) {
        const char *a = tok[m / 256 % 256], *b = tok[m % 256];
        char buf[16];
        snprintf(buf, sizeof buf, "%s %s", a, b);
        merges[m] = strdup(buf);
        snprintf(buf, sizeof buf, "%s%s", a, b);
        tok[256 + m] = strdup(buf);
    }
    for (int i = 0; i < n_spec; i++)
        tok[V - n_spec + i] = strdup(glm_specials[i]);
    for (int i = 0; i < V; i++) {
        if (!tok[i]) {
            fprintf(stderr, "mkmodel: out of memory\n");
            return 1;
        }
        ttype[i] = i >= V - n_spec ? 3 /* CONTROL */ : 1 /* NORMAL */;
    }
    const uint32_t eot = (uint32_t)(V - n_spec), bos = eot + 2, user = eot + 7, obs = eot + 9;
    CHECK(gguf_writer_kv_str(w, "tokenizer.ggml.model", "gpt2", &err));
    CHECK(gguf_writer_kv_str(w, "tokenizer.ggml.pre", "glm4", &err));
    CHECK(gguf_writer_kv_str_array(w, "tokenizer.ggml.tokens", (const char *const *)tok,
                                   (uint64_t)V, &err));
    CHECK(
        gguf_writer_kv_array(w, "tokenizer.ggml.token_type", GGUF_INT32, ttype, (uint64_t)V, &err));
    CHECK(gguf_writer_kv_str_array(w, "tokenizer.ggml.merges", (const char *const *)merges,
                                   (uint64_t)n_merge, &err));
    CHECK(gguf_writer_kv_u32(w, "tokenizer.ggml.bos_token_id", bos, &err));
    CHECK(gguf_writer_kv_u32(w, "tokenizer.ggml.eos_token_id", eot, &err));
    CHECK(gguf_writer_kv_u32(w, "tokenizer.ggml.unknown_token_id", eot, &err));
    CHECK(gguf_writer_kv_u32(w, "tokenizer.ggml.padding_token_id", eot, &err));
    CHECK(gguf_writer_kv_u32(w, "tokenizer.ggml.eot_token_id", user, &err));
    CHECK(gguf_writer_kv_u32(w, "tokenizer.ggml.eom_token_id", obs, &err));
    for (int i = 0; i < V; i++)
        free(tok[i]);
    for (int m = 0; m < n_merge; m++)
        free(merges[m]);
    free(tok);
    free(merges);
    free(ttype);
    free(sym);
    return 0;
}

/* general.name: the shape's, or a description of the synthetic model. */
static void model_name(const mk_opts *o, const char *arch, char *buf, size_t cap) {
    if (o->shape)
        snprintf(buf, cap, "petrel header-only shape %s (%s, %d layers x %d, %d experts)", o->shape,
                 arch, o->n_layer, o->n_embd, o->n_expert);
    else
        snprintf(buf, cap, "petrel synthetic %s %dx%d (%d experts, seed %llu)", arch, o->n_layer,
                 o->n_embd, o->n_expert, (unsigned long long)o->seed);
}

/* glm-dsa and deepseek2: every key their loaders read (deepseek2: YaRN rope and
 * group-limited routing instead of the DSA indexer). */
static int write_hparams_glm(const mk_opts *o, gguf_writer *w) {
    pt_err err = {{0}};
    const int ds = o->arch == ARCH_DEEPSEEK2;
    const char *arch = ds ? "deepseek2" : "glm-dsa";
    char desc[160];
    model_name(o, arch, desc, sizeof desc);
    CHECK(gguf_writer_kv_str(w, "general.architecture", arch, &err));
    CHECK(gguf_writer_kv_str(w, "general.name", desc, &err));
    CHECK(gguf_writer_kv_str(w, "general.type", "model", &err));
    CHECK(gguf_writer_kv_u32(w, "general.quantization_version", 2, &err));
    /* 10 = MOSTLY_Q2_K, 15 = MOSTLY_Q4_K_M: informative only */
    CHECK(gguf_writer_kv_u32(w, "general.file_type",
                             !o->expert_mix && o->exp_type == QT_Q2_K ? 10 : 15, &err));
    struct {
        const char *key;
        uint32_t v;
    } u[] = {/* glm-dsa >= 1M: llama.cpp then honours indexer.types (GLM-5.2) */
             {"context_length", (uint32_t)o->n_ctx_train},
             {"embedding_length", (uint32_t)o->n_embd},
             {"block_count", (uint32_t)(o->n_layer + o->n_nextn)},
             {"feed_forward_length", (uint32_t)o->n_ff},
             {"attention.head_count", (uint32_t)o->n_head},
             {"attention.head_count_kv", 1},
             {"expert_count", (uint32_t)o->n_expert},
             {"expert_used_count", (uint32_t)o->n_used},
             {"expert_group_count", (uint32_t)o->n_group},
             {"expert_group_used_count", (uint32_t)o->n_group_used},
             {"expert_gating_func", 2},
             {"leading_dense_block_count", (uint32_t)o->n_dense},
             {"vocab_size", (uint32_t)o->n_vocab},
             {"attention.q_lora_rank", (uint32_t)o->q_lora},
             {"attention.kv_lora_rank", (uint32_t)o->kv_lora},
             {"attention.key_length", (uint32_t)(o->kv_lora + o->qk_rope)},
             {"attention.value_length", (uint32_t)o->kv_lora},
             {"attention.key_length_mla", (uint32_t)(o->qk_nope + o->qk_rope)},
             {"attention.value_length_mla", (uint32_t)o->v_head},
             {"expert_feed_forward_length", (uint32_t)o->n_ff_exp},
             {"expert_shared_count", 1},
             {"rope.dimension_count", (uint32_t)o->qk_rope},
             {"nextn_predict_layers", (uint32_t)o->n_nextn},
             {"attention.indexer.head_count", (uint32_t)o->idx_head},
             {"attention.indexer.key_length", (uint32_t)o->idx_dim},
             {"attention.indexer.top_k", (uint32_t)o->idx_top_k}};
    /* deepseek2: no indexer keys (the last three) */
    const size_t n_u = PT_ARRAY_LEN(u) - (ds ? 3 : 0);
    char k[160];
    for (size_t i = 0; i < n_u; i++) {
        snprintf(k, sizeof k, "%s.%s", arch, u[i].key);
        CHECK(gguf_writer_kv_u32(w, k, u[i].v, &err));
    }
#define KEY(s) (snprintf(k, sizeof k, "%s.%s", arch, s), k)
    CHECK(gguf_writer_kv_f32(w, KEY("attention.layer_norm_rms_epsilon"), ds ? 1e-6f : 1e-5f, &err));
    CHECK(gguf_writer_kv_f32(w, KEY("rope.freq_base"), ds ? 1e4f : 8e6f, &err));
    CHECK(gguf_writer_kv_f32(w, KEY("expert_weights_scale"), 2.5f, &err));
    CHECK(gguf_writer_kv_bool(w, KEY("expert_weights_norm"), 1, &err));
    if (ds) { /* DeepSeek-V3's YaRN: 4096 (--yarn-orig) -> 163840 positions */
        CHECK(gguf_writer_kv_str(w, KEY("rope.scaling.type"), "yarn", &err));
        CHECK(gguf_writer_kv_f32(w, KEY("rope.scaling.factor"), 40.0f, &err));
        CHECK(gguf_writer_kv_u32(w, KEY("rope.scaling.original_context_length"),
                                 (uint32_t)o->yarn_orig, &err));
        CHECK(gguf_writer_kv_f32(w, KEY("rope.scaling.yarn_log_multiplier"), 0.1f, &err));
        return 0;
    }
    uint8_t *types = malloc((size_t)o->n_layer);
    if (!types) return 1;
    for (int l = 0; l < o->n_layer; l++)
        types[l] = o->idx_all || l % 2 == 0;
    CHECK(gguf_writer_kv_array(w, KEY("attention.indexer.types"), GGUF_BOOL, types,
                               (uint64_t)o->n_layer, &err));
#undef KEY
    free(types);
    return 0;
}

/* Gemma 4's control and chat tokens, ids 0..14 (types: 3 CONTROL up to <|think|>,
 * 4 USER_DEFINED after, as the converter marks the tokens a chat parser reads) */
static const char *const g4_specials[] = {"<pad>",
                                          "<eos>",
                                          "<bos>",
                                          "<unk>",
                                          "<mask>",
                                          "<|turn>",
                                          "<turn|>",
                                          "<|think|>",
                                          "<|channel>",
                                          "<channel|>",
                                          "<|tool_call>",
                                          "<tool_call|>",
                                          "<|tool_response>",
                                          "<tool_response|>",
                                          "<|\"|>"};

/* The gemma4 vocabulary (see the top comment): ids 0..14 control, 15 "\n",
 * 16 "\n\n", 17..272 <0x00>..<0xFF>, then G4_BASE characters (printable ASCII
 * and '▁'), then every pair of them and then pairs extended by a character,
 * each with its merge, in id order, up to n_vocab. */
static int write_tokenizer_gemma4(const mk_opts *o, gguf_writer *w) {
    pt_err err = {{0}};
    const int V = o->n_vocab, n_merge = V - G4_FIXED - G4_BASE;
    char **tok = calloc((size_t)V, sizeof *tok);
    char **merges = calloc((size_t)n_merge, sizeof *merges);
    int32_t *ttype = malloc((size_t)V * sizeof *ttype);
    if (!tok || !merges || !ttype) {
        fprintf(stderr, "mkmodel: out of memory\n");
        return 1;
    }
    _Static_assert(PT_ARRAY_LEN(g4_specials) == 15, "G4_FIXED counts 15 control tokens");
    int k = 0;
    for (int i = 0; i < 15; i++, k++) {
        tok[k] = strdup(g4_specials[i]);
        ttype[k] = i < 8 ? 3 : 4;
    }
    tok[k] = strdup("\n"), ttype[k++] = 1;
    tok[k] = strdup("\n\n"), ttype[k++] = 1;
    for (int b = 0; b < 256; b++, k++) {
        char s[8];
        snprintf(s, sizeof s, "<0x%02X>", b);
        tok[k] = strdup(s);
        ttype[k] = 6; /* BYTE */
    }
    const int base0 = k;
    tok[k] = strdup("\xE2\x96\x81"), ttype[k++] = 1; /* '▁' U+2581: the space */
    for (int c = 33; c <= 126; c++, k++) {
        char s[2] = {(char)c, 0};
        tok[k] = strdup(s);
        ttype[k] = 1;
    }
    const int pair0 = k;
    for (int m = 0; m < n_merge; m++, k++) {
        /* first every two-character pair, then each pair (in id order) plus a character */
        const char *a = m < G4_BASE * G4_BASE ? tok[base0 + m / G4_BASE]
                                              : tok[pair0 + (m - G4_BASE * G4_BASE) / G4_BASE];
        const char *b = tok[base0 + m % G4_BASE];
        char buf[32];
        snprintf(buf, sizeof buf, "%s %s", a, b);
        merges[m] = strdup(buf);
        snprintf(buf, sizeof buf, "%s%s", a, b);
        tok[k] = strdup(buf);
        ttype[k] = 1;
    }
    for (int i = 0; i < V; i++)
        if (!tok[i] || (i >= pair0 && !merges[i - pair0])) {
            fprintf(stderr, "mkmodel: out of memory\n");
            return 1;
        }
    CHECK(gguf_writer_kv_str(w, "tokenizer.ggml.model", "gemma4", &err));
    CHECK(gguf_writer_kv_str_array(w, "tokenizer.ggml.tokens", (const char *const *)tok,
                                   (uint64_t)V, &err));
    CHECK(
        gguf_writer_kv_array(w, "tokenizer.ggml.token_type", GGUF_INT32, ttype, (uint64_t)V, &err));
    CHECK(gguf_writer_kv_str_array(w, "tokenizer.ggml.merges", (const char *const *)merges,
                                   (uint64_t)n_merge, &err));
    CHECK(gguf_writer_kv_u32(w, "tokenizer.ggml.bos_token_id", 2, &err));
    CHECK(gguf_writer_kv_u32(w, "tokenizer.ggml.eos_token_id", 1, &err));
    CHECK(gguf_writer_kv_u32(w, "tokenizer.ggml.unknown_token_id", 3, &err));
    CHECK(gguf_writer_kv_u32(w, "tokenizer.ggml.padding_token_id", 0, &err));
    CHECK(gguf_writer_kv_u32(w, "tokenizer.ggml.mask_token_id", 4, &err));
    CHECK(gguf_writer_kv_bool(w, "tokenizer.ggml.add_bos_token", 1, &err));
    CHECK(gguf_writer_kv_bool(w, "tokenizer.ggml.add_space_prefix", 0, &err));
    for (int i = 0; i < V; i++)
        free(tok[i]);
    for (int m = 0; m < n_merge; m++)
        free(merges[m]);
    free(tok);
    free(merges);
    free(ttype);
    return 0;
}

static int write_hparams_gemma4(const mk_opts *o, gguf_writer *w) {
    pt_err err = {{0}};
    char desc[160];
    model_name(o, "gemma4", desc, sizeof desc);
    CHECK(gguf_writer_kv_str(w, "general.architecture", "gemma4", &err));
    CHECK(gguf_writer_kv_str(w, "general.name", desc, &err));
    CHECK(gguf_writer_kv_str(w, "general.type", "model", &err));
    CHECK(gguf_writer_kv_u32(w, "general.quantization_version", 2, &err));
    CHECK(
        gguf_writer_kv_u32(w, "general.file_type", 15, &err)); /* MOSTLY_Q4_K_M: informative only */
    struct {
        const char *key;
        uint32_t v;
    } u[] = {{"context_length", (uint32_t)o->n_ctx_train},
             {"embedding_length", (uint32_t)o->n_embd},
             {"block_count", (uint32_t)o->n_layer},
             {"feed_forward_length", (uint32_t)o->n_ff},
             {"attention.head_count", (uint32_t)o->n_head},
             {"expert_count", (uint32_t)o->n_expert},
             {"expert_used_count", (uint32_t)o->n_used},
             {"expert_feed_forward_length", (uint32_t)o->n_ff_exp},
             {"attention.key_length", (uint32_t)o->head_dim_full},
             {"attention.value_length", (uint32_t)o->head_dim_full},
             {"attention.key_length_swa", (uint32_t)o->head_dim},
             {"attention.value_length_swa", (uint32_t)o->head_dim},
             /* full layers: all dims, rope_freqs stops three quarters of them; sliding: all */
             {"rope.dimension_count", (uint32_t)o->head_dim_full},
             {"rope.dimension_count_swa", (uint32_t)o->head_dim},
             {"attention.sliding_window", (uint32_t)o->window},
             {"attention.shared_kv_layers", 0},
             {"embedding_length_per_layer_input", 0}};
    char k[160];
    for (size_t i = 0; i < PT_ARRAY_LEN(u); i++) {
        snprintf(k, sizeof k, "gemma4.%s", u[i].key);
        CHECK(gguf_writer_kv_u32(w, k, u[i].v, &err));
    }
    CHECK(gguf_writer_kv_f32(w, "gemma4.attention.layer_norm_rms_epsilon", 1e-6f, &err));
    CHECK(gguf_writer_kv_f32(w, "gemma4.rope.freq_base", 1e6f, &err));
    CHECK(gguf_writer_kv_f32(w, "gemma4.rope.freq_base_swa", 1e4f, &err));
    CHECK(gguf_writer_kv_f32(w, "gemma4.final_logit_softcapping", 30.0f, &err));
    int32_t *kv = malloc((size_t)o->n_layer * sizeof *kv);
    uint8_t *swa = malloc((size_t)o->n_layer);
    if (!kv || !swa) return 1;
    for (int l = 0; l < o->n_layer; l++) {
        kv[l] = g4_full(o, l) ? o->n_head_kv_full : o->n_head_kv;
        swa[l] = !g4_full(o, l);
    }
    CHECK(gguf_writer_kv_array(w, "gemma4.attention.head_count_kv", GGUF_INT32, kv,
                               (uint64_t)o->n_layer, &err));
    CHECK(gguf_writer_kv_array(w, "gemma4.attention.sliding_window_pattern", GGUF_BOOL, swa,
                               (uint64_t)o->n_layer, &err));
    free(kv);
    free(swa);
    return 0;
}

/* qwen3moe: every key petrel's loader (src/model/qwen3moe.c) reads. */
static int write_hparams_qwen3moe(const mk_opts *o, gguf_writer *w) {
    pt_err err = {{0}};
    char desc[160];
    model_name(o, "qwen3moe", desc, sizeof desc);
    CHECK(gguf_writer_kv_str(w, "general.architecture", "qwen3moe", &err));
    CHECK(gguf_writer_kv_str(w, "general.name", desc, &err));
    CHECK(gguf_writer_kv_str(w, "general.type", "model", &err));
    CHECK(gguf_writer_kv_u32(w, "general.quantization_version", 2, &err));
    CHECK(
        gguf_writer_kv_u32(w, "general.file_type", 15, &err)); /* MOSTLY_Q4_K_M: informative only */
    struct {
        const char *key;
        uint32_t v;
    } u[] = {{"context_length", (uint32_t)o->n_ctx_train},
             {"embedding_length", (uint32_t)o->n_embd},
             {"block_count", (uint32_t)o->n_layer},
             {"feed_forward_length", (uint32_t)o->n_ff},
             {"attention.head_count", (uint32_t)o->n_head},
             {"attention.head_count_kv", (uint32_t)o->n_head_kv},
             {"attention.key_length", (uint32_t)o->head_dim},
             {"attention.value_length", (uint32_t)o->head_dim},
             {"expert_count", (uint32_t)o->n_expert},
             {"expert_used_count", (uint32_t)o->n_used},
             {"expert_feed_forward_length", (uint32_t)o->n_ff_exp}};
    char k[160];
    for (size_t i = 0; i < PT_ARRAY_LEN(u); i++) {
        snprintf(k, sizeof k, "qwen3moe.%s", u[i].key);
        CHECK(gguf_writer_kv_u32(w, k, u[i].v, &err));
    }
    CHECK(gguf_writer_kv_f32(w, "qwen3moe.attention.layer_norm_rms_epsilon", 1e-6f, &err));
    CHECK(gguf_writer_kv_f32(w, "qwen3moe.rope.freq_base", 1e6f, &err));
    return 0;
}

/* What differs by architecture: the tensor list, the hyper-parameters, the
 * vocabulary (not written for --header-only). */
static const struct mk_arch {
    void (*tensors)(const mk_opts *o, mk_list *L);
    int (*hparams)(const mk_opts *o, gguf_writer *w);
    int (*tokenizer)(const mk_opts *o, gguf_writer *w);
} mk_archs[] = {
    [ARCH_GLM_DSA] = {build_glm_dsa, write_hparams_glm, write_tokenizer_glm},
    [ARCH_GEMMA4] = {build_gemma4, write_hparams_gemma4, write_tokenizer_gemma4},
    [ARCH_DEEPSEEK2] = {build_glm_dsa, write_hparams_glm, write_tokenizer_glm},
    [ARCH_QWEN3MOE] = {build_qwen3moe, write_hparams_qwen3moe, write_tokenizer_glm},
};

static int set_shape(mk_opts *o, const char *name) {
    if (!strcmp(name, "glm-5.2")) {
        /* 78 layers + 1 MTP block, 3 dense, 256 experts x 2048, MLA 64 heads */
        set_defaults(o, ARCH_GLM_DSA);
        o->n_embd = 6144, o->n_layer = 78, o->n_dense = 3, o->n_ff = 12288, o->n_expert = 256,
        o->n_ff_exp = 2048;
        o->n_head = 64, o->q_lora = 2048, o->kv_lora = 512, o->qk_nope = 192, o->qk_rope = 64,
        o->v_head = 256;
        o->idx_head = 32, o->idx_dim = 128, o->idx_top_k = 2048, o->n_vocab = 154880,
        o->idx_all = 1;
        o->expert_mix = 0, o->exp_type = QT_Q2_K, o->mat_type = QT_Q8_0, o->embd_type = QT_Q8_0;
    } else if (!strcmp(name, "deepseek-v3")) {
        /* 61 layers, 3 dense, 256 experts x 2048, MLA 128 heads; the converter drops the MTP block
         */
        set_defaults(o, ARCH_DEEPSEEK2);
        o->n_embd = 7168, o->n_layer = 61, o->n_dense = 3, o->n_ff = 18432, o->n_expert = 256,
        o->n_ff_exp = 2048;
        o->n_head = 128, o->q_lora = 1536, o->kv_lora = 512, o->qk_nope = 128, o->qk_rope = 64,
        o->v_head = 128;
        o->n_vocab = 129280, o->expert_mix = 0, o->exp_type = QT_Q2_K, o->exp_down_type = QT_Q3_K;
        o->mat_type = QT_Q4_K, o->embd_type = QT_Q4_K, o->out_type = QT_Q6_K;
    } else if (!strcmp(name, "gemma4-26b")) {
        set_defaults(o, ARCH_GEMMA4); /* the gemma4 defaults are Gemma 4 26B-A4B's shape */
    } else if (!strcmp(name, "qwen3-235b")) {
        /* 94 layers, 128 experts x 1536, GQA 64/4 heads x 128 */
        set_defaults(o, ARCH_QWEN3MOE);
        o->n_embd = 4096, o->n_layer = 94, o->n_ff = 12288, o->n_expert = 128, o->n_ff_exp = 1536;
        o->n_head = 64, o->n_head_kv = 4, o->head_dim = 128, o->n_vocab = 151936;
        o->expert_mix = 0, o->exp_type = QT_Q4_K, o->mat_type = QT_Q4_K, o->embd_type = QT_Q4_K;
        o->out_type = QT_Q6_K, o->q4_k_m = 1;
    } else {
        return -1;
    }
    o->shape = name;
    return 0;
}

/* ===== main ===== */

int main(int argc, char **argv) {
    mk_opts o;
    if (parse_opts(argc, argv, &o)) return 2;
    mk_list L = {0};
    const struct mk_arch *A = &mk_archs[o.arch];
    A->tensors(&o, &L);
    pt_err err = {{0}};
    gguf_writer *w = gguf_writer_new(32);
    if (!w) return 1;
    if (A->hparams(&o, w) || (!o.header_only && A->tokenizer(&o, w))) return 1;
    uint64_t total = 0, max_row = 0;
    for (int i = 0; i < L.n; i++) {
        mk_tensor *t = &L.t[i];
        uint64_t rb;
        if (qt_row_bytes(t->type, t->ne[0], &rb)) {
            fprintf(stderr, "mkmodel: %s: %lld is not a whole number of %s blocks\n", t->name,
                    (long long)t->ne[0], qt_name(t->type));
            return 1;
        }
        total += rb * (uint64_t)(t->ne[1] * t->ne[2]);
        if ((uint64_t)t->ne[0] > max_row) max_row = (uint64_t)t->ne[0];
        CHECK(gguf_writer_add_tensor(w, t->name, t->type, (uint32_t)t->n_dims, t->ne, &err));
    }
    if (o.header_only) {
        /* the data region is one hole: the file has its real size and a few MB of blocks */
        CHECK(gguf_writer_begin(w, o.out, &err));
        CHECK(gguf_writer_skip(w, total, &err));
        CHECK(gguf_writer_finish(w, &err));
        fprintf(stderr,
                "mkmodel: wrote %s: %d tensors, %.2f GiB of tensor data (header only, sparse)\n",
                o.out, L.n, total / 1073741824.0);
        gguf_writer_free(w);
        free(L.t);
        return 0;
    }
    fprintf(stderr, "mkmodel: %s: %d tensors, %.2f GiB, %d threads\n", o.out, L.n,
            total / 1073741824.0, o.threads);
    tp_pool *pool = tp_new(o.threads);
    const uint64_t slab_cap = 64ull << 20; /* bytes of quantised rows per parallel step */
    uint8_t *slab = malloc(slab_cap + (1 << 20));
    float **rowbuf = calloc((size_t)o.threads, sizeof *rowbuf);
    if (!pool || !slab || !rowbuf) return 1;
    for (int i = 0; i < o.threads; i++)
        if (!(rowbuf[i] = malloc(max_row * sizeof(float)))) return 1;
    CHECK(gguf_writer_begin(w, o.out, &err));
    double t0 = now_s(), last = t0;
    uint64_t done = 0;
    for (int i = 0; i < L.n; i++) {
        const mk_tensor *t = &L.t[i];
        uint64_t rb;
        qt_row_bytes(t->type, t->ne[0], &rb);
        const int64_t rows = t->ne[1] * t->ne[2];
        const int64_t per = PT_MAX((int64_t)1, (int64_t)(slab_cap / rb));
        for (int64_t r0 = 0; r0 < rows; r0 += per) {
            slab_job j = {&o, t, i, r0, PT_MIN(per, rows - r0), rb, slab, rowbuf};
            tp_run(pool, slab_worker, &j);
            CHECK(gguf_writer_write(w, slab, (uint64_t)j.n_rows * rb, &err));
            done += (uint64_t)j.n_rows * rb;
            if (now_s() - last > 5.0) {
                last = now_s();
                fprintf(stderr, "mkmodel: %5.1f%% (%s) %.0f s\n", 100.0 * done / total, t->name,
                        last - t0);
            }
        }
    }
    CHECK(gguf_writer_finish(w, &err));
    fprintf(stderr, "mkmodel: wrote %s in %.1f s\n", o.out, now_s() - t0);
    gguf_writer_free(w);
    tp_free(pool);
    for (int i = 0; i < o.threads; i++)
        free(rowbuf[i]);
    free(rowbuf);
    free(slab);
    free(L.t);
    return 0;
}
