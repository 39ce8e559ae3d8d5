/* os.c — see os.h. One section per call; each keeps its Linux and macOS branches side by
 * side so that a reader sees what differs. The macOS branches are unverified (no Darwin
 * machine here); the Linux ones are what the test suite runs on x86-64 and, under
 * qemu-aarch64, on arm64. */
#include "os/os.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#if defined(__APPLE__)
#include <mach-o/dyld.h>
#include <mach/mach.h>
#include <sys/resource.h>
#include <sys/sysctl.h>
#endif

/* ===== Direct I/O ===== */

int os_open_read(const char *path) {
    return open(path, O_RDONLY | O_CLOEXEC);
}

int os_open_direct(const char *path) {
#if defined(O_DIRECT)
    return open(path, O_RDONLY | O_DIRECT | O_CLOEXEC);
#elif defined(__APPLE__)
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd >= 0 && fcntl(fd, F_NOCACHE, 1) != 0) {
        int e = errno;
        close(fd);
        errno = e;
        return -1;
    }
    return fd;
#else
    (void)path;
    errno = EINVAL;
    return -1;
#endif
}

/* ===== Sorting with a context ===== */

static void swap_bytes(unsigned char *a, unsigned char *b, size_t size) {
    while (size--) {
        unsigned char t = *a;
        *a++ = *b;
        *b++ = t;
    }
}

/* Sift element i down a max-heap of n elements. */
static void sift(unsigned char *base, size_t i, size_t n, size_t size,
                 int (*cmp)(const void *, const void *, void *), void *ctx) {
    for (;;) {
        size_t big = i, l = 2 * i + 1, r = l + 1;
        if (l < n && cmp(base + l * size, base + big * size, ctx) > 0) big = l;
        if (r < n && cmp(base + r * size, base + big * size, ctx) > 0) big = r;
        if (big == i) return;
        swap_bytes(base + i * size, base + big * size, size);
        i = big;
    }
}

void os_qsort_ctx(void *base, size_t n, size_t size, int (*cmp)(const void *, const void *, void *),
                  void *ctx) {
    unsigned char *b = base;
    if (n < 2) return;
    for (size_t i = n / 2; i-- > 0;)
        sift(b, i, n, size, cmp, ctx);
    for (size_t end = n - 1; end > 0; end--) {
        swap_bytes(b, b + end * size, size);
        sift(b, 0, end, size, cmp, ctx);
    }
}

/* ===== Paths ===== */

void os_fd_path(int fd, char *out, size_t cap) {
#if defined(__linux__)
    char link[64];
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    ssize_t n = readlink(link, out, cap - 1);
    if (n > 0) {
        out[n] = 0;
        return;
    }
#elif defined(__APPLE__)
    char p[MAXPATHLEN];
    if (fcntl(fd, F_GETPATH, p) == 0) {
        snprintf(out, cap, "%s", p);
        return;
    }
#endif
    snprintf(out, cap, "fd %d", fd);
}

int os_exe_path(char *out, size_t cap) {
#if defined(__linux__)
    ssize_t n = readlink("/proc/self/exe", out, cap - 1);
    if (n <= 0) return -1;
    out[n] = 0;
    return 0;
#elif defined(__APPLE__)
    uint32_t size = (uint32_t)cap;
    return _NSGetExecutablePath(out, &size) == 0 ? 0 : -1;
#else
    (void)out;
    (void)cap;
    return -1;
#endif
}

/* ===== Memory ===== */

#if defined(__linux__)
/* Value in kB of a "Key:   N kB" line of a /proc file, as bytes; 0 if absent. */
static uint64_t proc_kb(const char *path, const char *key) {
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    char line[256];
    size_t kl = strlen(key);
    uint64_t v = 0;
    while (fgets(line, sizeof line, f))
        if (!strncmp(line, key, kl) && line[kl] == ':') {
            v = strtoull(line + kl + 1, NULL, 10) * 1024;
            break;
        }
    fclose(f);
    return v;
}
#endif

uint64_t os_mem_available(void) {
#if defined(__linux__)
    return proc_kb("/proc/meminfo", "MemAvailable");
#elif defined(__APPLE__)
    vm_statistics64_data_t vs;
    mach_msg_type_number_t count = HOST_VM_INFO64_COUNT;
    if (host_statistics64(mach_host_self(), HOST_VM_INFO64, (host_info64_t)&vs, &count) !=
        KERN_SUCCESS)
        return 0;
    /* pages the kernel can hand out without swapping: free, inactive (clean file pages
     * among them), purgeable and speculative */
    const uint64_t pages =
        (uint64_t)vs.free_count + vs.inactive_count + vs.purgeable_count + vs.speculative_count;
    return pages * (uint64_t)vm_kernel_page_size;
#else
    return 0;
#endif
}

uint64_t os_mem_total(void) {
#if defined(__linux__)
    return proc_kb("/proc/meminfo", "MemTotal");
#elif defined(__APPLE__)
    uint64_t v = 0;
    size_t len = sizeof v;
    return sysctlbyname("hw.memsize", &v, &len, NULL, 0) == 0 ? v : 0;
#else
    return 0;
#endif
}

uint64_t os_rss(void) {
#if defined(__linux__)
    return proc_kb("/proc/self/status", "VmRSS");
#elif defined(__APPLE__)
    mach_task_basic_info_data_t info;
    mach_msg_type_number_t count = MACH_TASK_BASIC_INFO_COUNT;
    if (task_info(mach_task_self(), MACH_TASK_BASIC_INFO, (task_info_t)&info, &count) !=
        KERN_SUCCESS)
        return 0;
    return info.resident_size;
#else
    return 0;
#endif
}

