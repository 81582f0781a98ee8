/* autograd.h: the reverse-mode tape, every op (ag_*), and the public gradient check.
 * Each ag_ op checks its shapes (aborting with the op and both shapes on misuse), allocates its
 * output in the tape's step arena, runs its forward kernel at once, and appends a node to the
 * tape. ag_backward() walks the nodes newest first; the order ops were called in is already a
 * valid topological order, so no sort is needed (the idea of micrograd's engine, as a list).
 * Also the parameter list (ParamList) that models, optimizers and files share.
 * Not here: the math loops (../tensor/kernels.h) and modules with parameters (../nn).
 * Read next: ops.def (the table of every op and its derivative), then tape.c. */
#ifndef ATTOGRAD_AUTOGRAD_H
#define ATTOGRAD_AUTOGRAD_H

#include <stdint.h>
#include <stdio.h>

#include "../tensor/rng.h"
#include "../tensor/tensor.h"

/* ---- the op table: AG_OP_ADD, AG_OP_MATMUL, ... come from ops.def ---- */
typedef enum {
#define AG_OP(NAME, name, store, derivative) AG_OP_##NAME,
#include "ops.def"
#undef AG_OP
    AG_OP_COUNT
} AgOp;

const char *ag_op_name(AgOp op);       /* "matmul" */
const char *ag_op_derivative(AgOp op); /* the table's one-line derivative */

#define AG_MAX_INPUTS 4

/* One recorded op: its output, its inputs and what its backward needs. */
typedef struct AgNode {
    AgOp op;
    Tensor *out;
    Tensor *in[AG_MAX_INPUTS];
    int n_in;
    Tensor *saved;       /* an extra tensor kept for backward (row statistics, probabilities) */
    const void *ctx;     /* the op's other saved state, a struct of its own type declared next to
                      * the op (ops_*.c: ScaleCtx, AttentionCtx, ...), in the step arena; or NULL */
    unsigned store;      /* bit j: in[j]'s gradient is a new, unset buffer that this backward
                      * writes (=) whole; set by ag_backward for the ops that can (tape.c) */
    struct AgNode *prev; /* the node recorded before this one */
    double grad_norm;    /* |dL/dout|, kept by ag_backward when ag_tape_keep_norms is on, else -1 */
} AgNode;

/* The first NaN or inf that check mode saw on a tape (ag_check_finite, below). */
typedef struct AgNonFinite {
    int found;    /* 0: everything checked so far was finite */
    int backward; /* 0: an op's output in the forward pass; 1: a gradient in backward */
    AgOp op;
    int node;      /* the node's number as ag_tape_print counts (1 = the first op recorded) */
    int input;     /* backward: which input's gradient (0..n_in-1); forward: -1 (the output) */
    int bad_input; /* forward: the first input already non-finite, or -1 if all were finite */
    char tensor[AG_NAME_LEN]; /* the tensor whose values (or gradient) are non-finite */
    int ndim, shape[AG_MAX_DIMS];
    size_t index;      /* the first non-finite element (flat index) */
    double value;      /* its value: nan, inf or -inf */
    char message[640]; /* all of it in one sentence (ag_nonfinite_message) */
} AgNonFinite;

/* ag_backward_on_leaf's callback: leaf's gradient is final (see there). */
typedef void (*AgLeafFn)(void *ctx, Tensor *leaf);

typedef struct Tape {
    Arena *arena; /* the step arena: outputs, saved tensors, nodes, intermediate gradients */
    AgNode *last; /* newest node; backward starts here */
    int n_nodes;
    int no_grad; /* when set, ops compute but record nothing and dropout is the identity */
    int backward_done;
    void *free_grads;      /* gradient buffers that backward is done with, for reuse (tape.c) */
    int check_finite;      /* check mode (ag_check_finite) */
    AgNonFinite nonfinite; /* what check mode found since the last reset */
    int keep_norms;        /* ag_tape_keep_norms: backward keeps each node's gradient norm */
    AgLeafFn leaf_fn;      /* ag_backward_on_leaf: called when a leaf's gradient is final */
    void *leaf_ctx;
} Tape;

