/* heads.c: how much each attention head matters over sentence pairs (the valid split by
 * default): the library's measure (src/lens/heads.h, lens_head_importance: the loss increase
 * with a head's gate at 0, and Michel et al.'s gate-gradient score) over the pairs in
 * teacher-forced batches sorted by length. The blocks are in the order enc self 0..L-1, dec
 * self 0..L-1, dec cross 0..L-1 (lens_heads_seq2seq).
 * Not here: the measure, the table and the picture (src/lens/heads.c, src/view/heads_plot.c).
 * Read next: src/lens/heads.c. */
#include "translate.h"

#include <stdlib.h>
#include <string.h>

/* the pairs, in batches of batch sorted by length (a LensHeadData's ctx) */
typedef struct {
    Seq2Seq *m;
    const TxtPairSet *d;
    int *idx, n, batch;
    TxtPairBatch b;
} Pairs;

/* batch i's loss with every dropout at 0 (nn_seq2seq_dropouts): as the model translates */
static Tensor *pairs_loss(Tape *t, void *ctx, int i, double *tokens) {
    Pairs *p = ctx;
    int i0 = i * p->batch, B = p->n - i0 < p->batch ? p->n - i0 : p->batch;
    txt_pair_batch_make(&p->b, p->d->pairs, p->idx + i0, B);
    double *dp[NN_SEQ2SEQ_MAX_DROPOUTS], saved[NN_SEQ2SEQ_MAX_DROPOUTS];
    int nd = nn_seq2seq_dropouts(p->m, dp);
    for (int k = 0; k < nd; k++) saved[k] = *dp[k], *dp[k] = 0;
    Tensor *loss =
        nn_seq2seq_loss(t, p->m, p->b.src, p->b.S, p->b.tgt_in, p->b.tgt_out, B, p->b.T, NULL);
    for (int k = 0; k < nd; k++) *dp[k] = saved[k];
    *tokens = (double)p->b.n_tgt_tokens;
    return loss;
}

int tr_head_importance(Translator *tr, const TxtPairSet *d, int limit, int batch,
                       LensHeadImportance *h, FILE *progress) {
    memset(h, 0, sizeof *h);
    Pairs p = {&tr->model, d, NULL, limit > 0 && limit < d->n ? limit : d->n, batch, {0}};
    if (p.n == 0) return ag_fail(AG_ERR_ARG, "%s: no sentence pairs", d->path);
    p.idx = ex_malloc((size_t)p.n * sizeof(int));
    txt_pairs_by_length(d->pairs, 0, p.n, p.idx);
    LensHeadBlock blk[LENS_MAX_HEAD_BLOCKS];
    int nb = lens_heads_seq2seq(&tr->model, blk);
    LensHeadData data = {(p.n + batch - 1) / batch, pairs_loss, &p, d->path};
    int rc = lens_head_importance(tr->tape, blk, nb, &tr->model.params, &data, h, progress);
    txt_pair_batch_free(&p.b);
    free(p.idx);
    h->n_rows = p.n;
    return rc == AG_ERR_RANGE ? ex_not_finite(rc, tr->path, NULL) : rc;
}
