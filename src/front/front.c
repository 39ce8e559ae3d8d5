/* front.c — UTF-8 repair and the chat turn shared by the CLI and the server.
 * See front.h.
 *
 * A conversation's prompt is tokenized with special tokens parsed in the
 * template's scaffolding only: the renderer reports which byte ranges came
 * from the conversation, and those stay text, so a message, a tool result or
 * a document an agent reads cannot forge a turn. */
#include "front/front.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int say(char *err, size_t err_len, int code, const char *msg) {
    if (err && err_len) snprintf(err, err_len, "%s", msg);
    return code;
}

int fe_turn_run(pt_gen *g, const fe_turn *t, fe_turn_result *r, char *err, size_t err_len) {
    if (r->have_parsed) pt_chat_parsed_free(&r->parsed);
    r->have_parsed = 0;
    r->ids.n = 0;
    r->n_prompt = 0, r->n_reused = 0, r->in_reasoning = 0;
    r->t_start = pt_now(), r->t_prefilled = 0;
    pt_buf keep = r->gen.text;
    memset(&r->gen, 0, sizeof r->gen);
    r->gen.text = keep;
    r->gen.text.n = 0;
    r->text.n = 0;
    pt_session *s = pt_gen_session(g);
    const pt_engine *e = pt_session_engine(s);
    char *tools = NULL;
    int rc = 0;
    /* 1. the prompt's tokens */
    if (t->messages) {
        /* the conversation crosses the public API as JSON text */
        char *msgs = json_dumps(t->messages, JSON_COMPACT);
        tools = t->tools ? json_dumps(t->tools, JSON_COMPACT) : NULL;
        pt_buf rendered = {0};
        pt_spans content = {0}; /* the conversation's text in the prompt: never special tokens */
        pt_chat_opts co = {.add_generation_prompt = 1, .thinking = t->thinking};
        if (!msgs || (t->tools && !tools))
            rc = say(err, err_len, FE_TURN_BAD_PROMPT, "out of memory");
        else if (pt_chat_render_spans(t->format, msgs, tools, &co, &rendered, &content, err,
                                      err_len) ||
                 pt_tokenize_spans(e, rendered.v, rendered.n, PT_TOKENIZE_PARSE_SPECIAL,
                                   t->parse_special_in_content ? NULL : &content, &r->ids, err,
                                   err_len))
            rc = FE_TURN_BAD_PROMPT;
        free(msgs);
        pt_buf_free(&rendered);
        pt_spans_free(&content);
        r->in_reasoning = pt_chat_opens_reasoning(t->format, t->thinking);
    } else if (pt_tokenize(e, t->text, t->text_len, PT_TOKENIZE_ADD_SPECIAL, &r->ids, err,
                           err_len)) {
        rc = FE_TURN_BAD_PROMPT;
    }
    r->n_prompt = (int)r->ids.n;
    if (rc) goto out;
    /* stopped already: leave the cache as it is (an atomic read: the server's connection
     * thread sets the flag) */
    if (t->stop && __atomic_load_n(t->stop, __ATOMIC_RELAXED)) {
        r->n_reused = -2;
        rc = say(err, err_len, FE_TURN_CANCELLED, "interrupted");
        goto out;
    }
    /* 2. the prefill: only what the cache does not hold already */
    if (t->clear) pt_gen_clear(g);
    r->n_reused = pt_gen_prefill(g, r->ids.v, (int)r->ids.n, t->stop, err, err_len);
    r->t_prefilled = pt_now();
    if (r->n_reused == -2) {
        rc = say(err, err_len, FE_TURN_CANCELLED, "interrupted");
        goto out;
    }
    if (r->n_reused < 0) {
        /* pt_session_sync refuses these before touching the cache; its message says why */
        rc = r->ids.n == 0 || (int)r->ids.n > pt_session_n_ctx(s) ? FE_TURN_TOO_LONG
                                                                  : FE_TURN_PREFILL_FAILED;
        goto out;
    }
    if (t->on_prefilled && t->on_prefilled(t->ud, r->in_reasoning)) {
        rc = say(err, err_len, FE_TURN_GEN_FAILED, "");
        goto out;
    }
    /* 3. generation */
    if (pt_gen_run(g, &t->gen, t->emit, t->emit_ud, t->stop, &r->gen, err, err_len)) {
        rc = FE_TURN_GEN_FAILED;
        goto out;
    }
    /* 4. the answer: valid UTF-8, split when asked */
    if (pt_utf8_repair(r->gen.text.v ? r->gen.text.v : "", r->gen.text.n, &r->text) < 0) {
        rc = say(err, err_len, FE_TURN_ANSWER_FAILED, "out of memory");
        goto out;
    }
    if (t->parse && t->messages) {
        if (pt_chat_parse(t->format, r->text.v, r->text.n, r->in_reasoning, tools, &r->parsed, err,
                          err_len))
            rc = FE_TURN_ANSWER_FAILED;
        else
            r->have_parsed = 1;
    }
out:
    free(tools);
    return rc;
}