Tape *ag_tape_new(Arena *step);
void ag_tape_free(Tape *tape); /* frees the Tape, not its arena */
/* Ends a step: forgets every node and resets the step arena. */
void ag_tape_reset(Tape *tape);
/* Turns no-grad mode on or off; returns the previous setting. */
int ag_no_grad(Tape *tape, int on);
/* Seeds d(loss)/d(loss) = 1 and runs every node's backward, newest first. Gradients
 * accumulate (+=) into .grad, so a tensor used twice receives the sum. loss: one element.
 * As in PyTorch, only leaves keep their gradients (parameters, and inputs on which
 * tensor_requires_grad was called): an op's output gets a gradient buffer while backward needs
 * it, and once its op's backward has run the buffer is reused for later ones and the output's
 * grad is set to NULL. So the step arena holds the forward pass plus only the gradients in
 * flight, not one gradient per intermediate. */
void ag_backward(Tape *tape, Tensor *loss);
/* Prints the tape in backward order: op, output shape, inputs. */
void ag_tape_print(const Tape *tape, FILE *f);
/* The tape as a Graphviz graph (`dot -Tpng tape.dot -o tape.png`): a box per node with its
 * number, op name, output shape and the Euclidean norms of its value |y| and gradient |g|, an
 * ellipse per leaf (parameter or input: name, shape, norms), and an edge from every input to
 * the op that reads it. An intermediate's gradient is released once its backward ran
 * (ag_backward), so its |g| is shown only when ag_tape_keep_norms was on during backward
 * ("|g| -" otherwise, and before backward). Returns 0, or -1 when writing failed. */
int ag_tape_dot(const Tape *tape, FILE *f);
/* When on, ag_backward keeps the norm of every node's output gradient before releasing it (one
 * pass over each gradient), for ag_tape_dot. Off by default; returns the previous setting. */
int ag_tape_keep_norms(Tape *tape, int on);
/* A leaf's gradient is final before backward ends: once the oldest node that reads it has run,
 * no node left in the walk writes it. When fn is set, ag_backward calls fn(ctx, x) there, once
 * for every leaf x (an input of a node that requires grad and that no node of the tape
 * produced: a parameter, or an input given tensor_requires_grad), right after the backward of
 * the oldest node reading x, and in that order. Leaves that no node reads get no call. It lets a
 * data-parallel step send a parameter's gradient while backward goes on (src/dist). fn NULL
 * (the default): off, and backward does no extra work. The setting stays across ag_tape_reset.
 * Costs one pass over the tape and a table of its tensors a backward. */
void ag_backward_on_leaf(Tape *tape, AgLeafFn fn, void *ctx);

/* ---- check mode: which op made the first NaN or inf ----
 * Off by default; on for every new tape when the environment has AG_CHECK_FINITE=1. When on,
 * every op checks its output after its forward kernel ran, and ag_backward checks the
 * gradients of a node's inputs after the node's backward ran. The first non-finite value is
 * recorded on the tape (op, node number, tensor, shape, element, value) and later ones are
 * ignored until ag_tape_reset; nothing aborts and no result changes (the checks only read).
 * A forward report also says whether an input already held a non-finite value (a poisoned
 * weight) or the op made it from finite inputs (an overflow). It costs one pass over each
 * output and gradient. Returns the previous setting. */
int ag_check_finite(Tape *tape, int on);
/* The first non-finite value seen since the last reset, or NULL (none, or check mode off). */
const AgNonFinite *ag_first_nonfinite(const Tape *tape);
/* Its sentence, e.g. "backward of node 12 (softmax): the gradient of input 0 'matmul_bt'
 * (8,2,7,7) holds nan at element 3". */
const char *ag_nonfinite_message(const AgNonFinite *r);

/* ---- ops. Shapes outermost first; "..." is any number of leading dimensions. ---- */

