/* npz_read.c: the reader. It trusts nothing in the file: every offset is checked against the
 * file size before it is read, every size against the limits before anything is allocated,
 * and the pieces against each other. In order:
 *   1. the end record (the last 22 bytes, or up to 64 KiB earlier when there is a comment),
 *      and, when present, the ZIP64 end record and its locator just before it;
 *   2. the central directory: one header per entry with its method, CRC-32, sizes (ZIP64
 *      extra field when a 32-bit field is 0xFFFFFFFF) and the offset of its local header;
 *      names unique, ending in ".npy"; the total of the declared sizes within the limit;
 *   3. each local header: the same name, method, CRC and sizes; its data inside the file,
 *      before the central directory, overlapping no other entry;
 *   4. each entry's data: read (stored) or inflated (deflate) into a buffer of exactly the
 *      declared size, never more; the CRC-32; then the .npy header and the data size.
 * Any failure frees everything and returns a code with a message naming the path, the entry
 * and the reason. Layouts: PKWARE's APPNOTE.TXT 4.3 and numpy/lib/format.py.
 * Not here: writing (npz_write.c), tensors and parameters (npz_params.c). */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "file.h"
#include "npz_internal.h"

/* Deflate's best ratio: a match of 258 bytes coded in 2 bits (a 1-bit length code and a 1-bit
 * distance code), so n compressed bytes inflate to at most 1032 n (zlib's technical notes). An
 * entry that declares more cannot be honest: it is refused before its buffer is allocated, so
 * a small file never makes the reader allocate much more than 1032 times its size. */
#define DEFLATE_MAX_RATIO 1032

static int skip_crc; /* npz_test_skip_crc */
void npz_test_skip_crc(int on) { skip_crc = on; }

NpzLimits npz_default_limits(void) { return (NpzLimits){(size_t)1 << 30, 65535}; }

/* One entry as the central directory describes it. */
typedef struct {
    char *zname; /* NUL-terminated copy of the zip name */
    uint16_t flags, method;
    uint32_t crc;
    uint64_t csize, usize, off; /* compressed and uncompressed sizes, local header offset */
    uint64_t data_off, end;     /* where its data starts and ends (from the local header) */
} CdEntry;

typedef struct {
    const char *path;
    int fd;
    uint64_t size;
    NpzLimits lim;
    uint64_t cd_off, cd_size;
    size_t n;
    CdEntry *ce;
} Reader;

/* A name from the file, fit for a message: at most 80 bytes, non-printable bytes as '?'. */
static const char *shown(const char *name, char *buf, size_t cap) {
    size_t i = 0;
    for (; name[i] && i + 4 < cap && i < 80; i++)
        buf[i] = name[i] >= 0x20 && name[i] < 0x7f ? name[i] : '?';
    if (name[i]) { /* cut: "..." marks it */
        memcpy(buf + i, "...", 3);
        i += 3;
    }
    buf[i] = '\0';
    return buf;
}

/* Records "path: entry 'name': reason" (or "path: reason" when e is NULL); returns code. */
__attribute__((format(printf, 4, 5))) static int efail(const Reader *r, const CdEntry *e, int code,
                                                       const char *fmt, ...) {
    char reason[384], nm[96];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(reason, sizeof reason, fmt, ap);
    va_end(ap);
    if (e)
        return ag_fail(code, "%s: entry '%s': %s", r->path, shown(e->zname, nm, sizeof nm), reason);
    return ag_fail(code, "%s: %s", r->path, reason);
}

typedef unsigned long long ull; /* for printing uint64_t with %llu */

/* Reads n bytes at off (checked against the file size first); what names them for messages. */
static int read_at(const Reader *r, const CdEntry *e, uint64_t off, void *buf, size_t n,
                   const char *what) {
    if (off > r->size || n > r->size - off)
        return efail(r, e, AG_ERR_FORMAT,
                     "%s (%zu bytes at offset %llu) lies past the end of "
                     "the file (%llu bytes)",
                     what, n, (ull)off, (ull)r->size);
    size_t done = 0;
    while (done < n) {
        ssize_t k = pread(r->fd, (char *)buf + done, n - done, (off_t)(off + done));
        if (k < 0 && errno == EINTR) continue;
        if (k < 0) return efail(r, e, AG_ERR_IO, "reading %s failed: %s", what, strerror(errno));
        if (k == 0)
            return efail(r, e, AG_ERR_IO,
                         "the file ended while reading %s (did it change while "
                         "being read?)",
                         what);
        done += (size_t)k;
    }
    return AG_OK;
}

/* The ZIP64 extra field (id 0x0001) in an extra area of xlen bytes: its 8-byte values for
 * each 32-bit field that was 0xFFFFFFFF, in the order uncompressed size, compressed size,
 * local header offset (APPNOTE 4.5.3). 0: ok; -1: the extra area is malformed; -2: a needed
 * value is missing. */
