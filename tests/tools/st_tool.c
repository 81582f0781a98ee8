/* st_tool.c: attograd's side of the safetensors interop test (tests/io/test_numpy.sh).
 *   st_tool write OUT.safetensors [bf16]  writes a fixed set of tensors (below) that
 *                                         tests/io/safetensors_interop.py recomputes and loads
 *                                         with safetensors.numpy (bf16: with BF16 tensors too,
 *                                         for safetensors.torch; numpy has no bfloat16)
 *   st_tool dump PATH                     opens a file, an index or a folder (st_open) and
 *                                         prints one line per tensor:
 *                                         name <TAB> dtype <TAB> shape <TAB> values
 * Values: %.17g (exact for every float type). Element i of "thirds" is float32((i + 1) / 3)
 * times the tensor's sign, so that both builds write the same values. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "attograd.h"

static Tensor *thirds(Arena *a, int ndim, const int *shape, double sign) {
    Tensor *t = tensor_new(a, ndim, shape, "t");
    for (size_t i = 0; i < t->size; i++) t->data[i] = (Real)(float)(sign * (double)(i + 1) / 3.0);
    return t;
}

static int write_file(const char *path, int bf16) {
    Arena *a = arena_new("st_tool", 1 << 20);
    StWriter *w = st_writer_new();
    st_add_real(w, "transformer.wte.weight", thirds(a, 2, (int[]){5, 4}, 1), ST_F32);
    st_add_real(w, "transformer.h.0.attn.c_attn.weight", thirds(a, 2, (int[]){4, 12}, -1), ST_F64);
    st_add_real(w, "transformer.h.0.ln_1.weight", thirds(a, 1, (int[]){4}, 1), ST_F16);
    st_add_real(w, "scalar", thirds(a, 0, NULL, -1), ST_F32);
    if (bf16)
        st_add_real(w, "transformer.h.0.mlp.c_fc.weight", thirds(a, 3, (int[]){2, 3, 4}, 1),
                    ST_BF16);
    Tensor *sp = tensor_new1(a, 5, "specials");
    sp->data[0] = (Real)NAN;
    sp->data[1] = (Real)INFINITY;
    sp->data[2] = (Real)-INFINITY;
    sp->data[3] = (Real)-0.0;
    sp->data[4] = (Real)1e-40; /* a float32 subnormal, 0 in F16 */
    st_add_real(w, "specials.f32", sp, ST_F32);
    st_add_real(w, "specials.f16", sp, ST_F16);
    static const int64_t ids[6] = {0, 1, 2, 3, 4, 5};
    st_add(w, "position_ids", ST_I64, 2, (int64_t[]){1, 6}, ids);
    st_add(w, "empty", ST_F32, 2, (int64_t[]){0, 3}, NULL);
    st_add_meta(w, "source", "attograd st_tool");
    StStats st;
    int rc = st_write(w, path, &st);
    if (rc)
        fprintf(stderr, "st_tool: %s\n", ag_last_error());
    else
        fprintf(stderr, "st_tool: wrote %s: %d tensors, %zu bytes\n", path, st.n_tensors,
                st.file_bytes);
    st_writer_free(w);
    arena_free(a);
    return rc ? 1 : 0;
}

static int dump(const char *path) {
    StSet *s;
    if (st_open(path, &s, NULL) != AG_OK) {
        fprintf(stderr, "st_tool: %s\n", ag_last_error());
        return 2;
    }
    for (int k = 0; k < s->n; k++) {
        const StTensor *t = s->tensors[k];
        char sh[ST_MAX_DIMS * 24];
        printf("%s\t%s\t%s\t", t->name, st_dtype_name(t->dtype),
               st_shape_str(sh, sizeof sh, t->ndim, t->shape));
        for (size_t i = 0; i < t->count; i++) printf("%s%.17g", i ? " " : "", st_value(t, i));
        printf("\n");
    }
    for (int i = 0; i < s->n_files; i++)
        for (int m = 0; m < s->files[i]->n_meta; m++)
            printf("#meta\t%s\t%s\n", s->files[i]->meta_keys[m], s->files[i]->meta_values[m]);
    st_set_free(s);
    return 0;
}

int main(int argc, char **argv) {
    if (argc >= 3 && strcmp(argv[1], "write") == 0)
        return write_file(argv[2], argc > 3 && strcmp(argv[3], "bf16") == 0);
    if (argc == 3 && strcmp(argv[1], "dump") == 0) return dump(argv[2]);
    fprintf(stderr, "usage: st_tool write OUT.safetensors [bf16] | st_tool dump PATH\n");
    return 2;
}
