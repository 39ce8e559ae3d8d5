/* families.c — the table of model families (see family.h), and loading a model
 * through it: the file's architecture is matched against the archs each
 * family lists (the one check of it; a family never compares names), the
 * family's model is allocated here and freed here when its load fails. A new
 * family is one file under model/ defining its fam_ops, plus one line in
 * FAMILIES. */
#include <string.h>

#include "model/family.h"

extern const fam_ops glm_dsa_family;  /* glm-dsa (GLM-5.x), deepseek2 (DeepSeek-V3, Kimi-K2) */
extern const fam_ops gemma4_family;   /* gemma4 (Gemma 4 MoE) */
extern const fam_ops qwen3moe_family; /* qwen3moe (Qwen3-MoE) */

static const fam_ops *const FAMILIES[] = {&glm_dsa_family, &gemma4_family, &qwen3moe_family};

/* The family that loads `arch`, or NULL. */
static const fam_ops *fam_find(const char *arch) {
    for (size_t i = 0; i < PT_ARRAY_LEN(FAMILIES); i++)
        for (const char *const *a = FAMILIES[i]->archs; *a; a++)
            if (!strcmp(*a, arch)) return FAMILIES[i];
    return NULL;
}

/* Every arch of the table, for the refusal. */
static void fam_names(char *out, size_t cap) {
    out[0] = 0;
    for (size_t i = 0; i < PT_ARRAY_LEN(FAMILIES); i++)
        for (const char *const *a = FAMILIES[i]->archs; *a; a++) {
            const size_t n = strlen(out);
            snprintf(out + n, cap - n, "%s%s", n ? ", " : "", *a);
        }
}

int fam_load(const gguf_ctx *g, const char *arch, const fam_ops **fam, void **model, fam_desc *d,
             pt_err *err) {
    const char *path = g->files[0].path;
    const fam_ops *f = fam_find(arch);
    if (!f) {
        char names[256];
        fam_names(names, sizeof names);
        return pt_errf(err, "%s: architecture '%s' is not supported (supported: %s)", path, arch,
                       names);
    }
    void *m = calloc(1, f->model_bytes);
    if (!m) return pt_errf(err, "%s: out of memory", path);
    ld_ctx L = {g, arch, path, err, 0};
    memset(d, 0, sizeof *d);
    if (f->load(&L, m, d)) {
        fam_free(f, m);
        return -1;
    }
    *fam = f;
    *model = m;
    return 0;
}

void fam_free(const fam_ops *fam, void *model) {
    if (!model) return;
    fam->free(model);
    free(model);
}
