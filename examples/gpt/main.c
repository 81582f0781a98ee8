/* main.c: attograd-gpt's entry: the subcommand (each command reads its table of flags with
 * src/flag's flag_parse_cmd; a bad flag is named with the reason, exit 2).
 * Not here: the commands (prepare.c, train.c, sample.c, lens.c, readout.c). Read next: prepare.c. */
#include <string.h>

#include "gpt_cli.h"

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
           "  export    the model in TransformerLens's state-dict layout: .npz + .json\n"
           "  view      one offline HTML page: attention, tokens, runs (docs/view.md)\n\n"
           "each command takes --help. Exit codes: 0 done, 1 a failed run (non-finite loss, "
           "write error),\n2 bad input (the path or flag is named), 130/143 interrupted "
           "(checkpoint saved)\n");
}

int main(int argc, char **argv) {
    if (argc < 2) {
        usage();
        return RUN_EXIT_USAGE;
    }
    const char *c = argv[1];
    if (strcmp(c, "--help") == 0 || strcmp(c, "-h") == 0 || strcmp(c, "help") == 0) {
        usage();
        return RUN_EXIT_OK;
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
    if (strcmp(c, "view") == 0) return gp_view(argc, argv); /* view.c */
    fprintf(stderr,
            GP_PROG ": %s: unknown command (prepare, train, sample, eval, cache, ablate, patch, "
                    "detect, lens, export, view)\n",
            c);
    return RUN_EXIT_USAGE;
}
