/* files.c: the folder and file helpers of files.h (see there). Not Criterion's cr_assert: the
 * support objects link into tools without Criterion too, so a failure prints and aborts (the
 * test then shows as crashed, with the message on stderr). */
#include "files.h"

#include <dirent.h>
#include <fcntl.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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

void ts_write_text(const char *path, const char *text) {
    FILE *f = fopen(path, "wb");
    FILES_CHECK(f != NULL, "%s: %s", path, strerror(errno));
    FILES_CHECK(fputs(text, f) >= 0 && fclose(f) == 0, "%s: %s", path, strerror(errno));
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

int ts_start(const char *dir, const char *const *args, const char *in) {
    const char *bin = getenv("AG_TRANSLATE_BIN");
    FILES_CHECK(bin && *bin && access(bin, X_OK) == 0,
                "AG_TRANSLATE_BIN is not set or not a program: run the suite with make test");
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
