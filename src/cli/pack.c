/* pack.c — `petrel pack` (write an expert pack next to a model) and
 * `petrel verify` (check a pack against its model, record by record).
 *
 *   petrel pack MODEL.gguf [-o PATH] [--table-only]
 *   petrel verify MODEL.gguf [--pack PATH]
 *
 * The pack goes to MODEL.gguf.xpack, or to the cache directory when the
 * model's folder is not writable (-o overrides); the engine looks in both
 * places. --table-only writes the checksum table alone (MODEL.gguf.xsums, a
 * few bytes per expert) so that streamed reads of a model without a pack are
 * checked too; verify checks a pack, or else that table. Packing resumes an interrupted run. Verify
 * reads the pack and the model in full and exits 0 only for a valid pack; a missing, stale (another
 * model, the model changed since: size, header, mtime, inode or bytes, or an
 * older pack format) or corrupt one exits 1 with the reason.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "front/helpers.h"
#include "options.h"
#include "petrel.h"
#include "petrel_tools.h"

typedef struct progress {
    const char *what;
    double t0, last;
    int tty;
} progress;

/* A progress bar on stderr: percent, MB/s and ETA, redrawn a few times a second. */
static void show_progress(uint64_t done, uint64_t total, void *user) {
    progress *p = user;
    double t = pt_now();
    if (done < total && t - p->last < 0.25) return;
    p->last = t;
    double el = t - p->t0, rate = el > 0 ? done / el : 0;
    double eta = rate > 0 ? (total - done) / rate : 0;
    int width = 30, fill = total ? (int)(width * (double)done / total) : width;
    char bar[64];
    for (int i = 0; i < width; i++)
        bar[i] = i < fill ? '#' : '.';
    bar[width] = 0;
    fprintf(stderr, "%s%s [%s] %5.1f%% %8.1f MB/s  ETA %4.0f s%s", p->tty ? "\r" : "", p->what, bar,
            total ? 100.0 * done / total : 100.0, rate / 1e6, eta, p->tty ? "" : "\n");
    if (done >= total && p->tty) fputc('\n', stderr);
}

static int writable_dir_of(const char *path) {
    char dir[PT_PATH_MAX];
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    if (slash)
        *slash = 0;
    else
        snprintf(dir, sizeof dir, ".");
    return access(dir, W_OK) == 0;
}

static pt_model *open_model(const char *path) {
    char err[1024];
    pt_model *m = pt_model_open(path, err, sizeof err);
    if (!m) cli_error("%s", err);
    return m;
}

/* pack's and verify's options. */
typedef struct pack_args {
    const char *model; /* MODEL.gguf */
    const char *out;   /* pack -o PATH; verify --pack PATH */
    long long stop_after;
    int table_only;
} pack_args;

static int pack_option(void *ud, const cli_args *a, const cli_val *v) {
    pack_args *pa = ud;
    (void)a;
    switch (v->id) {
    case OPT_ARG: pa->model = v->s; return 0;
    case OPT_TABLE_ONLY: pa->table_only = 1; return 0;
    case OPT_STOP_AFTER: pa->stop_after = v->n; return 0;
    default: pa->out = v->s; return 0; /* pack -o, verify --pack */
    }
}

