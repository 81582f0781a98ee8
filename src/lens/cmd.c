/* cmd.c: the lens commands' runs of cmd.h on any model: the metric of --metric, cache, ablate,
 * patch, the logit lens, the end of a command (its exit code), and the common flags, start and
 * end of lens_flags_parse, lens_cmd_start, lens_cmd_finish. Every printed line and
 * message is what attograd-gpt's and attograd-translate's commands printed before they shared
 * this file.
 * Not here: the files, tables and heatmaps (report.c), the sweeps (lens.c), the lens's numbers
 * (logit.c). Read next: report.c. */
#include "cmd.h"

#include "../tensor/threads.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void *zalloc(size_t n, size_t size) {
    void *p = calloc(n ? n : 1, size);
    AG_CHECK(p, "lens_cmd: out of memory for %zu x %zu bytes", n, size);
    return p;
}

int lens_cmd_parse(const char *prog, const char *name, const char *args, const char *what, Flag *fl,
                   int n, int argc, char **argv, char **pos, int *npos) {
    AG_CHECK_ARG(prog);
    AG_CHECK_ARG(name);
    AG_CHECK_ARG(args);
    AG_CHECK_ARG(what);
    AG_CHECK_ARG(fl);
    int rc = flag_parse(fl, n, argc, argv, pos, npos);
    if (rc == FLAG_HELP) {
        printf("usage: %s %s %s\n%s\n\nflags (default) [range]:\n", prog, name, args, what);
        flag_help(stdout, fl, n);
    }
    return rc;
}

void lens_rows_free(LensRows *r) {
    if (!r) return;
    free(r->ids), free(r->src), free(r->next);
    memset(r, 0, sizeof *r);
}

/* the model's input of rows r (one of tok, pair, filled) */
static const void *rows_input(const LensRows *r, LensTokens *tok, LensPair *pair) {
    *tok = (LensTokens){r->ids, r->B, r->T};
    *pair = (LensPair){r->src, r->ids, r->B, r->S, r->T};
    return r->src ? (const void *)pair : (const void *)tok;
}

/* each position's next token (B, T) of a GPT's rows, -1 at the end of a row (malloc'd) */
static int *next_tokens(const LensRows *r) {
    int *next = zalloc((size_t)r->B * r->T, sizeof(int));
    for (size_t i = 0; i < (size_t)r->B * r->T; i++)
        next[i] = (int)(i % r->T) + 1 < r->T ? r->ids[i + 1] : -1;
    return next;
}

/* the last error again, after "prefix: " */
static int refail(int rc, const char *prefix) {
    char msg[1024];
    snprintf(msg, sizeof msg, "%s", ag_last_error());
    return ag_fail(rc, "%s: %s", prefix, msg);
}

int lens_cmd_not_finite(const LensCmd *c, int rc) {
    AG_CHECK_ARG(c);
    char msg[1024];
    snprintf(msg, sizeof msg, "%s", ag_last_error());
    return ag_fail(rc,
                   "%s: the model's values are not finite on this input (its weights are finite "
                   "but overflow): %s",
                   c->ckpt, msg);
}

/* a file's AG_ERR_RANGE (a value not finite) said of the model; any other rc as it is */
static int finite_or(const LensCmd *c, int rc) {
    return rc == AG_ERR_RANGE ? lens_cmd_not_finite(c, rc) : rc;
}

int lens_cmd_metric(const LensCmd *c, const LensRows *r, const char *kind, const char *good,
                    const char *bad, int pos, LensOwnedMetric *m) {
    AG_CHECK_ARG(c);
    AG_CHECK_ARG(r);
    AG_CHECK_ARG(kind);
    AG_CHECK_ARG(m);
    if (strcmp(kind, "loss") != 0)
        return lens_logit_diff_metric(kind, good, bad, pos, r->B, r->T, c->one_token, c->rp.ctx, m);
    memset(m, 0, sizeof *m);
    if (!r->next) { /* next-token loss over a GPT's row: the last token has no target */
        m->targets = next_tokens(r);
        if (r->T < 2) return ag_fail(AG_ERR_ARG, "--metric loss: a row needs 2 tokens or more");
    }
    m->mt = (LensMetric){.kind = LENS_LOSS, .targets = r->next ? r->next : m->targets};
    return AG_OK;
}

