/* test_vocab.c: the word vocabulary of src/text/vocab.h and the scores of score.h. Words get
 * ids in order of first appearance after the four specials, tokenizing and detokenizing round
 * trip, an unknown word is named with a hint (another case, punctuation split off), UTF-8, a
 * byte-order mark and sentences are counted as documented, the saved pair loads back and every
 * damaged or over-limit form is refused naming its source; a vocabulary holding a txt_
 * tokenizer encodes the text whole and its saved form (vocab 2) loads back token for token.
 * A line is read with a bound and an endless one costs no more. The scores match hand
 * computations (BLEU-4: clipping, the brevity penalty, corpus sums).
 * Not here: the tokenizers themselves (test_tokenizer.c), the translator that reads data files
 * with a vocabulary (tests/examples/test_translate*.c). */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attograd.h"
#include "files.h"

/* txt_vocab_tokenize of text into ids (cap 16 or more), its warnings after where: a malloc'd
 * string (the caller frees it); the count in *n, the unknown words in *unk */
static char *tokenize_warned(const TxtVocab *v, const char *text, int *ids, int cap, int *n,
                             int *unk, const char *where) {
    char *msg = NULL;
    size_t msg_len = 0;
    FILE *warn = open_memstream(&msg, &msg_len);
    *n = txt_vocab_tokenize(v, text, ids, cap, unk, warn, where);
    fclose(warn);
    return msg;
}

/* ---- word vocabularies ---- */

