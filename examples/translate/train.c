/* train.c: the trainer's loop. Each step takes a length-bucketed batch, the loss, backward,
 * clipping and an Adam step (train_step: the whole step in one screen); after it come a CSV row
 * every log_every steps, validation (loss and greedy exact match) every valid_every steps, and
 * the latest and best checkpoints. SIGINT and SIGTERM set a flag checked between steps: the run
 * saves and stops. A non-finite loss or gradient stops the run naming the step (and, in check
 * mode, the op), keeping the last good checkpoint. A failed write (a full disk, a read-only
 * folder) stops it naming the file; checkpoints are written atomically and the log is synced
 * before each save and cut back to the checkpoint's step on resume, so no fault loses a
 * checkpoint or a logged row (README, "Faults"). Resuming is bit-exact: the checkpoint holds the
 * weights, Adam's state and step, the dropout RNG and the loader's position, and an epoch's
 * batches are a pure function of (seed, epoch). --shards S (or mpirun -np P): each batch is S
 * micro-shards whose gradients are summed in a fixed tree (src/dist/dist.h, tr_shard_loss), the
 * same bits for any P; process 0 alone writes files (docs/mpi.md).
 * Not here: starting and resuming a run, checkpoints (train_setup.c), the log and messages
 * (train_log.c), signals and memory figures (train_system.c), decoding and metrics (decode.c),
 * flags (cli.c). Read next: trainer.h, then train_setup.c. */
#include <float.h>
#include <math.h>

#include "trainer.h"

/* The loss of a shard is its mean over its target tokens times their share of the batch's:
 * the batch's loss is the mean over all its non-padding tokens (nn_seq2seq_loss), so the
 * normalizer is the whole batch's token count, whichever process holds the shard. */
Tensor *tr_shard_loss(Seq2Seq *m, Tape *t, const TrData *d, const TrBatch *b, int i, int S,
                      TrBatch *sb, Rng *rng) {
    AG_CHECK(S >= 1 && i >= 0 && i < S && b->B >= 1,
             "tr_shard_loss: shard %d of %d of a batch of %d rows", i, S, b->B);
    int r0 = (int)((int64_t)i * b->B / S), r1 = (int)((int64_t)(i + 1) * b->B / S);
    if (r1 == r0) return NULL;
    tr_batch_make(sb, d, b->rows + r0, r1 - r0);
    Tensor *l = nn_seq2seq_loss(t, m, sb->src, sb->S, sb->tgt_in, sb->tgt_out, sb->B, sb->T, rng);
    return ag_scale(t, l, (double)sb->n_tgt_tokens / (double)b->n_tgt_tokens);
}

/* dist_grad_step's callback: shard i of this step's batch, its own dropout RNG: the same
 * numbers whichever process computes it. */
static Tensor *shard_loss(void *ctx, Tape *t, int i) {
    Trainer *tr = ctx;
    Rng r;
    rng_seed(&r, rng_hash(tr->shard_seed, (uint64_t)i));
    return tr_shard_loss(&tr->m, t, &tr->train, &tr->batch, i, tr->shards, &tr->shard, &r);
}

/* Check mode with shards: the tape of the shard where a value went non-finite was reset since
 * (dist_grad_step runs the shards one after another). Run this process's shards again (the
 * weights and the dropout seeds are unchanged) up to the first non-finite value, so that
 * tr_diverged can name its op; the step is abandoned anyway. */
static void retrace_shards(Trainer *tr) {
    if (!tr->tape->check_finite) return;
    for (int i = tr->dist->lo; i < tr->dist->hi; i++) {
        ag_tape_reset(tr->tape);
        ag_params_zero_grad(&tr->m.params);
        Tensor *l = shard_loss(tr, tr->tape, i);
        if (!l) continue;
        if (ag_first_nonfinite(tr->tape)) return;
        ag_backward(tr->tape, l);
        if (ag_first_nonfinite(tr->tape)) return;
    }
}

/* One training step: the next batch, the loss, backward, clipping, the optimizer's update.
 * Returns NULL, or what was not finite ("the training loss", "the gradient norm"), and then
 * nothing was updated. *loss, *norm: the step's loss and gradient norm (before clipping).
 * With shards (tr->dist), the batch's gradient is the fixed-order sum of the shards'
 * (src/dist), the same in every process. */
static const char *train_step(Trainer *tr, int64_t s, double *loss, double *norm) {
    TrBatch *b = &tr->batch;
    tr_loader_next(&tr->loader, b);
    if (tr->poison && s == tr->cfg->inject_nan) tr->poison->data[0] = (Real)NAN; /* fault tests */
    if (tr->dist) {
        tr->shard_seed = rng_u64(&tr->rng);
        *loss = dist_grad_step(tr->dist, tr->tape, shard_loss, tr);
        if (!isfinite(*loss)) {
            retrace_shards(tr);
            return "the training loss";
        }
    } else {
        ag_tape_reset(tr->tape);
        ag_params_zero_grad(&tr->m.params);
        Tensor *l = nn_seq2seq_loss(tr->tape, &tr->m, b->src, b->S, b->tgt_in, b->tgt_out, b->B,
                                    b->T, &tr->rng);
        *loss = (double)l->data[0];
        if (!isfinite(*loss)) return "the training loss";
        ag_backward(tr->tape, l);
    }
    *norm = optim_clip_grad_norm(&tr->m.params, tr->clip > 0 ? tr->clip : DBL_MAX);
    if (!isfinite(*norm)) {
        if (tr->dist) retrace_shards(tr);
        return "the gradient norm";
    }
    optim_step(tr->opt);
    return NULL;
}

