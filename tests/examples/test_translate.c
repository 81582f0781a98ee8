/* test_translate.c: the translation example (examples/translate). The library part is called
 * directly: the tokenizer round-trips, batches and masks are right, the loader buckets by
 * length and covers every pair once an epoch, the metrics match hand computations, a tiny
 * model learns copy and reverse to 100% exact match with diagonal / anti-diagonal
 * cross-attention, and resume is bit-exact. The program itself (its path comes from
 * AG_TRANSLATE_BIN, set by the Makefile) is run for what only a process shows: SIGINT and
 * SIGTERM save and exit 130 / 143, a non-finite loss stops naming the step and keeps the last
 * good checkpoint, and bad flags, missing files and malformed TSV lines exit 2 with a clear
 * message. Data are tiny copy/reverse tasks generated here. */
#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "files.h"
#include "translate.h"
#include "translate_run.h"

/* ---- temporary folders, files, generated tasks ---- */

/* a small model and run for the tests: quiet, no signal handlers, overwriting */
static TsTrainConfig tiny_config(const char *dir, const char *train, const char *valid) {
    TsTrainConfig c = ts_train_defaults();
    c.train_path = train;
    c.valid_path = valid;
    c.out_dir = dir;
    c.model.layer.d_model = 16;
    c.model.layer.n_heads = c.model.layer.n_kv_heads = 2;
    c.model.layer.d_ff = 32;
    c.model.n_enc_layers = c.model.n_dec_layers = 1;
    c.model.max_len = 24;
    c.optim.lr = 1e-2;
    c.optim.schedule.warmup = 5;
    c.batch = 8;
    c.steps = 20;
    c.log_every = 5;
    c.valid_every = 10;
    c.verbose = 0;
    c.force = 1;
    /* one thread: Criterion runs two tests side by side (-j2), and these matrices are too
     * small for threads to pay (results do not depend on the thread count anyway) */
    c.threads = 1;
    return c;
}

/* ---- learning copy and reverse ---- */

/* The share of target positions of the first n pairs whose cross-attention (averaged over
 * heads, last decoder layer) peaks on the aligned source position. */
static double alignment(Translator *tr, const TxtPairSet *d, int n, int reverse) {
    int hits = 0, total = 0;
    for (int i = 0; i < n && i < d->n; i++) {
        const TxtPair *p = &d->pairs[i];
        tr_forward_pair(tr, p->src, p->src_len, p->tgt, p->tgt_len);
        const Tensor *P = tr->model.dec[tr->model.cfg.n_dec_layers - 1].multihead_attn.last_probs;
        int NH = P->shape[1], Tq = P->shape[2], Tk = P->shape[3];
        cr_assert(Tq == p->tgt_len + 1 && Tk == p->src_len + 1);
        for (int q = 0; q < p->tgt_len; q++) {
            int best = 0;
            double best_w = -1;
            for (int k = 0; k < Tk; k++) {
                double w = 0;
                for (int h = 0; h < NH; h++) w += P->data[((size_t)h * Tq + q) * Tk + k];
                if (w > best_w) {
                    best_w = w;
                    best = k;
                }
            }
            hits += best == (reverse ? p->src_len - 1 - q : q);
            total++;
        }
    }
    return (double)hits / total;
}

/* Trains a 1+1-layer model on a generated copy or reverse task, then checks 100% exact match
 * on a test set, the alignment of its cross-attention, and that beam search agrees. */
static void learn_task(int reverse) {
    char dir[64], train[512], valid[512], test[512], out[512], ckpt[512];
    ts_tmp_dir(dir, sizeof dir, "translate");
    /* DEBUG builds (ASan) run about 5 times slower: a shorter, easier version of the task */
#ifdef AG_DEBUG
    int max_len = 5, alphabet = 6, steps = reverse ? 350 : 250, width = 16;
#else
    int max_len = 8, alphabet = 8, steps = reverse ? 600 : 300, width = 32;
#endif
    ts_write_copy_task(ts_join(train, dir, "train.tsv"), 3000, reverse, 11, 3, max_len, alphabet);
    ts_write_copy_task(ts_join(valid, dir, "valid.tsv"), 50, reverse, 12, 3, max_len, alphabet);
    ts_write_copy_task(ts_join(test, dir, "test.tsv"), 100, reverse, 13, 3, max_len, alphabet);
    TsTrainConfig c = tiny_config(ts_join(out, dir, "run"), train, valid);
    c.model.layer.d_model = width;
    c.model.layer.d_ff = 2 * width;
    c.model.layer.dropout = 0;
    c.optim.schedule.warmup = 20;
    c.batch = 32;
    c.steps = steps;
    c.log_every = 50;
    c.valid_every = 100;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    cr_assert_eq(ts_train(&c), TR_EXIT_OK, "%s", ag_last_error());
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double secs = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
    Translator tr;
    cr_assert_eq(tr_load(&tr, ts_join(ckpt, out, "best.npz")), AG_OK, "%s", ag_last_error());
    TxtPairSet d;
    cr_assert_eq(txt_pairs_read(test, &d, &tr.src, &tr.tgt, 0, 0), AG_OK);
    TxtScore s;
    double loss;
    eval_seq2seq(&tr.model, tr.tape, &d, 0, 64, &s, &loss, NULL, &tr.src, &tr.tgt, NULL);
    cr_log_info("%s: %d steps in %.1f s (%.0f steps/s): exact %.1f%%, BLEU %.1f, loss %.4f",
                reverse ? "reverse" : "copy", steps, secs, steps / secs, 100 * txt_score_exact(&s),
                txt_score_bleu(&s), loss);
    cr_assert_eq(s.n_exact, d.n, "%s: exact match %ld/%ld", reverse ? "reverse" : "copy", s.n_exact,
                 s.n_sent);
    cr_assert_float_eq(txt_score_bleu(&s), 100.0, 1e-9);
    double a = alignment(&tr, &d, 30, reverse);
    cr_log_info("%s: cross-attention peaks on the aligned position at %.0f%% of positions",
                reverse ? "reverse" : "copy", 100 * a);
    cr_assert(a >= 0.8, "%s: the cross-attention is aligned at only %.0f%% of positions",
              reverse ? "reverse (anti-diagonal)" : "copy (diagonal)", 100 * a);
    /* beam search finds the same (correct) translations */
    for (int i = 0; i < 10; i++) {
        const TxtPair *p = &d.pairs[i];
        int hyp[64];
        int n = tr_translate_ids(&tr, p->src, p->src_len, 3, 0.6, hyp, 64);
        cr_assert_eq(n, p->tgt_len, "beam: pair %d", i);
        cr_assert_arr_eq(hyp, p->tgt, (size_t)n * sizeof(int), "beam: pair %d", i);
    }
    txt_pairs_free(&d);
    tr_free(&tr);
    ts_rm_tree(dir);
}

