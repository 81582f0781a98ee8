/* test_packed.c: nn_seq2seq_loss computes only the live rows of a padded batch (packed by
 * ag_embedding_rows with sinusoidal positions, ag_gather_rows with learned ones; attention on them
 * by ag_attention in its AG_ATTN_ROWS layout), and must give the loss and every
 * gradient of the dense reference, ag_cross_entropy(nn_seq2seq_decode(nn_seq2seq_encode(...))),
 * up to rounding: 1e-12 (loss) and 1e-10 (gradients) in the double build, float tolerances in
 * the float one. Ragged padding on both sides (a row with a single real token, a target row
 * whose input is padding where its target is not, and the reverse), post-LN, pre-LN with tied
 * output and learned positions, grouped-query heads, and tracked head gates (the fallback
 * through the dense attention). A batch without padding must give the dense path's bits.
 * Not here: the ops' own gradient checks (tests/support/cases.c). */
#include <criterion/criterion.h>
#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "attograd.h"

#ifdef AG_REAL_DOUBLE
#define LOSS_TOL 1e-12
#define GRAD_TOL 1e-10
#else
#define LOSS_TOL 1e-5
#define GRAD_TOL 1e-4
#endif

enum { B = 5, S = 7, T = 6, SV = 11, TV = 13, PAD = 0 };

/* Rows of lengths len[b] of ids in [1, V) (0 is padding after them). */
static void fill(int *ids, const int *len, int L, int V, int salt) {
    for (int b = 0; b < B; b++)
        for (int t = 0; t < L; t++)
            ids[b * L + t] = t < len[b] ? 1 + (b * 7 + t * 5 + salt) % (V - 1) : PAD;
}

/* What one path left behind: the loss, every parameter's gradient, the gates' gradients and
 * the first encoder layer's attention probabilities. */
typedef struct {
    double loss;
    Real *grads[128];
    Real gates[16][8];
    Real *probs;
    size_t n_probs;
    int scatters, rows_attn; /* scatter_rows and packed-rows attention nodes recorded */
} Result;

enum {
    VARIANT_POST_LN,
    VARIANT_PRE_LN_TIED_LEARNED,
    VARIANT_GROUPED_QUERY,
    VARIANT_GATES,
    N_VARIANTS
};
static const char *const variant_names[N_VARIANTS] = {"post-LN", "pre-LN, tied, learned positions",
                                                      "grouped-query", "tracked head gates"};

static MultiHeadAttention *attn(Seq2Seq *m, int k) { /* every attention block, k-th */
    int ne = m->cfg.n_enc_layers;
    if (k < ne) return &m->enc[k].self_attn;
    k -= ne;
    return k % 2 ? &m->dec[k / 2].multihead_attn : &m->dec[k / 2].self_attn;
}
static int n_attn(const Seq2Seq *m) { return m->cfg.n_enc_layers + 2 * m->cfg.n_dec_layers; }

static void model_init(Seq2Seq *m, Arena *a, int variant) {
    Seq2SeqConfig cfg = nn_seq2seq_default_config(SV, TV, 16, 4, 2);
    cfg.layer.d_ff = 24;
    cfg.layer.dropout = 0;
    cfg.max_len = 8;
    if (variant == VARIANT_PRE_LN_TIED_LEARNED) {
        cfg.layer.pre_ln = 1;
        cfg.tie_output = 1;
        cfg.learned_pos = 1;
    }
    if (variant == VARIANT_GROUPED_QUERY) cfg.layer.n_kv_heads = 2;
    Rng rng;
    rng_seed(&rng, 5);
    nn_seq2seq_init(m, a, &rng, &cfg);
    cr_assert_leq(m->params.n, 128);
    /* LayerNorm weights 1 and biases 0 would hide terms: perturb every parameter */
    for (int i = 0; i < m->params.n; i++) {
        Tensor *p = m->params.items[i];
        for (size_t j = 0; j < p->size; j++) p->data[j] += (Real)(0.05 * rng_normal(&rng));
    }
    if (variant == VARIANT_GATES)
        for (int k = 0; k < n_attn(m); k++) {
            nn_mha_track_gates(attn(m, k), 1);
            attn(m, k)->gate->data[k % 4] = (Real)0.5;
        }
}

