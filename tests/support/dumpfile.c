/* dumpfile.c: writes the records of the PyTorch comparisons' binary files (dumpfile.h). */
#include "dumpfile.h"

#include <stdio.h>
#include <string.h>

FILE *dump_open(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: %s OUTPUT\n", argv[0]);
        return NULL;
    }
    FILE *f = fopen(argv[1], "wb");
    if (!f) perror(argv[1]);
    return f;
}

int dump_close(FILE *f, const char *path) {
    int bad = ferror(f) != 0;
    bad |= fclose(f) != 0;
    if (bad) perror(path);
    return bad;
}

static void header(FILE *f, const char *name, int ndim, const int *shape) {
    uint32_t len = (uint32_t)strlen(name), nd = (uint32_t)ndim;
    fwrite(&len, 4, 1, f);
    fwrite(name, 1, len, f);
    fwrite(&nd, 4, 1, f);
    for (int i = 0; i < ndim; i++) {
        uint32_t d = (uint32_t)shape[i];
        fwrite(&d, 4, 1, f);
    }
}

void dump_values(FILE *f, const char *name, int ndim, const int *shape, const double *v) {
    size_t n = 1;
    for (int i = 0; i < ndim; i++) n *= (size_t)shape[i];
    header(f, name, ndim, shape);
    fwrite(v, 8, n, f);
}

void dump_tensor(FILE *f, const char *name, const Tensor *t, const Real *values) {
    header(f, name, t->ndim, t->shape);
    for (size_t i = 0; i < t->size; i++) {
        double v = (double)values[i];
        fwrite(&v, 8, 1, f);
    }
}