static int params_finite(const Trainer *tr) {
    for (int i = 0; i < tr->m.params.n; i++) {
        const Tensor *p = tr->m.params.items[i];
        for (size_t k = 0; k < p->size; k++)
            if (!isfinite((double)p->data[k])) return 0;
    }
    return 1;
}

/* Validation: loss and greedy exact match on valid; best.npz when it is the best so far.
 * Returns 1, 0 if interrupted, -1 if best.npz could not be written. */
static int validate(Trainer *tr, double *vloss, double *vexact) {
    TrScore sc;
    int done =
        tr_evaluate(&tr->m, tr->tape, &tr->valid, tr->valid_max, tr->loader.batch_size, &sc, vloss,
                    NULL, &tr->src, &tr->tgt, tr->cfg->handle_signals ? ex_stop_any : NULL);
    if (!done) return 0;
    /* values that overflowed although the weights are finite (params_finite): the loss is
     * logged as it came out (NaN) and training goes on, as the step's own checks decide */
    *vexact = tr_score_exact(&sc);
    int64_t *p = tr->pos;
    int better = p[POS_BEST_STEP] == 0 || *vexact > ex_bitsd(p[POS_BEST_EXACT]) ||
                 (*vexact == ex_bitsd(p[POS_BEST_EXACT]) && *vloss < ex_bitsd(p[POS_BEST_LOSS]));
    p[POS_LAST_VALID] = tr->step;
    if (better) {
        p[POS_BEST_STEP] = tr->step;
        p[POS_BEST_EXACT] = ex_dbits(*vexact);
        p[POS_BEST_LOSS] = ex_dbits(*vloss);
    }
    if (tr->cfg->verbose) {
        tr_end_bar(tr);
        printf("valid at step %lld: loss %.4f, exact match %.2f%% (%ld sentences)%s\n",
               (long long)tr->step, *vloss, 100 * *vexact, sc.n_sent,
               better ? ", best so far" : "");
        fflush(stdout);
    }
    if (better && tr_save(tr, tr->best_path) != AG_OK) return -1;
    return 1;
}

/* A validation the previous run could not finish (it was interrupted during it): exit code,
 * *interrupted when this one is interrupted too. */
static int finish_validation(Trainer *tr, int *interrupted) {
    double vloss = 0, vexact = 0;
    if (!(tr->cfg->resume && tr->have_valid && tr->step > 0 && tr->pos[POS_LAST_VALID] < tr->step &&
          (tr->step % tr->valid_every == 0 || tr->step == tr->total)))
        return TR_EXIT_OK;
    int v = validate(tr, &vloss, &vexact);
    if (v < 0) return TR_EXIT_FAIL;
    if (v == 0) *interrupted = 1;
    if (v > 0 && tr_log_row(tr, 1, vloss, vexact) != AG_OK) {
        fprintf(stderr, TR_PROG " train: %s\n", ag_last_error());
        dist_abort(TR_EXIT_FAIL);
        return TR_EXIT_FAIL;
    }
    return TR_EXIT_OK;
}

/* After step s: the log's sums, the progress bar, then what is due: validation, a CSV row,
 * last.npz, the memory report. Exit code; *interrupted when validation was. */
static int after_step(Trainer *tr, int64_t s, double l, double norm, int *interrupted) {
    int64_t *p = tr->pos;
    p[POS_IV_LOSS] = ex_dbits(ex_bitsd(p[POS_IV_LOSS]) + l);
    p[POS_IV_NORM] = ex_dbits(ex_bitsd(p[POS_IV_NORM]) + norm);
    p[POS_IV_STEPS]++;
    p[POS_IV_TOKENS] += tr->batch.n_tgt_tokens;
    tr_progress(tr, l, 0);
    int save_every = tr->save_every > 0 ? tr->save_every : tr->valid_every;
    int valid_due = tr->have_valid && (s % tr->valid_every == 0 || s == tr->total);
    int save_due = s % save_every == 0 || s == tr->total, valid_ok = 0;
    double vloss = 0, vexact = 0;
    if ((valid_due || save_due) && !params_finite(tr)) {
        /* an update overflowed: nothing is saved, the last good checkpoint stays */
        tr_diverged(tr, s, "a weight after the update", NAN, 0);
        return TR_EXIT_FAIL;
    }
    if (valid_due) {
        int v = validate(tr, &vloss, &vexact);
        if (v < 0) {
            tr_write_failed(tr);
            return TR_EXIT_FAIL;
        }
        if (v == 0) {
            *interrupted = 1;
            return TR_EXIT_OK;
        }
        valid_ok = 1;
    }
    if (s % tr->log_every == 0 || valid_due || s == tr->total) {
        if (tr_log_row(tr, valid_ok, vloss, vexact) != AG_OK) {
            fprintf(stderr, TR_PROG " train: %s\n", ag_last_error());
            tr_write_failed(tr);
            dist_abort(TR_EXIT_FAIL); /* process 0's log: the others would wait for it */
            return TR_EXIT_FAIL;
        }
        tr_progress(tr, l, 1);
    }
    if (save_due && tr_save(tr, tr->last_path) != AG_OK) {
        tr_write_failed(tr);
        return TR_EXIT_FAIL;
    }
    return TR_EXIT_OK;
}

