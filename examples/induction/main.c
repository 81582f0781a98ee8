/* main.c: attograd-induction, the induction-head experiment of `make induction`
 * (docs/induction.md): parses the flags, draws the evaluation batch, trains the 2-layer
 * attention-only model and the 1-layer control on the same data, writes the records and the
 * pictures, and prints the summary: the step where the loss on the predictable positions falls
 * below 1.0, the head with the highest induction score (and the previous-token head that feeds
 * it), and the control's highest induction score. Errors in flags or files exit 2 naming the
 * flag or the path. Read next: model.c. */
#include <stdlib.h>

#include "induction.h"
#include "../common/common.h" /* ex_malloc */

static int bad(const char *flag, const char *value, const char *why) {
    fprintf(stderr, "attograd-induction: %s %s: %s (attograd-induction --help)\n", flag,
            value ? value : "", why);
    return 2;
}

/* The flags into o (its defaults shown by --help): 0, -1 after --help, or 2 (message printed) */
static int parse_args(int argc, char **argv, IndOptions *o) {
    Flag fl[] = {
        {"out", FLAG_PATH, &o->out, "DIR", "output folder", 0, 0, NULL, 0},
        {"steps", FLAG_INT, &o->steps, "N", "training steps", 0, 1000000, NULL, 0},
        {"every", FLAG_INT, &o->every, "N", "record every N steps", 1, 1000000, NULL, 0},
        {"batch", FLAG_INT, &o->batch, "N", "training sequences per step", 1, 4096, NULL, 0},
        {"eval-batch", FLAG_INT, &o->eval_batch, "N", "sequences of the fixed evaluation batch", 1,
         1024, NULL, 0},
        {"lr", FLAG_DOUBLE, &o->lr, "X", "AdamW's learning rate", 0, FLAG_LR_MAX, NULL, 0},
        {"weight-decay", FLAG_DOUBLE, &o->weight_decay, "X", "AdamW's decoupled weight decay", 0,
         FLAG_WD_MAX, NULL, 0},
        {"seed", FLAG_U64, &o->seed, "N", "initialisation and data", 0, 18446744073709551615.0,
         NULL, 0},
        {"vocab", FLAG_INT, &o->vocab, "N", "tokens", 2, 65536, NULL, 0},
        {"block-size|ctx", FLAG_INT, &o->ctx, "N", "context length", 4, 1024, NULL, 0},
        {"d-model", FLAG_INT, &o->d_model, "N", "residual width", 1, 4096, NULL, 0},
        {"heads", FLAG_INT, &o->n_head, "N", "heads per layer", 1, 64, NULL, 0},
        {"min-prefix", FLAG_INT, &o->min_prefix, "N", "shortest repeated prefix", 1, 1024, NULL, 0},
        {"max-prefix", FLAG_INT, &o->max_prefix, "N", "longest repeated prefix", 1, 1024, NULL, 0},
        {"no-control", FLAG_SWITCH, &o->control, NULL, "skip the 1-layer control", 0, 0, NULL, 0},
        {"quiet", FLAG_SWITCH, &o->quiet, NULL, "print the summary only", 1, 0, NULL, 0},
    };
    int n = (int)(sizeof fl / sizeof fl[0]);
    int rc = flag_parse(fl, n, argc - 1, argv + 1, NULL, NULL);
    if (rc == FLAG_HELP) {
        printf("usage: attograd-induction [flags]\n"
               "Trains a 2-layer attention-only transformer (and a 1-layer control) on random\n"
               "prefixes repeated to fill the context, recording the loss on the repeated "
               "positions\nand every head's induction and previous-token scores "
               "(docs/induction.md).\nflags (default) [range]:\n");
        flag_help(stdout, fl, n);
        printf("Writes DIR/induction.npz, curves.csv, heads.csv, positions.csv and, with "
               "gnuplot,\nloss.png, scores.png, patterns_two_layer.png, "
               "patterns_one_layer.png.\n");
        return -1;
    }
    if (rc != AG_OK) {
        fprintf(stderr, "attograd-induction: %s (attograd-induction --help)\n", ag_last_error());
        return 2;
    }
    if (o->d_model % o->n_head)
        return bad("--heads", NULL, "the number of heads must divide --d-model");
    if (o->min_prefix < 2 || o->min_prefix > o->max_prefix)
        return bad("--min-prefix", NULL, "must be at least 2 and at most --max-prefix");
    if (o->max_prefix >= o->ctx)
        return bad("--max-prefix", NULL,
                   "must be shorter than --block-size (the prefix must repeat)");
    return 0;
}

/* The induction score of a perfect induction head on the evaluation batch: all of its
 * attention on the pattern wherever a query's token occurred before (with a next token), and
 * elsewhere for the other queries, which so cap every head's score: the share of such queries. */
