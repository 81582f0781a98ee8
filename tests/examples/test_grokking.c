/* test_grokking.c: examples/grokking's measures (measures.c, called directly) on hand-built
 * inputs with known answers: the split is the same for a seed and balanced over the answers;
 * the Fourier basis is orthonormal; a frequency planted in an embedding is the only one with a
 * norm; a neuron built from one frequency is explained by it; logits that use exactly one
 * frequency give the known restricted and excluded losses. Then the program (AG_GROKKING_BIN)
 * on a tiny model: train with kept checkpoints, a kept one resumes to the bits of the straight
 * run, analyze writes finite measures and its pictures.
 * Not here: the run loop's own tests (tests/run/test_run.c). */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "attograd.h"
#include "files.h"
#include "grokking.h"

#define P 13
#define K ((P - 1) / 2)

Test(grokking, the_split_is_deterministic_and_balanced) {
    unsigned char a[P * P], b[P * P], c[P * P];
    int n = gk_split(P, 0.3, 7, a);
    cr_assert_eq(n, P * 4, "round(0.3 * 13) = 4 pairs of each answer: %d", n);
    cr_assert_eq(gk_split(P, 0.3, 7, b), n);
    cr_assert(memcmp(a, b, sizeof a) == 0, "the same seed, the same split");
    gk_split(P, 0.3, 8, c);
    cr_assert(memcmp(a, c, sizeof a) != 0, "another seed, another split");
    int per[P] = {0}, total = 0;
    for (int x = 0; x < P; x++)
        for (int y = 0; y < P; y++) per[(x + y) % P] += a[x * P + y], total += a[x * P + y];
    cr_assert_eq(total, n);
    for (int k = 0; k < P; k++) cr_assert_eq(per[k], 4, "answer %d: %d training pairs", k, per[k]);
}

Test(grokking, the_fourier_basis_is_orthonormal) {
    double B[P * P];
    gk_fourier_basis(P, B);
    for (int i = 0; i < P; i++)
        for (int j = 0; j < P; j++) {
            double s = 0;
            for (int x = 0; x < P; x++) s += B[i * P + x] * B[j * P + x];
            cr_assert_float_eq(s, i == j, 1e-12, "row %d . row %d = %g", i, j, s);
        }
}

Test(grokking, a_planted_frequency_is_the_only_one_with_a_norm) {
    enum { D = 5 };
    double B[P * P], W[P * D], norm[K], c0, pi = acos(-1.0);
    gk_fourier_basis(P, B);
    for (int x = 0; x < P; x++) /* frequency 4 in every column, its phase and size vary */
        for (int j = 0; j < D; j++) W[x * D + j] = (j + 1) * cos(2 * pi * 4 * x / P + j) + 0.5;
    gk_freq_norms(P, D, W, B, norm, &c0);
    double sum = c0 * c0, all = 0;
    for (int k = 1; k <= K; k++) {
        sum += norm[k - 1] * norm[k - 1];
        if (k != 4) cr_assert_float_eq(norm[k - 1], 0, 1e-10, "frequency %d: %g", k, norm[k - 1]);
    }
    for (int q = 0; q < P * D; q++) all += W[q] * W[q];
    cr_assert_float_eq(sum, all, 1e-9, "Parseval: %g vs %g", sum, all);
    /* each column (j+1) cos(...) has squared norm (j+1)^2 P / 2 */
    cr_assert_float_eq(norm[3], sqrt(P / 2.0 * (1 + 4 + 9 + 16 + 25)), 1e-9);
}

Test(grokking, a_neuron_of_one_frequency_is_explained_by_it) {
    enum { H = 3 };
    double B[P * P], act[P * P * H], share[H], pi = acos(-1.0);
    int best[H];
    gk_fourier_basis(P, B);
    Rng g;
    rng_seed(&g, 3);
    for (int x = 0; x < P; x++)
        for (int y = 0; y < P; y++) {
            double wx = 2 * pi * 5 * x / P, wy = 2 * pi * 5 * y / P;
            double *a = act + (x * P + y) * H;
            a[0] = 2 + cos(wx) * cos(wy) + 0.5 * sin(wx) - 0.3 * sin(wy); /* frequency 5 */
            a[1] = fmax(0, cos(2 * pi * 2 * (x + y) / P)); /* ReLU of cos(w_2 (a+b)) */
            a[2] = rng_normal(&g);                         /* noise */
        }
    gk_neuron_freqs(P, H, act, B, best, share);
    cr_assert_eq(best[0], 5);
    cr_assert_float_eq(share[0], 1, 1e-9, "share %g", share[0]);
    cr_assert_eq(best[1], 2);
    cr_assert(share[1] > 0.5 && share[1] < 1, "ReLU(cos): mostly frequency 2 (%g)", share[1]);
    cr_assert(share[2] < 0.5, "noise: no frequency explains it (%g)", share[2]);
    int keys[4];
    cr_assert_eq(gk_key_freqs(P, H, best, share, 0.85, 1, keys, 4), 1);
    cr_assert_eq(keys[0], 5);
}

/* logits alpha cos(w_k (a + b - c)): a model that uses exactly frequency k */
static void one_freq_logits(double *L, int k, double alpha) {
    double pi = acos(-1.0);
    for (int a = 0; a < P; a++)
        for (int b = 0; b < P; b++)
            for (int c = 0; c < P; c++)
                L[(a * P + b) * P + c] = alpha * cos(2 * pi * k * ((a + b - c + 2 * P) % P) / P);
}

