/* xio.c — io_uring and pread-pool back-ends of the async reader (see xio.h).
 *
 * Both keep a fixed table of `depth` request records allocated at open; a
 * request's index is what travels through the kernel (io_uring user_data) or
 * the worker queues, so nothing is allocated per read.
 */
#include "xio.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "os/os.h"

#ifdef PT_HAVE_URING
#include <liburing.h>
#endif

#define XIO_EIO_RETRIES 3
#define XIO_POOL_THREADS 8 /* enough to keep an NVMe queue busy with ~4-12 MB reads */

typedef struct xreq {
    int fd;
    uint64_t off, len, done; /* bytes requested / read so far */
    uint64_t need;           /* bytes that must exist before end of file */
    uint8_t *dst;
    uint64_t tag;
    int eio_retries;
    int err; /* errno of a failed read, 0 on success */
} xreq;

struct xio {
    int backend;
    int depth;
    xreq *req;      /* [depth] */
    int *free_list; /* [depth] stack of free request indices */
    int n_free;
    int inflight;
#ifdef PT_HAVE_URING
    struct io_uring ring;
    int ring_ok;
    int async; /* reads flagged IOSQE_ASYNC (cleared if the kernel refuses the flag) */
    int unsubmitted;
#endif
    /* pread pool */
    pthread_t threads[XIO_POOL_THREADS];
    int n_threads;
    pthread_mutex_t mu;
    pthread_cond_t work, done_cv;
    int *todo, todo_head, todo_n; /* ring of request indices to read */
    int *done, done_head, done_n; /* ring of finished request indices */
    int stop;
};

/* The test hook (see xio.h): read by reader threads, written only while no
 * read is in flight, so a plain pointer suffices. */
static xio_fault_fn fault_fn;
static void *fault_user;

void xio_set_fault_hook(xio_fault_fn fn, void *user) {
    fault_fn = fn;
    fault_user = user;
}

const char *xio_backend_name(int backend) {
    return backend == XIO_URING ? "io_uring" : backend == XIO_PREAD ? "pread" : "auto";
}

int xio_backend(const xio *x) {
    return x->backend;
}
int xio_inflight(const xio *x) {
    return x->inflight;
}

/* ===== pread pool ===== */

/* Read all of r; returns 0 or an errno. */
static int read_fully(xreq *r) {
    while (r->done < r->len) {
        ssize_t k = pread(r->fd, r->dst + r->done, r->len - r->done, (off_t)(r->off + r->done));
        if (fault_fn) {
            long res = fault_fn(fault_user, r->fd, r->off + r->done, r->dst + r->done,
                                r->len - r->done, k < 0 ? -(long)errno : (long)k);
            k = res < 0 ? -1 : (ssize_t)res;
            if (res < 0) errno = (int)-res;
        }
        if (k > 0) {
            r->done += (uint64_t)k;
            continue;
        }
        if (k == 0) return r->done >= r->need ? 0 : ENODATA; /* EOF: fine past `need` */
        if (errno == EINTR || errno == EAGAIN) continue;
        if (errno == EIO && r->eio_retries++ < XIO_EIO_RETRIES) continue;
        return errno;
    }
    return 0;
}

static void *pool_worker(void *arg) {
    xio *x = arg;
    pthread_mutex_lock(&x->mu);
    for (;;) {
        while (!x->todo_n && !x->stop)
            pthread_cond_wait(&x->work, &x->mu);
        if (x->stop) break;
        int i = x->todo[x->todo_head];
        x->todo_head = (x->todo_head + 1) % x->depth;
        x->todo_n--;
        pthread_mutex_unlock(&x->mu);
        x->req[i].err = read_fully(&x->req[i]);
        pthread_mutex_lock(&x->mu);
        x->done[(x->done_head + x->done_n) % x->depth] = i;
        x->done_n++;
        pthread_cond_signal(&x->done_cv);
    }
    pthread_mutex_unlock(&x->mu);
    return NULL;
}

