/* attograd.h: the one header a program includes. It pulls in the modules in reading order:
 * tensor (data, arenas, RNG, the thread count), autograd (the tape, ops, the parameter list,
 * gradcheck, and the tables that describe a model's configuration to checkpoints), nn
 * (modules), optim (optimizers), io (files read and replaced safely, .npz files, checkpoints,
 * safetensors), hf (Hugging Face configurations) and text (tokenizers, token shards, training
 * windows, word vocabularies, batches of sentence pairs, the scores of a translation), then dist (data-parallel steps over MPI), flag (a program's command line from one
 * table of flags), run (a training run around a model's callbacks: cadence, schedules, shards,
 * checkpoints, resume, the CSV and the loss plot), then lens (head detectors; the cache,
 * ablation and patching on the models' hook points; the logit lens and direct logit
 * attribution; the export to TransformerLens), and view (interactive pages: one offline HTML
 * file of attention, tokens, tables and runs), and eval (a sequence-to-sequence model scored on
 * a set of pairs: loss, hypotheses, exact match and BLEU). The kernels (tensor/kernels.h) are internal: a
 * program that calls one includes that header itself. */
#ifndef ATTOGRAD_H
#define ATTOGRAD_H

#define ATTOGRAD_VERSION "0.1.0"

#include "tensor/tensor.h"
#include "tensor/rng.h"
#include "tensor/threads.h"
#include "autograd/autograd.h"
#include "autograd/config.h"
#include "nn/nn.h"
#include "nn/gpt.h"
#include "optim/optim.h"
#include "io/file.h"
#include "io/npz.h"
#include "io/checkpoint.h"
#include "io/safetensors.h"
#include "hf/hf.h"
#include "text/text.h"
#include "text/vocab.h"
#include "text/score.h"
#include "text/pairs.h"
#include "dist/dist.h"
#include "flag/flag.h"
#include "run/run.h"
#include "lens/detect.h"
#include "lens/lens.h"
#include "lens/logit.h"
#include "lens/export.h"
#include "lens/report.h"
#include "lens/cmd.h"
#include "view/view.h"
#include "eval/eval.h"
#include "lens/heads.h"
#include "view/heads_plot.h"

#endif
