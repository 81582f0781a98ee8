/* npz_tool.c: attograd's side of the numpy interop test (tests/io/test_numpy.sh).
 *   npz_tool write OUT.npz LEVEL [zip64]  writes a fixed set of arrays (below) that
 *                                         tests/io/numpy_interop.py recomputes and compares
 *   npz_tool dump IN.npz                  reads a file and prints one line per entry:
 *                                         name <TAB> descr <TAB> shape <TAB> values
 * Values: floats with %.17g (exact for float and double), integers in decimal. The value of
 * element i of a float array is (i + 1) / 3 (rounded to the stored type) unless noted. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attograd.h"

static Tensor *thirds(Arena *a, int ndim, const int *shape, const char *name, double sign) {
    Tensor *t = tensor_new(a, ndim, shape, name);
    for (size_t i = 0; i < t->size; i++) t->data[i] = (Real)(sign * (double)(i + 1) / 3.0);
    return t;
}

static int write_file(const char *path, int level, int zip64) {
    Arena *a = arena_new("npz_tool", 1 << 20);
    NpzWriter *w = npz_writer_new();
    npz_writer_force_zip64(w, zip64);
    npz_add_real(w, "real_2x3", thirds(a, 2, (int[]){2, 3}, "real_2x3", 1));
    npz_add_real(w, "real_scalar", thirds(a, 0, NULL, "real_scalar", -1));
    npz_add_real(w, "real_4d", thirds(a, 4, (int[]){2, 3, 4, 5}, "real_4d", 1));
    Tensor *v = thirds(a, 1, (int[]){7}, "v", 1);
    npz_add_real_as(w, "f32_from_real", v, NPZ_F32);
    npz_add_real_as(w, "f64_from_real", v, NPZ_F64);
    npz_add_real(w, "encoder.layers.0.self_attn.in_proj_weight",
                 thirds(a, 2, (int[]){6, 4}, "w", -1));
    static const int64_t i64[5] = {INT64_MIN, -1, 0, 42, INT64_MAX};
    npz_add_i64(w, "train.step", 1, (int64_t[]){5}, i64);
    static const uint64_t u64[4] = {0, 1, 0x0123456789abcdefull, UINT64_MAX};
    npz_add_u64(w, "rng.state", 1, (int64_t[]){4}, u64);
    static const int32_t i32[6] = {INT32_MIN, -7, 0, 7, 1000000, INT32_MAX};
    npz_add_i32(w, "i32", 2, (int64_t[]){3, 2}, i32);
    static const char text[] = "{\"vocab\": [\"h\xc3\xa9llo\", \"w\xc3\xb6rld\"]}";
    npz_add_bytes(w, "meta.config", text, sizeof text - 1);
    npz_add_f32(w, "empty", 2, (int64_t[]){0, 3}, NULL);
    static const double one = 1.0;
    npz_add_f64(w, "na\xc3\xafve", 0, NULL, &one);
    NpzStats st;
    int rc = npz_write(w, path, level, &st);
    if (rc)
        fprintf(stderr, "npz_tool: %s\n", ag_last_error());
    else
        fprintf(stderr, "npz_tool: wrote %s: %d entries, %zu raw bytes, %zu in the file\n", path,
                st.n_entries, st.raw_bytes, st.file_bytes);
    npz_writer_free(w);
    arena_free(a);
    return rc ? 1 : 0;
}

static int dump_file(const char *path) {
    NpzFile *f;
    if (npz_read(path, &f, NULL)) {
        fprintf(stderr, "npz_tool: %s\n", ag_last_error());
        return 1;
    }
    char sh[256];
    for (int i = 0; i < f->n; i++) {
        const NpzEntry *e = &f->entries[i];
        printf("%s\t%s\t%s\t", e->name, npz_dtype_descr(e->dtype),
               npz_shape_str(sh, sizeof sh, e->ndim, e->shape));
        for (size_t k = 0; k < e->count; k++) {
            if (k) putchar(' ');
            switch (e->dtype) {
            case NPZ_F32: printf("%.17g", (double)((const float *)e->data)[k]); break;
            case NPZ_F64: printf("%.17g", ((const double *)e->data)[k]); break;
            case NPZ_I64: printf("%lld", (long long)((const int64_t *)e->data)[k]); break;
            case NPZ_U64: printf("%llu", (unsigned long long)((const uint64_t *)e->data)[k]); break;
            case NPZ_I32: printf("%d", (int)((const int32_t *)e->data)[k]); break;
            case NPZ_U8: printf("%u", (unsigned)((const uint8_t *)e->data)[k]); break;
            default: break;
            }
        }
        putchar('\n');
    }
    npz_free(f);
    return 0;
}

int main(int argc, char **argv) {
    if (argc >= 4 && strcmp(argv[1], "write") == 0)
        return write_file(argv[2], atoi(argv[3]), argc > 4 && strcmp(argv[4], "zip64") == 0);
    if (argc == 3 && strcmp(argv[1], "dump") == 0) return dump_file(argv[2]);
    fprintf(stderr, "usage: npz_tool write OUT.npz LEVEL [zip64] | npz_tool dump IN.npz\n");
    return 2;
}
