/* expect_abort.h: runs a piece of code in a child process and reports how it ended and what
 * it wrote to stderr, so a test can check both that misuse aborts and what the message says.
 * Criterion's `.signal = SIGABRT` checks only the first; the tests of error messages
 * (tests/autograd/test_errors.c, tests/tensor/test_arena.c) use this for the second.
 * Not here: the tables of misuse cases (in those test files). */
#ifndef ATTOGRAD_TEST_EXPECT_ABORT_H
#define ATTOGRAD_TEST_EXPECT_ABORT_H

#include <stddef.h>

#define CAPTURE_MAX 4096

typedef struct {
    int signal;            /* the signal that ended the child, 0 if it exited */
    int exit_code;         /* its exit status if it exited, else -1 */
    char err[CAPTURE_MAX]; /* what it wrote to stderr, NUL-terminated (truncated if longer) */
    size_t err_len;
} Capture;

/* Forks; the child sends stderr into a pipe, runs fn(ctx) and exits with status 0 if fn
 * returns (with _exit: no atexit handlers, no leak check). The parent collects the text and
 * how the child ended into *c. The child is killed by SIGALRM after 20 s, so a hang fails. */
void capture_run(void (*fn)(void *ctx), void *ctx, Capture *c);

/* 1 if the child ended by SIGABRT. */
int capture_aborted(const Capture *c);
/* 1 if the captured stderr contains s. */
int capture_has(const Capture *c, const char *s);
/* 1 if the text starts with a "file.c:LINE: " prefix (as ag_abort writes it); the file and
 * line go to file/line when not NULL, and *rest (when not NULL) to the text after the prefix. */
int capture_file_line(const Capture *c, char *file, size_t file_size, int *line, const char **rest);

#endif
