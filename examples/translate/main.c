/* main.c: attograd-translate, the translation example's program. Everything lives in the
 * library part of this folder (translate.h); the tests call the same functions directly.
 * `train` runs as one of the processes of an mpirun in the MPI build (docs/mpi.md).
 * Read next: translate.h, then cli.c for the subcommands and their flags. */
#include "translate.h"

#include <string.h>

int main(int argc, char **argv) {
    if (argc < 2 || strcmp(argv[1], "train") != 0) return tr_main(argc, argv);
    dist_init(); /* under mpirun: one of the processes (docs/mpi.md) */
    int code = tr_main(argc, argv);
    dist_finalize();
    return code;
}
