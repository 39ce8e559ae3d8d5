/* families.c — the table of model families (see family.h). A new family is
 * one file under model/ defining its fam_ops, plus one line in FAMILIES. */
#include <string.h>

#include "model/family.h"

extern const fam_ops glm_dsa_family;  /* glm-dsa (GLM-5.x), deepseek2 (DeepSeek-V3, Kimi-K2) */
extern const fam_ops gemma4_family;   /* gemma4 (Gemma 4 MoE) */
extern const fam_ops qwen3moe_family; /* qwen3moe (Qwen3-MoE) */

static const fam_ops *const FAMILIES[] = {&glm_dsa_family, &gemma4_family, &qwen3moe_family};

const fam_ops *fam_find(const char *arch) {
    for (size_t i = 0; i < PT_ARRAY_LEN(FAMILIES); i++)
        for (const char *const *a = FAMILIES[i]->archs; *a; a++)
            if (!strcmp(*a, arch)) return FAMILIES[i];
    return NULL;
}

const char *fam_names(void) {
    static char names[256];
    if (!names[0])
        for (size_t i = 0; i < PT_ARRAY_LEN(FAMILIES); i++)
            for (const char *const *a = FAMILIES[i]->archs; *a; a++) {
                size_t n = strlen(names);
                snprintf(names + n, sizeof names - n, "%s%s", n ? ", " : "", *a);
            }
    return names;
}