static int zip64_extra(const unsigned char *x, size_t xlen, int need_u, int need_c, int need_o,
                       uint64_t *u, uint64_t *c, uint64_t *o) {
    const unsigned char *z64 = NULL;
    size_t z64len = 0, p = 0;
    while (p + 4 <= xlen) { /* a tail under 4 bytes is padding, ignored as zipfile does */
        size_t len = get16(x + p + 2);
        if (len > xlen - p - 4) return -1;
        if (get16(x + p) == ZIP64_EXTRA_ID && !z64) {
            z64 = x + p + 4;
            z64len = len;
        }
        p += 4 + len;
    }
    size_t need = 8 * (size_t)(need_u + need_c + need_o);
    if (need == 0) return 0;
    if (!z64 || z64len < need) return -2;
    if (need_u) *u = get64(z64), z64 += 8;
    if (need_c) *c = get64(z64), z64 += 8;
    if (need_o) *o = get64(z64);
    return 0;
}

/* ---- 1. the end records ---- */

static int read_end(Reader *r, uint64_t *n_entries) {
    if (r->size == 0) return efail(r, NULL, AG_ERR_FORMAT, "empty file (0 bytes), not an .npz");
    size_t tail = r->size < ZIP_END_SIZE + 65535 ? (size_t)r->size : ZIP_END_SIZE + 65535;
    unsigned char *t = malloc(tail);
    if (!t) return efail(r, NULL, AG_ERR_NOMEM, "out of memory");
    int rc = read_at(r, NULL, r->size - tail, t, tail, "the end of the file");
    long found = -1;
    for (long i = (long)tail - ZIP_END_SIZE; rc == AG_OK && i >= 0 && found < 0; i--)
        if (get32(t + i) == ZIP_END_SIG && get16(t + i + 20) == tail - (size_t)i - ZIP_END_SIZE)
            found = i;
    if (rc == AG_OK && found < 0) {
        unsigned char head[8] = {0};
        read_at(r, NULL, 0, head, r->size < 8 ? (size_t)r->size : 8, "the first bytes");
        if (memcmp(head, NPY_MAGIC, NPY_MAGIC_LEN) == 0)
            rc = efail(r, NULL, AG_ERR_FORMAT, "this is a single .npy array, not an .npz archive");
        else if (get32(head) == ZIP_LOCAL_SIG)
            rc = efail(r, NULL, AG_ERR_FORMAT,
                       "zip archive without its end of central directory "
                       "record (truncated?)");
        else
            rc = efail(r, NULL, AG_ERR_FORMAT,
                       "not a zip archive (no end of central directory "
                       "record in its last %zu bytes)",
                       tail);
    }
    if (rc != AG_OK) {
        free(t);
        return rc;
    }
    const unsigned char *e = t + found;
    uint64_t end_pos = r->size - tail + (uint64_t)found;
    uint32_t disk = get16(e + 4), cd_disk = get16(e + 6);
    uint64_t n_disk = get16(e + 8), n = get16(e + 10);
    uint64_t cd_size = get32(e + 12), cd_off = get32(e + 16);
    free(t);
    uint64_t cd_end = end_pos;

    unsigned char loc[ZIP64_LOC_SIZE];
    if (end_pos >= ZIP64_LOC_SIZE) {
        rc = read_at(r, NULL, end_pos - ZIP64_LOC_SIZE, loc, sizeof loc, "the ZIP64 locator");
        if (rc) return rc;
    }
    if (end_pos >= ZIP64_LOC_SIZE && get32(loc) == ZIP64_LOC_SIG) {
        uint64_t loc_pos = end_pos - ZIP64_LOC_SIZE, z64 = get64(loc + 8);
        unsigned char z[ZIP64_END_SIZE];
        if (get32(loc + 4) != 0 || get32(loc + 16) > 1)
            return efail(r, NULL, AG_ERR_FORMAT, "multi-disk archives are not supported");
        if (z64 > loc_pos || loc_pos - z64 < ZIP64_END_SIZE)
            return efail(r, NULL, AG_ERR_FORMAT,
                         "the ZIP64 end record offset %llu is out of "
                         "bounds",
                         (ull)z64);
        if ((rc = read_at(r, NULL, z64, z, sizeof z, "the ZIP64 end record"))) return rc;
        if (get32(z) != ZIP64_END_SIG || get64(z + 4) != loc_pos - z64 - 12)
            return efail(r, NULL, AG_ERR_FORMAT, "no valid ZIP64 end record at offset %llu",
                         (ull)z64);
        uint64_t n64 = get64(z + 32), size64 = get64(z + 40), off64 = get64(z + 48);
        if ((n != ZIP_MAX16 && n != n64) || (cd_size != ZIP_MAX32 && cd_size != size64) ||
            (cd_off != ZIP_MAX32 && cd_off != off64))
            return efail(r, NULL, AG_ERR_FORMAT,
                         "the end record and the ZIP64 end record "
                         "disagree");
        disk = get32(z + 16);
        cd_disk = get32(z + 20);
        n_disk = get64(z + 24);
        n = n64;
        cd_size = size64;
        cd_off = off64;
        cd_end = z64;
    }
    if (disk != 0 || cd_disk != 0 || n_disk != n)
        return efail(r, NULL, AG_ERR_FORMAT, "multi-disk archives are not supported");
    if (cd_off > cd_end || cd_size != cd_end - cd_off)
        return efail(r, NULL, AG_ERR_FORMAT,
                     "the central directory (%llu bytes at offset %llu) "
                     "does not end where the end record starts (offset %llu)",
                     (ull)cd_size, (ull)cd_off, (ull)cd_end);
    if (n > r->lim.max_entries)
        return efail(r, NULL, AG_ERR_NOMEM,
                     "%llu entries, over the limit of %zu "
                     "(NpzLimits.max_entries)",
                     (ull)n, r->lim.max_entries);
    if (n * ZIP_CENTRAL_SIZE > cd_size)
        return efail(r, NULL, AG_ERR_FORMAT,
                     "%llu entries cannot fit in a central directory of "
                     "%llu bytes",
                     (ull)n, (ull)cd_size);
    if (cd_size > r->lim.max_bytes)
        return efail(r, NULL, AG_ERR_NOMEM,
                     "central directory of %llu bytes, over the limit of "
                     "%zu bytes (NpzLimits.max_bytes)",
                     (ull)cd_size, r->lim.max_bytes);
    r->cd_off = cd_off;
    r->cd_size = cd_size;
    *n_entries = n;
    return AG_OK;
}

