/* gen.c: the corpus generator's command line; everything it does is corpus_main in corpus.c.
 * make data builds it as build/data/gen and writes the .tsv files of build/data/ with the default seed.
 * Usage: gen --out DIR --seed N --task translate|copy|reverse (gen --help for every flag).
 * Read data/README.md for what the files hold, data/corpus.h for the functions. */
#include "corpus.h"

int main(int argc, char **argv) { return corpus_main(argc, argv); }
