/* test_tl_refs.c: every point `attograd-gpt cache` writes (AG_GPT_BIN) equals TransformerLens's
 * value of the same name, for three committed models (tests/fixtures/lens: a GPT-2-style one,
 * a LLaMA-style one with rotary positions and grouped-query heads, an attention-only one):
 *   - everywhere, against the committed references, TransformerLens 3.9's run_with_cache on the
 *     models' exports (written by tests/lens/make_tl_refs.sh): the same set of names, the same
 *     shapes, each point within 1e-5 of its largest magnitude (the masked scores -inf at the
 *     same places), the same tokens;
 *   - where a python3 with transformer_lens's HookedTransformer is found (AG_TL_PYTHON, else
 *     /usr/bin/python3), live: the models exported now, loaded with a strict load_state_dict,
 *     and compared point by point by tests/lens/tl_cache.py; skipped with the reason otherwise;
 *   - everywhere, against committed references of TransformerLens 4.3's TransformerBridge (written
 *     by tests/lens/make_tl4_refs.sh): the GPT-2-style and the LLaMA-style models exported as
 *     Hugging Face folders and cached through them (cache --model), the bridge's points and logits;
 *   - where AG_TL4_PYTHON imports TransformerLens 4's TransformerBridge: the GPT-2-style and the
 *     LLaMA-style models exported as Hugging Face folders (export --format hf), booted by the
 *     bridge (tests/lens/tl4_bridge.py), its logits against attograd's forward and every cached
 *     point against the bridge's of the same name; skipped with the reason otherwise.
 * Not here: the hook points' own tests (test_lens.c), the export's numpy forward
 * (tests/examples/test_gpt_lens_cli.c). */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attograd.h"
#include "files.h"
#include "models.h"

#define FIXTURES "tests/fixtures/lens"
#define TOL 1e-5

static const char *const models[] = {"gpt2", "llama", "attn"};
enum { N_MODELS = 3 };

static void ok(const char *dir, const char *const *args) {
    TsRun r = ts_finish(dir, ts_start_env("AG_GPT_BIN", dir, args, NULL));
    cr_assert_eq(r.code, 0, "%s: exit %d\nstdout: %s\nstderr: %s", args[0], r.code, r.out, r.err);
    ts_run_free(&r);
}

/* element i of a float entry as a double */
static double at(const NpzEntry *e, size_t i) {
    cr_assert(e->dtype == NPZ_F32 || e->dtype == NPZ_F64, "%s: not a float array", e->name);
    return e->dtype == NPZ_F32 ? ((const float *)e->data)[i] : ((const double *)e->data)[i];
}

static int is_point(const char *name) {
    size_t n = strlen(name);
    return strcmp(name, "tokens") && strcmp(name, "token_strs") && strcmp(name, "config") &&
           !(n > 5 && strcmp(name + n - 5, ".grad") == 0);
}

/* max |a - b| / max |b| over b's finite values; the non-finite ones must be equal */
static double relative(const NpzEntry *a, const NpzEntry *b) {
    double diff = 0, scale = 0;
    for (size_t i = 0; i < b->count; i++) {
        double x = at(a, i), y = at(b, i);
        if (!isfinite(y)) {
            cr_assert(x == y, "%s: element %zu is %g, TransformerLens's %g", b->name, i, x, y);
            continue;
        }
        diff = fmax(diff, fabs(x - y)), scale = fmax(scale, fabs(y));
    }
    return scale > 0 ? diff / scale : diff;
}

/* cache (attograd's) against ref (TransformerLens's): the same points and tokens */
static void compare(const char *model, const char *cache, const char *ref) {
    NpzFile *c, *r;
    cr_assert_eq(npz_read(cache, &c, NULL), AG_OK, "%s", ag_last_error());
    cr_assert_eq(npz_read(ref, &r, NULL), AG_OK, "%s", ag_last_error());
    int n = 0;
    double worst = 0;
    for (int i = 0; i < c->n; i++) {
        const NpzEntry *a = &c->entries[i];
        if (!is_point(a->name)) continue;
        const NpzEntry *b = npz_find(r, a->name);
        cr_assert(b, "%s: %s is not in TransformerLens's cache (%s)", model, a->name, ref);
        cr_assert(a->ndim == b->ndim &&
                      memcmp(a->shape, b->shape, (size_t)a->ndim * sizeof a->shape[0]) == 0,
                  "%s: %s has another shape than TransformerLens's", model, a->name);
        double d = relative(a, b);
        cr_assert(d <= TOL, "%s: %s differs from TransformerLens's by %.3g of its scale (> %g)",
                  model, a->name, d, TOL);
        worst = fmax(worst, d), n++;
    }
    int m = 0;
    for (int i = 0; i < r->n; i++) m += strcmp(r->entries[i].name, "tokens") != 0;
    cr_assert_eq(n, m, "%s: %d points, the reference %d", model, n, m);
    const NpzEntry *ta = npz_find(c, "tokens"), *tb = npz_find(r, "tokens");
    cr_assert(ta && tb && ta->nbytes == tb->nbytes && memcmp(ta->data, tb->data, ta->nbytes) == 0,
              "%s: other tokens than the reference's", model);
    cr_assert(n >= 26, "%s: %d points", model, n);
    cr_log_info("%s: %d points within %.2g of TransformerLens's", model, n, worst);
    npz_free(c);
    npz_free(r);
}

