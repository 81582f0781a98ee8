/* npz.c: the .npz reader on whole files: the end records (ZIP64 too), the central directory,
 * the local headers, overlaps, stored and deflated data (zip bombs, sizes that disagree), the
 * CRC-32, the .npy headers. Each input is read twice: with the default limits, and with small
 * ones (4 KiB, 4 entries) that a success must respect, the entries' CRC-32 then unchecked
 * (npz_test_skip_crc) so that changed bytes inside entries reach the .npy headers. */
#include "io/npz_internal.h"
#include "npz_check.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *path = fuzz_file(data, size);
    NpzLimits lims[2] = {npz_default_limits(), {4096, 4}};
    for (int k = 0; k < 2; k++) {
        npz_test_skip_crc(k == 1);
        NpzFile *f = NULL;
        int rc = npz_read(path, &f, &lims[k]);
        if (rc != AG_OK) {
            FUZZ_CHECK(f == NULL, "a failed read returned a file");
            fuzz_check_failure(rc, path);
            continue;
        }
        FUZZ_CHECK(f->file_bytes == size, "file_bytes %zu of %zu", f->file_bytes, size);
        check_npz(f, &lims[k], size);
        npz_free(f);
    }
    npz_test_skip_crc(0);
    return 0;
}