int lens_cmd_cache(LensCmd *c, const char *hooks, const LensMetric *mt, LensRunInfo info,
                   const char *out) {
    AG_CHECK_ARG(c);
    AG_CHECK_ARG(hooks);
    AG_CHECK_ARG(out);
    const LensRows *r = &c->r;
    LensCache cache;
    lens_cache_init(&cache, mt != NULL);
    NnHooks h;
    nn_hooks_init_like(&h, &c->lm.layout);
    int rc = lens_hooks_add_list(&h, hooks, "--hooks", lens_cache_hook, &cache); /* strict */
    LensTokens tok;
    LensPair pair;
    Tensor *logits = NULL;
    if (rc >= 0)
        rc = lens_cache_run(c->t, &c->lm, rows_input(r, &tok, &pair), &h, &cache, mt, &logits);
    for (size_t i = 0; rc == AG_OK && i < logits->size; i++)
        if (!isfinite((double)logits->data[i]))
            rc = lens_cmd_not_finite(c, ag_fail(AG_ERR_RANGE, "logits[%zu] = %g: must be finite", i,
                                                (double)logits->data[i]));
    int nt = r->B * r->T, ns = r->B * r->S;
    char **ts = NULL, **ss = NULL;
    if (rc == AG_OK) {
        NnHookStack stack = r->src ? NN_HOOK_DECODER : NN_HOOK_GPT;
        ts = lens_labels_tokens(&c->rp, stack, r->ids, nt, 0);
        info.tokens = r->ids, info.B = r->B, info.T = r->T;
        info.token_strs = (const char *const *)ts;
        if (r->src) {
            ss = lens_labels_tokens(&c->rp, NN_HOOK_ENCODER, r->src, ns, 0);
            info.src_tokens = r->src, info.S = r->S;
            info.src_token_strs = (const char *const *)ss;
        }
        rc = finite_or(c, lens_cache_save(&cache, out, &info));
    }
    if (rc == AG_OK && r->src)
        printf("%s: %d activations%s of %d row(s), %d source and %d decoder positions\n", out,
               cache.n, mt ? " and gradients" : "", r->B, r->S, r->T);
    else if (rc == AG_OK)
        printf("%s: %d activations%s of %d x %d tokens\n", out, cache.n, mt ? " and gradients" : "",
               r->B, r->T);
    lens_labels_free(ts, nt);
    lens_labels_free(ss, ns);
    nn_hooks_free(&h);
    lens_cache_free(&cache);
    return rc;
}

int lens_cmd_ablate(LensCmd *c, const char *hook, LensAblateMode mode, const int *positions,
                    int n_pos, const LensMetric *mt, const char *metric, const char *out) {
    AG_CHECK_ARG(c);
    AG_CHECK_ARG(hook);
    AG_CHECK_ARG(mt);
    AG_CHECK_ARG(metric);
    AG_CHECK_ARG(out);
    LensTokens tok;
    LensPair pair;
    LensAblateTable a = {0};
    int rc = lens_ablate_sweep_model(c->t, &c->lm, rows_input(&c->r, &tok, &pair), hook, mode,
                                     positions, n_pos, mt, &a);
    if (rc != AG_OK) return refail(rc, "--hook");
    rc = finite_or(c, lens_report_ablate(&c->rp, &a, mode, metric, out));
    lens_ablate_table_free(&a);
    return rc;
}

int lens_cmd_patch(LensCmd *c, const LensRows *corrupt, const char *hook, LensAxes axes,
                   int attribution, const LensMetric *mt, const char *metric, const char *out) {
    AG_CHECK_ARG(c);
    AG_CHECK_ARG(corrupt);
    AG_CHECK_ARG(hook);
    AG_CHECK_ARG(mt);
    AG_CHECK_ARG(metric);
    AG_CHECK_ARG(out);
    const LensRows *clean = &c->r;
    if (clean->src && (clean->S != corrupt->S || clean->T != corrupt->T))
        return ag_fail(AG_ERR_ARG,
                       "--corrupt has %d source and %d target tokens, --clean %d and %d: they "
                       "must be as many",
                       corrupt->S - 1, corrupt->T - 1, clean->S - 1, clean->T - 1);
    if (corrupt->T != clean->T)
        return ag_fail(AG_ERR_ARG, "--corrupt has %d tokens, --clean %d: they must be as many",
                       corrupt->T, clean->T);
    LensTokens ta, tb;
    LensPair pa, pb;
    const void *a = rows_input(clean, &ta, &pa), *b = rows_input(corrupt, &tb, &pb);
    LensSweep s = {0};
    int rc = (attribution ? lens_attribute_model : lens_patch_sweep_model)(c->t, &c->lm, a, b, hook,
                                                                           axes, mt, &s);
    if (rc != AG_OK) return refail(rc, "--hook");
    rc = lens_report_patch(&c->rp, &s, metric, corrupt->ids, corrupt->src, out);
    lens_sweep_free(&s);
    return finite_or(c, rc);
}

