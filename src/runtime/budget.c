/* budget.c — memory available to petrel: what the system can give (os/os.h: /proc/meminfo
 * on Linux, host_statistics64 on macOS), capped by the cgroup's limit (Linux only; macOS
 * has none). See budget.h. */
#include "budget.h"

#include "os/os.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* First number in a file, or 0 ("max" and missing files give 0). */
static uint64_t read_u64(const char *path) {
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    char buf[64] = "";
    uint64_t v = 0;
    if (fgets(buf, sizeof buf, f) && buf[0] >= '0' && buf[0] <= '9') v = strtoull(buf, NULL, 10);
    fclose(f);
    return v;
}

/* The cgroup directory of this process under the v2 or v1 memory hierarchy. */
static int cgroup_paths(char *v2, size_t n2, char *v1, size_t n1) {
#if !defined(__linux__)
    v2[0] = v1[0] = 0;
    return -1; /* cgroups are Linux's */
#endif
    FILE *f = fopen("/proc/self/cgroup", "r");
    v2[0] = v1[0] = 0;
    if (!f) return -1;
    char line[1024];
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = 0;
        char *a = strchr(line, ':');
        char *b = a ? strchr(a + 1, ':') : NULL;
        if (!b) continue;
        *a = 0;
        *b = 0;
        if (!strcmp(line, "0") && a[1] == 0)
            snprintf(v2, n2, "/sys/fs/cgroup%s", b + 1);
        else if (strstr(a + 1, "memory"))
            snprintf(v1, n1, "/sys/fs/cgroup/memory%s", b + 1);
    }
    fclose(f);
    return 0;
}

static uint64_t cgroup_limit_and_usage(uint64_t *usage) {
    char v2[600], v1[600], p[700];
    *usage = 0;
    if (cgroup_paths(v2, sizeof v2, v1, sizeof v1)) return 0;
    if (v1[0]) {
        snprintf(p, sizeof p, "%s/memory.limit_in_bytes", v1);
        uint64_t lim = read_u64(p);
        if (lim && lim < (1ull << 60)) { /* "no limit" is a huge number in v1 */
            snprintf(p, sizeof p, "%s/memory.usage_in_bytes", v1);
            *usage = read_u64(p);
            return lim;
        }
    }
    if (v2[0]) {
        snprintf(p, sizeof p, "%s/memory.max", v2);
        uint64_t lim = read_u64(p);
        if (lim) {
            snprintf(p, sizeof p, "%s/memory.current", v2);
            *usage = read_u64(p);
            return lim;
        }
    }
    return 0;
}

uint64_t mem_cgroup_limit(void) {
    uint64_t usage;
    return cgroup_limit_and_usage(&usage);
}

uint64_t mem_available(void) {
    uint64_t avail = os_mem_available();
    uint64_t usage, lim = cgroup_limit_and_usage(&usage);
    if (lim) {
        /* the process itself is inside the usage already; what is left is ours */
        uint64_t left = lim > usage ? lim - usage : 0;
        left += mem_rss(); /* the budget covers what we already hold */
        if (!avail || left < avail) avail = left;
    }
    return avail;
}

uint64_t mem_rss(void) {
    return os_rss();
}
uint64_t mem_peak_rss(void) {
    return os_peak_rss();
}
