/* inspect.c — `petrel inspect MODEL.gguf [--json] [--ram GB,GB,...]`: what a
 * model is and what streaming it will cost, from the header alone (no tensor
 * data is read).
 *
 * Reports the architecture and its hyper-parameters (every `<arch>.*` key),
 * tensor counts and bytes by type, and the split that matters to petrel:
 * resident bytes vs routed-expert bytes, one expert's bytes per layer, and the
 * routed bytes one token touches (top-k experts in every trunk MoE layer).
 * With --ram, the memory plan the engine would make at each budget (the engine
 * opened with plan_only: the model's loader validates it, nothing is
 * allocated), or why it would refuse — which works on header-only files too.
 */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "format/gguf.h"
#include "petrel.h"
#include "kernels/quant.h"
#include "model/info.h"

static const char *human(uint64_t b, char *buf, size_t cap) {
    const char *u[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    double v = (double)b;
    int i = 0;
    while (v >= 1024 && i < 4) v /= 1024, i++;
    if (i == 0) snprintf(buf, cap, "%llu B", (unsigned long long)b);
    else snprintf(buf, cap, "%.*f %s", v < 10 ? 2 : 1, v, u[i]);
    return buf;
}

/* Short printable form of a metadata value (arrays summarised). */
static void value_text(const gguf_value *v, char *buf, size_t cap) {
    switch (v->type) {
    case GGUF_STRING:
        snprintf(buf, cap, "\"%.*s\"%s", (int)PT_MIN(v->str.len, 60), v->str.ptr,
                 v->str.len > 60 ? "..." : "");
        return;
    case GGUF_BOOL:
        snprintf(buf, cap, "%s", v->b ? "true" : "false");
        return;
    case GGUF_FLOAT32:
    case GGUF_FLOAT64:
        snprintf(buf, cap, "%g", v->f64);
        return;
    case GGUF_ARRAY: {
        uint32_t et = v->arr.type;
        if (et == GGUF_STRING || et == GGUF_ARRAY || v->arr.n > 16) {
            snprintf(buf, cap, "[%llu x %s]", (unsigned long long)v->arr.n, gguf_type_name(et));
            return;
        }
        size_t n = 0;
        n += (size_t)snprintf(buf + n, cap - n, "[");
        for (uint64_t i = 0; i < v->arr.n && n < cap; i++) {
            double d;
            int64_t x;
            if (et == GGUF_BOOL) {
                gguf_array_i64(v, i, &x);
                n += (size_t)snprintf(buf + n, cap - n, "%s%s", i ? ", " : "", x ? "true" : "false");
            } else if (et == GGUF_FLOAT32 || et == GGUF_FLOAT64) {
                gguf_array_f64(v, i, &d);
                n += (size_t)snprintf(buf + n, cap - n, "%s%g", i ? ", " : "", d);
            } else if (gguf_array_i64(v, i, &x) == 0) {
                n += (size_t)snprintf(buf + n, cap - n, "%s%lld", i ? ", " : "", (long long)x);
            } else {
                n += (size_t)snprintf(buf + n, cap - n, "%s?", i ? ", " : "");
            }
        }
        if (n < cap) snprintf(buf + n, cap - n, "]");
        return;
    }
    default: {
        int64_t x;
        if (gguf_value_i64(v, &x) == 0) snprintf(buf, cap, "%lld", (long long)x);
        else snprintf(buf, cap, "%llu", (unsigned long long)v->u64);
    }
    }
}

/* The shortest decimal that reads back as the same float32 (1e-05, not
 * 9.9999999747524271e-06), so JSON shows what the file's author wrote. */
static double shortest_f32(double d) {
    float f = (float)d;
    char buf[32];
    for (int prec = 1; prec <= 9; prec++) {
        snprintf(buf, sizeof buf, "%.*g", prec, (double)f);
        if ((float)strtod(buf, NULL) == f) return strtod(buf, NULL);
    }
    return d;
}

static json_t *value_json(const gguf_value *v) {
    switch (v->type) {
    case GGUF_STRING: return json_stringn_nocheck(v->str.ptr, v->str.len);
    case GGUF_BOOL: return json_boolean(v->b);
    case GGUF_FLOAT32: return json_real(shortest_f32(v->f64));
    case GGUF_FLOAT64: return json_real(v->f64);
    case GGUF_ARRAY: {
        uint32_t et = v->arr.type;
        if (et == GGUF_STRING || et == GGUF_ARRAY || v->arr.n > 64) {
            json_t *o = json_object();
            json_object_set_new(o, "array_of", json_string(gguf_type_name(et)));
            json_object_set_new(o, "length", json_integer((json_int_t)v->arr.n));
            return o;
        }
        json_t *a = json_array();
        for (uint64_t i = 0; i < v->arr.n; i++) {
            double d;
            int64_t x;
            if (et == GGUF_BOOL) json_array_append_new(a, json_boolean(gguf_array_i64(v, i, &x) == 0 && x));
            else if (et == GGUF_FLOAT32 || et == GGUF_FLOAT64)
                json_array_append_new(a, json_real(gguf_array_f64(v, i, &d) ? 0
                                                   : et == GGUF_FLOAT32 ? shortest_f32(d) : d));
            else if (gguf_array_i64(v, i, &x) == 0) json_array_append_new(a, json_integer(x));
            else json_array_append_new(a, json_null());
        }
        return a;
    }
    default: {
        int64_t x;
        if (gguf_value_i64(v, &x) == 0) return json_integer(x);
        return json_real((double)v->u64);
    }
    }
}

static int is_arch_key(const gguf_kv *kv, const char *arch, size_t al) {
    return kv->key.len > al + 1 && memcmp(kv->key.ptr, arch, al) == 0 && kv->key.ptr[al] == '.';
}

static const char *type_or_none(uint32_t t) { return t == MI_NO_TYPE ? "none" : qt_name(t); }

static const char *expert_types_text(const mi_layer *L, char *buf, size_t cap) {
    if (L->fused_gate_up)
        snprintf(buf, cap, "gate_up %s, down %s", type_or_none(L->expert_types[0]),
                 type_or_none(L->expert_types[2]));
    else
        snprintf(buf, cap, "gate %s, up %s, down %s", type_or_none(L->expert_types[0]),
                 type_or_none(L->expert_types[1]), type_or_none(L->expert_types[2]));
    return buf;
}

static void print_text(const char *path, const gguf_ctx *g, const model_info *mi) {
    char b1[32], b2[32], b3[32], line[512];
    size_t al = strlen(mi->arch);
    printf("file            %s (%s, %u file%s, GGUF v%u)\n", path, human(mi->file_bytes, b1, sizeof b1),
           mi->n_files, mi->n_files == 1 ? "" : "s", mi->version);
    if (mi->name[0]) printf("name            %s\n", mi->name);
    printf("architecture    %s\n", mi->arch);
    printf("hyper-parameters\n");
    for (uint64_t i = 0; i < g->n_kv; i++) {
        const gguf_kv *kv = &g->kv[i];
        if (!is_arch_key(kv, mi->arch, al)) continue;
        value_text(&kv->val, line, sizeof line);
        printf("  %-40.*s %s\n", (int)(kv->key.len - al - 1), kv->key.ptr + al + 1, line);
    }
    printf("tensors         %llu, %s of data\n", (unsigned long long)mi->n_tensors,
           human(mi->tensor_bytes, b1, sizeof b1));
    for (uint32_t t = 0; t < QT_COUNT; t++)
        if (mi->type_count[t])
            printf("  %-8s %6llu tensors %12s\n", qt_name(t), (unsigned long long)mi->type_count[t],
                   human(mi->type_bytes[t], b1, sizeof b1));
    double pct = mi->tensor_bytes ? 100.0 * (double)mi->routed_bytes / (double)mi->tensor_bytes : 0;
    printf("resident        %s (everything but routed experts)\n", human(mi->resident_bytes, b1, sizeof b1));
    printf("routed experts  %s (%.1f%% of tensor bytes)\n", human(mi->routed_bytes, b1, sizeof b1), pct);
    if (mi->n_expert || mi->routed_bytes) {
        printf("experts         %u per layer, %u used per token, %u shared; %u trunk MoE layer%s",
               mi->n_expert ? mi->n_expert : mi->n_expert_max, mi->n_expert_used, mi->n_expert_shared, mi->n_moe_layers,
               mi->n_moe_layers == 1 ? "" : "s");
        if (mi->n_nextn) printf(" + %u MTP block%s", mi->n_nextn, mi->n_nextn == 1 ? "" : "s");
        printf("\n");
        for (uint32_t l = 0; l < mi->n_layers; l++) {
            const mi_layer *L = &mi->layers[l];
            if (!L->n_expert) continue;
            printf("  blk.%-4d %s%4u experts x %10s  (%s)\n", L->index, L->is_nextn ? "MTP " : "    ",
                   L->n_expert, human(L->expert_bytes, b1, sizeof b1),
                   expert_types_text(L, line, sizeof line));
        }
        printf("per token       %s of routed experts touched (%u x %u layers, largest expert %s)\n",
               human(mi->touched_per_token, b1, sizeof b1), mi->n_expert_used, mi->n_moe_layers,
               human(mi->expert_bytes_max, b2, sizeof b2));
    }
    printf("needs resident  %s of tensors in memory (plus KV cache, scratch and expert cache)\n",
           human(mi->resident_bytes, b3, sizeof b3));
}

/* ===== Memory plans at several budgets ===== */

#define MAX_RAMS 16

typedef struct ram_plan {
    double ram_gb;
    int ok;         /* the engine would open: text is the plan line */
    char text[1024]; /* the plan line, or why it refuses (without the path prefix) */
} ram_plan;

/* The plan at each of rams[n] GB for a context of n_ctx (0: the default). */
static void make_plans(const char *path, const double *rams, int n, int n_ctx, ram_plan *out) {
    for (int i = 0; i < n; i++) {
        ram_plan *r = &out[i];
        char err[1024] = "";
        pt_engine_params p = {.model_path = path, .ram_gb = rams[i], .n_ctx = n_ctx, .plan_only = 1,
                              .cache_dir = cli_cache_dir()};
        pt_engine *e = pt_engine_open(&p, err, sizeof err);
        r->ram_gb = rams[i];
        r->ok = e != NULL;
        const size_t pl = strlen(path);
        const char *msg = e ? pt_engine_plan(e) : !strncmp(err, path, pl) && !strncmp(err + pl, ": ", 2) ? err + pl + 2
                                                                                                         : err;
        snprintf(r->text, sizeof r->text, "%s", msg);
        pt_engine_close(e);
    }
}

static void print_plans(const ram_plan *p, int n) {
    printf("memory plans    (what petrel would do with --ram GB)\n");
    for (int i = 0; i < n; i++) printf("  %6g GB  %s%s\n", p[i].ram_gb, p[i].ok ? "" : "refused: ", p[i].text);
}

/* "16,32,64" into rams[]; returns how many, or -1 on a bad list. */
static int parse_rams(const char *s, double *rams) {
    int n = 0;
    while (*s) {
        char *end;
        double v = strtod(s, &end);
        if (end == s || !(v > 0) || v > 1e6 || n == MAX_RAMS || (*end && *end != ',')) return -1;
        rams[n++] = v;
        s = *end ? end + 1 : end;
    }
    return n ? n : -1;
}

static int print_json(const char *path, const gguf_ctx *g, const model_info *mi, const ram_plan *plans,
                      int n_plans) {
    json_t *o = json_object();
    size_t al = strlen(mi->arch);
    json_object_set_new(o, "file", json_string(path));
    json_object_set_new(o, "file_bytes", json_integer((json_int_t)mi->file_bytes));
    json_object_set_new(o, "n_files", json_integer(mi->n_files));
    json_object_set_new(o, "gguf_version", json_integer(mi->version));
    json_object_set_new(o, "name", json_string(mi->name));
    json_object_set_new(o, "architecture", json_string(mi->arch));
    json_t *hp = json_object();
    for (uint64_t i = 0; i < g->n_kv; i++) {
        const gguf_kv *kv = &g->kv[i];
        if (!is_arch_key(kv, mi->arch, al)) continue;
        char key[256];
        snprintf(key, sizeof key, "%.*s", (int)PT_MIN(kv->key.len - al - 1, 250), kv->key.ptr + al + 1);
        json_object_set_new(hp, key, value_json(&kv->val));
    }
    json_object_set_new(o, "hyper_parameters", hp);
    json_object_set_new(o, "n_tensors", json_integer((json_int_t)mi->n_tensors));
    json_object_set_new(o, "tensor_bytes", json_integer((json_int_t)mi->tensor_bytes));
    json_t *types = json_object();
    for (uint32_t t = 0; t < QT_COUNT; t++) {
        if (!mi->type_count[t]) continue;
        json_t *e = json_object();
        json_object_set_new(e, "count", json_integer((json_int_t)mi->type_count[t]));
        json_object_set_new(e, "bytes", json_integer((json_int_t)mi->type_bytes[t]));
        json_object_set_new(types, qt_name(t), e);
    }
    json_object_set_new(o, "types", types);
    json_object_set_new(o, "resident_bytes", json_integer((json_int_t)mi->resident_bytes));
    json_object_set_new(o, "routed_expert_bytes", json_integer((json_int_t)mi->routed_bytes));
    json_object_set_new(o, "n_expert", json_integer(mi->n_expert));
    json_object_set_new(o, "n_expert_used", json_integer(mi->n_expert_used));
    json_object_set_new(o, "n_expert_shared", json_integer(mi->n_expert_shared));
    json_object_set_new(o, "n_layers", json_integer(mi->n_layers));
    json_object_set_new(o, "n_nextn_layers", json_integer(mi->n_nextn));
    json_object_set_new(o, "n_moe_layers", json_integer(mi->n_moe_layers));
    json_t *layers = json_array();
    for (uint32_t l = 0; l < mi->n_layers; l++) {
        const mi_layer *L = &mi->layers[l];
        if (!L->n_expert) continue;
        json_t *e = json_object();
        json_object_set_new(e, "layer", json_integer(L->index));
        json_object_set_new(e, "mtp", json_boolean(L->is_nextn));
        json_object_set_new(e, "n_expert", json_integer(L->n_expert));
        json_object_set_new(e, "expert_bytes", json_integer((json_int_t)L->expert_bytes));
        json_object_set_new(e, "routed_bytes", json_integer((json_int_t)L->routed_bytes));
        json_object_set_new(e, "fused_gate_up", json_boolean(L->fused_gate_up));
        json_array_append_new(layers, e);
    }
    json_object_set_new(o, "moe_layers", layers);
    json_object_set_new(o, "expert_bytes_max", json_integer((json_int_t)mi->expert_bytes_max));
    json_object_set_new(o, "expert_bytes_per_token", json_integer((json_int_t)mi->touched_per_token));
    json_object_set_new(o, "resident_memory_bytes", json_integer((json_int_t)mi->resident_bytes));
    if (n_plans) {
        json_t *a = json_array();
        for (int i = 0; i < n_plans; i++) {
            json_t *e = json_object();
            json_object_set_new(e, "ram_gb", json_real(plans[i].ram_gb));
            json_object_set_new(e, "ok", json_boolean(plans[i].ok));
            json_object_set_new(e, plans[i].ok ? "plan" : "error", json_string(plans[i].text));
            json_array_append_new(a, e);
        }
        json_object_set_new(o, "memory_plans", a);
    }
    int rc = json_dumpf(o, stdout, JSON_INDENT(2) | JSON_PRESERVE_ORDER | JSON_ENSURE_ASCII | JSON_REAL_PRECISION(15));
    printf("\n");
    json_decref(o);
    return rc;
}

static void inspect_usage(FILE *f) {
    fprintf(f, "usage: petrel inspect MODEL.gguf [--json] [--ram GB,GB,...] [-c N]\n"
               "  Print architecture, hyper-parameters, tensor types and the resident vs\n"
               "  routed-expert split of a GGUF model (any part of a split model works).\n"
               "  --json             machine-readable output\n"
               "  --ram GB,GB,...    also the memory plan at each budget (e.g. 16,32,64,128):\n"
               "                     resident bytes, KV cache, experts mmap'd or streamed into\n"
               "                     N slots per layer, or why petrel would refuse\n"
               "  -c, --ctx-size N   context the plans budget a KV cache for (default %d,\n"
               "                     at most the model's)\n",
            PT_DEFAULT_CTX);
}

int cmd_inspect(int argc, char **argv) {
    const char *path = NULL;
    int json = 0, n_rams = 0, n_ctx = 0;
    double rams[MAX_RAMS];
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--json")) json = 1;
        else if (!strcmp(argv[i], "--ram") && i + 1 < argc) {
            if ((n_rams = parse_rams(argv[++i], rams)) < 0) {
                fprintf(stderr, "petrel inspect: --ram '%s': expected GB values separated by commas (at most %d)\n",
                        argv[i], MAX_RAMS);
                return CLI_USAGE;
            }
        } else if ((!strcmp(argv[i], "-c") || !strcmp(argv[i], "--ctx-size")) && i + 1 < argc) {
            char *end;
            long v = strtol(argv[++i], &end, 10);
            if (*end || v < 1 || v > (1L << 26)) {
                fprintf(stderr, "petrel inspect: %s '%s': expected a context of 1..%ld positions\n", argv[i - 1],
                        argv[i], 1L << 26);
                return CLI_USAGE;
            }
            n_ctx = (int)v;
        }
        else if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            inspect_usage(stdout);
            return CLI_OK;
        } else if ((!strcmp(argv[i], "-m") || !strcmp(argv[i], "--model")) && i + 1 < argc && !path)
            path = argv[++i];
        else if (argv[i][0] == '-' || path) {
            fprintf(stderr, "petrel inspect: unexpected argument '%s'\n", argv[i]);
            inspect_usage(stderr);
            return CLI_USAGE;
        } else path = argv[i];
    }
    if (!path) {
        inspect_usage(stderr);
        return CLI_USAGE;
    }
    pt_err err = {{0}};
    gguf_ctx *g = gguf_open(path, &err);
    if (!g) return cli_error("%s", err.msg);
    model_info mi;
    if (model_info_get(g, &mi, &err)) {
        gguf_close(g);
        return cli_error("%s", err.msg);
    }
    int rc = CLI_OK;
    ram_plan plans[MAX_RAMS];
    make_plans(path, rams, n_rams, n_ctx, plans);
    if (json) {
        if (print_json(path, g, &mi, plans, n_rams)) rc = cli_error("cannot write JSON output");
    } else {
        print_text(path, g, &mi);
        if (n_rams) print_plans(plans, n_rams);
    }
    if (fflush(stdout) != 0) rc = cli_error("cannot write output");
    model_info_free(&mi);
    gguf_close(g);
    return rc;
}