int lens_cmd_logit(LensCmd *c, const char *good, const char *good_flag, const char *bad, int pos,
                   const char *out) {
    AG_CHECK_ARG(c);
    AG_CHECK_ARG(good);
    AG_CHECK_ARG(good_flag);
    AG_CHECK_ARG(out);
    const LensRows *r = &c->r;
    int gi = -1, bi = -1, rc = c->one_token(c->rp.ctx, good, good_flag, &gi);
    if (rc == AG_OK && bad) rc = c->one_token(c->rp.ctx, bad, "bad", &bi);
    if (rc == AG_OK && (pos < -r->T || pos >= r->T))
        rc = r->src
                 ? ag_fail(AG_ERR_ARG,
                           "--pos %d: outside the decoder's %d positions (-1: the last)", pos, r->T)
                 : ag_fail(AG_ERR_ARG, "--pos %d: outside the rows' %d positions", pos, r->T);
    if (rc != AG_OK) return rc;
    int *gs = zalloc((size_t)r->B, sizeof(int)), *bs = zalloc((size_t)r->B, sizeof(int));
    for (int b = 0; b < r->B; b++) gs[b] = gi, bs[b] = bi;
    int *next = r->next ? r->next : next_tokens(r);
    LensTokens tok;
    LensPair pair;
    LensLogit ll;
    rc = lens_logit_run_model(c->t, &c->lm, rows_input(r, &tok, &pair), &c->ro, next, r->B, r->T,
                              gs, bad ? bs : NULL, pos, &ll);
    if (rc != AG_OK) rc = refail(rc, c->ckpt); /* a post-LN model */
    if (rc == AG_OK)
        rc = finite_or(c, lens_report_logit(&c->rp, &ll, r->ids, gs, bad ? bs : NULL, out));
    if (next != r->next) free(next);
    lens_logit_free(&ll);
    free(gs), free(bs);
    return rc;
}

int lens_cmd_end(LensCmd *c, int rc) {
    AG_CHECK_ARG(c);
    lens_rows_free(&c->r);
    free(c->lm.layout.entries); /* none: a layout has no hooks */
    memset(&c->lm, 0, sizeof c->lm);
    if (rc == AG_OK) return 0;
    fprintf(stderr, "%s %s: %s\n", c->prog, c->name, ag_last_error());
    return rc == AG_ERR_NOMEM ? 1 : 2;
}

/* ---- one set of flags, one start and one end ---- */

int lens_flags_refuse(const LensFlags *f, const char *why) {
    AG_CHECK_ARG(f);
    AG_CHECK_ARG(why);
    return ag_fail(AG_ERR_ARG, "%s (see %s %s --help)", why, f->prog ? f->prog : "",
                   f->name ? f->name : "");
}

const char *lens_flags_metric(const LensFlags *f) {
    AG_CHECK_ARG(f);
    return f->metric ? f->metric : f->good && f->bad ? "logit-diff" : "loss";
}

