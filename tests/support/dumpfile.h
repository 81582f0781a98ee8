/* dumpfile.h: the writer of the binary files that the PyTorch comparisons read
 * (tests/support/dumpfile.py): a run of records, each [u32 name length][name][u32 ndim]
 * [u32 shape...][f64 values...], little-endian, values in row-major order. Used by the dump
 * tools (tests/tools/torch_dump.c, optim_dump.c, ops_dump.c). Not here: the reader
 * (dumpfile.py). */
#ifndef ATTOGRAD_TEST_DUMPFILE_H
#define ATTOGRAD_TEST_DUMPFILE_H

#include <stdio.h>

#include "attograd.h"

/* The output file of a dump tool run as `TOOL OUTPUT`, opened for writing; NULL (after saying
 * why on stderr: the usage, or the path and the reason) when the command line is wrong or the
 * file cannot be created. */
FILE *dump_open(int argc, char **argv);
/* Closes f; 0, or 1 after naming path and the reason when a write or the close failed. */
int dump_close(FILE *f, const char *path);
/* one record: name, shape (ndim dims) and the product of the dims' values */
void dump_values(FILE *f, const char *name, int ndim, const int *shape, const double *v);
/* one record with t's shape and the values (t's data or its gradient), as doubles */
void dump_tensor(FILE *f, const char *name, const Tensor *t, const Real *values);

#endif
