/* main.c: attograd-translate, the translation example's program. Everything lives in the
 * library part of this folder (translate.h); the tests call the same functions directly.
 * Read next: translate.h, then cli.c for the subcommands and their flags. */
#include "translate.h"

int main(int argc, char **argv) { return tr_main(argc, argv); }
