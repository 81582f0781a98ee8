/* train_system.c: what the trainer does with the process rather than the model: SIGINT and
 * SIGTERM handlers (a flag checked between steps), the clock, resident and malloc memory figures
 * (--report-rss), temporary files an interrupted save left, glibc's mmap threshold, and the
 * lines both trainers (this one and attograd-gpt's) share when they run as several processes
 * (a signal to any of them, the threads warning, the data-parallel lines).
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

volatile sig_atomic_t tr_stop_signal = 0;

double tr_now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

int tr_file_exists(const char *path) {
    struct stat s;
    return stat(path, &s) == 0;
}

static void on_signal(int sig) {
    if (tr_stop_signal) { /* a second signal: stop now, without saving */
        static const char msg[] = "\nsecond signal: quitting without saving\n";
        ssize_t w = write(STDERR_FILENO, msg, sizeof msg - 1);
        (void)w;
        _exit(128 + sig);
    }
    tr_stop_signal = sig;
}

int tr_stop_requested(void) { return tr_stop_signal != 0; }

/* ---- several processes ---- */

int tr_stop_any(void) { return dist_any(tr_stop_requested()); }

void tr_dist_warn_threads(const char *prog, int threads) {
    int node_threads, cpus;
    dist_threads_on_node(threads, &node_threads, &cpus);
    if (node_threads > cpus && dist_rank() == 0)
        fprintf(stderr,
                "%s train: warning: the processes on this machine run %d threads in all (%d "
                "here) for %d CPUs: give fewer --threads or processes (docs/mpi.md)\n",
                prog, node_threads, threads, cpus);
}

void tr_dist_line(const DistGrad *d, int batch, const char *unit) {
    if (!d) return;
    int S = d->n_shards;
    if (batch % S == 0)
        printf("data parallel: %d processes, %d shards of %d %s a step (process 0: shards "
               "%d..%d)\n",
               dist_size(), S, batch / S, unit, d->lo, d->hi - 1);
    else
        printf("data parallel: %d processes, %d shards of %d or %d %s a step (process 0: shards "
               "%d..%d)\n",
               dist_size(), S, batch / S, batch / S + 1, unit, d->lo, d->hi - 1);
}

void tr_dist_summary(const DistGrad *d) {
    if (!d || d->n_reduce == 0) return;
    printf("data parallel: the gradients' reduction (%zu values, tree and broadcast) took %.2f ms "
           "a step in process 0, %.2f ms of it after backward\n",
           d->n, 1e3 * d->reduce_s / (double)d->n_reduce, 1e3 * d->after_s / (double)d->n_reduce);
}

void tr_signals_catch(struct sigaction old[2]) {
    struct sigaction sa;
    tr_stop_signal = 0;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, &old[0]);
    sigaction(SIGTERM, &sa, &old[1]);
}

void tr_signals_restore(const struct sigaction old[2]) {
    sigaction(SIGINT, &old[0], NULL);
    sigaction(SIGTERM, &old[1], NULL);
}

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