/* ---- 2. the central directory ---- */

static int cmp_names(const void *a, const void *b) {
    return strcmp((*(const CdEntry *const *)a)->zname, (*(const CdEntry *const *)b)->zname);
}
static int cmp_offsets(const void *a, const void *b) {
    uint64_t x = (*(const CdEntry *const *)a)->off, y = (*(const CdEntry *const *)b)->off;
    return x < y ? -1 : x > y;
}

static int read_directory(Reader *r, uint64_t n) {
    unsigned char *cd = malloc(r->cd_size ? (size_t)r->cd_size : 1);
    r->ce = calloc(n ? (size_t)n : 1, sizeof *r->ce);
    if (!cd || !r->ce) {
        free(cd);
        return efail(r, NULL, AG_ERR_NOMEM, "out of memory for the central directory");
    }
    int rc = read_at(r, NULL, r->cd_off, cd, (size_t)r->cd_size, "the central directory");
    uint64_t total = r->cd_size; /* bytes this file makes us allocate, against lim.max_bytes */
    size_t p = 0;
    for (; r->n < n && rc == AG_OK; r->n++) {
        CdEntry *e = &r->ce[r->n];
        const unsigned char *h = cd + p;
        if (r->cd_size - p < ZIP_CENTRAL_SIZE || get32(h) != ZIP_CENTRAL_SIG) {
            rc = efail(r, NULL, AG_ERR_FORMAT,
                       "central directory header %zu (offset %llu) is "
                       "missing or damaged",
                       r->n, (ull)(r->cd_off + p));
            break;
        }
        size_t nlen = get16(h + 28), xlen = get16(h + 30), clen = get16(h + 32);
        if (r->cd_size - p - ZIP_CENTRAL_SIZE < nlen + xlen + clen) {
            rc = efail(r, NULL, AG_ERR_FORMAT,
                       "central directory header %zu runs past the end "
                       "of the directory",
                       r->n);
            break;
        }
        e->zname = malloc(nlen + 1);
        if (!e->zname) {
            rc = efail(r, NULL, AG_ERR_NOMEM, "out of memory");
            break;
        }
        memcpy(e->zname, h + ZIP_CENTRAL_SIZE, nlen);
        e->zname[nlen] = '\0';
        e->flags = get16(h + 8);
        e->method = get16(h + 10);
        e->crc = get32(h + 16);
        e->csize = get32(h + 20);
        e->usize = get32(h + 24);
        e->off = get32(h + 42);
        uint32_t disk = get16(h + 34);
        int z =
            zip64_extra(h + ZIP_CENTRAL_SIZE + nlen, xlen, e->usize == ZIP_MAX32,
                        e->csize == ZIP_MAX32, e->off == ZIP_MAX32, &e->usize, &e->csize, &e->off);
        p += ZIP_CENTRAL_SIZE + nlen + xlen + clen;
        if (z == -1)
            rc = efail(r, e, AG_ERR_FORMAT, "malformed extra field");
        else if (z == -2)
            rc = efail(r, e, AG_ERR_FORMAT,
                       "a size or offset is 0xFFFFFFFF but its ZIP64 extra "
                       "field is missing or too short");
        else if (nlen == 0 || strlen(e->zname) != nlen)
            rc = efail(r, e, AG_ERR_FORMAT, "empty name or a NUL byte in the name");
        else if (nlen <= 4 || strcmp(e->zname + nlen - 4, ".npy") != 0)
            rc = efail(r, e, AG_ERR_FORMAT, "not an array (the name does not end in .npy)");
        else if (disk != 0)
            rc = efail(r, e, AG_ERR_FORMAT, "multi-disk archives are not supported");
        else if (e->flags & (ZIP_FLAG_ENCRYPTED | ZIP_FLAG_STRONG_ENCRYPTION))
            rc = efail(r, e, AG_ERR_FORMAT, "encrypted entries are not supported");
        else if (e->method != ZIP_STORED && e->method != ZIP_DEFLATED)
            rc = efail(r, e, AG_ERR_FORMAT,
                       "compression method %u is not supported (only 0, "
                       "stored, and 8, deflate)",
                       e->method);
        else if (e->method == ZIP_STORED && e->csize != e->usize)
            rc = efail(r, e, AG_ERR_FORMAT,
                       "stored, but its sizes differ (%llu compressed, "
                       "%llu uncompressed)",
                       (ull)e->csize, (ull)e->usize);
        else if (e->off >= r->cd_off || r->cd_off - e->off < ZIP_LOCAL_SIZE)
            rc = efail(r, e, AG_ERR_FORMAT,
                       "local header offset %llu is not before the central "
                       "directory (offset %llu)",
                       (ull)e->off, (ull)r->cd_off);
        else if (e->usize > r->lim.max_bytes - total)
            rc = efail(r, e, AG_ERR_NOMEM,
                       "declares %llu bytes; with the rest of the file that "
                       "is over the limit of %zu bytes (NpzLimits.max_bytes)",
                       (ull)e->usize, r->lim.max_bytes);
        else if (e->method == ZIP_DEFLATED &&
                 e->usize / DEFLATE_MAX_RATIO + (e->usize % DEFLATE_MAX_RATIO != 0) > e->csize)
            rc = efail(r, e, AG_ERR_FORMAT,
                       "declares %llu bytes from %llu compressed bytes, more than deflate can "
                       "produce (%d to 1)",
                       (ull)e->usize, (ull)e->csize, DEFLATE_MAX_RATIO);
        else
            total += e->usize;
    }
    if (rc == AG_OK && p != r->cd_size)
        rc = efail(r, NULL, AG_ERR_FORMAT,
                   "%llu stray bytes at the end of the central "
                   "directory",
                   (ull)(r->cd_size - p));
    free(cd);
    if (rc != AG_OK || n < 2) return rc;
    CdEntry **by = malloc((size_t)n * sizeof *by);
    if (!by) return efail(r, NULL, AG_ERR_NOMEM, "out of memory");
    for (size_t i = 0; i < n; i++) by[i] = &r->ce[i];
    qsort(by, (size_t)n, sizeof *by, cmp_names);
    for (size_t i = 0; i + 1 < n && rc == AG_OK; i++)
        if (strcmp(by[i]->zname, by[i + 1]->zname) == 0)
            rc = efail(r, by[i], AG_ERR_FORMAT, "the name appears twice");
    free(by);
    return rc;
}