static int pool_start(xio *x, pt_err *err) {
    x->todo = calloc((size_t)x->depth, sizeof(int));
    x->done = calloc((size_t)x->depth, sizeof(int));
    if (!x->todo || !x->done) return pt_errf(err, "out of memory");
    pthread_mutex_init(&x->mu, NULL);
    pthread_cond_init(&x->work, NULL);
    pthread_cond_init(&x->done_cv, NULL);
    for (int i = 0; i < XIO_POOL_THREADS; i++) {
        if (pthread_create(&x->threads[i], NULL, pool_worker, x) != 0) break;
        x->n_threads++;
    }
    if (!x->n_threads) return pt_errf(err, "cannot start I/O threads");
    return 0;
}

/* ===== io_uring ===== */

#ifdef PT_HAVE_URING
static void uring_queue(xio *x, int i) {
    xreq *r = &x->req[i];
    struct io_uring_sqe *sqe = io_uring_get_sqe(&x->ring);
    if (!sqe) { /* ring full of unsubmitted entries: hand them over first */
        io_uring_submit(&x->ring);
        x->unsubmitted = 0;
        sqe = io_uring_get_sqe(&x->ring);
    }
    uint64_t n = r->len - r->done;
    if (n > OS_IO_MAX) n = OS_IO_MAX;
    io_uring_prep_read(sqe, r->fd, r->dst + r->done, (unsigned)n, r->off + r->done);
    io_uring_sqe_set_data64(sqe, (uint64_t)i);
    /* issued from the kernel's worker threads, not inline in io_uring_enter: an O_DIRECT read
     * pins its destination pages while it is issued, and the first read into expert cache
     * memory also faults those pages in (zeroing them) -- work the submitting compute thread
     * did while the other threads waited for it (a 2048-token prompt under --ram 4: 49.0-56.2
     * inline, 53.2-61.8 tok/s issued by the workers, alternated; decode the same) */
    if (x->async) sqe->flags |= IOSQE_ASYNC;
    x->unsubmitted++;
}
#endif

/* ===== Common ===== */

xio *xio_open(int backend, int depth, pt_err *err) {
    if (depth < 1) depth = 1;
    xio *x = calloc(1, sizeof *x);
    if (!x) {
        pt_errf(err, "out of memory");
        return NULL;
    }
    x->depth = depth;
    x->req = calloc((size_t)depth, sizeof(xreq));
    x->free_list = calloc((size_t)depth, sizeof(int));
    if (!x->req || !x->free_list) {
        pt_errf(err, "out of memory");
        xio_close(x);
        return NULL;
    }
    for (int i = 0; i < depth; i++)
        x->free_list[i] = depth - 1 - i;
    x->n_free = depth;
    if (backend == XIO_AUTO || backend == XIO_URING) {
#ifdef PT_HAVE_URING
        unsigned entries = 1;
        while ((int)entries < depth && entries < 4096)
            entries <<= 1;
        int rc = io_uring_queue_init(entries, &x->ring, 0);
        if (rc == 0) {
            x->ring_ok = 1;
            x->async = 1;
            x->backend = XIO_URING;
            return x;
        }
        if (backend == XIO_URING) {
            pt_errf(err, "io_uring is not available here (%s); use --io pread", strerror(-rc));
            xio_close(x);
            return NULL;
        }
#else
        if (backend == XIO_URING) {
            pt_errf(err, "this build of petrel has no io_uring support; use --io pread");
            xio_close(x);
            return NULL;
        }
#endif
    }
    x->backend = XIO_PREAD;
    if (pool_start(x, err)) {
        xio_close(x);
        return NULL;
    }
    return x;
}

void xio_close(xio *x) {
    if (!x) return;
    if (x->n_threads) {
        pthread_mutex_lock(&x->mu);
        x->stop = 1;
        pthread_cond_broadcast(&x->work);
        pthread_mutex_unlock(&x->mu);
        for (int i = 0; i < x->n_threads; i++)
            pthread_join(x->threads[i], NULL);
        pthread_mutex_destroy(&x->mu);
        pthread_cond_destroy(&x->work);
        pthread_cond_destroy(&x->done_cv);
    }
#ifdef PT_HAVE_URING
    if (x->ring_ok) io_uring_queue_exit(&x->ring);
#endif
    free(x->todo);
    free(x->done);
    free(x->req);
    free(x->free_list);
    free(x);
}