/* The end of a run that was interrupted (save and say how to continue) or finished (the
 * summary of a verbose run). */
static int finish(Trainer *tr, int code, int interrupted, double last_loss) {
    if (code == TR_EXIT_OK && interrupted) {
        int sig = run_signal_caught() ? run_signal_caught() : SIGINT;
        if (!params_finite(tr)) {
            tr_diverged(tr, tr->step, "a weight after the update", NAN, 0);
            return TR_EXIT_FAIL;
        }
        if (tr_save(tr, tr->last_path) != AG_OK) return TR_EXIT_FAIL;
        if (dist_rank() == 0)
            fprintf(stderr,
                    TR_PROG " train: interrupted by %s at step %lld: saved %s; continue with "
                            "--resume\n",
                    sig == SIGTERM ? "SIGTERM" : "SIGINT", (long long)tr->step, tr->last_path);
        return sig == SIGTERM ? TR_EXIT_SIGTERM : TR_EXIT_SIGINT;
    }
    if (code == TR_EXIT_OK && tr->cfg->verbose) {
        double spent = run_now_s() - tr->t_start;
        char t[32];
        run_fmt_time(t, sizeof t, spent);
        printf("done: step %lld, last loss %.4f, %s (%.1f steps/s)\n", (long long)tr->step,
               last_loss, t, (double)(tr->step - tr->step_start) / (spent > 0 ? spent : 1));
        if (tr->pos[POS_BEST_STEP] > 0 && ex_file_exists(tr->best_path))
            printf("best: step %lld, valid exact match %.2f%%, loss %.4f -> %s\n",
                   (long long)tr->pos[POS_BEST_STEP], 100 * ex_bitsd(tr->pos[POS_BEST_EXACT]),
                   ex_bitsd(tr->pos[POS_BEST_LOSS]), tr->best_path);
        printf("latest: %s; log: %s\n", tr->last_path, tr->csv_path);
        ex_dist_summary(tr->dist);
    }
    return code;
}

int tr_train(const TrTrainConfig *cfg) {
    Trainer T, *tr = &T;
    TrTrainConfig quiet = *cfg; /* under mpirun, process 0 alone prints (errors aside) */
    quiet.verbose = 0;
    const TrTrainConfig *c = dist_rank() == 0 ? cfg : &quiet;
    int threads = ag_threads_use(c->threads);
    tr_fixed_mmap_threshold();
    int code = tr_trainer_start(tr, c);
    if (code != TR_EXIT_OK) {
        tr_trainer_free(tr);
        return code;
    }
    if (dist_size() > 1) ex_dist_warn_threads(TR_PROG, threads); /* one process: cli.c warns */
    if (c->verbose) tr_log_header(tr, threads);
    if (c->handle_signals) run_signals_catch();
    tr->t_start = tr->t_row = tr->t_bar = run_now_s();
    tr->step_start = tr->step;
    if (!c->resume && tr_save(tr, tr->last_path) != AG_OK) code = TR_EXIT_FAIL;
    int interrupted = 0;
    long rss_first[2] = {-1, -1};
    double last_loss = 0;
    if (code == TR_EXIT_OK) code = finish_validation(tr, &interrupted);
    while (code == TR_EXIT_OK && !interrupted && tr->step < tr->total) {
        if (c->handle_signals && ex_stop_any()) { /* a signal to any process stops all */
            interrupted = 1;
            break;
        }
        int64_t s = tr->step + 1;
        double l = 0, norm = 0;
        const char *what = train_step(tr, s, &l, &norm);
        if (what) {
            tr_diverged(tr, s, what, isfinite(l) ? norm : l, 1);
            code = TR_EXIT_FAIL;
            break;
        }
        tr->step = s;
        last_loss = l;
        code = after_step(tr, s, l, norm, &interrupted);
        if (code == TR_EXIT_OK && !interrupted && c->report_rss > 0 && s == c->report_rss)
            tr_report_rss(tr, rss_first);
    }
    tr_end_bar(tr);
    code = finish(tr, code, interrupted, last_loss);
    if (c->report_rss > 0 && rss_first[0] >= 0) tr_report_rss(tr, rss_first);
    if (tr->csv) ex_train_plot(TR_PROG, tr->csv_path, c->verbose, 1);
    if (tr->dist) dist_any(0); /* no process exits (ending the job) before process 0 saved */
    if (c->handle_signals) run_signals_restore();
    fflush(stdout);
    tr_trainer_free(tr);
    return code;
}