/* Elementwise, same shapes: a, b (...) -> (...) */
Tensor *ag_add(Tape *tape, Tensor *a, Tensor *b);
Tensor *ag_sub(Tape *tape, Tensor *a, Tensor *b);
Tensor *ag_mul(Tape *tape, Tensor *a, Tensor *b);
/* x + bias broadcast over the leading dimensions; bias has x's trailing dims:
 * x (..., C) + bias (C), or x (B, T, C) + bias (T, C) (positions) -> shape of x */
Tensor *ag_add_bias(Tape *tape, Tensor *x, Tensor *bias);
/* s * x, s a constant: (...) -> (...) */
Tensor *ag_scale(Tape *tape, Tensor *x, double s);
/* max(x, 0): (...) -> (...) */
Tensor *ag_relu(Tape *tape, Tensor *x);
/* The exact GELU, x * Phi(x) = 0.5 x (1 + erf(x / sqrt 2)), PyTorch's default form. */
Tensor *ag_gelu(Tape *tape, Tensor *x);
/* GPT-2's GELU, the tanh approximation 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))):
 * Hugging Face's "gelu_new" (GPT-2's activation_function), PyTorch's
 * gelu(x, approximate='tanh'). (...) -> (...) */
Tensor *ag_gelu_tanh(Tape *tape, Tensor *x);
/* SiLU (swish), x * sigmoid(x), as PyTorch's nn.SiLU. LLaMA's SwiGLU feed-forward is
 * ag_mul(ag_silu(x W1^T), x W3^T) followed by W2. (...) -> (...) */
Tensor *ag_silu(Tape *tape, Tensor *x);
/* Inverted dropout: zeroes each element with probability p and scales the rest by 1/(1-p).
 * The mask comes from a key drawn from rng, so the same rng state gives the same mask. In
 * no-grad mode, or with p == 0, it returns x itself. (...) -> (...) */
Tensor *ag_dropout(Tape *tape, Tensor *x, double p, Rng *rng);

/* Matrix products. a (..., M, K) @ b (K, N) or (..., K, N) with the same leading dims. */
Tensor *ag_matmul(Tape *tape, Tensor *a, Tensor *b);
/* a (..., M, K) @ b^T where b is (N, K) or (..., N, K): no transpose is materialised.
 * This is the Linear layer's x W^T and attention's Q K^T. -> (..., M, N) */
Tensor *ag_matmul_bt(Tape *tape, Tensor *a, Tensor *b);
/* The Linear layer in one op: x (..., in), W (out, in), b (out) or NULL -> (..., out) =
 * x W^T + b. The same numbers as ag_add_bias(ag_matmul_bt(x, W), b) (up to the rounding of the
 * bias, which starts the sums here) with one output and one gradient instead of two. */
Tensor *ag_linear(Tape *tape, Tensor *x, Tensor *W, Tensor *b);
/* max(x W^T + b, 0) in one op: the same numbers as ag_relu(ag_linear(x, W, b)), with the ReLU
 * applied as the product is stored, one (..., out) tensor instead of two, and no zeroed
 * gradient buffer for the product. */
Tensor *ag_linear_relu(Tape *tape, Tensor *x, Tensor *W, Tensor *b);
/* Swaps the last two dimensions (a copy): (..., M, N) -> (..., N, M) */
Tensor *ag_transpose(Tape *tape, Tensor *x);
/* Same data, another shape with the same element count (no copy). */
Tensor *ag_reshape(Tape *tape, Tensor *x, int ndim, const int *shape);
/* (B, T, C) -> (B, NH, T, HS) with HS = C / NH, and back. */
Tensor *ag_split_heads(Tape *tape, Tensor *x, int n_heads);
Tensor *ag_merge_heads(Tape *tape, Tensor *x);

/* Reductions over every element: (...) -> () */
Tensor *ag_sum(Tape *tape, Tensor *x);
Tensor *ag_mean(Tape *tape, Tensor *x);

