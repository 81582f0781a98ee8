/* test_tokenizer.c: the tokenizers of src/text. The BPE trainer against a plain reference written
 * here (recount every pair at every step, as minbpe does, with the documented tie-break), on
 * texts made to have many ties and overlaps; encoding against minbpe's encode loop; the
 * Wikipedia example "aaabdaaabac" by hand; GPT-2-like chunks by hand; decode(encode(s)) == s
 * over random byte strings; special tokens; determinism; the saved form (round trip, every
 * truncation and hostile values refused naming the label and the reason).
 * Not here: shards and the window loader (test_shards.c), the fuzz harnesses (fuzz/). */
#include <criterion/criterion.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "attograd.h"
#include "files.h"
#include "text/text_internal.h"

/* ---- a reference trainer and encoder, written the slow, obvious way ---- */

typedef struct {
    int *s;
    int n;
} Seq;

/* the chunks of text under split (the chunker itself is tested by hand below) */
static Seq *ref_chunks(const uint8_t *text, size_t n, TxtSplit split, int *n_chunks) {
    Seq *c = malloc((n + 1) * sizeof *c);
    int k = 0;
    for (size_t i = 0; i < n;) {
        size_t len = split == TXT_SPLIT_GPT2 ? txt_gpt2_chunk_(text + i, n - i) : n - i;
        c[k].s = malloc(len * sizeof(int));
        c[k].n = (int)len;
        for (size_t j = 0; j < len; j++) c[k].s[j] = text[i + j];
        k++;
        i += len;
    }
    *n_chunks = k;
    return c;
}

/* merges all occurrences of (a, b) in s, left to right (minbpe's merge) */
static void ref_merge(Seq *s, int a, int b, int c) {
    int w = 0;
    for (int i = 0; i < s->n;) {
        if (i + 1 < s->n && s->s[i] == a && s->s[i + 1] == b) {
            s->s[w++] = c;
            i += 2;
        } else {
            s->s[w++] = s->s[i++];
        }
    }
    s->n = w;
}

/* minbpe's train with the tie-break of txt_bpe_train: merges into out (2 ints each) */
static int ref_train(const uint8_t *text, size_t n, int vocab, TxtSplit split, int *out) {
    int nc;
    Seq *c = ref_chunks(text, n, split, &nc);
    int nm = 0;
    int64_t *count = malloc((size_t)vocab * vocab * sizeof *count);
    while (256 + nm < vocab) {
        int V = 256 + nm;
        memset(count, 0, (size_t)V * V * sizeof *count);
        for (int k = 0; k < nc; k++)
            for (int i = 0; i + 1 < c[k].n; i++) count[(size_t)c[k].s[i] * V + c[k].s[i + 1]]++;
        int64_t best = 0;
        int ba = -1, bb = -1;
        for (int a = 0; a < V; a++)
            for (int b = 0; b < V; b++)
                if (count[(size_t)a * V + b] > best) { /* strictly: the lowest (a, b) wins ties */
                    best = count[(size_t)a * V + b];
                    ba = a;
                    bb = b;
                }
        if (best < 2) break;
        out[2 * nm] = ba;
        out[2 * nm + 1] = bb;
        for (int k = 0; k < nc; k++) ref_merge(&c[k], ba, bb, V);
        nm++;
    }
    for (int k = 0; k < nc; k++) free(c[k].s);
    free(c);
    free(count);
    return nm;
}

/* minbpe's encode: while some adjacent pair is a merge, merge the lowest-ranked one everywhere */
static int ref_encode(const int *merges, int nm, const uint8_t *text, size_t n, TxtSplit split,
                      int *out) {
    int nc, no = 0;
    Seq *c = ref_chunks(text, n, split, &nc);
    for (int k = 0; k < nc; k++) {
        for (;;) {
            int best = -1;
            for (int i = 0; i + 1 < c[k].n; i++)
                for (int r = 0; r < nm; r++)
                    if (merges[2 * r] == c[k].s[i] && merges[2 * r + 1] == c[k].s[i + 1] &&
                        (best < 0 || r < best))
                        best = r;
            if (best < 0) break;
            ref_merge(&c[k], merges[2 * best], merges[2 * best + 1], 256 + best);
        }
        for (int i = 0; i < c[k].n; i++) out[no++] = c[k].s[i];
        free(c[k].s);
    }
    free(c);
    return no;
}

