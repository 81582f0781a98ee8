/* file.c: opening a path to read (regular files only) and replacing a file through a temporary
 * name (file.h). The kind of what stands at a path is read with lstat or fstat, never by opening
 * it in a way that could block (a FIFO is opened O_NONBLOCK, then refused).
 * Not here: the formats that use these (npz_read.c, npz_write.c, src/text). */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../tensor/tensor.h" /* ag_fail, AG_CHECK */
#include "file.h"

char *io_path_join(const char *dir, const char *name) {
    AG_CHECK_ARG(dir);
    AG_CHECK_ARG(name);
    size_t a = strlen(dir), b = strlen(name);
    int slash = a > 0 && dir[a - 1] != '/';
    char *p = malloc(a + (size_t)slash + b + 1);
    AG_CHECK(p != NULL, "io_path_join: out of memory for %zu bytes", a + b + 2);
    memcpy(p, dir, a);
    if (slash) p[a] = '/';
    memcpy(p + a + (size_t)slash, name, b + 1);
    return p;
}

/* the kind of a file that is not a regular one, for messages */
static const char *kind_of(mode_t m) {
    return S_ISDIR(m)    ? "a folder"
           : S_ISFIFO(m) ? "a FIFO"
           : S_ISCHR(m)  ? "a character device"
           : S_ISBLK(m)  ? "a block device"
           : S_ISSOCK(m) ? "a socket"
           : S_ISLNK(m)  ? "a symbolic link"
                         : "an unknown kind";
}

/* Opens path without blocking (a FIFO with no writer must not hang) and checks its kind: a
 * regular file, or also a FIFO or pipe when wait_ms >= 0, which must then get data or its end
 * within wait_ms. AG_OK with *fd (blocking again) and *size, or AG_ERR_IO naming path. */
