/* optim_dump.c: runs attograd's optimizers (SGD with momentum, Nesterov and weight decay;
 * Adam with L2 decay; AdamW; with and without lr schedules) for STEPS steps on fixed
 * parameters and a fixed sequence of gradients, clips one set of gradients, and writes
 * everything (initial parameters, gradients, hyperparameters, the lr of each step, final
 * parameters and optimizer state, clipping results) to a file that tests/optim/optim_compare.py
 * replays with torch.optim in float64 and compares. Double build.
 * File format (as tests/tools/torch_dump.c): records of
 * [u32 name length][name][u32 ndim][u32 shape...][f64 data...]. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attograd.h"
#include "dumpfile.h"

#define STEPS 6

static FILE *out;

static void put_vals(const char *name, int ndim, const int *shape, const double *v) {
    dump_values(out, name, ndim, shape, v);
}

static void put(const char *name, const Tensor *t, const Real *values) {
    dump_tensor(out, name, t, values);
}

/* A configuration as 12 numbers the script reads back. */
static void put_config(const char *name, const OptimConfig *c) {
    double h[12] = {c->kind,
                    c->lr,
                    c->momentum,
                    c->nesterov,
                    c->beta1,
                    c->beta2,
                    c->eps,
                    c->weight_decay,
                    c->schedule.kind,
                    (double)c->schedule.warmup,
                    (double)c->schedule.total,
                    c->schedule.lr_min};
    put_vals(name, 1, (int[]){12}, h);
}

static OptimConfig sgd(double lr, double momentum, int nesterov, double wd) {
    OptimConfig c = optim_defaults(OPTIM_SGD);
    c.lr = lr;
    c.momentum = momentum;
    c.nesterov = nesterov;
    c.weight_decay = wd;
    return c;
}

static OptimConfig adam(OptimKind kind, double lr, double b1, double b2, double eps, double wd) {
    OptimConfig c = optim_defaults(kind);
    c.lr = lr;
    c.beta1 = b1;
    c.beta2 = b2;
    c.eps = eps;
    c.weight_decay = wd;
    return c;
}

int main(int argc, char **argv) {
    out = dump_open(argc, argv);
    if (!out) return 2;
    OptimConfig cases[10];
    int n_cases = 0;
    cases[n_cases++] = sgd(0.1, 0, 0, 0);
    cases[n_cases++] = sgd(0.05, 0.9, 0, 0.01);
    cases[n_cases++] = sgd(0.05, 0.9, 1, 0.01);
    cases[n_cases++] = optim_defaults(OPTIM_ADAM);
    cases[n_cases++] = adam(OPTIM_ADAM, 1e-2, 0.8, 0.99, 1e-6, 0.1);
    cases[n_cases++] = adam(OPTIM_ADAMW, 1e-2, 0.9, 0.999, 1e-8, 0.1);
    cases[n_cases++] = optim_defaults(OPTIM_ADAMW);
    cases[n_cases] = adam(OPTIM_ADAMW, 3e-2, 0.9, 0.98, 1e-9, 0.05);
    cases[n_cases++].schedule = (OptimSchedule){OPTIM_WARMUP_COSINE, 2, 5, 1e-3};
    cases[n_cases] = adam(OPTIM_ADAM, 1e-2, 0.9, 0.98, 1e-9, 0);
    cases[n_cases++].schedule = (OptimSchedule){OPTIM_WARMUP_INVSQRT, 3, 0, 0};
    cases[n_cases] = sgd(0.2, 0.5, 1, 0.001);
    cases[n_cases++].schedule = (OptimSchedule){OPTIM_WARMUP_INVSQRT, 2, 0, 0};

    Rng rng;
    rng_seed(&rng, 1234);
    /* the parameters' initial values and the gradients of every step, shared by all cases */
    Arena *ref = arena_new("reference", 1 << 20);
    ParamList init;
    ag_params_init(&init);
    NnBuilder b = nn_builder(ref, &init, &rng);
    nn_param(&b, "layer.weight", 2, (int[]){4, 5});
    nn_param(&b, "layer.bias", 1, (int[]){5});
    nn_param(&b, "blocks.0.gain", 3, (int[]){2, 3, 2});
    Tensor *grads[STEPS][3];
    char name[256];
    for (int j = 0; j < init.n; j++) {
        rng_fill_normal(&rng, init.items[j], 0, 1);
        snprintf(name, sizeof name, "init.%s", init.items[j]->name);
        put(name, init.items[j], init.items[j]->data);
    }
    for (int s = 0; s < STEPS; s++)
        for (int j = 0; j < init.n; j++) {
            Tensor *p = init.items[j];
            grads[s][j] = tensor_new(ref, p->ndim, p->shape, "g");
            /* gradients of different sizes, a few large, so that clipping and eps matter */
            rng_fill_normal(&rng, grads[s][j], 0, s == 2 ? 3 : 0.5);
            snprintf(name, sizeof name, "grad.%d.%s", s, p->name);
            put(name, p, grads[s][j]->data);
        }

    for (int k = 0; k < n_cases; k++) {
        Arena *a = arena_new("params", 1 << 20);
        ParamList pl;
        ag_params_init(&pl);
        NnBuilder cb = nn_builder(a, &pl, &rng);
        for (int j = 0; j < init.n; j++) {
            Tensor *p =
                nn_param(&cb, init.items[j]->name, init.items[j]->ndim, init.items[j]->shape);
            memcpy(p->data, init.items[j]->data, p->size * sizeof(Real));
        }
        Optimizer *o = optim_new(a, &pl, &cases[k]);
        double lrs[STEPS];
        for (int s = 0; s < STEPS; s++) {
            for (int j = 0; j < pl.n; j++)
                memcpy(pl.items[j]->grad, grads[s][j]->data, pl.items[j]->size * sizeof(Real));
            optim_step(o);
            lrs[s] = o->last_lr;
        }
        snprintf(name, sizeof name, "case.%d.config", k);
        put_config(name, &cases[k]);
        double steps = (double)optim_get_step(o);
        snprintf(name, sizeof name, "case.%d.step", k);
        put_vals(name, 1, (int[]){1}, &steps);
        snprintf(name, sizeof name, "case.%d.lrs", k);
        put_vals(name, 1, (int[]){STEPS}, lrs);
        for (int j = 0; j < pl.n; j++) {
            snprintf(name, sizeof name, "case.%d.param.%s", k, pl.items[j]->name);
            put(name, pl.items[j], pl.items[j]->data);
        }
        for (int i = 0; i < optim_state_count(o); i++) {
            Tensor *st = optim_state_tensor(o, i);
            snprintf(name, sizeof name, "case.%d.state.%s", k, st->name);
            put(name, st, st->data);
        }
        ag_params_free(&pl);
        arena_free(a);
    }

    /* clipping: the gradients of step 2 (the large ones), clipped to 1.5 */
    for (int j = 0; j < init.n; j++)
        memcpy(init.items[j]->grad, grads[2][j]->data, init.items[j]->size * sizeof(Real));
    double max_norm = 1.5, norm = optim_clip_grad_norm(&init, max_norm);
    put_vals("clip.max_norm", 1, (int[]){1}, &max_norm);
    put_vals("clip.norm", 1, (int[]){1}, &norm);
    for (int j = 0; j < init.n; j++) {
        snprintf(name, sizeof name, "clip.grad.%s", init.items[j]->name);
        put(name, init.items[j], init.items[j]->grad);
    }

    ag_params_free(&init);
    arena_free(ref);
    return dump_close(out, argv[1]);
}
