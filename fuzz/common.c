/* common.c: the helpers of fuzz.h: inputs as files (memfd), a .npy wrapped in a zip, the
 * check of a failure's code and message. Built with clang for libFuzzer and with gcc for the
 * replay (make test). */
#define _GNU_SOURCE /* memfd_create */
#include <errno.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include <zlib.h>

#include "fuzz.h"

typedef struct {
    int fd;
    char path[64];
} MemFile;

static const char *mem_write(MemFile *m, const char *name, const void *data, size_t size) {
    if (m->fd <= 0) {
        m->fd = memfd_create(name, 0);
        FUZZ_CHECK(m->fd >= 0, "memfd_create: %s", strerror(errno));
        snprintf(m->path, sizeof m->path, "/proc/self/fd/%d", m->fd);
    }
    FUZZ_CHECK(ftruncate(m->fd, 0) == 0, "ftruncate: %s", strerror(errno));
    size_t done = 0;
    while (done < size) {
        ssize_t k = pwrite(m->fd, (const char *)data + done, size - done, (off_t)done);
        FUZZ_CHECK(k > 0, "pwrite: %s", strerror(errno));
        done += (size_t)k;
    }
    return m->path;
}

static MemFile file1, file2;
const char *fuzz_file(const void *data, size_t size) {
    return mem_write(&file1, "fuzz", data, size);
}
const char *fuzz_file2(const void *data, size_t size) {
    return mem_write(&file2, "fuzz2", data, size);
}

static unsigned char *le(unsigned char *p, uint32_t v, int bytes) {
    for (int i = 0; i < bytes; i++) p[i] = (unsigned char)(v >> (8 * i));
    return p + bytes;
}

const char *fuzz_npy_as_npz(const void *data, size_t size) {
    /* local header (30) + "x.npy" + data + central header (46) + "x.npy" + end record (22) */
    static const char name[] = "x.npy";
    const uint32_t nlen = 5, sz = (uint32_t)size;
    uint32_t crc = (uint32_t)crc32(0, (const Bytef *)data, (uInt)size);
    size_t total = 30 + nlen + size + 46 + nlen + 22;
    unsigned char *z = malloc(total), *p = z;
    FUZZ_CHECK(z != NULL && size < 0xFFFFFFFFu, "input too large");
    p = le(p, 0x04034b50u, 4), p = le(p, 20, 2), p = le(p, 0, 2), p = le(p, 0, 2);
    p = le(p, 0, 2), p = le(p, 0x21, 2), p = le(p, crc, 4), p = le(p, sz, 4), p = le(p, sz, 4);
    p = le(p, nlen, 2), p = le(p, 0, 2);
    memcpy(p, name, nlen), p += nlen;
    if (size) memcpy(p, data, size);
    p += size;
    uint32_t cd_off = (uint32_t)(p - z);
    p = le(p, 0x02014b50u, 4), p = le(p, 20, 2), p = le(p, 20, 2), p = le(p, 0, 2);
    p = le(p, 0, 2), p = le(p, 0, 2), p = le(p, 0x21, 2), p = le(p, crc, 4), p = le(p, sz, 4);
    p = le(p, sz, 4), p = le(p, nlen, 2), p = le(p, 0, 2), p = le(p, 0, 2), p = le(p, 0, 2);
    p = le(p, 0, 2), p = le(p, 0, 4), p = le(p, 0, 4);
    memcpy(p, name, nlen), p += nlen;
    uint32_t cd_size = (uint32_t)(p - z) - cd_off;
    p = le(p, 0x06054b50u, 4), p = le(p, 0, 2), p = le(p, 0, 2), p = le(p, 1, 2), p = le(p, 1, 2);
    p = le(p, cd_size, 4), p = le(p, cd_off, 4), p = le(p, 0, 2);
    FUZZ_CHECK((size_t)(p - z) == total, "zip layout");
    const char *path = fuzz_file(z, total);
    free(z);
    return path;
}

void fuzz_check_failure(int rc, const char *what) {
    FUZZ_CHECK(rc == AG_ERR_IO || rc == AG_ERR_FORMAT || rc == AG_ERR_SHAPE || rc == AG_ERR_NOMEM ||
                   rc == AG_ERR_ARG || rc == AG_ERR_RANGE,
               "unknown error code %d (%s)", rc, ag_last_error());
    const char *msg = ag_last_error();
    FUZZ_CHECK(msg && strncmp(msg, what, strlen(what)) == 0,
               "the message does not start with '%s': %s", what, msg ? msg : "(null)");
}
