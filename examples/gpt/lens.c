/* lens.c: `attograd-gpt cache`, `ablate` and `patch`: the lens of src/lens on a checkpoint.
 * cache writes the activations a name pattern selects (and, with --good/--bad, the logit
 * difference's gradients) to one .npz; ablate zeroes or mean-ablates every head (or every
 * point) in turn and tables the metric; patch runs activation patching or attribution patching
 * from a clean prompt into a corrupted one. Each writes an .npz and, where gnuplot is
 * installed, a heatmap PNG beside it. docs/lens.md is the user's guide. Also what only
 * attograd-gpt's lens commands share (gpt_cli.h): the rows of --prompt and --prompts, the
 * input's flags, token texts, the LensProgram (the model loaded and freed, the rows read: a
 * prompt's, or detect's random ones; a cache's size checked; patch's clean and corrupted rows).
 * Not here: the common flags, start and end, the commands' runs, files, tables and exit codes,
 * shared with attograd-translate's (src/lens/cmd.c, commands.c, report.c); detect, lens and
 * export (readout.c). Read next: readout.c, src/lens/cmd.h, docs/lens.md. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gpt_cli.h"

#define GP_MAX_PROMPTS ((size_t)1 << 22) /* bytes of a --prompts file */

/* ---- the tokens a command runs on ---- */

/* text[0..n) as one row; label names it in errors */
static int encode_row(const HfModel *g, const char *text, size_t n, const char *label, int **ids,
                      size_t *len) {
    if (n == 0) return ag_fail(AG_ERR_ARG, "%s: empty", label);
    int rc = txt_any_encode_alloc(&g->text, text, n, ids, len, label);
    if (rc == AG_OK && *len > (size_t)g->m.cfg.block_size) {
        free(*ids);
        *ids = NULL;
        rc = ag_fail(AG_ERR_ARG, "%s: %zu tokens, more than the model's block_size %d", label, *len,
                     g->m.cfg.block_size);
    }
    return rc;
}

/* rows from --prompt (one row) or --prompts FILE (a row per line, all of one length) */
int gp_read_rows(const HfModel *g, const char *prompt, const char *file, LensRows *r) {
    memset(r, 0, sizeof *r);
    if (!prompt == !file) return ag_fail(AG_ERR_ARG, "give --prompt TEXT or --prompts FILE");
    if (prompt) {
        size_t len;
        int rc = encode_row(g, prompt, strlen(prompt), "--prompt", &r->ids, &len);
        r->B = 1, r->T = (int)len;
        return rc;
    }
    FILE *f;
    int rc = io_fopen_read(file, &f, NULL); /* a regular file: a FIFO never hangs */
    if (rc != AG_OK) return rc;
    char *text = ex_malloc(GP_MAX_PROMPTS + 1);
    size_t n = fread(text, 1, GP_MAX_PROMPTS + 1, f);
    int bad = ferror(f);
    fclose(f);
    if (bad) rc = ag_fail(AG_ERR_IO, "%s: cannot read: %s", file, strerror(errno));
    if (rc == AG_OK && n > GP_MAX_PROMPTS)
        rc = ag_fail(AG_ERR_ARG, "%s: more than %zu bytes", file, GP_MAX_PROMPTS);
    const char *nul = rc == AG_OK ? memchr(text, 0, n) : NULL;
    if (nul) { /* a NUL byte would end the text there: the lines after it would be lost */
        int line_no = 1;
        for (const char *q = text; q < nul; q++) line_no += *q == '\n';
        rc = ag_fail(AG_ERR_FORMAT, "%s: line %d: a NUL byte (at byte %zu): not text", file,
                     line_no, (size_t)(nul - text));
    }
    text[rc == AG_OK ? n : 0] = 0;
    char *line = text;
    size_t label_cap = strlen(file) + 32;
    char *label = ex_malloc(label_cap);
    for (int k = 1; rc == AG_OK && *line; k++) {
        char *end = strchr(line, '\n');
        size_t len = end ? (size_t)(end - line) : strlen(line), got;
        snprintf(label, label_cap, "%s: line %d", file, k);
        int *ids;
        rc = encode_row(g, line, len, label, &ids, &got);
        if (rc == AG_OK && r->B && (int)got != r->T) {
            free(ids);
            rc = ag_fail(AG_ERR_ARG, "%s has %zu tokens, line 1 has %d (rows must be as long)",
                         label, got, r->T);
        }
        if (rc == AG_OK) {
            r->ids = realloc(r->ids, ((size_t)r->B + 1) * got * sizeof(int));
            AG_CHECK(r->ids, "read_rows: out of memory");
            memcpy(r->ids + (size_t)r->B * got, ids, got * sizeof(int));
            r->B++, r->T = (int)got;
            free(ids);
        }
        line = end ? end + 1 : line + len;
    }
    if (rc == AG_OK && r->B == 0) rc = ag_fail(AG_ERR_ARG, "%s: no lines", file);
    free(label);
    free(text);
    if (rc != AG_OK) free(r->ids), memset(r, 0, sizeof *r);
    return rc;
}

