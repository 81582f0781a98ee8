/* params.c: the parameter list (ParamList): a growing array of leaf tensors with unique names,
 * in the order they were added. Models fill one (nn's NnBuilder does it for its modules), the
 * optimizer updates what it lists, gradient clipping and the .npz files walk it by name.
 * Not here: creating the tensors (tensor_param, ../tensor) or naming them by module (../nn).
 * Read next: ../nn/nn.c (nn_param adds each module's weights here). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../tensor/kernels.h"
#include "autograd.h"

void ag_params_init(ParamList *pl) {
    AG_CHECK_ARG(pl);
    memset(pl, 0, sizeof *pl);
}

void ag_params_free(ParamList *pl) {
    AG_CHECK_ARG(pl);
    free(pl->items);
    memset(pl, 0, sizeof *pl);
}

void ag_params_add(ParamList *pl, Tensor *t) {
    AG_CHECK_ARG(pl);
    AG_CHECK_ARG(t);
    AG_CHECK(ag_params_find(pl, t->name) == NULL, "ag_params_add: a parameter named '%s' exists",
             t->name);
    if (pl->n == pl->cap) {
        int cap = pl->cap ? 2 * pl->cap : 64;
        Tensor **items = realloc(pl->items, (size_t)cap * sizeof *items);
        AG_CHECK(items != NULL, "ag_params_add: out of memory for the parameter list");
        pl->items = items;
        pl->cap = cap;
    }
    pl->items[pl->n++] = t;
}

Tensor *ag_params_find(const ParamList *pl, const char *name) {
    AG_CHECK_ARG(pl);
    AG_CHECK_ARG(name);
    for (int i = 0; i < pl->n; i++)
        if (strcmp(pl->items[i]->name, name) == 0) return pl->items[i];
    return NULL;
}

size_t ag_params_count(const ParamList *pl) {
    AG_CHECK_ARG(pl);
    size_t n = 0;
    for (int i = 0; i < pl->n; i++) n += pl->items[i]->size;
    return n;
}

double ag_params_norm(const ParamList *pl) {
    AG_CHECK_ARG(pl);
    double s2 = 0;
    for (int i = 0; i < pl->n; i++) {
        const Tensor *x = pl->items[i];
        for (size_t j = 0; j < x->size; j++) s2 += (double)x->data[j] * x->data[j];
    }
    return sqrt(s2);
}

void ag_params_zero_grad(const ParamList *pl) {
    AG_CHECK_ARG(pl);
    k_zero_grads(pl->items, pl->n);
}

void ag_params_print(const ParamList *pl, FILE *f) {
    AG_CHECK_ARG(pl);
    AG_CHECK_ARG(f);
    for (int i = 0; i < pl->n; i++)
        fprintf(f, "%-56s %-16s %10zu\n", pl->items[i]->name, tensor_shape_str(pl->items[i]),
                pl->items[i]->size);
    fprintf(f, "%d tensors, %zu parameters\n", pl->n, ag_params_count(pl));
}
