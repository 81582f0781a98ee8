/* files.c: the folder and file helpers of files.h (see there). Not Criterion's cr_assert: the
 * support objects link into tools without Criterion too, so a failure prints and aborts (the
 * test then shows as crashed, with the message on stderr). */
#include "files.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
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