/* --good/--bad/--token: a text of exactly one token (LensTokenFn; ctx: the HfModel) */
static int one_token(const void *ctx, const char *text, const char *flag, int *id) {
    char label[32];
    snprintf(label, sizeof label, "--%s", flag);
    int *ids = NULL;
    size_t n = 0;
    int rc = *text ? txt_any_encode_alloc(&((const HfModel *)ctx)->text, text, strlen(text), &ids,
                                          &n, label)
                   : ag_fail(AG_ERR_ARG, "%s: empty", label);
    if (rc == AG_OK && n != 1)
        rc = ag_fail(AG_ERR_ARG, "%s '%s': %zu tokens, must be one", label, text, n);
    if (rc == AG_OK) *id = ids[0];
    free(ids);
    return rc;
}

/* ---- the outputs (src/lens/report.h) ---- */

/* a token's text (malloc'd; ctx: the HfModel, a GPT has one vocabulary); for labels (label 1)
 * newline and tab shown as \n, \t */
static char *token_text(const void *ctx, NnHookStack stack, int id, int label) {
    (void)stack;
    const HfModel *g = ctx;
    size_t len;
    const uint8_t *b = txt_any_token_bytes(&g->text, id, &len);
    char *s = ex_malloc(4 * len + 1), *o = s;
    *o = 0;
    for (size_t i = 0; i < len; i++)
        o += label && b[i] == '\n'   ? sprintf(o, "\\n")
             : label && b[i] == '\t' ? sprintf(o, "\\t")
                                     : sprintf(o, "%c", b[i]);
    return s;
}

/* ---- the size of a cache ---- */

/* half of the machine's memory: --max-bytes's default */
static double half_the_ram(void) {
    long pages = sysconf(_SC_PHYS_PAGES), size = sysconf(_SC_PAGESIZE);
    return pages > 0 && size > 0 ? (double)pages * (double)size / 2 : 4.0 * (1 << 30);
}

/* The bytes a cache of every row of r would take, checked against max_bytes before anything of
 * that size is allocated: the first rows run alone (at most GP_PROBE_ROWS) with the same
 * patterns give what their copies take and what their forward pass takes (the step arena's
 * peak); both grow with the rows, and with gradients (grads) each doubles. AG_OK, or AG_ERR_ARG
 * with the figures. */
#define GP_PROBE_ROWS 32
static int cache_fits(HfModel *g, const LensRows *r, const char *hooks, int grads,
                      double max_bytes) {
    LensCache probe;
    lens_cache_init(&probe, 0);
    NnHooks h;
    nn_hooks_init(&h, g->m.cfg.n_layer);
    int rc = lens_hooks_add_list(&h, hooks, "--hooks", lens_cache_hook, &probe);
    int rows = r->B < GP_PROBE_ROWS ? r->B : GP_PROBE_ROWS;
    Arena *step = arena_new("probe", 0);
    Tape *t = ag_tape_new(step);
    if (rc >= 0) {
        ag_no_grad(t, 1);
        rc = nn_gpt_forward_hooked(t, &g->m, r->ids, rows, r->T, NULL, &h) ? AG_OK : AG_ERR_ARG;
    }
    double copies = 0, pass = (double)step->peak / rows, k = grads ? 2.0 : 1.0;
    for (int i = 0; i < probe.n; i++) copies += (double)probe.acts[i].size * sizeof(Real) / rows;
    ag_tape_free(t);
    arena_free(step);
    nn_hooks_free(&h);
    lens_cache_free(&probe);
    double need = (double)r->B * k * (copies + pass);
    if (rc == AG_OK && need > max_bytes)
        rc = ag_fail(AG_ERR_ARG,
                     "a cache of %d row(s) x %d tokens needs about %.0f bytes (%.0f for the "
                     "activations it keeps, %.0f for the forward pass%s), over --max-bytes %.0f: "
                     "give fewer rows or patterns, or a larger --max-bytes",
                     r->B, r->T, need, (double)r->B * k * copies, (double)r->B * k * pass,
                     grads ? ", both doubled by the gradients" : "", max_bytes);
    return rc;
}

