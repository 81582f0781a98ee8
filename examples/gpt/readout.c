/* readout.c: `attograd-gpt detect`, `lens` and `export`: what a checkpoint's heads and layers
 * write, read off the model. detect scores every head as a previous-token, duplicate-token and
 * induction head (src/lens/detect.h) on prompts or on repeated random tokens; lens runs the
 * logit lens and direct logit attribution (src/lens/logit.h) to a token or a logit difference;
 * export writes the model in TransformerLens's state-dict layout (src/lens/export.h). Each
 * writes an .npz (detect and lens also a heatmap PNG where gnuplot is installed) and prints a
 * table. docs/lens.md is the user's guide.
 * Not here: the flags, rows and start they share (lens.c); the commands' runs, detect's table,
 * the lens's files and heatmaps (src/lens/commands.c, report.c). Read next: docs/lens.md. */
#include <stdlib.h>
#include <string.h>

#include "gpt_cli.h"

/* ---- detect ---- */

int gp_detect(int argc, char **argv) {
    GpLens lc = {.batch = 8, .seed = 1};
    LensCmdArgs a = {0};
    Flag fl[] = {
        FLAG_NUM("repeat", FLAG_INT, &lc.repeat, NULL,
                 "without prompts: rows of this many random tokens repeated (0: half of --length)",
                 0, 1 << 20),
        FLAG_NUM("length", FLAG_INT, &lc.length, NULL, "the generated rows' length (0: block_size)",
                 0, 1 << 20),
        FLAG_NUM("batch", FLAG_INT, &lc.batch, NULL, "generated rows", 1, 4096),
        {"seed", FLAG_I64, &lc.seed, NULL, "the generated tokens' seed", 0, 9007199254740992.0,
         NULL, 0},
        FLAG_SW("exclude-bos", &a.detect.exclude_bos, "leave key 0 out of the attention mass"),
        FLAG_SW("exclude-current", &a.detect.exclude_current_token,
                "leave the query's own key out of the attention mass"),
    };
    LensUsage u = {"detect", "[flags]",
                   "scores every head as a previous-token, duplicate-token and induction head (the "
                   "share of its\nattention on the pattern's positions, TransformerLens's "
                   "detect_head) on the prompt(s), or\nwithout prompts on rows of random tokens "
                   "repeated; writes scores (kind, layer, head)",
                   "the .npz to write (and a .png beside it)"};
    int rc = gp_lens_parse(&lc, &u, GP_LENS_ROWS, fl, 6, argc, argv);
    lc.generate = !lc.a.prompt && !lc.a.prompts; /* the rows: random tokens (gp_lens_program) */
    if (rc == AG_OK && !lc.generate && (fl[0].given || fl[1].given || fl[2].given || fl[3].given))
        rc = ag_fail(AG_ERR_ARG, "--repeat, --length, --batch and --seed make rows: not with "
                                 "--prompt or --prompts");
    return lens_cmd_run(LENS_CMD_DETECT, &lc.p, &lc.c, &lc.f, &a, rc);
}

/* ---- lens ---- */

int gp_lens(int argc, char **argv) {
    LensCmdArgs a = {.token_flag = "token", .pos = -1};
    GpLens lc = {0};
    Flag fl[] = {
        FLAG_ROW("token", FLAG_PATH, &a.token, "TOKEN",
                 "the token whose logit is read (or --good, --bad)"),
        FLAG_NUM("pos", FLAG_INT, &a.pos, NULL, "the position read (-1: the last)", -(1 << 20),
                 1 << 20),
    };
    LensUsage u = {"lens", "[flags]",
                   "the logit lens (the residual stream after the embeddings and after every "
                   "block, through\nthe final norm and the head) and direct logit attribution "
                   "(every head, attention bias,\nMLP and embedding, read with the final norm's "
                   "scale: the parts sum to the logit) of\n--token's logit, or of logit(--good) - "
                   "logit(--bad)",
                   "the .npz to write (and .png, _lens.png beside it)"};
    int rc = gp_lens_parse(&lc, &u, GP_LENS_ROWS | LENS_FLAGS_GOOD_BAD, fl, 2, argc, argv);
    return lens_cmd_run(LENS_CMD_LOGIT, &lc.p, &lc.c, &lc.f, &a, rc);
}

/* ---- export ---- */

int gp_export(int argc, char **argv) {
    const char *ckpt = NULL, *out = NULL, *format = "transformer-lens";
    Flag fl[] = {
        FLAG_ROW("ckpt", FLAG_PATH, &ckpt, NULL, "a checkpoint (train's last.npz or best.npz)"),
        FLAG_ROW("model", FLAG_PATH, &ckpt, "DIR", "a Hugging Face folder instead (docs/hf.md)"),
        FLAG_ROW("format", FLAG_PATH, &format, "NAME",
                 "transformer-lens, or hf (a folder transformers loads)"),
        FLAG_ROW("out", FLAG_PATH, &out, NULL,
                 "the .npz to write (its config: .json beside it); hf: the folder"),
    };
    int rc = flag_parse_cmd(GP_PROG, "export", "[flags]",
                            "writes the model in TransformerLens's HookedTransformer state-dict "
                            "layout (float32 .npz)\nand its HookedTransformerConfig (.json beside "
                            "it); docs/lens.md has the loading code",
                            fl, 4, argc - 2, argv + 2, NULL, NULL);
    if (rc == FLAG_HELP) return RUN_EXIT_OK;
    if (rc == AG_OK && (!ckpt || !out))
        rc = ag_fail(AG_ERR_ARG, "--ckpt FILE (or --model DIR) and --out are required");
    int hf = rc == AG_OK && strcmp(format, "hf") == 0;
    if (rc == AG_OK && !hf && strcmp(format, "transformer-lens") != 0)
        rc = ag_fail(AG_ERR_ARG, "--format %s: transformer-lens or hf", format);
    if (hf) {
        HfModel g = {0};
        rc = hf_model_load(ckpt, &g);
        if (rc == AG_OK && (rc = hf_model_save(&g, out)) == AG_ERR_ARG) rc = gp_refail(rc, ckpt);
        if (rc == AG_OK)
            printf("%s: %s as a Hugging Face folder (config.json, model.safetensors, "
                   "tokenizer.json)\n",
                   out, ckpt);
        hf_model_free(&g);
        return lens_cmd_end(&(LensCmd){.prog = GP_PROG, .name = "export"}, rc);
    }
    HfModel g = {0};
    GptConfig cfg = {0};
    char *json = NULL;
    if (rc == AG_OK) rc = gp_lens_load(&g, ckpt, &cfg);
    if (rc == AG_OK) json = lens_path_swap(out, ".json");
    if (rc == AG_OK && (rc = lens_tl_check(&cfg)) != AG_OK) rc = gp_refail(rc, ckpt);
    if (rc == AG_OK && (rc = lens_tl_export(&g.m, out, json)) == AG_ERR_RANGE)
        rc = ex_not_finite(rc, ckpt, NULL); /* a weight beyond float32's range */
    if (rc == AG_OK)
        printf("%s: %s in TransformerLens's layout (float32); its config: %s\n", out, ckpt, json);
    free(json);
    hf_model_free(&g);
    return lens_cmd_end(&(LensCmd){.prog = GP_PROG, .name = "export"}, rc);
}
