/* test_gguf.c — the GGUF reader and writer: real fixture files, writer round
 * trips, split models, and a corpus of hostile files (each must be refused with
 * a message naming what was wrong; none may crash, hang or allocate wildly). */
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "format/gguf.h"
#include "kernels/quant.h"
#include "test.h"

/* ===== Fixtures parse ===== */

static void gguf_reads_fixtures(void) {
    const char *names[] = {"glm-dsa-f32.gguf",
                           "glm-dsa-rq2k.gguf",
                           "glm-dsa-iq2.gguf",
                           "glm-dsa-iq3.gguf",
                           "deepseek2-q8_0.gguf",
                           "deepseek2-q4_k_m.gguf",
                           "deepseek2-rq2k.gguf",
                           "gemma4-f32.gguf",
                           "gemma4-q4_k_m.gguf",
                           "gemma4-rq2k.gguf",
                           "qwen3moe-q4_k_m.gguf",
                           "qwen3moe-rq2k.gguf",
                           "qwen3moe-mxfp4.gguf",
                           "tokenizer/ggml-vocab-gemma-4.gguf",
                           "tokenizer/ggml-vocab-glm4.gguf",
                           "tokenizer/ggml-vocab-gpt-2.gguf"};
    for (size_t i = 0; i < PT_ARRAY_LEN(names); i++) {
        pt_err err = {{0}};
        if (!t_need(names[i])) continue; /* the F32 models: the others are still read */
        gguf_ctx *g = gguf_open(t_fixture(names[i]), &err);
        CHECKF(g != NULL, "%s: %s", names[i], err.msg);
        gguf_close(g);
    }
}

static void gguf_fixture_details(void) {
    pt_err err = {{0}};
    gguf_ctx *g = gguf_open(t_fixture("glm-dsa-rq2k.gguf"), &err);
    CHECKF(g, "%s", err.msg);
    if (!g) return;
    CHECK(g->version == 3);
    CHECK(g->n_tensors == 104);
    CHECK(g->alignment == 32);
    uint32_t blocks = 0;
    CHECK(gguf_get_u32(g, "glm-dsa.block_count", &blocks, &err) == 0 && blocks == 5);
    char arch[32];
    CHECK(gguf_get_str(g, "general.architecture", arch, sizeof arch, &err) == 0);
    CHECK(strcmp(arch, "glm-dsa") == 0);
    float scale = 0;
    CHECK(gguf_get_f32(g, "glm-dsa.expert_weights_scale", &scale, &err) == 0 && scale == 2.5f);
    const gguf_kv *types = gguf_find(g, "glm-dsa.attention.indexer.types");
    CHECK(types && types->val.type == GGUF_ARRAY && types->val.arr.n == 4);
    int64_t v;
    if (types) {
        CHECK(gguf_array_i64(&types->val, 0, &v) == 0 && v == 1);
        CHECK(gguf_array_i64(&types->val, 1, &v) == 0 && v == 0);
    }
    const gguf_tensor *t = gguf_find_tensor(g, "blk.1.ffn_gate_exps.weight");
    CHECK(t && t->type == QT_Q2_K && t->n_dims == 3);
    if (t) {
        CHECK(t->ne[0] == 256 && t->ne[1] == 256 && t->ne[2] == 16 && t->ne[3] == 1);
        CHECK(t->nbytes == 16ull * 256 * 84);
        CHECK(t->file_offset % 32 == 0);
    }
    CHECK(gguf_find_tensor(g, "no.such.tensor") == NULL);
    /* missing key and wrong type give clear errors */
    CHECK(gguf_get_u32(g, "glm-dsa.no_such_key", &blocks, &err) == -1);
    CHECK_STR_CONTAINS(err.msg, "missing metadata key 'glm-dsa.no_such_key'");
    CHECK(gguf_get_u32(g, "general.architecture", &blocks, &err) == -1);
    CHECK_STR_CONTAINS(err.msg, "has type string");
    /* vocabulary: array of strings */
    const gguf_kv *tok = gguf_find(g, "tokenizer.ggml.tokens");
    CHECK(tok && tok->val.arr.type == GGUF_STRING && tok->val.arr.n == 512);
    if (tok)
        CHECK(tok->val.arr.items[500].str.len == 7 &&
              !memcmp(tok->val.arr.items[500].str.ptr, "[gMASK]", 7));
    gguf_close(g);
}

