/* train_log.c: what a run writes while it trains: the CSV log (one row every log_every steps,
 * cut back to the checkpoint's step on resume), the progress bar on a terminal, the header of a
 * verbose run, and the messages of a run that stopped (a non-finite value, a failed write).
 * Not here: the loop (train.c), the checkpoints (train_setup.c). Read next: cli.c (the
 * subcommands and their flags). */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <unistd.h>

#include "trainer.h"

static const char csv_header[] =
    "step,epoch,train_loss,lr,grad_norm,tokens_per_s,valid_loss,valid_exact\n";

/* A fresh log, or on resume the rows up to the checkpoint's step (run_csv_open, util.c). */
int tr_log_open(Trainer *tr, int resume) {
    return run_csv_open(tr->csv_path, csv_header, tr->step, resume, &tr->csv);
}

static double epoch_of(const Trainer *tr) {
    return (double)tr->loader.epoch + (double)tr->loader.cursor / tr->loader.n_batches;
}

/* One CSV row for the steps since the last one (and, if valid, the validation). A failed
 * write (a full disk) is AG_ERR_IO naming the log: the run stops there. */
int tr_log_row(Trainer *tr, int valid, double vloss, double vexact) {
    int64_t *p = tr->pos;
    double n = p[POS_IV_STEPS] > 0 ? (double)p[POS_IV_STEPS] : 1, t = run_now_s();
    double loss = ex_bitsd(p[POS_IV_LOSS]) / n, norm = ex_bitsd(p[POS_IV_NORM]) / n;
    double tps = t > tr->t_row ? (double)p[POS_IV_TOKENS] / (t - tr->t_row) : 0;
    if (!tr->csv) goto done; /* not process 0 */
    fprintf(tr->csv, "%lld,%.4f,%.6f,%.6e,%.6f,%.0f,", (long long)tr->step, epoch_of(tr), loss,
            tr->opt->last_lr, norm, tps);
    if (valid)
        fprintf(tr->csv, "%.6f,%.6f\n", vloss, vexact);
    else
        fputs(",\n", tr->csv);
    if (fflush(tr->csv) != 0 || ferror(tr->csv))
        return ag_fail(AG_ERR_IO, "%s: cannot write the log: %s", tr->csv_path,
                       strerror(errno ? errno : EIO));
    if (tr->cfg->verbose && !tr->tty) {
        char eta[32];
        double spent = t - tr->t_start, per = spent / (double)(tr->step - tr->step_start);
        run_fmt_time(eta, sizeof eta, per * (double)(tr->total - tr->step));
        printf("step %lld/%lld  epoch %.2f  loss %.4f  lr %.2e  grad %.3f  %.0f tok/s  eta %s\n",
               (long long)tr->step, (long long)tr->total, epoch_of(tr), loss, tr->opt->last_lr,
               norm, tps, eta);
        fflush(stdout);
    }
done:
    tr->last_tps = tps;
    p[POS_IV_LOSS] = ex_dbits(0);
    p[POS_IV_NORM] = ex_dbits(0);
    p[POS_IV_STEPS] = p[POS_IV_TOKENS] = 0;
    tr->t_row = t;
    if (valid && tr->csv) { /* redraw loss.png (plot.c), outside the next row's tokens/s */
        ex_train_plot(TR_PROG, tr->csv_path, tr->cfg->verbose, 0);
        tr->t_row = run_now_s();
    }
    return AG_OK;
}

