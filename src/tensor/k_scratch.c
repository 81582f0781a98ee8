/* k_scratch.c: per-thread scratch buffers for kernels that need a little working memory per
 * thread (a packed GEMM block, a transposed key block). Each thread owns one buffer per slot,
 * allocated on first use, grown (never shrunk) when a call needs more, reused by every later
 * call, and freed when the thread ends (the thread that calls exit: at exit); so a training
 * loop mallocs nothing here after its first step. The contents are never kept between calls:
 * a kernel writes before it reads.
 * Not here: tensor memory (arenas, tensor.c). Next: k_gemm.c. */
#include <pthread.h>
#include <stdlib.h>

#include "kernels.h"

typedef struct {
    Real *buf[K_SCRATCH_SLOTS];
    size_t n[K_SCRATCH_SLOTS];
} ThreadScratch;

static _Thread_local ThreadScratch *mine;
static pthread_key_t key;
static pthread_once_t key_once = PTHREAD_ONCE_INIT;

/* run by pthreads when a thread that used scratch ends */
static void release(void *p) {
    ThreadScratch *s = p;
    for (int i = 0; i < K_SCRATCH_SLOTS; i++) free(s->buf[i]);
    free(s);
}
/* at exit, for the thread calling exit (the main thread returning from main gets no pthread
 * destructor): its buffers are freed too, so that valgrind sees every byte freed */
static void release_at_exit(void) {
    if (!mine) return;
    pthread_setspecific(key, NULL);
    release(mine);
    mine = NULL;
}
static void key_init(void) {
    AG_CHECK(pthread_key_create(&key, release) == 0, "k_thread_scratch: pthread_key_create failed");
    atexit(release_at_exit);
}

Real *k_thread_scratch(int slot, size_t n) {
    AG_CHECK(slot >= 0 && slot < K_SCRATCH_SLOTS, "k_thread_scratch: no slot %d", slot);
    if (!mine) {
        mine = calloc(1, sizeof *mine);
        AG_CHECK(mine, "k_thread_scratch: out of memory");
        pthread_once(&key_once, key_init);
        pthread_setspecific(key, mine);
    }
    if (n > mine->n[slot]) {
        size_t bytes = (n * sizeof(Real) + 63) / 64 * 64;
        free(mine->buf[slot]);
        mine->buf[slot] = aligned_alloc(64, bytes);
        AG_CHECK(mine->buf[slot], "k_thread_scratch: cannot allocate %zu bytes", bytes);
        mine->n[slot] = bytes / sizeof(Real);
    }
    return mine->buf[slot];
}