/* a text over a small alphabet: many equal counts (ties) and runs (overlapping pairs) */
static uint8_t *random_text(Rng *r, size_t n, const char *alphabet) {
    uint8_t *t = malloc(n + 1);
    size_t m = strlen(alphabet);
    for (size_t i = 0; i < n; i++) t[i] = (uint8_t)alphabet[rng_below(r, m)];
    t[n] = 0;
    return t;
}

static TxtTokenizer *train(const void *text, size_t n, int vocab, TxtSplit split) {
    TxtTokenizer *t;
    int rc = txt_bpe_train(text, n, vocab, split, "test", &t);
    cr_assert_eq(rc, AG_OK, "%s", ag_last_error());
    return t;
}

/* ---- BPE training ---- */

Test(txt_bpe, wikipedia_example_merges_aa_then_ab_then_ZY) {
    const char *s = "aaabdaaabac";
    TxtTokenizer *t = train(s, strlen(s), 256 + 3, TXT_SPLIT_NONE);
    cr_assert_eq(txt_n_merges(t), 3);
    int a, b;
    txt_merge(t, 0, &a, &b);
    cr_assert(a == 'a' && b == 'a', "merge 0 = (%d, %d)", a, b); /* aa: 4 times -> Z */
    txt_merge(t, 1, &a, &b);
    cr_assert(a == 'a' && b == 'b', "merge 1 = (%d, %d)", a, b); /* ab and Za: 2 each; ab wins */
    txt_merge(t, 2, &a, &b);
    cr_assert(a == 256 && b == 257, "merge 2 = (%d, %d)", a, b); /* ZY -> X */
    int ids[16];
    size_t n;
    cr_assert_eq(txt_encode(t, s, strlen(s), TXT_SPECIAL_ORDINARY, ids, 16, &n, "t"), AG_OK);
    int want[] = {258, 'd', 258, 'a', 'c'}; /* XdXac */
    cr_assert_eq(n, 5);
    for (int i = 0; i < 5; i++) cr_assert_eq(ids[i], want[i], "id %d: %d", i, ids[i]);
    size_t len;
    const uint8_t *p = txt_token_bytes(t, 258, &len);
    cr_assert(len == 4 && memcmp(p, "aaab", 4) == 0);
    txt_free(t);
}

Test(txt_bpe, stops_when_no_pair_occurs_twice) {
    TxtTokenizer *t = train("abcdef", 6, 1000, TXT_SPLIT_NONE);
    cr_assert_eq(txt_n_merges(t), 0);
    cr_assert_eq(txt_vocab_size(t), 256);
    txt_free(t);
}

Test(txt_bpe, merges_equal_the_reference_trainer_on_texts_full_of_ties_and_runs) {
    Rng r;
    rng_seed(&r, 7);
    const char *alphabets[] = {"ab", "aab c", "xyz  \n'", "aaaab", "ab1 2'st\n"};
    int checked = 0;
    for (int trial = 0; trial < 20; trial++) {
        size_t n = 50 + rng_below(&r, 400);
        uint8_t *text = random_text(&r, n, alphabets[trial % 5]);
        TxtSplit split = trial % 2 ? TXT_SPLIT_GPT2 : TXT_SPLIT_NONE;
        int vocab = 256 + 1 + (int)rng_below(&r, 60);
        int *want = malloc(2 * 400 * sizeof *want);
        int nm = ref_train(text, n, vocab, split, want);
        TxtTokenizer *t = train(text, n, vocab, split);
        cr_assert_eq(txt_n_merges(t), nm, "trial %d: %d merges, the reference %d", trial,
                     txt_n_merges(t), nm);
        for (int k = 0; k < nm; k++) {
            int a, b;
            txt_merge(t, k, &a, &b);
            cr_assert(a == want[2 * k] && b == want[2 * k + 1],
                      "trial %d merge %d: (%d, %d), the reference (%d, %d)", trial, k, a, b,
                      want[2 * k], want[2 * k + 1]);
        }
        checked += nm;
        /* encoding a new text of the same kind: minbpe's loop gives the same ids */
        uint8_t *other = random_text(&r, n, alphabets[trial % 5]);
        int *ids = malloc(n * sizeof *ids), *ref = malloc(n * sizeof *ref);
        size_t n_ids;
        cr_assert_eq(txt_encode(t, other, n, TXT_SPECIAL_ORDINARY, ids, n, &n_ids, "t"), AG_OK);
        int n_ref = ref_encode(want, nm, other, n, split, ref);
        cr_assert_eq((int)n_ids, n_ref, "trial %d: %zu ids, the reference %d", trial, n_ids, n_ref);
        for (int i = 0; i < n_ref; i++) cr_assert_eq(ids[i], ref[i], "trial %d id %d", trial, i);
        free(ids);
        free(ref);
        free(other);
        free(want);
        free(text);
        txt_free(t);
    }
    cr_assert_gt(checked, 200, "only %d merges compared", checked);
}

