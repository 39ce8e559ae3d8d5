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
 *
 * A model file is hostile input: every string it supplies (general.name, the
 * architecture, keys, string values, refusals that quote them) is printed
 * through esc(), so terminal escapes and control characters show as \xNN
 * instead of acting on the reader's terminal. --json escapes them by itself.
 */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "front/helpers.h"
#include "options.h"
#include "petrel.h"
#include "petrel_tools.h"

#define MIN(a, b) ((a) < (b) ? (a) : (b))

/* s[0..n) made safe for a terminal into buf (always NUL-terminated, cut at cap): control
 * characters, C1 controls, DEL, invalid UTF-8 and backslashes as \xNN / \\; the rest as is. */
static const char *esc(const char *s, size_t n, char *buf, size_t cap) {
    size_t o = 0;
    const unsigned char *p = (const unsigned char *)s;
    for (size_t i = 0; i < n && o + 5 < cap;) {
        size_t u = p[i] >= 0x80 ? fe_utf8_len(s + i, n - i) : 0;
        if (u == 2 && p[i] == 0xC2 && p[i + 1] < 0xA0) u = 0; /* C1: some terminals obey them */
        if (u) {
            if (o + u + 1 > cap) break;
            memcpy(buf + o, p + i, u);
            o += u, i += u;
        } else if (p[i] < 0x20 || p[i] >= 0x7f) {
            o += (size_t)snprintf(buf + o, cap - o, "\\x%02x", p[i]), i++;
        } else if (p[i] == '\\') {
            buf[o++] = '\\', buf[o++] = '\\', i++;
        } else {
            buf[o++] = (char)p[i++];
        }
    }
    buf[o] = 0;
    return buf;
}

#define ESC(str, buf) esc((str), strlen(str), (buf), sizeof(buf))

