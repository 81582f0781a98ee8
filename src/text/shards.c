/* shards.c: token shards in llm.c's format (dev/data/data_common.py: a header of 256 int32, then
 * uint16 or uint32 tokens), and the loader of random training windows over a token array.
 * The writer is atomic (a temporary file in the same folder, fsync, rename); the reader checks
 * the header against the file's real size before it allocates, and each token against the
 * vocabulary, whether it reads the whole file or parts of it (TxtShard: a trainer reads only
 * its windows). The loader's whole state is one Rng and a batch count (txt_loader_state), so a
 * run resumed from a checkpoint draws the same windows as a straight one.
 * Not here: tokenizers (tokenizer.c). Read next: docs/text.md. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../io/file.h"
#include "text_internal.h"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "the shard code assumes a little-endian host, as the files are"
#endif

/* ---- writing ---- */

int txt_shard_write(const char *path, const int *ids, size_t n, int vocab_size) {
    AG_CHECK_ARG(path);
    AG_CHECK(ids || n == 0, "txt_shard_write: argument 'ids' is NULL");
    if (vocab_size < 1)
        return ag_fail(AG_ERR_RANGE, "%s: vocabulary size %d: must be >= 1", path, vocab_size);
    if ((int64_t)n > TXT_SHARD_MAX_TOKENS)
        return ag_fail(AG_ERR_RANGE, "%s: %zu tokens: a shard holds at most %lld", path, n,
                       (long long)TXT_SHARD_MAX_TOKENS);
    for (size_t i = 0; i < n; i++)
        if (ids[i] < 0 || ids[i] >= vocab_size)
            return ag_fail(AG_ERR_RANGE, "%s: not written: token %zu = %d outside [0, %d)", path, i,
                           ids[i], vocab_size);
    int wide = vocab_size > 65536;
    int32_t header[TXT_SHARD_HEADER_INTS] = {0};
    header[0] = wide ? TXT_SHARD_MAGIC_U32 : TXT_SHARD_MAGIC_U16;
    header[1] = wide ? TXT_SHARD_VERSION_U32 : TXT_SHARD_VERSION_U16;
    header[2] = (int32_t)n;

    char *tmp; /* a new file beside path, never through a link (io_temp_create) */
    int fd, rc = io_temp_create(path, &fd, &tmp);
    if (rc != AG_OK) return rc;
    FILE *f = fdopen(fd, "wb");
    if (!f) {
        rc = ag_fail(AG_ERR_IO, "%s: cannot write '%s': %s", path, tmp, strerror(errno));
        close(fd);
        remove(tmp);
        free(tmp);
        return rc;
    }
    int ok = fwrite(header, sizeof header, 1, f) == 1;
    /* tokens in blocks, converted to the file's width */
    enum { BLOCK = 4096 };
    uint32_t buf32[BLOCK];
    uint16_t buf16[BLOCK];
    for (size_t i = 0; ok && i < n; i += BLOCK) {
        size_t k = n - i < BLOCK ? n - i : BLOCK;
        if (wide) {
            for (size_t j = 0; j < k; j++) buf32[j] = (uint32_t)ids[i + j];
            ok = fwrite(buf32, 4, k, f) == k;
        } else {
            for (size_t j = 0; j < k; j++) buf16[j] = (uint16_t)ids[i + j];
            ok = fwrite(buf16, 2, k, f) == k;
        }
    }
    int err = ok ? 0 : errno;
    if (ok && fflush(f) != 0) ok = 0, err = errno;
    if (ok && fsync(fileno(f)) != 0) ok = 0, err = errno;
    if (fclose(f) != 0 && ok) ok = 0, err = errno;
    if (!ok)
        rc = ag_fail(AG_ERR_IO, "%s: write failed: %s", path, strerror(err));
    else
        rc = io_replace(tmp, path); /* a regular file or a new name only */
    if (rc != AG_OK) remove(tmp);
    free(tmp);
    return rc;
}

/* ---- reading ---- */

struct TxtShard {
    char *path;
    FILE *f;
    int width, vocab_size; /* bytes a token (2, 4); tokens are checked against vocab_size */
    size_t count;
};

