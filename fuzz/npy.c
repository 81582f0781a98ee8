/* npy.c: the .npy reader. The input is the bytes of one .npy array, wrapped as the single
 * stored entry of a valid zip (fuzz_npy_as_npz), so that everything after the zip layer sees
 * them: the magic and version, the header length, the Python-dict header (descr,
 * fortran_order, shape), the shape against the data size, the copy into a tensor. */
#include "npz_check.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *path = fuzz_npy_as_npz(data, size);
    NpzLimits lim = npz_default_limits();
    NpzFile *f = NULL;
    int rc = npz_read(path, &f, NULL);
    if (rc != AG_OK) {
        FUZZ_CHECK(f == NULL, "a failed read returned a file");
        fuzz_check_failure(rc, path);
        FUZZ_CHECK(strstr(ag_last_error(), "entry 'x.npy'"), "the entry is not named: %s",
                   ag_last_error());
        return 0;
    }
    FUZZ_CHECK(f->n == 1 && strcmp(f->entries[0].name, "x") == 0, "one entry 'x'");
    check_npz(f, &lim, size);
    npz_free(f);
    return 0;
}
