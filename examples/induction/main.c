/* main.c: attograd-induction, the induction-head experiment of `make induction`
 * (docs/induction.md): parses the flags, draws the evaluation batch, trains the 2-layer
 * attention-only model and the 1-layer control on the same data, writes the records and the
 * pictures, and prints the summary: the step where the loss on the predictable positions falls
 * below 1.0, the head with the highest induction score (and the previous-token head that feeds
 * it), and the control's highest induction score. Errors in flags or files exit 2 naming the
 * flag or the path. Read next: model.c. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "induction.h"
#include "translate.h" /* tr_make_dirs, tr_malloc */

static void usage(FILE *f) {
    fputs("usage: attograd-induction [flags]\n"
          "Trains a 2-layer attention-only transformer (and a 1-layer control) on random\n"
          "prefixes repeated to fill the context, recording the loss on the repeated positions\n"
          "and every head's induction and previous-token scores (docs/induction.md).\n"
          "  --out DIR          output folder (build/induction)\n"
          "  --steps N          training steps (1500)\n"
          "  --every N          record every N steps (25)\n"
          "  --batch N          training sequences per step (32)\n"
          "  --eval-batch N     sequences of the fixed evaluation batch (32)\n"
          "  --lr X             AdamW's learning rate (3e-3)\n"
          "  --weight-decay X   AdamW's decoupled weight decay (0.01)\n"
          "  --seed N           initialisation and data (1)\n"
          "  --vocab N          tokens (64)\n"
          "  --ctx N            context length (64)\n"
          "  --d-model N        residual width (64)\n"
          "  --heads N          heads per layer (4)\n"
          "  --min-prefix N     shortest repeated prefix (8)\n"
          "  --max-prefix N     longest repeated prefix (24)\n"
          "  --no-control       skip the 1-layer control\n"
          "  --quiet            print the summary only\n"
          "Writes DIR/induction.npz, curves.csv, heads.csv, positions.csv and, with gnuplot,\n"
          "loss.png, scores.png, loss_positions.png, patterns_two_layer.png,\n"
          "patterns_one_layer.png.\n",
          f);
}

static int bad(const char *flag, const char *value, const char *why) {
    fprintf(stderr, "attograd-induction: %s %s: %s (attograd-induction --help)\n", flag,
            value ? value : "", why);
    return 2;
}

static int parse_int(const char *flag, const char *v, int lo, int hi, int *out) {
    char *end;
    errno = 0;
    long x = strtol(v, &end, 10);
    if (errno || end == v || *end) return bad(flag, v, "not an integer");
    if (x < lo || x > hi) {
        char why[96];
        snprintf(why, sizeof why, "must be in [%d, %d]", lo, hi);
        return bad(flag, v, why);
    }
    *out = (int)x;
    return 0;
}

static int parse_double(const char *flag, const char *v, double lo, double hi, double *out) {
    char *end;
    errno = 0;
    double x = strtod(v, &end);
    if (errno || end == v || *end || !isfinite(x)) return bad(flag, v, "not a finite number");
    if (x < lo || x > hi) {
        char why[96];
        snprintf(why, sizeof why, "must be in [%g, %g]", lo, hi);
        return bad(flag, v, why);
    }
    *out = x;
    return 0;
}

static int parse_args(int argc, char **argv, IndOptions *o) {
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            return -1;
        }
        if (!strcmp(a, "--no-control")) {
            o->control = 0;
            continue;
        }
        if (!strcmp(a, "--quiet")) {
            o->quiet = 1;
            continue;
        }
        struct {
            const char *name;
            int *i;
            double *d;
            int lo, hi;
            double dlo, dhi;
        } const flags[] = {
            {"--steps", &o->steps, NULL, 0, 1000000, 0, 0},
            {"--every", &o->every, NULL, 1, 1000000, 0, 0},
            {"--batch", &o->batch, NULL, 1, 4096, 0, 0},
            {"--eval-batch", &o->eval_batch, NULL, 1, 1024, 0, 0},
            {"--vocab", &o->vocab, NULL, 2, 65536, 0, 0},
            {"--ctx", &o->ctx, NULL, 4, 1024, 0, 0},
            {"--d-model", &o->d_model, NULL, 1, 4096, 0, 0},
            {"--heads", &o->n_head, NULL, 1, 64, 0, 0},
            {"--min-prefix", &o->min_prefix, NULL, 1, 1024, 0, 0},
            {"--max-prefix", &o->max_prefix, NULL, 1, 1024, 0, 0},
            {"--lr", NULL, &o->lr, 0, 0, 0, 1},
            {"--weight-decay", NULL, &o->weight_decay, 0, 0, 0, 10},
        };
        int k = 0, n = (int)(sizeof flags / sizeof flags[0]);
        if (!strcmp(a, "--out") || !strcmp(a, "--seed"))
            k = -1;
        else
            while (k < n && strcmp(a, flags[k].name)) k++;
        if (k == n) return bad(a, NULL, "unknown flag");
        if (i + 1 >= argc) return bad(a, NULL, "needs a value");
        const char *v = argv[++i];
        if (!strcmp(a, "--out")) {
            if (!*v) return bad(a, v, "an empty path");
            o->out = v;
        } else if (!strcmp(a, "--seed")) {
            char *end;
            errno = 0;
            unsigned long long s = strtoull(v, &end, 10);
            if (errno || end == v || *end || *v == '-') return bad(a, v, "not a seed (0 or more)");
            o->seed = s;
        } else if (flags[k].i) {
            if (parse_int(a, v, flags[k].lo, flags[k].hi, flags[k].i)) return 2;
        } else if (parse_double(a, v, flags[k].dlo, flags[k].dhi, flags[k].d))
            return 2;
    }
    if (o->d_model % o->n_head)
        return bad("--heads", NULL, "the number of heads must divide --d-model");
    if (o->min_prefix < 2 || o->min_prefix > o->max_prefix)
        return bad("--min-prefix", NULL, "must be at least 2 and at most --max-prefix");
    if (o->max_prefix >= o->ctx)
        return bad("--max-prefix", NULL, "must be shorter than --ctx (the prefix must repeat)");
    return 0;
}

/* The induction score of a perfect induction head on the evaluation batch: all of its
 * attention on the pattern wherever a query's token occurred before (with a next token), and
 * elsewhere for the other queries, which so cap every head's score: the share of such queries. */
static double ideal_induction(const IndOptions *o, const int *eval_tokens) {
    int T = o->ctx;
    uint8_t *D = tr_malloc((size_t)T * T);
    int *ids = tr_malloc((size_t)T * sizeof(int));
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
    if (tr_make_dirs(o.out) != AG_OK) {
        fprintf(stderr, "attograd-induction: %s\n", ag_last_error());
        return 2;
    }
    printf("attograd-induction: %s kernels, %d threads; %d steps of batch %d, lr %g, seed %llu\n",
           ag_kernel_family(), ag_threads_use(0), o.steps, o.batch, o.lr,
           (unsigned long long)o.seed);
    /* the evaluation batch: its own stream, the same for both models */
    int *eval_tokens = tr_malloc((size_t)o.eval_batch * (o.ctx + 1) * sizeof(int));
    int *eval_prefix = tr_malloc((size_t)o.eval_batch * sizeof(int));
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
        printf("  files: %s/induction.npz, curves.csv, heads.csv, positions.csv%s\n", o.out,
               drawn);
    }
    for (int i = 0; i < n; i++) ind_record_free(&recs[i]);
    free(eval_tokens), free(eval_prefix);
    return rc;
}
