/* train_system.c: what the trainer does with the process rather than the model: resident and
 * malloc memory figures (--report-rss), temporary files an interrupted save left, glibc's mmap
 * threshold. (SIGINT and SIGTERM, the clock: src/run; the data-parallel lines:
 * examples/common/util.c.)
 * Not here: the loop (train.c). Read next: train_log.c. */
#include <dirent.h>
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
void tr_report_rss(const Trainer *tr, long first[2]) {
    long peak, now;
    memory_kib(&peak, &now);
    printf("memory: peak RSS %ld KiB after step %lld (now %ld KiB)", peak, (long long)tr->step,
           now);
    long used = malloc_in_use_kib(); /* after a printf: with --quiet, stdout's buffer is new */
    if (first[0] >= 0)
        printf(", %+ld KiB since step %lld", peak - first[0], (long long)tr->cfg->report_rss);
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

/* 1 if name is "<file>.tmp.<digits>" for one of the files the trainer writes atomically */
static int is_temp_of_ours(const char *name) {
    static const char *const files[] = {"last.npz.tmp.", "best.npz.tmp.", "loss.png.tmp.",
                                        "loss.gp.tmp."};
    for (int i = 0; i < 4; i++) {
        size_t n = strlen(files[i]);
        if (strncmp(name, files[i], n) != 0 || !name[n]) continue;
        if (strspn(name + n, "0123456789") == strlen(name + n)) return 1;
    }
    return 0;
}

/* Temporary files of saves that a kill -9 interrupted ("last.npz.tmp.<pid>", also the loss
 * plot's picture and script): never read, removed when a run starts in the folder. */
void tr_remove_stale_temps(const Trainer *tr) {
    DIR *d = opendir(tr->cfg->out_dir);
    if (!d) return;
    char path[1100];
    for (struct dirent *e; (e = readdir(d));) {
        if (!is_temp_of_ours(e->d_name)) continue;
        snprintf(path, sizeof path, "%s/%s", tr->cfg->out_dir, e->d_name);
        if (unlink(path) == 0 && tr->cfg->verbose)
            printf("removed %s (left by an interrupted save)\n", path);
    }
    closedir(d);
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
