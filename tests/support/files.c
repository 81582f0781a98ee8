/* files.c: the folder and file helpers of files.h (see there). Not Criterion's cr_assert: the
 * support objects link into tools without Criterion too, so a failure prints and aborts (the
 * test then shows as crashed, with the message on stderr). */
#define _GNU_SOURCE /* unshare, CLONE_NEWUSER, CLONE_NEWNS */
#include "files.h"

#include "attograd.h"

#include <dirent.h>
#include <fcntl.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <sched.h>
#include <signal.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define FILES_CHECK(cond, ...)                                                                     \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, __VA_ARGS__);                                                          \
            fputc('\n', stderr);                                                                   \
            abort();                                                                               \
        }                                                                                          \
    } while (0)

void ts_tmp_dir(char *dir, size_t n, const char *tag) {
    snprintf(dir, n, "/tmp/attograd-%s.XXXXXX", tag);
    FILES_CHECK(mkdtemp(dir) != NULL, "mkdtemp %s: %s", dir, strerror(errno));
}

void ts_rm_tree(const char *dir) {
    DIR *d = opendir(dir);
    if (!d) return;
    char path[1024];
    for (struct dirent *e; (e = readdir(d));) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        struct stat s;
        if (lstat(path, &s) == 0 && S_ISDIR(s.st_mode))
            ts_rm_tree(path);
        else
            unlink(path);
    }
    closedir(d);
    rmdir(dir);
}

char *ts_join(char *buf, const char *dir, const char *name) {
    snprintf(buf, 512, "%.250s/%.250s", dir, name);
    return buf;
}

void ts_write_bytes(const char *path, const void *b, size_t n) {
    FILE *f = fopen(path, "wb");
    FILES_CHECK(f != NULL, "%s: %s", path, strerror(errno));
    FILES_CHECK(fwrite(b, 1, n, f) == n && fclose(f) == 0, "%s: %s", path, strerror(errno));
}

void ts_write_text(const char *path, const char *text) { ts_write_bytes(path, text, strlen(text)); }

void ts_write_copy_task(const char *path, int n, int reverse, uint64_t seed, int min_len,
                        int max_len, int alphabet) {
    FILES_CHECK(1 <= min_len && min_len <= max_len && max_len <= 32 && alphabet >= 1 &&
                    alphabet <= 26,
                "ts_write_copy_task: lengths %d..%d, alphabet %d", min_len, max_len, alphabet);
    FILE *f = fopen(path, "w");
    FILES_CHECK(f != NULL, "%s: %s", path, strerror(errno));
    Rng r;
    rng_seed(&r, seed);
    for (int i = 0; i < n; i++) {
        int len = min_len + (int)rng_below(&r, (uint64_t)(max_len - min_len + 1));
        char s[32];
        for (int k = 0; k < len; k++) s[k] = (char)('a' + rng_below(&r, (uint64_t)alphabet));
        for (int k = 0; k < len; k++) fprintf(f, "%s%c", k ? " " : "", s[k]);
        fputc('\t', f);
        for (int k = 0; k < len; k++)
            fprintf(f, "%s%c", k ? " " : "", s[reverse ? len - 1 - k : k]);
        fputc('\n', f);
    }
    FILES_CHECK(fclose(f) == 0, "%s: %s", path, strerror(errno));
}

char *ts_slurp(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    size_t cap = 4096, n = 0;
    char *b = malloc(cap);
    FILES_CHECK(b != NULL, "%s: out of memory", path);
    for (size_t k; (k = fread(b + n, 1, cap - n - 1, f)) > 0;) {
        n += k;
        if (n + 1 == cap) {
            b = realloc(b, cap *= 2);
            FILES_CHECK(b != NULL, "%s: out of memory", path);
        }
    }
    fclose(f);
    b[n] = '\0';
    if (len) *len = n;
    return b;
}

char *ts_read_text(const char *path, size_t *len) {
    char *b = ts_slurp(path, len);
    FILES_CHECK(b != NULL, "%s: %s", path, strerror(errno));
    return b;
}

int ts_same_file(const char *a, const char *b) {
    size_t na, nb;
    char *x = ts_read_text(a, &na), *y = ts_read_text(b, &nb);
    int same = na == nb && memcmp(x, y, na) == 0;
    free(x);
    free(y);
    return same;
}

char *ts_csv_drop_column(const char *path, int col) {
    char *text = ts_read_text(path, NULL), *out = malloc(strlen(text) + 1), *o = out;
    FILES_CHECK(out != NULL, "%s: out of memory", path);
    for (char *line = text; *line;) {
        char *end = strchr(line, '\n');
        FILES_CHECK(end != NULL, "%s: a row without its newline: %.60s", path, line);
        int c = 0;
        for (char *p = line; p <= end; p++) {
            if (*p == ',') c++;
            if (c != col || *p == ',') *o++ = *p;
        }
        line = end + 1;
    }
    *o = '\0';
    free(text);
    return out;
}