Test(tr_train, learns_copy_with_diagonal_cross_attention) { learn_task(0); }
Test(tr_train, learns_reverse_with_antidiagonal_cross_attention) { learn_task(1); }

/* ---- resume ---- */

/* The run the resume tests take straight and in halves: in a new folder dir, 100 pairs to
 * reverse in train (13 batches an epoch: the 24 steps cross an epoch boundary) and 10 in valid,
 * with dropout, writing to out (dir/straight). */
static TsTrainConfig halves_run(char *dir, char *train, char *valid, char *out) {
    ts_tmp_dir(dir, 64, "translate");
    ts_write_copy_task(ts_join(train, dir, "train.tsv"), 100, 1, 21, 2, 7, 6);
    ts_write_copy_task(ts_join(valid, dir, "valid.tsv"), 10, 1, 22, 2, 7, 6);
    TsTrainConfig c = tiny_config(ts_join(out, dir, "straight"), train, valid);
    c.model.layer.dropout = 0.2;
    c.steps = 24;
    c.valid_every = 6;
    c.optim.schedule.total = 24;
    return c;
}

Test(tr_train, resume_is_bit_exact) {
    char dir[64], train[512], valid[512], a[512], b[512], p1[512], p2[512];
    TsTrainConfig c = halves_run(dir, train, valid, a);
    c.log_every = 3;
    cr_assert_eq(ts_train(&c), TR_EXIT_OK);
    c.out_dir = ts_join(b, dir, "halves");
    c.steps = 12;
    cr_assert_eq(ts_train(&c), TR_EXIT_OK);
    c.steps = 24;
    c.resume = 1;
    c.force = 0;
    c.seed = 12345; /* ignored on resume: everything comes from the checkpoint */
    cr_assert_eq(ts_train(&c), TR_EXIT_OK, "%s", ag_last_error());
    const char *files[] = {"last.npz", "best.npz"};
    for (int i = 0; i < 2; i++)
        cr_assert(ts_same_file(ts_join(p1, a, files[i]), ts_join(p2, b, files[i])),
                  "%s differs after resume", files[i]);
    /* the logs but for column 5, tokens_per_s (a timing) */
    char *x = ts_csv_drop_column(ts_join(p1, a, "log.csv"), 5),
         *y = ts_csv_drop_column(ts_join(p2, b, "log.csv"), 5);
    cr_assert_str_eq(x, y, "the CSV logs differ");
    /* the header, 8 rows (every 3 steps), 4 of them without validation (3, 9, 15, 21) */
    int rows = 0, no_valid = 0;
    for (char *p = x; (p = strchr(p, '\n')); p++) rows++;
    for (char *p = x; (p = strstr(p, ",,\n")); p++) no_valid++;
    cr_assert_eq(rows, 9, "%s", x);
    cr_assert_eq(no_valid, 4, "%s", x);
    const char *head = "step,epoch,train_loss,lr,grad_norm,,valid_loss,valid_exact\n";
    cr_assert(strncmp(x, head, strlen(head)) == 0, "%s", x);
    free(x);
    free(y);
    ts_rm_tree(dir);
}

/* ---- shards (docs/mpi.md): one process here; mpirun's runs are tests/dist/test_mpi.sh ---- */

#ifdef AG_REAL_DOUBLE
#define SHARD_TOL 1e-12
#else
#define SHARD_TOL 3e-5
#endif

typedef struct {
    Seq2Seq *m;
    const TxtPairSet *d;
    const TxtPairBatch *b;
    TxtPairBatch sb;
    int S;
} ShardCtx;

static Tensor *ctx_shard_loss(void *ctx, Tape *t, int i) {
    ShardCtx *c = ctx;
    return tr_shard_loss(c->m, t, c->d, c->b, i, c->S, &c->sb, NULL);
}

/* The padding-skipping loss is the mean over the batch's non-padding target tokens: shards of
 * rows of other lengths, each weighted by its share of the tokens, sum to the whole batch's
 * loss and gradient; more shards than rows leave some empty (no rows, no gradient). */