/* ===== Writer round trip ===== */

static void fill(uint8_t *p, uint64_t n, uint32_t seed) {
    for (uint64_t i = 0; i < n; i++) {
        seed = seed * 1664525u + 1013904223u;
        p[i] = (uint8_t)(seed >> 24);
    }
}

static int write_sample(const char *path, uint32_t alignment, pt_err *err) {
    gguf_writer *w = gguf_writer_new(alignment);
    if (!w) return -1;
    int32_t arr_i[5] = {1, -2, 3, -4, 5};
    const char *strs[3] = {"alpha", "", "gamma \xe2\x96\x81"};
    int64_t ne_a[2] = {64, 3}, ne_b[3] = {256, 2, 4}, ne_c[1] = {7};
    int rc = gguf_writer_kv_str(w, "general.architecture", "test", err) ||
             gguf_writer_kv_u32(w, "test.block_count", 12, err) ||
             gguf_writer_kv_i32(w, "test.neg", -7, err) ||
             gguf_writer_kv_u64(w, "test.big", 1ull << 40, err) ||
             gguf_writer_kv_f32(w, "test.eps", 1e-5f, err) ||
             gguf_writer_kv_bool(w, "test.flag", 1, err) ||
             gguf_writer_kv_array(w, "test.ints", GGUF_INT32, arr_i, 5, err) ||
             gguf_writer_kv_str_array(w, "test.strs", strs, 3, err) ||
             gguf_writer_add_tensor(w, "a", QT_F32, 2, ne_a, err) ||
             gguf_writer_add_tensor(w, "b.weight", QT_Q4_K, 3, ne_b, err) ||
             gguf_writer_add_tensor(w, "c", QT_F16, 1, ne_c, err) ||
             gguf_writer_begin(w, path, err);
    if (!rc) {
        uint8_t buf[8 * 144];
        fill(buf, 64 * 3 * 4, 1);
        rc = gguf_writer_write(w, buf, 64 * 3 * 4, err);
        fill(buf, sizeof buf, 2);
        /* b in two uneven chunks */
        rc = rc || gguf_writer_write(w, buf, 100, err) ||
             gguf_writer_write(w, buf + 100, sizeof buf - 100, err);
        fill(buf, 14, 3);
        rc = rc || gguf_writer_write(w, buf, 14, err) || gguf_writer_finish(w, err);
    }
    gguf_writer_free(w);
    return rc ? -1 : 0;
}

static void gguf_writer_round_trip(void) {
    uint32_t aligns[2] = {32, 64};
    for (int k = 0; k < 2; k++) {
        char path[512];
        snprintf(path, sizeof path, "%s/rt%u.gguf", t_tmpdir(), aligns[k]);
        pt_err err = {{0}};
        CHECKF(write_sample(path, aligns[k], &err) == 0, "%s", err.msg);
        char tmp[600];
        snprintf(tmp, sizeof tmp, "%s.tmp", path);
        CHECK(access(tmp, F_OK) != 0); /* renamed into place */
        gguf_ctx *g = gguf_open(path, &err);
        CHECKF(g, "%s", err.msg);
        if (!g) continue;
        CHECK(g->alignment == aligns[k]);
        CHECK(g->files[0].size % aligns[k] == 0);
        uint32_t u;
        int64_t i64;
        uint64_t u64;
        float f;
        int b;
        CHECK(gguf_get_u32(g, "test.block_count", &u, &err) == 0 && u == 12);
        CHECK(gguf_get_i64(g, "test.neg", &i64, &err) == 0 && i64 == -7);
        CHECK(gguf_get_u64(g, "test.big", &u64, &err) == 0 && u64 == 1ull << 40);
        CHECK(gguf_get_u32(g, "test.big", &u, &err) == -1);
        CHECK(gguf_get_f32(g, "test.eps", &f, &err) == 0 && f == 1e-5f);
        CHECK(gguf_get_bool(g, "test.flag", &b, &err) == 0 && b == 1);
        const gguf_kv *ints = gguf_find(g, "test.ints");
        CHECK(ints && ints->val.arr.n == 5 && gguf_array_i64(&ints->val, 3, &i64) == 0 &&
              i64 == -4);
        const gguf_kv *strs = gguf_find(g, "test.strs");
        CHECK(strs && strs->val.arr.n == 3 && strs->val.arr.items[1].str.len == 0 &&
              strs->val.arr.items[2].str.len == 9);
        CHECK(g->n_tensors == 3);
        uint8_t want[8 * 144];
        const gguf_tensor *ta = gguf_find_tensor(g, "a"), *tb = gguf_find_tensor(g, "b.weight"),
                          *tc = gguf_find_tensor(g, "c");
        CHECK(ta && tb && tc);
        if (ta && tb && tc) {
            CHECK(ta->offset == 0 && tb->offset == pt_align_up(768, aligns[k]));
            CHECK(tc->offset == pt_align_up(tb->offset + tb->nbytes, aligns[k]));
            fill(want, 768, 1);
            CHECK(memcmp(ta->data, want, 768) == 0);
            fill(want, sizeof want, 2);
            CHECK(tb->nbytes == sizeof want && memcmp(tb->data, want, sizeof want) == 0);
            fill(want, 14, 3);
            CHECK(tc->nbytes == 14 && memcmp(tc->data, want, 14) == 0);
        }
        gguf_close(g);
    }
}

