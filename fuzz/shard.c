/* shard.c: the token shard reader (txt_shard_read), fed any file. What it accepts must be one of
 * llm.c's two kinds with a count that matches the file's size, and must write back
 * (txt_shard_write) to exactly the same bytes. */
#include <limits.h>
#include <string.h>
#include <unistd.h>

#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *path = fuzz_file(data, size);
    int *ids;
    size_t n;
    int rc = txt_shard_read(path, 0, &ids, &n);
    if (rc != AG_OK) {
        fuzz_check_failure(rc, path);
        return 0;
    }
    int32_t magic;
    memcpy(&magic, data, 4);
    int wide = magic == TXT_SHARD_MAGIC_U32;
    FUZZ_CHECK(wide || magic == TXT_SHARD_MAGIC_U16, "magic %d accepted", magic);
    FUZZ_CHECK(size == 1024 + n * (wide ? 4 : 2), "%zu tokens in %zu bytes", n, size);
    /* the header's other ints are llm.c's to fill: only zeros there write back the same */
    int zero = 1;
    for (size_t i = 12; i < 1024; i++) zero &= data[i] == 0;
    int max = 0;
    for (size_t i = 0; i < n; i++) max = ids[i] > max ? ids[i] : max;
    /* the writer picks uint16 for a vocabulary up to 65536: a uint32 file of small ids is
     * written back narrower, so compare only where the width is the writer's own choice */
    if (zero && max < INT_MAX && (wide == (max >= 65536))) { /* (INT_MAX + 1: no int vocab) */
        /* in /dev/shm (a tmpfs: the writer's fsync costs nothing) where there is one */
        static char out[64];
        snprintf(out, sizeof out, "%s/attograd-fuzz-shard.%d",
                 access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp", (int)getpid());
        FUZZ_CHECK(txt_shard_write(out, ids, n, wide ? max + 1 : 65536) == AG_OK, "write: %s",
                   ag_last_error());
        FILE *f = fopen(out, "rb");
        uint8_t *back = malloc(size);
        FUZZ_CHECK(f && fread(back, 1, size, f) == size && fgetc(f) == EOF, "read back");
        fclose(f);
        remove(out);
        FUZZ_CHECK(memcmp(back, data, size) == 0, "written back: other bytes");
        free(back);
    }
    free(ids);
    return 0;
}