Test(txt_bpe, training_is_deterministic) {
    Rng r;
    rng_seed(&r, 3);
    uint8_t *text = random_text(&r, 20000, "the cat sat on a mat\n");
    size_t n1, n2;
    TxtTokenizer *a = train(text, 20000, 600, TXT_SPLIT_GPT2);
    TxtTokenizer *b = train(text, 20000, 600, TXT_SPLIT_GPT2);
    uint8_t *ba = txt_to_bytes(a, &n1), *bb = txt_to_bytes(b, &n2);
    cr_assert(n1 == n2 && memcmp(ba, bb, n1) == 0);
    cr_assert_gt(txt_n_merges(a), 100);
    free(ba);
    free(bb);
    txt_free(a);
    txt_free(b);
    free(text);
}

Test(txt_bpe, a_run_of_one_byte_never_makes_a_token_over_the_length_limit) {
    size_t n = 3 * TXT_MAX_TOKEN_LEN;
    char *text = malloc(n);
    memset(text, 'a', n);
    TxtTokenizer *t = train(text, n, 300, TXT_SPLIT_NONE);
    int longest = 0;
    for (int id = 0; id < txt_vocab_size(t); id++) {
        size_t len;
        txt_token_bytes(t, id, &len);
        if ((int)len > longest) longest = (int)len;
    }
    /* a, aa, aaaa, ... 4096: 12 merges, the next would be 8192 bytes */
    cr_assert_eq(longest, TXT_MAX_TOKEN_LEN);
    int *ids;
    size_t n_ids;
    cr_assert_eq(txt_encode_alloc(t, text, n, TXT_SPECIAL_ORDINARY, &ids, &n_ids, "t"), AG_OK);
    cr_assert_eq(n_ids, 3);
    free(ids);
    free(text);
    txt_free(t);
}

Test(txt_bpe, bad_arguments_are_refused_naming_the_label) {
    TxtTokenizer *t;
    cr_assert_eq(txt_bpe_train("ab", 2, 255, TXT_SPLIT_NONE, "corpus.txt", &t), AG_ERR_ARG);
    cr_assert(strstr(ag_last_error(), "corpus.txt") && strstr(ag_last_error(), "255"), "%s",
              ag_last_error());
    cr_assert_null(t);
    cr_assert_eq(txt_bpe_train("ab", 2, 300, (TxtSplit)5, "corpus.txt", &t), AG_ERR_ARG);
}

/* ---- GPT-2-like chunks ---- */

static void check_chunks(const char *text, const char *const *want) {
    size_t n = strlen(text), i = 0;
    int k = 0;
    while (i < n) {
        size_t len = txt_gpt2_chunk_((const uint8_t *)text + i, n - i);
        cr_assert(want[k], "'%s': more chunks than expected, at '%s'", text, text + i);
        cr_assert(len == strlen(want[k]) && memcmp(text + i, want[k], len) == 0,
                  "'%s': chunk %d is '%.*s', expected '%s'", text, k, (int)len, text + i, want[k]);
        i += len;
        k++;
    }
    cr_assert_null(want[k], "'%s': fewer chunks than expected", text);
}