const char *ts_npz_overflow(const char *src, const char *dst, const char *name) {
    NpzFile *f;
    FILES_CHECK(npz_read(src, &f, NULL) == AG_OK, "%s", ag_last_error());
    const NpzEntry *e = npz_find(f, name);
    FILES_CHECK(e && (e->dtype == NPZ_F32 || e->dtype == NPZ_F64), "%s: no float entry '%s'", src,
                name);
    double big = e->dtype == NPZ_F64 ? 1e308 : 3e38;
    npz_free(f);
    ts_npz_edit(src, dst, name, -1, big, 0);
    return dst;
}

void ts_npz_edit(const char *src, const char *dst, const char *name, long index, double x,
                 int64_t i) {
    NpzFile *f;
    FILES_CHECK(npz_read(src, &f, NULL) == AG_OK, "%s", ag_last_error());
    NpzWriter *w = npz_writer_new();
    void *copy = NULL;
    for (int k = 0; k < f->n; k++) {
        const NpzEntry *e = &f->entries[k];
        const void *data = e->data;
        if (strcmp(e->name, name) == 0 && index == -2) continue;
        if (strcmp(e->name, name) == 0) {
            FILES_CHECK(index < (long)e->count, "%s: '%s' has %zu elements, no element %ld", src,
                        name, e->count, index);
            copy = malloc(e->nbytes ? e->nbytes : 1);
            FILES_CHECK(copy != NULL, "%s: out of memory for '%s'", src, name);
            memcpy(copy, e->data, e->nbytes);
            for (size_t j = 0; j < e->count; j++) {
                if (index >= 0 && j != (size_t)index) continue;
                if (e->dtype == NPZ_F32)
                    ((float *)copy)[j] = (float)x;
                else if (e->dtype == NPZ_F64)
                    ((double *)copy)[j] = x;
                else
                    memcpy((char *)copy + 8 * j, &i, 8);
            }
            data = copy;
        }
        npz_add(w, e->name, e->dtype, e->ndim, e->shape, data);
    }
    if (index == -2) {
        copy = calloc((size_t)i ? (size_t)i : 1, 1);
        FILES_CHECK(copy != NULL, "%s: out of memory for %lld bytes", src, (long long)i);
        npz_add_bytes(w, name, copy, (size_t)i);
    }
    FILES_CHECK(copy != NULL, "%s: no entry '%s'", src, name);
    FILES_CHECK(npz_write(w, dst, 6, NULL) == AG_OK, "%s", ag_last_error());
    npz_writer_free(w);
    free(copy);
    npz_free(f);
}

int ts_start(const char *dir, const char *const *args, const char *in) {
    return ts_start_env("AG_TRANSLATE_BIN", dir, args, in);
}

int ts_start_env(const char *bin_var, const char *dir, const char *const *args, const char *in) {
    const char *bin = getenv(bin_var);
    FILES_CHECK(bin && *bin && access(bin, X_OK) == 0,
                "%s is not set or not a program: run the suite with make test", bin_var);
    char outp[512], errp[512], inp[512];
    ts_join(outp, dir, "stdout.txt");
    ts_join(errp, dir, "stderr.txt");
    if (in) ts_write_text(ts_join(inp, dir, "stdin.txt"), in);
    const char *argv[64];
    int n = 0;
    argv[n++] = bin;
    for (int i = 0; args[i]; i++) {
        FILES_CHECK(n < 63, "ts_start: more than 62 arguments");
        argv[n++] = args[i];
    }
    argv[n] = NULL;
    fflush(NULL);
    pid_t pid = fork();
    FILES_CHECK(pid >= 0, "fork: %s", strerror(errno));
    if (pid == 0) {
        int fi = open(in ? inp : "/dev/null", O_RDONLY),
            fo = open(outp, O_WRONLY | O_CREAT | O_TRUNC, 0644),
            fe = open(errp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fi < 0 || fo < 0 || fe < 0) _exit(99);
        dup2(fi, 0);
        dup2(fo, 1);
        dup2(fe, 2);
        execv(argv[0], (char *const *)argv);
        _exit(98);
    }
    return (int)pid;
}

int ts_exits_with(const char *bin_var, const char *dir, const char *const *args, int want,
                  const char *const *says, char *why, size_t n) {
    TsRun r = ts_finish(dir, ts_start_env(bin_var, dir, args, NULL));
    int ok = r.code == want;
    if (!ok) snprintf(why, n, "%s: exit %d, expected %d", args[0], r.code, want);
    for (int i = 0; ok && says && says[i]; i++)
        if (!strstr(r.err, says[i]))
            ok = 0, snprintf(why, n, "%s: stderr does not name '%s'", args[0], says[i]);
    if (!ok) {
        size_t at = strlen(why);
        snprintf(why + at, n - at, "\nstdout: %.2000s\nstderr: %.2000s", r.out, r.err);
    }
    ts_run_free(&r);
    return ok;
}