/* ---- 3. local headers ---- */

static int read_local(Reader *r, CdEntry *e, unsigned char *var /* 2 * 65535 bytes */) {
    unsigned char h[ZIP_LOCAL_SIZE];
    int rc = read_at(r, e, e->off, h, sizeof h, "the local header");
    if (rc) return rc;
    if (get32(h) != ZIP_LOCAL_SIG)
        return efail(r, e, AG_ERR_FORMAT, "no local header at offset %llu", (ull)e->off);
    uint32_t flags = get16(h + 6), method = get16(h + 8), crc = get32(h + 14);
    uint64_t csize = get32(h + 18), usize = get32(h + 22);
    size_t nlen = get16(h + 26), xlen = get16(h + 28);
    uint64_t data_off = e->off + ZIP_LOCAL_SIZE + nlen + xlen;
    if (data_off > r->cd_off)
        return efail(r, e, AG_ERR_FORMAT, "its local header runs into the central directory");
    if ((rc = read_at(r, e, e->off + ZIP_LOCAL_SIZE, var, nlen + xlen, "the local header")))
        return rc;
    if (nlen != strlen(e->zname) || memcmp(var, e->zname, nlen) != 0)
        return efail(r, e, AG_ERR_FORMAT, "the local header names another entry");
    if (method != e->method)
        return efail(r, e, AG_ERR_FORMAT,
                     "compression method %u in the local header, %u in the "
                     "central directory",
                     method, e->method);
    /* with a data descriptor (flag bit 3) the local CRC and sizes are zero: the directory's
     * values are the ones checked against the data below */
    if (!(flags & ZIP_FLAG_DESCRIPTOR)) {
        int z = zip64_extra(var + nlen, xlen, usize == ZIP_MAX32, csize == ZIP_MAX32, 0, &usize,
                            &csize, NULL);
        if (z) return efail(r, e, AG_ERR_FORMAT, "malformed extra field in the local header");
        if (crc != e->crc)
            return efail(r, e, AG_ERR_FORMAT,
                         "CRC-32 0x%08x in the local header, 0x%08x in the "
                         "central directory",
                         crc, e->crc);
        if (usize != e->usize || csize != e->csize)
            return efail(r, e, AG_ERR_FORMAT,
                         "sizes %llu (%llu compressed) in the local header, "
                         "%llu (%llu) in the central directory",
                         (ull)usize, (ull)csize, (ull)e->usize, (ull)e->csize);
    }
    if (e->csize > r->cd_off - data_off)
        return efail(r, e, AG_ERR_FORMAT,
                     "its data (%llu bytes at offset %llu) runs into the "
                     "central directory (offset %llu)",
                     (ull)e->csize, (ull)data_off, (ull)r->cd_off);
    e->data_off = data_off;
    e->end = data_off + e->csize;
    return AG_OK;
}