static void gguf_writer_copies_metadata(void) {
    pt_err err = {{0}};
    gguf_ctx *src = gguf_open(t_fixture("gemma4-rq2k.gguf"), &err);
    CHECKF(src, "%s", err.msg);
    if (!src) return;
    char path[512];
    snprintf(path, sizeof path, "%s/copy.gguf", t_tmpdir());
    gguf_writer *w = gguf_writer_new(32);
    int rc = 0;
    for (uint64_t i = 0; i < src->n_kv && !rc; i++)
        rc = gguf_writer_kv_copy(w, &src->kv[i], &err);
    rc = rc || gguf_writer_begin(w, path, &err) || gguf_writer_finish(w, &err);
    gguf_writer_free(w);
    CHECKF(rc == 0, "%s", err.msg);
    gguf_ctx *g = gguf_open(path, &err);
    CHECKF(g, "%s", err.msg);
    if (g) {
        CHECK(g->n_kv == src->n_kv);
        for (uint64_t i = 0; i < src->n_kv && i < g->n_kv; i++) {
            const gguf_kv *a = &src->kv[i], *b = &g->kv[i];
            CHECK(a->key.len == b->key.len && !memcmp(a->key.ptr, b->key.ptr, a->key.len));
            CHECK(a->val.type == b->val.type);
        }
        /* the vocabulary (an array of strings) survives intact */
        const gguf_kv *ta = gguf_find(src, "tokenizer.ggml.tokens"),
                      *tb = gguf_find(g, "tokenizer.ggml.tokens");
        CHECK(ta && tb && ta->val.arr.n == tb->val.arr.n);
        for (uint64_t i = 0; ta && tb && i < ta->val.arr.n; i++)
            CHECK(ta->val.arr.items[i].str.len == tb->val.arr.items[i].str.len &&
                  !memcmp(ta->val.arr.items[i].str.ptr, tb->val.arr.items[i].str.ptr,
                          ta->val.arr.items[i].str.len));
        gguf_close(g);
    }
    gguf_close(src);
}