/* A model of the variant and a tape. */
typedef struct {
    Arena *a;
    Tape *t;
    Seq2Seq m;
} Fixture;
static void fixture_init(Fixture *f, int variant) {
    f->a = arena_new("params", 4 << 20);
    f->t = ag_tape_new(arena_new("step", 64 << 20));
    model_init(&f->m, f->a, variant);
}
static void fixture_free(Fixture *f) {
    arena_free(f->t->arena);
    ag_tape_free(f->t);
    nn_seq2seq_free(&f->m);
    arena_free(f->a);
}

static int count_op(const Tape *t, AgOp op) {
    int n = 0;
    for (const AgNode *node = t->last; node; node = node->prev) n += node->op == op;
    return n;
}
/* attention nodes on packed rows: their output is (nq, NH*HS), 2-D (AG_ATTN_ROWS) */
static int count_rows_attention(const Tape *t) {
    int n = 0;
    for (const AgNode *node = t->last; node; node = node->prev)
        n += node->op == AG_OP_ATTENTION && node->out->ndim == 2;
    return n;
}

/* One forward and backward by the packed (nn_seq2seq_loss) or the dense path; keeps what the
 * comparison needs in r (malloc) and returns the number of nodes that gathered rows (gather_rows,
 * and embedding_rows with rows). */
static int run(Seq2Seq *m, Tape *t, int packed, const int *src, const int *tgt_in,
               const int *tgt_out, Result *r) {
    ag_params_zero_grad(&m->params);
    for (int k = 0; k < n_attn(m); k++)
        if (attn(m, k)->track_gates) tensor_zero_grad(attn(m, k)->gate);
    Tensor *loss;
    if (packed) {
        loss = nn_seq2seq_loss(t, m, src, S, tgt_in, tgt_out, B, T, NULL);
    } else {
        Tensor *memory = nn_seq2seq_encode(t, m, src, B, S, NULL);
        Tensor *logits = nn_seq2seq_decode(t, m, memory, src, S, tgt_in, B, T, NULL);
        loss = ag_cross_entropy(t, logits, tgt_out, PAD);
    }
    ag_backward(t, loss);
    r->loss = loss->data[0];
    for (int i = 0; i < m->params.n; i++) {
        Tensor *p = m->params.items[i];
        r->grads[i] = malloc(p->size * sizeof(Real));
        memcpy(r->grads[i], p->grad, p->size * sizeof(Real));
    }
    for (int k = 0; k < n_attn(m); k++)
        if (attn(m, k)->track_gates) memcpy(r->gates[k], attn(m, k)->gate->grad, 4 * sizeof(Real));
    Tensor *P = m->enc[0].self_attn.last_probs; /* (B, NH, S, S), NULL without need_weights */
    r->n_probs = P ? P->size : 0;
    r->probs = malloc(r->n_probs * sizeof(Real) + 1);
    if (P) memcpy(r->probs, P->data, P->size * sizeof(Real));
    int gathers = count_op(t, AG_OP_GATHER_ROWS); /* and embeddings that kept some rows only */
    for (const AgNode *node = t->last; node; node = node->prev)
        gathers += node->op == AG_OP_EMBEDDING_ROWS && node->out->ndim == 2;
    r->scatters = count_op(t, AG_OP_SCATTER_ROWS);
    r->rows_attn = count_rows_attention(t);
    ag_tape_reset(t);
    return gathers;
}

static void result_free(Result *r, int n) {
    for (int i = 0; i < n; i++) free(r->grads[i]);
    free(r->probs);
}

/* |a - b| <= tol * max(1, scale) */
static int close(double a, double b, double tol, double scale) {
    return fabs(a - b) <= tol * fmax(1.0, scale);
}