Test(grokking, restricted_and_excluded_loss_of_a_one_frequency_model_are_known) {
    static double L[P * P * P], work[P * P * P];
    double alpha = 3, pi = acos(-1.0), z = 0, loss, acc;
    one_freq_logits(L, 3, alpha);
    for (int d = 0; d < P; d++) z += exp(alpha * cos(2 * pi * 3 * d / P));
    double known = log(z) - alpha; /* the right answer has d = 0 */
    unsigned char tr[P * P];
    gk_split(P, 0.5, 1, tr);
    gk_loss(P, L, NULL, -1, &loss, &acc);
    cr_assert_float_eq(loss, known, 1e-12);
    cr_assert_float_eq(acc, 1, 0);
    int key = 3, other = 2;
    /* its own frequency kept: the logits are whole; removed: nothing is left (uniform) */
    cr_assert_float_eq(gk_restricted_loss(P, L, &key, 1, work), known, 1e-10);
    cr_assert_float_eq(gk_excluded_loss(P, L, tr, &key, 1, work), log(P), 1e-10);
    /* another frequency: restricted leaves nothing, excluded takes nothing away */
    cr_assert_float_eq(gk_restricted_loss(P, L, &other, 1, work), log(P), 1e-10);
    cr_assert_float_eq(gk_excluded_loss(P, L, tr, &other, 1, work), known, 1e-10);
}

/* the tiny model's flags: p 13, a small model, 20 steps, kept every 10 */
#define TINY                                                                                       \
    "--p", "13", "--frac", "0.5", "--d-model", "16", "--heads", "2", "--d-mlp", "32", "--steps",   \
        "20", "--keep-every", "10", "--valid-every", "10", "--threads", "1", "--quiet"

Test(grokking, the_program_trains_keeps_resumes_to_the_bits_and_analyzes, .timeout = 300) {
    char dir[64], a[512], b[512], p[600], q[600], why[4096];
    ts_tmp_dir(dir, sizeof dir, "grokking");
    ts_join(a, dir, "a");
    ts_join(b, dir, "b");
    cr_assert(ts_exits_with("AG_GROKKING_BIN", dir,
                            (const char *[]){"train", "--out", a, TINY, NULL}, 0, NULL, why,
                            sizeof why),
              "%s", why);
    /* the state kept at step 10, as last.npz of another folder, resumes to the same bits */
    mkdir(b, 0755);
    size_t len;
    char *kept = ts_slurp(ts_join(p, a, "ckpt/step_00000010.npz"), &len);
    ts_write_bytes(ts_join(q, b, "last.npz"), kept, len);
    free(kept);
    cr_assert(ts_exits_with("AG_GROKKING_BIN", dir,
                            (const char *[]){"train", "--out", b, "--resume", "--quiet", NULL}, 0,
                            NULL, why, sizeof why),
              "%s", why);
    cr_assert(ts_same_file(ts_join(p, a, "last.npz"), q), "last.npz differs after resuming");
    cr_assert(ts_exits_with("AG_GROKKING_BIN", dir, (const char *[]){"analyze", "--out", a, NULL},
                            0, NULL, why, sizeof why),
              "%s", why);
    NpzFile *f;
    cr_assert_eq(npz_read(ts_join(p, a, "progress.npz"), &f, NULL), AG_OK, "%s", ag_last_error());
    const char *cols[] = {"train_loss",  "test_loss",       "train_acc",     "test_acc",
                          "weight_norm", "restricted_loss", "excluded_loss", "neurons_explained"};
    for (int c = 0; c < 8; c++) {
        const NpzEntry *e = npz_find(f, cols[c]);
        cr_assert(e && e->ndim == 1 && e->shape[0] == 3, "%s: 3 checkpoints (0, 10, 20)", cols[c]);
        for (int i = 0; i < 3; i++) {
            double v;
            memcpy(&v, (const char *)e->data + 8 * i, 8);
            cr_assert(isfinite(v) && v >= 0, "%s[%d] = %g", cols[c], i, v);
        }
    }
    const NpzEntry *fn = npz_find(f, "fourier_norms");
    cr_assert(fn && fn->ndim == 2 && fn->shape[0] == 3 && fn->shape[1] == 6);
    npz_free(f);
    char *csv = ts_read_text(ts_join(p, a, "progress.csv"), NULL);
    cr_assert(strncmp(csv, "step,train_loss,test_loss", 25) == 0, "%s", csv);
    free(csv);
    /* the view: the plots and the norms' table (make test-view opens it in a browser) */
    char *html = ts_read_text(ts_join(p, a, "view.html"), NULL);
    cr_assert(
        strstr(html, "\"plots\":[{\"name\":\"loss\"") && strstr(html, "{\"name\":\"fourier\"") &&
            strstr(html, "\"tables\":[{\"name\":\"Fourier norms\"") && strstr(html, "\"runs\":["),
        "view.html lacks a part");
    free(html);
    /* fewer steps than the warmup (10): the schedule is flat after it, so the run is allowed */
    cr_assert(ts_exits_with("AG_GROKKING_BIN", dir,
                            (const char *[]){"train", "--out", ts_join(p, dir, "short"), TINY,
                                             "--steps", "5", NULL},
                            0, NULL, why, sizeof why),
              "%s", why);
    cr_assert(ts_exits_with("AG_GROKKING_BIN", dir,
                            (const char *[]){"analyze", "--out", ts_join(p, dir, "none"), NULL}, 2,
                            (const char *[]){"none/ckpt", NULL}, why, sizeof why),
              "%s", why);
    ts_rm_tree(dir);
}