/* ---- the shared start and end ---- */

/* the checkpoint's model, run as in evaluation (no dropout: the runs are deterministic);
 * *cfg: its configuration as trained */
int gp_lens_load(HfModel *g, const char *ckpt, GptConfig *cfg) {
    int rc = hf_model_load(ckpt, g);
    if (rc == AG_OK) *cfg = g->m.cfg, g->m.cfg.dropout = 0;
    return rc;
}

/* the last error again, after "prefix: " */
int gp_refail(int rc, const char *prefix) {
    char msg[1024];
    snprintf(msg, sizeof msg, "%s", ag_last_error());
    return ag_fail(rc, "%s: %s", prefix, msg);
}

/* LensProgram's callbacks on a GpLens (self) */
static int load(void *self, const LensFlags *f, LensCmd *c) {
    GpLens *l = self;
    int rc = gp_lens_load(&l->g, f->ckpt, &l->cfg);
    l->step = arena_new("step", 0);
    c->t = ag_tape_new(l->step);
    c->one_token = one_token;
    c->rp = (LensReport){GP_PROG, ex_plot_heatmap, token_text, &l->g};
    if (rc == AG_OK) c->lm = lens_gpt(&l->g.m), c->ro = lens_readout_gpt(&l->g.m);
    return rc;
}

/* the rows of --prompt or --prompts; detect's without them: random tokens repeated */
static int rows(void *self, const LensFlags *f, LensRows *r) {
    (void)f;
    GpLens *l = self;
    if (!l->generate) return gp_read_rows(&l->g, l->a.prompt, l->a.prompts, r);
    int T = l->length ? l->length : l->cfg.block_size, L = l->repeat ? l->repeat : T / 2;
    if (T > l->cfg.block_size)
        return ag_fail(AG_ERR_ARG, "--length %d: more than the model's block_size %d", T,
                       l->cfg.block_size);
    if (L < 1 || L >= T)
        return ag_fail(AG_ERR_ARG, "--repeat %d: must be in [1, %d) (the rows must repeat)", L, T);
    Rng rng;
    rng_seed(&rng, (uint64_t)l->seed);
    r->B = l->batch, r->T = T;
    r->ids = ex_malloc((size_t)r->B * T * sizeof(int));
    lens_repeated_tokens(&rng, l->cfg.vocab_size, L, r->B, T, r->ids);
    printf("detect: %d rows of %d random tokens repeated to %d (seed %lld)\n", r->B, L, T,
           (long long)l->seed);
    return AG_OK;
}

static int cache_check(void *self, const LensCmd *c, const char *hooks, int grads) {
    GpLens *l = self;
    return cache_fits(&l->g, &c->r, hooks, grads, l->max_bytes);
}

static int pair_rows(void *self, const char *clean, const char *corrupt, LensRows *a, LensRows *b) {
    GpLens *l = self;
    int rc = gp_read_rows(&l->g, clean, NULL, a);
    return rc == AG_OK ? gp_read_rows(&l->g, corrupt, NULL, b) : rc;
}

static void free_model(void *self) {
    GpLens *l = self;
    if (l->c.t) ag_tape_free(l->c.t);
    if (l->step) arena_free(l->step);
    hf_model_free(&l->g);
    l->c.t = NULL, l->step = NULL;
}

LensProgram gp_lens_program(GpLens *l) {
    return (LensProgram){.prog = GP_PROG,
                         .ckpt = GP_DEFAULT_CKPT,
                         .unit = "TOKEN",
                         .self = l,
                         .out_dir = run_out_file_dir,
                         .load = load,
                         .rows = rows,
                         .free = free_model,
                         .rows_flag = "--prompts FILE",
                         .cache_check = cache_check,
                         .pair_rows = pair_rows};
}

int gp_lens_parse(GpLens *l, const LensUsage *u, int parts, Flag *own, int n_own, int argc,
                  char **argv) {
    Flag in[] = {FLAG_ROW("model", FLAG_PATH, &l->f.ckpt, "DIR",
                          "a Hugging Face folder instead (docs/hf.md)"),
                 FLAG_ROW("prompt", FLAG_PATH, &l->a.prompt, "TEXT", "the text to run (one row)"),
                 FLAG_ROW("prompts", FLAG_PATH, &l->a.prompts, "FILE",
                          "a file: one row a line, all as many tokens")};
    l->p = gp_lens_program(l);
    return lens_flags_parse(&l->p, u, parts, &l->f, in, (parts & GP_LENS_ROWS) ? 3 : 1, own, n_own,
                            argc - 2, argv + 2);
}

