/* heads.h: what each attention head does, for any model whose attention blocks are
 * MultiHeadAttention modules (../nn/nn.h: their head gates):
 *  - importance over a data set, measured two ways: masking (a head's gate set to 0, the loss
 *    measured again, the gate restored; the importance is the loss increase) and the gradient
 *    of the gate (Michel, Levy and Neubig 2019, "Are Sixteen Heads Really Better than One?":
 *    gate xi_h multiplies head h's output and I_h = E_x |d loss(x) / d xi_h| at xi = 1; the
 *    expectation is the mean over batches of |d batch loss / d gate|, then, as in the paper's
 *    section 4.1, each block's scores are divided by their L2 norm across its heads);
 *  - the attention patterns of one input, saved as an .npz in bertviz's layout.
 * The data come batch by batch from the program's callback (its own loss, its own rows):
 *   LensHeadBlock blk[LENS_MAX_HEAD_BLOCKS];
 *   int nb = lens_heads_seq2seq(&model, blk);
 *   LensHeadData d = {n_batches, my_batch_loss, &my_rows, "valid.tsv"};
 *   LensHeadImportance h;
 *   lens_head_importance(tape, blk, nb, &model.params, &d, &h, NULL);
 *   lens_heads_print(&h, stdout, 0);
 * Not here: the gates themselves (../nn/attention.c, ag_head_gate), the pictures of both
 * (../view/heads_plot.h), a program's rows and commands (examples/translate/heads.c).
 * Read next: heads.c, ../view/heads_plot.c. */
#ifndef ATTOGRAD_LENS_HEADS_H
#define ATTOGRAD_LENS_HEADS_H

#include <stdio.h>

#include "../nn/nn.h"

#define LENS_MAX_HEAD_BLOCKS (3 * NN_MAX_LAYERS)

/* One attention block: the table's name of its kind ("enc self"), its layer, its module */
typedef struct LensHeadBlock {
    const char *kind;
    int layer;
    MultiHeadAttention *attn;
} LensHeadBlock;
/* A seq2seq model's blocks in the order enc self 0..Le-1, dec self 0..Ld-1, dec cross
 * 0..Ld-1 (kinds "enc self", "dec self", "dec cross") into b (room for LENS_MAX_HEAD_BLOCKS);
 * returns their count. */
int lens_heads_seq2seq(Seq2Seq *m, LensHeadBlock *b);

/* Batch i of n_batches (the same rows each time it is asked for): its loss, the mean over
 * its *tokens tokens, a scalar on t (reset by the caller; with or without gradients as t is
 * set), as the model is evaluated (no dropout). */
typedef Tensor *(*LensBatchLossFn)(Tape *t, void *ctx, int i, double *tokens);
typedef struct LensHeadData {
    int n_batches;
    LensBatchLossFn loss;
    void *ctx;
    const char *name; /* the data's name in messages ("valid.tsv") */
} LensHeadData;

typedef struct LensHeadImportance {
    int n_blocks, NH;
    const char *kind[LENS_MAX_HEAD_BLOCKS];
    int layer[LENS_MAX_HEAD_BLOCKS];
    double base_loss;   /* the loss (mean over every batch's tokens) with every head */
    double *loss_up;    /* (n_blocks, NH): the loss with the head's gate at 0, minus base_loss */
    double *grad_raw;   /* (n_blocks, NH): the mean over batches of |d batch loss / d gate| */
    double *grad_score; /* (n_blocks, NH): grad_raw / its block's L2 norm (Michel et al.) */
    int n_batches;
    int n_rows; /* the rows the batches hold: the program's count (0 until it sets it) */
} LensHeadImportance;

/* Both measures of the heads of blocks b[0..nb) (at most LENS_MAX_HEAD_BLOCKS, as many heads
 * each) over d: the masking passes without gradients, then one backward a batch. The gates are
 * left at the values they had (1: as trained) and untracked, and every gradient of params and
 * of the gates zero. progress (may be NULL) gets a line of progress. AG_OK, or AG_ERR_RANGE
 * when the loss with every head is not finite (naming d's name), or AG_ERR_ARG for no batches. */
int lens_head_importance(Tape *t, const LensHeadBlock *b, int nb, ParamList *params,
                         const LensHeadData *d, LensHeadImportance *h, FILE *progress);
void lens_heads_free(LensHeadImportance *h); /* h zeroed; a zeroed h is fine */
/* The table: block, layer, head, loss_increase, grad_score, grad_raw; one line a head, in
 * aligned columns or (tsv) tab-separated with %.6g values. */
void lens_heads_print(const LensHeadImportance *h, FILE *f, int tsv);
/* The tab-separated table (lens_heads_print's) written to path: AG_OK, or AG_ERR_IO naming the
 * path and the reason ("PATH: cannot open for writing: ...") */
int lens_heads_save_tsv(const LensHeadImportance *h, const char *path);

/* ---- the patterns of one input ---- */
/* One attention block's probabilities (NH, Tq, Tk) as float (malloc'd), its entry in the file
 * ("encoder.layers.0.self_attn"), its row's title in a picture ("encoder self-attention"), its
 * layer, and which token lists hold its queries' and keys' tokens. */
typedef struct LensPattern {
    char name[64];
    const char *title;
    int layer, NH, Tq, Tk;
    int q_list, k_list;
    float *p;
} LensPattern;
/* The token lists (malloc'd strings), each saved under its name ("encoder_tokens") */
typedef struct LensTokenList {
    const char *name;
    char **tok;
    int n;
} LensTokenList;
typedef struct LensPatterns {
    int n, n_lists;
    LensPattern blocks[LENS_MAX_HEAD_BLOCKS];
    LensTokenList lists[4];
} LensPatterns;
/* Appends block (name, title, layer) with probabilities probs (1, NH, Tq, Tk) copied as float;
 * Tq, Tk: the lengths of token lists q_list and k_list (which must exist); anything else aborts
 * naming the block and the shape. */
void lens_patterns_add(LensPatterns *a, const char *name, const char *title, int layer,
                       const Tensor *probs, int q_list, int k_list);
/* Appends a token list: copies of tok[0..n), saved under name; returns its index. */
int lens_patterns_tokens(LensPatterns *a, const char *name, const char *const *tok, int n);
void lens_patterns_free(LensPatterns *a); /* a zeroed */
/* bertviz's layout, float32: each block as name (1, NH, Tq, Tk) in the order added, then each
 * token list as UTF-8 bytes joined by '\n'. AG_OK or npz_write's error naming the path. */
int lens_patterns_save(const LensPatterns *a, const char *path);

#endif
