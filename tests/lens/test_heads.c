/* test_heads.c: head importance (src/lens/heads.c) on a hand-built 2+2-layer seq2seq model over
 * two batches: the masking column is the loss with the gate at 0 by hand minus the loss with
 * every head, to the bit; the gradient column is the mean over batches of |d batch loss /
 * d gate| by central differences of the gate (float64: tight); each block's scores have L2 norm
 * 1; the gates, their tracking, the dropouts and the parameters' gradients are left as found; a
 * loss that is not finite and no batches are refused; the table's file. The patterns' .npz: entries in order,
 * shapes, values and tokens; misuse aborts.
 * Not here: the program's command (tests/examples/test_translate_viz.c), the pictures
 * (tests/view/test_heads_plot.c). */
#include <criterion/criterion.h>
#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "attograd.h"
#include "files.h"
#include "models.h"

enum { B = 2, S = 5, T = 4, NH = 2, C = 8, V = 13, NB = 2 };

typedef struct {
    Arena *a;
    Tape *t;
    Seq2Seq m;
    int src[NB][B * S], tgt_in[NB][B * T], tgt_out[NB][B * T];
    int calls;
} Env;

/* a LensBatchLossFn: batch i's nn_seq2seq_loss (dropout as the test set it: 0 for gradients) */
static Tensor *batch_loss(Tape *t, void *ctx, int i, double *tokens) {
    Env *e = ctx;
    e->calls++;
    *tokens = B * T;
    return nn_seq2seq_loss(t, &e->m, e->src[i], S, e->tgt_in[i], e->tgt_out[i], B, T, NULL);
}

static Env env_new(void) {
    Env e;
    memset(&e, 0, sizeof e);
    e.a = arena_new("params", 0);
    e.t = ag_tape_new(arena_new("step", 0));
    Rng rng;
    rng_seed(&rng, 11);
    Seq2SeqConfig c = nn_seq2seq_default_config(V, V, C, NH, 2);
    c.layer.dropout = 0;
    c.max_len = 16;
    nn_seq2seq_init(&e.m, e.a, &rng, &c);
    ts_perturb(&e.m.params, &rng, 0.2, 0.3); /* every weight matters */
    for (int n = 0; n < NB; n++) {
        for (int i = 0; i < B * S; i++) e.src[n][i] = 1 + (i * 5 + 2 + 3 * n) % (V - 1);
        e.src[n][B * S - 1] = 0; /* padding: a masked key */
        for (int i = 0; i < B * T; i++) {
            e.tgt_in[n][i] = 1 + (i * 3 + 1 + n) % (V - 1);
            e.tgt_out[n][i] = 1 + (i * 7 + 4 + 2 * n) % (V - 1);
        }
    }
    return e;
}

static void env_free(Env *e) {
    Arena *step = e->t->arena;
    ag_tape_free(e->t);
    arena_free(step);
    nn_seq2seq_free(&e->m);
    arena_free(e->a);
}

/* batch i's loss, no grad */
static double loss_of(Env *e, int i) {
    double n;
    int prev = ag_no_grad(e->t, 1);
    ag_tape_reset(e->t);
    double l = (double)batch_loss(e->t, e, i, &n)->data[0];
    ag_no_grad(e->t, prev);
    return l;
}

/* the loss over both batches (every batch has B * T tokens) */
static double data_loss(Env *e) {
    return (loss_of(e, 0) * (B * T) + loss_of(e, 1) * (B * T)) / (2.0 * B * T);
}