uint64_t os_peak_rss(void) {
#if defined(__linux__)
    return proc_kb("/proc/self/status", "VmHWM");
#elif defined(__APPLE__)
    struct rusage ru;
    return getrusage(RUSAGE_SELF, &ru) == 0 ? (uint64_t)ru.ru_maxrss : 0; /* bytes on macOS */
#else
    return 0;
#endif
}

size_t os_page_size(void) {
    const long p = sysconf(_SC_PAGESIZE);
    return p > 0 ? (size_t)p : 4096;
}

int os_privatize(void *addr, size_t len, int fd, uint64_t off) {
    if (!len) return 0;
    /* anonymous pages in place of the file's, then the bytes read in large sequential reads
     * (faulting a private file mapping in page by page reads the disk 4 KB at a time) */
    void *m =
        mmap(addr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
    if (m == MAP_FAILED) return -1;
#ifdef MADV_HUGEPAGE
    /* huge pages where the system gives them on request: a decode step streams every
     * resident weight, and with 4 KB pages every page of it is a TLB miss */
    (void)madvise(addr, len, MADV_HUGEPAGE); /* a hint: failure is harmless */
#endif
    size_t done = 0;
    while (done < len) {
        const size_t want = len - done < ((size_t)64 << 20) ? len - done : (size_t)64 << 20;
        const ssize_t got = pread(fd, (uint8_t *)addr + done, want, (off_t)(off + done));
        if (got < 0 && errno == EINTR) continue;
        if (got <= 0) {
            if (got == 0) { /* the range ends in the file's last page: the rest stays zero */
                if (off + done >= (uint64_t)lseek(fd, 0, SEEK_END)) break;
                errno = EIO;
            }
            const int ern = errno;
            /* put the file's pages back: the bytes stay what they were */
            mmap(addr, len, PROT_READ, MAP_SHARED | MAP_FIXED, fd, (off_t)off);
            errno = ern;
            return -1;
        }
        done += (size_t)got;
    }
    return mprotect(addr, len, PROT_READ);
}

/* One loop for the three: off < 0 is the file's position. */
static int io_all(int fd, uint8_t *b, uint64_t n, int64_t off, int write_it) {
    while (n) {
        const size_t c = n > OS_IO_MAX ? OS_IO_MAX : (size_t)n;
        const ssize_t k = write_it ? (off < 0 ? write(fd, b, c) : pwrite(fd, b, c, (off_t)off))
                                   : pread(fd, b, c, (off_t)off);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) {
            if (k == 0) errno = 0;
            return -1;
        }
        b += k, n -= (uint64_t)k;
        if (off >= 0) off += k;
    }
    return 0;
}

int os_write_at(int fd, const void *buf, uint64_t n, uint64_t off) {
    return io_all(fd, (uint8_t *)(uintptr_t)buf, n, (int64_t)off, 1);
}
int os_write_all(int fd, const void *buf, uint64_t n) {
    return io_all(fd, (uint8_t *)(uintptr_t)buf, n, -1, 1);
}
int os_read_at(int fd, void *buf, uint64_t n, uint64_t off) {
    return io_all(fd, buf, n, (int64_t)off, 0);
}

int os_lock(const void *addr, size_t len) {
    return len ? mlock(addr, len) : 0;
}

/* One thread's part of os_populate. */
typedef struct populate_part {
    uint8_t *p;
    size_t n;
} populate_part;

static void *populate_run(void *arg) {
    const populate_part *q = arg;
#if defined(__linux__)
#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23 /* Linux 5.14 */
#endif
    if (madvise(q->p, q->n, MADV_POPULATE_WRITE) == 0 || errno != EINVAL) return NULL;
#endif
    const size_t pg = os_page_size();
    for (size_t o = 0; o < q->n; o += pg) /* the memory is zero: a zero written keeps it so */
        ((volatile uint8_t *)q->p)[o] = 0;
    return NULL;
}

void os_populate(void *addr, size_t len) {
    /* parts of whole 2 MiB pages, one a processor (up to 8): the kernel clears the pages
     * (and a hypervisor backs them) in each part's thread */
    enum { MAX_PARTS = 8 };
    const size_t huge = OS_HUGE_PAGE;
    const long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    int n = cpus < 1 ? 1 : cpus > MAX_PARTS ? MAX_PARTS : (int)cpus;
    if ((size_t)n > len / huge) n = len / huge > 0 ? (int)(len / huge) : 1;
    const size_t step = n > 1 ? (len / (size_t)n + huge - 1) / huge * huge : len;
    populate_part part[MAX_PARTS];
    pthread_t tid[MAX_PARTS];
    int started[MAX_PARTS] = {0};
    for (int i = 0; i < n; i++) {
        const size_t lo = (size_t)i * step < len ? (size_t)i * step : len;
        part[i] =
            (populate_part){(uint8_t *)addr + lo, i == n - 1 || lo + step > len ? len - lo : step};
        if (i > 0 && part[i].n)
            started[i] = pthread_create(&tid[i], NULL, populate_run, &part[i]) == 0;
    }
    for (int i = 0; i < n; i++) /* this thread: part 0, and any part whose thread did not start */
        if ((i == 0 || !started[i]) && part[i].n) populate_run(&part[i]);
    for (int i = 1; i < n; i++)
        if (started[i]) pthread_join(tid[i], NULL);
}