static void gguf_writer_rejects_misuse(void) {
    pt_err err = {{0}};
    gguf_writer *w = gguf_writer_new(32);
    int64_t ne[2] = {100, 2};
    CHECK(gguf_writer_kv_u32(w, "k", 1, &err) == 0);
    CHECK(gguf_writer_kv_u32(w, "k", 2, &err) == -1);
    CHECK_STR_CONTAINS(err.msg, "duplicate key 'k'");
    CHECK(gguf_writer_add_tensor(w, "t", QT_Q4_K, 2, ne, &err) == -1);
    CHECK_STR_CONTAINS(err.msg, "not whole Q4_K blocks");
    ne[0] = 32;
    char path[512];
    snprintf(path, sizeof path, "%s/short.gguf", t_tmpdir());
    CHECK(gguf_writer_add_tensor(w, "t", QT_F32, 2, ne, &err) == 0);
    CHECK(gguf_writer_begin(w, path, &err) == 0);
    float x[32] = {0};
    CHECK(gguf_writer_write(w, x, sizeof x, &err) == 0);
    CHECK(gguf_writer_finish(w, &err) == -1); /* only half the data */
    CHECK_STR_CONTAINS(err.msg, "only 0 of 1 tensors were written");
    gguf_writer_free(w);
    CHECK(access(path, F_OK) != 0); /* nothing left under the final name */
    CHECK(gguf_writer_new(3) == NULL);
}

/* ===== Split models ===== */

static int write_split(const char *dir, int no, int count, int64_t total_tensors, int tensors_here,
                       int first_tensor, pt_err *err) {
    char path[600];
    snprintf(path, sizeof path, "%s/model-%05d-of-%05d.gguf", dir, no + 1, count);
    gguf_writer *w = gguf_writer_new(32);
    int rc = 0;
    if (no == 0) rc = gguf_writer_kv_str(w, "general.architecture", "test", err);
    rc = rc || gguf_writer_kv_u32(w, "split.no", (uint32_t)no, err) ||
         gguf_writer_kv_u32(w, "split.count", (uint32_t)count, err) ||
         gguf_writer_kv_i32(w, "split.tensors.count", (int32_t)total_tensors, err);
    for (int i = 0; i < tensors_here && !rc; i++) {
        char name[32];
        snprintf(name, sizeof name, "t%d", first_tensor + i);
        int64_t ne[1] = {8};
        rc = gguf_writer_add_tensor(w, name, QT_F32, 1, ne, err);
    }
    rc = rc || gguf_writer_begin(w, path, err);
    for (int i = 0; i < tensors_here && !rc; i++) {
        float x[8];
        for (int j = 0; j < 8; j++)
            x[j] = (float)(first_tensor + i) + j * 0.5f;
        rc = gguf_writer_write(w, x, sizeof x, err);
    }
    rc = rc || gguf_writer_finish(w, err);
    gguf_writer_free(w);
    return rc ? -1 : 0;
}

static void gguf_split_model(void) {
    char dir[512];
    snprintf(dir, sizeof dir, "%s/split", t_tmpdir());
    CHECK(mkdir(dir, 0755) == 0);
    pt_err err = {{0}};
    CHECKF(write_split(dir, 0, 3, 6, 2, 0, &err) == 0, "%s", err.msg);
    CHECKF(write_split(dir, 1, 3, 6, 3, 2, &err) == 0, "%s", err.msg);
    CHECKF(write_split(dir, 2, 3, 6, 1, 5, &err) == 0, "%s", err.msg);
    for (int part = 1; part <= 3; part += 2) { /* open from the first and from the last part */
        char path[600];
        snprintf(path, sizeof path, "%s/model-%05d-of-00003.gguf", dir, part);
        gguf_ctx *g = gguf_open(path, &err);
        CHECKF(g, "%s", err.msg);
        if (!g) continue;
        CHECK(g->n_files == 3 && g->n_tensors == 6);
        for (int i = 0; i < 6; i++) {
            char name[8];
            snprintf(name, sizeof name, "t%u", (unsigned)i % 10);
            const gguf_tensor *t = gguf_find_tensor(g, name);
            CHECK(t != NULL);
            if (!t) continue;
            float x[8];
            memcpy(x, t->data, sizeof x);
            CHECK(x[0] == (float)i && x[7] == (float)i + 3.5f);
            CHECK(t->file == (uint32_t)(i < 2 ? 0 : i < 5 ? 1 : 2));
        }
        char arch[16];
        CHECK(gguf_get_str(g, "general.architecture", arch, sizeof arch, &err) == 0);
        gguf_close(g);
    }
    /* a missing part is named */
    char p3[600];
    snprintf(p3, sizeof p3, "%s/model-00003-of-00003.gguf", dir);
    unlink(p3);
    snprintf(p3, sizeof p3, "%s/model-00001-of-00003.gguf", dir);
    gguf_ctx *g = gguf_open(p3, &err);
    CHECK(g == NULL);
    CHECK_STR_CONTAINS(err.msg, "model-00003-of-00003.gguf: cannot open");
    gguf_close(g);
    /* a part with the wrong split.no is refused */
    CHECK(write_split(dir, 1, 3, 6, 1, 5, &err) == 0); /* overwrite part 2 with different tensors */
    CHECK(write_split(dir, 1, 3, 6, 1, 5, &err) == 0);
    char p2[600], p3b[600];
    snprintf(p2, sizeof p2, "%s/model-00002-of-00003.gguf", dir);
    snprintf(p3b, sizeof p3b, "%s/model-00003-of-00003.gguf", dir);
    CHECK(rename(p2, p3b) == 0); /* part 3 now claims split.no = 1 */
    CHECK(write_split(dir, 1, 3, 6, 3, 2, &err) == 0);
    g = gguf_open(p3, &err);
    CHECK(g == NULL);
    CHECK_STR_CONTAINS(err.msg, "split.no=1");
    gguf_close(g);
}