static int check_overlaps(Reader *r) {
    if (r->n < 2) return AG_OK;
    CdEntry **by = malloc(r->n * sizeof *by);
    if (!by) return efail(r, NULL, AG_ERR_NOMEM, "out of memory");
    for (size_t i = 0; i < r->n; i++) by[i] = &r->ce[i];
    qsort(by, r->n, sizeof *by, cmp_offsets);
    int rc = AG_OK;
    char nm[96];
    for (size_t i = 0; i + 1 < r->n && rc == AG_OK; i++)
        if (by[i]->end > by[i + 1]->off)
            rc = efail(r, by[i], AG_ERR_FORMAT, "overlaps entry '%s'",
                       shown(by[i + 1]->zname, nm, sizeof nm));
    free(by);
    return rc;
}

/* ---- 4. data ---- */

/* Inflates e's raw deflate stream into buf, exactly e->usize bytes. Stops as soon as the
 * stream would produce more (a zip bomb declares little and inflates to much). */
static int inflate_entry(const Reader *r, const CdEntry *e, unsigned char *buf) {
    z_stream z;
    memset(&z, 0, sizeof z);
    if (inflateInit2(&z, -15) != Z_OK) return efail(r, e, AG_ERR_NOMEM, "zlib inflateInit2 failed");
    unsigned char *in = malloc(1 << 16), spare;
    if (!in) {
        inflateEnd(&z);
        return efail(r, e, AG_ERR_NOMEM, "out of memory");
    }
    uint64_t fed = 0, done = 0;
    int rc = AG_OK, ret = Z_OK;
    while (rc == AG_OK) {
        if (z.avail_in == 0 && fed < e->csize) {
            size_t k = e->csize - fed < (1 << 16) ? (size_t)(e->csize - fed) : (1 << 16);
            if ((rc = read_at(r, e, e->data_off + fed, in, k, "its compressed data"))) break;
            fed += k;
            z.next_in = in;
            z.avail_in = (uInt)k;
        }
        /* once the declared size is reached, one spare byte tells whether more would come */
        int full = done == e->usize;
        uInt room = full ? 1 : e->usize - done > (1u << 30) ? (1u << 30) : (uInt)(e->usize - done);
        z.next_out = full ? &spare : buf + done;
        z.avail_out = room;
        ret = inflate(&z, Z_NO_FLUSH);
        uInt made = room - z.avail_out;
        if (!full) done += made;
        if (ret == Z_DATA_ERROR || ret == Z_NEED_DICT || ret == Z_STREAM_ERROR)
            rc = efail(r, e, AG_ERR_FORMAT, "corrupt deflate data (zlib: %s)",
                       z.msg ? z.msg : "invalid stream");
        else if (ret == Z_MEM_ERROR)
            rc = efail(r, e, AG_ERR_NOMEM, "zlib ran out of memory");
        else if (full && made > 0)
            rc = efail(r, e, AG_ERR_FORMAT,
                       "inflates to more than the %llu bytes it declares "
                       "(stopped there)",
                       (ull)e->usize);
        else if (ret == Z_STREAM_END)
            break;
        else if (ret == Z_BUF_ERROR && z.avail_in == 0 && fed == e->csize)
            rc = efail(r, e, AG_ERR_FORMAT,
                       "the deflate stream is cut short: %llu of the %llu "
                       "declared bytes",
                       (ull)done, (ull)e->usize);
    }
    if (rc == AG_OK && done != e->usize)
        rc = efail(r, e, AG_ERR_FORMAT, "inflates to %llu bytes, it declares %llu", (ull)done,
                   (ull)e->usize);
    if (rc == AG_OK && (z.avail_in != 0 || fed != e->csize))
        rc = efail(r, e, AG_ERR_FORMAT,
                   "the deflate stream ends after %llu of its %llu "
                   "compressed bytes",
                   (ull)(fed - z.avail_in), (ull)e->csize);
    free(in);
    inflateEnd(&z);
    return rc;
}

/* ---- the .npy header: a Python dict literal such as
 *   {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }
 * parsed by hand, accepting what numpy writes and rejecting anything else. ---- */

typedef struct {
    const char *s;
    size_t n, i;
    char err[160];
} Lex;

