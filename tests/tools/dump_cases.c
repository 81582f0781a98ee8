/* dump_cases.c: runs every op case forward and backward and prints the output and the input
 * gradients, one value a line at full precision. The float suite runs the double build's copy
 * of this program and compares (tests/autograd/test_precision.c). */
#include <stdio.h>

#include "cases.h"

int main(void) {
    size_t n;
    const GcCase *cases = gc_cases(&n);
    TestEnv env = test_env_new();
    Arena *params = env.params;
    Tape *tape = env.tape;
    for (size_t k = 0; k < n; k++) {
        Tensor *in[GC_MAX_IN];
        arena_reset(params);
        gc_make_inputs(&cases[k], params, in);
        ag_tape_reset(tape);
        Tensor *out = gc_forward_backward(&cases[k], tape, in);
        printf("case %zu %zu\n", k, out->size);
        for (size_t j = 0; j < out->size; j++) printf("%.17g\n", (double)out->data[j]);
        for (int i = 0; i < cases[k].n_in; i++) {
            if (!in[i]->requires_grad) continue;
            printf("grad %d %zu\n", i, in[i]->size);
            for (size_t j = 0; j < in[i]->size; j++) printf("%.17g\n", (double)in[i]->grad[j]);
        }
    }
    test_env_free(&env);
    return 0;
}