int cmd_pack(int argc, char **argv) {
    pack_args pa = {.stop_after = -1};
    int status;
    if (cli_parse("pack", argc, argv, pack_option, &pa, &status)) return status;
    if (!pa.model) return cli_usage_error("pack", "which model? (MODEL.gguf)");
    const char *model = pa.model, *out = pa.out;
    const int table_only = pa.table_only;
    const long long stop_after = pa.stop_after;
    pt_model *m = open_model(model);
    if (!m) return CLI_ERROR;
    char cand[2][PT_PATH_MAX];
    int nc = table_only ? pt_table_candidates(m, cli_cache_dir(), cand)
                        : pt_pack_candidates(m, cli_cache_dir(), cand);
    const char *path = out ? out : writable_dir_of(cand[0]) || nc < 2 ? cand[0] : cand[1];
    if (!out && path == cand[1] && fe_mkdirs_for(path) != 0) {
        pt_model_close(m);
        return cli_error("%s: cannot create the cache directory: %s", path, strerror(errno));
    }
    fprintf(stderr, "petrel: %s the experts of %s into %s\n",
            table_only ? "checksumming" : "packing", model, path);
    progress pr = {"pack", pt_now(), 0, isatty(2)};
    char err[1024];
    int rc = table_only ? pt_table_write(m, path, show_progress, &pr, err, sizeof err)
                        : pt_pack_write(m, path, show_progress, &pr, stop_after, err, sizeof err);
    pt_model_close(m);
    if (rc) {
        /* a failed write (a full disk...) keeps what it wrote for a resumed run; say so,
         * since that file may be what fills the disk */
        char partial[PT_PATH_MAX + 16];
        snprintf(partial, sizeof partial, "%s.partial", path);
        int kept = access(partial, F_OK) == 0;
        cli_error("%s", err);
        if (kept)
            fprintf(stderr,
                    "petrel: %s is kept (never used as a pack): rerun `petrel pack` to resume, "
                    "or delete it\n",
                    partial);
        return CLI_ERROR;
    }
    fprintf(stderr, "petrel: wrote %s in %.1f s\n", path, pt_now() - pr.t0);
    return CLI_OK;
}

int cmd_verify(int argc, char **argv) {
    pack_args pa = {.stop_after = -1};
    int status;
    if (cli_parse("verify", argc, argv, pack_option, &pa, &status)) return status;
    if (!pa.model) return cli_usage_error("verify", "which model? (MODEL.gguf)");
    const char *model = pa.model, *pack = pa.out;
    pt_model *m = open_model(model);
    if (!m) return CLI_ERROR;
    char cand[4][PT_PATH_MAX];
    int nc = pack ? 1 : pt_pack_candidates(m, cli_cache_dir(), cand);
    if (pack) snprintf(cand[0], sizeof cand[0], "%s", pack);
    const char *path = NULL;
    for (int i = 0; i < nc && !path; i++)
        if (access(cand[i], F_OK) == 0) path = cand[i];
    if (!path && !pack) { /* no pack: the checksum table alone */
        const int nt = pt_table_candidates(m, cli_cache_dir(), cand + nc);
        for (int i = nc; i < nc + nt && !path; i++)
            if (access(cand[i], F_OK) == 0) path = cand[i];
    }
    int rc = CLI_OK;
    if (!path && pack) {
        rc = cli_error("%s: no such expert pack", pack);
    } else if (!path) {
        /* neither a pack nor a table: make the table from a full read of the model, so
         * its expert reads are checked from now on */
        char tab[2][PT_PATH_MAX];
        const int nt = pt_table_candidates(m, cli_cache_dir(), tab);
        const char *out = writable_dir_of(tab[0]) || nt < 2 ? tab[0] : tab[1];
        if (out == tab[1] && fe_mkdirs_for(out) != 0) {
            rc = cli_error("%s: cannot create the cache directory: %s", out, strerror(errno));
        } else {
            fprintf(stderr,
                    "petrel: no expert pack or checksum table; checksumming the experts of %s into "
                    "%s\n",
                    model, out);
            progress pr = {"verify", pt_now(), 0, isatty(2)};
            char err[1024];
            if (pt_table_write(m, out, show_progress, &pr, err, sizeof err))
                rc = cli_error("%s", err);
            else
                fprintf(stderr, "petrel: wrote %s in %.1f s\n", out, pt_now() - pr.t0);
        }
    } else {
        progress pr = {"verify", pt_now(), 0, isatty(2)};
        char err[1024];
        uint64_t n_records = 0;
        if (pt_pack_verify(m, path, show_progress, &pr, &n_records, err, sizeof err))
            rc = cli_error("%s", err);
        else
            fprintf(stderr, "petrel: %s is valid (%llu records)\n", path,
                    (unsigned long long)n_records);
    }
    pt_model_close(m);
    return rc;
}