/* ===== Hostile files =====
 * A small valid image is assembled field by field; each case changes one field
 * (or truncates) and names the words the error must contain. */

typedef struct bb {
    uint8_t p[4096];
    size_t n;
} bb;

static void b_put(bb *b, const void *d, size_t n) {
    if (b->n + n <= sizeof b->p) memcpy(b->p + b->n, d, n);
    b->n += n;
}
static void b_u32(bb *b, uint32_t v) {
    b_put(b, &v, 4);
}
static void b_u64(bb *b, uint64_t v) {
    b_put(b, &v, 8);
}
static void b_str(bb *b, const char *s) {
    b_u64(b, strlen(s));
    b_put(b, s, strlen(s));
}

typedef struct knobs {
    const char *magic;
    uint32_t version;
    int64_t n_tensors, n_kv;
    uint64_t key_len_override; /* 0 = real length */
    uint32_t value_type;       /* type of the first KV (a u32 value) */
    uint64_t array_len;        /* length of the array KV */
    uint32_t array_type;
    int nest; /* extra nesting of the array KV */
    uint32_t n_dims;
    int64_t ne0, ne1;
    uint32_t ttype;
    uint64_t off0, off1;
    const char *name1;
    const char *key2;
    uint32_t align_val; /* 0: no general.alignment key */
    size_t data_bytes;  /* bytes of tensor data actually present */
} knobs;

static knobs defaults(void) {
    knobs k = {.magic = "GGUF",
               .version = 3,
               .n_tensors = 2,
               .n_kv = 3,
               .value_type = GGUF_UINT32,
               .array_len = 3,
               .array_type = GGUF_INT32,
               .n_dims = 2,
               .ne0 = 32,
               .ne1 = 2,
               .ttype = QT_F32,
               .off0 = 0,
               .off1 = 256,
               .name1 = "t1",
               .key2 = "test.arr",
               .data_bytes = 512};
    return k;
}

static void build(const knobs *k, bb *b) {
    b->n = 0;
    b_put(b, k->magic, 4);
    b_u32(b, k->version);
    b_u64(b, (uint64_t)k->n_tensors);
    b_u64(b, (uint64_t)(k->n_kv + (k->align_val ? 1 : 0)));
    /* kv 1: general.architecture = "test" */
    b_str(b, "general.architecture");
    b_u32(b, GGUF_STRING);
    b_str(b, "test");
    /* kv 2: a u32 */
    if (k->key_len_override) {
        b_u64(b, k->key_len_override);
        b_put(b, "test.count", 10);
    } else {
        b_str(b, "test.count");
    }
    b_u32(b, k->value_type);
    b_u32(b, 7);
    /* kv 3: an array, possibly nested */
    b_str(b, k->key2);
    b_u32(b, GGUF_ARRAY);
    for (int i = 0; i < k->nest; i++) {
        b_u32(b, GGUF_ARRAY);
        b_u64(b, 1);
    }
    b_u32(b, k->array_type);
    b_u64(b, k->array_len);
    for (int i = 0; i < 3; i++)
        b_u32(b, (uint32_t)i);
    if (k->align_val) {
        b_str(b, "general.alignment");
        b_u32(b, GGUF_UINT32);
        b_u32(b, k->align_val);
    }
    /* tensor infos */
    const char *names[2] = {"t0", k->name1};
    uint64_t offs[2] = {k->off0, k->off1};
    for (int t = 0; t < 2; t++) {
        b_str(b, names[t]);
        b_u32(b, k->n_dims);
        int64_t ne[4] = {k->ne0, k->ne1, 1, 1};
        for (uint32_t d = 0; d < k->n_dims && d < 4; d++)
            b_put(b, &ne[d], 8);
        b_u32(b, k->ttype);
        b_u64(b, offs[t]);
    }
    size_t align = k->align_val && !(k->align_val & (k->align_val - 1)) ? k->align_val : 32;
    while (b->n % align)
        b->p[b->n++] = 0;
    for (size_t i = 0; i < k->data_bytes && b->n < sizeof b->p; i++)
        b->p[b->n++] = (uint8_t)i;
}

