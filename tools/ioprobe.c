/* ioprobe.c — measures the disk read bandwidth a file gives with O_DIRECT, as
 * the streaming benchmark's yardstick (bench/stream.sh): sequential or random
 * block reads by N threads in parallel (N reads in flight, like petrel's
 * expert misses of one layer), bypassing the page cache.
 *
 *   build/ioprobe FILE [-t THREADS] [-b BLOCK_KIB] [-s SECONDS] [--random] [--seed N]
 *
 * Sequential: thread i reads blocks i, i+N, i+2N ... from a random start, so
 * the device sees one forward stream N blocks deep. Random: each read goes to
 * a random block-aligned offset (like expert records scattered over the file).
 * Prints one line: "ioprobe: MODE, T threads, B KiB blocks: X.XX GB/s (N reads
 * in S s, mean latency L ms)". GB = 1e9 bytes.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

typedef struct probe {
    int fd;
    uint64_t block, n_blocks, start;
    int random, n_threads, id;
    double deadline;
    uint64_t seed;
    /* results */
    uint64_t bytes, reads;
    double lat_sum;
    int err;
} probe;

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static uint64_t xs(uint64_t *s) {
    *s ^= *s >> 12;
    *s ^= *s << 25;
    *s ^= *s >> 27;
    return *s * 0x2545F4914F6CDD1DULL;
}

static void *run(void *arg) {
    probe *p = arg;
    void *buf;
    if (posix_memalign(&buf, 4096, p->block)) {
        p->err = ENOMEM;
        return NULL;
    }
    uint64_t s = p->seed * 0x9E3779B97F4A7C15ULL + (uint64_t)p->id + 1;
    uint64_t k = (p->start + (uint64_t)p->id) % p->n_blocks;
    while (now_s() < p->deadline) {
        uint64_t b = p->random ? xs(&s) % p->n_blocks : k;
        k = (k + (uint64_t)p->n_threads) % p->n_blocks;
        double t0 = now_s();
        ssize_t r = pread(p->fd, buf, p->block, (off_t)(b * p->block));
        if (r < 0) {
            if (errno == EINTR) continue;
            p->err = errno;
            break;
        }
        p->lat_sum += now_s() - t0;
        p->bytes += (uint64_t)r;
        p->reads++;
    }
    free(buf);
    return NULL;
}

int main(int argc, char **argv) {
    const char *path = NULL;
    int threads = 1, random = 0;
    uint64_t block_kib = 4096, seed = 1;
    double seconds = 5;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--random"))
            random = 1;
        else if (!strcmp(a, "-t") && v)
            threads = atoi(argv[++i]);
        else if (!strcmp(a, "-b") && v)
            block_kib = strtoull(argv[++i], NULL, 10);
        else if (!strcmp(a, "-s") && v)
            seconds = atof(argv[++i]);
        else if (!strcmp(a, "--seed") && v)
            seed = strtoull(argv[++i], NULL, 10);
        else if (a[0] != '-' && !path)
            path = a;
        else {
            fprintf(stderr, "usage: ioprobe FILE [-t THREADS] [-b BLOCK_KIB] [-s SECONDS] "
                            "[--random] [--seed N]\n");
            return 2;
        }
    }
    if (!path || threads < 1 || threads > 256 || !block_kib || seconds <= 0) {
        fprintf(
            stderr,
            "usage: ioprobe FILE [-t THREADS] [-b BLOCK_KIB] [-s SECONDS] [--random] [--seed N]\n");
        return 2;
    }
    int fd = open(path, O_RDONLY | O_DIRECT | O_CLOEXEC);
    if (fd < 0) {
        fprintf(stderr, "ioprobe: %s: cannot open with O_DIRECT: %s\n", path, strerror(errno));
        return 1;
    }
    struct stat st;
    fstat(fd, &st);
    const uint64_t block = block_kib * 1024, n_blocks = (uint64_t)st.st_size / block;
    if (n_blocks < 1) {
        fprintf(stderr, "ioprobe: %s: smaller than one block\n", path);
        return 1;
    }
    probe *p = calloc((size_t)threads, sizeof *p);
    pthread_t *th = calloc((size_t)threads, sizeof *th);
    uint64_t s = seed;
    const uint64_t start = xs(&s) % n_blocks;
    const double t0 = now_s(), deadline = t0 + seconds;
    for (int i = 0; i < threads; i++) {
        p[i] = (probe){.fd = fd,
                       .block = block,
                       .n_blocks = n_blocks,
                       .start = start,
                       .random = random,
                       .n_threads = threads,
                       .id = i,
                       .deadline = deadline,
                       .seed = seed};
        pthread_create(&th[i], NULL, run, &p[i]);
    }
    uint64_t bytes = 0, reads = 0;
    double lat = 0;
    for (int i = 0; i < threads; i++) {
        pthread_join(th[i], NULL);
        if (p[i].err) {
            fprintf(stderr, "ioprobe: %s: read failed: %s\n", path, strerror(p[i].err));
            return 1;
        }
        bytes += p[i].bytes;
        reads += p[i].reads;
        lat += p[i].lat_sum;
    }
    const double dt = now_s() - t0;
    printf("ioprobe: %s, %d threads, %llu KiB blocks: %.2f GB/s (%llu reads in %.1f s, mean "
           "latency %.2f ms)\n",
           random ? "random" : "sequential", threads, (unsigned long long)block_kib,
           bytes / dt / 1e9, (unsigned long long)reads, dt,
           reads ? 1e3 * lat / (double)reads : 0.0);
    close(fd);
    free(p);
    free(th);
    return 0;
}
