/* dod/_os.h: anonymous memory from the operating system.
 *
 * Fresh anonymous pages read as zero (ZII for free) and cost nothing until
 * touched. Sizes are rounded up to the page size by the kernel; callers pass
 * the same size to unmap that they passed to map.
 */
#ifndef DOD_OS_H
#define DOD_OS_H

#include <stddef.h>
#include <sys/mman.h>
#include <unistd.h>

static inline size_t dod_os_page_size(void) {
    static size_t page = 0;
    if (page == 0) {
        long p = sysconf(_SC_PAGESIZE);
        page = p > 0 ? (size_t)p : 4096;
    }
    return page;
}

/* NULL on failure (never MAP_FAILED). */
static inline void *dod_os_map(size_t size) {
    if (size == 0) return NULL;
    void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

static inline void dod_os_unmap(void *p, size_t size) {
    if (p != NULL && size != 0) munmap(p, size);
}

/* ---- page protection (the guard-zone wrapper) ---------------------------
 * p is page aligned; size a multiple of the page size. 0 on success. */
static inline int dod_os_protect_none(void *p, size_t size) { return mprotect(p, size, PROT_NONE); }
static inline int dod_os_protect_rw(void *p, size_t size) { return mprotect(p, size, PROT_READ | PROT_WRITE); }

/* Give the pages' contents back to the system but keep the mapping: the next
 * touch reads zero (private anonymous memory). */
static inline int dod_os_decommit(void *p, size_t size) { return madvise(p, size, MADV_DONTNEED); }

#endif