Test(txt_vocab, tokenize_round_trips) {
    TxtVocab v;
    txt_vocab_init(&v);
    cr_assert_eq(v.n, TXT_N_SPECIAL);
    const char *words[] = {"le", "chat", "noir", "dort", ".", "qu'", "<unk>"};
    int ids[7];
    for (int i = 0; i < 7; i++) ids[i] = txt_vocab_add(&v, words[i], strlen(words[i]));
    for (int i = 0; i < 7; i++) {
        cr_assert_eq(ids[i], TXT_N_SPECIAL + i, "ids in order of first appearance");
        cr_assert_eq(txt_vocab_add(&v, words[i], strlen(words[i])), ids[i], "no duplicates");
        cr_assert_str_eq(txt_vocab_word(&v, ids[i]), words[i]);
    }
    /* "<unk>" written in the data is an ordinary word, not the special */
    cr_assert_neq(txt_vocab_find(&v, "<unk>", 5), TXT_UNK);
    cr_assert_eq(txt_vocab_find(&v, "<pad>", 5), -1);
    /* many words: the table grows and keeps every id */
    char w[16];
    for (int i = 0; i < 1000; i++) {
        snprintf(w, sizeof w, "w%d", i);
        cr_assert_eq(txt_vocab_add(&v, w, strlen(w)), 11 + i);
    }
    for (int i = 0; i < 1000; i++) {
        snprintf(w, sizeof w, "w%d", i);
        cr_assert_eq(txt_vocab_find(&v, w, strlen(w)), 11 + i);
    }
    /* text -> ids -> text */
    const char *text = "le chat noir dort w999 .";
    int got[16], unk = -1;
    int n = txt_vocab_tokenize(&v, "  le chat\tnoir dort w999 .\n", got, 16, &unk, NULL, NULL);
    cr_assert_eq(n, 6);
    cr_assert_eq(unk, 0);
    char out[128];
    size_t len = txt_vocab_detokenize(&v, got, n, out, sizeof out);
    cr_assert_str_eq(out, text);
    cr_assert_eq(len, strlen(text));
    /* unknown words map to UNK, are counted and named */
    char *msg = tokenize_warned(&v, "le zèbre dort zzz", got, 16, &n, &unk, "x: ");
    cr_assert_eq(n, 4);
    cr_assert_eq(unk, 2);
    cr_assert(got[1] == TXT_UNK && got[3] == TXT_UNK && got[0] == ids[0]);
    cr_assert(strstr(msg, "x: 'zèbre' is not in the vocabulary (read as <unk>)\n") != NULL, "%s",
              msg);
    cr_assert(strstr(msg, "x: 'zzz' is not in the vocabulary (read as <unk>)\n") != NULL, "%s",
              msg);
    free(msg);
    /* natural input: what the vocabulary holds instead (another case, punctuation split off) */
    static const struct {
        const char *word, *hint;
    } hints[] = {
        {"Le", "'Le' is not in the vocabulary; 'le' is (read as <unk>)"},
        {"CHAT", "'CHAT' is not in the vocabulary; 'chat' is (read as <unk>)"},
        {"dort.", "'dort.' is not in the vocabulary; 'dort' '.' are: separate punctuation with "
                  "spaces (read as <unk>)"},
        {"Chat.", "'Chat.' is not in the vocabulary; 'chat' '.' are: separate punctuation"},
        {".le", "'.le' is not in the vocabulary; '.' 'le' are: separate"},
        {"chat,", "'chat,' is not in the vocabulary; 'chat' is, ',' is not (read as <unk>)"},
        {"..", "'..' is not in the vocabulary; '.' '.' are: separate punctuation"},
        {"Zèbre", "'Zèbre' is not in the vocabulary (read as <unk>)"},
        {"l'eau", "'l'eau' is not in the vocabulary (read as <unk>)"},
    };
    for (size_t i = 0; i < sizeof hints / sizeof hints[0]; i++) {
        msg = tokenize_warned(&v, hints[i].word, got, 16, &n, &unk, NULL);
        cr_assert_eq(n, 1);
        cr_assert(got[0] == TXT_UNK && unk == 1, "%s", hints[i].word);
        cr_assert(strncmp(msg, hints[i].hint, strlen(hints[i].hint)) == 0, "'%s' instead of '%s'",
                  msg, hints[i].hint);
        free(msg);
    }
    /* detokenize stops at EOS, skips BOS, truncates safely and reports the full length */
    int seq[] = {TXT_BOS, ids[0], ids[1], TXT_EOS, ids[2]};
    len = txt_vocab_detokenize(&v, seq, 5, out, sizeof out);
    cr_assert_str_eq(out, "le chat");
    cr_assert_eq(txt_vocab_detokenize(&v, seq, 5, out, 4), 7);
    cr_assert_str_eq(out, "le ");
    /* more words than room: the count is still returned */
    cr_assert_eq(txt_vocab_tokenize(&v, "le le le le", got, 2, NULL, NULL, NULL), 4);
    txt_vocab_free(&v);
}

Test(txt_vocab, utf8_bom_and_sentences) {
    static const struct {
        const char *s;
        int ok;
        size_t bad;
    } cases[] = {
        {"plain ascii", 1, 0},
        {"le z\xc3\xa8"
         "bre",
         1, 0},                                  /* è */
        {"\xe2\x82\xac \xf0\x9f\x98\x80", 1, 0}, /* the euro sign, an emoji */
        {"\xef\xbb\xbfthe", 1, 0},               /* a byte-order mark is valid UTF-8 */
        {"caf\xe9 au lait", 0, 3},               /* Latin-1 é */
        {"ab\xc3", 0, 2},                        /* cut short at the end */
        {"a\xe2\x82x", 0, 1},                    /* cut short before a non-continuation byte */
        {"\xc0\xaf", 0, 0},                      /* an overlong '/' */
        {"\xe0\x80\xaf", 0, 0},                  /* an overlong '/' in three bytes */
        {"\xed\xa0\x80", 0, 0},                  /* a surrogate, U+D800 */
        {"\xf4\x90\x80\x80", 0, 0},              /* above U+10FFFF */
        {"\xf5\x80\x80\x80", 0, 0},              /* no such lead byte */
        {"x\x80", 0, 1},                         /* a continuation byte alone */
        {"\xf4\x8f\xbf\xbf", 1, 0},              /* U+10FFFF itself */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        size_t bad = 999;
        int ok = txt_utf8_check(cases[i].s, strlen(cases[i].s), &bad);
        cr_assert_eq(ok, cases[i].ok, "case %zu", i);
        if (!ok) cr_assert_eq(bad, cases[i].bad, "case %zu: byte %zu", i, bad);
    }
    cr_assert_eq(txt_utf8_check("a\0b", 3, &(size_t){0}), 1, "NUL is valid UTF-8");
    cr_assert_eq(txt_bom_len("\xef\xbb\xbfthe", 6), 3);
    cr_assert_eq(txt_bom_len("\xef\xbb", 2), 0);
    cr_assert_eq(txt_bom_len("the", 3), 0);
    cr_assert_eq(txt_count_sentences(""), 0);
    cr_assert_eq(txt_count_sentences("  "), 0);
    cr_assert_eq(txt_count_sentences("the cat sees a dog ."), 1);
    cr_assert_eq(txt_count_sentences("the cat sees a dog"), 1);
    cr_assert_eq(txt_count_sentences("the cat runs . the dog sleeps ."), 2);
    cr_assert_eq(txt_count_sentences("The cat runs. The dog sleeps! Who? a b c ."), 4);
    cr_assert_eq(txt_count_sentences(". ."), 2);
}

