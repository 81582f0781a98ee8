/* util.c: small helpers the example's files share: allocation that aborts when memory runs
 * out (as the library's arenas do), and mkdir -p.
 * Not here: anything about the model or the data. Read next: vocab.c. */
#include "translate.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

void *tr_malloc(size_t bytes) {
    void *p = malloc(bytes ? bytes : 1);
    AG_CHECK(p != NULL, "translate: out of memory (%zu bytes)", bytes);
    return p;
}

void *tr_calloc(size_t n, size_t size) {
    void *p = calloc(n ? n : 1, size ? size : 1);
    AG_CHECK(p != NULL, "translate: out of memory (%zu x %zu bytes)", n, size);
    return p;
}

int tr_make_dirs(const char *path) {
    char buf[600];
    snprintf(buf, sizeof buf, "%s", path);
    for (char *p = buf + 1;; p++) {
        if (*p == '/' || *p == '\0') {
            char c = *p;
            *p = '\0';
            if (mkdir(buf, 0777) != 0 && errno != EEXIST)
                return ag_fail(AG_ERR_IO, "%s: cannot create the folder: %s", buf, strerror(errno));
            *p = c;
            if (!c) break;
        }
    }
    struct stat s;
    if (stat(path, &s) != 0 || !S_ISDIR(s.st_mode))
        return ag_fail(AG_ERR_IO, "%s: not a folder", path);
    return AG_OK;
}