int txt_shard_open(const char *path, int vocab_size, TxtShard **out) {
    AG_CHECK_ARG(path);
    AG_CHECK_ARG(out);
    *out = NULL;
    FILE *f;
    int rc = io_fopen_read(path, &f, NULL), width = 0; /* a regular file: a FIFO never hangs */
    if (rc != AG_OK) return rc;
    struct stat st;
    int32_t header[TXT_SHARD_HEADER_INTS];
    uint64_t size = 0;
    if (fstat(fileno(f), &st) != 0)
        rc = ag_fail(AG_ERR_IO, "%s: cannot stat: %s", path, strerror(errno));
    else if ((size = (uint64_t)st.st_size) < sizeof header)
        rc = ag_fail(AG_ERR_FORMAT, "%s: %llu bytes: shorter than the %zu-byte header", path,
                     (unsigned long long)size, sizeof header);
    else if (fread(header, sizeof header, 1, f) != 1)
        rc = ag_fail(AG_ERR_IO, "%s: cannot read the header: %s", path,
                     ferror(f) ? strerror(errno) : "end of file");
    else if (header[0] == TXT_SHARD_MAGIC_U16 && header[1] == TXT_SHARD_VERSION_U16)
        width = 2;
    else if (header[0] == TXT_SHARD_MAGIC_U32 && header[1] == TXT_SHARD_VERSION_U32)
        width = 4;
    else
        rc = ag_fail(AG_ERR_FORMAT,
                     "%s: magic %d version %d: not a token shard (llm.c's %d/%d uint16 or %d/%d "
                     "uint32)",
                     path, header[0], header[1], TXT_SHARD_MAGIC_U16, TXT_SHARD_VERSION_U16,
                     TXT_SHARD_MAGIC_U32, TXT_SHARD_VERSION_U32);
    if (rc == AG_OK && header[2] < 0)
        rc = ag_fail(AG_ERR_FORMAT, "%s: token count %d: must be >= 0", path, header[2]);
    uint64_t count = rc == AG_OK ? (uint64_t)header[2] : 0;
    uint64_t expect = sizeof header + count * (uint64_t)width;
    if (rc == AG_OK && expect != size)
        rc = ag_fail(
            AG_ERR_FORMAT, "%s: the header says %llu tokens (%llu bytes), the file has %llu", path,
            (unsigned long long)count, (unsigned long long)expect, (unsigned long long)size);
    TxtShard *sh = rc == AG_OK ? calloc(1, sizeof *sh) : NULL;
    char *name = sh ? strdup(path) : NULL;
    if (rc == AG_OK && !name) {
        free(sh);
        rc = ag_fail(AG_ERR_NOMEM, "%s: out of memory", path);
    }
    if (rc != AG_OK) {
        fclose(f);
        return rc;
    }
    *sh = (TxtShard){name, f, width, vocab_size, (size_t)count};
    *out = sh;
    return AG_OK;
}

size_t txt_shard_count(const TxtShard *s) {
    AG_CHECK_ARG(s);
    return s->count;
}

int txt_shard_tokens(TxtShard *s, size_t at, size_t n, int *out) {
    AG_CHECK_ARG(s);
    AG_CHECK(out || n == 0, "txt_shard_tokens: argument 'out' is NULL");
    AG_CHECK(at <= s->count && n <= s->count - at,
             "txt_shard_tokens: tokens [%zu, %zu) of %s's %zu", at, at + n, s->path, s->count);
    enum { BLOCK = 4096 };
    uint8_t buf[BLOCK * 4];
    for (size_t i = 0; i < n; i += BLOCK) {
        size_t k = n - i < BLOCK ? n - i : BLOCK;
        off_t pos = (off_t)(TXT_SHARD_HEADER_INTS * 4 + (uint64_t)(at + i) * (uint64_t)s->width);
        if (fseeko(s->f, pos, SEEK_SET) != 0 || fread(buf, (size_t)s->width, k, s->f) != k)
            return ag_fail(AG_ERR_IO, "%s: short read at token %zu", s->path, at + i);
        for (size_t j = 0; j < k; j++) {
            uint32_t v;
            if (s->width == 2)
                v = (uint32_t)buf[2 * j] | (uint32_t)buf[2 * j + 1] << 8;
            else
                v = (uint32_t)buf[4 * j] | (uint32_t)buf[4 * j + 1] << 8 |
                    (uint32_t)buf[4 * j + 2] << 16 | (uint32_t)buf[4 * j + 3] << 24;
            if (v > INT32_MAX || (s->vocab_size > 0 && v >= (uint32_t)s->vocab_size))
                return ag_fail(AG_ERR_RANGE, "%s: token %zu = %u outside the vocabulary [0, %d)",
                               s->path, at + i + j, v,
                               s->vocab_size > 0 ? s->vocab_size : INT32_MAX);
            out[i + j] = (int)v;
        }
    }
    return AG_OK;
}

int txt_shard_windows(TxtShard *s, const size_t *starts, int rows, int T, int *win, int *x,
                      int *y) {
    AG_CHECK_ARG(s);
    AG_CHECK(rows >= 0 && T >= 1, "txt_shard_windows: %d rows of %d tokens", rows, T);
    if (rows == 0) return AG_OK;
    AG_CHECK_ARG(starts);
    AG_CHECK_ARG(win);
    AG_CHECK_ARG(x);
    AG_CHECK_ARG(y);
    for (int r = 0; r < rows; r++) {
        int rc = txt_shard_tokens(s, starts[r], (size_t)T + 1, win);
        if (rc != AG_OK) return rc;
        memcpy(x + (size_t)r * T, win, (size_t)T * sizeof(int));
        memcpy(y + (size_t)r * T, win + 1, (size_t)T * sizeof(int));
    }
    return AG_OK;
}

