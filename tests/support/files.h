/* files.h: temporary folders and small files for the tests that run programs or write data
 * (tests/examples/), and runs the example program. A failure prints the path and reason and aborts. What it does not do:
 * compare files (each test says what it expects). Read next: tests/examples/test_translate.c. */
#ifndef AG_TESTS_FILES_H
#define AG_TESTS_FILES_H

#include <stddef.h>

/* a fresh folder /tmp/attograd-<tag>.XXXXXX, its path in dir (n bytes) */
void ts_tmp_dir(char *dir, size_t n, const char *tag);
/* removes dir and everything below it (links are removed, not followed) */
void ts_rm_tree(const char *dir);
/* dir/name into buf, which holds 512 bytes; returns buf */
char *ts_join(char *buf, const char *dir, const char *name);
/* path holds exactly text afterwards */
void ts_write_text(const char *path, const char *text);
/* the whole file (malloc'd, NUL-terminated; its length in *len when len), or NULL if it cannot
 * be read */
char *ts_slurp(const char *path, size_t *len);
/* ts_slurp that aborts naming the path when the file cannot be read */
char *ts_read_text(const char *path, size_t *len);

/* ---- running attograd-translate (AG_TRANSLATE_BIN, which make test sets) ---- */
typedef struct {
    int code; /* exit status, or 128 + signal */
    char *out, *err;
} TsRun;

/* Starts the program with the NULL-terminated args, stdin from the text in (or /dev/null when
 * NULL), stdout and stderr into files of dir (never the run's output folder, which a test may
 * make read-only or full). Returns the pid. */
int ts_start(const char *dir, const char *const *args, const char *in);
/* Waits for pid and reads what it printed */
TsRun ts_finish(const char *dir, int pid);
TsRun ts_run(const char *dir, const char *const *args, const char *in);
void ts_run_free(TsRun *r);

#endif
