/* file.h: the one way attograd opens a path to read and the one way it replaces a file.
 * Reading: io_open_read opens a regular file and nothing else (a FIFO, a device, a folder or a
 * socket is refused naming the path and its kind, without blocking on a FIFO). Writing: a file is
 * written into a temporary name beside it (io_temp_create: created new, never through a symbolic
 * link), then io_replace renames it over the target, which must be a regular file or a missing
 * name (a device, a FIFO, a folder or a symbolic link there is refused, and stays as it was).
 * Paths are joined with io_path_join (allocated, never cut). Every error is AG_ERR_IO with a
 * message naming the path and the reason.
 * Not here: the formats (npz_read.c, npz_write.c, src/text/shards.c use these). Read next:
 * npz_write.c (npz_write: temporary file, fsync, io_replace, fsync of the folder). */
#ifndef ATTOGRAD_IO_FILE_H
#define ATTOGRAD_IO_FILE_H

#include <stdint.h>
#include <stdio.h>

/* "dir/name", malloc'd (aborts when out of memory); dir "" gives name. */
char *io_path_join(const char *dir, const char *name);

/* Opens path for reading: AG_OK and *fd (close-on-exec, blocking) with *size its bytes, or
 * AG_ERR_IO: "PATH: cannot open: REASON", "PATH: not a regular file (a FIFO, a named pipe): only
 * regular files are read", "(a character device)", "(a folder)". Never blocks on a FIFO. */
int io_open_read(const char *path, int *fd, uint64_t *size);
/* io_open_read as a stdio stream ("rb") */
int io_fopen_read(const char *path, FILE **f, uint64_t *size);

/* For an input documented as a stream: a regular file, or a pipe or FIFO. A FIFO is opened
 * without blocking, then waited for at most wait_ms milliseconds until a writer sends data or
 * closes it: a FIFO nobody writes to is AG_ERR_IO ("PATH: a FIFO that nothing was written to in
 * 10 s") instead of a hang. Anything else is refused as io_open_read refuses it. *f is blocking
 * afterwards ("rb"). */
int io_fopen_stream(const char *path, int wait_ms, FILE **f);

/* What stands at path, for a writer about to replace it: AG_OK when nothing does or a regular
 * file; else AG_ERR_IO "PATH: not a regular file (a character device): not replaced (only a regular
 * file or a new name is)". Symbolic links are not followed: a link is refused as such. */
int io_check_replace(const char *path);
/* Creates "<path>.tmp.<pid>" new for writing (O_EXCL | O_NOFOLLOW; a stale regular file of that
 * name is removed first): AG_OK with *fd and *tmp (malloc'd), or AG_ERR_IO naming path and tmp.
 * It checks path with io_check_replace first. */
int io_temp_create(const char *path, int *fd, char **tmp);
/* Renames tmp over path after io_check_replace (again: the check runs just before the rename).
 * On failure tmp is left for the caller to remove. AG_OK or AG_ERR_IO naming path. */
int io_replace(const char *tmp, const char *path);

/* A text file written as a stream with the same care: io_fopen_write opens *f on a new temporary
 * file beside path (io_temp_create; *tmp malloc'd); io_fclose_replace flushes, fsyncs and closes
 * it and renames it over path (io_replace), or on any failure (a write error seen by ferror
 * included) removes it; either way it frees tmp. Both return AG_OK or AG_ERR_IO naming path. */
int io_fopen_write(const char *path, FILE **f, char **tmp);
int io_fclose_replace(FILE *f, char *tmp, const char *path);
/* n bytes (NULL when n is 0) written as a whole file at path the same way (io_fopen_write,
 * io_fclose_replace): AG_OK or AG_ERR_IO naming path; path stays as it was on failure. */
int io_write_file(const char *path, const void *bytes, size_t n);

/* All of the stream f, at most max bytes, into *text (malloc'd, a NUL after its *n bytes; the
 * buffer grows with what f really holds): AG_OK, AG_ERR_ARG "LABEL: more than MAX bytes", or
 * AG_ERR_IO "LABEL: cannot read: REASON" (nothing allocated then). f stays open (stdin too). */
int io_read_all(FILE *f, size_t max, const char *label, char **text, size_t *n);

#endif