/* Over the last dimension, max-subtracted: (..., C) -> (..., C) */
Tensor *ag_softmax(Tape *tape, Tensor *x);
Tensor *ag_log_softmax(Tape *tape, Tensor *x);
/* Mean cross-entropy of logits (..., V) against integer targets (one per row of the leading
 * dimensions). Rows whose target is ignore_index are skipped and not counted; if every row is
 * ignored the loss is 0 (PyTorch returns NaN there). A target outside [0, V) that is not
 * ignore_index aborts. -> () */
Tensor *ag_cross_entropy(Tape *tape, Tensor *logits, const int *targets, int ignore_index);
/* Rows of weight (V, C) picked by ids (B, T): -> (B, T, C). An id outside [0, V) aborts. */
Tensor *ag_embedding(Tape *tape, Tensor *weight, const int *ids, int B, int T);
/* The same, but positions whose id is padding_idx send no gradient to that row (as PyTorch's
 * nn.Embedding(padding_idx=...)); padding_idx -1 means none. */
Tensor *ag_embedding_padded(Tape *tape, Tensor *weight, const int *ids, int B, int T,
                            int padding_idx);
/* The input rows of a model in one op: y[i,:] = scale weight[ids[r],:] + pos[r mod T,:] for
 * r = rows[i], i < n -> (n, C); rows NULL: every r of the (B, T) batch -> (B, T, C). pos (T, C)
 * is a constant (sinusoidal positions; one that requires grad aborts) or NULL; rows need not
 * be distinct. weight's gradient: gW[ids[r]] += scale gy[i], nothing from padding_idx (-1:
 * none). Bit for bit the chain embedding_padded, scale, add_bias, gather_rows (what nn's
 * seq2seq ran before), whose weight gradient it equals when the rows left out hold
 * padding_idx. */
Tensor *ag_embedding_rows(Tape *tape, Tensor *weight, const int *ids, int B, int T, int padding_idx,
                          double scale, const Tensor *pos, const int *rows, int n);
/* Rows picked by row number, to pack a batch's live rows and put them back. rows: n distinct
 * row numbers (in any order; a repeat or one out of range aborts), copied into the step arena.
 * gather: x (..., C) seen as R rows of C -> (n, C), y[i] = x[rows[i]].
 * scatter: x (n, C) -> (B, T, C), row rows[i] (= b*T + t) is x[i], every other row 0. */
Tensor *ag_gather_rows(Tape *tape, Tensor *x, const int *rows, int n);
Tensor *ag_scatter_rows(Tape *tape, Tensor *x, const int *rows, int B, int T);

/* ---- fused ops for the nn layers ---- */

/* LayerNorm over the last dimension, one fused kernel pair: y = (x - mean) / sqrt(var + eps)
 * * weight + bias, var the biased variance (as PyTorch). x (..., C), weight (C), bias (C) or
 * NULL -> (..., C). Saves mean and 1/std per row for backward. */
Tensor *ag_layernorm(Tape *tape, Tensor *x, Tensor *weight, Tensor *bias, double eps);
/* RMSNorm over the last dimension (LLaMA's; Zhang & Sennrich 2019), one fused kernel pair:
 * y = x / sqrt(mean(x^2) + eps) * weight, no centring, no bias, as llama2.c's rmsnorm and
 * Meta's RMSNorm module. x (..., C), weight (C) -> (..., C). Saves 1/rms per row. */
Tensor *ag_rmsnorm(Tape *tape, Tensor *x, Tensor *weight, double eps);
/* The post-LN residual step in one op: ag_layernorm(x + f, weight, bias, eps), with one pass
 * forward (saving x + f and the row statistics) and one backward that writes the LayerNorm's
 * input gradient straight into both x's and f's. x, f (..., C) of one shape. */
Tensor *ag_add_layernorm(Tape *tape, Tensor *x, Tensor *f, Tensor *weight, Tensor *bias,
                         double eps);

