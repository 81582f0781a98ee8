/* expect_abort.c: fork, capture stderr through a pipe, wait, report. POSIX only.
 * Under AddressSanitizer (make DEBUG=1) abort() still ends the process with SIGABRT (ASan does
 * not handle SIGABRT by default), and the child leaves with _exit, so LeakSanitizer does not
 * report the arenas a misuse case leaves behind. */
#include "expect_abort.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

void capture_run(void (*fn)(void *ctx), void *ctx, Capture *c) {
    memset(c, 0, sizeof *c);
    c->exit_code = -1;
    int fd[2];
    if (pipe(fd) != 0) {
        snprintf(c->err, sizeof c->err, "capture_run: pipe failed: %s", strerror(errno));
        return;
    }
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid < 0) {
        snprintf(c->err, sizeof c->err, "capture_run: fork failed: %s", strerror(errno));
        close(fd[0]);
        close(fd[1]);
        return;
    }
    if (pid == 0) {
        /* no core files from the expected aborts; a hang ends with SIGALRM, not SIGABRT */
        struct rlimit no_core = {0, 0};
        setrlimit(RLIMIT_CORE, &no_core);
        signal(SIGABRT, SIG_DFL);
        alarm(20);
        close(fd[0]);
        dup2(fd[1], STDERR_FILENO);
        close(fd[1]);
        fn(ctx);
        fflush(stderr);
        _exit(0);
    }
    close(fd[1]);
    /* read until EOF; past the buffer keep draining so the child never blocks on a full pipe */
    char sink[512];
    for (;;) {
        size_t room = sizeof c->err - 1 - c->err_len;
        char *dst = room ? c->err + c->err_len : sink;
        ssize_t n = read(fd[0], dst, room ? room : sizeof sink);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break;
        if (room) c->err_len += (size_t)n;
    }
    c->err[c->err_len] = '\0';
    close(fd[0]);
    /* Under qemu-user (make test-arm64 sets AG_TEST_QEMU) the emulator itself writes one line
     * to the stderr of a program that dies of a signal: "qemu: uncaught target signal 6
     * (Aborted) - core dumped". It is not the program's: it is taken out. */
    const char *qemu_line = "qemu: uncaught target signal ";
    char *q = getenv("AG_TEST_QEMU") ? strstr(c->err, qemu_line) : NULL;
    if (q) {
        char *end = strchr(q, '\n');
        end = end ? end + 1 : c->err + c->err_len;
        memmove(q, end, (size_t)(c->err + c->err_len - end) + 1);
        c->err_len -= (size_t)(end - q);
    }
    int status;
    pid_t w;
    do w = waitpid(pid, &status, 0);
    while (w < 0 && errno == EINTR);
    if (w < 0) {
        snprintf(c->err + c->err_len, sizeof c->err - c->err_len,
                 "\ncapture_run: waitpid failed: %s", strerror(errno));
        return;
    }
    if (WIFSIGNALED(status)) c->signal = WTERMSIG(status);
    if (WIFEXITED(status)) c->exit_code = WEXITSTATUS(status);
}

int capture_aborted(const Capture *c) { return c->signal == SIGABRT; }

int capture_has(const Capture *c, const char *s) { return strstr(c->err, s) != NULL; }

int capture_file_line(const Capture *c, char *file, size_t file_size, int *line,
                      const char **rest) {
    const char *colon = strchr(c->err, ':');
    if (!colon || colon - c->err < 3 || strncmp(colon - 2, ".c", 2) != 0) return 0;
    const char *p = colon + 1;
    int n = 0, digits = 0;
    while (*p >= '0' && *p <= '9' && digits < 9) n = n * 10 + (*p++ - '0'), digits++;
    if (digits == 0 || n <= 0 || p[0] != ':' || p[1] != ' ') return 0;
    for (const char *q = c->err; q < colon; q++)
        if (*q == '\n' || *q == ' ') return 0;
    if (file) snprintf(file, file_size, "%.*s", (int)(colon - c->err), c->err);
    if (line) *line = n;
    if (rest) *rest = p + 2;
    return 1;
}