Test(txt_split, gpt2_chunks_follow_the_pattern_of_gpt2) {
    check_chunks("Hello world", (const char *[]){"Hello", " world", NULL});
    check_chunks("I'll say 'tis 42!!",
                 (const char *[]){"I", "'ll", " say", " '", "tis", " 42", "!!", NULL});
    check_chunks("a  b", (const char *[]){"a", " ", " b", NULL});
    check_chunks("end.\n\nNext", (const char *[]){"end", ".", "\n", "\n", "Next", NULL});
    check_chunks("x \n  y", (const char *[]){"x", " \n ", " y", NULL});
    check_chunks("tail   ", (const char *[]){"tail", "   ", NULL});
    check_chunks("caf\xc3\xa9 ok", (const char *[]){"caf\xc3\xa9", " ok", NULL});
    check_chunks("we're 3d", (const char *[]){"we", "'re", " 3", "d", NULL});
}

/* ---- round trips ---- */

static void check_round_trip(const TxtTokenizer *t, const uint8_t *s, size_t n,
                             TxtSpecialMode mode) {
    int *ids;
    size_t n_ids;
    cr_assert_eq(txt_encode_alloc(t, s, n, mode, &ids, &n_ids, "rt"), AG_OK, "%s", ag_last_error());
    cr_assert_leq(n_ids, n);
    for (size_t i = 0; i < n_ids; i++)
        cr_assert(ids[i] >= 0 && ids[i] < txt_vocab_size(t), "id %d", ids[i]);
    char *back;
    size_t len;
    cr_assert_eq(txt_decode_alloc(t, ids, n_ids, &back, &len, "rt"), AG_OK);
    cr_assert(len == n && memcmp(back, s, n) == 0, "decode(encode(s)) != s (%zu bytes, %zu back)",
              n, len);
    free(back);
    free(ids);
}

Test(txt_round_trip, decode_of_encode_is_the_text_for_random_byte_strings) {
    Rng r;
    rng_seed(&r, 11);
    /* tokenizers trained on text, then fed any bytes at all */
    uint8_t *train_text = random_text(&r, 30000, "the quick brown fox\n\xc3\xa9\xe2\x80\x94 0123");
    TxtTokenizer *toks[3];
    toks[0] = train(train_text, 30000, 700, TXT_SPLIT_GPT2);
    toks[1] = train(train_text, 30000, 700, TXT_SPLIT_NONE);
    uint8_t all[256];
    for (int b = 0; b < 256; b++) all[b] = (uint8_t)b;
    toks[2] = txt_char_new(all, 256);
    for (int k = 0; k < 3; k++) {
        cr_assert_geq(txt_add_special(toks[k], "<|endoftext|>"), 0);
        cr_assert_geq(txt_add_special(toks[k], "<|end|>"), 0);
    }
    for (int trial = 0; trial < 300; trial++) {
        size_t n = rng_below(&r, 300);
        uint8_t *s = malloc(n + 1);
        for (size_t i = 0; i < n; i++) {
            uint64_t kind = rng_below(&r, 4);
            s[i] = kind == 0   ? (uint8_t)rng_below(&r, 256)
                   : kind == 1 ? train_text[rng_below(&r, 30000)]
                               : " \n<|endoftext|>"[rng_below(&r, 15)];
        }
        for (int k = 0; k < 3; k++) {
            check_round_trip(toks[k], s, n, TXT_SPECIAL_ORDINARY);
            check_round_trip(toks[k], s, n, TXT_SPECIAL_ALLOW);
        }
        free(s);
    }
    for (int k = 0; k < 3; k++) txt_free(toks[k]);
    free(train_text);
}

Test(txt_round_trip, bpe_compresses_the_text_it_was_trained_on) {
    Rng r;
    rng_seed(&r, 5);
    uint8_t *text = random_text(&r, 50000, "to be or not ");
    TxtTokenizer *t = train(text, 50000, 512, TXT_SPLIT_GPT2);
    int *ids;
    size_t n_ids;
    cr_assert_eq(txt_encode_alloc(t, text, 50000, TXT_SPECIAL_ORDINARY, &ids, &n_ids, "t"), AG_OK);
    cr_assert_lt(n_ids, 50000 / 2, "%zu tokens for 50000 bytes", n_ids);
    check_round_trip(t, text, 50000, TXT_SPECIAL_ORDINARY);
    free(ids);
    free(text);
    txt_free(t);
}

/* ---- character level ---- */