Test(tr_shard_loss, shards_sum_to_the_whole_batchs_mean_over_its_tokens) {
    char dir[64], path[512];
    ts_tmp_dir(dir, sizeof dir, "translate");
    ts_write_copy_task(ts_join(path, dir, "d.tsv"), 7, 1, 5, 1, 9, 6);
    TxtVocab sv, tv;
    txt_vocab_init(&sv);
    txt_vocab_init(&tv);
    TxtPairSet d;
    cr_assert_eq(txt_pairs_read(path, &d, &sv, &tv, 1, 0), AG_OK);
    Seq2SeqConfig mc = nn_seq2seq_default_config(sv.n, tv.n, 16, 2, 1);
    mc.layer.d_ff = 32;
    mc.layer.dropout = 0; /* the shards' dropout masks are their own: compared without */
    mc.max_len = 16;
    mc.pad_id = TXT_PAD;
    Arena *params = arena_new("params", 0), *steps = arena_new("step", 0);
    Tape *tape = ag_tape_new(steps);
    Rng r;
    rng_seed(&r, 3);
    Seq2Seq m;
    nn_seq2seq_init(&m, params, &r, &mc);
    TxtPairBatch b;
    memset(&b, 0, sizeof b);
    int rows[7] = {0, 1, 2, 3, 4, 5, 6};
    txt_pair_batch_make(&b, d.pairs, rows, 7);
    cr_assert(b.n_tgt_tokens < (long)b.B * b.T, "the batch must hold padding");
    ag_params_zero_grad(&m.params);
    Tensor *l = nn_seq2seq_loss(tape, &m, b.src, b.S, b.tgt_in, b.tgt_out, b.B, b.T, NULL);
    double want_loss = (double)l->data[0];
    ag_backward(tape, l);
    size_t n = ag_params_count(&m.params);
    Real *want = malloc(n * sizeof(Real)), *w = want;
    for (int j = 0; j < m.params.n; j++, w += m.params.items[j - 1]->size)
        memcpy(w, m.params.items[j]->grad, m.params.items[j]->size * sizeof(Real));
    const int counts[] = {2, 3, 4, 7, 9};
    for (int c = 0; c < 5; c++) {
        ShardCtx ctx = {&m, &d, &b, {0}, counts[c]};
        DistGrad *dg = dist_grad_new(&m.params, ctx.S);
        dg->mean = 0;
        double loss = dist_grad_step(dg, tape, ctx_shard_loss, &ctx);
        cr_assert(fabs(loss - want_loss) <= SHARD_TOL * want_loss,
                  "%d shards: loss %.17g, not %.17g", ctx.S, loss, want_loss);
        double max_abs = 0;
        w = want;
        for (int j = 0; j < m.params.n; j++) {
            const Tensor *p = m.params.items[j];
            for (size_t k = 0; k < p->size; k++, w++) {
                cr_assert(fabs((double)p->grad[k] - (double)*w) <=
                              SHARD_TOL * (1 + fabs((double)*w)),
                          "%d shards: %s.grad[%zu] %.17g, whole batch %.17g", ctx.S, p->name, k,
                          (double)p->grad[k], (double)*w);
                if (fabs((double)*w) > max_abs) max_abs = fabs((double)*w);
            }
        }
        cr_assert(max_abs > 1e-3, "the whole batch's gradient is all (nearly) zero");
        dist_grad_free(dg);
        txt_pair_batch_free(&ctx.sb);
    }
    cr_assert_null(tr_shard_loss(&m, tape, &d, &b, 0, 9, &b, NULL), "shard 0 of 9 of 7 rows");
    free(want);
    txt_pair_batch_free(&b);
    ag_tape_free(tape);
    arena_free(steps);
    nn_seq2seq_free(&m);
    arena_free(params);
    txt_pairs_free(&d);
    txt_vocab_free(&sv);
    txt_vocab_free(&tv);
    ts_rm_tree(dir);
}

Test(tr_shard_loss, aborts_on_a_shard_outside_the_count, .signal = SIGABRT) {
    TxtPairBatch b = {.B = 4};
    tr_shard_loss(NULL, NULL, NULL, &b, 4, 4, &b, NULL);
}

/* One process accumulating 3 shards (13 batches an epoch, the last of 4 pairs: shards of 1 or
 * 2 rows), with dropout: 12 steps resumed to 24 give the bytes of 24 in one go; one shard gives
 * other bytes (other dropout draws, other additions); a resume given another --shards, and
 * more shards than pairs a batch, are refused. */
Test(tr_train, shards_accumulate_and_resume_to_the_bit) {
    char dir[64], train[512], valid[512], a[512], b[512], one[512], p1[512], p2[512];
    TsTrainConfig c = halves_run(dir, train, valid, a);
    c.shards = 3;
    cr_assert_eq(ts_train(&c), TR_EXIT_OK, "%s", ag_last_error());
    c.out_dir = ts_join(one, dir, "one");
    c.shards = 1;
    cr_assert_eq(ts_train(&c), TR_EXIT_OK, "%s", ag_last_error());
    cr_assert(!ts_same_file(ts_join(p1, a, "last.npz"), ts_join(p2, one, "last.npz")),
              "--shards 3 and 1 wrote the same bytes");
    c.out_dir = ts_join(b, dir, "halves");
    c.shards = 3;
    c.steps = 12;
    cr_assert_eq(ts_train(&c), TR_EXIT_OK, "%s", ag_last_error());
    c.steps = 24;
    c.resume = 1;
    c.force = 0;
    c.shards = 0; /* not given: the checkpoint's */
    cr_assert_eq(ts_train(&c), TR_EXIT_OK, "%s", ag_last_error());
    cr_assert(ts_same_file(ts_join(p1, a, "last.npz"), ts_join(p2, b, "last.npz")),
              "last.npz differs after resume");
    cr_assert(ts_same_file(ts_join(p1, a, "best.npz"), ts_join(p2, b, "best.npz")),
              "best.npz differs after resume");
    c.shards = 2;
    c.given = " shards ";
    c.steps = 30;
    cr_assert_eq(ts_train(&c), TR_EXIT_USAGE);
    cr_assert(strstr(ag_last_error(), "--shards 2 differs from the checkpoint's (3, "), "%s",
              ag_last_error());
    c = tiny_config(ts_join(a, dir, "many"), train, valid);
    c.shards = 9;
    cr_assert_eq(ts_train(&c), TR_EXIT_USAGE);
    cr_assert(strstr(ag_last_error(), "--shards 9: must be at least the 1 processes and at most "
                                      "the batch size 8"),
              "%s", ag_last_error());
    ts_rm_tree(dir);
}

/* Both embeddings start at gain times nn_seq2seq_init's N(0, 1/d_model): with the same seed
 * and a learning rate of 0, a run at gain 0.25 ends with exactly a quarter of a gain-1 run's
 * embeddings (a power of two: no rounding) and every other parameter equal. */
