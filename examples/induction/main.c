/* main.c: attograd-induction, the induction-head experiment of `make induction`
 * (docs/induction.md): trains the 2-layer attention-only model and then the 1-layer control
 * on the same data, each a run of the library's loop (train.c: OUT/two_layer/, OUT/one_layer/;
 * `--out DIR --resume` continues both), writes the records, the page induction.html and the pictures, and prints the summary: the step where the loss on the predictable positions falls
 * below 1.0, the head with the highest induction score (and the previous-token head that feeds
 * it), and the control's highest induction score. Errors in flags or files exit 2 naming the
 * flag or the path. Read next: model.c. */
#include <stdlib.h>
#include <string.h>

#include "induction.h"
#include "../common/common.h" /* ex_calloc */

#define PROG "attograd-induction"

static void print_heads(const char *what, const IndRecord *r, const double *s) {
    printf("  %s scores at step %lld:", what, (long long)r->step[r->R - 1]);
    const double *last = s + (size_t)(r->R - 1) * r->n_layer * r->NH;
    for (int k = 0; k < r->n_layer * r->NH; k++)
        printf(" L%dH%d %.2f", k / r->NH, k % r->NH, last[k]);
    printf("\n");
}

/* The files, the pictures and the summary of the runs' records; 0 or 2 (a file not written) */
static int report(const IndRun *runs, int n) {
    const IndOptions *o = &runs[0].o;
    IndRecord recs[2];
    for (int i = 0; i < n; i++) recs[i] = runs[i].rec;
    char drawn[512] = "";
    if (ind_write_files(o, recs, n, runs[0].eval_tokens, runs[0].eval_prefix) != AG_OK ||
        ind_plot(o, recs, n, drawn, sizeof drawn) != AG_OK) {
        fprintf(stderr, PROG ": %s\n", ag_last_error());
        return RUN_EXIT_USAGE;
    }
    const IndRecord *two = &recs[0];
    int L, H, pl, ph;
    double best = ind_best_head(two, two->induction, &L, &H);
    double prev = ind_best_head(two, two->previous, &pl, &ph);
    int64_t below = run_first_step(two->step, two->loss_pred, two->R, 1.0, 0);
    printf("summary (the loss is on the predictable positions of the evaluation batch):\n");
    printf("  2-layer: loss %.2f at step 0 -> %.2f at step %lld (training %.1f s)\n",
           two->loss_pred[0], two->loss_pred[two->R - 1], (long long)two->step[two->R - 1],
           two->seconds);
    if (below >= 0)
        printf("  2-layer: loss below 1.0 first at step %lld\n", (long long)below);
    else
        printf("  2-layer: loss never below 1.0 in %d steps\n", o->steps);
    printf("  2-layer: highest induction score %.2f: layer %d head %d%s\n", best, L, H,
           L == 1 ? "" : " (not in layer 1)");
    printf("  (a perfect induction head would score %.2f on this batch: the share of queries "
           "whose token occurred before)\n",
           lens_detect_ceiling(LENS_INDUCTION, runs[0].eidx, o->eval_batch, o->ctx));
    printf("  2-layer: highest previous-token score %.2f: layer %d head %d\n", prev, pl, ph);
    print_heads("induction", two, two->induction);
    print_heads("previous-token", two, two->previous);
    double c = -1;
    if (n > 1) {
        const IndRecord *one = &recs[1];
        int cl, ch;
        c = ind_best_head(one, one->induction, &cl, &ch);
        printf("  1-layer control: loss %.2f at step %lld; highest induction score %.2f "
               "(layer 0 head %d) (training %.1f s)\n",
               one->loss_pred[one->R - 1], (long long)one->step[one->R - 1], c, ch, one->seconds);
    }
    /* the experiment's three conditions (docs/induction.md) */
    int shown = below >= 0 && L == two->n_layer - 1 && (n < 2 || c < 0.3);
    printf("  phase change %s: loss below 1.0 %s; best induction head %s the last layer; "
           "control's best induction score %s\n",
           shown ? "shown" : "NOT shown", below >= 0 ? "reached" : "not reached",
           L == two->n_layer - 1 ? "in" : "not in",
           n < 2     ? "not run"
           : c < 0.3 ? "below 0.3"
                     : "0.3 or more");
    printf("  files: %s/induction.npz, curves.csv, heads.csv, positions.csv%s\n", o->out, drawn);
    return RUN_EXIT_OK;
}

int main(int argc, char **argv) {
    dist_init();
    int help = flag_help_asked(argc - 1, argv + 1), eval = argc > 1 && strcmp(argv[1], "eval") == 0;
    if (help)
        printf("Trains a 2-layer attention-only transformer (and a 1-layer control) on random\n"
               "prefixes repeated to fill the context, recording the loss on the repeated "
               "positions\nand every head's induction and previous-token scores "
               "(docs/induction.md). Each model\nis a run of the library's loop in "
               "DIR/two_layer/ and DIR/one_layer/ (--resume continues both).\n");
    IndRun *runs = ex_calloc(2, sizeof *runs);
    ind_run_init(&runs[0], "two_layer", 2, NULL);
    int rc = ind_run_main(&runs[0], argc, argv), n = 1;
    if (help) {
        printf("Writes DIR/induction.npz, curves.csv, heads.csv, positions.csv, induction.html "
               "(the\ncurves in a browser, offline) and, with gnuplot, loss.png, scores.png,\n"
               "loss_positions.png, patterns_two_layer.png, patterns_one_layer.png.\n");
    } else if (rc == RUN_EXIT_OK && runs[0].o.control) {
        ind_run_init(&runs[1], "one_layer", 1, &runs[0]);
        runs[1].fresh_if_missing = 1;
        rc = ind_run_main(&runs[1], argc, argv), n = 2;
    }
    const IndOptions *o = &runs[0].o;
    size_t ntok = (size_t)o->eval_batch * (o->ctx + 1);
    for (int i = 0; i < n && rc == RUN_EXIT_OK && !help && !eval; i++)
        if (runs[i].rec.R == 0 || runs[i].rec.step[0] != 0 ||
            memcmp(&runs[i].o, o, sizeof *o) != 0 ||
            memcmp(runs[i].eval_tokens, runs[0].eval_tokens, ntok * sizeof(int)) != 0) {
            fprintf(stderr, PROG ": %s/last.npz: %s (start the experiment again with --force)\n",
                    runs[i].out,
                    runs[i].rec.R == 0 || runs[i].rec.step[0] != 0
                        ? "holds no records from step 0"
                        : "another experiment's flags than two_layer/last.npz's");
            rc = RUN_EXIT_USAGE;
        }
    if (rc == RUN_EXIT_OK && !help && !eval && dist_rank() == 0) rc = report(runs, n);
    for (int i = 0; i < 2; i++)
        if (runs[i].r) ind_run_free(&runs[i]);
    free(runs);
    dist_finalize();
    return rc;
}