Test(txt_char, ids_are_the_distinct_bytes_in_order_and_unknown_bytes_are_named) {
    const char *s = "hello world";
    TxtTokenizer *t = txt_char_new(s, strlen(s));
    cr_assert_eq(txt_kind(t), TXT_CHAR);
    cr_assert_eq(txt_vocab_size(t), 8); /* ' ' d e h l o r w */
    int ids[16];
    size_t n;
    cr_assert_eq(txt_encode(t, "hold", 4, TXT_SPECIAL_ORDINARY, ids, 16, &n, "t"), AG_OK);
    int want[] = {3, 5, 4, 1};
    for (int i = 0; i < 4; i++) cr_assert_eq(ids[i], want[i]);
    cr_assert_eq(txt_encode(t, "hold~", 5, TXT_SPECIAL_ORDINARY, ids, 16, &n, "prompt"),
                 AG_ERR_RANGE);
    cr_assert(strstr(ag_last_error(), "prompt: byte 0x7e ('~') at offset 4"), "%s",
              ag_last_error());
    char out[8];
    cr_assert_eq(txt_decode(t, want, 4, out, sizeof out, "t"), 4);
    cr_assert(memcmp(out, "hold", 4) == 0);
    int bad = 8;
    cr_assert_eq(txt_decode(t, &bad, 1, out, sizeof out, "sample"), AG_ERR_RANGE);
    cr_assert(strstr(ag_last_error(), "sample: id 8"), "%s", ag_last_error());
    txt_free(t);
}

Test(txt_encode, a_full_buffer_is_refused_with_the_count_written) {
    TxtTokenizer *t = txt_char_new("abc", 3);
    int ids[2];
    size_t n;
    cr_assert_eq(txt_encode(t, "abcabc", 6, TXT_SPECIAL_ORDINARY, ids, 2, &n, "t"), AG_ERR_NOMEM);
    cr_assert_eq(n, 2);
    cr_assert(strstr(ag_last_error(), "more than 2 ids"), "%s", ag_last_error());
    txt_free(t);
}

Test(txt_decode, sizes_a_buffer_and_truncates_to_its_room) {
    TxtTokenizer *t = txt_char_new("abc", 3);
    int ids[] = {0, 1, 2, 2};
    cr_assert_eq(txt_decode(t, ids, 4, NULL, 0, "t"), 4);
    char out[3] = {0};
    cr_assert_eq(txt_decode(t, ids, 4, out, 2, "t"), 4);
    cr_assert(out[0] == 'a' && out[1] == 'b' && out[2] == 0);
    txt_free(t);
}

Test(txt_token_bytes, an_id_outside_the_vocabulary_aborts, .signal = SIGABRT) {
    TxtTokenizer *t = txt_char_new("abc", 3);
    size_t len;
    txt_token_bytes(t, 3, &len);
}

/* ---- special tokens ---- */

Test(txt_special, allowed_specials_are_one_id_and_ordinary_ones_are_text) {
    const char *train_text = "hello world <|endoftext|> hello again";
    TxtTokenizer *t = train(train_text, strlen(train_text), 300, TXT_SPLIT_GPT2);
    int eot = txt_add_special(t, "<|endoftext|>");
    cr_assert_eq(eot, 256 + txt_n_merges(t));
    int longer = txt_add_special(t, "<|endoftext|>!");
    cr_assert_eq(txt_special_id(t, "<|endoftext|>"), eot);
    cr_assert_eq(txt_special_id(t, "<|nothing|>"), -1);
    const char *s = "hi<|endoftext|>yo<|endoftext|>!<|endoftext";
    int ids[64];
    size_t n;
    cr_assert_eq(txt_encode(t, s, strlen(s), TXT_SPECIAL_ALLOW, ids, 64, &n, "t"), AG_OK);
    int n_eot = 0, n_longer = 0;
    for (size_t i = 0; i < n; i++) n_eot += ids[i] == eot, n_longer += ids[i] == longer;
    cr_assert(n_eot == 1 && n_longer == 1, "%d and %d", n_eot, n_longer); /* the longest first */
    cr_assert_eq(txt_encode(t, s, strlen(s), TXT_SPECIAL_ORDINARY, ids, 64, &n, "t"), AG_OK);
    for (size_t i = 0; i < n; i++) cr_assert(ids[i] < eot);
    check_round_trip(t, (const uint8_t *)s, strlen(s), TXT_SPECIAL_ALLOW);
    cr_assert_eq(txt_add_special(t, "<|endoftext|>"), AG_ERR_ARG);
    cr_assert(strstr(ag_last_error(), "already"), "%s", ag_last_error());
    cr_assert_eq(txt_add_special(t, ""), AG_ERR_ARG);
    char big[TXT_MAX_SPECIAL_LEN + 2];
    memset(big, 'x', sizeof big - 1);
    big[sizeof big - 1] = 0;
    cr_assert_eq(txt_add_special(t, big), AG_ERR_ARG);
    txt_free(t);
}

