/* train_system.c: what the trainer does with the process rather than the model: resident and
 * malloc memory figures (--report-rss), glibc's mmap threshold. (SIGINT and SIGTERM, the clock,
 * temporary files an interrupted save left: src/run.)
 * Not here: the run (train.c). Read next: cli.c. */
#include <stdio.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif

#include "trainer.h"

/* Peak and current resident memory in KiB: VmHWM and VmRSS of /proc/self/status, or where
 * there is none getrusage's ru_maxrss (and -1 for the current figure). */
static void memory_kib(long *peak, long *now) {
    *peak = *now = -1;
    FILE *f = fopen("/proc/self/status", "r");
    if (f) {
        char line[256];
        while (fgets(line, sizeof line, f)) {
            if (sscanf(line, "VmHWM: %ld", peak) == 1) continue;
            sscanf(line, "VmRSS: %ld", now);
        }
        fclose(f);
    }
    struct rusage ru;
    if (*peak < 0 && getrusage(RUSAGE_SELF, &ru) == 0) *peak = ru.ru_maxrss;
}

/* Bytes malloc has handed out and not had back, in KiB (glibc 2.33 and later), else -1. Unlike
 * the RSS it does not depend on where blocks land in the heap, so a leak of a few KiB a
 * validation shows; it counts the small freed blocks glibc keeps in its per-thread cache
 * (tcache) as in use: a few KiB that settle within the first few hundred steps. */
static long malloc_in_use_kib(void) {
#if defined(__GLIBC__) && (__GLIBC__ > 2 || __GLIBC_MINOR__ >= 33)
    struct mallinfo2 mi = mallinfo2();
    return (long)((mi.uordblks + mi.hblkhd) / 1024);
#else
    return -1;
#endif
}

/* --report-rss: one line, to stdout (also with --quiet: it was asked for); first[0], first[1]:
 * the peak RSS and the malloc figure of the first report */
void tr_report_rss(int64_t step, int64_t report_rss, long first[2]) {
    long peak, now;
    memory_kib(&peak, &now);
    printf("memory: peak RSS %ld KiB after step %lld (now %ld KiB)", peak, (long long)step, now);
    long used = malloc_in_use_kib(); /* after a printf: with --quiet, stdout's buffer is new */
    if (first[0] >= 0) printf(", %+ld KiB since step %lld", peak - first[0], (long long)report_rss);
    if (used >= 0) {
        printf("; malloc in use %ld KiB", used);
        if (first[0] >= 0) printf(", %+ld KiB", used - first[1]);
    }
    printf("\n");
    fflush(stdout);
    if (first[0] < 0) {
        first[0] = peak;
        first[1] = used;
    }
}

/* glibc's malloc serves a block of 128 KiB or more with an mmap of its own, but once such a
 * block is freed it raises that threshold to the block's size (mallopt(3)): the first
 * validation's decoding arena (nn_decode_begin: 142 KiB for make soak's model) is mmapped and
 * unmapped, and every later one comes from the heap, between the blocks of checkpoint saves
 * and key/value caches, where it leaves holes that grow the heap a few times (make soak: up to
 * +490 KiB of peak RSS after step 100, flat after step 1000, the bytes in use flat throughout;
 * or nothing, as the layout falls). Setting the threshold turns that adjustment off: the large
 * blocks that come and go with each validation keep coming from mmap and go back at free.
 * Process-wide, like the thread count; nothing to do outside glibc. */
void tr_fixed_mmap_threshold(void) {
#ifdef __GLIBC__
    mallopt(M_MMAP_THRESHOLD, 128 * 1024);
#endif
}
