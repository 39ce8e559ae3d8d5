/* test_tools.c — the model-tools API (include/petrel_tools.h) on a fixture:
 * metadata pairs with typed access (scalars, arrays of numbers, bools and
 * strings, refusals of the wrong kind), the resident / routed split, and a
 * refused file. Pack writing and verifying through it are tested by
 * test_pack.c (the CLI's pack and verify use nothing else). */
#include <string.h>

#include "petrel_tools.h"
#include "test.h"

/* Index of the pair named key, or -1. */
static int64_t find(const pt_model *m, const char *key) {
    for (uint64_t i = 0; i < pt_model_n_meta(m); i++) {
        pt_meta k;
        pt_model_meta(m, i, &k);
        if (k.key_len == strlen(key) && !memcmp(k.key, key, k.key_len)) return (int64_t)i;
    }
    return -1;
}

static void tools_model_meta(void) {
    char err[512] = "";
    pt_model *m = pt_model_open(t_fixture("glm-dsa-rq2k.gguf"), err, sizeof err);
    CHECKF(m != NULL, "%s", err);
    if (!m) return;
    CHECK_STR_CONTAINS(pt_model_path(m), "glm-dsa-rq2k.gguf");
    const char *s;
    size_t len;
    int64_t x;
    uint64_t u;
    double d;
    pt_meta k;
    int64_t i = find(m, "general.architecture");
    CHECK(i >= 0 && pt_model_meta_str(m, (uint64_t)i, -1, &s, &len) == 0 && len == 7 &&
          !memcmp(s, "glm-dsa", 7));
    CHECK(pt_model_meta_i64(m, (uint64_t)i, -1, &x) == -1); /* a string is not a number */
    i = find(m, "glm-dsa.expert_count");
    CHECK(i >= 0 && pt_model_meta_i64(m, (uint64_t)i, -1, &x) == 0 && x == 16);
    CHECK(pt_model_meta_u64(m, (uint64_t)i, -1, &u) == 0 && u == 16);
    CHECK(pt_model_meta_f64(m, (uint64_t)i, -1, &d) == -1);
    i = find(m, "glm-dsa.rope.freq_base");
    CHECK(i >= 0 && pt_model_meta_f64(m, (uint64_t)i, -1, &d) == 0 && d == 8e6);
    i = find(m, "glm-dsa.expert_weights_norm");
    pt_model_meta(m, (uint64_t)i, &k);
    CHECK(k.type == PT_META_BOOL && pt_model_meta_i64(m, (uint64_t)i, -1, &x) == 0 && x == 1);
    /* arrays: bools by index, strings by index, out of range refused */
    i = find(m, "glm-dsa.attention.indexer.types");
    pt_model_meta(m, (uint64_t)i, &k);
    CHECK(k.type == PT_META_ARRAY && k.elem_type == PT_META_BOOL && k.n == 4);
    CHECK(pt_model_meta_i64(m, (uint64_t)i, 0, &x) == 0 && x == 1);
    CHECK(pt_model_meta_i64(m, (uint64_t)i, (int64_t)k.n, &x) == -1);
    i = find(m, "tokenizer.ggml.tokens");
    pt_model_meta(m, (uint64_t)i, &k);
    CHECK(k.type == PT_META_ARRAY && k.elem_type == PT_META_STRING && k.n == 512);
    CHECK(pt_model_meta_str(m, (uint64_t)i, 0, &s, &len) == 0 && len > 0);
    CHECK(pt_model_meta_str(m, (uint64_t)i, 512, &s, &len) == -1);
    CHECK(!strcmp(pt_meta_type_name(PT_META_UINT32), "uint32"));
    pt_model_close(m);
}

static void tools_model_info(void) {
    char err[512] = "";
    pt_model *m = pt_model_open(t_fixture("glm-dsa-rq2k.gguf"), err, sizeof err);
    CHECKF(m != NULL, "%s", err);
    if (!m) return;
    pt_model_info mi;
    CHECKF(pt_model_info_get(m, &mi, err, sizeof err) == 0, "%s", err);
    CHECK(!strcmp(mi.arch, "glm-dsa") && mi.n_layers == 5 && mi.n_nextn == 1 && mi.n_expert == 16);
    CHECK(mi.routed_bytes > 0 && mi.resident_bytes > 0 &&
          mi.routed_bytes + mi.resident_bytes == mi.tensor_bytes);
    uint64_t routed = 0, tensors = 0;
    for (uint32_t l = 0; l < mi.n_layers; l++)
        routed += mi.layers[l].routed_bytes;
    for (uint32_t t = 0; t < PT_TYPE_COUNT; t++)
        tensors += mi.type_count[t];
    CHECK(routed == mi.routed_bytes && tensors == mi.n_tensors);
    CHECK(mi.layers[0].n_expert == 0 && mi.layers[4].is_mtp && mi.layers[4].n_expert == 16);
    CHECK(!strcmp(pt_type_name(mi.layers[1].expert_types[0]), "Q2_K"));
    pt_model_info_free(&mi);
    pt_model_close(m);
    /* a file that is not GGUF is refused with its name */
    CHECK(pt_model_open(t_fixture("README.md"), err, sizeof err) == NULL);
    CHECK_STR_CONTAINS(err, "README.md");
}

T_SUITE(tools) {
    T_ADD(tools_model_meta);
    T_ADD(tools_model_info);
}