void txt_shard_close(TxtShard *s) {
    if (!s) return;
    fclose(s->f);
    free(s->path);
    free(s);
}

int txt_shard_read(const char *path, int vocab_size, int **ids, size_t *n) {
    AG_CHECK_ARG(path);
    AG_CHECK_ARG(ids);
    AG_CHECK_ARG(n);
    *ids = NULL;
    *n = 0;
    TxtShard *s;
    int rc = txt_shard_open(path, vocab_size, &s);
    if (rc != AG_OK) return rc;
    int *out = malloc((s->count ? s->count : 1) * sizeof *out);
    if (!out)
        rc = ag_fail(AG_ERR_NOMEM, "%s: out of memory for %zu tokens", path, s->count);
    else
        rc = txt_shard_tokens(s, 0, s->count, out);
    if (rc == AG_OK) {
        *ids = out;
        *n = s->count;
    } else
        free(out);
    txt_shard_close(s);
    return rc;
}

/* ---- train/valid split and the window loader ---- */

TxtSplitRange txt_split_range(size_t n, double valid_frac) {
    AG_CHECK(valid_frac >= 0 && valid_frac <= 1, "txt_split_range: valid_frac %g outside [0, 1]",
             valid_frac);
    size_t n_valid = (size_t)((double)n * valid_frac);
    if (n_valid > n) n_valid = n;
    return (TxtSplitRange){0, n - n_valid, n - n_valid, n};
}

int txt_loader_init(TxtLoader *L, const int *tokens, size_t lo, size_t hi, int B, int T,
                    uint64_t seed, const char *label) {
    AG_CHECK_ARG(L);
    if (!label) label = "txt_loader";
    if (B < 1 || T < 1)
        return ag_fail(AG_ERR_ARG, "%s: batch %d, block %d: must be >= 1", label, B, T);
    if (hi < lo || hi - lo < (size_t)T + 1)
        return ag_fail(AG_ERR_ARG, "%s: %zu tokens: a window of block %d needs %d", label,
                       hi >= lo ? hi - lo : 0, T, T + 1);
    *L = (TxtLoader){.tokens = tokens, .lo = lo, .hi = hi, .B = B, .T = T};
    rng_seed(&L->rng, seed);
    return AG_OK;
}

/* the start of the next window of T + 1 tokens, uniform over the range */
static size_t next_start(TxtLoader *L) {
    return L->lo + (size_t)rng_below(&L->rng, (uint64_t)(L->hi - L->lo - (size_t)L->T));
}

void txt_loader_starts(TxtLoader *L, size_t *starts) {
    AG_CHECK_ARG(L);
    AG_CHECK_ARG(starts);
    for (int b = 0; b < L->B; b++) starts[b] = next_start(L);
    L->batches++;
}

void txt_loader_next(TxtLoader *L, int *x, int *y) {
    AG_CHECK_ARG(L);
    AG_CHECK_ARG(x);
    AG_CHECK_ARG(y);
    AG_CHECK(L->tokens, "txt_loader_next: the loader holds no tokens (txt_loader_starts only)");
    for (int b = 0; b < L->B; b++) {
        size_t s = next_start(L);
        memcpy(x + (size_t)b * L->T, L->tokens + s, (size_t)L->T * sizeof *x);
        memcpy(y + (size_t)b * L->T, L->tokens + s + 1, (size_t)L->T * sizeof *y);
    }
    L->batches++;
}

void txt_loader_state(const TxtLoader *L, int64_t state[TXT_LOADER_STATE_LEN]) {
    AG_CHECK_ARG(L);
    AG_CHECK_ARG(state);
    for (int i = 0; i < 4; i++) state[i] = (int64_t)L->rng.s[i];
    state[4] = L->batches;
}

int txt_loader_restore(TxtLoader *L, const int64_t state[TXT_LOADER_STATE_LEN], const char *label) {
    AG_CHECK_ARG(L);
    AG_CHECK_ARG(state);
    if (!label) label = "txt_loader";
    if (!state[0] && !state[1] && !state[2] && !state[3])
        return ag_fail(AG_ERR_RANGE, "%s: the loader's RNG state is all zeros", label);
    if (state[4] < 0)
        return ag_fail(AG_ERR_RANGE, "%s: batch count %lld: must be >= 0", label,
                       (long long)state[4]);
    for (int i = 0; i < 4; i++) L->rng.s[i] = (uint64_t)state[i];
    L->batches = state[4];
    return AG_OK;
}
