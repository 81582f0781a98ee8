/* test_params.c: the parameter list (ag_params_*, src/autograd/params.c): adding and finding
 * by name, counting, the weight norm, printing, and zeroing every gradient in one pass on any
 * thread count. */
#include <criterion/criterion.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "tensor/kernels.h" /* below the public API: k_par_min */
#include "attograd.h"

/* sizes on both sides of k_team_slice's 4096 (whole to one thread / cut in slices), one not a
 * multiple of 16, and a tensor without a gradient in the middle */
static const int SIZES[] = {3, 4095, 4096, 10007, 1, 70000};
#define N_SIZES ((int)(sizeof SIZES / sizeof SIZES[0]))

static void fill(ParamList *pl, Arena *a, Tensor **nograd) {
    ag_params_init(pl);
    for (int i = 0; i < N_SIZES; i++) {
        char name[32];
        snprintf(name, sizeof name, "p%d.weight", i);
        Tensor *t = tensor_param(a, 1, &SIZES[i], name);
        for (size_t j = 0; j < t->size; j++) t->grad[j] = (Real)(j % 7 + 1);
        ag_params_add(pl, t);
    }
    int shape = 5;
    *nograd = tensor_new(a, 1, &shape, "buffer"); /* no gradient: zeroing leaves it be */
    ag_params_add(pl, *nograd);
}

Test(ag_params, zero_grad_clears_every_gradient_on_any_thread_count) {
    size_t saved = k_par_min;
    k_par_min = 1; /* split even small lists across threads */
    for (int threads = 1; threads <= 3; threads++) {
#ifdef _OPENMP
        omp_set_num_threads(threads);
#endif
        Arena *a = arena_new("params", 4 << 20);
        ParamList pl;
        Tensor *nograd;
        fill(&pl, a, &nograd);
        cr_assert_null(nograd->grad);
        ag_params_zero_grad(&pl);
        for (int i = 0; i < N_SIZES; i++) {
            Tensor *t = pl.items[i];
            for (size_t j = 0; j < t->size; j++)
                cr_assert_eq(t->grad[j], 0, "%d threads: %s[%zu] = %g", threads, t->name, j,
                             (double)t->grad[j]);
        }
        ag_params_free(&pl);
        arena_free(a);
    }
    k_par_min = saved;
}

Test(ag_params, find_count_and_print) {
    Arena *a = arena_new("params", 4 << 20);
    ParamList pl;
    Tensor *nograd;
    fill(&pl, a, &nograd);
    cr_assert_eq(pl.n, N_SIZES + 1);
    cr_assert_eq(ag_params_find(&pl, "p3.weight"), pl.items[3]);
    cr_assert_eq(ag_params_find(&pl, "buffer"), nograd);
    cr_assert_null(ag_params_find(&pl, "p3"));
    size_t total = 5;
    for (int i = 0; i < N_SIZES; i++) total += (size_t)SIZES[i];
    cr_assert_eq(ag_params_count(&pl), total);
    char buf[4096];
    FILE *f = fmemopen(buf, sizeof buf, "w");
    ag_params_print(&pl, f);
    fclose(f);
    char want[64];
    snprintf(want, sizeof want, "%d tensors, %zu parameters\n", N_SIZES + 1, total);
    cr_assert(strstr(buf, want) != NULL, "%s", buf);
    cr_assert(strstr(buf, "p5.weight") != NULL, "%s", buf);
    ag_params_free(&pl);
    cr_assert_eq(pl.n, 0);
    cr_assert_null(pl.items);
    arena_free(a);
}

Test(ag_params, a_name_added_twice_aborts, .signal = SIGABRT) {
    Arena *a = arena_new("params", 1 << 20);
    ParamList pl;
    ag_params_init(&pl);
    int shape = 2;
    ag_params_add(&pl, tensor_param(a, 1, &shape, "w"));
    ag_params_add(&pl, tensor_param(a, 1, &shape, "w"));
}

Test(ag_params, norm_of_every_value_together) {
    Arena *a = arena_new("params", 0);
    ParamList pl;
    ag_params_init(&pl);
    cr_assert_eq(ag_params_norm(&pl), 0.0, "an empty list");
    Tensor *w = tensor_param(a, 2, (int[]){2, 2}, "w"), *b = tensor_param(a, 1, (int[]){1}, "b");
    const double v[5] = {1, -2, 0.5, 3, -0.25};
    for (int i = 0; i < 4; i++) w->data[i] = (Real)v[i];
    b->data[0] = (Real)v[4];
    ag_params_add(&pl, w);
    ag_params_add(&pl, b);
    double s2 = 0;
    for (int i = 0; i < 5; i++) s2 += v[i] * v[i];
    cr_assert_eq(ag_params_norm(&pl), sqrt(s2), "%.17g, not %.17g", ag_params_norm(&pl), sqrt(s2));
    ag_params_free(&pl);
    arena_free(a);
}
