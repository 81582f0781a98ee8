/* attograd.h: the one header a program includes. It pulls in the modules in reading order:
 * tensor (data, arenas, RNG, kernels), autograd (the tape, ops and gradcheck), and, as they
 * land, nn (modules), io (.npz files, checkpoints) and optim (optimizers). */
#ifndef ATTOGRAD_H
#define ATTOGRAD_H

#define ATTOGRAD_VERSION "0.1.0"

#include "tensor/tensor.h"
#include "tensor/rng.h"
#include "tensor/kernels.h"
#include "autograd/autograd.h"
#include "nn/nn.h"
#include "optim/optim.h"
#include "io/npz.h"
#include "io/checkpoint.h"

#endif
