/* npz_internal.h: what npz_write.c, npz_read.c and npz_params.c share: the zip record layouts
 * (signatures and sizes from PKWARE's APPNOTE.TXT, sections 4.3 and 4.5), little-endian field
 * helpers, the dtype table, and a fault-injection hook for tests of failed writes.
 * Not here: the public API (npz.h). */
#ifndef ATTOGRAD_NPZ_INTERNAL_H
#define ATTOGRAD_NPZ_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "npz.h"

/* Array data is copied between memory and file as is: the host must be little-endian, like
 * the files (x86-64, arm64). A big-endian port would swap bytes in npz_write.c and npz_read.c. */
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "attograd's .npz code assumes a little-endian host"
#endif

/* ---- zip records (APPNOTE.TXT 4.3.7, 4.3.12, 4.3.14-16, 4.5.3) ---- */
#define ZIP_LOCAL_SIG 0x04034b50u   /* "PK\3\4" local file header, 30 bytes + name + extra */
#define ZIP_CENTRAL_SIG 0x02014b50u /* "PK\1\2" central directory header, 46 + name + ... */
#define ZIP_END_SIG 0x06054b50u     /* "PK\5\6" end of central directory, 22 bytes + comment */
#define ZIP64_END_SIG 0x06064b50u   /* "PK\6\6" ZIP64 end of central directory, 56 bytes */
#define ZIP64_LOC_SIG 0x07064b50u   /* "PK\6\7" ZIP64 end locator, 20 bytes */
#define ZIP_LOCAL_SIZE 30
#define ZIP_CENTRAL_SIZE 46
#define ZIP_END_SIZE 22
#define ZIP64_END_SIZE 56
#define ZIP64_LOC_SIZE 20
#define ZIP64_EXTRA_ID 0x0001 /* extra field: 8-byte sizes and offset (APPNOTE 4.5.3) */
#define ZIP_STORED 0
#define ZIP_DEFLATED 8
#define ZIP_FLAG_ENCRYPTED 0x0001
#define ZIP_FLAG_DESCRIPTOR 0x0008 /* crc and sizes follow the data, not in the local header */
#define ZIP_FLAG_STRONG_ENCRYPTION 0x0040
#define ZIP_FLAG_UTF8 0x0800
#define ZIP_MAX32 0xFFFFFFFFu /* a 32-bit field with this value: see the ZIP64 field */
#define ZIP_MAX16 0xFFFFu

/* ---- .npy (numpy/lib/format.py): magic, version, header length, header, data ---- */
#define NPY_MAGIC "\x93NUMPY"
#define NPY_MAGIC_LEN 6
#define NPY_MAX_HEADER 65536 /* longest header dict accepted (numpy's reader caps at 10000) */

static inline uint16_t get16(const unsigned char *p) { return (uint16_t)(p[0] | p[1] << 8); }
static inline uint32_t get32(const unsigned char *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static inline uint64_t get64(const unsigned char *p) {
    return (uint64_t)get32(p) | (uint64_t)get32(p + 4) << 32;
}
static inline unsigned char *put16(unsigned char *p, uint32_t v) {
    p[0] = (unsigned char)v;
    p[1] = (unsigned char)(v >> 8);
    return p + 2;
}
static inline unsigned char *put32(unsigned char *p, uint32_t v) {
    for (int i = 0; i < 4; i++) p[i] = (unsigned char)(v >> (8 * i));
    return p + 4;
}
static inline unsigned char *put64(unsigned char *p, uint64_t v) {
    for (int i = 0; i < 8; i++) p[i] = (unsigned char)(v >> (8 * i));
    return p + 8;
}

/* ---- fault injection, for the tests of failed writes (tests/io/test_npz.c) ----
 * npz_test_set_fault(where, err, after): the next npz_write fails at step `where` with errno
 * err, as if the system call had failed; for NPZ_FAULT_WRITE, once `after` bytes are written
 * (so a partial file exists). The fault fires once, then clears. Not thread-safe. */
typedef enum {
    NPZ_FAULT_NONE = 0,
    NPZ_FAULT_OPEN,
    NPZ_FAULT_WRITE,
    NPZ_FAULT_FSYNC,
    NPZ_FAULT_CLOSE,
    NPZ_FAULT_RENAME,
    NPZ_FAULT_DIRSYNC
} NpzFault;
void npz_test_set_fault(NpzFault where, int err, uint64_t after);

/* ---- for the fuzz harnesses (fuzz/) ----
 * npz_test_skip_crc(1): npz_read no longer compares each entry's data with its CRC-32, so
 * that bytes a fuzzer changed inside an entry reach the checks after it (the .npy header, a
 * checkpoint's configuration) instead of all failing at the CRC. Never in a program. */
void npz_test_skip_crc(int on);

#endif