int lens_flags_parse(const LensProgram *p, const LensUsage *u, int parts, LensFlags *f,
                     const Flag *input, int n_in, Flag *own, int n_own, int argc, char **argv) {
    AG_CHECK_ARG(p);
    AG_CHECK_ARG(u);
    AG_CHECK_ARG(f);
    AG_CHECK(n_in >= 0 && n_own >= 0 && n_in + n_own <= 32 && (input || !n_in) && (own || !n_own),
             "lens_flags_parse: %d input and %d own flags", n_in, n_own);
    memset(f, 0, sizeof *f);
    f->prog = p->prog, f->name = u->name, f->ckpt = p->ckpt, f->pos = -1;
    snprintf(f->out_default, sizeof f->out_default, "build/lens/%s.npz", u->name);
    f->out = f->out_default;
    Flag fl[40];
    int n = 0;
    fl[n++] = (Flag)FLAG_ROW("ckpt", FLAG_PATH, &f->ckpt, "PATH", "the checkpoint");
    for (int i = 0; i < n_in; i++) fl[n++] = input[i];
    int n0 = n;
    for (int i = 0; i < n_own; i++) fl[n++] = own[i];
    if ((parts & LENS_FLAGS_METRIC) == LENS_FLAGS_METRIC)
        fl[n++] = (Flag)FLAG_ROW(
            "metric", FLAG_STR, &f->metric, "NAME",
            "loss (the next tokens') or logit-diff (--good, --bad; the default with them)");
    if (parts & LENS_FLAGS_GOOD_BAD) {
        fl[n++] = (Flag)FLAG_ROW("good", FLAG_STR, &f->good, p->unit,
                                 "logit-diff: the one whose logit counts +");
        fl[n++] = (Flag)FLAG_ROW("bad", FLAG_STR, &f->bad, p->unit,
                                 "logit-diff: the one whose logit counts -");
    }
    if (parts & LENS_FLAGS_POS)
        fl[n++] = (Flag)FLAG_NUM("pos", FLAG_INT, &f->pos, "N",
                                 "logit-diff: the position (-1: the last)", -1, 1 << 20);
    fl[n++] = (Flag)FLAG_ROW("out", FLAG_PATH, &f->out, "FILE", u->out);
    fl[n++] = (Flag)FLAG_NUM("threads", FLAG_INT, &f->threads, "N",
                             "threads (default: OMP_NUM_THREADS, else the CPUs)", 0, 4096);
    if (parts & LENS_FLAGS_ARGS) f->args = zalloc((size_t)argc + 1, sizeof *f->args);
    int rc = lens_cmd_parse(p->prog, u->name, u->args, u->what, fl, n, argc, argv, f->args,
                            (parts & LENS_FLAGS_ARGS) ? &f->nargs : NULL);
    for (int i = 0; i < n_own; i++) own[i].given = fl[n0 + i].given;
    for (int i = 0; i < n && f->ntexts < 16; i++) /* the texts lens_cmd_start checks */
        if (fl[i].type == FLAG_STR && fl[i].given && *(const char **)fl[i].ptr) {
            f->texts[f->ntexts] = *(const char **)fl[i].ptr;
            snprintf(f->labels[f->ntexts++], sizeof f->labels[0], "--%.*s",
                     (int)strcspn(fl[i].name, "|"), fl[i].name);
        }
    if (rc == AG_ERR_ARG) { /* the parser's message, then where the help is */
        char msg[1024];
        snprintf(msg, sizeof msg, "%s", ag_last_error());
        return lens_flags_refuse(f, msg);
    }
    return rc;
}

/* text is NULL or valid (p->check_text; label names it) */
static int text_ok(const LensProgram *p, const char *text, const char *label) {
    const char *past;
    return !text || !p->check_text ? AG_OK : p->check_text(text, label, &past);
}

int lens_cmd_start(LensCmd *c, const LensProgram *p, LensFlags *f, int rc, int rows) {
    AG_CHECK_ARG(c);
    AG_CHECK_ARG(p);
    AG_CHECK_ARG(f);
    if (rc == AG_OK && !f->good != !f->bad)
        rc = lens_flags_refuse(f, "--good and --bad go together");
    for (int i = 0; rc == AG_OK && i < f->nargs; i++)
        rc = text_ok(p, f->args[i], p->arg_label ? p->arg_label : "an argument");
    for (int i = 0; rc == AG_OK && i < f->ntexts; i++) rc = text_ok(p, f->texts[i], f->labels[i]);
    if (rc != AG_OK) return rc;
    if (p->parse_only) return LENS_CMD_DONE;
    if (p->out_dir && (rc = p->out_dir(f->out)) != AG_OK) return rc; /* the folder of --out */
    ag_threads_use_flag(p->prog, f->threads); /* a warning when more than the CPUs */
    c->prog = p->prog, c->name = f->name, c->ckpt = f->ckpt;
    f->loaded = 1;
    rc = p->load(p->self, f, c);
    c->prog = p->prog, c->name = f->name; /* whatever load wrote */
    if (rc == AG_OK && rows) rc = p->rows(p->self, f, &c->r);
    return rc;
}

int lens_cmd_finish(LensCmd *c, const LensProgram *p, LensFlags *f, int rc) {
    AG_CHECK_ARG(c);
    AG_CHECK_ARG(p);
    AG_CHECK_ARG(f);
    c->prog = p->prog, c->name = f->name; /* also when nothing started (--help, a refusal) */
    int code = lens_cmd_end(c, rc == LENS_CMD_DONE ? AG_OK : rc);
    if (f->loaded && p->free) p->free(p->self);
    free(f->args);
    f->args = NULL, f->nargs = 0, f->loaded = 0;
    return code;
}
