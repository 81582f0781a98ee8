/* test_pairs.c: sentence pairs' batches and loader (src/text/pairs.h). A batch holds the
 * source then EOS, BOS then the target, the target then EOS, PAD after, and its padding masks
 * (nn_padding_mask) match the lengths; the loader covers every pair once an epoch in batches of
 * about one length, changes the order each epoch, and its position (epoch, cursor) is its
 * whole state: seeking reproduces the batches. txt_pairs_read reads TSV files of them: growing
 * the vocabularies or counting unknown words, and each malformed line named. */
#include <criterion/criterion.h>
#include <string.h>

#include "attograd.h"
#include "files.h"

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

Test(txt_pairs_read, reads_pairs_growing_or_counting_unknown_words) {
    char dir[64], path[512];
    ts_tmp_dir(dir, sizeof dir, "pairs-read");
    ts_join(path, dir, "d.tsv");
    ts_write_text(path, "a b c\tx y\r\nb\tz x y w\n");
    TxtVocab s, t;
    txt_vocab_init(&s);
    txt_vocab_init(&t);
    TxtPairSet d;
    cr_assert_eq(txt_pairs_read(path, &d, &s, &t, 1, 0), AG_OK, "%s", ag_last_error());
    cr_assert_eq(d.n, 2);
    cr_assert_eq(d.pairs[0].src_len, 3);
    cr_assert_eq(d.pairs[0].tgt_len, 2);
    cr_assert_eq(d.pairs[1].src_len, 1);
    cr_assert_eq(d.pairs[1].tgt_len, 4);
    cr_assert_eq(d.pairs[1].line, 2);
    cr_assert_eq(d.max_src, 3);
    cr_assert_eq(d.max_tgt, 4);
    cr_assert_eq(s.n, TXT_N_SPECIAL + 3);
    cr_assert_eq(t.n, TXT_N_SPECIAL + 4);
    cr_assert_eq(d.pairs[1].src[0], txt_vocab_find(&s, "b", 1));
    cr_assert_eq(d.pairs[1].tgt[3], txt_vocab_find(&t, "w", 1));
    txt_pairs_free(&d);
    /* a fixed vocabulary: unknown words become UNK and are counted */
    ts_write_text(path, "a q\tx r s\n");
    cr_assert_eq(txt_pairs_read(path, &d, &s, &t, 0, 0), AG_OK);
    cr_assert_eq(d.pairs[0].src[1], TXT_UNK);
    cr_assert_eq(d.n_unk_src, 1);
    cr_assert_eq(d.n_unk_tgt, 2);
    cr_assert_eq(s.n, TXT_N_SPECIAL + 3, "a fixed vocabulary does not grow");
    txt_pairs_free(&d);
    /* a byte-order mark opens the file: skipped, so the first word is the same "a" */
    ts_write_text(path, "\xef\xbb\xbf"
                        "a b\tx\r\n");
    cr_assert_eq(txt_pairs_read(path, &d, &s, &t, 1, 0), AG_OK, "%s", ag_last_error());
    cr_assert_eq(d.pairs[0].src[0], txt_vocab_find(&s, "a", 1));
    cr_assert_eq(s.n, TXT_N_SPECIAL + 3, "no second 'a' with a mark in front");
    txt_pairs_free(&d);
    txt_vocab_free(&s);
    txt_vocab_free(&t);
    ts_rm_tree(dir);
}

Test(txt_pairs_read, malformed_lines_name_the_line) {
    static const struct {
        const char *text, *message;
        int code;
    } cases[] = {
        {"a\tb\nc d\n", ":2: the line has no tab", AG_ERR_FORMAT},
        {"a\tb\tc\n", ":1: the line has more than one tab", AG_ERR_FORMAT},
        {"a\tb\n\nc\td\n", ":2: the line is empty", AG_ERR_FORMAT},
        {"a  b\tc\n", ":1: the source has two spaces in a row", AG_ERR_FORMAT},
        {"a b\t c\n", ":1: the target starts with a space", AG_ERR_FORMAT},
        {"a\tb\na b \tc\n", ":2: the source ends with a space", AG_ERR_FORMAT},
        {"\tb\n", ":1: the source is empty", AG_ERR_FORMAT},
        {"a\t\n", ":1: the target is empty", AG_ERR_FORMAT},
        {"a\tb\rc\n", ":1: the target contains a control character", AG_ERR_FORMAT},
        {"a\tb\nc\xe9\td\n", ":2: the line is not valid UTF-8 (byte 2 is 0xe9)", AG_ERR_FORMAT},
        {"\xef\xbb\xbf\xff\tb\n", ":1: the line is not valid UTF-8 (byte 4 is 0xff)",
         AG_ERR_FORMAT},
        {"a b c d e f\tb\n", ":1: the source has 6 tokens; the model allows 5", AG_ERR_FORMAT},
        {"", ": no sentence pairs", AG_ERR_FORMAT},
    };
    char dir[64], path[512];
    ts_tmp_dir(dir, sizeof dir, "pairs-read");
    ts_join(path, dir, "bad.tsv");
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        ts_write_text(path, cases[i].text);
        TxtVocab s, t;
        txt_vocab_init(&s);
        txt_vocab_init(&t);
        TxtPairSet d;
        int rc = txt_pairs_read(path, &d, &s, &t, 1, 5);
        cr_assert_eq(rc, cases[i].code, "case %zu: %d", i, rc);
        cr_assert(strstr(ag_last_error(), path) && strstr(ag_last_error(), cases[i].message),
                  "case %zu: '%s' lacks '%s'", i, ag_last_error(), cases[i].message);
        cr_assert(d.pairs == NULL && d.n == 0);
        txt_vocab_free(&s);
        txt_vocab_free(&t);
    }
    TxtVocab s, t;
    txt_vocab_init(&s);
    txt_vocab_init(&t);
    TxtPairSet d;
    ts_join(path, dir, "missing.tsv");
    cr_assert_eq(txt_pairs_read(path, &d, &s, &t, 1, 0), AG_ERR_IO);
    cr_assert(strstr(ag_last_error(), "missing.tsv: cannot open: No such file") != NULL, "%s",
              ag_last_error());
    /* a folder (or a device) is refused before it is read */
    cr_assert_eq(txt_pairs_read(dir, &d, &s, &t, 1, 0), AG_ERR_IO);
    cr_assert(strstr(ag_last_error(), ": is a folder: only regular files and pipes are read"), "%s",
              ag_last_error());
    txt_vocab_free(&s);
    txt_vocab_free(&t);
    ts_rm_tree(dir);
}

Test(txt_pairs_by_length, sorts_a_range_by_source_then_target_length_then_index) {
    int ids[8] = {0};
    /* (source length, target length) of pairs 0..5 */
    const int len[6][2] = {{3, 1}, {1, 2}, {3, 1}, {1, 1}, {2, 5}, {1, 2}};
    TxtPair p[6];
    for (int i = 0; i < 6; i++) p[i] = (TxtPair){ids, ids, len[i][0], len[i][1], i + 1};
    int rows[6];
    txt_pairs_by_length(p, 0, 6, rows);
    const int want[6] = {3, 1, 5, 4, 0, 2};
    for (int i = 0; i < 6; i++) cr_assert_eq(rows[i], want[i], "row %d: %d", i, rows[i]);
    /* a range: indices stay the pairs' own */
    txt_pairs_by_length(p, 2, 3, rows);
    cr_assert(rows[0] == 3 && rows[1] == 4 && rows[2] == 2, "%d %d %d", rows[0], rows[1], rows[2]);
}