Test(nn_seq2seq_loss, packed_rows_give_the_dense_loss_and_gradients) {
    static const int src_len[B] = {7, 3, 1, 5, 2};
    /* row 1: position 2's input is padding but its target is not (a live row that is a masked
     * key); row 3: position 3's target is padding but its input is not; row 2: one token */
    static const int in_len[B] = {6, 2, 1, 4, 3}, out_len[B] = {6, 3, 1, 3, 3};
    int src[B * S], tgt_in[B * T], tgt_out[B * T];
    fill(src, src_len, S, SV, 0);
    fill(tgt_in, in_len, T, TV, 1);
    fill(tgt_out, out_len, T, TV, 2);
    for (int variant = 0; variant < N_VARIANTS; variant++) {
        const char *name = variant_names[variant];
        Fixture f;
        fixture_init(&f, variant);
        Seq2Seq *m = &f.m;
        Tape *t = f.t;
        Result dense, packed;
        cr_assert_eq(run(m, t, 0, src, tgt_in, tgt_out, &dense), 0);
        int gathers = run(m, t, 1, src, tgt_in, tgt_out, &packed);
        /* the packed path ran: embeddings gathered; attention on the packed rows (with gates:
         * every attention block's inputs scattered to the batch and its output gathered) */
        int gates = variant == VARIANT_GATES;
        cr_assert_eq(gathers, 2 + (gates ? n_attn(m) : 0), "%s: %d gather_rows nodes", name,
                     gathers);
        cr_assert_eq(packed.rows_attn, gates ? 0 : n_attn(m), "%s: %d attention_rows nodes", name,
                     packed.rows_attn);
        if (!gates) cr_assert_eq(packed.scatters, 0, "%s: %d scatter_rows", name, packed.scatters);
        cr_assert(close(packed.loss, dense.loss, LOSS_TOL, fabs(dense.loss)),
                  "%s: loss %.17g packed vs %.17g dense", name, packed.loss, dense.loss);
        for (int i = 0; i < m->params.n; i++) {
            Tensor *p = m->params.items[i];
            double scale = 0;
            for (size_t j = 0; j < p->size; j++) scale = fmax(scale, fabs(dense.grads[i][j]));
            for (size_t j = 0; j < p->size; j++)
                cr_assert(close(packed.grads[i][j], dense.grads[i][j], GRAD_TOL, scale),
                          "%s: %s grad[%zu] %.17g packed vs %.17g dense", name, p->name, j,
                          (double)packed.grads[i][j], (double)dense.grads[i][j]);
        }
        if (variant == VARIANT_GATES)
            for (int k = 0; k < n_attn(m); k++)
                for (int h = 0; h < 4; h++)
                    cr_assert(close(packed.gates[k][h], dense.gates[k][h], GRAD_TOL, 1),
                              "%s: gate %d of block %d: %.17g packed vs %.17g dense", name, h, k,
                              (double)packed.gates[k][h], (double)dense.gates[k][h]);
        /* the probabilities of every live query are the dense ones */
        cr_assert_eq(packed.n_probs, dense.n_probs);
        for (size_t e = 0; e < dense.n_probs; e++) {
            int q = (int)(e / S % S), b = (int)(e / ((size_t)4 * S * S));
            if (src[b * S + q] == PAD) { /* a query left out: 0 (with gates: computed) */
                cr_assert(gates || packed.probs[e] == 0, "%s: probability %zu of a padded query",
                          name, e);
                continue;
            }
            cr_assert(close(packed.probs[e], dense.probs[e], GRAD_TOL, 1),
                      "%s: probability %zu: %.17g packed vs %.17g dense", name, e,
                      (double)packed.probs[e], (double)dense.probs[e]);
        }
        result_free(&dense, m->params.n);
        result_free(&packed, m->params.n);
        fixture_free(&f);
    }
}