void fe_turn_result_free(fe_turn_result *r) {
    if (r->have_parsed) pt_chat_parsed_free(&r->parsed);
    pt_ids_free(&r->ids);
    pt_buf_free(&r->gen.text);
    pt_buf_free(&r->text);
    memset(r, 0, sizeof *r);
}

/* ===== The KV cache in the statistics lines ===== */

void fe_kv_stats_of(const pt_session *s, int hits, int hits_disk, fe_kv_stats *k) {
    k->n_ctx = pt_session_n_ctx(s);
    k->n_past = pt_session_n_past(s);
    k->types = pt_engine_kv_types(pt_session_engine(s));
    k->ram_bytes = pt_session_kv_bytes(s);
    k->disk_bytes = pt_session_kv_disk_bytes(s);
    pt_session_kv_cache(s, &k->cache);
    k->hits = hits > 0 ? hits : 0;
    k->hits_disk = hits_disk > 0 && hits > 0 ? (hits_disk < hits ? hits_disk : hits) : 0;
}

static void kv_size(uint64_t bytes, char out[32]) {
    const double b = (double)bytes;
    if (b >= 1073741824.0)
        snprintf(out, 32, "%.2f GB", b / 1073741824.0);
    else if (b >= 1048576.0)
        snprintf(out, 32, "%.1f MB", b / 1048576.0);
    else
        snprintf(out, 32, "%.0f KB", b / 1024.0);
}

void fe_kv_format(const fe_kv_stats *k, char *out, size_t cap) {
    char ram[32], disk[48] = "", cache[160] = "", gather[200] = "";
    kv_size(k->ram_bytes, ram);
    if (k->disk_bytes) {
        char d[32];
        kv_size(k->disk_bytes, d);
        snprintf(disk, sizeof disk, ", %s on disk", d);
    }
    if (k->cache.cap_bytes) {
        char c[32], b[32];
        kv_size(k->cache.bytes, c);
        kv_size(k->cache.cap_bytes, b);
        snprintf(cache, sizeof cache, "; selected spilled pages cached %s of %s, %.0f%% hits", c, b,
                 k->cache.selected ? 100.0 * (double)k->cache.hits / (double)k->cache.selected
                                   : 0.0);
    }
    if (k->cache.gather_cap) {
        const pt_kv_cache_stats *c = &k->cache;
        const double n = c->gathers ? (double)c->gathers : 1.0;
        char b[32], per[32];
        kv_size(c->gather_cap, b);
        kv_size((uint64_t)((double)c->gather_bytes / n), per);
        char kept[48] = "";
        if (c->gather_kept)
            snprintf(kept, sizeof kept, " (%.0f kept from earlier steps)",
                     (double)c->gather_kept / n);
        snprintf(gather, sizeof gather,
                 "; selected spilled rows read directly (%s buffer): %llu layer steps, %.0f rows%s "
                 "in %.0f reads (%s) each",
                 b, (unsigned long long)c->gathers, (double)c->gather_rows / n, kept,
                 (double)c->gather_reads / n, per);
    }
    snprintf(out, cap, "KV %d/%d %s, %s in RAM%s, prefix hits %d (%d from disk)%s%s", k->n_past,
             k->n_ctx, k->types, ram, disk, k->hits, k->hits_disk, cache, gather);
}
