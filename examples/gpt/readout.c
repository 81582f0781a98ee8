/* readout.c: `attograd-gpt detect`, `lens` and `export`: what a checkpoint's heads and layers
 * write, read off the model. detect scores every head as a previous-token, duplicate-token and
 * induction head (src/lens/detect.h) on prompts or on repeated random tokens; lens runs the
 * logit lens and direct logit attribution (src/lens/logit.h) to a token or a logit difference;
 * export writes the model in TransformerLens's state-dict layout (src/lens/export.h). Each
 * writes an .npz (detect and lens also a heatmap PNG where gnuplot is installed) and prints a
 * table. docs/lens.md is the user's guide.
 * Not here: the flags, rows and start they share (lens.c); the lens's files, tables and
 * heatmaps (src/lens/report.c). Read next: docs/lens.md. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "gpt_cli.h"

/* ---- detect ---- */

int gp_detect(int argc, char **argv) {
    int repeat = 0, batch = 8, length = 0, exclude_bos = 0, exclude_current = 0;
    int64_t seed = 1;
    GpLens lc = {0};
    Flag fl[] = {
        FLAG_NUM("repeat", FLAG_INT, &repeat, NULL,
                 "without prompts: rows of this many random tokens repeated (0: half of --length)",
                 0, 1 << 20),
        FLAG_NUM("length", FLAG_INT, &length, NULL, "the generated rows' length (0: block_size)", 0,
                 1 << 20),
        FLAG_NUM("batch", FLAG_INT, &batch, NULL, "generated rows", 1, 4096),
        {"seed", FLAG_I64, &seed, NULL, "the generated tokens' seed", 0, 9007199254740992.0, NULL,
         0},
        FLAG_SW("exclude-bos", &exclude_bos, "leave key 0 out of the attention mass"),
        FLAG_SW("exclude-current", &exclude_current,
                "leave the query's own key out of the attention mass"),
    };
    LensUsage u = {"detect", "[flags]",
                   "scores every head as a previous-token, duplicate-token and induction head (the "
                   "share of its\nattention on the pattern's positions, TransformerLens's "
                   "detect_head) on the prompt(s), or\nwithout prompts on rows of random tokens "
                   "repeated; writes scores (kind, layer, head)",
                   "the .npz to write (and a .png beside it)"};
    int rc = gp_lens_parse(&lc, &u, GP_LENS_ROWS, fl, 6, argc, argv);
    int generated = !lc.a.prompt && !lc.a.prompts;
    if (rc == AG_OK && !generated && (fl[0].given || fl[1].given || fl[2].given || fl[3].given))
        rc = ag_fail(AG_ERR_ARG, "--repeat, --length, --batch and --seed make rows: not with "
                                 "--prompt or --prompts");
    rc = lens_cmd_start(&lc.c, &lc.p, &lc.f, rc, !generated);
    if (rc == AG_OK && generated) {
        int T = length ? length : lc.cfg.block_size, L = repeat ? repeat : T / 2;
        if (T > lc.cfg.block_size)
            rc = ag_fail(AG_ERR_ARG, "--length %d: more than the model's block_size %d", T,
                         lc.cfg.block_size);
        else if (L < 1 || L >= T)
            rc =
                ag_fail(AG_ERR_ARG, "--repeat %d: must be in [1, %d) (the rows must repeat)", L, T);
        if (rc == AG_OK) {
            Rng rng;
            rng_seed(&rng, (uint64_t)seed);
            lc.c.r.B = batch, lc.c.r.T = T;
            lc.c.r.ids = ex_malloc((size_t)batch * T * sizeof(int));
            lens_repeated_tokens(&rng, lc.cfg.vocab_size, L, batch, T, lc.c.r.ids);
            printf("detect: %d rows of %d random tokens repeated to %d (seed %lld)\n", batch, L, T,
                   (long long)seed);
        }
    }
    int L = lc.cfg.n_layer, NH = lc.cfg.n_head, K = LENS_N_HEAD_KINDS;
    double *scores = ex_calloc((size_t)K * L * NH, sizeof(double));
    LensDetectOptions opt = {exclude_bos, exclude_current};
    if (rc == AG_OK) {
        lens_detect_gpt(lc.c.t, &lc.g.m, lc.c.r.ids, lc.c.r.B, lc.c.r.T, &opt, scores);
        /* the share of queries that have a position to attend to (no exclusions): the score of
         * a perfect head of each kind on these tokens */
        uint8_t *D = ex_malloc((size_t)lc.c.r.T * lc.c.r.T);
        printf("scores: the share of each head's attention on the pattern's positions "
               "(a perfect head: ");
        for (int k = 0; k < K; k++) {
            double with = 0;
            for (int b = 0; b < lc.c.r.B; b++) {
                lens_detection_pattern((LensHeadKind)k, lc.c.r.ids + (size_t)b * lc.c.r.T, lc.c.r.T,
                                       D);
                for (int i = 0; i < lc.c.r.T; i++) {
                    int any = 0;
                    for (int j = 0; j <= i; j++) any |= D[(size_t)i * lc.c.r.T + j];
                    with += any;
                }
            }
            printf("%s%s %.3f", k ? ", " : "", lens_head_kind_name((LensHeadKind)k),
                   with / ((double)lc.c.r.B * lc.c.r.T));
        }
        printf(" without exclusions)\n  head ");
        free(D);
        for (int k = 0; k < K; k++) printf(" %16s", lens_head_kind_name((LensHeadKind)k));
        printf("\n");
        for (int l = 0; l < L; l++)
            for (int h = 0; h < NH; h++) {
                printf("  L%dH%-2d", l, h);
                for (int k = 0; k < K; k++) printf(" %16.3f", scores[((size_t)k * L + l) * NH + h]);
                printf("\n");
            }
        for (int k = 0; k < K; k++) {
            int best = 0;
            for (int i = 1; i < L * NH; i++)
                if (scores[(size_t)k * L * NH + i] > scores[(size_t)k * L * NH + best]) best = i;
            printf("best %s head: L%dH%d %.3f\n", lens_head_kind_name((LensHeadKind)k), best / NH,
                   best % NH, scores[(size_t)k * L * NH + best]);
        }
    }
    if (rc == AG_OK) {
        int32_t *tok = ex_malloc((size_t)lc.c.r.B * lc.c.r.T * sizeof(int32_t));
        for (size_t i = 0; i < (size_t)lc.c.r.B * lc.c.r.T; i++) tok[i] = lc.c.r.ids[i];
        static const char kinds[] = "[\"previous_token\",\"duplicate_token\",\"induction\"]";
        int64_t ex[2] = {exclude_bos, exclude_current};
        NpzWriter *w = npz_writer_new();
        npz_writer_finite(w, 1); /* a model that overflowed is refused, not written */
        npz_add_f64(w, "scores", 3, (int64_t[]){K, L, NH}, scores);
        npz_add_bytes(w, "kinds", kinds, strlen(kinds));
        npz_add_bytes(w, "axes", "kind,layer,head", strlen("kind,layer,head"));
        npz_add_i32(w, "tokens", 2, (int64_t[]){lc.c.r.B, lc.c.r.T}, tok);
        npz_add_i64(w, "exclude", 1, (int64_t[]){2}, ex);
        if ((rc = npz_write(w, lc.f.out, 0, NULL)) == AG_ERR_RANGE)
            rc = lens_cmd_not_finite(&lc.c, rc);
        npz_writer_free(w);
        free(tok);
    }
    if (rc == AG_OK) {
        printf("%s: scores (kind, layer, head)\n", lc.f.out);
        char **yl = ex_calloc((size_t)K * L, sizeof(char *));
        for (int k = 0; k < K; k++)
            for (int l = 0; l < L; l++) {
                yl[k * L + l] = ex_malloc(48);
                snprintf(yl[k * L + l], 48, "%s L%d", lens_head_kind_name((LensHeadKind)k), l);
            }
        lens_report_heatmap(&lc.c.rp, lc.f.out, ".png",
                            "head detectors: share of attention on the pattern", scores, K * L, NH,
                            yl, lens_labels_numbers(NH), 1);
    }
    free(scores);
    return lens_cmd_finish(&lc.c, &lc.p, &lc.f, rc);
}

/* ---- lens ---- */

int gp_lens(int argc, char **argv) {
    const char *token = NULL;
    int pos = -1;
    GpLens lc = {0};
    Flag fl[] = {
        FLAG_ROW("token", FLAG_PATH, &token, "TOKEN",
                 "the token whose logit is read (or --good, --bad)"),
        FLAG_NUM("pos", FLAG_INT, &pos, NULL, "the position read (-1: the last)", -(1 << 20),
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
    if (rc == AG_OK && !token == !lc.f.good)
        rc = lens_flags_refuse(&lc.f, "give --token TOKEN, or --good TOKEN --bad TOKEN");
    rc = lens_cmd_start(&lc.c, &lc.p, &lc.f, rc, 1);
    if (rc == AG_OK)
        rc = lens_cmd_logit(&lc.c, token ? token : lc.f.good, token ? "token" : "good", lc.f.bad,
                            pos, lc.f.out);
    return lens_cmd_finish(&lc.c, &lc.p, &lc.f, rc);
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
