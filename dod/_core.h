/* dod/_core.h: the few C facts every dod module shares.
 *
 * DOD_DEBUG comes from setup.py (DOD_BUILD=debug|sanitize sets it to 1).
 * Cython code tests it as a constant, so release builds compile the debug
 * branches away. Overflow helpers wrap the compiler builtins so that no
 * Cython file has to spell them.
 */
#ifndef DOD_CORE_H
#define DOD_CORE_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#ifndef DOD_DEBUG
#define DOD_DEBUG 0
#endif

/* Byte written over released memory in debug builds. */
#define DOD_POISON 0xCD

/* Alignment of column data and of every block the system hands out. */
#define DOD_CACHE_LINE 64

static inline int dod_add_overflow(size_t a, size_t b, size_t *out) {
    return __builtin_add_overflow(a, b, out);
}

static inline int dod_mul_overflow(size_t a, size_t b, size_t *out) {
    return __builtin_mul_overflow(a, b, out);
}

static inline int dod_is_pow2(size_t x) {
    return x != 0 && (x & (x - 1)) == 0;
}

/* Bytes to add to address p to reach a multiple of align (a power of two). */
static inline size_t dod_pad_for(uintptr_t p, size_t align) {
    return (size_t)(-p) & (align - 1);
}

/* Fetch the cache line at p ahead of a read (dod_prefetch) or a write
 * (dod_prefetch_w): a pass that reads or writes arrays larger than the
 * caches at random otherwise waits on each miss in turn. Only a hint: any
 * address is allowed, nothing is read. */
#define dod_prefetch(p) __builtin_prefetch((const void *)(p), 0, 3)
#define dod_prefetch_w(p) __builtin_prefetch((const void *)(p), 1, 3)

#if DOD_DEBUG
#define dod_poison(p, n) memset((p), DOD_POISON, (n))
#else
#define dod_poison(p, n) ((void)0)
#endif

/* Debug builds: a broken engine contract (foreign pointer, double release)
 * prints what happened and aborts. Death tests watch for it in a child. */
#include <stdio.h>
#include <stdlib.h>
static inline void dod_debug_fail(const char *what, const void *p) {
    fprintf(stderr, "dod: %s (%p)\n", what, p);
    fflush(stderr);
    abort();
}

#endif