int xio_submit(xio *x, int fd, uint64_t off, uint64_t len, uint64_t need, void *dst, uint64_t tag) {
    if (!x->n_free) return -1;
    int i = x->free_list[--x->n_free];
    x->req[i] = (xreq){.fd = fd, .off = off, .len = len, .need = need, .dst = dst, .tag = tag};
    x->inflight++;
#ifdef PT_HAVE_URING
    if (x->backend == XIO_URING) {
        uring_queue(x, i);
        return 0;
    }
#endif
    pthread_mutex_lock(&x->mu);
    x->todo[(x->todo_head + x->todo_n) % x->depth] = i;
    x->todo_n++;
    pthread_cond_signal(&x->work);
    pthread_mutex_unlock(&x->mu);
    return 0;
}

void xio_kick(xio *x) {
#ifdef PT_HAVE_URING
    if (x->backend == XIO_URING && x->unsubmitted) {
        io_uring_submit(&x->ring);
        x->unsubmitted = 0;
    }
#else
    (void)x;
#endif
}

/* The file behind fd for an error message (os_fd_path: /proc/self/fd, F_GETPATH). */
static void fd_name(int fd, char *out, size_t cap) {
    os_fd_path(fd, out, cap);
}

static int finish(xio *x, int i, uint64_t *tag, pt_err *err) {
    xreq *r = &x->req[i];
    *tag = r->tag;
    x->free_list[x->n_free++] = i;
    x->inflight--;
    if (r->err) {
        char name[1024];
        fd_name(r->fd, name, sizeof name);
        return pt_errf(err, "%s: read of %llu bytes at offset %llu failed after %llu bytes: %s",
                       name, (unsigned long long)r->len, (unsigned long long)r->off,
                       (unsigned long long)r->done,
                       r->err == ENODATA ? "unexpected end of file" : strerror(r->err));
    }
    return 0;
}

int xio_wait(xio *x, uint64_t *tag, pt_err *err) {
    if (!x->inflight) return pt_errf(err, "no read in flight");
#ifdef PT_HAVE_URING
    if (x->backend == XIO_URING) {
        xio_kick(x);
        for (;;) {
            struct io_uring_cqe *cqe;
            int rc = io_uring_wait_cqe(&x->ring, &cqe);
            if (rc == -EINTR) continue;
            if (rc < 0) return pt_errf(err, "io_uring wait failed: %s", strerror(-rc));
            int i = (int)io_uring_cqe_get_data64(cqe);
            int res = cqe->res;
            io_uring_cqe_seen(&x->ring, cqe);
            xreq *r = &x->req[i];
            if (fault_fn) {
                uint64_t n = r->len - r->done; /* what uring_queue asked for */
                if (n > OS_IO_MAX) n = OS_IO_MAX;
                res = (int)fault_fn(fault_user, r->fd, r->off + r->done, r->dst + r->done, n, res);
            }
            if (res > 0) {
                r->done += (uint64_t)res;
                if (r->done < r->len) { /* short read: continue where it stopped */
                    uring_queue(x, i);
                    xio_kick(x);
                    continue;
                }
            } else if (res == 0) {
                r->err = r->done >= r->need ? 0 : ENODATA;
            } else if (res == -EINTR || res == -EAGAIN || (res == -EINVAL && x->async) ||
                       (res == -EIO && r->eio_retries++ < XIO_EIO_RETRIES)) {
                if (res == -EINVAL) x->async = 0; /* a kernel before 5.6: no IOSQE_ASYNC */
                uring_queue(x, i);
                xio_kick(x);
                continue;
            } else {
                r->err = -res;
            }
            return finish(x, i, tag, err);
        }
    }
#endif
    pthread_mutex_lock(&x->mu);
    while (!x->done_n)
        pthread_cond_wait(&x->done_cv, &x->mu);
    int i = x->done[x->done_head];
    x->done_head = (x->done_head + 1) % x->depth;
    x->done_n--;
    pthread_mutex_unlock(&x->mu);
    return finish(x, i, tag, err);
}
