/* dod/atomics.h: every atomic operation and lock in dod, and nothing else.
 *
 * Cython code reaches these through dod/atomics.pxd (cdef extern); no other
 * file in the tree spells an intrinsic. GCC/Clang __atomic builtins; the
 * 16-byte compare-and-swap of the tagged stack head is cmpxchg16b on x86-64
 * (-mcx16, linked with -latomic as gcc routes it through libatomic).
 */
#ifndef DOD_ATOMIC_H
#define DOD_ATOMIC_H

#include <stdint.h>
#include <stddef.h>
#include <pthread.h>
#include <sched.h>
#include <errno.h>
#include <time.h>
#ifdef __linux__
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

/* ---- word-sized atomics ------------------------------------------------ */

static inline uint64_t dod_atomic_load_u64(const uint64_t *p) { return __atomic_load_n(p, __ATOMIC_ACQUIRE); }
static inline uint64_t dod_atomic_load_relaxed_u64(const uint64_t *p) { return __atomic_load_n(p, __ATOMIC_RELAXED); }
static inline void dod_atomic_store_u64(uint64_t *p, uint64_t v) { __atomic_store_n(p, v, __ATOMIC_RELEASE); }
static inline uint64_t dod_atomic_fetch_add_u64(uint64_t *p, uint64_t v) { return __atomic_fetch_add(p, v, __ATOMIC_ACQ_REL); }
static inline uint64_t dod_atomic_fetch_add_relaxed_u64(uint64_t *p, uint64_t v) { return __atomic_fetch_add(p, v, __ATOMIC_RELAXED); }
static inline uint64_t dod_atomic_fetch_sub_u64(uint64_t *p, uint64_t v) { return __atomic_fetch_sub(p, v, __ATOMIC_ACQ_REL); }
static inline int dod_atomic_cas_u64(uint64_t *p, uint64_t *expected, uint64_t desired) {
    return __atomic_compare_exchange_n(p, expected, desired, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE);
}

/* Statistics counters that one thread bumps while any other thread may read
 * them (a ring's waits and failures): relaxed, so each read sees some value
 * the counter had (no torn or undefined read); they order nothing else.
 * On x86-64 the load and store are plain moves. */
static inline void dod_atomic_store_relaxed_u64(uint64_t *p, uint64_t v) { __atomic_store_n(p, v, __ATOMIC_RELAXED); }

static inline void *dod_atomic_load_ptr(void *const *p) { return __atomic_load_n(p, __ATOMIC_ACQUIRE); }
static inline void dod_atomic_store_ptr(void **p, void *v) { __atomic_store_n(p, v, __ATOMIC_RELEASE); }
static inline int dod_atomic_cas_ptr(void **p, void **expected, void *desired) {
    return __atomic_compare_exchange_n(p, expected, desired, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE);
}
static inline void *dod_atomic_exchange_ptr(void **p, void *v) { return __atomic_exchange_n(p, v, __ATOMIC_ACQ_REL); }

static inline uint32_t dod_atomic_load_u32(const uint32_t *p) { return __atomic_load_n(p, __ATOMIC_ACQUIRE); }
static inline uint32_t dod_atomic_fetch_add_u32(uint32_t *p, uint32_t v) { return __atomic_fetch_add(p, v, __ATOMIC_SEQ_CST); }
static inline uint32_t dod_atomic_fetch_sub_u32(uint32_t *p, uint32_t v) { return __atomic_fetch_sub(p, v, __ATOMIC_SEQ_CST); }
static inline uint32_t dod_atomic_exchange_u32(uint32_t *p, uint32_t v) { return __atomic_exchange_n(p, v, __ATOMIC_SEQ_CST); }
static inline void dod_atomic_store_u32(uint32_t *p, uint32_t v) { __atomic_store_n(p, v, __ATOMIC_RELEASE); }
/* int32 nodes that several threads link at once (the tracker's union-find):
 * relaxed loads and stores (each word is coherent on its own; what other
 * memory the threads share is ordered by the barrier after the pass), and a
 * CAS that links a node only while it still holds `expected`. */
static inline int32_t dod_atomic_load_relaxed_i32(const int32_t *p) { return __atomic_load_n(p, __ATOMIC_RELAXED); }
static inline void dod_atomic_store_relaxed_i32(int32_t *p, int32_t v) { __atomic_store_n(p, v, __ATOMIC_RELAXED); }
static inline int dod_atomic_cas_i32(int32_t *p, int32_t expected, int32_t desired) {
    return __atomic_compare_exchange_n(p, &expected, desired, 0, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED);
}

/* ---- a speculative read of an intrusive free-list link ------------------
 * A lock-free stack pops by reading the link word of the block at its head,
 * then swinging the head with a tagged CAS. Between the two, another thread
 * may pop the same block and its new owner may write its first word with a
 * plain store (it is the owner's memory now). The read then returns garbage,
 * and the CAS fails because the tag moved on, so the value is never used.
 * Under the C11 model that pair is still a data race (an atomic read against
 * a plain write) and ThreadSanitizer reports it on every contended run.
 * No layout that keeps the link inside the block avoids the pair, so this
 * one read says what it is: an acquire load in normal builds (the same
 * instruction as before), and under ThreadSanitizer a load TSan does not
 * observe. Only the link reads whose value a tag check guards use it; every
 * link write stays atomic, so TSan still checks all other accesses. */
