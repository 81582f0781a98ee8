/* threads_info.c: prints what the library decided about threads, and the environment the program
 * sees, for tests/tensor/test_threads.c (which runs it with chosen environments):
 *   family <AVX-512|AVX2|portable>
 *   threads <default> of <available>
 *   wait <ag_threads_wait()>
 *   env <NAME=VALUE>          one line a variable, in the order of environ
 * Not here: the checks (the test). */
#include <stdio.h>

#include "attograd.h"

extern char **environ;

int main(void) {
    printf("family %s\n", ag_kernel_family());
    printf("threads %d of %d\n", ag_threads_default(), ag_threads_available());
    printf("wait %s\n", ag_threads_wait());
    for (char **e = environ; e && *e; e++) printf("env %s\n", *e);
    return 0;
}