/* ---- the saved form ---- */

static TxtTokenizer *sample_bpe(void) {
    Rng r;
    rng_seed(&r, 9);
    uint8_t *text = random_text(&r, 5000, "lorem ipsum dolor\n");
    TxtTokenizer *t = train(text, 5000, 320, TXT_SPLIT_GPT2);
    txt_add_special(t, "<|endoftext|>");
    free(text);
    return t;
}

static void check_same(const TxtTokenizer *a, const TxtTokenizer *b) {
    cr_assert_eq(txt_kind(a), txt_kind(b));
    cr_assert_eq(txt_split(a), txt_split(b));
    cr_assert_eq(txt_vocab_size(a), txt_vocab_size(b));
    for (int id = 0; id < txt_vocab_size(a); id++) {
        size_t la, lb;
        const uint8_t *pa = txt_token_bytes(a, id, &la), *pb = txt_token_bytes(b, id, &lb);
        cr_assert(la == lb && memcmp(pa, pb, la) == 0, "id %d differs", id);
    }
    const char *s = "lorem ipsum<|endoftext|> dolor";
    int ia[64], ib[64];
    size_t na, nb;
    cr_assert_eq(txt_encode(a, s, strlen(s), TXT_SPECIAL_ALLOW, ia, 64, &na, "a"), AG_OK);
    cr_assert_eq(txt_encode(b, s, strlen(s), TXT_SPECIAL_ALLOW, ib, 64, &nb, "b"), AG_OK);
    cr_assert(na == nb && memcmp(ia, ib, na * sizeof *ia) == 0);
}

Test(txt_saved, bytes_and_files_load_back_the_same_tokenizer) {
    TxtTokenizer *toks[2] = {sample_bpe(), txt_char_new("lorem ipsum<|endoftext|> dolor", 30)};
    txt_add_special(toks[1], "<|endoftext|>");
    char dir[256], path[512];
    ts_tmp_dir(dir, sizeof dir, "text");
    for (int k = 0; k < 2; k++) {
        size_t n, n2;
        uint8_t *b = txt_to_bytes(toks[k], &n);
        TxtTokenizer *back;
        cr_assert_eq(txt_from_bytes(b, n, "bytes", &back), AG_OK, "%s", ag_last_error());
        check_same(toks[k], back);
        uint8_t *b2 = txt_to_bytes(back, &n2);
        cr_assert(n == n2 && memcmp(b, b2, n) == 0, "saving again gives other bytes");
        txt_free(back);
        ts_join(path, dir, k ? "char.npz" : "bpe.npz");
        cr_assert_eq(txt_save(toks[k], path), AG_OK, "%s", ag_last_error());
        cr_assert_eq(txt_load(path, &back), AG_OK, "%s", ag_last_error());
        check_same(toks[k], back);
        txt_free(back);
        free(b);
        free(b2);
    }
    /* a file that is an .npz but not a tokenizer, and a missing file */
    ts_join(path, dir, "other.npz");
    NpzWriter *w = npz_writer_new();
    npz_add_bytes(w, "meta.extra", "x", 1);
    cr_assert_eq(npz_write(w, path, 0, NULL), AG_OK);
    npz_writer_free(w);
    TxtTokenizer *t;
    cr_assert_eq(txt_load(path, &t), AG_ERR_FORMAT);
    cr_assert(strstr(ag_last_error(), path) && strstr(ag_last_error(), "no entry 'tokenizer'"),
              "%s", ag_last_error());
    ts_join(path, dir, "missing.npz");
    cr_assert_eq(txt_load(path, &t), AG_ERR_IO);
    cr_assert(strstr(ag_last_error(), path), "%s", ag_last_error());
    ts_rm_tree(dir);
    txt_free(toks[0]);
    txt_free(toks[1]);
}