#if defined(__has_feature)
#  if __has_feature(thread_sanitizer)
#    define DOD_TSAN 1
#  endif
#endif
#if !defined(DOD_TSAN) && defined(__SANITIZE_THREAD__)
#  define DOD_TSAN 1
#endif
#ifdef DOD_TSAN
__attribute__((no_sanitize("thread"), noinline))
static inline void *dod_atomic_load_speculative_ptr(void *const *p) {
    void *v = *(void *volatile const *)p;
    __atomic_thread_fence(__ATOMIC_ACQUIRE);
    return v;
}
#else
static inline void *dod_atomic_load_speculative_ptr(void *const *p) { return __atomic_load_n(p, __ATOMIC_ACQUIRE); }
#endif

static inline void dod_atomic_fence(void) { __atomic_thread_fence(__ATOMIC_SEQ_CST); }

static inline void dod_cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

/* ---- tagged pointer: the head of a lock-free (Treiber) stack ------------
 * The tag is incremented on every successful CAS, so a head that was popped,
 * reused and pushed back (ABA) no longer compares equal. The pair is 16-byte
 * aligned for cmpxchg16b.
 */
typedef struct dod_tagged_ptr {
    void *ptr;
    uint64_t tag;
} __attribute__((aligned(16))) dod_tagged_ptr;

static inline dod_tagged_ptr dod_tagged_load(dod_tagged_ptr *p) {
    dod_tagged_ptr v;
    /* Two relaxed word loads may tear; the CAS below catches any tear. */
    v.tag = __atomic_load_n(&p->tag, __ATOMIC_ACQUIRE);
    v.ptr = __atomic_load_n(&p->ptr, __ATOMIC_ACQUIRE);
    return v;
}

static inline int dod_tagged_cas(dod_tagged_ptr *p, dod_tagged_ptr *expected, dod_tagged_ptr desired) {
    return __atomic_compare_exchange(p, expected, &desired, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE);
}

/* ---- a plain mutex for slow paths (growth) and the locked pool ---------- */

typedef pthread_mutex_t dod_mutex;
static inline int dod_mutex_init(dod_mutex *m) { return pthread_mutex_init(m, NULL); }
static inline void dod_mutex_destroy(dod_mutex *m) { pthread_mutex_destroy(m); }
static inline void dod_mutex_lock(dod_mutex *m) { pthread_mutex_lock(m); }
static inline void dod_mutex_unlock(dod_mutex *m) { pthread_mutex_unlock(m); }
static inline int dod_mutex_trylock(dod_mutex *m) { return pthread_mutex_trylock(m) == 0; }

static inline void dod_thread_yield(void) { sched_yield(); }
/* The calling thread, as a number (debug checks that a thread cache stays on one thread). */
static inline uintptr_t dod_thread_self(void) { return (uintptr_t)pthread_self(); }

/* ---- waiting on a 32-bit word (futex) ------------------------------------
 * dod_atomic_wait_u32 sleeps while *p == expected, at most timeout_ns (< 0:
 * no limit). Returns 0 when woken or when *p already differed, ETIMEDOUT,
 * or EINTR (a signal: the caller runs its handlers and waits again).
 * Spurious returns happen: callers re-check their condition in a loop.
 * dod_atomic_wake_all_u32 wakes every thread waiting on p. Without futexes
 * (not Linux) the wait is a short sleep, so waiters poll every 50 us.
 */
static inline int dod_atomic_wait_u32(uint32_t *p, uint32_t expected, int64_t timeout_ns) {
#ifdef __linux__
    struct timespec ts, *tsp = NULL;
    long rc;
    if (timeout_ns >= 0) {
        ts.tv_sec = (time_t)(timeout_ns / 1000000000);
        ts.tv_nsec = (long)(timeout_ns % 1000000000);
        tsp = &ts;
    }
    rc = syscall(SYS_futex, p, FUTEX_WAIT_PRIVATE, expected, tsp, NULL, 0);
    if (rc == 0) return 0;
    if (errno == EAGAIN) return 0;
    return errno == ETIMEDOUT ? ETIMEDOUT : (errno == EINTR ? EINTR : 0);
#else
    struct timespec ts;
    if (__atomic_load_n(p, __ATOMIC_ACQUIRE) != expected) return 0;
    if (timeout_ns == 0) return ETIMEDOUT;
    ts.tv_sec = 0;
    ts.tv_nsec = (timeout_ns > 0 && timeout_ns < 50000) ? (long)timeout_ns : 50000;
    return nanosleep(&ts, NULL) == 0 ? 0 : EINTR;
#endif
}

static inline void dod_atomic_wake_all_u32(uint32_t *p) {
#ifdef __linux__
    syscall(SYS_futex, p, FUTEX_WAKE_PRIVATE, 0x7fffffff, NULL, NULL, 0);
#else
    (void)p;
#endif
}

#endif