/* No padding anywhere: no row is dead, nothing is packed, the same ops run: the same bits. */
Test(nn_seq2seq_loss, a_batch_without_padding_gives_the_dense_bits) {
    static const int full_s[B] = {S, S, S, S, S}, full_t[B] = {T, T, T, T, T};
    int src[B * S], tgt_in[B * T], tgt_out[B * T];
    fill(src, full_s, S, SV, 0);
    fill(tgt_in, full_t, T, TV, 1);
    fill(tgt_out, full_t, T, TV, 2);
    for (int variant = 0; variant < N_VARIANTS; variant++) {
        Fixture f;
        fixture_init(&f, variant);
        Seq2Seq *m = &f.m;
        Tape *t = f.t;
        Result dense, packed;
        run(m, t, 0, src, tgt_in, tgt_out, &dense);
        cr_assert_eq(run(m, t, 1, src, tgt_in, tgt_out, &packed), 0);
        cr_assert(packed.loss == dense.loss, "%s: loss %.17g vs %.17g", variant_names[variant],
                  packed.loss, dense.loss);
        for (int i = 0; i < m->params.n; i++)
            cr_assert(memcmp(packed.grads[i], dense.grads[i],
                             m->params.items[i]->size * sizeof(Real)) == 0,
                      "%s: %s's gradient differs", variant_names[variant],
                      m->params.items[i]->name);
        result_free(&dense, m->params.n);
        result_free(&packed, m->params.n);
        fixture_free(&f);
    }
}

/* nn_mha_forward_rows: a packed input that does not match its row map aborts. */
/* A MultiHeadAttention (d_model 8, 2 heads, bias), seeded, and a tape. */
typedef struct {
    Arena *a;
    ParamList pl;
    Rng rng;
    MultiHeadAttention m;
    Tape *t;
} MhaFix;
static void mha_make(MhaFix *f, uint64_t seed) {
    f->a = arena_new("params", 1 << 20);
    ag_params_init(&f->pl);
    rng_seed(&f->rng, seed);
    NnBuilder nb = nn_builder(f->a, &f->pl, &f->rng);
    nn_mha_init(&f->m, &nb, "attn", &(MhaConfig){.d_model = 8, .n_heads = 2});
    f->t = ag_tape_new(arena_new("step", 1 << 20));
}

Test(nn_mha_forward_rows, aborts_when_the_packed_rows_do_not_match_the_map, .signal = SIGABRT) {
    MhaFix f;
    mha_make(&f, 1);
    static const int idx[3] = {0, 2, 3};
    NnRows rows = {idx, 3, 2, 2};
    Tensor *x = tensor_zeros(f.t->arena, 2, (int[]){4, 8}, "x"); /* 4 rows, the map names 3 */
    nn_mha_forward_rows(f.t, &f.m, x, &rows, x, &rows, NULL, NULL);
}

/* nn_mha_forward_rows with packed queries over full (B, Tk, C) keys and values (no kv map):
 * the rows of nn_mha_forward's output that the query map names, up to rounding. */
Test(nn_mha_forward_rows, packed_queries_over_unpacked_keys) {
    MhaFix f;
    mha_make(&f, 2);
    Arena *a = f.a;
    Tape *t = f.t;
    enum { NB = 2, TQ = 3, TK = 4, C = 8 };
    static const int idx[3] = {0, 2, 4}; /* (0,0), (0,2), (1,1) */
    static const uint8_t pad[NB * TK] = {0, 0, 0, 1, /**/ 0, 1, 1, 1};
    AgMask mask = {pad, NB, TK};
    NnRows rows = {idx, 3, NB, TQ};
    Tensor *x = tensor_new3(a, NB, TQ, C, "x"), *kv = tensor_new3(a, NB, TK, C, "kv");
    rng_fill_uniform(&f.rng, x, -1, 1);
    rng_fill_uniform(&f.rng, kv, -1, 1);
    Tensor *xp = tensor_new(a, 2, (int[]){3, C}, "xp");
    for (int i = 0; i < 3; i++) memcpy(xp->data + i * C, x->data + idx[i] * C, C * sizeof(Real));
    AgAttnMask masks = {.key_padding = &mask};
    Tensor *y = nn_mha_forward_rows(t, &f.m, xp, &rows, kv, NULL, &masks, NULL);
    cr_assert(y->ndim == 2 && y->shape[0] == 3 && y->shape[1] == C);
    Tensor *yd = nn_mha_forward(t, &f.m, x, kv, kv, &masks, NULL);
    for (int i = 0; i < 3; i++)
        for (int c = 0; c < C; c++)
            cr_assert(close(y->data[i * C + c], yd->data[idx[i] * C + c], LOSS_TOL, 1),
                      "row %d col %d: %g vs %g", i, c, (double)y->data[i * C + c],
                      (double)yd->data[idx[i] * C + c]);
    arena_free(t->arena);
    ag_tape_free(t);
    ag_params_free(&f.pl);
    arena_free(a);
}