/* Rotary position embedding (RoPE) as Meta's LLaMA and llama2.c apply it to queries and keys:
 * within each head of head_size (HS, even) columns, the pair of columns (2i, 2i+1) of the row
 * at position p turns by the angle p * base^(-2i/HS):
 *     y[2i] = x[2i] cos - x[2i+1] sin,   y[2i+1] = x[2i] sin + x[2i+1] cos
 * (interleaved pairs, the complex form of Meta's apply_rotary_emb; not the halves-split
 * rotate_half of HF's GPT-NeoX code). x (..., T, C): the row (..., t) is at position pos0 + t,
 * so (B, T, C) projections, (T, C), and split heads (B, NH, T, HS) all work; a decoding step
 * with a key/value cache of length L passes pos0 = L. Only the columns [col, col + n_cols) of
 * x are rotated and returned, (..., T, n_cols): a whole number of heads, e.g. the query and key
 * blocks of a fused (B, T, (NH + 2 NKV) HS) projection (adjacent, so one call with n_cols =
 * (NH + NKV) HS), without copying the value columns. n_cols 0: every column from col on.
 * keep 1: every column of x is returned, (..., T, C), those outside [col, col + n_cols) as they
 * were: a fused qkv with its query and key blocks rotated and its values unchanged, which
 * attention reads as it read the projection.
 * base 0: 10000 (LLaMA 1 and 2). Angles and their cos and sin are computed in double.
 * rot_dims R < HS (GPT-NeoX's rotary_pct, R = HS * rotary_pct; GPT-J's rotary_dim): only the
 * first R columns of each head turn, pair (2i, 2i+1) for 2i < R by p * base^(-2i/R) (the
 * frequencies of an R-wide head, as HF's inv_freq over rotary_ndims); columns [R, HS) of each
 * head pass through (gradient 1). HF rotates halves within those R columns, its pair
 * (j, j + R/2) for j < R/2 turning by base^(-2j/R): the same rotation once q and k rows are
 * permuted within the first R dims of each head (HF's j to 2j, R/2 + j to 2j + 1). */
typedef struct AgRope {
    int head_size;   /* HS, even */
    int pos0;        /* the position of t = 0 */
    double base;     /* theta_i = base^(-2i/HS); 0: 10000 */
    int col, n_cols; /* the heads are columns [col, col + n_cols) of x; n_cols 0: to the end */
    int keep;        /* 0: return the rotated columns; 1: all of x's, the others unchanged */
    int rot_dims;    /* 0: head_size; fewer (even, > 0): partial rotary, below */
} AgRope;
Tensor *ag_rope(Tape *tape, Tensor *x, const AgRope *r);

/* Scaled dot-product attention, fused per (batch, head): scores = q k^T / sqrt(HS) + attn_mask,
 * blocked scores set to -inf, softmax over keys, dropout on the probabilities, times v. One op,
 * which reads q, k, v and writes y in one of three layouts (AgAttnLayout below; NULL: the first).
 *   AG_ATTN_HEADS: q (B, NH, Tq, HS); k, v (B, NKV, Tk, HS) -> y (B, NH, Tq, HS).
 *   NH % NKV == 0: query head h reads key/value head h / (NH / NKV) (grouped-query; NKV == 1
 *   is multi-query, NKV == NH plain MHA).
 *   mask: what each query may see (AgAttnMask below), or NULL: every key.
 *   dropout_p: on the probabilities (inverted scaling), with a key drawn from rng; identity in
 *   no-grad mode or when 0.
 * If probs is not NULL, *probs gets the probabilities (B, NH, Tq, Tk) before dropout, in the
 * step arena, for inspection of heads (not on the tape: no gradient flows through them). */