Test(tr_train, embed_gain_scales_only_the_initial_embeddings) {
    char dir[64], train[512], out[2][512], ckpt[512];
    ts_tmp_dir(dir, sizeof dir, "translate");
    ts_write_copy_task(ts_join(train, dir, "train.tsv"), 40, 0, 31, 2, 7, 6);
    const double gains[2] = {1.0, 0.25};
    Translator tr[2];
    for (int i = 0; i < 2; i++) {
        TsTrainConfig c = tiny_config(ts_join(out[i], dir, i ? "quarter" : "one"), train, NULL);
        c.optim.lr = 0;
        c.optim.schedule = (OptimSchedule){OPTIM_CONSTANT, 0, 0, 0};
        c.steps = 2;
        c.embed_gain = gains[i];
        cr_assert_eq(ts_train(&c), TR_EXIT_OK, "%s", ag_last_error());
        cr_assert_eq(tr_load(&tr[i], ts_join(ckpt, out[i], "last.npz")), AG_OK, "%s",
                     ag_last_error());
    }
    const ParamList *p0 = &tr[0].model.params, *p1 = &tr[1].model.params;
    cr_assert_eq(p0->n, p1->n);
    int n_embed = 0;
    for (int k = 0; k < p0->n; k++) {
        const Tensor *a = p0->items[k], *b = p1->items[k];
        cr_assert_eq(a->size, b->size);
        int embed = strstr(a->name, "embed") != NULL;
        n_embed += embed;
        double sum_sq = 0;
        for (size_t j = 0; j < a->size; j++) {
            Real want = embed ? a->data[j] * (Real)0.25 : a->data[j];
            cr_assert(b->data[j] == want, "%s[%zu]: %g, want %g", a->name, j, (double)b->data[j],
                      (double)want);
            sum_sq += (double)a->data[j] * (double)a->data[j];
        }
        cr_assert(sum_sq > 0 || strstr(a->name, "bias"), "%s is all zeros", a->name);
    }
    cr_assert_eq(n_embed, 2, "src_embed and tgt_embed");
    tr_free(&tr[0]);
    tr_free(&tr[1]);
    ts_rm_tree(dir);
}

/* ---- the program: signals, NaN, command-line errors ---- */

static int64_t ckpt_step(const char *path) {
    Translator tr;
    cr_assert_eq(tr_load(&tr, path), AG_OK, "%s", ag_last_error());
    int64_t s = tr.trained_steps;
    for (int i = 0; i < tr.model.params.n; i++) {
        const Tensor *p = tr.model.params.items[i];
        for (size_t k = 0; k < p->size; k++)
            cr_assert(isfinite((double)p->data[k]), "%s holds a non-finite weight", path);
    }
    tr_free(&tr);
    return s;
}

/* tests/fixtures/translate_v1_last.npz: a checkpoint the trainer wrote before checkpoints were
 * generic (commit a2179a6: no meta.model entry; a float build; 6 steps of a d_model 8 model on
 * the five pairs below, --batch 2). It still loads, translates and resumes; resumed to step 8,
 * the float build on AVX2 wrote the same entries as that commit's trainer. */
#define V1_FIXTURE "tests/fixtures/translate_v1_last.npz"
#define V1_PAIRS "a b c\tx y z\nb a\ty x\nc c a\tz z x\na\tx\nb c\ty z\n"

Test(tr_train, a_checkpoint_written_before_generic_checkpoints_loads_and_resumes) {
    Seq2SeqConfig mc = {0};
    CkptConfig kc = tr_model_config(&mc);
    NpzFile *f;
    cr_assert_eq(ckpt_read(V1_FIXTURE, &kc, &f), AG_OK, "%s", ag_last_error());
    cr_assert(npz_find(f, "meta.model") == NULL, "the fixture predates meta.model");
    cr_assert(mc.layer.d_model == 8 && mc.layer.n_heads == 2 && mc.n_enc_layers == 1 &&
              mc.layer.d_ff == 8 && mc.max_len == 8);
    npz_free(f);
    Translator tr;
    cr_assert_eq(tr_load(&tr, V1_FIXTURE), AG_OK, "%s", ag_last_error());
    cr_assert_eq(tr.trained_steps, 6);
    int src[2] = {TXT_N_SPECIAL, TXT_N_SPECIAL + 1}, out[8];
    cr_assert(tr_translate_ids(&tr, src, 2, 1, 0.6, out, 8) >= 0);
    tr_free(&tr);
    char dir[64], train[512], out_dir[512], last[512], cmd[1200];
    ts_tmp_dir(dir, sizeof dir, "translate");
    ts_write_text(ts_join(train, dir, "train.tsv"), V1_PAIRS);
    ts_join(out_dir, dir, "run");
    snprintf(cmd, sizeof cmd, "mkdir -p %s && cp " V1_FIXTURE " %s/last.npz", out_dir, out_dir);
    cr_assert(system(cmd) == 0);
    const char *args[] = {"train",    "--train", train, "--valid", train,       "--out", out_dir,
                          "--resume", "--steps", "8",   "--quiet", "--threads", "1",     NULL};
    TsRun r = ts_run(dir, args, NULL);
    cr_assert_eq(r.code, 0, "exit %d: %s", r.code, r.err);
    ts_run_free(&r);
    cr_assert_eq(ckpt_step(ts_join(last, out_dir, "last.npz")), 8);
    ts_rm_tree(dir);
}

/* tests/fixtures/translate_v2_last.npz and translate_v2_shards_last.npz: checkpoints of the
 * trainer that kept its run state in the positional int64 slots of data.position (POS_*: 19
 * values, 20 with --shards above 1), written by the float build at 2a71c97: 6 steps of a
 * d_model 8 model on the five pairs V1_PAIRS with --batch 2 --log-every 2 --valid-every 3 (the
 * second also --shards 2 --clip 0.5). They load, and --resume alone continues them with their
 * settings: a CSV row every 2 steps, a validation every 3, and the shards. */