static void lex_ws(Lex *x) {
    while (x->i < x->n &&
           (x->s[x->i] == ' ' || x->s[x->i] == '\t' || x->s[x->i] == '\n' || x->s[x->i] == '\r'))
        x->i++;
}
static int lex_is(Lex *x, char c) {
    lex_ws(x);
    if (x->i < x->n && x->s[x->i] == c) {
        x->i++;
        return 1;
    }
    return 0;
}
static int lex_fail(Lex *x, const char *what) {
    snprintf(x->err, sizeof x->err, "%s at byte %zu of the header", what, x->i);
    return -1;
}
/* A quoted string without escapes into out (cap bytes). */
static int lex_str(Lex *x, char *out, size_t cap) {
    lex_ws(x);
    if (x->i >= x->n || (x->s[x->i] != '\'' && x->s[x->i] != '"'))
        return lex_fail(x, "expected a quoted string");
    char q = x->s[x->i++];
    size_t k = 0;
    while (x->i < x->n && x->s[x->i] != q) {
        char c = x->s[x->i++];
        if (c == '\\' || c == '\n' || k + 1 >= cap) return lex_fail(x, "unexpected string");
        out[k++] = c;
    }
    if (x->i >= x->n) return lex_fail(x, "unterminated string");
    x->i++;
    out[k] = '\0';
    return 0;
}
static int lex_word(Lex *x, const char *w) {
    lex_ws(x);
    size_t k = strlen(w);
    if (x->n - x->i >= k && memcmp(x->s + x->i, w, k) == 0) {
        x->i += k;
        return 1;
    }
    return 0;
}
/* A tuple of non-negative integers: (), (5,), (2, 3) */
static int lex_shape(Lex *x, int *ndim, int64_t *shape) {
    if (!lex_is(x, '(')) return lex_fail(x, "'shape' is not a tuple");
    *ndim = 0;
    if (lex_is(x, ')')) return 0;
    for (;;) {
        lex_ws(x);
        if (*ndim == NPZ_MAX_DIMS) return lex_fail(x, "'shape' has more dims than NPZ_MAX_DIMS");
        size_t start = x->i;
        uint64_t v = 0;
        while (x->i < x->n && x->s[x->i] >= '0' && x->s[x->i] <= '9') {
            unsigned d = (unsigned)(x->s[x->i++] - '0');
            if (v > ((uint64_t)INT64_MAX - d) / 10) return lex_fail(x, "a dimension too large");
            v = v * 10 + d;
        }
        if (x->i == start || (x->i - start > 1 && x->s[start] == '0'))
            return lex_fail(x, "a dimension is not a non-negative integer");
        shape[(*ndim)++] = (int64_t)v;
        if (lex_is(x, ',')) {
            if (lex_is(x, ')')) return 0;
        } else if (lex_is(x, ')')) {
            return *ndim == 1 ? lex_fail(x, "'shape' (n) lacks the comma of a 1-tuple") : 0;
        } else {
            return lex_fail(x, "expected ',' or ')' in 'shape'");
        }
    }
}

static int parse_dict(Lex *x, NpzEntry *out) {
    int seen_descr = 0, seen_order = 0, seen_shape = 0;
    if (!lex_is(x, '{')) return lex_fail(x, "the header is not a dict");
    while (!lex_is(x, '}')) {
        char key[32], val[32];
        if (lex_str(x, key, sizeof key)) return -1;
        if (!lex_is(x, ':')) return lex_fail(x, "expected ':'");
        if (strcmp(key, "descr") == 0 && !seen_descr++) {
            if (lex_str(x, val, sizeof val)) return lex_fail(x, "'descr' is not a dtype string");
            int d = 0;
            while (d < NPZ_N_DTYPES && strcmp(val, npz_dtype_descr((NpzDtype)d)) != 0) d++;
            if (d == NPZ_N_DTYPES) {
                snprintf(x->err, sizeof x->err,
                         "dtype '%s' is not supported (only <f4, <f8, "
                         "<i8, <u8, <i4, |u1)",
                         val);
                return -1;
            }
            out->dtype = (NpzDtype)d;
        } else if (strcmp(key, "fortran_order") == 0 && !seen_order++) {
            if (lex_word(x, "True")) {
                snprintf(x->err, sizeof x->err,
                         "fortran_order is True (only C order is "
                         "supported)");
                return -1;
            }
            if (!lex_word(x, "False")) return lex_fail(x, "'fortran_order' is not True or False");
        } else if (strcmp(key, "shape") == 0 && !seen_shape++) {
            if (lex_shape(x, &out->ndim, out->shape)) return -1;
        } else {
            snprintf(x->err, sizeof x->err, "unexpected or repeated key '%s'", key);
            return -1;
        }
        if (!lex_is(x, ',')) {
            if (lex_is(x, '}')) break;
            return lex_fail(x, "expected ',' or '}'");
        }
    }
    lex_ws(x);
    if (x->i != x->n) return lex_fail(x, "stray bytes after the dict");
    if (!seen_descr || !seen_order || !seen_shape) {
        snprintf(x->err, sizeof x->err, "the header lacks '%s'",
                 !seen_descr   ? "descr"
                 : !seen_order ? "fortran_order"
                               : "shape");
        return -1;
    }
    return 0;
}