Test(txt_vocab, check_arg_drops_a_bom_and_names_a_bad_byte) {
    const char *out = "unset";
    cr_assert_eq(txt_check_arg("the cat", "sentence 1", &out), AG_OK);
    cr_assert_str_eq(out, "the cat");
    const char *bom = "\xef\xbb\xbfthe cat";
    cr_assert_eq(txt_check_arg(bom, "sentence 1", &out), AG_OK);
    cr_assert(out == bom + 3, "the mark is skipped");
    cr_assert_eq(txt_check_arg("", "--target", &out), AG_OK);
    cr_assert_str_eq(out, "");
    cr_assert_eq(txt_check_arg("\xef\xbb\xbf"
                               "caf\xe9",
                               "--target", &out),
                 AG_ERR_FORMAT);
    cr_assert_null(out);
    cr_assert_str_eq(ag_last_error(), "--target is not valid UTF-8 (byte 4 is 0xe9)");
}

Test(txt_vocab, pair_saves_and_loads) {
    TxtVocab s, t, s2, t2;
    txt_vocab_init(&s);
    txt_vocab_init(&t);
    txt_vocab_add(&s, "the", 3);
    txt_vocab_add(&s, "cat", 3);
    txt_vocab_add(&t, "le", 2);
    size_t len;
    char *b = txt_vocab_pair_save(&s, &t, &len);
    cr_assert_eq(txt_vocab_pair_load(b, len, &s2, &t2, "x"), AG_OK, "%s", ag_last_error());
    cr_assert_eq(s2.n, s.n);
    cr_assert_eq(t2.n, t.n);
    for (int i = 0; i < s.n; i++) cr_assert_str_eq(s2.words[i], s.words[i]);
    cr_assert_eq(txt_vocab_find(&t2, "le", 2), TXT_N_SPECIAL);
    txt_vocab_free(&s2);
    txt_vocab_free(&t2);
    /* damaged text: every cut fails with a message naming the source, never crashes */
    for (size_t cut = 0; cut < len; cut++) {
        cr_assert_neq(txt_vocab_pair_load(b, cut, &s2, &t2, "ckpt.npz"), AG_OK, "cut %zu", cut);
        cr_assert(strstr(ag_last_error(), "ckpt.npz") != NULL);
    }
    cr_assert_neq(txt_vocab_pair_load(NULL, 0, &s2, &t2, "x"), AG_OK);
    free(b);
    txt_vocab_free(&s);
    txt_vocab_free(&t);
}