static void resume_positional(const char *fixture, int n_position, const char *want_out) {
    Seq2SeqConfig mc = {0};
    CkptConfig kc = tr_model_config(&mc);
    NpzFile *f;
    cr_assert_eq(ckpt_read(fixture, &kc, &f), AG_OK, "%s", ag_last_error());
    const NpzEntry *pos = npz_find(f, "data.position");
    cr_assert(pos != NULL && pos->ndim == 1 && pos->shape[0] == n_position,
              "%s: data.position of %d values", fixture, n_position);
    cr_assert(mc.layer.d_model == 8 && mc.layer.n_heads == 2 && mc.n_enc_layers == 1 &&
              mc.layer.d_ff == 8 && mc.max_len == 8);
    npz_free(f);
    cr_assert_eq(ckpt_step(fixture), 6);
    char dir[64], train[512], out_dir[512], last[512], csv[512], cmd[1200];
    ts_tmp_dir(dir, sizeof dir, "translate");
    ts_write_text(ts_join(train, dir, "train.tsv"), V1_PAIRS);
    ts_join(out_dir, dir, "run");
    snprintf(cmd, sizeof cmd, "mkdir -p %s && cp %s %s/last.npz", out_dir, fixture, out_dir);
    cr_assert(system(cmd) == 0);
    const char *args[] = {"train",    "--train", train, "--valid",   train, "--out", out_dir,
                          "--resume", "--steps", "10",  "--threads", "1",   NULL};
    TsRun r = ts_run(dir, args, NULL);
    cr_assert_eq(r.code, 0, "exit %d: %s", r.code, r.err);
    cr_assert(strstr(r.out, want_out) != NULL, "%s: wanted '%s' in: %s", fixture, want_out, r.out);
    ts_run_free(&r);
    cr_assert_eq(ckpt_step(ts_join(last, out_dir, "last.npz")), 10);
    char *log = ts_read_text(ts_join(csv, out_dir, "log.csv"), NULL);
    /* the kept settings: rows at 8, 9 (a validation), 10 */
    cr_assert(strstr(log, "\n8,") && strstr(log, "\n9,") && strstr(log, "\n10,"), "%s", log);
    const char *r9 = strstr(log, "\n9,") + 1, *end = strchr(r9, '\n');
    cr_assert(end && end - r9 > 2 && strncmp(end - 2, ",,", 2) != 0,
              "step 9's row holds a validation: %s", log);
    free(log);
    ts_rm_tree(dir);
}

Test(tr_train, a_checkpoint_with_positional_run_state_loads_and_resumes) {
    resume_positional("tests/fixtures/translate_v2_last.npz", 19, "training to step 10");
    resume_positional("tests/fixtures/translate_v2_shards_last.npz", 20, " 2 shards of 1 pairs");
}

/* The flags of a tiny model for the program */
#define TINY_FLAGS                                                                                 \
    "--threads", "1", "--d-model", "16", "--heads", "2", "--layers", "1", "--ff", "32",            \
        "--max-len", "24", "--batch", "8", "--warmup", "2", "--quiet"

static void interrupt_with(int sig, int want_code, const char *name) {
    char dir[64], train[512], out[512], csv[512], last[512];
    ts_tmp_dir(dir, sizeof dir, "translate");
    ts_write_copy_task(ts_join(train, dir, "train.tsv"), 64, 0, 31, 2, 6, 6);
    ts_join(out, dir, "run");
    ts_join(csv, out, "log.csv");
    const char *args[] = {"train",   "--train", train,         "--no-valid", "--out",    out,
                          "--steps", "1000000", "--log-every", "1",          TINY_FLAGS, NULL};
    pid_t pid = ts_start(dir, args, NULL);
    /* wait for a few CSV rows: the handlers are in place and steps are running */
    int rows = 0;
    for (int i = 0; i < 2000 && rows < 4; i++) {
        struct timespec ts = {0, 10 * 1000 * 1000};
        nanosleep(&ts, NULL);
        FILE *f = fopen(csv, "r");
        if (!f) continue;
        rows = 0;
        for (int ch; (ch = fgetc(f)) != EOF;) rows += ch == '\n';
        fclose(f);
    }
    cr_assert(rows >= 4, "the training never started");
    kill(pid, sig);
    TsRun r = ts_finish(dir, pid);
    cr_assert_eq(r.code, want_code, "%s: exit %d, stderr: %s", name, r.code, r.err);
    char expect[128];
    snprintf(expect, sizeof expect, "interrupted by %s at step ", name);
    const char *m = strstr(r.err, expect);
    cr_assert(m != NULL, "%s", r.err);
    long long step = atoll(m + strlen(expect));
    cr_assert(step >= 3, "%s", r.err);
    cr_assert(strstr(r.err, "continue with --resume") != NULL, "%s", r.err);
    cr_assert_eq(ckpt_step(ts_join(last, out, "last.npz")), step, "the checkpoint is of step %lld",
                 step);
    ts_run_free(&r);
    /* and it continues from there */
    char target[32];
    snprintf(target, sizeof target, "%lld", step + 2);
    const char *resume[] = {"train", "--train",  train,     "--no-valid", "--out",
                            out,     "--resume", "--steps", target,       "--log-every",
                            "1",     "--quiet",  NULL};
    r = ts_run(dir, resume, NULL);
    cr_assert_eq(r.code, 0, "resume: %s", r.err);
    cr_assert_eq(ckpt_step(last), step + 2);
    char *text = ts_read_text(csv, NULL);
    char last_row[64];
    snprintf(last_row, sizeof last_row, "\n%lld,", step + 2);
    cr_assert(strstr(text, last_row) != NULL, "%s", text);
    free(text);
    ts_run_free(&r);
    ts_rm_tree(dir);
}

Test(tr_cli, sigint_saves_a_checkpoint_and_exits_130) { interrupt_with(SIGINT, 130, "SIGINT"); }
Test(tr_cli, sigterm_saves_a_checkpoint_and_exits_143) { interrupt_with(SIGTERM, 143, "SIGTERM"); }

Test(tr_cli, non_finite_loss_stops_naming_the_step) {
    char dir[64], train[512], out[512], last[512];
    ts_tmp_dir(dir, sizeof dir, "translate");
    ts_write_copy_task(ts_join(train, dir, "train.tsv"), 64, 0, 41, 2, 6, 6);
    ts_join(out, dir, "run");
    const char *args[] = {"train",    "--train", train,          "--no-valid", "--out",        out,
                          "--steps",  "20",      "--save-every", "5",          "--inject-nan", "7",
                          TINY_FLAGS, NULL};
    TsRun r = ts_run(dir, args, NULL);
    cr_assert_eq(r.code, 1, "exit %d: %s", r.code, r.err);
    char expect[700];
    snprintf(expect, sizeof expect,
             "step 7: the training loss is nan: training stopped. The "
             "last good checkpoint is %s/last.npz (step 5)",
             out);
    cr_assert(strstr(r.err, expect) != NULL, "%s", r.err);
    cr_assert_eq(ckpt_step(ts_join(last, out, "last.npz")), 5);
    ts_run_free(&r);
    /* a learning rate far too large: the run stops at a named step, the checkpoint stays good */
    const char *wild[] = {"train",  "--train", train,      "--no-valid", "--out",
                          out,      "--force", "--steps",  "200",        "--save-every",
                          "1",      "--lr",    "1e6",      "--optim",    "sgd",
                          "--clip", "0",       TINY_FLAGS, NULL};
    r = ts_run(dir, wild, NULL);
    cr_assert_eq(r.code, 1, "exit %d: %s", r.code, r.err);
    const char *m = strstr(r.err, "train: step ");
    cr_assert(m != NULL && strstr(r.err, "training stopped"), "%s", r.err);
    long long bad_step = atoll(m + strlen("train: step "));
    cr_assert_eq(ckpt_step(last), bad_step - 1);
    ts_run_free(&r);
    ts_rm_tree(dir);
}