int gp_lens_start(GpLens *l, int rc, int parts) { /* gp_view's: no --out folder */
    LensFlags f = {.ckpt = l->a.ckpt, .threads = l->a.threads, .prog = GP_PROG, .name = "view"};
    LensProgram p = gp_lens_program(l);
    p.out_dir = NULL;
    return lens_cmd_start(&l->c, &p, &f, rc, parts & GP_LENS_ROWS);
}

int gp_lens_end(GpLens *l, int rc, const char *cmd) {
    LensProgram p = gp_lens_program(l);
    return lens_cmd_finish(&l->c, &p, &(LensFlags){.name = cmd, .loaded = 1}, rc);
}

/* ---- cache ---- */

int gp_cache(int argc, char **argv) {
    GpLens l = {.max_bytes = half_the_ram()};
    LensCmdArgs a = {.hooks = "*", .info = {.cfg = &l.cfg}};
    Flag fl[] = {
        FLAG_ROW("hooks", FLAG_PATH, &a.hooks, "GLOBS",
                 "hook names to cache, comma-separated globs"),
        FLAG_NUM("max-bytes", FLAG_DOUBLE, &l.max_bytes, "BYTES",
                 "the memory a cache may take (half the RAM)", 1, 1e18),
    };
    LensUsage u = {"cache", "[flags]",
                   "runs the model on the prompt(s) and writes the activations at the hook points "
                   "(docs/lens.md)\nto one .npz under their names, with tokens, token_strs and "
                   "config; with --good and --bad also\nthe gradients of the logit difference "
                   "(--pos, the last) as <name>.grad",
                   "the .npz to write"};
    int rc = gp_lens_parse(&l, &u, GP_LENS_ROWS | LENS_FLAGS_GOOD_BAD | LENS_FLAGS_POS, fl, 2, argc,
                           argv);
    return lens_cmd_run(LENS_CMD_CACHE, &l.p, &l.c, &l.f, &a, rc);
}

/* ---- ablate ---- */

int gp_ablate(int argc, char **argv) {
    LensCmdArgs a = {.hook = "blocks.*.attn.hook_z", .mode_name = "zero"};
    GpLens l = {0};
    Flag fl[] = {
        FLAG_ROW("hook", FLAG_PATH, &a.hook, "GLOB",
                 "the points to ablate, one at a time (a glob)"),
        FLAG_ROW("mode", FLAG_PATH, &a.mode_name, "zero|mean", "zero, or mean (the batch's mean)"),
        FLAG_NUM("positions", FLAG_INTS, &a.positions, NULL, "only these positions, e.g. 3,4 (all)",
                 0, 1 << 16),
    };
    LensUsage u = {"ablate", "[flags]",
                   "ablates each head (or each point without heads) of the matching points in "
                   "turn and writes\nthe metric of every run: values (point, head), base, "
                   "points, axes",
                   "the .npz to write (and a .png beside it)"};
    int rc = gp_lens_parse(&l, &u, GP_LENS_ROWS | LENS_FLAGS_METRIC, fl, 3, argc, argv);
    return lens_cmd_run(LENS_CMD_ABLATE, &l.p, &l.c, &l.f, &a, rc);
}

/* ---- patch ---- */

int gp_patch(int argc, char **argv) {
    LensCmdArgs a = {.hook = "blocks.*.hook_resid_pre", .by_name = "position"};
    GpLens l = {0};
    Flag fl[] = {
        FLAG_ROW("clean", FLAG_PATH, &a.clean, "TEXT", "the clean prompt (one row)"),
        FLAG_ROW("corrupt", FLAG_PATH, &a.corrupt, "TEXT", "the corrupted prompt, as many tokens"),
        FLAG_ROW("hook", FLAG_PATH, &a.hook, "GLOB", "the points to patch (a glob)"),
        FLAG_ROW("by", FLAG_PATH, &a.by_name, "NAME", "position, head or head-position"),
        FLAG_SW("attribution", &a.attribution, "attribution patching (1 fwd+bwd)"),
    };
    LensUsage u = {"patch", "[flags]",
                   "patches the clean run's activation into the corrupted run, one (point, "
                   "position / head)\nat a time, and writes the metric of each run (or its "
                   "first-order estimate, --attribution)",
                   "the .npz to write (and a .png beside it)"};
    int rc = gp_lens_parse(&l, &u, LENS_FLAGS_METRIC, fl, 5, argc, argv);
    return lens_cmd_run(LENS_CMD_PATCH, &l.p, &l.c, &l.f, &a, rc);
}
