/* dod/_os.h: anonymous memory from the operating system.
 *
 * Fresh anonymous pages read as zero (ZII for free) and cost nothing until
 * touched. Sizes are rounded up to the page size by the kernel; callers pass
 * the same size to unmap that they passed to map.
 */
#ifndef DOD_OS_H
#define DOD_OS_H

#include <errno.h>
#include <stddef.h>
#include <stdint.h>
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

/* size rounded up to whole pages; 0 when that overflows (or size is 0). */
static inline size_t dod_os_page_round(size_t size) {
    size_t page = dod_os_page_size(), out;
    if (__builtin_add_overflow(size, page - 1, &out)) return 0;
    return out & ~(page - 1);
}

/* Whole pages for `size` bytes aligned to `alignment` (a power of two).
 * Above the page size the mapping is over-sized by the alignment and the
 * unaligned head and tail are given back. NULL on failure. Unmap with
 * dod_os_unmap(p, dod_os_page_round(size)). */
static inline void *dod_os_map_aligned(size_t size, size_t alignment) {
    size_t length = dod_os_page_round(size), span, head, tail;
    char *raw;
    uintptr_t aligned;
    if (length == 0 || alignment == 0 || (alignment & (alignment - 1)) != 0) return NULL;
    if (alignment <= dod_os_page_size()) return dod_os_map(length);
    if (__builtin_add_overflow(length, alignment, &span)) return NULL;
    raw = (char *)dod_os_map(span);
    if (raw == NULL) return NULL;
    aligned = ((uintptr_t)raw + alignment - 1) & ~((uintptr_t)alignment - 1);
    head = aligned - (uintptr_t)raw;
    tail = span - head - length;
    if (head) dod_os_unmap(raw, head);
    if (tail) dod_os_unmap((char *)aligned + length, tail);
    return (void *)aligned;
}

/* ---- transparent huge pages -------------------------------------------
 * Ask the kernel to back [p, p + size) (p page aligned) with 2 MiB pages
 * where it can: one TLB entry and one page fault for 512 small pages. Where
 * THP runs in "madvise" mode (Debian, Ubuntu) a mapping gets huge pages only
 * when asked; in "always" mode this changes nothing; in "never" mode, or
 * without THP, it fails and the mapping works as before: a hint, never an
 * error. 0 when the kernel took it. */
#define DOD_OS_HUGE_MIN ((size_t)4 << 20)   /* numpy's threshold for the same hint */

static inline int dod_os_advise_huge(void *p, size_t size) {
#ifdef MADV_HUGEPAGE
    return madvise(p, size, MADV_HUGEPAGE);
#else
    (void)p; (void)size;
    return -1;
#endif
}

/* ---- page protection (the guard-zone wrapper) ---------------------------
 * p is page aligned; size a multiple of the page size. 0 on success. */
static inline int dod_os_protect_none(void *p, size_t size) { return mprotect(p, size, PROT_NONE); }
static inline int dod_os_protect_rw(void *p, size_t size) { return mprotect(p, size, PROT_READ | PROT_WRITE); }

/* Give the pages' contents back to the system but keep the mapping: the next
 * touch reads zero (private anonymous memory). */
static inline int dod_os_decommit(void *p, size_t size) { return madvise(p, size, MADV_DONTNEED); }

/* ---- prefaulting (real-time start-up) ----------------------------------
 * Fault every page of [p, p + size) in for writing now, so that no later
 * touch takes a page fault: resident from here on (RSS at its full size at
 * start, not creeping up as high-water marks rise) and no first-touch cost
 * inside a deadline loop. Contents are unchanged.
 *
 * dod_os_touch_pages reads and writes back one byte per page: portable, but
 * no other thread may write the range meanwhile. dod_os_prefault uses
 * MADV_POPULATE_WRITE (Linux 5.14), which has no such condition, and falls
 * back to the touch where the kernel or the headers lack it. Both return
 * the bytes of the whole pages the range spans (0 for an empty range);
 * dod_os_prefault returns 0 also when the kernel could not populate the
 * pages (ENOMEM: not enough memory; part of the range may be resident),
 * rather than touching on into the OOM killer. */
static inline size_t dod_os_span_pages(const void *p, size_t size) {
    size_t page = dod_os_page_size();
    uintptr_t first, last;
    if (p == NULL || size == 0) return 0;
    first = (uintptr_t)p & ~(uintptr_t)(page - 1);
    last = ((uintptr_t)p + (size - 1)) & ~(uintptr_t)(page - 1);
    return (size_t)(last - first) + page;
}

static inline size_t dod_os_touch_pages(void *p, size_t size) {
    volatile char *c = (volatile char *)p;
    size_t page = dod_os_page_size(), off;
    if (p == NULL || size == 0) return 0;
    c[0] = c[0];
    for (off = page - ((uintptr_t)p & (page - 1)); off < size; off += page) c[off] = c[off];
    return dod_os_span_pages(p, size);
}

static inline size_t dod_os_prefault(void *p, size_t size) {
#ifdef MADV_POPULATE_WRITE
    size_t span = dod_os_span_pages(p, size);
    /* The rounded-down first page is mapped (it holds p): only whole pages
     * of ours or shared with a neighbour, whose contents stay as they are. */
    if (span == 0) return 0;
    if (madvise((void *)((uintptr_t)p & ~(uintptr_t)(dod_os_page_size() - 1)), span, MADV_POPULATE_WRITE) == 0)
        return span;
    if (errno != EINVAL) return 0;      /* EINVAL: a kernel before 5.14 (or a mapping that refuses it) */
#endif
    return dod_os_touch_pages(p, size);
}

#endif