Test(tr_cli, bad_usage_exits_2_with_a_message) {
    char dir[64], train[512], bad[512], out[512], missing[512];
    ts_tmp_dir(dir, sizeof dir, "translate");
    ts_write_copy_task(ts_join(train, dir, "train.tsv"), 20, 0, 51, 2, 6, 6);
    ts_join(bad, dir, "bad.tsv");
    ts_write_text(bad, "a b\tb a\nc d\td c\ne f g\n");
    ts_join(out, dir, "run");
    ts_join(missing, dir, "nope.tsv");
    char ckpt[512];
    ts_join(ckpt, out, "last.npz");
    static const char *const none[] = {NULL};
    const struct {
        const char *const *args;
        const char *message;
    } cases[] = {
        {none, "usage: attograd-translate <command>"},
        {(const char *const[]){"fly", NULL}, "unknown command 'fly'"},
        {(const char *const[]){"attention", NULL}, "give a sentence"},
        {(const char *const[]){"train", "--bogus", NULL}, "unknown flag '--bogus'"},
        {(const char *const[]){"train", "-x", NULL}, "unknown flag '-x'"},
        {(const char *const[]){"train", "--steps", NULL}, "flag '--steps' needs a value"},
        {(const char *const[]){"train", "--steps", "ten", NULL}, "'--steps ten' is not an integer"},
        {(const char *const[]){"train", "--steps=0", NULL},
         "'--steps 0' is out of range [1, 1000000000000000000]"},
        {(const char *const[]){"train", "--batch", "99999999999", NULL},
         "'--batch 99999999999' is out of range [1, 1048576]"},
        {(const char *const[]){"train", "--out", "", NULL}, "'--out' is empty: give a DIR"},
        {(const char *const[]){"attention", "--out", "", "a", NULL},
         "attograd-translate attention: '--out' is empty: give a DIR"},
        {(const char *const[]){"train", "--lr", "1e400", NULL}, "'--lr 1e400' is out of range"},
        {(const char *const[]){"train", "--dropout", "1.5", NULL},
         "'--dropout 1.5' is out of range"},
        {(const char *const[]){"train", "--lr", "fast", NULL}, "'--lr fast' is not a number"},
        {(const char *const[]){"train", "--optim", "lion", NULL},
         "'--optim lion': expected one of sgd, adam, adamw"},
        {(const char *const[]){"train", "--resume=yes", NULL}, "flag '--resume' takes no value"},
        {(const char *const[]){"train", "--steps", "5", "--epochs", "2", NULL},
         "give --steps or --epochs, not both"},
        {(const char *const[]){"train", "--heads", "3", NULL},
         "--heads 3 does not divide --d-model 128"},
        {(const char *const[]){"train", "--kv-heads", "3", NULL},
         "--kv-heads 3 does not divide --heads 4"},
        {(const char *const[]){"train", "stray", NULL}, "unexpected argument 'stray'"},
        {(const char *const[]){"train", "--train", missing, "--no-valid", "--out", out, NULL},
         "nope.tsv: cannot open: No such file or directory"},
        {(const char *const[]){"train", "--train", bad, "--no-valid", "--out", out, NULL},
         "bad.tsv:3: the line has no tab"},
        {(const char *const[]){"train", "--train", train, "--valid", bad, "--out", out, NULL},
         "bad.tsv:3: the line has no tab"},
        {(const char *const[]){"train", "--train", train, "--no-valid", "--out", out, "--steps",
                               "10", "--warmup", "10", NULL},
         "--warmup 10 must be below the number of steps 10"},
        {(const char *const[]){"train", "--train", train, "--no-valid", "--out", out, "--steps",
                               "10", "--warmup", "2", "--lr", "1e-6", NULL},
         "--lr-min 1e-05 must not exceed --lr 1e-06"},
        {(const char *const[]){"train", "--train", train, "--no-valid", "--out", out, "--resume",
                               NULL},
         "last.npz: no checkpoint to resume from"},
        {(const char *const[]){"train", "--train", train, "--no-valid", "--out", out, "--batch",
                               "64", "--max-memory", "1e-6", "--steps", "20", "--warmup", "5",
                               NULL},
         "GiB, more than --max-memory 0.00 GiB: use a smaller --batch"},
        {(const char *const[]){"eval", "--ckpt", ckpt, NULL}, "give one or more TSV files"},
        {(const char *const[]){"eval", "--ckpt", ckpt, train, NULL}, "last.npz: cannot open"},
        {(const char *const[]){"translate", "--ckpt", missing, "a b", NULL}, "nope.tsv"},
        {(const char *const[]){"translate", "--beam", "0", NULL}, "'--beam 0' is out of range"},
        {(const char *const[]){"translate", "--ckpt", missing, "a b", "caf\xe9", NULL},
         "attograd-translate translate: sentence 2 is not valid UTF-8 (byte 4 is 0xe9)"},
        {(const char *const[]){"attention", "--ckpt", missing, "a \xff", NULL},
         "attograd-translate attention: the sentence is not valid UTF-8 (byte 3 is 0xff)"},
        {(const char *const[]){"vocab", "--ckpt", missing, NULL}, "attograd-translate vocab: "},
        {(const char *const[]){"vocab", "--side", "fr", NULL}, "expected one of both, src, tgt"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        TsRun r = ts_run(dir, cases[i].args, NULL);
        cr_assert_eq(r.code, 2, "case %zu (%s): exit %d, stderr: %s", i, cases[i].message, r.code,
                     r.err);
        cr_assert(strstr(r.err, cases[i].message) != NULL, "case %zu: '%s' lacks '%s'", i, r.err,
                  cases[i].message);
        ts_run_free(&r);
    }
    /* with a checkpoint: a new run refuses to overwrite it; eval reports malformed data */
    const char *make[] = {"train", "--train", train, "--no-valid", "--out",
                          out,     "--steps", "3",   TINY_FLAGS,   NULL};
    TsRun r = ts_run(dir, make, NULL);
    cr_assert_eq(r.code, 0, "%s", r.err);
    ts_run_free(&r);
    const char *again[] = {"train", "--train", train, "--no-valid", "--out",
                           out,     "--steps", "3",   TINY_FLAGS,   NULL};
    r = ts_run(dir, again, NULL);
    cr_assert_eq(r.code, 2);
    cr_assert(strstr(r.err, "exists: continue that run with --resume") != NULL, "%s", r.err);
    ts_run_free(&r);
    const char *ev[] = {"eval", "--ckpt", ckpt, bad, NULL};
    r = ts_run(dir, ev, NULL);
    cr_assert_eq(r.code, 2);
    cr_assert(strstr(r.err, "bad.tsv:3: the line has no tab") != NULL, "%s", r.err);
    ts_run_free(&r);
    /* an output folder that cannot be made is a bad flag (2), found before any work */
    char under[600];
    snprintf(under, sizeof under, "%s/att", train);
    const char *att[] = {"attention", "--ckpt", ckpt, "--out", under, "a b", NULL};
    r = ts_run(dir, att, NULL);
    cr_assert_eq(r.code, 2, "%s", r.err);
    cr_assert(strstr(r.err, "attograd-translate attention: ") && strstr(r.err, "Not a directory"),
              "%s", r.err);
    ts_run_free(&r);
    const char *hd[] = {"heads", "--ckpt", ckpt, "--data", train, "--out", under, NULL};
    r = ts_run(dir, hd, NULL);
    cr_assert_eq(r.code, 2, "%s", r.err);
    cr_assert(strstr(r.err, "attograd-translate heads: ") && strstr(r.err, "Not a directory"), "%s",
              r.err);
    ts_run_free(&r);
    /* a damaged checkpoint */
    char broken[512];
    ts_write_text(ts_join(broken, dir, "broken.npz"), "PK\003\004 not really");
    const char *tb[] = {"translate", "--ckpt", broken, "a", NULL};
    r = ts_run(dir, tb, NULL);
    cr_assert_eq(r.code, 2);
    cr_assert(strstr(r.err, "broken.npz") != NULL, "%s", r.err);
    ts_run_free(&r);
    ts_rm_tree(dir);
}

/* The first experiment as typed: a short run needs no --warmup (its default scales with
 * --steps: min(300, steps / 5)), and --data DIR finds train.tsv and valid.tsv there. */
Test(tr_cli, a_short_run_works_without_other_flags) {
    char dir[64], data[512], path[512], out[512];
    ts_tmp_dir(dir, sizeof dir, "translate");
    ts_join(data, dir, "data");
    cr_assert_eq(run_make_dirs(data), AG_OK);
    /* few short pairs: the default model's 100 steps take a second or two */
    ts_write_copy_task(ts_join(path, data, "train.tsv"), 12, 0, 71, 2, 3, 6);
    ts_write_copy_task(ts_join(path, data, "valid.tsv"), 4, 0, 72, 2, 3, 6);
    ts_join(out, dir, "run");
    setenv("OMP_NUM_THREADS", "1", 1); /* the suite runs two tests side by side */
    const char *args[] = {"train", "--steps", "100", "--data", data, "--out", out, NULL};
    TsRun r = ts_run(dir, args, NULL);
    cr_assert_eq(r.code, 0, "exit %d: %s", r.code, r.err);
    cr_assert(strstr(r.out, "done: step 100"), "%s", r.out);
    ts_run_free(&r);
    cr_assert_eq(ckpt_step(ts_join(path, out, "best.npz")), 100);
    /* the warmup it chose is stored with the optimizer: 100 / 5 */
    Seq2SeqConfig mc = {0};
    OptimConfig oc;
    int has_optim = 0;
    CkptConfig kc = tr_model_config(&mc);
    NpzFile *f;
    cr_assert_eq(ckpt_read(path, &kc, &f), AG_OK, "%s", ag_last_error());
    cr_assert_eq(ckpt_optim_config(f, &oc, &has_optim), AG_OK, "%s", ag_last_error());
    npz_free(f);
    cr_assert(has_optim);
    cr_assert_eq(oc.schedule.warmup, 20, "warmup %lld", (long long)oc.schedule.warmup);
    ts_rm_tree(dir);
}

Test(tr_cli, help_eval_and_translate) {
    char dir[64], train[512], out[512], ckpt[512];
    ts_tmp_dir(dir, sizeof dir, "translate");
    const char *help[] = {"--help", NULL};
    TsRun r = ts_run(dir, help, NULL);
    cr_assert_eq(r.code, 0);
    cr_assert(strstr(r.out, "train") && strstr(r.out, "eval") && strstr(r.out, "translate") &&
              strstr(r.out, "vocab"));
    ts_run_free(&r);
    const char *version[] = {"--version", NULL};
    r = ts_run(dir, version, NULL);
    cr_assert_eq(r.code, 0);
    cr_assert_str_eq(r.out, "attograd-translate " ATTOGRAD_VERSION "\n");
    ts_run_free(&r);
    /* every command reads by default what `make demo` (and train's default --out) writes */
    const char *const defaults[][3] = {{"translate", "--help", NULL},
                                       {"eval", "--help", NULL},
                                       {"attention", "--help", NULL},
                                       {"heads", "--help", NULL},
                                       {"vocab", "--help", NULL}};
    for (int i = 0; i < 5; i++) {
        r = ts_run(dir, defaults[i], NULL);
        cr_assert(strstr(r.out, "--ckpt PATH") && strstr(r.out, "(build/demo/best.npz)"), "%s",
                  r.out);
        ts_run_free(&r);
    }
    const char *train_help[] = {"train", "--help", NULL};
    r = ts_run(dir, train_help, NULL);
    cr_assert(strstr(r.out, "--out DIR") && strstr(r.out, "(build/demo)"), "%s", r.out);
    cr_assert(strstr(r.out, "warmup steps (default: min(300, steps / 5))"), "%s", r.out);
    ts_run_free(&r);
    const char *const subs[][3] = {{"train", "--help", NULL},
                                   {"eval", "-h", NULL},
                                   {"translate", "--help", NULL},
                                   {"help", "train", NULL}};
    for (int i = 0; i < 4; i++) {
        r = ts_run(dir, subs[i], NULL);
        cr_assert_eq(r.code, 0);
        cr_assert(strstr(r.out, "usage: attograd-translate ") && strstr(r.out, "--"), "%s", r.out);
        ts_run_free(&r);
    }
    ts_write_copy_task(ts_join(train, dir, "train.tsv"), 40, 0, 61, 2, 6, 6);
    ts_join(out, dir, "run");
    const char *make[] = {"train", "--train", train, "--no-valid", "--out",
                          out,     "--steps", "4",   TINY_FLAGS,   NULL};
    r = ts_run(dir, make, NULL);
    cr_assert_eq(r.code, 0, "%s", r.err);
    ts_run_free(&r);
    ts_join(ckpt, out, "last.npz");
    /* eval prints the three metrics */
    char hyps[512];
    ts_join(hyps, dir, "hyps.tsv");
    const char *ev[] = {"eval", "--ckpt", ckpt, "--hyps", hyps, train, NULL};
    r = ts_run(dir, ev, NULL);
    cr_assert_eq(r.code, 0, "%s", r.err);
    cr_assert(strstr(r.out, "exact match") && strstr(r.out, "token accuracy") &&
                  strstr(r.out, "BLEU-4"),
              "%s", r.out);
    ts_run_free(&r);
    char *h = ts_read_text(hyps, NULL);
    int lines = 0;
    for (char *p = h; (p = strchr(p, '\n')); p++) lines++;
    cr_assert_eq(lines, 40, "one hypothesis line per pair");
    free(h);
    /* translate: arguments, then stdin; unknown words named; long and empty input survive */
    char longline[4096] = "";
    for (int i = 0; i < 100; i++) strcat(longline, "a b ");
    const char *tr_args[] = {"translate", "--ckpt", ckpt, "a b zzz", "", longline, NULL};
    r = ts_run(dir, tr_args, NULL);
    cr_assert_eq(r.code, 0, "%s", r.err);
    cr_assert(strstr(r.err, "attograd-translate translate: sentence 1: 'zzz' is not in the "
                            "vocabulary (read as <unk>)\n") != NULL,
              "%s", r.err);
    cr_assert(strstr(r.err, "attograd-translate translate: the words the model knows") != NULL,
              "%s", r.err);
    cr_assert(strstr(r.err, "attograd-translate translate: sentence 3: 200 words; the model reads "
                            "at most 23") != NULL,
              "%s", r.err);
    lines = 0;
    for (char *p = r.out; (p = strchr(p, '\n')); p++) lines++;
    cr_assert_eq(lines, 3, "one line per sentence: %s", r.out);
    ts_run_free(&r);
    /* stdin: a byte-order mark is dropped, a line that is not UTF-8 is skipped (an empty output
     * line), several sentences on a line are warned of */
    const char *tr_stdin[] = {"translate", "--ckpt", ckpt, "--beam", "3", NULL};
    r = ts_run(dir, tr_stdin,
               "\xef\xbb\xbf"
               "a b c\n\nqqq \xff\xfe\nd e\nA b . c d .\n");
    cr_assert_eq(r.code, 0, "%s", r.err);
    lines = 0;
    for (char *p = r.out; (p = strchr(p, '\n')); p++) lines++;
    cr_assert_eq(lines, 5, "one line per input line: %s", r.out);
    cr_assert(strstr(r.out, "\n\n\n"), "lines 2 and 3 are empty: %s", r.out);
    cr_assert(!strstr(r.err, "line 1:"), "the mark is no part of the first word: %s", r.err);
    cr_assert(strstr(r.err, "attograd-translate translate: line 3: not valid UTF-8 (byte 5 is "
                            "0xff): skipped\n"),
              "%s", r.err);
    cr_assert(!strstr(r.err, "qqq"), "a skipped line is not tokenized: %s", r.err);
    cr_assert(strstr(r.err, "attograd-translate translate: line 5: 'A' is not in the vocabulary; "
                            "'a' is (read as <unk>)\n"),
              "%s", r.err);
    cr_assert(strstr(r.err, "attograd-translate translate: line 5 holds 2 sentences;"), "%s",
              r.err);
    ts_run_free(&r);
    /* a byte-order mark in front of an argument too */
    const char *tr_bom[] = {"translate", "--ckpt", ckpt,
                            "\xef\xbb\xbf"
                            "a b",
                            NULL};
    r = ts_run(dir, tr_bom, NULL);
    cr_assert_eq(r.code, 0, "%s", r.err);
    cr_assert_str_eq(r.err, "");
    ts_run_free(&r);
    /* vocab lists both sides in id order, or one side's words alone */
    const char *vocab[] = {"vocab", "--ckpt", ckpt, NULL};
    r = ts_run(dir, vocab, NULL);
    cr_assert_eq(r.code, 0, "%s", r.err);
    cr_assert(strncmp(r.out, "source: 6 words\n  ", 18) == 0 &&
                  strstr(r.out, "\ntarget: 6 words\n"),
              "%s", r.out);
    ts_run_free(&r);
    const char *vocab_src[] = {"vocab", "--ckpt", ckpt, "--side", "src", NULL};
    r = ts_run(dir, vocab_src, NULL);
    cr_assert_eq(r.code, 0, "%s", r.err);
    Translator tr;
    cr_assert_eq(tr_load(&tr, ckpt), AG_OK);
    char want[64] = "";
    for (int i = TXT_N_SPECIAL; i < tr.src.n; i++)
        strcat(strcat(want, txt_vocab_word(&tr.src, i)), "\n");
    cr_assert_str_eq(r.out, want);
    tr_free(&tr);
    ts_run_free(&r);
    ts_rm_tree(dir);
}
