/* files.h: temporary folders and small files for the tests that run programs or write data
 * (tests/examples/): generated copy tasks, edited copies of .npz files, two files compared byte
 * for byte or as logs but for a column; and runs the example programs. A failure prints the path
 * and reason and aborts. What it does not do: decide what a test expects (the test asserts it).
 * Read next: tests/examples/test_translate.c. */
#ifndef AG_TESTS_FILES_H
#define AG_TESTS_FILES_H

#include <stddef.h>
#include <stdint.h>

/* a fresh folder /tmp/attograd-<tag>.XXXXXX, its path in dir (n bytes) */
void ts_tmp_dir(char *dir, size_t n, const char *tag);
/* removes dir and everything below it (links are removed, not followed) */
void ts_rm_tree(const char *dir);
/* dir/name into buf, which holds 512 bytes; returns buf */
char *ts_join(char *buf, const char *dir, const char *name);
/* path holds exactly the n bytes of b, or text, afterwards */
void ts_write_bytes(const char *path, const void *b, size_t n);
void ts_write_text(const char *path, const char *text);
/* the whole file (malloc'd, NUL-terminated; its length in *len when len), or NULL if it cannot
 * be read */
char *ts_slurp(const char *path, size_t *len);
/* ts_slurp that aborts naming the path when the file cannot be read */
char *ts_read_text(const char *path, size_t *len);
/* 1 when the files a and b hold the same bytes, else 0; aborts naming a file it cannot read */
int ts_same_file(const char *a, const char *b);
/* The CSV file at path with the text of column col (0 the first) left out, its commas kept: a
 * malloc'd text, for comparing two runs' logs but for a timing column. Aborts naming the path
 * when it cannot be read or a row lacks its '\n'. */
char *ts_csv_drop_column(const char *path, int col);

/* A task for attograd-translate in path: n pairs "source<TAB>target" of random sequences of
 * min_len..max_len letters among the first `alphabet` (separated by spaces), drawn from seed; the
 * target is the source (copy) or, when reverse, the source reversed. max_len at most 32. */
void ts_write_copy_task(const char *path, int n, int reverse, uint64_t seed, int min_len,
                        int max_len, int alphabet);

/* ---- edited copies of .npz files (checkpoints a test corrupts on purpose) ---- */

/* Copies the .npz src to dst (which may be src) with element index of entry name set: a float
 * entry's to x, an integer one's to i; index -1: every element. Index -2: the entry is dropped
 * (when there) and an entry name of i zero bytes ('|u1') is added instead. Aborts naming src when
 * the entry is absent (index -1 or more) or has no element index. The result is a valid .npz. */
void ts_npz_edit(const char *src, const char *dst, const char *name, long index, double x,
                 int64_t i);
/* ts_npz_edit setting every element of the float entry name near the largest finite value of
 * its dtype (3e38 in float32, 1e308 in float64): a weight that is finite but makes a model's
 * values overflow (the hostile-checkpoint tests). Returns dst. */
const char *ts_npz_overflow(const char *src, const char *dst, const char *name);

/* ---- running attograd-translate (AG_TRANSLATE_BIN, which make test sets) ---- */
typedef struct {
    int code; /* exit status, or 128 + signal */
    char *out, *err;
} TsRun;

/* Starts the program with the NULL-terminated args, stdin from the text in (or /dev/null when
 * NULL), stdout and stderr into files of dir (never the run's output folder, which a test may
 * make read-only or full). Returns the pid. */
int ts_start(const char *dir, const char *const *args, const char *in);
/* ts_start of the program the environment variable bin_var names (AG_GPT_BIN: attograd-gpt) */
int ts_start_env(const char *bin_var, const char *dir, const char *const *args, const char *in);
/* Waits for pid and reads what it printed */
TsRun ts_finish(const char *dir, int pid);
TsRun ts_run(const char *dir, const char *const *args, const char *in);
void ts_run_free(TsRun *r);
/* Runs the program bin_var names with args (ts_start_env); 1 when it exits with want and its
 * stderr names each of the NULL-terminated strings says (NULL: none), else 0 with why (n bytes)
 * saying what differed, stdout and stderr included. */
int ts_exits_with(const char *bin_var, const char *dir, const char *const *args, int want,
                  const char *const *says, char *why, size_t n);

/* ---- real faults: a full disk, a read-only folder, for root and for other users ---- */

/* Moves the calling process into a mount namespace of its own, where it may mount: as root with
 * unshare(CLONE_NEWNS); otherwise (or as root where that is refused) inside a new user namespace
 * as well, where it is uid 0, mapped to its own uid outside. Mounts made afterwards are seen by
 * this process and its children only and vanish with them. The process must have one thread (a
 * forked child, or a test before any thread starts). Returns 0, or -1 with the reason in why (n
 * bytes): a container without namespaces, user namespaces turned off, or AG_TEST_NO_NAMESPACES
 * set in the environment (which shows what the tests do on such a machine). */
int ts_private_mounts(char *why, size_t n);
/* A tmpfs of `size` bytes (mount's syntax: "64k", "2m") on dir, read-only when ro; call
 * ts_private_mounts first. Returns 0, or -1 with the reason in why. */
int ts_mount_tmpfs(const char *dir, const char *size, int ro, char *why, size_t n);
/* For a process that cannot enter a namespace itself (a Criterion test has two threads, and a
 * user namespace takes one): a child process enters one (ts_private_mounts) and mounts a tmpfs of
 * `size` on dir; this process and the programs it runs reach that tmpfs as
 * /proc/<child>/root<dir>, written into path (512 bytes). Returns the child's pid, for
 * ts_release_tmpfs, or -1 with the reason in why. */
int ts_hold_tmpfs(const char *dir, const char *size, char *path, char *why, size_t n);
/* ends the child of ts_hold_tmpfs; its tmpfs and everything in it go with it */
void ts_release_tmpfs(int pid);

#endif