Test(lens_tl, every_cached_point_equals_the_committed_transformer_lens_values) {
    char dir[256], ck[512], ref[512], out[512];
    ts_tmp_dir(dir, sizeof dir, "tlrefs");
    for (int k = 0; k < N_MODELS; k++) {
        snprintf(ck, sizeof ck, FIXTURES "/%s.npz", models[k]);
        snprintf(ref, sizeof ref, FIXTURES "/%s_tl.npz", models[k]);
        snprintf(out, sizeof out, "%s/%s_cache.npz", dir, models[k]);
        ok(dir, (const char *[]){"cache", "--ckpt", ck, "--prompts", FIXTURES "/prompts.txt",
                                 "--out", out, NULL});
        compare(models[k], out, ref);
    }
    ts_rm_tree(dir);
}

/* the python command cmd, its output in dir/name.log; asserts exit 0 and shows the output */
static void python_ok(const char *dir, const char *name, char *cmd, size_t n) {
    char log[512];
    snprintf(log, sizeof log, "%s/%s.log", dir, name);
    size_t len = strlen(cmd);
    snprintf(cmd + len, n - len, " >'%s' 2>&1", log);
    int rc = system(cmd);
    FILE *f = fopen(log, "r");
    char text[16384] = "";
    if (f) {
        text[fread(text, 1, sizeof text - 1, f)] = 0;
        fclose(f);
    }
    cr_assert(rc == 0, "%s (exit %d):\n%s", cmd, rc, text);
}

/* a python3 with transformer_lens's HookedTransformer, or NULL */
static const char *tl_python(void) {
    static char cmd[1024];
    const char *env = getenv("AG_TL_PYTHON");
    const char *py = env && *env ? env : "/usr/bin/python3";
    snprintf(cmd, sizeof cmd,
             "'%s' -c 'from transformer_lens import HookedTransformer' >/dev/null 2>&1", py);
    return system(cmd) == 0 ? py : NULL;
}

Test(lens_tl, every_cached_point_equals_transformer_lens_live_where_installed) {
    const char *py = tl_python();
    if (!py) {
        const char *env = getenv("AG_TL_PYTHON");
        cr_skip_test("the live comparison with TransformerLens: %s cannot import "
                     "transformer_lens's HookedTransformer (install torch >= 2 and "
                     "transformer_lens < 4 and set AG_TL_PYTHON to that python3); the committed "
                     "references were compared",
                     env && *env ? env : "/usr/bin/python3");
    }
    char dir[256], ck[512], cmd[8192];
    ts_tmp_dir(dir, sizeof dir, "tllive");
    int len = snprintf(cmd, sizeof cmd, "'%s' tests/lens/tl_cache.py compare", py);
    for (int k = 0; k < N_MODELS; k++) {
        char ex[512], cache[512];
        snprintf(ck, sizeof ck, FIXTURES "/%s.npz", models[k]);
        snprintf(ex, sizeof ex, "%s/%s_tl.npz", dir, models[k]);
        snprintf(cache, sizeof cache, "%s/%s_cache.npz", dir, models[k]);
        ok(dir, (const char *[]){"export", "--ckpt", ck, "--format", "transformer-lens", "--out",
                                 ex, NULL});
        ok(dir, (const char *[]){"cache", "--ckpt", ck, "--prompts", FIXTURES "/prompts.txt",
                                 "--out", cache, NULL});
        ex[strlen(ex) - 4] = 0; /* the .json beside the .npz */
        len += snprintf(cmd + len, sizeof cmd - (size_t)len, " '%s.npz' '%s.json' '%s'", ex, ex,
                        cache);
    }
    python_ok(dir, "tl", cmd, sizeof cmd);
    ts_rm_tree(dir);
}

/* ---- TransformerLens 4: TransformerBridge boots the Hugging Face export ---- */

/* AG_TL4_PYTHON when it imports transformer_lens >= 4's TransformerBridge, else NULL and the
 * reason in why */
static const char *tl4_python(char *why, size_t n) {
    static char cmd[1024];
    const char *py = getenv("AG_TL4_PYTHON");
    if (!py || !*py) {
        snprintf(why, n, "AG_TL4_PYTHON is not set");
        return NULL;
    }
    snprintf(cmd, sizeof cmd,
             "'%s' -c 'import sys; from importlib.metadata import version; "
             "from transformer_lens.model_bridge import TransformerBridge; "
             "sys.exit(int(version(\"transformer_lens\").split(\".\")[0]) < 4)' >/dev/null 2>&1",
             py);
    if (system(cmd) == 0) return py;
    snprintf(why, n, "AG_TL4_PYTHON=%s cannot import transformer_lens >= 4's TransformerBridge",
             py);
    return NULL;
}

/* models[k] (gpt2 or llama) exported with export --format hf into dir/NAME (hf), and
 * `attograd-gpt cache --model hf` of the prompts into dir/NAME_cache.npz (cache) */
