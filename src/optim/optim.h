/* optim.h: optimizers (SGD with momentum and Nesterov, Adam, AdamW) with the formulas of
 * torch.optim (PyTorch 1.13), learning-rate schedules, gradient clipping by global norm.
 * An optimizer keeps its state (moments, momentum buffers) in tensors allocated once, at
 * creation, in a long-lived arena the caller passes; a step allocates nothing. The state
 * tensors are named "optim.<param name>.<what>" and, with the step count, are everything a
 * checkpoint needs to resume (optim_state_count / optim_state_tensor / optim_get_step).
 * Not here: the update loops themselves (../tensor/k_optim.c), parameters (../nn/nn.h).
 * Read next: optim.c (optim_step), then k_optim.c. */
#ifndef ATTOGRAD_OPTIM_H
#define ATTOGRAD_OPTIM_H

#include <stdint.h>

#include "../autograd/autograd.h"

/* ---- learning-rate schedules ----
 * The lr of step t (t = 1 for the first step; t is the optimizer's step count after the step,
 * so it is part of the training state) is base * f(t), with base the optimizer's lr:
 *   OPTIM_CONSTANT: base.
 *   OPTIM_WARMUP_INVSQRT ("Attention Is All You Need", 5.3, with base = d_model^-0.5 *
 *     warmup^-0.5): base * min(t / warmup, sqrt(warmup / t)). Rises linearly to base at
 *     t = warmup, then decays as 1/sqrt(t). warmup >= 1.
 *   OPTIM_WARMUP_COSINE: base * t / warmup for t <= warmup (none when warmup = 0), then
 *     lr_min + (base - lr_min) (1 + cos(pi (t - warmup) / (total - warmup))) / 2 up to
 *     t = total, where it reaches lr_min, and lr_min after. 0 <= warmup < total,
 *     0 <= lr_min <= base. */
typedef enum {
    OPTIM_CONSTANT = 0,
    OPTIM_WARMUP_INVSQRT = 1,
    OPTIM_WARMUP_COSINE = 2
} OptimScheduleKind;

typedef struct OptimSchedule {
    OptimScheduleKind kind;
    int64_t warmup; /* steps of linear warmup */
    int64_t total;  /* cosine: the step at which lr reaches lr_min */
    double lr_min;  /* cosine: the floor (an absolute lr, not a fraction of base) */
} OptimSchedule;

/* The lr of step t >= 1 under schedule s with base lr base. A bad schedule aborts. */
double optim_schedule_lr(const OptimSchedule *s, double base, int64_t t);

/* ---- optimizers ----
 * With g the gradient, p the parameter, t the step (from 1), lr the scheduled lr:
 *   SGD:   g += wd p;  buf = g (t = 1), buf = momentum buf + g (t > 1);
 *          g = nesterov ? g + momentum buf : buf (only when momentum != 0);  p -= lr g.
 *   Adam:  g += wd p (L2);  AdamW: p *= 1 - lr wd (decoupled);  then both:
 *          m = b1 m + (1 - b1) g;  v = b2 v + (1 - b2) g^2;
 *          step_size = lr / (1 - b1^t);  denom = sqrt(v) / sqrt(1 - b2^t) + eps;
 *          p -= step_size m / denom   (eps outside the sqrt, after bias correction). */
typedef enum { OPTIM_SGD = 0, OPTIM_ADAM = 1, OPTIM_ADAMW = 2 } OptimKind;

typedef struct OptimConfig {
    OptimKind kind;
    double lr;              /* base lr, >= 0; the schedule scales it */
    double momentum;        /* SGD, >= 0 (0: plain SGD, no buffer) */
    int nesterov;           /* SGD; needs momentum > 0 */
    double beta1, beta2;    /* Adam, AdamW, each in [0, 1) */
    double eps;             /* Adam, AdamW, > 0 */
    double weight_decay;    /* >= 0; SGD and Adam: L2 added to g; AdamW: decoupled */
    OptimSchedule schedule; /* zeroed: constant */
} OptimConfig;

/* PyTorch's defaults for kind: lr 1e-3, betas (0.9, 0.999), eps 1e-8, weight decay 0 (AdamW
 * 1e-2), momentum 0, no Nesterov, constant schedule. (torch's SGD has no default lr; ours is
 * 1e-3.) Change the fields you need, then optim_new. */
