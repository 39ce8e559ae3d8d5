/* tokenize.c — `petrel tokenize` and `petrel detokenize`: text <-> token ids
 * with the vocabulary inside a GGUF (a vocab-only GGUF of any architecture
 * will do: the engine is opened with vocab_only, tensors are never read).
 *
 *   petrel tokenize -m MODEL (-p TEXT | -f FILE) [--add-special] [--parse-special]
 *   petrel detokenize -m MODEL [--ids 1,2,3] [--skip-special]
 *
 * tokenize prints the ids space-separated on one line. By default it follows
 * the convention of llama.cpp's reference .out files: no BOS/EOS added and
 * special-token text tokenised as plain text. TEXT is used verbatim (no escape
 * processing); -f - reads stdin. detokenize reads ids from --ids or, without
 * it, from stdin (separated by spaces, commas or newlines), and writes the
 * text's exact bytes with nothing appended.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "front/helpers.h"
#include "options.h"
#include "petrel.h"

/* The model's vocabulary: an engine opened for it alone. Prints the error. */
static pt_engine *open_vocab(const char *model) {
    char err[512];
    pt_engine_params ep = {.model_path = model, .vocab_only = 1};
    pt_engine *e = pt_engine_open(&ep, err, sizeof err);
    if (!e) cli_error("%s", err);
    return e;
}

/* tokenize's and detokenize's options. */
typedef struct tok_args {
    const char *model, *text, *file, *ids;
    int flags; /* PT_TOKENIZE_* or PT_DETOKENIZE_* */
} tok_args;

static int tok_option(void *ud, const cli_args *a, const cli_val *v) {
    tok_args *t = ud;
    (void)a;
    switch (v->id) {
    case OPT_MODEL: t->model = v->s; return 0;
    case OPT_PROMPT: t->text = v->s; return 0;
    case OPT_FILE: t->file = v->s; return 0;
    case OPT_IDS: t->ids = v->s; return 0;
    case OPT_ADD_SPECIAL: t->flags |= PT_TOKENIZE_ADD_SPECIAL; return 0;
    case OPT_PARSE_SPECIAL: t->flags |= PT_TOKENIZE_PARSE_SPECIAL; return 0;
    default: t->flags &= ~PT_DETOKENIZE_RENDER_SPECIAL; return 0; /* --skip-special */
    }
}

int cmd_tokenize(int argc, char **argv) {
    tok_args t = {0};
    int status;
    if (cli_parse("tokenize", argc, argv, tok_option, &t, &status)) return status;
    const char *model = t.model ? t.model : CLI_DEFAULT_MODEL, *text = t.text, *file = t.file;
    const int flags = t.flags;
    if (!model) return cli_usage_error("tokenize", "-m MODEL is required");
    if ((!text && !file) || (text && file))
        return cli_usage_error("tokenize", "give exactly one of -p TEXT or -f FILE");
    pt_buf in = {0};
    if (file && fe_read_file(file, 0, &in)) {
        pt_buf_free(&in);
        return cli_error("%s: %s", file, strerror(errno));
    }
    const char *buf = file ? in.v : text;
    const size_t len = file ? in.n : strlen(text);
    pt_engine *e = open_vocab(model);
    if (!e) {
        pt_buf_free(&in);
        return CLI_ERROR;
    }
    pt_ids ids = {0};
    char err[512];
    int rc = pt_tokenize(e, buf, len, flags, &ids, err, sizeof err);
    if (rc) {
        cli_error("%s", err);
    } else {
        for (size_t i = 0; i < ids.n; i++)
            printf(i ? " %d" : "%d", ids.v[i]);
        putchar('\n');
    }
    pt_ids_free(&ids);
    pt_engine_close(e);
    pt_buf_free(&in);
    if (fflush(stdout)) return cli_error("stdout: %s", strerror(errno));
    return rc ? CLI_ERROR : CLI_OK;
}

int cmd_detokenize(int argc, char **argv) {
    tok_args t = {.flags = PT_DETOKENIZE_RENDER_SPECIAL};
    int status;
    if (cli_parse("detokenize", argc, argv, tok_option, &t, &status)) return status;
    const char *model = t.model ? t.model : CLI_DEFAULT_MODEL, *list = t.ids;
    const int flags = t.flags;
    if (!model) return cli_usage_error("detokenize", "-m MODEL is required");
    pt_buf in = {0};
    if (!list) {
        if (fe_read_file("-", 0, &in)) {
            pt_buf_free(&in);
            return cli_error("stdin: %s", strerror(errno));
        }
        if (memchr(in.v, 0, in.n)) {
            pt_buf_free(&in);
            fprintf(stderr, "petrel detokenize: stdin holds a NUL byte, expected token ids\n");
            return CLI_USAGE;
        }
        list = in.v;
    }
    pt_ids ids = {0};
    if (fe_parse_ids(list, &ids)) {
        fprintf(stderr, "petrel detokenize: invalid id list '%.60s' (expected ids like 1,2,3)\n",
                list);
        pt_ids_free(&ids);
        pt_buf_free(&in);
        return CLI_USAGE;
    }
    pt_buf_free(&in);
    pt_engine *e = open_vocab(model);
    if (!e) {
        pt_ids_free(&ids);
        return CLI_ERROR;
    }
    pt_buf text = {0};
    char err[512];
    int rc = pt_detokenize(e, ids.v, ids.n, flags, &text, err, sizeof err);
    if (rc)
        cli_error("%s: %s", model, err);
    else if (text.n)
        fwrite(text.v, 1, text.n, stdout);
    pt_buf_free(&text);
    pt_ids_free(&ids);
    pt_engine_close(e);
    if (fflush(stdout)) return cli_error("stdout: %s", strerror(errno));
    return rc ? CLI_ERROR : CLI_OK;
}