static void export_and_cache(const char *dir, int k, char *hf, char *cache) {
    char ck[512];
    snprintf(ck, sizeof ck, FIXTURES "/%s.npz", models[k]);
    snprintf(hf, 512, "%s/%s", dir, models[k]);
    snprintf(cache, 512, "%s/%s_cache.npz", dir, models[k]);
    ok(dir, (const char *[]){"export", "--ckpt", ck, "--format", "hf", "--out", hf, NULL});
    ok(dir, (const char *[]){"cache", "--model", hf, "--prompts", FIXTURES "/prompts.txt", "--out",
                             cache, NULL});
}

/* the bridge's logits (st: "ids" and F64 "logits") against attograd's forward of the folder hf,
 * within tol */
static void bridge_logits_within(const char *hf, int k, const char *st, double tol) {
    Arena *a = arena_new("params", 0);
    Gpt m;
    cr_assert_eq(hf_load(hf, a, &m), AG_OK, "%s: %s", hf, ag_last_error());
    GptConfig c = nn_gpt_options(&m.cfg);
    cr_assert(k == 0 ? c.style == NN_GPT2
                     : c.style == NN_LLAMA && c.n_kv_head == 2 && c.n_head == 4,
              "%s: not the model this test is about", hf);
    double e = ts_logits_error(st, &m);
    cr_assert(e <= tol, "%s: the bridge's logits (%s) differ from attograd's by %.3g (> %g)", hf,
              st, e, tol);
    cr_log_info("%s: the bridge's logits within %.2g of attograd's", models[k], e);
    nn_gpt_free(&m);
    arena_free(a);
}

/* The GPT-2-style and the LLaMA-style models' Hugging Face exports, cached through the folder
 * (cache --model), against the committed values of TransformerLens 4.3's TransformerBridge on the
 * same folders (tests/lens/make_tl4_refs.sh, booted in float64): every point within 1e-5 of its
 * scale (as the TransformerLens 3 references), the same tokens; the bridge's logits against
 * attograd's forward of the folder: 1e-4 in the float build, in double 1e-12 for GPT-2 and 1e-6
 * for LLaMA (transformers' LLaMA computes RMSNorm, the rotary angles and the attention's softmax
 * in float32 even in a float64 model). */
Test(lens_tl, every_cached_point_equals_the_committed_transformer_lens_4_values) {
    int dbl = sizeof(Real) == sizeof(double);
    char dir[256];
    ts_tmp_dir(dir, sizeof dir, "tl4refs");
    for (int k = 0; k < 2; k++) { /* gpt2, llama */
        char hf[512], cache[512], ref[512], st[512];
        export_and_cache(dir, k, hf, cache);
        snprintf(ref, sizeof ref, FIXTURES "/%s_tl4.npz", models[k]);
        compare(models[k], cache, ref);
        snprintf(st, sizeof st, FIXTURES "/%s_tl4_logits.safetensors", models[k]);
        bridge_logits_within(hf, k, st, !dbl ? 1e-4 : k == 0 ? 1e-12 : 1e-6);
    }
    ts_rm_tree(dir);
}

/* The GPT-2-style and the LLaMA-style (4 query heads on 2 key/value heads) models, exported with
 * export --format hf and booted by TransformerBridge.boot_transformers (tests/lens/tl4_bridge.py):
 * its logits on the cache's tokens equal attograd's forward of the export (1e-4 in the float
 * build), and every point attograd-gpt cache writes equals the bridge's point of the same name
 * (1e-5 of its scale); in the double build both within 1e-12 for GPT-2 and 1e-6 for LLaMA
 * (transformers' LLaMA computes RMSNorm, the rotary angles and the attention's softmax in
 * float32 even in a float64 model). */
Test(lens_tl, transformer_lens_4_bridge_boots_the_hf_export_where_installed) {
    char why[1024];
    const char *py = tl4_python(why, sizeof why);
    if (!py)
        cr_skip_test("the check that TransformerLens 4's TransformerBridge boots the Hugging Face "
                     "export: %s (set it to a python3 with 'transformer_lens>=4', e.g. "
                     "/opt/tl4/bin/python); the committed references were compared",
                     why);
    int dbl = sizeof(Real) == sizeof(double);
    char dir[256];
    ts_tmp_dir(dir, sizeof dir, "tl4");
    for (int k = 0; k < 2; k++) { /* gpt2, llama */
        char hf[512], cache[512], cmd[4096], st[600];
        export_and_cache(dir, k, hf, cache);
        double tol = !dbl ? 1e-5 : k == 0 ? 1e-12 : 1e-6;
        snprintf(cmd, sizeof cmd, "'%s' tests/lens/tl4_bridge.py compare --tol %g '%s' '%s'", py,
                 tol, hf, cache);
        python_ok(dir, models[k], cmd, sizeof cmd);
        snprintf(st, sizeof st, "%s/tl4_logits.safetensors", hf);
        bridge_logits_within(hf, k, st, dbl ? tol : 1e-4);
    }
    ts_rm_tree(dir);
}