/* "attograd-translate vocab 1\nsrc N\n" and n words "w0".."w<n-1>", then an empty tgt side */
static char *vocab_text(long declared, long n, size_t *len) {
    size_t cap = 64 + (size_t)n * 12;
    char *b = malloc(cap);
    size_t k = (size_t)snprintf(b, cap, "attograd-translate vocab 1\nsrc %ld\n", declared);
    for (long i = 0; i < n; i++) k += (size_t)snprintf(b + k, cap - k, "w%ld\n", i);
    k += (size_t)snprintf(b + k, cap - k, "tgt 0\n");
    *len = k;
    return b;
}

Test(txt_vocab, a_saved_vocabulary_over_the_limits_is_refused) {
    size_t len;
    char *b = vocab_text(1000000, 1000000, &len);
    TxtVocab s, t;
    cr_assert_eq(txt_vocab_pair_load(b, len, &s, &t, "big.npz"), AG_ERR_FORMAT);
    cr_assert(strstr(ag_last_error(),
                     "big.npz: vocabulary: src has 1000000 words, over the "
                     "limit of 499996 (TXT_VOCAB_MAX_WORDS 500000 with the 4 specials)"),
              "%s", ag_last_error());
    free(b);
    /* the limit itself loads */
    b = vocab_text(TXT_VOCAB_MAX_WORDS - TXT_N_SPECIAL, TXT_VOCAB_MAX_WORDS - TXT_N_SPECIAL, &len);
    cr_assert_eq(txt_vocab_pair_load(b, len, &s, &t, "max.npz"), AG_OK, "%s", ag_last_error());
    cr_assert_eq(s.n, TXT_VOCAB_MAX_WORDS);
    txt_vocab_free(&s);
    txt_vocab_free(&t);
    free(b);
    /* a word over TXT_VOCAB_MAX_WORD_LEN bytes */
    char text[1024];
    int n = snprintf(text, sizeof text, "attograd-translate vocab 1\nsrc 1\n%0*d\ntgt 0\n",
                     TXT_VOCAB_MAX_WORD_LEN + 1, 7);
    cr_assert_eq(txt_vocab_pair_load(text, (size_t)n, &s, &t, "w.npz"), AG_ERR_FORMAT);
    cr_assert(strstr(ag_last_error(), "src word 1 is 513 bytes long, over the limit of 512"), "%s",
              ag_last_error());
}

/* Found by fuzz/vocab.c: the word count was read with strtol, which skips blanks (newlines
 * too) and so read past the end of bytes that are not NUL-terminated ("tgt  \n" as the last
 * line). Now only digits up to the newline count; the buffers here are exactly their size, so
 * ASan (DEBUG=1) sees any read past them. */
Test(txt_vocab, a_word_count_is_digits_up_to_the_newline) {
    static const char *const bad[] = {"tgt  \n",  "tgt \n",   "tgt +0\n",  "tgt  0\n",
                                      "tgt 0 \n", "tgt -0\n", "tgt 0x0\n", "tgt \n\n0\n"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char text[128];
        int n = snprintf(text, sizeof text, "attograd-translate vocab 1\nsrc 1\nw\n%s", bad[i]);
        char *b = malloc((size_t)n);
        memcpy(b, text, (size_t)n);
        TxtVocab s, t;
        cr_assert_eq(txt_vocab_pair_load(b, (size_t)n, &s, &t, "v"), AG_ERR_FORMAT, "case %zu", i);
        cr_assert(strstr(ag_last_error(), "v: vocabulary: bad tgt word count") ||
                      strstr(ag_last_error(), "v: vocabulary: expected 'tgt <count>'"),
                  "case %zu: %s", i, ag_last_error());
        free(b);
    }
    static const char good[] = "attograd-translate vocab 1\nsrc 1\nw\ntgt 00\n";
    char *b = malloc(sizeof good - 1);
    memcpy(b, good, sizeof good - 1);
    TxtVocab s, t;
    cr_assert_eq(txt_vocab_pair_load(b, sizeof good - 1, &s, &t, "v"), AG_OK, "%s",
                 ag_last_error());
    cr_assert(s.n == TXT_N_SPECIAL + 1 && t.n == TXT_N_SPECIAL);
    txt_vocab_free(&s);
    txt_vocab_free(&t);
    free(b);
}