/* What attention masks. The parts combine (a key is seen only when none blocks it):
 *   causal: query i sees keys j <= i + (Tk - Tq) (aligned at the end, so a query appended to a
 *   key/value cache sees the whole cache; for Tq == Tk the usual lower triangle).
 *   key_padding: a (B, Tk) byte mask (AgMask: its shape is checked), 1 = "this key is padding"
 *   (PyTorch's key_padding_mask=True), or NULL.
 *   attn_mask: added to the scaled scores (PyTorch's float attn_mask): 0 lets a key through,
 *   -inf blocks it, another value biases it (ALiBi's distances, a prefix-LM's blocks). (Tq, Tk)
 *   for every batch element and head, or (B, NH, Tq, Tk), where B or NH may be 1 (one mask for
 *   every batch element, or for every head). Finite values and -inf only; a constant (it may not
 *   require a gradient: none flows into it). A boolean mask becomes one by ag_attn_mask_bool.
 *   With packed rows (AG_ATTN_ROWS) it is indexed by positions t, as for the full batch.
 * A query row whose keys are all blocked gets probabilities 0, output 0, gradient 0 (where
 * PyTorch gives NaN). */
typedef struct AgMask {
    const uint8_t *data; /* (B, T) bytes */
    int B, T;
} AgMask;
typedef struct AgAttnMask {
    int causal;                /* 1: causal (PyTorch's is_causal) */
    const AgMask *key_padding; /* (B, Tk), 1 = padding (PyTorch's key_padding_mask), or NULL */
    const Tensor *attn_mask;   /* (Tq, Tk) or (B, NH, Tq, Tk), added to the scores, or NULL */
} AgAttnMask;
/* the causal mask alone: ag_attention(t, q, k, v, NULL, AG_CAUSAL, 0.0, NULL, NULL) */
#define AG_CAUSAL (&(const AgAttnMask){.causal = 1})
/* A boolean mask as an additive one: 1 (PyTorch's True: "may not attend") -> -inf, 0 -> 0.
 * blocked holds the product of shape's ndim (2 or 4) sizes, each byte 0 or 1. -> a tensor of
 * that shape in the tape's arena, not on the tape (for AgAttnMask.attn_mask). */
Tensor *ag_attn_mask_bool(Tape *tape, const uint8_t *blocked, int ndim, const int *shape);
typedef enum {
    AG_ATTN_HEADS = 0, /* (B, heads, T, HS) tensors, as above */
    /* Projections as Linear layers leave them, heads side by side in the last dimension, so
     * that no split or merge of heads is ever copied: q (B, Tq, *), k and v (B, Tk, *) of the
     * same shape. Query head h is columns [q_col + h*HS, q_col + (h+1)*HS) of q, key/value head
     * g columns [k_col + g*HS, ...) of k and [v_col + g*HS, ...) of v (layout.heads). q, k, v
     * may be one tensor (a fused (B, T, 3C) projection: columns 0, C, 2C) and k, v may be one
     * (a (B, Tk, 2C) projection of keys and values). -> y (B, Tq, NH*HS), the heads side by
     * side: what the output projection reads. The same bits as AG_ATTN_HEADS on split heads. */
    AG_ATTN_COLS,
    /* AG_ATTN_COLS on packed rows: q (nq, *) holds nq of the B*Tq rows of a (B, Tq, *) batch,
     * named by layout.q_rows.idx (row b*Tq + t, distinct and increasing; q_rows.T = Tq), and k,
     * v (nk, *) nk of the B*Tk rows named by layout.k_rows (k_rows.T = Tk). A key row not in
     * k_rows must be padding (mask->key_padding, (B, Tk), 1 there: checked); a query row not in
     * q_rows is not computed. Causal and the mask are by positions t, as for the full batch.
     * -> y (nq, NH*HS): the rows of AG_ATTN_COLS's output on the full batch (the same sums
     * without dropout). *probs, when asked, is (B, NH, Tq, Tk), the rows and columns of the
     * packed rows as AG_ATTN_COLS's, all other entries 0. */
    AG_ATTN_ROWS,
} AgAttnKind;
typedef struct AgHeads {
    int n_heads, n_kv_heads, head_size;
    int q_col, k_col, v_col; /* the first column of the heads in q, k and v */
} AgHeads;
typedef struct AgRows {
    const int *idx; /* (n) row numbers b*T + t, increasing */
    int B, T;
} AgRows;
/* ag_attention(t, qkv, qkv, qkv, &(AgAttnLayout){AG_ATTN_COLS, {NH, NH, HS, 0, C, 2 * C}}, ...) */
typedef struct AgAttnLayout {
    AgAttnKind kind;
    AgHeads heads;         /* AG_ATTN_COLS and AG_ATTN_ROWS: where the heads are */
    AgRows q_rows, k_rows; /* AG_ATTN_ROWS: which rows of the batch q and k, v hold */
} AgAttnLayout;
Tensor *ag_attention(Tape *tape, Tensor *q, Tensor *k, Tensor *v, const AgAttnLayout *layout,
                     const AgAttnMask *mask, double dropout_p, Rng *rng, Tensor **probs);