static int open_checked(const char *path, int wait_ms, int *fd, uint64_t *size) {
    *fd = -1;
    if (size) *size = 0;
    if (!*path) return ag_fail(AG_ERR_IO, "'': cannot open: an empty path");
    int d = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
    if (d < 0) return ag_fail(AG_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    struct stat st;
    int rc = AG_OK, pipe = 0;
    if (fstat(d, &st) != 0)
        rc = ag_fail(AG_ERR_IO, "%s: cannot stat: %s", path, strerror(errno));
    else if (!S_ISREG(st.st_mode) && !(pipe = wait_ms >= 0 && S_ISFIFO(st.st_mode)))
        rc = ag_fail(AG_ERR_IO, "%s: not a regular file (%s): only regular files %sare read", path,
                     kind_of(st.st_mode), wait_ms >= 0 ? "and pipes " : "");
    if (rc == AG_OK && pipe) { /* a writer must come: data, or its end */
        struct pollfd p = {.fd = d, .events = POLLIN};
        int got;
        while ((got = poll(&p, 1, wait_ms)) < 0 && errno == EINTR) {
        }
        if (got < 0)
            rc = ag_fail(AG_ERR_IO, "%s: cannot read: %s", path, strerror(errno));
        else if (got == 0)
            rc = ag_fail(AG_ERR_IO, "%s: a FIFO that nothing was written to in %g s", path,
                         wait_ms / 1000.0);
    }
    if (rc == AG_OK && fcntl(d, F_SETFL, fcntl(d, F_GETFL) & ~O_NONBLOCK) != 0)
        rc = ag_fail(AG_ERR_IO, "%s: cannot read: %s", path, strerror(errno));
    if (rc != AG_OK) {
        close(d);
        return rc;
    }
    *fd = d;
    if (size && !pipe) *size = (uint64_t)st.st_size;
    return AG_OK;
}

int io_open_read(const char *path, int *fd, uint64_t *size) {
    AG_CHECK_ARG(path);
    AG_CHECK_ARG(fd);
    return open_checked(path, -1, fd, size);
}

/* fd as a stdio stream, or closed with an error naming path */
static int as_stream(const char *path, int fd, FILE **f) {
    *f = fdopen(fd, "rb");
    if (*f) return AG_OK;
    int err = errno;
    close(fd);
    return ag_fail(AG_ERR_IO, "%s: cannot read: %s", path, strerror(err));
}

int io_fopen_read(const char *path, FILE **f, uint64_t *size) {
    AG_CHECK_ARG(path);
    AG_CHECK_ARG(f);
    *f = NULL;
    int fd, rc = open_checked(path, -1, &fd, size);
    return rc != AG_OK ? rc : as_stream(path, fd, f);
}

int io_fopen_stream(const char *path, int wait_ms, FILE **f) {
    AG_CHECK_ARG(path);
    AG_CHECK_ARG(f);
    *f = NULL;
    int fd, rc = open_checked(path, wait_ms < 0 ? 0 : wait_ms, &fd, NULL);
    return rc != AG_OK ? rc : as_stream(path, fd, f);
}

int io_check_replace(const char *path) {
    AG_CHECK_ARG(path);
    struct stat st;
    if (lstat(path, &st) != 0) {
        if (errno == ENOENT) return AG_OK;
        return ag_fail(AG_ERR_IO, "%s: cannot write: %s", path, strerror(errno));
    }
    if (S_ISREG(st.st_mode)) return AG_OK;
    return ag_fail(AG_ERR_IO,
                   "%s: not a regular file (%s): not replaced (only a regular file or a new "
                   "name is)",
                   path, kind_of(st.st_mode));
}

int io_temp_create(const char *path, int *fd, char **tmp) {
    AG_CHECK_ARG(path);
    AG_CHECK_ARG(fd);
    AG_CHECK_ARG(tmp);
    *fd = -1;
    *tmp = NULL;
    int rc = io_check_replace(path);
    if (rc != AG_OK) return rc;
    size_t cap = strlen(path) + 32;
    char *t = malloc(cap);
    if (!t) return ag_fail(AG_ERR_NOMEM, "%s: out of memory", path);
    snprintf(t, cap, "%s.tmp.%ld", path, (long)getpid());
    /* a temporary file left by an interrupted run of the same pid is ours to remove; a link or
     * anything else of that name stays, and O_EXCL then refuses it */
    struct stat st;
    if (lstat(t, &st) == 0 && S_ISREG(st.st_mode)) unlink(t);
    int d = open(t, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
    if (d < 0) {
        int err = errno;
        rc = ag_fail(AG_ERR_IO, "%s: cannot create the temporary file '%s': %s", path, t,
                     strerror(err));
        free(t);
        return rc;
    }
    *fd = d;
    *tmp = t;
    return AG_OK;
}

int io_replace(const char *tmp, const char *path) {
    AG_CHECK_ARG(tmp);
    AG_CHECK_ARG(path);
    int rc = io_check_replace(path);
    if (rc != AG_OK) return rc;
    if (rename(tmp, path) != 0)
        return ag_fail(AG_ERR_IO, "%s: cannot rename '%s' over it: %s", path, tmp, strerror(errno));
    return AG_OK;
}

int io_fopen_write(const char *path, FILE **f, char **tmp) {
    AG_CHECK_ARG(f);
    AG_CHECK_ARG(tmp);
    *f = NULL;
    int fd, rc = io_temp_create(path, &fd, tmp);
    if (rc != AG_OK) return rc;
    *f = fdopen(fd, "w");
    if (*f) return AG_OK;
    rc = ag_fail(AG_ERR_IO, "%s: cannot write '%s': %s", path, *tmp, strerror(errno));
    close(fd);
    unlink(*tmp);
    free(*tmp);
    *tmp = NULL;
    return rc;
}

int io_fclose_replace(FILE *f, char *tmp, const char *path) {
    AG_CHECK_ARG(f);
    AG_CHECK_ARG(tmp);
    AG_CHECK_ARG(path);
    int err = ferror(f) ? (errno ? errno : EIO) : 0;
    if (!err && fflush(f) != 0) err = errno;
    if (!err && fsync(fileno(f)) != 0 && errno != EINVAL) err = errno;
    if (fclose(f) != 0 && !err) err = errno;
    int rc = err ? ag_fail(AG_ERR_IO, "%s: cannot write: %s", path, strerror(err))
                 : io_replace(tmp, path);
    if (rc != AG_OK) unlink(tmp);
    free(tmp);
    return rc;
}

int io_write_file(const char *path, const void *bytes, size_t n) {
    AG_CHECK_ARG(path);
    AG_CHECK(bytes || n == 0, "io_write_file: argument 'bytes' is NULL (%zu bytes)", n);
    FILE *f;
    char *tmp;
    int rc = io_fopen_write(path, &f, &tmp);
    if (rc == AG_OK && n) fwrite(bytes, 1, n, f); /* a short write sets ferror: seen below */
    return rc == AG_OK ? io_fclose_replace(f, tmp, path) : rc;
}

int io_read_all(FILE *f, size_t max, const char *label, char **text, size_t *n) {
    AG_CHECK_ARG(f);
    AG_CHECK_ARG(label);
    AG_CHECK_ARG(text);
    AG_CHECK_ARG(n);
    AG_CHECK(max < SIZE_MAX / 4, "io_read_all: %s: a limit of %zu bytes", label, max);
    size_t cap = max < 4096 ? max + 1 : 4096;
    char *buf = malloc(cap);
    AG_CHECK(buf, "io_read_all: %s: out of memory", label);
    *n = 0;
    for (size_t got = 1; got > 0 && *n <= max;) {
        if (*n + 1 >= cap) { /* room for one byte past max (to see it) and the NUL */
            cap = cap > max / 2 ? max + 2 : 2 * cap;
            buf = realloc(buf, cap);
            AG_CHECK(buf, "io_read_all: %s: out of memory for %zu bytes", label, cap);
        }
        got = fread(buf + *n, 1, cap - 1 - *n, f);
        *n += got;
    }
    int rc = AG_OK;
    if (ferror(f))
        rc = ag_fail(AG_ERR_IO, "%s: cannot read: %s", label, strerror(errno));
    else if (*n > max)
        rc = ag_fail(AG_ERR_ARG, "%s: more than %zu bytes", label, max);
    if (rc != AG_OK) {
        free(buf);
        *text = NULL, *n = 0;
        return rc;
    }
    buf[*n] = '\0';
    *text = buf;
    return AG_OK;
}