Test(lens_heads, masking_and_gradients_match_by_hand_and_leave_the_model_as_found) {
    Env e = env_new();
    LensHeadBlock blk[LENS_MAX_HEAD_BLOCKS];
    int nb = lens_heads_seq2seq(&e.m, blk);
    cr_assert_eq(nb, 6);
    cr_assert_str_eq(blk[0].kind, "enc self");
    cr_assert_str_eq(blk[3].kind, "dec self");
    cr_assert(blk[4].attn == &e.m.dec[0].multihead_attn && blk[4].layer == 0);
    cr_assert_str_eq(blk[5].kind, "dec cross");
    LensHeadData d = {NB, batch_loss, &e, "two batches"};
    LensHeadImportance h;
    cr_assert_eq(lens_head_importance(e.t, blk, nb, &e.m.params, &d, &h, NULL), AG_OK, "%s",
                 ag_last_error());
    cr_assert_eq(h.n_blocks, 6);
    cr_assert_eq(h.NH, NH);
    cr_assert_eq(h.n_batches, NB);
    cr_assert_eq(h.layer[5], 1);
    /* masking: the gate at 0 by hand, the same bits */
    double base = data_loss(&e);
    cr_assert_eq(h.base_loss, base);
    for (int b = 0; b < nb; b++)
        for (int k = 0; k < NH; k++) {
            Tensor *g = blk[b].attn->gate;
            g->data[k] = 0;
            double up = data_loss(&e) - base;
            g->data[k] = 1;
            cr_assert_eq(h.loss_up[b * NH + k], up, "%s %d head %d: %.17g vs %.17g", blk[b].kind,
                         blk[b].layer, k, h.loss_up[b * NH + k], up);
        }
        /* the gradient: central differences of each batch's loss in the gate */
#ifdef AG_REAL_DOUBLE
    double eps = 1e-5, tol = 1e-8;
#else
    double eps = 1e-2, tol = 2e-2;
#endif
    int nonzero = 0;
    for (int b = 0; b < nb; b++) {
        double norm = 0;
        for (int k = 0; k < NH; k++) {
            Tensor *g = blk[b].attn->gate;
            double want = 0;
            for (int i = 0; i < NB; i++) {
                g->data[k] = (Real)(1 + eps);
                double lp = loss_of(&e, i);
                g->data[k] = (Real)(1 - eps);
                double lm = loss_of(&e, i);
                g->data[k] = 1;
                want += fabs((lp - lm) / (2 * eps)) / NB;
            }
            double got = h.grad_raw[b * NH + k];
            cr_assert(fabs(got - want) <= tol * (1 + fabs(want)), "%s %d head %d: %.12g vs %.12g",
                      blk[b].kind, blk[b].layer, k, got, want);
            nonzero += got > 1e-6;
            norm += h.grad_score[b * NH + k] * h.grad_score[b * NH + k];
            cr_assert_eq(h.grad_score[b * NH + k] * h.grad_score[b * NH + k] > 0,
                         h.grad_raw[b * NH + k] > 0);
        }
        cr_assert(fabs(norm - 1) < 1e-12, "block %d: L2 norm %.15f", b, norm);
    }
    cr_assert_gt(nonzero, nb, "the gradients are mostly zero: %d", nonzero);
    /* left as found: gates 1 and untracked, no gradient anywhere */
    for (int b = 0; b < nb; b++) {
        cr_assert_eq(blk[b].attn->track_gates, 0);
        for (int k = 0; k < NH; k++) {
            cr_assert_eq(blk[b].attn->gate->data[k], (Real)1);
            cr_assert(!blk[b].attn->gate->grad || blk[b].attn->gate->grad[k] == 0);
        }
    }
    for (int i = 0; i < e.m.params.n; i++) {
        const Tensor *p = e.m.params.items[i];
        for (size_t j = 0; p->grad && j < p->size; j++)
            cr_assert_eq(p->grad[j], 0, "%s[%zu] keeps a gradient", p->name, j);
    }
    /* a second run gives the same bits */
    LensHeadImportance h2;
    cr_assert_eq(lens_head_importance(e.t, blk, nb, &e.m.params, &d, &h2, NULL), AG_OK);
    cr_assert_arr_eq(h.loss_up, h2.loss_up, 6 * NH * sizeof(double));
    cr_assert_arr_eq(h.grad_raw, h2.grad_raw, 6 * NH * sizeof(double));
    lens_heads_free(&h2);
    /* the table as a file: a header and a line a head; a folder that is not there is named */
    char dir[64], path[512];
    ts_tmp_dir(dir, sizeof dir, "heads");
    cr_assert_eq(lens_heads_save_tsv(&h, ts_join(path, dir, "heads.tsv")), AG_OK, "%s",
                 ag_last_error());
    char *tsv = ts_read_text(path, NULL);
    const char *head = "block\tlayer\thead\tloss_increase\tgrad_score\tgrad_raw\n";
    cr_assert(!strncmp(tsv, head, strlen(head)) && strstr(tsv, "\ndec cross\t1\t1\t"), "%s", tsv);
    int lines = 0;
    for (char *c = tsv; *c; c++) lines += *c == '\n';
    cr_assert_eq(lines, 1 + 6 * NH);
    free(tsv);
    cr_assert_eq(lens_heads_save_tsv(&h, ts_join(path, dir, "no/heads.tsv")), AG_ERR_IO);
    cr_assert(strstr(ag_last_error(), "no/heads.tsv: cannot open for writing"), "%s",
              ag_last_error());
    ts_rm_tree(dir);
    lens_heads_free(&h);
    cr_assert(h.loss_up == NULL && h.n_blocks == 0);
    lens_heads_free(&h); /* a zeroed one is fine */
    env_free(&e);
}

/* a loss that overflows: +inf */
static Tensor *inf_loss(Tape *t, void *ctx, int i, double *tokens) {
    (void)ctx, (void)i;
    Tensor *x = tensor_new1(t->arena, 1, "loss");
    x->data[0] = (Real)INFINITY;
    *tokens = 3;
    return x;
}