Test(txt_saved, every_truncation_is_refused_naming_the_label) {
    TxtTokenizer *t = sample_bpe();
    size_t n;
    uint8_t *b = txt_to_bytes(t, &n);
    for (size_t k = 0; k < n; k++) {
        TxtTokenizer *back = (TxtTokenizer *)1;
        int rc = txt_from_bytes(b, k, "cut.tok", &back);
        cr_assert(rc == AG_ERR_FORMAT || rc == AG_ERR_RANGE, "%zu of %zu bytes: rc %d", k, n, rc);
        cr_assert_null(back);
        cr_assert(strncmp(ag_last_error(), "cut.tok: ", 9) == 0, "%s", ag_last_error());
    }
    free(b);
    txt_free(t);
}

static void put32le(uint8_t *p, uint32_t v) {
    for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}

/* a BPE tokenizer's bytes made by hand: n_merges merges from m, specials from sp */
static uint8_t *hand_bpe(uint32_t n_merges, const uint32_t *m, int n_sp, const char *const *sp,
                         size_t *len) {
    size_t n = 32 + 8 * (size_t)n_merges;
    for (int k = 0; k < n_sp; k++) n += 4 + strlen(sp[k]);
    uint8_t *b = calloc(1, n), *p = b + 32;
    memcpy(b, "ATGTOKEN", 8);
    put32le(b + 8, 1);
    put32le(b + 12, TXT_BPE);
    put32le(b + 16, TXT_SPLIT_NONE);
    put32le(b + 20, 256);
    put32le(b + 24, n_merges);
    put32le(b + 28, (uint32_t)n_sp);
    for (uint32_t k = 0; k < 2 * n_merges; k++, p += 4) put32le(p, m[k]);
    for (int k = 0; k < n_sp; k++) {
        put32le(p, (uint32_t)strlen(sp[k]));
        memcpy(p + 4, sp[k], strlen(sp[k]));
        p += 4 + strlen(sp[k]);
    }
    *len = n;
    return b;
}

static void refused(const uint8_t *b, size_t n, const char *reason) {
    TxtTokenizer *t;
    int rc = txt_from_bytes(b, n, "hostile.tok", &t);
    cr_assert(rc == AG_ERR_FORMAT || rc == AG_ERR_RANGE, "rc %d for '%s'", rc, reason);
    cr_assert(strstr(ag_last_error(), "hostile.tok: ") && strstr(ag_last_error(), reason),
              "expected '%s' in: %s", reason, ag_last_error());
}

Test(txt_saved, hostile_values_are_refused_with_their_reason) {
    size_t n;
    uint32_t ok[] = {'a', 'b', 256, 'c'};
    uint8_t *b = hand_bpe(2, ok, 1, (const char *[]){"<|x|>"}, &n);
    TxtTokenizer *t;
    cr_assert_eq(txt_from_bytes(b, n, "hand", &t), AG_OK, "%s", ag_last_error());
    size_t len;
    cr_assert(memcmp(txt_token_bytes(t, 257, &len), "abc", 3) == 0 && len == 3);
    txt_free(t);
    uint8_t *c = malloc(n + 1);
    memcpy(c, b, n);
    c[0] = 'X';
    refused(c, n, "magic");
    memcpy(c, b, n);
    put32le(c + 8, 2);
    refused(c, n, "version 2");
    memcpy(c, b, n);
    put32le(c + 12, 3);
    refused(c, n, "kind 3");
    memcpy(c, b, n);
    put32le(c + 16, 9);
    refused(c, n, "split 9");
    memcpy(c, b, n);
    put32le(c + 20, 255);
    refused(c, n, "256");
    memcpy(c, b, n);
    put32le(c + 24, 1u << 19); /* many merges, few bytes: refused before any allocation */
    refused(c, n, "need at least");
    memcpy(c, b, n);
    put32le(c + 24, 0xFFFFFFFFu);
    refused(c, n, "ids: at most");
    memcpy(c, b, n);
    put32le(c + 40, 257); /* merge 1's left part is its own id */
    refused(c, n, "parts must be ids below 257");
    memcpy(c, b, n);
    put32le(c + 28, 2);
    refused(c, n, "past the end");
    memcpy(c, b, n);
    c[n] = 0;
    refused(c, n + 1, "left over");
    memcpy(c, b, n);
    put32le(c + 48, 0);
    refused(c, n, "of 0 bytes");
    memcpy(c, b, n);
    put32le(c + 48, 6);
    refused(c, n, "only 5 left");
    memcpy(c, b, n);
    c[53] = 0;
    refused(c, n, "NUL");
    free(c);
    free(b);
    /* a repeated merge, a repeated special */
    uint32_t twice[] = {'a', 'b', 'a', 'b'};
    b = hand_bpe(2, twice, 0, NULL, &n);
    refused(b, n, "repeats merge 0");
    free(b);
    b = hand_bpe(0, NULL, 2, (const char *[]){"<s>", "<s>"}, &n);
    refused(b, n, "repeats an earlier one");
    free(b);
    /* merges that double a token's length each time: refused at the length limit */
    uint32_t dbl[2 * 13];
    for (uint32_t k = 0; k < 13; k++) dbl[2 * k] = dbl[2 * k + 1] = k ? 255 + k : 'a';
    b = hand_bpe(13, dbl, 0, NULL, &n);
    refused(b, n, "8192 bytes: at most 4096");
    cr_assert_eq(txt_from_bytes(b, n - 8, "hand", &t), AG_ERR_FORMAT); /* header still says 13 */
    put32le(b + 24, 12);
    cr_assert_eq(txt_from_bytes(b, n - 8, "hand", &t), AG_OK, "%s", ag_last_error());
    txt_free(t);
    free(b);
}