typedef struct hostile_case {
    const char *what;
    void (*mutate)(knobs *k);
    const char *expect;
} hostile_case;

#define MUT(name, body)                                                                            \
    static void name(knobs *k) {                                                                   \
        body;                                                                                      \
    }
MUT(m_magic, k->magic = "GGML")
MUT(m_version1, k->version = 1)
MUT(m_version9, k->version = 9)
MUT(m_bigendian, k->version = 0x03000000)
MUT(m_ntensors, k->n_tensors = (int64_t)1 << 60)
MUT(m_ntensors_neg, k->n_tensors = -1)
MUT(m_nkv, k->n_kv = (int64_t)1 << 58)
MUT(m_keylen, k->key_len_override = (uint64_t)1 << 60)
MUT(m_vtype, k->value_type = 77)
MUT(m_atype, k->array_type = 13)
MUT(m_alen, k->array_len = (uint64_t)1 << 61)
MUT(m_nest, k->nest = 20)
MUT(m_ndims0, k->n_dims = 0)
MUT(m_ndims5, k->n_dims = 5)
MUT(m_negne, k->ne1 = -4)
MUT(m_overflow, {
    k->ne0 = (int64_t)1 << 40;
    k->ne1 = (int64_t)1 << 40;
})
MUT(m_bytes_overflow, {
    k->ne0 = (int64_t)1 << 32;
    k->ne1 = (int64_t)1 << 29;
})
MUT(m_unknown_type, k->ttype = 31)
MUT(m_unknown_type2, k->ttype = 1000)
MUT(m_partial_block, {
    k->ttype = QT_Q4_K;
    k->ne0 = 100;
})
MUT(m_unaligned, k->off1 = 260)
MUT(m_past_eof, k->off1 = 1 << 20)
MUT(m_past_eof_wrap, k->off1 = UINT64_MAX - 31)
MUT(m_overlap, k->off1 = 128)
MUT(m_dupname, k->name1 = "t0")
MUT(m_dupkey, k->key2 = "test.count")
MUT(m_align0, k->align_val = 3)
MUT(m_short_data, k->data_bytes = 300)

