/* os.h — the operating-system calls petrel needs that POSIX does not give the same way
 * everywhere: Linux (the tested platform, x86-64 and arm64) and macOS (written from
 * Apple's documentation, compiled and run on no Darwin machine: unverified).
 *
 * Non-goals: Windows; anything POSIX already makes portable.
 */
#ifndef PT_OS_H
#define PT_OS_H

#include <stddef.h>
#include <stdint.h>

/* The alignment of O_DIRECT reads (offsets, lengths and buffers) where the file system does
 * not say (statx's STATX_DIOALIGN): every Linux file system's logical block size divides
 * 4 KiB. Not the page size (os_page_size), though it is one on x86-64: a block is the file
 * system's unit, a page the memory's. */
#define OS_DIRECT_ALIGN 4096

/* The most bytes one read or write call is given (a loop issues the rest): Linux moves at
 * most 0x7ffff000 bytes a call, and an io_uring read's length is 32 bits. */
#define OS_IO_MAX (1u << 30)

/* open(path, O_RDONLY | O_CLOEXEC) bypassing the page cache: O_DIRECT on Linux (the
 * caller's reads must then be aligned: offsets, lengths and buffers to OS_DIRECT_ALIGN), F_NOCACHE
 * on macOS (no alignment rule). Returns the fd, or -1 with errno set (Linux: EINVAL on a
 * file system without O_DIRECT; the caller falls back to os_open_read). */
int os_open_direct(const char *path);
int os_open_read(const char *path);

/* Sort n elements of `size` bytes with cmp(a, b, ctx) (glibc's qsort_r argument order).
 * Portable (a heap sort: no recursion, no allocation, O(n log n)); not stable. */
void os_qsort_ctx(void *base, size_t n, size_t size, int (*cmp)(const void *, const void *, void *),
                  void *ctx);

/* The path of the open file fd into out (cap bytes): /proc/self/fd on Linux,
 * F_GETPATH on macOS; "fd N" when neither answers. */
void os_fd_path(int fd, char *out, size_t cap);

/* The running executable's path into out (cap bytes). Returns 0, or -1 when unknown. */
int os_exe_path(char *out, size_t cap);

/* Memory, in bytes (0: unknown). os_mem_available: what the system could give this process
 * now (Linux: MemAvailable; macOS: free + inactive + purgeable + speculative pages from
 * host_statistics64). os_mem_total: physical memory (Linux: MemTotal; macOS: hw.memsize).
 * os_rss / os_peak_rss: this process's resident set now and at its peak. Limits of a
 * cgroup (Linux only) are budget.c's business. */
uint64_t os_mem_available(void);
uint64_t os_mem_total(void);
uint64_t os_rss(void);
uint64_t os_peak_rss(void);

/* Turn [addr, addr + len) of a read-only shared file mapping of fd (which starts at file
 * offset off) into private anonymous memory holding the same bytes, at the same address:
 * anonymous pages are mapped over the range (MAP_FIXED) and the bytes read into them with
 * large sequential reads, then the range is made read-only. Pointers into it stay valid; the
 * page cache no longer backs it, so reclaim of file pages cannot take it away. addr and off
 * must be page-aligned, and no other thread may read the range meanwhile. Returns 0, or -1
 * with errno set (the file's pages are mapped back: the bytes are the same either way). */
int os_privatize(void *addr, size_t len, int fd, uint64_t off);
/* All n bytes of buf written to fd at offset off (os_write_at), at the file's position
 * (os_write_all), or read from fd at off into buf (os_read_at): calls of at most OS_IO_MAX
 * bytes, retried on EINTR. 0, or -1 with errno (0 when a call moved no byte: the file ended,
 * the disk is full). */
int os_write_at(int fd, const void *buf, uint64_t n, uint64_t off);
int os_write_all(int fd, const void *buf, uint64_t n);
int os_read_at(int fd, void *buf, uint64_t n, uint64_t off);
/* Lock [addr, addr + len) in RAM (mlock). Returns 0, or -1 with errno set (EPERM / ENOMEM:
 * RLIMIT_MEMLOCK; the caller says so). */
int os_lock(const void *addr, size_t len);
/* The page size (sysconf; 4 KiB where it does not answer): the unit of mappings, madvise and
 * mincore. */
size_t os_page_size(void);
/* The huge-page size on x86-64 and most arm64 kernels: what arenas align to and populate in. */
#define OS_HUGE_PAGE ((size_t)2 << 20)
/* Back [addr, addr + len) of fresh anonymous memory with pages now (Linux:
 * MADV_POPULATE_WRITE; elsewhere, or on a kernel before 5.14, one write a page), so no
 * later access faults it in; in parts of whole 2 MiB pages, one thread each, up to one a
 * processor (at most 8). Where the kernel cannot (out of memory), the pages stay to be
 * faulted in as they are used, as without this. */
void os_populate(void *addr, size_t len);

#endif
