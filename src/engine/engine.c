/* engine.c — the public engine/session API (petrel.h) over the per-family
 * forward passes. Opening validates the whole model (metadata, every tensor's
 * shape and type) before any session can run, so a bad file fails at load with
 * a message naming the tensor or key. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common.h"
#include "engine/glm_forward.h"
#include "format/gguf.h"
#include "model/glm_dsa.h"
#include "petrel.h"
#include "runtime/threadpool.h"

struct pt_engine {
    gguf_ctx *g;
    tp_pool *pool;
    char arch[32];
    int max_isa; /* kernel ISA cap, -1: best */
    glm_model glm;
};

struct pt_session {
    pt_engine *e;
    glm_state *st;
    int n_ctx;
};

static void copy_err(const pt_err *e, char *buf, size_t len) {
    if (buf && len) snprintf(buf, len, "%s", e->msg);
}

pt_engine *pt_engine_open(const pt_engine_params *p, char *err, size_t err_len) {
    pt_err e = {{0}};
    pt_engine *en = calloc(1, sizeof *en);
    if (!en) {
        snprintf(err, err_len, "out of memory");
        return NULL;
    }
    en->max_isa = p->kernels - 1; /* PT_KERNELS_BEST -> -1, SCALAR -> QT_ISA_SCALAR, ... */
    en->g = gguf_open(p->model_path, &e);
    if (!en->g) goto fail;
    if (gguf_get_str(en->g, "general.architecture", en->arch, sizeof en->arch, &e)) goto fail;
    if (!strcmp(en->arch, "glm-dsa") || !strcmp(en->arch, "deepseek2")) {
        if (glm_model_load(en->g, &en->glm, &e)) goto fail;
    } else {
        pt_errf(&e, "%s: architecture '%s' is not supported (supported: glm-dsa, deepseek2)", p->model_path,
                en->arch);
        goto fail;
    }
    int nt = p->n_threads > 0 ? p->n_threads : (int)sysconf(_SC_NPROCESSORS_ONLN);
    if (nt < 1) nt = 1;
    en->pool = tp_new(nt);
    if (!en->pool) {
        pt_errf(&e, "cannot start %d threads", nt);
        goto fail;
    }
    return en;
fail:
    copy_err(&e, err, err_len);
    pt_engine_close(en);
    return NULL;
}

void pt_engine_close(pt_engine *e) {
    if (!e) return;
    glm_model_free(&e->glm);
    tp_free(e->pool);
    gguf_close(e->g);
    free(e);
}

int pt_engine_n_vocab(const pt_engine *e) { return e->glm.hp.n_vocab; }
int pt_engine_n_embd(const pt_engine *e) { return e->glm.hp.n_embd; }
int pt_engine_n_threads(const pt_engine *e) { return tp_size(e->pool); }
int pt_engine_has_mtp(const pt_engine *e) { return e->glm.hp.n_nextn > 0; }
const char *pt_engine_arch(const pt_engine *e) { return e->arch; }

pt_session *pt_session_new(pt_engine *e, const pt_session_params *p, char *err, size_t err_len) {
    pt_err er = {{0}};
    int n_ctx = p && p->n_ctx > 0 ? p->n_ctx : 4096;
    if (n_ctx > e->glm.hp.n_ctx_train && e->glm.hp.n_ctx_train > 0 && !(p && p->n_ctx > 0))
        n_ctx = e->glm.hp.n_ctx_train;
    int n_batch = p && p->n_batch > 0 ? p->n_batch : 64;
    pt_session *s = calloc(1, sizeof *s);
    if (!s) {
        snprintf(err, err_len, "out of memory");
        return NULL;
    }
    s->e = e;
    s->n_ctx = n_ctx;
    s->st = glm_state_new(&e->glm, e->pool, e->max_isa, n_ctx, n_batch, &er);
    if (!s->st) {
        copy_err(&er, err, err_len);
        free(s);
        return NULL;
    }
    return s;
}

void pt_session_free(pt_session *s) {
    if (!s) return;
    glm_state_free(s->st);
    free(s);
}

int pt_session_n_ctx(const pt_session *s) { return s->n_ctx; }
int pt_session_n_past(const pt_session *s) { return glm_n_past(s->st); }

void pt_session_truncate(pt_session *s, int n) {
    if (n <= 0) glm_reset(s->st);
    else glm_truncate(s->st, n);
}

int pt_session_eval(pt_session *s, const int32_t *tokens, int n, float *logits, int all_rows, float *hidden,
                    char *err, size_t err_len) {
    pt_err e = {{0}};
    if (glm_eval(s->st, tokens, n, logits, all_rows, hidden, &e)) {
        copy_err(&e, err, err_len);
        return -1;
    }
    return 0;
}

int pt_session_mtp(pt_session *s, const int32_t *tokens, const float *hidden_prev, int n, float *logits,
                   char *err, size_t err_len) {
    pt_err e = {{0}};
    if (glm_mtp(s->st, tokens, hidden_prev, n, logits, &e)) {
        copy_err(&e, err, err_len);
        return -1;
    }
    return 0;
}