static double ideal_induction(const IndOptions *o, const int *eval_tokens) {
    int T = o->ctx;
    uint8_t *D = ex_malloc((size_t)T * T);
    int *ids = ex_malloc((size_t)T * sizeof(int));
    double sum = 0;
    for (int b = 0; b < o->eval_batch; b++) {
        for (int t = 0; t < T; t++) ids[t] = eval_tokens[(size_t)b * (T + 1) + t];
        lens_detection_pattern(LENS_INDUCTION, ids, T, D);
        int rows = 0;
        for (int i = 0; i < T; i++) {
            int any = 0;
            for (int j = 0; j <= i; j++) any |= D[(size_t)i * T + j];
            rows += any;
        }
        sum += (double)rows / T;
    }
    free(D), free(ids);
    return sum / o->eval_batch;
}

static void print_heads(const char *what, const IndRecord *r, const double *s) {
    printf("  %s scores at step %lld:", what, (long long)r->step[r->R - 1]);
    const double *last = s + (size_t)(r->R - 1) * r->n_layer * r->NH;
    for (int k = 0; k < r->n_layer * r->NH; k++)
        printf(" L%dH%d %.2f", k / r->NH, k % r->NH, last[k]);
    printf("\n");
}

int main(int argc, char **argv) {
    IndOptions o = {.out = "build/induction",
                    .steps = 1500,
                    .every = 25,
                    .batch = 32,
                    .eval_batch = 32,
                    .lr = 3e-3,
                    .weight_decay = 0.01,
                    .seed = 1,
                    .vocab = 64,
                    .ctx = 64,
                    .d_model = 64,
                    .n_head = 4,
                    .min_prefix = 8,
                    .max_prefix = 24,
                    .control = 1};
    int rc = parse_args(argc, argv, &o);
    if (rc) return rc < 0 ? 0 : rc;
    if (run_make_dirs(o.out) != AG_OK) {
        fprintf(stderr, "attograd-induction: %s\n", ag_last_error());
        return 2;
    }
    printf("attograd-induction: %s kernels, %d threads; %d steps of batch %d, lr %g, seed %llu\n",
           ag_kernel_family(), ag_threads_use(0), o.steps, o.batch, o.lr,
           (unsigned long long)o.seed);
    /* the evaluation batch: its own stream, the same for both models */
    int *eval_tokens = ex_malloc((size_t)o.eval_batch * (o.ctx + 1) * sizeof(int));
    int *eval_prefix = ex_malloc((size_t)o.eval_batch * sizeof(int));
    Rng er;
    rng_seed(&er, o.seed ^ 0x5eedULL);
    ind_make_batch(&er, &o, o.eval_batch, eval_tokens, eval_prefix);
    IndRecord recs[2];
    int n = 0;
    for (int layers = 2; layers >= (o.control ? 1 : 2); layers--)
        ind_run(&o, layers, eval_tokens, eval_prefix, &recs[n++]);
    rc = ind_write_files(&o, recs, n, eval_tokens, eval_prefix);
    if (rc != AG_OK) {
        fprintf(stderr, "attograd-induction: %s\n", ag_last_error());
        rc = 2;
    } else {
        char drawn[512] = "";
        ind_plot(&o, recs, n, eval_tokens, drawn, sizeof drawn);
        const IndRecord *two = &recs[0];
        int L, H, pl, ph;
        double best = ind_best_head(two, two->induction, &L, &H);
        double prev = ind_best_head(two, two->previous, &pl, &ph);
        int64_t below = ind_first_below(two, 1.0);
        printf("summary (the loss is on the predictable positions of the evaluation batch):\n");
        printf("  2-layer: loss %.2f at step 0 -> %.2f at step %lld (training %.1f s)\n",
               two->loss_pred[0], two->loss_pred[two->R - 1], (long long)two->step[two->R - 1],
               two->seconds);
        if (below >= 0)
            printf("  2-layer: loss below 1.0 first at step %lld\n", (long long)below);
        else
            printf("  2-layer: loss never below 1.0 in %d steps\n", o.steps);
        printf("  2-layer: highest induction score %.2f: layer %d head %d%s\n", best, L, H,
               L == 1 ? "" : " (not in layer 1)");
        printf("  (a perfect induction head would score %.2f on this batch: the share of queries "
               "whose token occurred before)\n",
               ideal_induction(&o, eval_tokens));
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
                   one->loss_pred[one->R - 1], (long long)one->step[one->R - 1], c, ch,
                   one->seconds);
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
        printf("  files: %s/induction.npz, curves.csv, heads.csv, positions.csv%s\n", o.out, drawn);
    }
    for (int i = 0; i < n; i++) ind_record_free(&recs[i]);
    free(eval_tokens), free(eval_prefix);
    return rc;
}
