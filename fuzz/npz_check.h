/* npz_check.h: the invariants of a file npz_read accepted, shared by the npy and npz harnesses:
 * every entry's element count is the product of its shape, its bytes are count times the item
 * size, the whole fits the limits, npz_find finds each entry by name, and a float entry copies
 * into a tensor of its shape. */
#ifndef ATTOGRAD_FUZZ_NPZ_CHECK_H
#define ATTOGRAD_FUZZ_NPZ_CHECK_H

#include <limits.h>
#include <string.h>

#include "fuzz.h"

static void check_npz(const NpzFile *f, const NpzLimits *lim, size_t input_size) {
    size_t total = 0;
    FUZZ_CHECK(f->n >= 0 && (size_t)f->n <= lim->max_entries, "%d entries", f->n);
    for (int i = 0; i < f->n; i++) {
        const NpzEntry *e = &f->entries[i];
        FUZZ_CHECK(e->name && e->name[0], "entry %d has no name", i);
        FUZZ_CHECK(e->dtype >= 0 && e->dtype < NPZ_N_DTYPES, "dtype %d", (int)e->dtype);
        FUZZ_CHECK(e->ndim >= 0 && e->ndim <= NPZ_MAX_DIMS, "ndim %d", e->ndim);
        size_t count = 1;
        int fits_int = 1;
        for (int d = 0; d < e->ndim; d++) {
            FUZZ_CHECK(e->shape[d] >= 0, "negative dim");
            count *= (size_t)e->shape[d];
            fits_int &= e->shape[d] >= 1 && e->shape[d] <= INT_MAX;
        }
        FUZZ_CHECK(count == e->count, "count %zu, shape says %zu", e->count, count);
        FUZZ_CHECK(e->nbytes == e->count * npz_dtype_size(e->dtype), "nbytes %zu", e->nbytes);
        FUZZ_CHECK(e->data != NULL, "no data");
        if (e->nbytes) { /* touch every byte: ASan checks the buffer is that long */
            volatile unsigned char sum = 0;
            for (size_t k = 0; k < e->nbytes; k++) sum ^= ((const unsigned char *)e->data)[k];
            (void)sum;
        }
        total += e->nbytes;
        FUZZ_CHECK(npz_find(f, e->name) == e, "npz_find('%s') finds another entry", e->name);
        /* a float entry into a tensor of its shape (dims that fit a tensor's ints) */
        if ((e->dtype == NPZ_F32 || e->dtype == NPZ_F64) && fits_int && e->ndim <= AG_MAX_DIMS &&
            e->count <= (1u << 20)) {
            int shape[AG_MAX_DIMS];
            for (int d = 0; d < e->ndim; d++) shape[d] = (int)e->shape[d];
            Arena *a = arena_new("fuzz", e->count * sizeof(Real) + 4096);
            Tensor *t = tensor_new(a, e->ndim, shape, "t");
            int converted = -1;
            int rc = npz_entry_to_tensor(f, e, t, &converted);
            FUZZ_CHECK(rc == AG_OK, "npz_entry_to_tensor: %s", ag_last_error());
            FUZZ_CHECK(converted == (e->dtype != NPZ_REAL), "converted %d", converted);
            if (e->dtype == NPZ_REAL)
                FUZZ_CHECK(memcmp(t->data, e->data, e->nbytes) == 0, "copy differs");
            arena_free(a);
        }
    }
    FUZZ_CHECK(total == f->data_bytes, "data_bytes %zu, entries %zu", f->data_bytes, total);
    FUZZ_CHECK(total <= lim->max_bytes, "%zu bytes over the limit %zu", total, lim->max_bytes);
    /* stored: at most the input; deflated: at most 1032 times it (deflate's best ratio) */
    FUZZ_CHECK(total <= 1032 * (input_size + 64), "%zu bytes from an input of %zu", total,
               input_size);
}

#endif
