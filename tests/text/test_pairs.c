/* test_pairs.c: sentence pairs' batches and loader (src/text/pairs.h). A batch holds the
 * source then EOS, BOS then the target, the target then EOS, PAD after, and its padding masks
 * (nn_padding_mask) match the lengths; the loader covers every pair once an epoch in batches of
 * about one length, changes the order each epoch, and its position (epoch, cursor) is its
 * whole state: seeking reproduces the batches.
 * Not here: reading pairs from TSV files (tests/examples/test_translate.c). */
#include <criterion/criterion.h>
#include <string.h>

#include "attograd.h"

Test(txt_pair_batch, pads_and_places_bos_eos) {
    /* source words a b c d are ids 4..7, target words x y z w ids 4..7 */
    enum { a = 4, bb, c, dd };
    enum { x = 4, y, z, w };
    int s0[] = {a, bb, c}, t0[] = {x, y}, s1[] = {bb}, t1[] = {z, x, y, w}, s2[] = {a, bb, c, dd},
        t2[] = {x};
    TxtPair pairs[3] = {{s0, t0, 3, 2, 1}, {s1, t1, 1, 4, 2}, {s2, t2, 4, 1, 3}};
    TxtPairBatch b;
    memset(&b, 0, sizeof b);
    int rows[3] = {1, 0, 2};
    txt_pair_batch_make(&b, pairs, rows, 3);
    cr_assert_eq(b.B, 3);
    cr_assert_eq(b.S, 5, "longest source (4) + EOS");
    cr_assert_eq(b.T, 5, "longest target (4) + BOS/EOS");
    const int P = TXT_PAD, E = TXT_EOS, O = TXT_BOS;
    int src[3][5] = {{bb, E, P, P, P}, {a, bb, c, E, P}, {a, bb, c, dd, E}};
    int tin[3][5] = {{O, z, x, y, w}, {O, x, y, P, P}, {O, x, P, P, P}};
    int tout[3][5] = {{z, x, y, w, E}, {x, y, E, P, P}, {x, E, P, P, P}};
    for (int r = 0; r < 3; r++) {
        cr_assert_eq(b.rows[r], rows[r]);
        for (int i = 0; i < 5; i++) {
            cr_assert_eq(b.src[r * 5 + i], src[r][i], "src (%d,%d)", r, i);
            cr_assert_eq(b.tgt_in[r * 5 + i], tin[r][i], "tgt_in (%d,%d)", r, i);
            cr_assert_eq(b.tgt_out[r * 5 + i], tout[r][i], "tgt_out (%d,%d)", r, i);
        }
    }
    cr_assert_eq(b.n_src_tokens, 2 + 4 + 5);
    cr_assert_eq(b.n_tgt_tokens, 5 + 3 + 2);
    /* the model's padding masks: 1 exactly past each row's length */
    Arena *ar = arena_new("masks", 1 << 16);
    Tape *tape = ag_tape_new(ar);
    AgMask ms = nn_padding_mask(tape, b.src, b.B, b.S, TXT_PAD);
    AgMask mt = nn_padding_mask(tape, b.tgt_in, b.B, b.T, TXT_PAD);
    int src_len[3] = {2, 4, 5}, tgt_len[3] = {5, 3, 2};
    cr_assert(ms.B == 3 && ms.T == 5 && mt.B == 3 && mt.T == 5);
    for (int r = 0; r < 3; r++)
        for (int i = 0; i < 5; i++) {
            cr_assert_eq(ms.data[r * 5 + i], i >= src_len[r], "source mask (%d,%d)", r, i);
            cr_assert_eq(mt.data[r * 5 + i], i >= tgt_len[r], "target mask (%d,%d)", r, i);
        }
    ag_tape_free(tape);
    arena_free(ar);
    /* a smaller batch reuses the buffers */
    txt_pair_batch_make(&b, pairs, rows + 1, 1);
    cr_assert(b.B == 1 && b.S == 4 && b.T == 3);
    txt_pair_batch_free(&b);
}

Test(txt_pair_loader, buckets_by_length_and_covers_every_pair_each_epoch) {
    /* 203 pairs of 1 to 12 tokens a side (a copy task), drawn from a seeded RNG */
    static int ids[203][12];
    TxtPair pairs[203];
    Rng rng;
    rng_seed(&rng, 5);
    for (int i = 0; i < 203; i++) {
        int len = 1 + (int)rng_below(&rng, 12);
        for (int k = 0; k < len; k++) ids[i][k] = 4 + (int)rng_below(&rng, 8);
        pairs[i] = (TxtPair){ids[i], ids[i], len, len, i + 1};
    }
    TxtPairLoader l;
    txt_pair_loader_init(&l, pairs, 203, 16, 99);
    cr_assert_eq(l.n_batches, 13, "ceil(203 / 16)");
    TxtPairBatch b;
    memset(&b, 0, sizeof b);
    int seen[203], first_rows[2][16], spread = 0, full = 0;
    for (int e = 0; e < 2; e++) {
        memset(seen, 0, sizeof seen);
        for (int k = 0; k < l.n_batches; k++) {
            txt_pair_loader_next(&l, &b);
            cr_assert_eq(l.epoch, e);
            int lo = 1 << 30, hi = 0;
            for (int r = 0; r < b.B; r++) {
                seen[b.rows[r]]++;
                int len = pairs[b.rows[r]].src_len;
                lo = len < lo ? len : lo;
                hi = len > hi ? len : hi;
            }
            if (b.B == 16) {
                spread += hi - lo;
                full++;
            }
            if (k == 0) memcpy(first_rows[e], b.rows, sizeof first_rows[e]);
        }
        for (int i = 0; i < 203; i++) cr_assert_eq(seen[i], 1, "epoch %d: pair %d", e, i);
    }
    cr_assert_eq(full, 24, "12 full batches an epoch, one of 11");
    /* sorted by length: 203 pairs over 12 lengths, so a batch spans about one length */
    cr_assert(spread <= full, "a batch of 16 spans %d lengths on average",
              spread / (full ? full : 1));
    cr_assert(memcmp(first_rows[0], first_rows[1], sizeof first_rows[0]) != 0,
              "each epoch has another order");
    /* the position is the whole state: seeking reproduces the batches; so does the seed */
    txt_pair_loader_seek(&l, 7, 5);
    txt_pair_loader_next(&l, &b);
    int want[16], want_B = b.B;
    memcpy(want, b.rows, (size_t)b.B * sizeof(int));
    TxtPairLoader l2;
    txt_pair_loader_init(&l2, pairs, 203, 16, 99);
    for (int k = 0; k < 7 * 13 + 5; k++) txt_pair_loader_next(&l2, &b);
    txt_pair_loader_next(&l2, &b);
    cr_assert_eq(b.B, want_B);
    cr_assert_arr_eq(b.rows, want, (size_t)b.B * sizeof(int));
    txt_pair_loader_free(&l2);
    txt_pair_loader_free(&l);
    txt_pair_batch_free(&b);
}