Test(txt_saved, a_char_tokenizer_needs_increasing_bytes) {
    TxtTokenizer *t = txt_char_new("abc", 3);
    size_t n;
    uint8_t *b = txt_to_bytes(t, &n);
    cr_assert_eq(n, 32 + 3);
    b[33] = 'a';
    refused(b, n, "not above the one before");
    put32le(b + 20, 300);
    refused(b, n, "at most 256");
    free(b);
    txt_free(t);
}

Test(txt_saved, a_checkpoint_keeps_the_tokenizer_and_the_loader_position) {
    char dir[256], path[512];
    ts_tmp_dir(dir, sizeof dir, "text");
    ts_join(path, dir, "ckpt.npz");
    Arena *a = arena_new("params", 0);
    ParamList pl;
    ag_params_init(&pl);
    Tensor *w = tensor_param(a, 2, (int[]){2, 3}, "w");
    for (int i = 0; i < 6; i++) w->data[i] = (Real)i;
    ag_params_add(&pl, w);
    TxtTokenizer *t = sample_bpe();
    int tok[64];
    for (int i = 0; i < 64; i++) tok[i] = i;
    TxtLoader L;
    cr_assert_eq(txt_loader_init(&L, tok, 0, 64, 2, 4, 5, "t"), AG_OK);
    int x[8], y[8];
    txt_loader_next(&L, x, y);
    size_t n;
    uint8_t *b = txt_to_bytes(t, &n);
    Checkpoint ck = {.params = &pl, .extra = b, .extra_len = n, .n_data = TXT_LOADER_STATE_LEN};
    txt_loader_state(&L, ck.data);
    cr_assert_eq(ckpt_save(path, &ck, 6, NULL), AG_OK, "%s", ag_last_error());

    Checkpoint back = {.params = &pl, .n_data = TXT_LOADER_STATE_LEN};
    cr_assert_eq(ckpt_load(path, &back), AG_OK, "%s", ag_last_error());
    TxtTokenizer *t2;
    cr_assert_eq(txt_from_bytes(back.extra, back.extra_len, path, &t2), AG_OK, "%s",
                 ag_last_error());
    check_same(t, t2);
    TxtLoader R;
    cr_assert_eq(txt_loader_init(&R, tok, 0, 64, 2, 4, 99, "t"), AG_OK);
    cr_assert_eq(txt_loader_restore(&R, back.data, path), AG_OK);
    int x2[8], y2[8];
    txt_loader_next(&L, x, y);
    txt_loader_next(&R, x2, y2);
    cr_assert(memcmp(x, x2, sizeof x) == 0 && memcmp(y, y2, sizeof y) == 0);
    free((void *)back.extra);
    free(b);
    txt_free(t);
    txt_free(t2);
    ag_params_free(&pl);
    arena_free(a);
    ts_rm_tree(dir);
}