/* ---- lines read with a bound ---- */

Test(txt_read_line, stops_at_its_limit_and_reads_no_further) {
    char dir[64], path[128];
    ts_tmp_dir(dir, sizeof dir, "limits");
    snprintf(path, sizeof path, "%s/lines", dir);
    static const char text[] = "abc\n\n12345678\n123456789\n"
                               "a line of many more than eight bytes\nx\0y\ntail";
    ts_write_bytes(path, text, sizeof text - 1);
    /* got, the line, and where reading stands afterwards (ftell) */
    struct {
        int got;
        const char *line;
        size_t len;
        long at;
    } want[] = {{1, "abc", 3, 4},         {1, "", 0, 5},
                {1, "12345678", 8, 14},   {-1, "123456789", 9, 23},
                {-1, "a line of", 9, 33}, {1, "x\0y", 3, 65},
                {1, "tail", 4, 69},       {0, NULL, 0, 69}};
    FILE *f = fopen(path, "rb");
    char *buf = NULL;
    size_t cap = 0, len = 0;
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        int got = txt_read_line(f, &buf, &cap, 8, &len);
        cr_assert_eq(got, want[i].got, "line %zu: %d", i + 1, got);
        if (got != 0) cr_assert_eq(len, want[i].len, "line %zu: length %zu", i + 1, len);
        if (want[i].line) cr_assert(memcmp(buf, want[i].line, len + 1) == 0, "line %zu", i + 1);
        cr_assert_leq(cap, 8 + 2, "the buffer grew to %zu bytes", cap);
        /* an over-long line stops after max + 1 of its bytes */
        cr_assert_eq(ftell(f), want[i].at, "line %zu: reading stands at %ld", i + 1, ftell(f));
        /* the line of 9 bytes ends right there; the long one is skipped within 64 bytes, not 8 */
        if (got < 0) cr_assert_eq(txt_skip_line(f, i == 3 ? 0 : 64), 1, "line %zu", i + 1);
        if (got < 0) cr_assert_eq(ftell(f), i == 3 ? 24 : 61, "line %zu: at %ld", i + 1, ftell(f));
    }
    /* line 5 again: 27 more bytes before its newline, not skipped within 8 */
    cr_assert_eq(fseek(f, 24, SEEK_SET), 0);
    cr_assert_eq(txt_read_line(f, &buf, &cap, 8, &len), -1);
    cr_assert_eq(txt_skip_line(f, 8), 0);
    cr_assert_eq(ftell(f), 33 + 9, "at most 8 + 1 bytes skipped");
    fclose(f);
    free(buf);
    ts_rm_tree(dir);
}

/* ---- a vocabulary holding a tokenizer ---- */

static TxtVocab char_vocab(const char *text) {
    TxtVocab v;
    txt_vocab_init(&v);
    cr_assert_eq(txt_vocab_set_tokenizer(&v, txt_char_new(text, strlen(text)), "test"), AG_OK);
    return v;
}

