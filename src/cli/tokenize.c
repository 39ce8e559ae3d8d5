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
#include "petrel.h"

static void tokenize_usage(FILE *f) {
    fprintf(f, "usage: petrel tokenize -m MODEL.gguf (-p TEXT | -f FILE) [options]\n"
               "  -m, --model FILE     GGUF with a vocabulary (a vocab-only file is enough;\n"
               "                       default: the demo model)\n"
               "  -p, --prompt TEXT    text to tokenize, taken verbatim\n"
               "  -f, --file FILE      read the text from FILE ('-' = stdin), verbatim\n"
               "  --add-special        add BOS/EOS as the vocabulary's metadata says\n"
               "  --parse-special      turn special-token text (<|user|>, [gMASK], ...) into the\n"
               "                       token; by default it is tokenized as plain text\n"
               "Prints the ids space-separated on one line.\n");
}

static void detokenize_usage(FILE *f) {
    fprintf(f, "usage: petrel detokenize -m MODEL.gguf [--ids ID,ID,...] [options]\n"
               "  -m, --model FILE     GGUF with a vocabulary (a vocab-only file is enough;\n"
               "                       default: the demo model)\n"
               "  --ids LIST           token ids separated by commas or spaces; without it the\n"
               "                       ids are read from stdin\n"
               "  --skip-special       omit control tokens (<|user|>, <eos>, ...) from the text\n"
               "Writes the text's bytes to stdout, with no newline added.\n");
}

/* The model's vocabulary: an engine opened for it alone. Prints the error. */
static pt_engine *open_vocab(const char *model) {
    char err[512];
    pt_engine_params ep = {.model_path = model, .vocab_only = 1};
    pt_engine *e = pt_engine_open(&ep, err, sizeof err);
    if (!e) cli_error("%s", err);
    return e;
}

int cmd_tokenize(int argc, char **argv) {
    const char *model = NULL, *text = NULL, *file = NULL;
    int flags = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            tokenize_usage(stdout);
            return CLI_OK;
        } else if (!strcmp(a, "-m") || !strcmp(a, "--model") || !strcmp(a, "-p") ||
                   !strcmp(a, "--prompt") || !strcmp(a, "-f") || !strcmp(a, "--file")) {
            if (!v) {
                fprintf(stderr, "petrel tokenize: %s needs a value\n", a);
                tokenize_usage(stderr);
                return CLI_USAGE;
            }
            i++;
            if (!strcmp(a, "-m") || !strcmp(a, "--model"))
                model = v;
            else if (!strcmp(a, "-p") || !strcmp(a, "--prompt"))
                text = v;
            else
                file = v;
        } else if (!strcmp(a, "--add-special")) {
            flags |= PT_TOKENIZE_ADD_SPECIAL;
        } else if (!strcmp(a, "--parse-special")) {
            flags |= PT_TOKENIZE_PARSE_SPECIAL;
        } else {
            fprintf(stderr, "petrel tokenize: unknown option '%s'\n", a);
            tokenize_usage(stderr);
            return CLI_USAGE;
        }
    }
    if (!model) model = CLI_DEFAULT_MODEL;
    if (!model || (!text && !file) || (text && file)) {
        fprintf(stderr, "petrel tokenize: %s\n",
                !model ? "-m MODEL is required" : "give exactly one of -p TEXT or -f FILE");
        tokenize_usage(stderr);
        return CLI_USAGE;
    }
    pt_buf in = {0};
    if (file && fe_read_file(file, 0, &in)) {
        pt_buf_free(&in);
        return cli_error("%s: %s", file, strerror(errno));
    }
    const char *buf = file ? in.v : text;
    const size_t len = file ? in.n : strlen(text);
    pt_engine *v = open_vocab(model);
    if (!v) {
        pt_buf_free(&in);
        return CLI_ERROR;
    }
    pt_ids ids = {0};
    char err[512];
    int rc = pt_tokenize(v, buf, len, flags, &ids, err, sizeof err);
    if (rc) {
        cli_error("%s", err);
    } else {
        for (size_t i = 0; i < ids.n; i++)
            printf(i ? " %d" : "%d", ids.v[i]);
        putchar('\n');
    }
    pt_ids_free(&ids);
    pt_engine_close(v);
    pt_buf_free(&in);
    if (fflush(stdout)) return cli_error("stdout: %s", strerror(errno));
    return rc ? CLI_ERROR : CLI_OK;
}

int cmd_detokenize(int argc, char **argv) {
    const char *model = NULL, *list = NULL;
    int flags = PT_DETOKENIZE_RENDER_SPECIAL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            detokenize_usage(stdout);
            return CLI_OK;
        } else if (!strcmp(a, "-m") || !strcmp(a, "--model") || !strcmp(a, "--ids")) {
            if (!v) {
                fprintf(stderr, "petrel detokenize: %s needs a value\n", a);
                detokenize_usage(stderr);
                return CLI_USAGE;
            }
            i++;
            if (!strcmp(a, "--ids"))
                list = v;
            else
                model = v;
        } else if (!strcmp(a, "--skip-special")) {
            flags &= ~PT_DETOKENIZE_RENDER_SPECIAL;
        } else {
            fprintf(stderr, "petrel detokenize: unknown option '%s'\n", a);
            detokenize_usage(stderr);
            return CLI_USAGE;
        }
    }
    if (!model) model = CLI_DEFAULT_MODEL;
    if (!model) {
        fprintf(stderr, "petrel detokenize: -m MODEL is required\n");
        detokenize_usage(stderr);
        return CLI_USAGE;
    }
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
    pt_engine *v = open_vocab(model);
    if (!v) {
        pt_ids_free(&ids);
        return CLI_ERROR;
    }
    pt_buf text = {0};
    char err[512];
    int rc = pt_detokenize(v, ids.v, ids.n, flags, &text, err, sizeof err);
    if (rc)
        cli_error("%s: %s", model, err);
    else if (text.n)
        fwrite(text.v, 1, text.n, stdout);
    pt_buf_free(&text);
    pt_ids_free(&ids);
    pt_engine_close(v);
    if (fflush(stdout)) return cli_error("stdout: %s", strerror(errno));
    return rc ? CLI_ERROR : CLI_OK;
}