/* Parses the .npy in buf (n bytes) into out and returns via *start where its data begins. */
static int parse_npy(const Reader *r, const CdEntry *e, const unsigned char *b, uint64_t n,
                     NpzEntry *out, size_t *start) {
    if (n < 10 || memcmp(b, NPY_MAGIC, NPY_MAGIC_LEN) != 0)
        return efail(r, e, AG_ERR_FORMAT, "not an .npy array (no \\x93NUMPY magic)");
    unsigned major = b[6], minor = b[7];
    if (major < 1 || major > 3 || minor != 0)
        return efail(r, e, AG_ERR_FORMAT, ".npy version %u.%u is not supported (1.0, 2.0, 3.0)",
                     major, minor);
    size_t pre = major == 1 ? 10 : 12;
    if (n < pre) return efail(r, e, AG_ERR_FORMAT, "too short for an .npy header");
    uint64_t hlen = major == 1 ? get16(b + 8) : get32(b + 8);
    if (hlen > NPY_MAX_HEADER)
        return efail(r, e, AG_ERR_FORMAT, ".npy header of %llu bytes is over the limit of %d",
                     (ull)hlen, NPY_MAX_HEADER);
    if (hlen > n - pre)
        return efail(r, e, AG_ERR_FORMAT,
                     ".npy header (%llu bytes) runs past the end of the "
                     "entry (%llu bytes)",
                     (ull)hlen, (ull)n);
    Lex x = {(const char *)b + pre, (size_t)hlen, 0, ""};
    if (parse_dict(&x, out)) return efail(r, e, AG_ERR_FORMAT, ".npy header: %s", x.err);
    uint64_t have = n - pre - hlen, count = 1, isz = npz_dtype_size(out->dtype);
    int overflow = 0;
    for (int i = 0; i < out->ndim; i++) {
        uint64_t d = (uint64_t)out->shape[i];
        if (d != 0 && count > UINT64_MAX / d) overflow = 1;
        count *= d;
    }
    char sh[NPZ_MAX_DIMS * 24];
    npz_shape_str(sh, sizeof sh, out->ndim, out->shape);
    if (overflow || count > UINT64_MAX / isz)
        return efail(r, e, AG_ERR_FORMAT,
                     "shape %s has more elements than memory can hold; the "
                     "entry holds %llu bytes of data",
                     sh, (ull)have);
    if (count * isz != have)
        return efail(r, e, AG_ERR_FORMAT,
                     "shape %s of '%s' is %llu bytes, but the entry holds "
                     "%llu bytes of data",
                     sh, npz_dtype_descr(out->dtype), (ull)(count * isz), (ull)have);
    out->count = (size_t)count;
    out->nbytes = (size_t)(count * isz);
    *start = pre + (size_t)hlen;
    return AG_OK;
}

/* Reads, checks and decodes entry e into out. */
static int load_entry(const Reader *r, const CdEntry *e, NpzEntry *out) {
    unsigned char *buf = malloc(e->usize ? (size_t)e->usize : 1);
    if (!buf) return efail(r, e, AG_ERR_NOMEM, "cannot allocate %llu bytes", (ull)e->usize);
    int rc = e->method == ZIP_STORED ? read_at(r, e, e->data_off, buf, (size_t)e->usize, "its data")
                                     : inflate_entry(r, e, buf);
    if (rc == AG_OK) {
        uLong crc = crc32(0, Z_NULL, 0);
        for (uint64_t i = 0; i < e->usize; i += 1u << 30)
            crc = crc32(crc, buf + i, e->usize - i < (1u << 30) ? (uInt)(e->usize - i) : 1u << 30);
        if ((uint32_t)crc != e->crc && !skip_crc)
            rc = efail(r, e, AG_ERR_FORMAT,
                       "CRC-32 of the data is 0x%08x, the directory says "
                       "0x%08x (the file is damaged)",
                       (unsigned)crc, e->crc);
    }
    size_t start = 0;
    if (rc == AG_OK) rc = parse_npy(r, e, buf, e->usize, out, &start);
    if (rc == AG_OK) {
        out->name = malloc(strlen(e->zname) - 3);
        if (!out->name) rc = efail(r, e, AG_ERR_NOMEM, "out of memory");
    }
    if (rc != AG_OK) {
        free(buf);
        return rc;
    }
    memcpy(out->name, e->zname, strlen(e->zname) - 4);
    out->name[strlen(e->zname) - 4] = '\0';
    memmove(buf, buf + start, out->nbytes); /* malloc's alignment now holds for the data */
    out->data = buf;
    return AG_OK;
}

/* ---- npz_read ---- */

/* The admit callback's two looks (npz_read_admitted): the directory before anything is read,
 * then the entries it marked, read, before the others are allocated. */