OptimConfig optim_defaults(OptimKind kind);
/* The checks optim_new makes, without aborting: AG_OK, or AG_ERR_ARG naming the field and its
 * value in ag_last_error() (for a configuration read from a file: ckpt_optim_config). */
int optim_check_config(const OptimConfig *c);

typedef struct Optimizer {
    OptimConfig cfg;
    int n_params;
    Tensor **params;          /* the list's parameters at creation, in its order */
    Tensor **exp_avg;         /* per parameter: Adam's m, or NULL */
    Tensor **exp_avg_sq;      /* per parameter: Adam's v, or NULL */
    Tensor **momentum_buffer; /* per parameter: SGD's buf (momentum != 0), or NULL */
    Tensor **state;           /* every state tensor, in parameter order (for checkpoints) */
    int n_state;
    int64_t step;   /* steps taken; the next step is step + 1 */
    double last_lr; /* the lr of the last step (0 before the first) */
} Optimizer;

/* An optimizer of the parameters in pl (each must have a gradient), its struct and state
 * (zeroed) in arena a, which must outlive it. Parameters added to pl later are not seen.
 * A bad configuration aborts naming the field and its value (as torch's ValueError). */
Optimizer *optim_new(Arena *a, const ParamList *pl, const OptimConfig *cfg);
/* The lr the next step will use. */
double optim_lr(const Optimizer *o);
/* One update of every parameter from its .grad (which it leaves as is). */
void optim_step(Optimizer *o);
/* optim_step, then every parameter's .grad set to 0, in the update's own pass (each element
 * zeroed once read): the bits of optim_step then ag_params_zero_grad, with one pass over the
 * gradients fewer. For a loop whose next backward needs zeroed gradients and that nothing
 * reads in between; a loop that may skip the step (a non-finite loss) must still zero there. */
void optim_step_zero_grad(Optimizer *o);
/* optim_step, with AdamW's decoupled decay p *= 1 - lr wd (lr: this step's) applied first to the
 * parameters of at least min_ndim dimensions only: nanoGPT's two parameter groups with
 * min_ndim 2 (the matrices and embeddings decay, biases and norm weights do not), for an
 * optimizer configured with no weight decay of its own. Adam and AdamW scale each parameter in
 * their update's pass; the same bits as scaling first and then calling optim_step.
 * wd >= 0 and finite, min_ndim >= 0; wd 0 is optim_step. */
void optim_step_decay(Optimizer *o, double wd, int min_ndim);

/* The training state, for checkpoints: the state tensors (named "optim.<param>.exp_avg",
 * ".exp_avg_sq" or ".momentum_buffer", shaped as their parameter) and the step count. A
 * resumed run sets both and continues exactly where it stopped, schedule included. */
int optim_state_count(const Optimizer *o);
Tensor *optim_state_tensor(const Optimizer *o, int i);
int64_t optim_get_step(const Optimizer *o);
void optim_set_step(Optimizer *o, int64_t step);

/* ---- gradient clipping (torch.nn.utils.clip_grad_norm_ with norm_type 2) ----
 * Returns the global L2 norm of every gradient in pl before clipping: the sum of squares in
 * double in one fixed order (each gradient in blocks of 4096 elements, a block summed in 16
 * lanes, the blocks' sums added in list order; k_sum_squares_grads), then sqrt: the same for
 * any thread count. If max_norm / (norm + 1e-6) < 1 every gradient is multiplied by that coefficient,
 * as torch (which also multiplies by 1 otherwise, a no-op), so that afterwards the norm is
 * max_norm * norm / (norm + 1e-6). Finite gradients too large to square (double build, beyond
 * about 1e154) give their finite norm (summed again scaled by the largest magnitude, as BLAS's
 * nrm2). A non-finite norm (a NaN or inf gradient) is returned and
 * nothing is scaled: the caller sees it and can skip the step (torch 1.13 would multiply every
 * gradient by NaN or 0). max_norm > 0. */
double optim_clip_grad_norm(const ParamList *pl, double max_norm);

#endif
