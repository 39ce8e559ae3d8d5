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
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
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
    char dir[PATH_MAX];
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    if (slash)
        *slash = 0;
    else
        snprintf(dir, sizeof dir, ".");
    return access(dir, W_OK) == 0;
}

static int mkdirs(const char *file_path) {
    char p[PATH_MAX];
    snprintf(p, sizeof p, "%s", file_path);
    for (char *s = p + 1; *s; s++)
        if (*s == '/') {
            *s = 0;
            if (mkdir(p, 0755) != 0 && errno != EEXIST) return -1;
            *s = '/';
        }
    return 0;
}

static pt_model *open_model(const char *path) {
    char err[1024];
    pt_model *m = pt_model_open(path, err, sizeof err);
    if (!m) cli_error("%s", err);
    return m;
}

int cmd_pack(int argc, char **argv) {
    const char *model = NULL, *out = NULL;
    long long stop_after = -1;
    int table_only = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            printf("usage: petrel pack MODEL.gguf [-o PATH] [--table-only]\n"
                   "  Write every routed expert as one 4 KiB-aligned record into an expert pack\n"
                   "  (default MODEL.gguf.xpack, or the cache directory when that folder is "
                   "read-only).\n"
                   "  An interrupted run resumes where it stopped.\n"
                   "  --table-only     write only the checksum table (MODEL.gguf.xsums): "
                   "streamed reads\n"
                   "                   of the GGUF are then checked without a pack\n"
                   "  --stop-after K   stop after K records as if killed (for tests)\n");
            return CLI_OK;
        } else if (!strcmp(argv[i], "-o") && i + 1 < argc) {
            out = argv[++i];
        } else if (!strcmp(argv[i], "--table-only")) {
            table_only = 1;
        } else if (!strcmp(argv[i], "--stop-after") && i + 1 < argc) {
            stop_after = atoll(argv[++i]);
        } else if (argv[i][0] != '-' && !model) {
            model = argv[i];
        } else {
            fprintf(
                stderr,
                "petrel pack: unexpected argument '%s'\nusage: petrel pack MODEL.gguf [-o PATH]\n",
                argv[i]);
            return CLI_USAGE;
        }
    }
    if (!model) {
        fprintf(stderr, "usage: petrel pack MODEL.gguf [-o PATH]\n");
        return CLI_USAGE;
    }
    pt_model *m = open_model(model);
    if (!m) return CLI_ERROR;
    char cand[2][4096];
    int nc = table_only ? pt_table_candidates(m, cli_cache_dir(), cand)
                        : pt_pack_candidates(m, cli_cache_dir(), cand);
    const char *path = out ? out : writable_dir_of(cand[0]) || nc < 2 ? cand[0] : cand[1];
    if (!out && path == cand[1] && mkdirs(path) != 0) {
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
        char partial[PATH_MAX + 16];
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
    const char *model = NULL, *pack = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            printf("usage: petrel verify MODEL.gguf [--pack PATH]\n"
                   "  Check the model's expert pack (without one, its checksum table from pack "
                   "--table-only):\n"
                   "  header, the model's size, header, mtime and inode,\n"
                   "  every record's checksum and bytes against the model's (a full read of "
                   "both).\n"
                   "  With neither, write the checksum table (MODEL.gguf.xsums) from a full "
                   "read of the model,\n"
                   "  so that streamed reads of the GGUF are checked from then on.\n"
                   "  Exit 0 when valid (or the table was written), 1 when stale or corrupt.\n");
            return CLI_OK;
        } else if (!strcmp(argv[i], "--pack") && i + 1 < argc) {
            pack = argv[++i];
        } else if (argv[i][0] != '-' && !model) {
            model = argv[i];
        } else {
            fprintf(stderr,
                    "petrel verify: unexpected argument '%s'\nusage: petrel verify MODEL.gguf "
                    "[--pack PATH]\n",
                    argv[i]);
            return CLI_USAGE;
        }
    }
    if (!model) {
        fprintf(stderr, "usage: petrel verify MODEL.gguf [--pack PATH]\n");
        return CLI_USAGE;
    }
    pt_model *m = open_model(model);
    if (!m) return CLI_ERROR;
    char cand[4][4096];
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
        char tab[2][4096];
        const int nt = pt_table_candidates(m, cli_cache_dir(), tab);
        const char *out = writable_dir_of(tab[0]) || nt < 2 ? tab[0] : tab[1];
        if (out == tab[1] && mkdirs(out) != 0) {
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
