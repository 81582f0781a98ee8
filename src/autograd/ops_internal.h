/* ops_internal.h: what the op files share and users do not need. The backward of every op
 * (declared from the table), the output allocator and the node recorder.
 * Each op file has the same pattern, e.g. ops_matmul.c:
 *     Tensor *ag_matmul(tape, a, b)   check shapes, out = ag_out(...), run k_ forward,
 *                                     n = ag_record(...) and store in n what backward needs
 *     void ag_matmul_backward(node)   run the k_ backward into the inputs' .grad (+=)
 * Not here: the math (../tensor/kernels.h). */
#ifndef ATTOGRAD_OPS_INTERNAL_H
#define ATTOGRAD_OPS_INTERNAL_H

#include "../tensor/kernels.h"
#include "autograd.h"

#define AG_OP(NAME, name, store, derivative) void ag_##name##_backward(AgNode *node);
#include "ops.def"
#undef AG_OP

/* An output tensor in the step arena (data uninitialised), named after the op. */
Tensor *ag_out(Tape *tape, AgOp op, int ndim, const int *shape);
/* Records a node when grad mode is on and some input requires grad; marks out as requiring
 * grad. Returns NULL when nothing is recorded (then the op needs to save nothing). */
AgNode *ag_record(Tape *tape, AgOp op, Tensor *out, int n_in, Tensor **in);
/* Node n's saved state: a zeroed struct of `bytes` bytes in the step arena, set as n->ctx. An
 * op declares the struct next to its constructor and fills it after ag_record:
 *     ScaleCtx *c = AG_SAVE(tape, n, ScaleCtx);  c->s = s;
 * and its backward reads it back: const ScaleCtx *c = n->ctx. */
void *ag_save_ctx(Tape *tape, AgNode *n, size_t bytes);
#define AG_SAVE(tape, n, Type) ((Type *)ag_save_ctx((tape), (n), sizeof(Type)))
/* A copy of n ints in the step arena (integer inputs must outlive the caller's buffer). */
const int *ag_save_ints(Tape *tape, const int *src, size_t n);
/* The same for n bytes (masks). */
const uint8_t *ag_save_bytes(Tape *tape, const uint8_t *src, size_t n);

/* The inputs of attention node n whose gradient its backward writes whole (bit i: in[i]),
 * parts of one tensor included (ops_attention.c; ASK in ops.def's store column). */
unsigned ag_attention_can_store(const AgNode *n);

/* The tape's gradient recycling (tape.c): grows the arena's last block, which ends at end, by
 * bytes in place when its chunk has room (returns 1), else changes nothing (returns 0).
 * Defined with the arena in ../tensor/tensor.c. */
int arena_grow_last(Arena *a, const void *end, size_t bytes);

/* The gradient buffer a backward kernel writes for input t: t->grad, or NULL when t is NULL (an
 * optional input, such as a bias) or needs no gradient (the kernel then skips it). */
static inline Real *ag_grad_if(const Tensor *t) { return t && t->requires_grad ? t->grad : NULL; }

/* Aborts (naming the op) when t is NULL; ops call it on every tensor argument. */
#define AG_CHECK_TENSOR(op, t) AG_CHECK((t) != NULL, "%s: tensor argument '%s' is NULL", op, #t)

#endif
