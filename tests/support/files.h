/* files.h: temporary folders and small files for the tests that run programs or write data
 * (tests/examples/). A failure prints the path and reason and aborts. What it does not do:
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

#endif
