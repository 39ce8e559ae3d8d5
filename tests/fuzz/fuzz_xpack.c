/* fuzz_xpack.c — libFuzzer target for the expert-pack reader: xpack_open (and,
 * when it accepts a file, xpack_verify) on arbitrary bytes against a fixture
 * model (tests/fixtures/glm-dsa-rq2k.gguf). Built and run by `make fuzz` /
 * `make fuzz-ci` (clang, ASan, UBSan) from the repository root.
 *
 * The reader checks the header byte for byte against the layout the model
 * implies, so raw bytes alone rarely get past it; the target therefore also
 * lays the input over a real pack of the model (written once at start-up into
 * a temporary file). Byte 0 picks the mode:
 *   0: the file is the input;
 *   1: the input overwrites the real pack from offset 0;
 *   2: as 1, then the file is cut at the length in input bytes 1-4 (mod size);
 *   3: input bytes 1-4 are an offset (mod size), the rest overwrite from there.
 * Every outcome must be a usable pack or a clear error; a crash, overread,
 * leak or a pack accepted whose records then fail to read is a bug.
 */
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "format/gguf.h"
#include "format/xpack.h"
#include "model/info.h"

static const char MODEL[] = "tests/fixtures/glm-dsa-rq2k.gguf";

static gguf_ctx *g;
static xp_layer_desc *desc;
static int n_layers;
static uint8_t *good; /* the real pack */
static size_t good_len;

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    pt_err err = {{0}};
    char tmp[] = "/tmp/fuzz-xpack-XXXXXX";
    int fd = mkstemp(tmp);
    g = gguf_open(MODEL, &err);
    if (fd < 0 || !g || model_expert_layers(g, &desc, &n_layers, &err) ||
        xpack_write(g, desc, n_layers, tmp, 0, NULL, NULL, -1, &err)) {
        fprintf(stderr, "fuzz_xpack: %s (run from the repository root)\n", err.msg);
        exit(1);
    }
    close(fd);
    FILE *f = fopen(tmp, "rb");
    fseek(f, 0, SEEK_END);
    good_len = (size_t)ftell(f);
    rewind(f);
    good = malloc(good_len);
    if (fread(good, 1, good_len, f) != good_len) exit(1);
    fclose(f);
    unlink(tmp);
    return 0;
}

static uint32_t get32(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    const int mode = data[0] & 3;
    data++, size--;
    int fd = memfd_create("fuzz.xpack", 0);
    if (fd < 0) return 0;
    if (mode == 0) {
        if (size && write(fd, data, size) != (ssize_t)size) abort();
    } else {
        size_t at = 0, len = good_len;
        if (mode >= 2 && size >= 4) {
            uint32_t v = get32(data);
            data += 4, size -= 4;
            if (mode == 2)
                len = v % (good_len + 1);
            else
                at = v % good_len;
        }
        if (write(fd, good, len) != (ssize_t)len) abort();
        size_t n = size < len - PT_MIN(at, len) ? size : len - PT_MIN(at, len);
        if (n && pwrite(fd, data, n, (off_t)at) != (ssize_t)n) abort();
    }
    char path[64];
    snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    pt_err err = {{0}};
    xpack *p = xpack_open(path, g, desc, n_layers, &err);
    if (p) {
        for (uint32_t l = 0; l < p->n_layers; l++)
            if (xpack_record_offset(p, (int)l, (int)p->layers[l].n_expert - 1) +
                    p->layers[l].record_bytes >
                p->size)
                abort(); /* an accepted pack's records lie inside the file */
        xpack_verify(p, g, desc, NULL, NULL, &err);
        xpack_close(p);
    }
    close(fd);
    return 0;
}