static const char *human(uint64_t b, char *buf, size_t cap) {
    const char *u[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    double v = (double)b;
    int i = 0;
    while (v >= 1024 && i < 4)
        v /= 1024, i++;
    if (i == 0)
        snprintf(buf, cap, "%llu B", (unsigned long long)b);
    else
        snprintf(buf, cap, "%.*f %s", v < 10 ? 2 : 1, v, u[i]);
    return buf;
}

/* One scalar of metadata pair i: the value itself (j -1) or element j of its array, of type t,
 * read as what it is. */
typedef struct meta_scalar {
    enum { MS_NONE, MS_STR, MS_BOOL, MS_FLOAT, MS_INT, MS_UINT } kind; /* MS_NONE: unreadable */
    const char *str;                                                   /* MS_STR: str[0..len) */
    size_t len;
    double d;   /* MS_FLOAT */
    int64_t x;  /* MS_BOOL (0 or 1), MS_INT */
    uint64_t u; /* MS_UINT (a value beyond int64) */
} meta_scalar;

static meta_scalar meta_scalar_of(const pt_model *m, uint64_t i, int64_t j, int t) {
    meta_scalar s = {0};
    if (t == PT_META_STRING) {
        if (!pt_model_meta_str(m, i, j, &s.str, &s.len)) s.kind = MS_STR;
    } else if (t == PT_META_BOOL) {
        s.kind = MS_BOOL;
        s.x = pt_model_meta_i64(m, i, j, &s.x) == 0 && s.x;
    } else if (t == PT_META_FLOAT32 || t == PT_META_FLOAT64) {
        s.kind = MS_FLOAT;
        if (pt_model_meta_f64(m, i, j, &s.d)) s.d = 0;
    } else if (pt_model_meta_i64(m, i, j, &s.x) == 0) {
        s.kind = MS_INT;
    } else if (j < 0 && pt_model_meta_u64(m, i, j, &s.u) == 0) {
        s.kind = MS_UINT;
    }
    return s;
}

/* A scalar as text into buf (strings quoted, escaped, cut at 60 bytes); snprintf's return. */
static int scalar_text(const meta_scalar *s, char *buf, size_t cap) {
    char e[256];
    switch (s->kind) {
    case MS_STR:
        return snprintf(buf, cap, "\"%s\"%s", esc(s->str, MIN(s->len, 60), e, sizeof e),
                        s->len > 60 ? "..." : "");
    case MS_BOOL: return snprintf(buf, cap, "%s", s->x ? "true" : "false");
    case MS_FLOAT: return snprintf(buf, cap, "%g", s->d);
    case MS_INT: return snprintf(buf, cap, "%lld", (long long)s->x);
    case MS_UINT: return snprintf(buf, cap, "%llu", (unsigned long long)s->u);
    default: return snprintf(buf, cap, "?");
    }
}

/* Short printable form of metadata pair i (arrays of strings or arrays, or of more than 16
 * values, summarised). */
static void value_text(const pt_model *m, uint64_t i, char *buf, size_t cap) {
    pt_meta k;
    pt_model_meta(m, i, &k);
    if (k.type != PT_META_ARRAY) {
        const meta_scalar s = meta_scalar_of(m, i, -1, k.type);
        scalar_text(&s, buf, cap);
        return;
    }
    const int et = k.elem_type;
    if (et == PT_META_STRING || et == PT_META_ARRAY || k.n > 16) {
        snprintf(buf, cap, "[%llu x %s]", (unsigned long long)k.n, pt_meta_type_name(et));
        return;
    }
    size_t n = (size_t)snprintf(buf, cap, "[");
    for (uint64_t j = 0; j < k.n && n < cap; j++) {
        const meta_scalar s = meta_scalar_of(m, i, (int64_t)j, et);
        if (j) n += (size_t)snprintf(buf + n, cap - n, ", ");
        if (n < cap) n += (size_t)scalar_text(&s, buf + n, cap - n);
    }
    if (n < cap) snprintf(buf + n, cap - n, "]");
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

/* A scalar of type t as JSON (float32 as the shortest decimal that reads back the same). */
static json_t *scalar_json(const meta_scalar *s, int t) {
    switch (s->kind) {
    case MS_STR: return json_stringn_nocheck(s->str, s->len);
    case MS_BOOL: return json_boolean(s->x);
    case MS_FLOAT: return json_real(t == PT_META_FLOAT32 ? shortest_f32(s->d) : s->d);
    case MS_INT: return json_integer(s->x);
    case MS_UINT: return json_real((double)s->u);
    default: return json_null();
    }
}

/* Metadata pair i as JSON (arrays of strings or arrays, or of more than 64 values, as
 * {"array_of", "length"}). */
static json_t *value_json(const pt_model *m, uint64_t i) {
    pt_meta k;
    pt_model_meta(m, i, &k);
    if (k.type != PT_META_ARRAY) {
        const meta_scalar s = meta_scalar_of(m, i, -1, k.type);
        return scalar_json(&s, k.type);
    }
    const int et = k.elem_type;
    if (et == PT_META_STRING || et == PT_META_ARRAY || k.n > 64) {
        json_t *o = json_object();
        json_object_set_new(o, "array_of", json_string(pt_meta_type_name(et)));
        json_object_set_new(o, "length", json_integer((json_int_t)k.n));
        return o;
    }
    json_t *a = json_array();
    for (uint64_t j = 0; j < k.n; j++) {
        const meta_scalar s = meta_scalar_of(m, i, (int64_t)j, et);
        json_array_append_new(a, scalar_json(&s, et));
    }
    return a;
}

/* Is pair k one of the architecture's keys ("<arch>.something")? */
static int is_arch_key(const pt_meta *k, const char *arch, size_t al) {
    return k->key_len > al + 1 && memcmp(k->key, arch, al) == 0 && k->key[al] == '.';
}

static const char *type_or_none(uint32_t t) {
    return t == PT_NO_TYPE ? "none" : pt_type_name(t);
}

static const char *expert_types_text(const pt_layer_info *L, char *buf, size_t cap) {
    if (L->fused_gate_up)
        snprintf(buf, cap, "gate_up %s, down %s", type_or_none(L->expert_types[0]),
                 type_or_none(L->expert_types[2]));
    else
        snprintf(buf, cap, "gate %s, up %s, down %s", type_or_none(L->expert_types[0]),
                 type_or_none(L->expert_types[1]), type_or_none(L->expert_types[2]));
    return buf;
}

static void print_text(const char *path, const pt_model *m, const pt_model_info *mi) {
    char b1[32], b2[32], b3[32], line[512], e1[1024], e2[1024];
    size_t al = strlen(mi->arch);
    printf("file            %s (%s, %u file%s, GGUF v%u)\n", ESC(path, e1),
           human(mi->file_bytes, b1, sizeof b1), mi->n_files, mi->n_files == 1 ? "" : "s",
           mi->version);
    if (mi->name[0]) printf("name            %s\n", ESC(mi->name, e1));
    printf("architecture    %s\n", ESC(mi->arch, e1));
    printf("hyper-parameters\n");
    for (uint64_t i = 0; i < pt_model_n_meta(m); i++) {
        pt_meta k;
        pt_model_meta(m, i, &k);
        if (!is_arch_key(&k, mi->arch, al)) continue;
        value_text(m, i, line, sizeof line);
        printf("  %-40s %s\n", esc(k.key + al + 1, k.key_len - al - 1, e2, sizeof e2), line);
    }
    printf("tensors         %llu, %s of data\n", (unsigned long long)mi->n_tensors,
           human(mi->tensor_bytes, b1, sizeof b1));
    for (uint32_t t = 0; t < PT_TYPE_COUNT; t++)
        if (mi->type_count[t])
            printf("  %-8s %6llu tensors %12s\n", pt_type_name(t),
                   (unsigned long long)mi->type_count[t], human(mi->type_bytes[t], b1, sizeof b1));
    if (mi->n_vocab_tokens && mi->n_output_rows > mi->n_vocab_tokens)
        printf("vocabulary      output rows %llu, vocabulary %llu: %llu padded rows masked\n",
               (unsigned long long)mi->n_output_rows, (unsigned long long)mi->n_vocab_tokens,
               (unsigned long long)(mi->n_output_rows - mi->n_vocab_tokens));
    double pct = mi->tensor_bytes ? 100.0 * (double)mi->routed_bytes / (double)mi->tensor_bytes : 0;
    printf("resident        %s (everything but routed experts)\n",
           human(mi->resident_bytes, b1, sizeof b1));
    printf("routed experts  %s (%.1f%% of tensor bytes)\n", human(mi->routed_bytes, b1, sizeof b1),
           pct);
    if (mi->n_expert || mi->routed_bytes) {
        printf("experts         %u per layer, %u used per token, %u shared; %u trunk MoE layer%s",
               mi->n_expert ? mi->n_expert : mi->n_expert_max, mi->n_expert_used,
               mi->n_expert_shared, mi->n_moe_layers, mi->n_moe_layers == 1 ? "" : "s");
        if (mi->n_nextn) printf(" + %u MTP block%s", mi->n_nextn, mi->n_nextn == 1 ? "" : "s");
        printf("\n");
        for (uint32_t l = 0; l < mi->n_layers; l++) {
            const pt_layer_info *L = &mi->layers[l];
            if (!L->n_expert) continue;
            printf("  blk.%-4d %s%4u experts x %10s  (%s)\n", L->index, L->is_mtp ? "MTP " : "    ",
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
    int ok;          /* the engine would open: text is the plan line */
    char text[1024]; /* the plan line, or why it refuses (without the path prefix) */
} ram_plan;

/* The plan at each of rams[n] GB for a context of n_ctx (0: the default). */
static void make_plans(const char *path, const double *rams, int n, int n_ctx, ram_plan *out) {
    for (int i = 0; i < n; i++) {
        ram_plan *r = &out[i];
        char err[1024] = "";
        pt_engine_params p = {.model_path = path,
                              .ram_gb = rams[i],
                              .n_ctx = n_ctx,
                              .plan_only = 1,
                              .cache_dir = cli_cache_dir()};
        pt_engine *e = pt_engine_open(&p, err, sizeof err);
        r->ram_gb = rams[i];
        r->ok = e != NULL;
        const size_t pl = strlen(path);
        const char *msg = e ? pt_engine_plan(e)
                          : !strncmp(err, path, pl) && !strncmp(err + pl, ": ", 2) ? err + pl + 2
                                                                                   : err;
        snprintf(r->text, sizeof r->text, "%s", msg);
        pt_engine_close(e);
    }
}

static void print_plans(const ram_plan *p, int n) {
    char e[4096];
    printf("memory plans    (what petrel would do with --ram GB)\n");
    for (int i = 0; i < n; i++)
        printf("  %6g GB  %s%s\n", p[i].ram_gb, p[i].ok ? "" : "refused: ", ESC(p[i].text, e));
}

/* "16,32,64" into rams[], each in (lo, hi]; returns how many, or -1 on a bad list. */
static int parse_rams(const char *s, double lo, double hi, double *rams) {
    int n = 0;
    while (*s) {
        char *end;
        double v = strtod(s, &end);
        if (end == s || !(v > lo) || v > hi || n == MAX_RAMS || (*end && *end != ',')) return -1;
        rams[n++] = v;
        s = *end ? end + 1 : end;
    }
    return n ? n : -1;
}

static int print_json(const char *path, const pt_model *m, const pt_model_info *mi,
                      const ram_plan *plans, int n_plans) {
    json_t *o = json_object();
    size_t al = strlen(mi->arch);
    json_object_set_new(o, "file", json_string(path));
    json_object_set_new(o, "file_bytes", json_integer((json_int_t)mi->file_bytes));
    json_object_set_new(o, "n_files", json_integer(mi->n_files));
    json_object_set_new(o, "gguf_version", json_integer(mi->version));
    json_object_set_new(o, "name", json_string(mi->name));
    json_object_set_new(o, "architecture", json_string(mi->arch));
    json_t *hp = json_object();
    for (uint64_t i = 0; i < pt_model_n_meta(m); i++) {
        pt_meta k;
        pt_model_meta(m, i, &k);
        if (!is_arch_key(&k, mi->arch, al)) continue;
        char key[256];
        snprintf(key, sizeof key, "%.*s", (int)MIN(k.key_len - al - 1, 250), k.key + al + 1);
        json_object_set_new(hp, key, value_json(m, i));
    }
    json_object_set_new(o, "hyper_parameters", hp);
    json_object_set_new(o, "n_tensors", json_integer((json_int_t)mi->n_tensors));
    json_object_set_new(o, "tensor_bytes", json_integer((json_int_t)mi->tensor_bytes));
    json_t *types = json_object();
    for (uint32_t t = 0; t < PT_TYPE_COUNT; t++) {
        if (!mi->type_count[t]) continue;
        json_t *e = json_object();
        json_object_set_new(e, "count", json_integer((json_int_t)mi->type_count[t]));
        json_object_set_new(e, "bytes", json_integer((json_int_t)mi->type_bytes[t]));
        json_object_set_new(types, pt_type_name(t), e);
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
        const pt_layer_info *L = &mi->layers[l];
        if (!L->n_expert) continue;
        json_t *e = json_object();
        json_object_set_new(e, "layer", json_integer(L->index));
        json_object_set_new(e, "mtp", json_boolean(L->is_mtp));
        json_object_set_new(e, "n_expert", json_integer(L->n_expert));
        json_object_set_new(e, "expert_bytes", json_integer((json_int_t)L->expert_bytes));
        json_object_set_new(e, "routed_bytes", json_integer((json_int_t)L->routed_bytes));
        json_object_set_new(e, "fused_gate_up", json_boolean(L->fused_gate_up));
        json_array_append_new(layers, e);
    }
    json_object_set_new(o, "moe_layers", layers);
    json_object_set_new(o, "expert_bytes_max", json_integer((json_int_t)mi->expert_bytes_max));
    json_object_set_new(o, "expert_bytes_per_token",
                        json_integer((json_int_t)mi->touched_per_token));
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
    int rc = json_dumpf(o, stdout,
                        JSON_INDENT(2) | JSON_PRESERVE_ORDER | JSON_ENSURE_ASCII |
                            JSON_REAL_PRECISION(15));
    printf("\n");
    json_decref(o);
    return rc;
}

/* inspect's options. */
typedef struct inspect_args {
    const char *path; /* the model */
    int json, n_rams, n_ctx;
    double rams[MAX_RAMS]; /* --ram */
} inspect_args;

static int inspect_option(void *ud, const cli_args *a, const cli_val *v) {
    inspect_args *ia = ud;
    switch (v->id) {
    case OPT_JSON: ia->json = 1; return 0;
    case OPT_CTX: ia->n_ctx = (int)v->n; return 0;
    case OPT_RAM_LIST:
        ia->n_rams = parse_rams(v->s, v->opt->lo, v->opt->hi, ia->rams);
        return ia->n_rams < 0 ? cli_bad_value(a, v) : 0;
    default: /* the model: MODEL.gguf or -m */
        if (ia->path)
            return cli_usage_error(a->name, "unexpected argument '%s': one model at a time", v->s),
                   -1;
        ia->path = v->s;
        return 0;
    }
}

int cmd_inspect(int argc, char **argv) {
    inspect_args ia = {0};
    int status;
    if (cli_parse("inspect", argc, argv, inspect_option, &ia, &status)) return status;
    const char *path = ia.path ? ia.path : CLI_DEFAULT_MODEL;
    const int json = ia.json, n_rams = ia.n_rams;
    const double *rams = ia.rams;
    if (!path) return cli_usage_error("inspect", "no model given (and no demo model found)");
    char err[1024];
    pt_model *m = pt_model_open(path, err, sizeof err);
    if (!m) return cli_error("%s", err);
    pt_model_info mi;
    if (pt_model_info_get(m, &mi, err, sizeof err)) {
        pt_model_close(m);
        return cli_error("%s", err);
    }
    int rc = CLI_OK;
    ram_plan plans[MAX_RAMS];
    make_plans(path, rams, n_rams, ia.n_ctx, plans);
    if (json) {
        if (print_json(path, m, &mi, plans, n_rams)) rc = cli_error("cannot write JSON output");
    } else {
        print_text(path, m, &mi);
        if (n_rams) print_plans(plans, n_rams);
    }
    if (fflush(stdout) != 0) rc = cli_error("cannot write output");
    pt_model_info_free(&mi);
    pt_model_close(m);
    return rc;
}
