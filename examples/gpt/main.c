/* main.c: attograd-gpt's entry: the subcommand, and the flag parser every command uses (a table
 * of flags with their types and ranges; a bad flag is named with the reason, exit 2).
 * Not here: the commands (prepare.c, train.c, sample.c, lens.c, readout.c). Read next: prepare.c. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "gpt_cli.h"

GpFlag *gp_flag(GpFlag *flags, int n, const char *name) {
    for (int i = 0; i < n; i++)
        if (strcmp(flags[i].name, name) == 0) return &flags[i];
    AG_CHECK(0, "gp_flag: no flag --%s", name);
    return NULL;
}

static int set_value(GpFlag *f, const char *v) {
    char *end;
    errno = 0;
    if (f->type == GP_STRING) {
        if (!*v && f->lo == 0) return ag_fail(AG_ERR_ARG, "--%s: empty", f->name);
        *(const char **)f->value = v;
        return AG_OK;
    }
    double x = strtod(v, &end);
    if (!*v || *end || errno == ERANGE || !isfinite(x))
        return ag_fail(AG_ERR_ARG, "--%s %s: not a number", f->name, v);
    if (f->type != GP_DOUBLE && x != floor(x))
        return ag_fail(AG_ERR_ARG, "--%s %s: not an integer", f->name, v);
    if (!(x >= f->lo && x <= f->hi))
        return ag_fail(AG_ERR_ARG, "--%s %s: must be in [%.10g, %.10g]", f->name, v, f->lo, f->hi);
    if (f->type == GP_INT) *(int *)f->value = (int)x;
    if (f->type == GP_I64) *(int64_t *)f->value = (int64_t)x;
    if (f->type == GP_DOUBLE) *(double *)f->value = x;
    return AG_OK;
}

int gp_parse(int argc, char **argv, int first, GpFlag *flags, int n, int *help) {
    *help = 0;
    for (int i = first; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            *help = 1;
            return AG_OK;
        }
        if (strncmp(a, "--", 2) != 0)
            return ag_fail(AG_ERR_ARG, "%s: unexpected argument (flags start with --)", a);
        const char *eq = strchr(a + 2, '=');
        size_t len = eq ? (size_t)(eq - a - 2) : strlen(a + 2);
        GpFlag *f = NULL;
        for (int k = 0; k < n && !f; k++)
            if (strlen(flags[k].name) == len && strncmp(flags[k].name, a + 2, len) == 0)
                f = &flags[k];
        if (!f) return ag_fail(AG_ERR_ARG, "--%.*s: unknown flag (see --help)", (int)len, a + 2);
        if (f->given) return ag_fail(AG_ERR_ARG, "--%s: given twice", f->name);
        f->given = 1;
        if (f->type == GP_BOOL) {
            if (eq) return ag_fail(AG_ERR_ARG, "--%s takes no value", f->name);
            *(int *)f->value = 1;
            continue;
        }
        const char *v = eq ? eq + 1 : (i + 1 < argc ? argv[++i] : NULL);
        if (!v) return ag_fail(AG_ERR_ARG, "--%s: needs a value", f->name);
        int rc = set_value(f, v);
        if (rc != AG_OK) return rc;
    }
    return AG_OK;
}

void gp_usage(const char *cmd, const char *what, const GpFlag *flags, int n) {
    printf("usage: " GP_PROG " %s [flags]\n%s\n\nflags:\n", cmd, what);
    for (int i = 0; i < n; i++) {
        const GpFlag *f = &flags[i];
        char def[64] = "";
        if (f->type == GP_INT) snprintf(def, sizeof def, " (%d)", *(int *)f->value);
        if (f->type == GP_I64)
            snprintf(def, sizeof def, " (%lld)", (long long)*(int64_t *)f->value);
        if (f->type == GP_DOUBLE) snprintf(def, sizeof def, " (%g)", *(double *)f->value);
        if (f->type == GP_STRING && *(const char **)f->value)
            snprintf(def, sizeof def, " (%s)", *(const char **)f->value);
        printf("  --%-16s %s%s\n", f->name, f->help, def);
    }
}

static void usage(void) {
    printf("usage: " GP_PROG " COMMAND [flags]   (docs/gpt.md)\n\n"
           "  prepare   a text -> DIR/tokenizer, DIR/train.bin, DIR/valid.bin\n"
           "  train     trains a GPT on a prepared DIR: DIR/last.npz, best.npz, log.csv\n"
           "  sample    continues a prompt (--prompt, or stdin) from a checkpoint\n"
           "  eval      the valid loss and bits per byte of a checkpoint\n"
           "  cache     the activations at hook points (and gradients) -> one .npz (docs/lens.md)\n"
           "  ablate    zero- or mean-ablates each head (or point) in turn: the metric -> .npz, "
           ".png\n"
           "  patch     activation or attribution patching, clean -> corrupted: .npz, .png\n"
           "  detect    previous-token, duplicate-token and induction scores of every head\n"
           "  lens      the logit lens and direct logit attribution to a token: .npz, .png\n"
           "  export    the model in TransformerLens's state-dict layout: .npz + .json\n\n"
           "each command takes --help. Exit codes: 0 done, 1 a failed run (non-finite loss, "
           "write error),\n2 bad input (the path or flag is named), 130/143 interrupted "
           "(checkpoint saved)\n");
}

int main(int argc, char **argv) {
    if (argc < 2) {
        usage();
        return TR_EXIT_USAGE;
    }
    const char *c = argv[1];
    if (strcmp(c, "--help") == 0 || strcmp(c, "-h") == 0 || strcmp(c, "help") == 0) {
        usage();
        return TR_EXIT_OK;
    }
    if (strcmp(c, "prepare") == 0) return gp_prepare(argc, argv);
    if (strcmp(c, "train") == 0) { /* under mpirun: one of the processes (docs/mpi.md) */
        dist_init();
        int code = gp_train(argc, argv);
        dist_finalize();
        return code;
    }
    if (strcmp(c, "sample") == 0) return gp_sample(argc, argv);
    if (strcmp(c, "eval") == 0) return gp_eval(argc, argv);
    if (strcmp(c, "cache") == 0) return gp_cache(argc, argv);
    if (strcmp(c, "ablate") == 0) return gp_ablate(argc, argv);
    if (strcmp(c, "patch") == 0) return gp_patch(argc, argv);
    if (strcmp(c, "detect") == 0) return gp_detect(argc, argv);
    if (strcmp(c, "lens") == 0) return gp_lens(argc, argv);
    if (strcmp(c, "export") == 0) return gp_export(argc, argv);
    fprintf(stderr,
            GP_PROG ": %s: unknown command (prepare, train, sample, eval, cache, ablate, patch, "
                    "detect, lens, export)\n",
            c);
    return TR_EXIT_USAGE;
}