/* The progress bar (a terminal only), at most 10 times a second. */
void tr_progress(Trainer *tr, double loss, int force) {
    if (!tr->cfg->verbose || !tr->tty) return;
    double t = run_now_s();
    if (!force && t - tr->t_bar < 0.1) return;
    tr->t_bar = t;
    double frac = (double)tr->step / (double)tr->total, spent = t - tr->t_start;
    double per = spent / (double)(tr->step - tr->step_start);
    char bar[21], eta[32];
    for (int i = 0; i < 20; i++) bar[i] = i < (int)(frac * 20) ? '#' : '.';
    bar[20] = '\0';
    run_fmt_time(eta, sizeof eta, per * (double)(tr->total - tr->step));
    double n = tr->pos[POS_IV_STEPS] ? (double)tr->pos[POS_IV_STEPS] : 1;
    double tps = tr->pos[POS_IV_STEPS] && t > tr->t_row
                     ? (double)tr->pos[POS_IV_TOKENS] / (t - tr->t_row)
                     : tr->last_tps;
    if (tr->pos[POS_IV_STEPS]) loss = ex_bitsd(tr->pos[POS_IV_LOSS]) / n;
    printf("\r[%s] step %lld/%lld  epoch %.2f  loss %.4f  lr %.2e  %.0f tok/s  ETA %s\033[K", bar,
           (long long)tr->step, (long long)tr->total, epoch_of(tr), loss, tr->opt->last_lr, tps,
           eta);
    fflush(stdout);
}

void tr_end_bar(Trainer *tr) {
    if (tr->cfg->verbose && tr->tty) {
        printf("\n");
        fflush(stdout);
    }
}

/* The message of a run that went non-finite at step s. from_tape: the loss or a gradient,
 * which check mode traces to an op (else the optimizer's update overflowed a weight). */
void tr_diverged(Trainer *tr, int64_t s, const char *what, double value, int from_tape) {
    if (dist_rank() != 0) return; /* every process stopped at the same step: one message */
    const char *v = isnan(value) ? "nan" : value > 0 ? "inf" : "-inf";
    tr_end_bar(tr);
    fprintf(stderr, TR_PROG " train: step %lld: %s is %s: training stopped. ", (long long)s, what,
            v);
    fprintf(stderr, "The last good checkpoint is %s (step %lld)\n", tr->last_path,
            (long long)tr->saved_step);
    const AgNonFinite *r = ag_first_nonfinite(tr->tape);
    if (!from_tape)
        fprintf(stderr, "the loss and gradients were finite: the optimizer's update overflowed "
                        "(try a smaller --lr, or --clip)\n");
    else if (r)
        fprintf(stderr, "the first non-finite value: %s\n", ag_nonfinite_message(r));
    else if (!tr->tape->check_finite)
        fprintf(stderr, "(run with --check-finite, or AG_CHECK_FINITE=1, to name the op where it "
                        "first appeared)\n");
}

/* After a failed write (the message is printed): what is still safe on disk. */
void tr_write_failed(Trainer *tr) {
    tr_end_bar(tr);
    fprintf(stderr,
            "training stopped at step %lld; the last good checkpoint is %s (step %lld), "
            "unchanged\n",
            (long long)tr->step, tr->last_path, (long long)tr->saved_step);
}

/* What a verbose run says before its first step. */
void tr_log_header(const Trainer *tr, int threads) {
    const TrTrainConfig *c = tr->cfg;
    const Seq2SeqConfig *m = &tr->m.cfg;
    printf("kernels: %s, %d threads (%s)\n", ag_kernel_family(), threads, ag_threads_wait());
    if (c->resume)
        printf("resuming %s at step %lld (the model, optimizer, batch size and seed are the "
               "checkpoint's)\n",
               tr->last_path, (long long)tr->step);
    printf("model: d_model %d, %d heads (%d key/value), %d+%d layers, ff %d, dropout %g, "
           "%s; %zu parameters\n",
           m->layer.d_model, m->layer.n_heads, m->layer.n_kv_heads, m->n_enc_layers,
           m->n_dec_layers, m->layer.d_ff, m->layer.dropout, m->layer.pre_ln ? "pre-LN" : "post-LN",
           ag_params_count(&tr->m.params));
    printf("data: %d training pairs (%d batches of %d an epoch), %d valid pairs; "
           "vocabularies %d source, %d target words\n",
           tr->train.n, tr->loader.n_batches, tr->loader.batch_size,
           tr->have_valid ? tr->valid.n : 0, tr->src.n, tr->tgt.n);
    ex_dist_line(tr->dist, tr->loader.batch_size, "pairs");
    printf("training to step %lld; writing %s, %s and %s\n", (long long)tr->total, tr->last_path,
           tr->best_path, tr->csv_path);
    fflush(stdout);
}