TsRun ts_finish(const char *dir, int pid) {
    int status;
    while (waitpid((pid_t)pid, &status, 0) < 0)
        FILES_CHECK(errno == EINTR, "waitpid: %s", strerror(errno));
    TsRun r;
    r.code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    char p[512];
    r.out = ts_read_text(ts_join(p, dir, "stdout.txt"), NULL);
    r.err = ts_read_text(ts_join(p, dir, "stderr.txt"), NULL);
    return r;
}

TsRun ts_run(const char *dir, const char *const *args, const char *in) {
    return ts_finish(dir, ts_start(dir, args, in));
}

void ts_run_free(TsRun *r) {
    free(r->out);
    free(r->err);
}

/* ---- real faults ---- */

/* writes text into a /proc/self file (uid_map, gid_map, setgroups); 0 or -1 */
static int proc_write(const char *name, const char *text) {
    char path[64];
    snprintf(path, sizeof path, "/proc/self/%s", name);
    int fd = open(path, O_WRONLY | O_CLOEXEC);
    if (fd < 0) return -1;
    ssize_t len = (ssize_t)strlen(text);
    int ok = write(fd, text, (size_t)len) == len;
    return close(fd) == 0 && ok ? 0 : -1;
}

int ts_private_mounts(char *why, size_t n) {
    uid_t uid = geteuid();
    gid_t gid = getegid();
    int how = 0; /* 0: a mount namespace (root); 1: a user namespace too */
    if (getenv("AG_TEST_NO_NAMESPACES")) { /* to test the fallbacks (.ci/run) */
        snprintf(why, n, "AG_TEST_NO_NAMESPACES is set");
        return -1;
    }
    if (uid != 0 || unshare(CLONE_NEWNS) != 0) {
        how = 1;
        if (unshare(CLONE_NEWUSER | CLONE_NEWNS) != 0) {
            snprintf(why, n, "no private mount namespace here (unshare: %s%s)", strerror(errno),
                     errno == EINVAL ? "; a user namespace needs a process with one thread" : "");
            return -1;
        }
        /* uid 0 inside is this user outside; setgroups must be denied before gid_map */
        char map[64];
        snprintf(map, sizeof map, "0 %ld 1\n", (long)uid);
        int rc = proc_write("uid_map", map);
        snprintf(map, sizeof map, "0 %ld 1\n", (long)gid);
        if (rc == 0) rc = proc_write("setgroups", "deny");
        if (rc == 0) rc = proc_write("gid_map", map);
        if (rc != 0) {
            snprintf(why, n, "a user namespace, but no uid/gid map in it: %s", strerror(errno));
            return -1;
        }
    }
    /* mounts made here must not propagate back to the parent namespace */
    if (mount("none", "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0) {
        snprintf(why, n, "%s, but / cannot be made private: %s",
                 how ? "a user namespace" : "a mount namespace", strerror(errno));
        return -1;
    }
    return 0;
}

int ts_mount_tmpfs(const char *dir, const char *size, int ro, char *why, size_t n) {
    char opts[64];
    snprintf(opts, sizeof opts, "size=%s", size);
    if (mount("tmpfs", dir, "tmpfs", 0, opts) != 0 ||
        (ro && mount(NULL, dir, NULL, MS_REMOUNT | MS_RDONLY, opts) != 0)) {
        snprintf(why, n, "mount a %s tmpfs%s on %.200s: %s", size, ro ? " read-only" : "", dir,
                 strerror(errno));
        return -1;
    }
    return 0;
}

int ts_hold_tmpfs(const char *dir, const char *size, char *path, char *why, size_t n) {
    int up[2];
    if (pipe(up) != 0) {
        snprintf(why, n, "pipe: %s", strerror(errno));
        return -1;
    }
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) {
        snprintf(why, n, "fork: %s", strerror(errno));
        return -1;
    }
    if (pid == 0) { /* one thread here: it may enter a user namespace */
        close(up[0]);
        prctl(PR_SET_PDEATHSIG, SIGKILL); /* never outlives the test */
        char msg[256] = "";
        if (ts_private_mounts(msg, sizeof msg) == 0) ts_mount_tmpfs(dir, size, 0, msg, sizeof msg);
        ssize_t len = (ssize_t)strlen(msg);
        if (write(up[1], msg[0] ? msg : "ok", msg[0] ? (size_t)len : 2) < 0) _exit(1);
        close(up[1]);
        for (;;) pause(); /* until ts_release_tmpfs */
    }
    close(up[1]);
    char msg[256];
    ssize_t got = read(up[0], msg, sizeof msg - 1);
    close(up[0]);
    msg[got > 0 ? got : 0] = 0;
    if (strcmp(msg, "ok") != 0) {
        snprintf(why, n, "%s", got > 0 ? msg : "the namespace child died");
        ts_release_tmpfs(pid);
        return -1;
    }
    snprintf(path, 512, "/proc/%ld/root%.400s", (long)pid, dir);
    return (int)pid;
}

void ts_release_tmpfs(int pid) {
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
}