static const hostile_case hostile[] = {
    {"bad magic", m_magic, "magic is 47 47 4d 4c, expected 'GGUF'"},
    {"version 1", m_version1, "unsupported GGUF version 1"},
    {"version 9", m_version9, "unsupported GGUF version 9"},
    {"big-endian", m_bigendian, "big-endian"},
    {"absurd tensor count", m_ntensors, "absurd tensor count"},
    {"negative tensor count", m_ntensors_neg, "absurd tensor count -1"},
    {"absurd kv count", m_nkv, "absurd metadata count"},
    {"key length past EOF", m_keylen, "past the end of the file"},
    {"unknown value type", m_vtype, "value type 77 is unknown"},
    {"unknown array type", m_atype, "array element type 13 is unknown"},
    {"array length past EOF", m_alen, "cannot fit"},
    {"arrays nested too deep", m_nest, "nested deeper"},
    {"zero dimensions", m_ndims0, "has 0 dimensions"},
    {"five dimensions", m_ndims5, "has 5 dimensions"},
    {"negative dimension", m_negne, "negative size -4"},
    {"element count overflow", m_overflow, "overflows"},
    {"byte size past file", m_bytes_overflow, "extends past the end of the file"},
    {"unknown ggml type", m_unknown_type, "unknown ggml type 31"},
    {"unknown ggml type 1000", m_unknown_type2, "unknown ggml type 1000"},
    {"non-whole blocks", m_partial_block, "not a whole number of Q4_K blocks"},
    {"unaligned offset", m_unaligned, "not a multiple of the alignment"},
    {"offset past EOF", m_past_eof, "extends past the end of the file"},
    {"offset wraps around", m_past_eof_wrap, "extends past the end of the file"},
    {"overlapping tensors", m_overlap, "overlap"},
    {"duplicate tensor name", m_dupname, "tensor name 't0' appears more than once"},
    {"duplicate key", m_dupkey, "key 'test.count' appears more than once"},
    {"bad alignment", m_align0, "power of two"},
    {"truncated data", m_short_data, "extends past the end of the file"},
};

static void gguf_hostile_valid_baseline(void) {
    knobs k = defaults();
    bb b;
    build(&k, &b);
    pt_err err = {{0}};
    gguf_ctx *g = gguf_parse(b.p, b.n, "mem.gguf", &err);
    CHECKF(g, "baseline must parse: %s", err.msg);
    if (g) CHECK(g->n_tensors == 2 && g->n_kv == 3);
    gguf_close(g);
}

static void gguf_hostile_cases(void) {
    for (size_t i = 0; i < PT_ARRAY_LEN(hostile); i++) {
        knobs k = defaults();
        hostile[i].mutate(&k);
        bb b;
        build(&k, &b);
        pt_err err = {{0}};
        gguf_ctx *g = gguf_parse(b.p, PT_MIN(b.n, sizeof b.p), "mem.gguf", &err);
        CHECKF(g == NULL, "%s: accepted", hostile[i].what);
        gguf_close(g);
        CHECKF(strstr(err.msg, hostile[i].expect) && strstr(err.msg, "mem.gguf"),
               "%s: message \"%s\" lacks \"%s\"", hostile[i].what, err.msg, hostile[i].expect);
    }
}

static void gguf_hostile_every_truncation(void) {
    knobs k = defaults();
    bb b;
    build(&k, &b);
    for (size_t n = 0; n < b.n; n++) {
        uint8_t *copy = malloc(n ? n : 1); /* exact-size copy so ASan sees any overread */
        memcpy(copy, b.p, n);
        pt_err err = {{0}};
        gguf_ctx *g = gguf_parse(copy, n, "cut.gguf", &err);
        CHECKF(g == NULL, "truncated to %zu bytes: accepted", n);
        CHECKF(err.msg[0] != 0, "truncated to %zu bytes: no message", n);
        gguf_close(g);
        free(copy);
    }
}

static void gguf_open_errors(void) {
    pt_err err = {{0}};
    CHECK(gguf_open("/nonexistent/model.gguf", &err) == NULL);
    CHECK_STR_CONTAINS(err.msg, "/nonexistent/model.gguf: cannot open");
    CHECK(gguf_open(t_tmpdir(), &err) == NULL);
    CHECK_STR_CONTAINS(err.msg, "not a regular file");
    char path[512];
    snprintf(path, sizeof path, "%s/empty.gguf", t_tmpdir());
    t_write_file(path, "", 0);
    CHECK(gguf_open(path, &err) == NULL);
    CHECK_STR_CONTAINS(err.msg, "the file is empty");
}

T_SUITE(gguf) {
    T_ADD(gguf_reads_fixtures);
    T_ADD(gguf_fixture_details);
    T_ADD(gguf_writer_round_trip);
    T_ADD(gguf_writer_copies_metadata);
    T_ADD(gguf_writer_rejects_misuse);
    T_ADD(gguf_split_model);
    T_ADD(gguf_hostile_valid_baseline);
    T_ADD(gguf_hostile_cases);
    T_ADD(gguf_hostile_every_truncation);
    T_ADD(gguf_open_errors);
}
