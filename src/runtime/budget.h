/* budget.h — how much memory petrel may use: the memory policy in one place.
 *
 * The budget is --ram when given; otherwise what the machine can spare now:
 * MemAvailable from /proc/meminfo, capped by the cgroup (v2 memory.max, v1
 * memory.limit_in_bytes) minus what the cgroup already uses — page cache
 * counts against a cgroup limit, which is why streamed experts bypass it.
 * The engine subtracts resident tensors, KV cache, scratch and a safety margin
 * and turns what remains into expert-cache slots.
 */
#ifndef PT_RUNTIME_BUDGET_H
#define PT_RUNTIME_BUDGET_H

#include <stdint.h>

/* Bytes of memory available to this process now (0 when unknown). */
uint64_t mem_available(void);

/* The cgroup memory limit of this process (v2 or v1), or 0 when none. */
uint64_t mem_cgroup_limit(void);

/* Resident set size of this process now, and its peak, in bytes (0 when unknown). */
uint64_t mem_rss(void);
uint64_t mem_peak_rss(void);

#endif