Test(txt_vocab_tokenizer, char_encodes_the_text_whole_and_decodes_it_back) {
    TxtVocab v = char_vocab("the dog. le chien!");
    cr_assert_eq(v.kind, TXT_VOCAB_CHAR);
    int ids[64], n_unk = -1;
    /* blanks at the ends are dropped; inside, the text is kept byte for byte */
    int n = txt_vocab_tokenize(&v, "  the dog. \n", ids, 64, &n_unk, NULL, NULL);
    cr_assert_eq(n, 8);
    cr_assert_eq(n_unk, 0);
    for (int i = 0; i < n; i++) cr_assert(ids[i] >= TXT_N_SPECIAL && ids[i] < v.n);
    char out[64];
    cr_assert_eq(txt_vocab_detokenize(&v, ids, n, out, sizeof out), 8);
    cr_assert_str_eq(out, "the dog.");
    cr_assert_str_eq(txt_vocab_word(&v, ids[7]), ".");
    /* a byte the tokenizer never saw is <unk>, named with its offset */
    char *msg = tokenize_warned(&v, "dog?", ids, 64, &n, &n_unk, "w: ");
    cr_assert_eq(n, 4);
    cr_assert_eq(n_unk, 1);
    cr_assert_eq(ids[3], TXT_UNK);
    cr_assert(strstr(msg, "w: byte 0x3f ('?') at offset 3 is not in the vocabulary"), "%s", msg);
    free(msg);
    cr_assert_eq(txt_vocab_detokenize(&v, ids, n, out, sizeof out), 8);
    cr_assert_str_eq(out, "dog<unk>");
    /* a decoded text stops at EOS, skips BOS, and is cut (NUL-terminated) to the buffer */
    int with[] = {TXT_BOS, ids[0], ids[1], TXT_EOS, ids[2]};
    cr_assert_eq(txt_vocab_detokenize(&v, with, 5, out, 2), 2);
    cr_assert_str_eq(out, "d");
    txt_vocab_free(&v);
}

Test(txt_vocab_tokenizer, the_checkpoint_form_loads_back_and_refuses_damage) {
    const char *text = "the dog. the cat! the dog's bone, the cat's toy.";
    TxtTokenizer *t;
    cr_assert_eq(txt_bpe_train(text, strlen(text), 280, TXT_SPLIT_GPT2, "test", &t), AG_OK);
    TxtVocab src, tgt, s2, t2;
    txt_vocab_init(&src);
    cr_assert_eq(txt_vocab_set_tokenizer(&src, t, "test"), AG_OK);
    src.bpe_vocab = 280;
    tgt = char_vocab(text);
    /* both sides share the kind in the saved form: give tgt a BPE too */
    txt_vocab_free(&tgt);
    cr_assert_eq(txt_bpe_train("le chien. le chat!", 18, 260, TXT_SPLIT_GPT2, "test", &t), AG_OK);
    txt_vocab_init(&tgt);
    cr_assert_eq(txt_vocab_set_tokenizer(&tgt, t, "test"), AG_OK);
    tgt.bpe_vocab = 280;
    size_t len;
    char *b = txt_vocab_pair_save(&src, &tgt, &len);
    const char *head = "attograd-translate vocab 2\ntokenizer bpe 280\nsrc ";
    cr_assert(strncmp(b, head, strlen(head)) == 0, "%.60s", b);
    cr_assert_eq(txt_vocab_pair_load(b, len, &s2, &t2, "x.npz"), AG_OK, "%s", ag_last_error());
    cr_assert_eq(s2.kind, TXT_VOCAB_BPE);
    cr_assert_eq(s2.bpe_vocab, 280);
    cr_assert_eq(s2.n, src.n);
    cr_assert_eq(t2.n, tgt.n);
    int a[128], c[128];
    int na = txt_vocab_tokenize(&src, "the cat's dog.", a, 128, NULL, NULL, NULL);
    int nc = txt_vocab_tokenize(&s2, "the cat's dog.", c, 128, NULL, NULL, NULL);
    cr_assert_eq(na, nc);
    cr_assert(na < 14, "the merges shorten the text: %d tokens", na);
    cr_assert_eq(memcmp(a, c, (size_t)na * sizeof *a), 0);
    txt_vocab_free(&s2);
    txt_vocab_free(&t2);
    /* every cut, and a byte changed in the header, are refused with a message */
    for (size_t cut = 0; cut < len; cut += 7)
        cr_assert_neq(txt_vocab_pair_load(b, cut, &s2, &t2, "x.npz"), AG_OK, "cut at %zu", cut);
    char *bad = malloc(len + 1);
    memcpy(bad, b, len);
    memcpy(bad + 37, "cha", 3); /* "tokenizer bpe" -> "tokenizer cha" */
    cr_assert_eq(txt_vocab_pair_load(bad, len, &s2, &t2, "x.npz"), AG_ERR_FORMAT);
    cr_assert(strstr(ag_last_error(), "x.npz: vocabulary: expected 'tokenizer char 0'"), "%s",
              ag_last_error());
    memcpy(bad, b, len);
    bad[len] = 'x';
    cr_assert_eq(txt_vocab_pair_load(bad, len + 1, &s2, &t2, "x.npz"), AG_ERR_FORMAT);
    cr_assert(strstr(ag_last_error(), "1 unexpected bytes at the end"), "%s", ag_last_error());
    free(bad);
    free(b);
    txt_vocab_free(&src);
    txt_vocab_free(&tgt);
}