/* Per-head gate: y[b,h,t,:] = gate[h] x[b,h,t,:]. x (B, NH, T, HS), gate (NH) -> same as x.
 * The gradient on gate is the head-importance score of Michel et al. 2019. */
Tensor *ag_head_gate(Tape *tape, Tensor *x, Tensor *gate);

/* ---- parameters: a named list of leaf tensors, in registration order (params.c) ----
 * What a model holds and what the optimizer, the gradient clipping and the .npz files walk over.
 * nn's modules add to one through NnBuilder (../nn/nn.h); any program can build its own. */
typedef struct ParamList {
    Tensor **items;
    int n, cap;
} ParamList;

void ag_params_init(ParamList *pl);
void ag_params_free(ParamList *pl); /* the list, not the tensors (they live in their arena) */
/* Appends t (a tensor with a gradient, e.g. from tensor_param); aborts if its name is taken. */
void ag_params_add(ParamList *pl, Tensor *t);
/* A parameter by its dotted name, or NULL. */
Tensor *ag_params_find(const ParamList *pl, const char *name);
size_t ag_params_count(const ParamList *pl); /* total number of scalars */
/* The L2 norm of every parameter's values together (the weight norm; in double, the parameters
 * and their values in order) */
double ag_params_norm(const ParamList *pl);
/* Zeroes every parameter's gradient, all of them in one parallel region; allocates nothing. */
void ag_params_zero_grad(const ParamList *pl);
/* One line per parameter: name, shape, count; then the total. */
void ag_params_print(const ParamList *pl, FILE *f);

/* ---- gradient check (public: check your own ops with it) ----
 * fn builds an output from the inputs on the tape. The check forms loss = sum(out * R) with a
 * fixed random R (never all ones: with R = 1 a softmax gradient is zero and a broken backward
 * passes), computes the analytic gradient by ag_backward, and compares it with central
 * differences (loss(x + eps) - loss(x - eps)) / 2 eps for every element of every input that
 * requires grad. Inputs must live outside the tape's arena (it is reset between evaluations). */
typedef Tensor *(*AgGradcheckFn)(Tape *tape, Tensor **inputs, void *ctx);

typedef struct AgGradcheckResult {
    double max_err; /* the worst |analytic - numeric| / max(1, |analytic|, |numeric|) */
    int input;      /* where it was: input number and flat element index */
    size_t index;
    double analytic, numeric;
    double max_abs_grad; /* the largest analytic gradient seen: 0 means nothing flowed */
    size_t n_checked;
} AgGradcheckResult;

/* Defaults: eps 1e-6 and tolerance 1e-6 in the double build; 1e-2 and 2e-2 in the float one. */
double ag_gradcheck_default_eps(void);
double ag_gradcheck_default_tol(void);
/* Returns 1 if max_err <= tol and some gradient is non-zero, else 0. res may be NULL. */
int ag_gradcheck(Tape *tape, AgGradcheckFn fn, void *ctx, Tensor **inputs, int n_inputs, double eps,
                 double tol, AgGradcheckResult *res);
void ag_gradcheck_print(const AgGradcheckResult *res, FILE *f);

#endif