/* need_weights 0 (nn_seq2seq_need_weights): a training step leaves every attention's
 * last_probs unset (NULL) and gives the same loss and gradients to the bit; back at 1 the
 * probabilities are the ones of the first step (which the test above holds to the dense
 * path's), by the packed path and by the dense one, with and without head gates. */
Test(nn_seq2seq_need_weights, a_step_without_weights_leaves_last_probs_unset_and_the_same_bits) {
    static const int src_len[B] = {7, 3, 1, 5, 2}, in_len[B] = {6, 2, 1, 4, 3};
    static const int out_len[B] = {6, 3, 1, 3, 3};
    int src[B * S], tgt_in[B * T], tgt_out[B * T];
    fill(src, src_len, S, SV, 0);
    fill(tgt_in, in_len, T, TV, 1);
    fill(tgt_out, out_len, T, TV, 2);
    for (int variant = 0; variant < N_VARIANTS; variant++)
        for (int packed = 0; packed < 2; packed++) {
            const char *name = variant_names[variant];
            Fixture f;
            fixture_init(&f, variant);
            Seq2Seq *m = &f.m;
            Result on, off, again;
            for (int k = 0; k < n_attn(m); k++) cr_assert_eq(attn(m, k)->need_weights, 1);
            run(m, f.t, packed, src, tgt_in, tgt_out, &on);
            cr_assert_gt(on.n_probs, 0, "%s: the default keeps the probabilities", name);
            nn_seq2seq_need_weights(m, 0);
            run(m, f.t, packed, src, tgt_in, tgt_out, &off);
            for (int k = 0; k < n_attn(m); k++)
                cr_assert(attn(m, k)->last_probs == NULL, "%s, packed %d: block %d's last_probs",
                          name, packed, k);
            cr_assert(off.loss == on.loss, "%s, packed %d: loss %.17g vs %.17g", name, packed,
                      off.loss, on.loss);
            for (int i = 0; i < m->params.n; i++)
                cr_assert(
                    memcmp(off.grads[i], on.grads[i], m->params.items[i]->size * sizeof(Real)) == 0,
                    "%s, packed %d: %s's gradient differs", name, packed, m->params.items[i]->name);
            nn_seq2seq_need_weights(m, 1);
            run(m, f.t, packed, src, tgt_in, tgt_out, &again);
            cr_assert_eq(again.n_probs, on.n_probs);
            cr_assert(memcmp(again.probs, on.probs, on.n_probs * sizeof(Real)) == 0,
                      "%s, packed %d: the probabilities differ", name, packed);
            result_free(&on, m->params.n);
            result_free(&off, m->params.n);
            result_free(&again, m->params.n);
            fixture_free(&f);
        }
}

/* need_weights other than 0 or 1 is misuse: the forward aborts naming it. */
Test(nn_seq2seq_need_weights, aborts_on_a_value_other_than_0_or_1, .signal = SIGABRT) {
    Fixture f;
    fixture_init(&f, VARIANT_POST_LN);
    nn_seq2seq_need_weights(&f.m, 2);
}
