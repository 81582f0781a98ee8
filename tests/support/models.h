/* models.h: the small models the lens tests run whole (tests/lens/, tests/nn/test_gpt.c): a GPT
 * with its parameter arena, a tape over a step arena and rows of tokens; weights moved away from
 * their initial values so that every bias and norm matters; a hook that counts its calls; the
 * logits and every parameter's gradient of loss = sum(logits * R). A failure prints and aborts.
 * What it does not do: pick the configurations, seeds, shapes or tolerances (each test file keeps
 * its own, so its assertions keep their numbers). Read next: tests/lens/test_lens.c. */
#ifndef AG_TESTS_MODELS_H
#define AG_TESTS_MODELS_H

#include <stdint.h>

#include "attograd.h"

#define TS_MAX_TOKENS 64 /* B * T of a TsGpt's rows */

typedef struct {
    Arena *a; /* the parameters */
    Tape *t;  /* over its own step arena */
    Gpt m;
    int ids[TS_MAX_TOKENS], corrupt[TS_MAX_TOKENS]; /* (B, T): a clean and a corrupted row each */
} TsGpt;

/* Moves every parameter of pl, in order, with rng: a 1-D one (biases, norms) to N(0.5, sd1), any
 * other to N(0, sd2) when sd2 > 0 (when 0 it keeps its initial value and draws nothing). */
void ts_perturb(const ParamList *pl, Rng *rng, double sd1, double sd2);

/* A GPT of c initialised from seed, then ts_perturb(sd1, sd2) with the same stream; ids (B, T)
 * (i*5 + i/T*3 + 1) % V and corrupt (i*7 + 2) % V. Aborts when B * T > TS_MAX_TOKENS. */
TsGpt ts_gpt_new(const GptConfig *c, uint64_t seed, double sd1, double sd2, int B, int T);
void ts_gpt_free(TsGpt *e);

/* an NnHookFn that changes nothing and counts its calls in *(int *)ctx */
int ts_count_hook(Tape *t, Tensor **x, const NnHookPoint *at, void *ctx);

/* a malloc'd copy of y's values (out of the step arena) */
Real *ts_values(const Tensor *y);

/* The logits (B, T, V) of a forward on t, then every parameter's gradient (zeroed first) of
 * loss = sum(logits * R) with R[i] = sin(0.7 i + 0.3): one malloc'd array, the logits first and
 * then the gradients in pl's order; its length in *n. Aborts when logits is NULL (a failed
 * forward), naming ag_last_error(). */
Real *ts_logits_and_grads(Tape *t, const ParamList *pl, Tensor *logits, size_t *n);

/* The largest |attograd - reference| / (1 + |reference|) over the logits of m's forward on the
 * ids of the safetensors file path ("ids" (B, T), "logits" (B, T, V) F64: another tool's
 * logits, e.g. transformers' in tests/hf, TransformerLens's in tests/lens); a NaN logit gives
 * NaN. Aborts when the file cannot be read or its shapes are not m's. */
double ts_logits_error(const char *path, Gpt *m);

#endif
