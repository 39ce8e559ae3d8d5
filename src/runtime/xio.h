/* xio.h — asynchronous positioned reads for the expert cache.
 *
 * Two back-ends behind one interface: io_uring (Linux; all reads of a layer go
 * to the kernel in one submission) and a pool of pread worker threads
 * (everywhere). The caller submits reads (fd, offset, length, destination,
 * tag), then collects completions one at a time in whatever order the device
 * finishes them. A read completes only when every byte has arrived: short
 * reads are continued, EINTR/EAGAIN retried, EIO retried a few times and then
 * reported with the tag — never silently returned as data.
 *
 * One thread at a time submits and waits (MoE threads that share the expert
 * store call it under a lock: nn/moe.c).
 *
 * Tests inject faults through xio_set_fault_hook (EIO, short reads, wrong
 * bytes: tests/test_faults.c); nothing else sets it, and the library never
 * reads the environment for it.
 */
#ifndef PT_RUNTIME_XIO_H
#define PT_RUNTIME_XIO_H

#include <stdint.h>

#include "common.h"

enum { XIO_AUTO = 0, XIO_URING = 1, XIO_PREAD = 2 };

typedef struct xio xio;

/* Open a reader able to hold `depth` reads in flight. backend XIO_AUTO picks
 * io_uring when the kernel allows it, else the pread pool; an explicitly
 * requested back-end that cannot be used is an error. */
xio *xio_open(int backend, int depth, pt_err *err);
void xio_close(xio *x);

/* XIO_URING or XIO_PREAD. */
int xio_backend(const xio *x);
const char *xio_backend_name(int backend);

/* Queue a read of len bytes at off of fd into dst, of which the first `need`
 * bytes must exist (an O_DIRECT read is rounded up to whole blocks and may
 * run past the end of the file; reaching EOF before `need` bytes is an error).
 * Returns 0, or -1 when `depth` reads are already in flight. Reads are handed
 * to the device at the latest by the next xio_wait. */
int xio_submit(xio *x, int fd, uint64_t off, uint64_t len, uint64_t need, void *dst, uint64_t tag);

/* Hand queued reads to the device now. */
void xio_kick(xio *x);

/* Reads submitted and not yet collected. */
int xio_inflight(const xio *x);

/* Block until one read completes; *tag receives its tag. Returns 0 when all
 * bytes were read, or -1 with err naming the failure (the tag is still set). */
int xio_wait(xio *x, uint64_t *tag, pt_err *err);

/* ===== Fault injection (tests only) =====
 *
 * When a hook is set, the result of every read the device completes, in both
 * back-ends, passes through it before xio acts on it: res is the byte count
 * the device returned (>= 0) or -errno, dst/len the bytes that read was asked
 * to fill (the first res of them are the data), off its file offset. The hook
 * returns the result xio should see: -EIO for an I/O error, a smaller count
 * for a short read (xio continues from there), res unchanged after altering
 * dst for wrong bytes. It may be called from several threads at once (the
 * pread pool). Set or clear it only while no reader has reads in flight;
 * NULL (the default) disables it. */
typedef long (*xio_fault_fn)(void *user, int fd, uint64_t off, uint8_t *dst, uint64_t len,
                             long res);
void xio_set_fault_hook(xio_fault_fn fn, void *user);

#endif