static int admit_first(const Reader *r, NpzAdmit admit, void *ctx, NpzDirectory *dir) {
    dir->n = (int)r->n;
    char **names = calloc(r->n ? r->n : 1, sizeof *names);
    uint64_t *bytes = calloc(r->n ? r->n : 1, sizeof *bytes);
    dir->first = calloc(r->n ? r->n : 1, 1);
    dir->names = (const char *const *)names;
    dir->bytes = bytes;
    if (!names || !bytes || !dir->first) return ag_fail(AG_ERR_NOMEM, "%s: out of memory", r->path);
    for (size_t i = 0; i < r->n; i++) {
        size_t len = strlen(r->ce[i].zname) - 4; /* read_directory checked the ".npy" */
        names[i] = malloc(len + 1);
        if (!names[i]) return ag_fail(AG_ERR_NOMEM, "%s: out of memory", r->path);
        memcpy(names[i], r->ce[i].zname, len);
        names[i][len] = '\0';
        bytes[i] = r->ce[i].usize;
    }
    return admit(ctx, dir, NULL);
}

static void admit_free(NpzDirectory *dir) {
    for (int i = 0; dir->names && i < dir->n; i++) free((void *)dir->names[i]);
    free((void *)dir->names);
    free((void *)dir->bytes);
    free(dir->first);
}

static int read_file(const char *path, NpzFile **out, const NpzLimits *lim, NpzAdmit admit,
                     void *ctx) {
    *out = NULL;
    Reader r = {.path = path, .fd = -1, .lim = lim ? *lim : npz_default_limits()};
    int rc = io_open_read(path, &r.fd, &r.size); /* a regular file; a FIFO must not hang */
    if (rc != AG_OK) return rc;
    uint64_t n = 0;
    if (rc == AG_OK) rc = read_end(&r, &n);
    if (rc == AG_OK) rc = read_directory(&r, n);
    unsigned char *var = rc == AG_OK ? malloc(2 * 65535) : NULL;
    if (rc == AG_OK && !var) rc = ag_fail(AG_ERR_NOMEM, "%s: out of memory", path);
    for (size_t i = 0; i < r.n && rc == AG_OK; i++) rc = read_local(&r, &r.ce[i], var);
    free(var);
    if (rc == AG_OK) rc = check_overlaps(&r);
    NpzDirectory dir = {0, NULL, NULL, NULL};
    if (rc == AG_OK && admit) rc = admit_first(&r, admit, ctx, &dir);

    NpzFile *f = rc == AG_OK ? calloc(1, sizeof *f) : NULL;
    if (rc == AG_OK) {
        if (f) f->entries = calloc(r.n ? r.n : 1, sizeof *f->entries);
        if (f) f->path = strdup(path);
        if (!f || !f->entries || !f->path) rc = ag_fail(AG_ERR_NOMEM, "%s: out of memory", path);
    }
    /* the marked entries first (all of them without a callback), in the directory's order;
     * then, once the callback has seen them, the others after them */
    for (int stage = 0; stage < (admit ? 2 : 1) && rc == AG_OK; stage++) {
        if (stage == 1) rc = admit(ctx, &dir, f);
        for (size_t i = 0; i < r.n && rc == AG_OK; i++) {
            if (admit && (dir.first[i] != 0) != (stage == 0)) continue;
            rc = load_entry(&r, &r.ce[i], &f->entries[f->n]);
            if (rc == AG_OK) f->data_bytes += f->entries[f->n++].nbytes;
        }
    }
    admit_free(&dir);
    for (size_t i = 0; i < r.n; i++) free(r.ce[i].zname);
    free(r.ce);
    close(r.fd);
    if (rc != AG_OK) {
        npz_free(f);
        return rc;
    }
    f->file_bytes = (size_t)r.size;
    *out = f;
    return AG_OK;
}

int npz_read(const char *path, NpzFile **out, const NpzLimits *lim) {
    AG_CHECK_ARG(path);
    AG_CHECK_ARG(out);
    return read_file(path, out, lim, NULL, NULL);
}

int npz_read_admitted(const char *path, NpzFile **out, const NpzLimits *lim, NpzAdmit admit,
                      void *ctx) {
    AG_CHECK_ARG(path);
    AG_CHECK_ARG(out);
    AG_CHECK_ARG(admit);
    return read_file(path, out, lim, admit, ctx);
}

const NpzEntry *npz_find(const NpzFile *f, const char *name) {
    AG_CHECK_ARG(f);
    AG_CHECK_ARG(name);
    size_t len = strlen(name);
    if (len > 4 && strcmp(name + len - 4, ".npy") == 0) len -= 4;
    for (int i = 0; i < f->n; i++)
        if (strncmp(f->entries[i].name, name, len) == 0 && f->entries[i].name[len] == '\0')
            return &f->entries[i];
    return NULL;
}

void npz_free(NpzFile *f) {
    if (!f) return;
    for (int i = 0; i < f->n; i++) {
        free(f->entries[i].name);
        free(f->entries[i].data);
    }
    free(f->entries);
    free(f->path);
    free(f);
}