/* ---- scores ---- */

Test(txt_score, bleu_exact_and_token_accuracy_by_hand) {
    enum { A = 4, B_, C, D, E, F };
    int ref[] = {A, B_, C, D, F}, hyp[] = {A, B_, C, D, E};
    TxtScore s;
    memset(&s, 0, sizeof s);
    txt_score_add(&s, ref, 5, ref, 5);
    cr_assert_float_eq(txt_score_bleu(&s), 100.0, 1e-9);
    cr_assert_float_eq(txt_score_exact(&s), 1.0, 1e-12);
    /* one wrong last word: precisions 4/5, 3/4, 2/3, 1/2 */
    memset(&s, 0, sizeof s);
    txt_score_add(&s, hyp, 5, ref, 5);
    cr_assert_float_eq(txt_score_bleu(&s), 100 * pow(0.8 * 0.75 * (2.0 / 3) * 0.5, 0.25), 1e-9);
    cr_assert_float_eq(txt_score_tokens(&s), 0.8, 1e-12);
    cr_assert_eq(s.n_exact, 0);
    /* corpus level: the counts add up over sentences before the ratios are taken */
    txt_score_add(&s, ref, 5, ref, 5);
    cr_assert_float_eq(txt_score_bleu(&s),
                       100 * pow((9.0 / 10) * (7.0 / 8) * (5.0 / 6) * (3.0 / 4), 0.25), 1e-9);
    cr_assert_float_eq(txt_score_exact(&s), 0.5, 1e-12);
    cr_assert_float_eq(txt_score_tokens(&s), 0.9, 1e-12);
    /* clipping: a word counts at most as often as in the reference */
    int rep[] = {A, A, A, A}, ref4[] = {A, B_, A, C};
    memset(&s, 0, sizeof s);
    txt_score_add(&s, rep, 4, ref4, 4);
    cr_assert_eq(s.match[0], 2);
    cr_assert_eq(s.total[0], 4);
    cr_assert_eq(s.match[1], 0);
    cr_assert_float_eq(txt_score_bleu(&s), 0.0, 1e-12);
    /* brevity penalty: a correct prefix of 4 words for a reference of 6 */
    int ref6[] = {A, B_, C, D, E, F};
    memset(&s, 0, sizeof s);
    txt_score_add(&s, ref6, 4, ref6, 6);
    cr_assert_float_eq(txt_score_bleu(&s), 100 * exp(1 - 6.0 / 4), 1e-9);
    cr_assert_float_eq(txt_score_tokens(&s), 4.0 / 6, 1e-12);
    /* a reference word outside the vocabulary (UNK) matches nothing, not even UNK */
    int ru[] = {A, TXT_UNK}, hu[] = {A, TXT_UNK};
    memset(&s, 0, sizeof s);
    txt_score_add(&s, hu, 2, ru, 2);
    cr_assert_eq(s.n_exact, 0);
    cr_assert_float_eq(txt_score_tokens(&s), 0.5, 1e-12);
    cr_assert_eq(s.match[0], 1);
    /* an empty hypothesis */
    memset(&s, 0, sizeof s);
    txt_score_add(&s, hyp, 0, ref, 5);
    cr_assert_float_eq(txt_score_bleu(&s), 0.0, 1e-12);
    cr_assert_float_eq(txt_score_tokens(&s), 0.0, 1e-12);
}