Test(lens_heads, refuses_a_loss_that_is_not_finite_and_no_batches) {
    Env e = env_new();
    LensHeadBlock blk[LENS_MAX_HEAD_BLOCKS];
    int nb = lens_heads_seq2seq(&e.m, blk);
    LensHeadImportance h;
    LensHeadData d = {1, inf_loss, NULL, "valid.tsv"};
    cr_assert_eq(lens_head_importance(e.t, blk, nb, &e.m.params, &d, &h, NULL), AG_ERR_RANGE);
    cr_assert(strstr(ag_last_error(), "the loss on valid.tsv = inf: must be finite"), "%s",
              ag_last_error());
    cr_assert(h.loss_up == NULL);
    d = (LensHeadData){0, batch_loss, &e, "empty.tsv"};
    cr_assert_eq(lens_head_importance(e.t, blk, nb, &e.m.params, &d, &h, NULL), AG_ERR_ARG);
    cr_assert(strstr(ag_last_error(), "empty.tsv: no batches"), "%s", ag_last_error());
    cr_assert_eq(e.calls, 0);
    env_free(&e);
}

Test(lens_heads, aborts_on_blocks_without_heads_in_common, .signal = SIGABRT) {
    Env e = env_new();
    LensHeadBlock blk[LENS_MAX_HEAD_BLOCKS];
    int nb = lens_heads_seq2seq(&e.m, blk);
    MultiHeadAttention other = *blk[1].attn;
    other.n_heads = 4;
    blk[1].attn = &other;
    LensHeadData d = {NB, batch_loss, &e, "x"};
    LensHeadImportance h;
    lens_head_importance(e.t, blk, nb, &e.m.params, &d, &h, NULL);
}

/* ---- patterns ---- */

Test(lens_patterns, npz_has_the_blocks_in_order_and_the_tokens) {
    char dir[64], path[512];
    ts_tmp_dir(dir, sizeof dir, "heads");
    Arena *a = arena_new("t", 0);
    Tensor *p = tensor_new4(a, 1, 2, 3, 2, "p"), *q = tensor_new4(a, 1, 2, 2, 2, "q");
    for (size_t i = 0; i < p->size; i++) p->data[i] = (Real)(0.125 * (double)i);
    for (size_t i = 0; i < q->size; i++) q->data[i] = (Real)(1.0 / (1.0 + (double)i));
    LensPatterns ps;
    memset(&ps, 0, sizeof ps);
    const char *src[] = {"a", "b"}, *dec[] = {"<bos>", "x y", "z"};
    int s = lens_patterns_tokens(&ps, "encoder_tokens", src, 2);
    int t = lens_patterns_tokens(&ps, "decoder_tokens", dec, 3);
    cr_assert(s == 0 && t == 1);
    lens_patterns_add(&ps, "encoder.layers.0.self_attn", "encoder self-attention", 0, q, s, s);
    lens_patterns_add(&ps, "decoder.layers.0.multihead_attn", "cross", 0, p, t, s);
    cr_assert_eq(ps.blocks[1].Tq, 3);
    cr_assert_eq(ps.blocks[1].Tk, 2);
    cr_assert_eq(lens_patterns_save(&ps, ts_join(path, dir, "att.npz")), AG_OK, "%s",
                 ag_last_error());
    NpzFile *f;
    cr_assert_eq(npz_read(path, &f, NULL), AG_OK, "%s", ag_last_error());
    cr_assert_eq(f->n, 4);
    cr_assert_str_eq(f->entries[0].name, "encoder.layers.0.self_attn");
    cr_assert_str_eq(f->entries[1].name, "decoder.layers.0.multihead_attn");
    cr_assert_str_eq(f->entries[2].name, "encoder_tokens");
    const NpzEntry *c = &f->entries[1];
    cr_assert(c->dtype == NPZ_F32 && c->ndim == 4 && c->shape[1] == 2 && c->shape[2] == 3 &&
              c->shape[3] == 2);
    for (size_t i = 0; i < p->size; i++)
        cr_assert_eq(((const float *)c->data)[i], (float)p->data[i]);
    const NpzEntry *dt = npz_find(f, "decoder_tokens");
    cr_assert(dt && dt->dtype == NPZ_U8 && dt->count == strlen("<bos>\nx y\nz"));
    cr_assert_eq(memcmp(dt->data, "<bos>\nx y\nz", dt->count), 0);
    npz_free(f);
    lens_patterns_free(&ps);
    cr_assert_eq(ps.n, 0);
    arena_free(a);
    ts_rm_tree(dir);
}

Test(lens_patterns, aborts_on_probabilities_of_another_shape, .signal = SIGABRT) {
    Arena *a = arena_new("t", 0);
    Tensor *p = tensor_new4(a, 1, 2, 3, 3, "p");
    LensPatterns ps;
    memset(&ps, 0, sizeof ps);
    const char *tok[] = {"a", "b"};
    int s = lens_patterns_tokens(&ps, "tokens", tok, 2);
    lens_patterns_add(&ps, "blocks.0.attn", NULL, 0, p, s, s); /* (1, 2, 3, 3) for 2 tokens */
}

Test(lens_patterns, aborts_on_a_token_list_that_does_not_exist, .signal = SIGABRT) {
    Arena *a = arena_new("t", 0);
    Tensor *p = tensor_new4(a, 1, 2, 3, 3, "p");
    LensPatterns ps;
    memset(&ps, 0, sizeof ps);
    lens_patterns_add(&ps, "blocks.0.attn", NULL, 0, p, 0, 0);
}
