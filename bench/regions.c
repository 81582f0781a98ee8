/* regions.c: where a multi-threaded run spends its parallel regions, a shared object loaded with
 * LD_PRELOAD (bench/regions.py runs a program under it and names the functions). It wraps
 * libgomp's GOMP_parallel, which every `#pragma omp parallel` of GCC calls, and records per
 * region: each thread's CPU time inside the region's body (CLOCK_THREAD_CPUTIME_ID), the
 * master's CPU time since the previous region ended (the serial part), the region's wall time
 * seen by the master, and how late the last thread entered the body. At exit it writes one line
 * per outlined function (its address as an offset into the program) to $REGIONS_OUT:
 *
 *     <offset> calls=<n> cpu_ms=<all threads> max_ms=<the busiest thread, summed over calls>
 *         serial_ms=<before its calls> wall_ms=<n calls' wall> late_ms=<last thread's start>
 *     total calls=.. cpu_ms=.. max_ms=.. serial_ms=.. critical_ms=<serial + max> wall_ms=..
 *
 * critical_ms is what the run would take if starting and joining threads cost nothing: it uses
 * CPU time only, so another process on the machine barely moves it, and with GOMP_SPINCOUNT=0
 * (waiting threads sleep, using no CPU) cpu_ms counts work alone. wall_ms and late_ms show what
 * waiting costs, and mean something on a quiet machine only.
 * Not here: the names (regions.py, from nm), anything of attograd's (no link to the library). */
#define _GNU_SOURCE /* RTLD_NEXT, dl_iterate_phdr */
#include <dlfcn.h>
#include <errno.h>
#include <link.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { MAX_THREADS = 64, MAX_FNS = 4096 };

typedef void (*Body)(void *);

typedef struct {
    Body fn;
    void *data;
    double cpu[MAX_THREADS], start[MAX_THREADS]; /* CPU ms in the body; wall ms at its start */
} Region;

typedef struct {
    Body fn;
    long calls;
    double cpu, max, serial, wall, late;
} FnStats;

static FnStats stats[MAX_FNS];
static int n_stats, overflow;
static double last_end = -1; /* the master's CPU ms when the previous region returned */

static double ms(clockid_t c) {
    struct timespec ts;
    clock_gettime(c, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

static void timed_body(void *p) {
    Region *r = p;
    int t = omp_get_thread_num();
    double w0 = ms(CLOCK_MONOTONIC), c0 = ms(CLOCK_THREAD_CPUTIME_ID);
    r->fn(r->data);
    if (t < MAX_THREADS) {
        r->cpu[t] = ms(CLOCK_THREAD_CPUTIME_ID) - c0;
        r->start[t] = w0;
    }
}

static FnStats *stats_of(Body fn) {
    for (int i = 0; i < n_stats; i++)
        if (stats[i].fn == fn) return &stats[i];
    if (n_stats == MAX_FNS) {
        overflow = 1;
        return NULL;
    }
    stats[n_stats].fn = fn;
    return &stats[n_stats++];
}

void GOMP_parallel(Body fn, void *data, unsigned num_threads, unsigned flags) {
    static void (*real)(Body, void *, unsigned, unsigned);
    if (!real) *(void **)&real = dlsym(RTLD_NEXT, "GOMP_parallel");
    if (!real) {
        fprintf(stderr, "regions.so: GOMP_parallel not found in libgomp: %s\n", dlerror());
        abort();
    }
    Region r;
    memset(&r, 0, sizeof r);
    r.fn = fn;
    r.data = data;
    double c0 = ms(CLOCK_THREAD_CPUTIME_ID), w0 = ms(CLOCK_MONOTONIC);
    real(timed_body, &r, num_threads, flags);
    double w1 = ms(CLOCK_MONOTONIC);
    FnStats *s = stats_of(fn);
    if (s) {
        double busiest = 0, late = 0;
        for (int t = 0; t < MAX_THREADS; t++) {
            if (r.start[t] == 0) continue;
            s->cpu += r.cpu[t];
            if (r.cpu[t] > busiest) busiest = r.cpu[t];
            if (r.start[t] - w0 > late) late = r.start[t] - w0;
        }
        s->calls++;
        s->max += busiest;
        s->serial += last_end < 0 ? 0 : c0 - last_end;
        s->wall += w1 - w0;
        s->late += late;
    }
    last_end = ms(CLOCK_THREAD_CPUTIME_ID);
}

static uintptr_t program_base;
static int first_object(struct dl_phdr_info *info, size_t size, void *unused) {
    (void)size, (void)unused;
    program_base = info->dlpi_addr; /* the first object listed is the program */
    return 1;
}

__attribute__((destructor)) static void report(void) {
    const char *path = getenv("REGIONS_OUT");
    FILE *f = path && *path ? fopen(path, "w") : stderr;
    if (!f) {
        fprintf(stderr, "regions.so: cannot write %s: %s\n", path, strerror(errno));
        f = stderr;
    }
    dl_iterate_phdr(first_object, NULL);
    FnStats all = {0};
    for (int i = 0; i < n_stats; i++) {
        const FnStats *s = &stats[i];
        fprintf(f,
                "%#lx calls=%ld cpu_ms=%.3f max_ms=%.3f serial_ms=%.3f wall_ms=%.3f "
                "late_ms=%.3f\n",
                (unsigned long)((uintptr_t)s->fn - program_base), s->calls, s->cpu, s->max,
                s->serial, s->wall, s->late);
        all.calls += s->calls, all.cpu += s->cpu, all.max += s->max, all.serial += s->serial;
        all.wall += s->wall;
    }
    fprintf(
        f,
        "total calls=%ld cpu_ms=%.3f max_ms=%.3f serial_ms=%.3f critical_ms=%.3f wall_ms=%.3f%s\n",
        all.calls, all.cpu, all.max, all.serial, all.serial + all.max, all.wall,
        overflow ? " (more functions than recorded)" : "");
    if (f != stderr) fclose(f);
}
