/* test_gen.c: the toy corpus generator (data/corpus.c). Determinism (same seed, same bytes;
 * a pinned digest of the default corpus), the splits (no valid/test/gen pair in train, held-out
 * adjective-noun pairs only in gen_test and gen_long, both deeper than train, gen_long longer),
 * the French (agreement, negation, contractions) checked by reading the text back with the
 * lexicon, the vocabulary sizes, the copy/reverse tasks and the command line's exit codes.
 * The checks parse the generated text on their own; they share only the lexicon tables.
 * Not here: tokenizing and training on the corpus (the translation example's tests). */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "corpus.h"
#include "expect_abort.h"
#include "files.h"

/* ---- helpers: a generated corpus, tokens, a word table ---- */

static Corpus make_corpus(CorpusTask task) {
    CorpusConfig cfg = corpus_default_config(task);
    Corpus c;
    int rc = corpus_generate(&cfg, &c);
    cr_assert_eq(rc, AG_OK, "corpus_generate: %s", ag_last_error());
    return c;
}

enum { MAXW = 64 };

typedef struct {
    char buf[512];
    const char *w[MAXW];
    int n;
} Words;

/* Splits a line on single spaces; asserts the format (no empty token, no tab). */
static void split(const char *line, Words *out) {
    cr_assert_lt(strlen(line), sizeof out->buf, "line too long: %s", line);
    strcpy(out->buf, line);
    out->n = 0;
    for (char *p = out->buf;;) {
        char *e = strchr(p, ' ');
        cr_assert(e != p && *p, "empty token in '%s'", line);
        cr_assert_lt(out->n, MAXW);
        out->w[out->n++] = p;
        if (!e) break;
        *e = '\0';
        p = e + 1;
    }
}

static int is(const char *a, const char *b) { return a && strcmp(a, b) == 0; }

static int words_without_period(const Words *w) { return w->n - is(w->w[w->n - 1], "."); }

/* What a word can be: a noun form, an adjective form, a verb form (several at once:
 * French "porte" is a door and carries). */
typedef struct {
    const char *word;
    int noun, noun_num; /* noun index or -1; bit 1 singular form, bit 2 plural form */
    int adj, adj_slots; /* adjective index or -1; bit CORPUS_AGREE(g, pl) per slot it fills */
    int verb, persons;  /* verb index or -1; bit p: person p (English: bit 2 = 3sg, 1 = base) */
} Word;

/* A word table with a hash index (slot[] holds entry index + 1, 0 when empty). */
enum { LEX_MAX = 1024, LEX_SLOTS = 4096 };

typedef struct {
    Word w[LEX_MAX];
    int n;
    int slot[LEX_SLOTS];
} Lex;

static Lex *lex_new(void) {
    Lex *x = calloc(1, sizeof *x);
    cr_assert(x != NULL);
    return x;
}

static unsigned lex_hash(const char *s) {
    unsigned h = 2166136261u;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 16777619u;
    return h & (LEX_SLOTS - 1);
}

static const Word *lex_find(const Lex *x, const char *word) {
    for (unsigned i = lex_hash(word); x->slot[i]; i = (i + 1) & (LEX_SLOTS - 1))
        if (strcmp(x->w[x->slot[i] - 1].word, word) == 0) return &x->w[x->slot[i] - 1];
    return NULL;
}

/* The entry of word, added if missing (the table keeps the pointer). */
static Word *lex_entry(Lex *x, const char *word) {
    unsigned i = lex_hash(word);
    for (; x->slot[i]; i = (i + 1) & (LEX_SLOTS - 1))
        if (strcmp(x->w[x->slot[i] - 1].word, word) == 0) return &x->w[x->slot[i] - 1];
    cr_assert_lt(x->n, LEX_MAX);
    x->w[x->n] = (Word){word, -1, 0, -1, 0, -1, 0};
    x->slot[i] = ++x->n;
    return &x->w[x->n - 1];
}

static void add_noun(Lex *x, const char *w, int idx, int num) {
    Word *e = lex_entry(x, w);
    e->noun = idx;
    e->noun_num |= num;
}

static void add_adj(Lex *x, const char *w, int idx, int slot) {
    Word *e = lex_entry(x, w);
    e->adj = idx;
    e->adj_slots |= 1 << slot;
}

static void add_verb(Lex *x, const char *w, int idx, int person) {
    Word *e = lex_entry(x, w);
    e->verb = idx;
    e->persons |= 1 << person;
}

/* The first word of an English verb ("look for" -> "look"), copied into buf. */
static const char *first_word(const char *s, char *buf, size_t size) {
    snprintf(buf, size, "%s", s);
    char *sp = strchr(buf, ' ');
    if (sp) *sp = '\0';
    return buf;
}

static char en_verb_words[64][2][16];

static void build_lex(Lex *en, Lex *fr) {
    size_t nn, na, nv;
    const CorpusNoun *nouns = corpus_nouns(&nn);
    const CorpusAdj *adjs = corpus_adjs(&na);
    const CorpusVerb *verbs = corpus_verbs(&nv);
    for (size_t i = 0; i < nn; i++) {
        add_noun(en, nouns[i].en_sg, (int)i, 1);
        add_noun(en, nouns[i].en_pl, (int)i, 2);
        add_noun(fr, nouns[i].fr_sg, (int)i, 1);
        add_noun(fr, nouns[i].fr_pl, (int)i, 2);
    }
    for (size_t i = 0; i < na; i++) {
        add_adj(en, adjs[i].en, (int)i, 0);
        for (int s = 0; s < 4; s++) add_adj(fr, adjs[i].fr[s], (int)i, s);
    }
    cr_assert_leq(nv, 64);
    for (size_t i = 0; i < nv; i++) {
        add_verb(en, first_word(verbs[i].en, en_verb_words[i][0], 16), (int)i, 1);
        add_verb(en, first_word(verbs[i].en_3sg, en_verb_words[i][1], 16), (int)i, 2);
        for (int p = 0; p < 6; p++) add_verb(fr, verbs[i].fr[p], (int)i, p);
    }
}

static int is_verb(const Lex *x, const char *w) {
    const Word *e = lex_find(x, w);
    return e && e->verb >= 0;
}

static const char *const FR_NUMBERS[] = {"deux", "trois", "quatre", "cinq", "six",
                                         "sept", "huit",  "neuf",   "dix"};
static const char *const EN_NUMBERS[] = {"two",   "three", "four", "five", "six",
                                         "seven", "eight", "nine", "ten"};

static int in_list(const char *w, const char *const *list, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (is(w, list[i])) return 1;
    return 0;
}

/* ---- determinism ---- */

static void remove_corpus_dir(const char *dir, CorpusTask task) {
    char path[512];
    for (int s = 0; s < CORPUS_NSPLITS; s++) {
        if (!corpus_file_name(task, s)) continue;
        snprintf(path, sizeof path, "%s/%s", dir, corpus_file_name(task, s));
        unlink(path);
    }
    rmdir(dir);
}

static uint64_t fnv1a(uint64_t h, const char *s, size_t n) {
    for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char)s[i]) * 0x100000001B3ull;
    return h;
}

Test(corpus, same_seed_writes_byte_identical_files) {
    for (int task = CORPUS_TRANSLATE; task <= CORPUS_REVERSE; task++) {
        char dir[2][64] = {"/tmp/attograd_gen_a_XXXXXX", "/tmp/attograd_gen_b_XXXXXX"};
        for (int k = 0; k < 2; k++) {
            cr_assert(mkdtemp(dir[k]) != NULL, "mkdtemp: %s", strerror(errno));
            Corpus c = make_corpus((CorpusTask)task);
            cr_assert_eq(corpus_write(&c, dir[k]), AG_OK, "%s", ag_last_error());
            corpus_free(&c);
        }
        for (int s = 0; s < CORPUS_NSPLITS; s++) {
            if (!corpus_file_name((CorpusTask)task, s)) {
                cr_assert_eq(s, CORPUS_GEN_LONG); /* copy and reverse have no gen_long */
                continue;
            }
            char pa[128], pb[128];
            snprintf(pa, sizeof pa, "%s/%s", dir[0], corpus_file_name((CorpusTask)task, s));
            snprintf(pb, sizeof pb, "%s/%s", dir[1], corpus_file_name((CorpusTask)task, s));
            size_t na, nb;
            char *a = ts_read_text(pa, &na), *b = ts_read_text(pb, &nb);
            cr_assert(na > 0 && na == nb && memcmp(a, b, na) == 0, "%s and %s differ", pa, pb);
            free(a);
            free(b);
        }
        for (int k = 0; k < 2; k++) remove_corpus_dir(dir[k], (CorpusTask)task);
    }
}

Test(corpus, another_seed_gives_another_corpus) {
    CorpusConfig cfg = corpus_default_config(CORPUS_TRANSLATE);
    Corpus a, b;
    cr_assert_eq(corpus_generate(&cfg, &a), AG_OK);
    cfg.seed = 2;
    cr_assert_eq(corpus_generate(&cfg, &b), AG_OK);
    size_t same = 0;
    for (size_t i = 0; i < a.split[CORPUS_TRAIN].n; i++)
        same += strcmp(a.split[CORPUS_TRAIN].pairs[i].src, b.split[CORPUS_TRAIN].pairs[i].src) == 0;
    cr_assert_lt(same, 100, "%zu of the train sentences are the same with seed 1 and seed 2", same);
    corpus_free(&a);
    corpus_free(&b);
}

/* The default corpus is the translation example's data: any change to it (the grammar, the
 * draws, the RNG) must be deliberate. Update the digest and data/README.md together. */
Test(corpus, default_corpus_matches_its_pinned_digest) {
    Corpus c = make_corpus(CORPUS_TRANSLATE);
    uint64_t h = 0xCBF29CE484222325ull;
    for (int s = 0; s < CORPUS_NSPLITS; s++)
        for (size_t i = 0; i < c.split[s].n; i++) {
            h = fnv1a(h, c.split[s].pairs[i].src, strlen(c.split[s].pairs[i].src) + 1);
            h = fnv1a(h, c.split[s].pairs[i].tgt, strlen(c.split[s].pairs[i].tgt) + 1);
        }
    cr_assert_str_eq(c.split[CORPUS_TEST].pairs[0].src,
                     "they do not scratch seven knives that do not save the snake .");
    cr_assert_str_eq(c.split[CORPUS_TEST].pairs[0].tgt,
                     "ils ne grattent pas sept couteaux qui ne sauvent pas le serpent .");
    cr_assert_eq(h, 0xc5a3589d96558eabull, "digest %#018llx", (unsigned long long)h);
    corpus_free(&c);
}

Test(corpus, splits_do_not_depend_on_the_train_size) {
    CorpusConfig cfg = corpus_default_config(CORPUS_TRANSLATE);
    Corpus a, b;
    cr_assert_eq(corpus_generate(&cfg, &a), AG_OK);
    cfg.n[CORPUS_TRAIN] = 50;
    cr_assert_eq(corpus_generate(&cfg, &b), AG_OK);
    cr_assert_eq(b.split[CORPUS_TRAIN].n, 50);
    for (int s = CORPUS_VALID; s < CORPUS_NSPLITS; s++) {
        cr_assert_eq(a.split[s].n, b.split[s].n);
        for (size_t i = 0; i < a.split[s].n; i++)
            cr_assert_str_eq(a.split[s].pairs[i].tgt, b.split[s].pairs[i].tgt);
    }
    corpus_free(&a);
    corpus_free(&b);
}

/* ---- splits ---- */

static int cmp_str(const void *a, const void *b) {
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

Test(corpus, no_source_occurs_twice_so_no_valid_test_or_gen_pair_is_in_train) {
    Corpus c = make_corpus(CORPUS_TRANSLATE);
    size_t total = 0;
    for (int s = 0; s < CORPUS_NSPLITS; s++) total += c.split[s].n;
    const CorpusConfig def = corpus_default_config(CORPUS_TRANSLATE);
    for (int s = 0; s < CORPUS_NSPLITS; s++) cr_assert_eq(c.split[s].n, def.n[s]);
    const char **src = malloc(total * sizeof *src);
    size_t k = 0;
    for (int s = 0; s < CORPUS_NSPLITS; s++)
        for (size_t i = 0; i < c.split[s].n; i++) src[k++] = c.split[s].pairs[i].src;
    qsort(src, total, sizeof *src, cmp_str);
    for (size_t i = 1; i < total; i++)
        cr_assert(strcmp(src[i - 1], src[i]) != 0, "'%s' occurs twice", src[i]);
    free(src);
    corpus_free(&c);
}

/* A French noun phrase: det [pre-adj] noun [post-adj], checked for agreement as it is read. */
typedef struct {
    int start, end; /* token range [start, end] */
    int plural;
    int noun, adj[2]; /* adj: before and after the noun, -1 when absent */
} FrNp;

static int fr_noun_phrases(const Words *w, const Lex *fr, FrNp *out, int max) {
    size_t nn;
    const CorpusNoun *nouns = corpus_nouns(&nn);
    int n = 0;
    for (int i = 0; i < w->n; i++) {
        const char *d = w->w[i];
        int gender = 0, plural = -1; /* gender 0: any */
        if (is(d, "le") || is(d, "un") || is(d, "du"))
            gender = 'm', plural = 0;
        else if (is(d, "la") || is(d, "une"))
            gender = 'f', plural = 0;
        else if (is(d, "les") || is(d, "des") || in_list(d, FR_NUMBERS, 9))
            plural = 1;
        else if (is(d, "de") && i > 0 && is(w->w[i - 1], "pas"))
            plural = 0; /* pas de chat */
        if (plural < 0) continue;
        int j = i + 1, pre = -1;
        const Word *e = j < w->n ? lex_find(fr, w->w[j]) : NULL;
        if (e && e->adj >= 0) {
            pre = j;
            e = ++j < w->n ? lex_find(fr, w->w[j]) : NULL;
        }
        cr_assert(e && e->noun >= 0, "no noun after '%s' in: %s", d, w->buf);
        const CorpusNoun *noun = &nouns[e->noun];
        cr_assert(gender == 0 || noun->gender == gender, "'%s %s': gender", d, w->w[j]);
        cr_assert(e->noun_num & (plural ? 2 : 1), "'%s %s': number", d, w->w[j]);
        int slot = CORPUS_AGREE(noun->gender, plural);
        int noun_idx = e->noun, adj[2] = {-1, -1};
        if (pre >= 0) {
            const Word *a = lex_find(fr, w->w[pre]);
            cr_assert(a->adj_slots & (1 << slot), "'%s %s': the adjective does not agree",
                      w->w[pre], w->w[j]);
            adj[0] = a->adj;
        }
        int end = j;
        if (j + 1 < w->n) {
            const Word *a = lex_find(fr, w->w[j + 1]);
            if (a && a->adj >= 0) {
                cr_assert(a->adj_slots & (1 << slot), "'%s %s': the adjective does not agree",
                          w->w[j], w->w[j + 1]);
                end = j + 1;
                adj[1] = a->adj;
            }
        }
        cr_assert_lt(n, max);
        out[n++] = (FrNp){i, end, plural, noun_idx, {adj[0], adj[1]}};
        i = end;
    }
    return n;
}

/* Reads every English noun phrase (det [adj] [adj] noun) into out, checking a/an and number. */
typedef struct {
    const Lex *en;
    int det_is_a, det_is_number;
    int adj[2], n_adj; /* adjective indices, in order */
    int noun, plural;
} EnNp;

static int en_noun_phrases(const Words *w, const Lex *en, EnNp *out, int max) {
    int n = 0;
    for (int i = 0; i < w->n; i++) {
        int a = is(w->w[i], "a") || is(w->w[i], "an");
        int num = in_list(w->w[i], EN_NUMBERS, 9);
        if (!a && !num && !is(w->w[i], "the")) continue;
        cr_assert_lt(n, max);
        EnNp *np = &out[n++];
        *np = (EnNp){en, a, num, {-1, -1}, 0, -1, 0};
        int j = i + 1;
        const Word *e = j < w->n ? lex_find(en, w->w[j]) : NULL;
        while (e && e->adj >= 0 && np->n_adj < 2) {
            np->adj[np->n_adj++] = e->adj;
            e = ++j < w->n ? lex_find(en, w->w[j]) : NULL;
        }
        if (!e || e->noun < 0)
            cr_assert_fail("no noun after '%s' (token %d): %s", w->w[i], i, w->buf);
        np->noun = e->noun;
        np->plural = e->noun_num == 2;
        if (a) {
            cr_assert(!np->plural, "'%s' before the plural '%s'", w->w[i], w->w[j]);
            int vowel = strchr("aeiou", w->w[i + 1][0]) != NULL;
            cr_assert_eq(is(w->w[i], "an"), vowel, "'%s %s'", w->w[i], w->w[i + 1]);
        }
        if (num) cr_assert(np->plural, "'%s %s': a number before a singular", w->w[i], w->w[j]);
        i = j;
    }
    return n;
}

Test(corpus, held_out_adjective_noun_pairs_appear_only_in_gen_test) {
    Lex *en = lex_new(), *fr = lex_new();
    build_lex(en, fr);
    size_t nh, na, nn;
    const CorpusHeldOut *held = corpus_held_out(&nh);
    /* the pairs data/README.md lists, by name (the table in corpus.c holds indices) */
    static const char *const names[][2] = {
        {"black", "horse"}, {"white", "mouse"}, {"red", "hat"},     {"green", "frog"},
        {"blue", "car"},    {"happy", "cow"},   {"curious", "fox"}, {"heavy", "box"},
        {"dry", "cake"},    {"small", "house"}, {"big", "dog"},     {"old", "queen"},
        {"young", "cat"},   {"pretty", "boat"},
    };
    cr_assert_eq(nh, sizeof names / sizeof names[0]);
    const CorpusAdj *adjs = corpus_adjs(&na);
    const CorpusNoun *nouns = corpus_nouns(&nn);
    for (size_t i = 0; i < nh; i++) {
        cr_assert(held[i].adj >= 0 && held[i].adj < (int)na && held[i].noun >= 0 &&
                  held[i].noun < (int)nn);
        cr_assert_str_eq(adjs[held[i].adj].en, names[i][0]);
        cr_assert_str_eq(nouns[held[i].noun].en_sg, names[i][1]);
    }
    Corpus c = make_corpus(CORPUS_TRANSLATE);
    int used[64] = {0};
    for (int s = 0; s < CORPUS_NSPLITS; s++) {
        for (size_t i = 0; i < c.split[s].n; i++) {
            Words w;
            EnNp np[MAXW];
            split(c.split[s].pairs[i].src, &w);
            int n = en_noun_phrases(&w, en, np, MAXW), held_here = 0;
            for (int k = 0; k < n; k++)
                for (int a = 0; a < np[k].n_adj; a++) {
                    if (!corpus_is_held_out(np[k].adj[a], np[k].noun)) continue;
                    held_here++;
                    for (size_t h = 0; h < nh; h++)
                        if (held[h].adj == np[k].adj[a] && held[h].noun == np[k].noun) used[h]++;
                }
            /* the French side: the same pairs, before or after the noun */
            Words t;
            FrNp fnp[MAXW];
            split(c.split[s].pairs[i].tgt, &t);
            int fn = fr_noun_phrases(&t, fr, fnp, MAXW), fr_held = 0;
            for (int k = 0; k < fn; k++)
                for (int a = 0; a < 2; a++)
                    fr_held += fnp[k].adj[a] >= 0 && corpus_is_held_out(fnp[k].adj[a], fnp[k].noun);
            cr_assert_eq(fr_held, held_here, "%s | %s", w.buf, t.buf);
            if (s >= CORPUS_GEN)
                cr_assert_gt(held_here, 0, "%s without a held-out pair: %s",
                             corpus_file_name(CORPUS_TRANSLATE, s), w.buf);
            else
                cr_assert_eq(held_here, 0, "a held-out pair in %s: %s",
                             corpus_file_name(CORPUS_TRANSLATE, s), c.split[s].pairs[i].src);
        }
    }
    for (size_t h = 0; h < nh; h++) cr_assert_gt(used[h], 0, "held-out pair %zu never used", h);
    corpus_free(&c);
    free(en);
    free(fr);
}

/* PPs and relative clauses of an English sentence: "in front of" counts once (as "in"). */
static int count_modifiers(const Words *w) {
    static const char *const mods[] = {"that", "on", "under", "near", "with", "behind", "in"};
    int n = 0;
    for (int i = 0; i < w->n; i++) n += in_list(w->w[i], mods, 7);
    return n;
}

/* gen_test: deeper than train/valid/test, as long at most; gen_long: deeper and longer. */
Test(corpus, gen_test_is_deeper_and_gen_long_also_longer_than_train_valid_and_test) {
    Corpus c = make_corpus(CORPUS_TRANSLATE);
    int max_len = 0, max_mods = 0, min_len = 1 << 30, min_mods[2] = {1 << 30, 1 << 30};
    int max_tok[2] = {0, 0};
    for (int s = 0; s < CORPUS_NSPLITS; s++)
        for (size_t i = 0; i < c.split[s].n; i++) {
            Words src, tgt;
            split(c.split[s].pairs[i].src, &src);
            split(c.split[s].pairs[i].tgt, &tgt);
            int len = src.n > tgt.n ? src.n : tgt.n; /* tokens, the "." included */
            int words = words_without_period(&src) < words_without_period(&tgt)
                            ? words_without_period(&src)
                            : words_without_period(&tgt);
            int mods = count_modifiers(&src);
            if (s >= CORPUS_GEN) {
                int g = s == CORPUS_GEN_LONG;
                if (g && words < min_len) min_len = words;
                if (mods < min_mods[g]) min_mods[g] = mods;
                if (len > max_tok[g]) max_tok[g] = len;
            } else {
                cr_assert_geq(src.n, 4);
                cr_assert_leq(len, CORPUS_MAX_LEN, "too long: %s", c.split[s].pairs[i].src);
                if (len > max_len) max_len = len;
                if (mods > max_mods) max_mods = mods;
            }
        }
    cr_assert_eq(max_len, CORPUS_MAX_LEN);
    cr_assert_eq(max_mods, CORPUS_MAX_MODS);
    for (int g = 0; g < 2; g++)
        cr_assert_gt(min_mods[g], max_mods, "%s: %d modifiers, train: up to %d",
                     g ? "gen_long" : "gen_test", min_mods[g], max_mods);
    cr_assert_leq(max_tok[0], CORPUS_MAX_LEN, "gen_test stays within the lengths of train");
    cr_assert_gt(min_len, max_len, "gen_long: %d words, train/valid/test: up to %d tokens", min_len,
                 max_len);
    cr_assert_leq(max_tok[1], CORPUS_GEN_MAX_LEN);
    corpus_free(&c);
}

Test(corpus, every_valid_and_test_token_occurs_in_train) {
    Corpus c = make_corpus(CORPUS_TRANSLATE);
    for (int side = 0; side < 2; side++) {
        Lex *seen = lex_new();
        char *store = malloc(1 << 16);
        size_t used = 0;
        for (size_t i = 0; i < c.split[CORPUS_TRAIN].n; i++) {
            CorpusPair *p = &c.split[CORPUS_TRAIN].pairs[i];
            Words w;
            split(side ? p->tgt : p->src, &w);
            for (int k = 0; k < w.n; k++) {
                if (lex_find(seen, w.w[k])) continue;
                size_t len = strlen(w.w[k]) + 1;
                cr_assert_lt(used + len, (size_t)1 << 16);
                memcpy(store + used, w.w[k], len);
                lex_entry(seen, store + used);
                used += len;
            }
        }
        for (int s = CORPUS_VALID; s < CORPUS_NSPLITS; s++)
            for (size_t i = 0; i < c.split[s].n; i++) {
                CorpusPair *p = &c.split[s].pairs[i];
                Words w;
                split(side ? p->tgt : p->src, &w);
                for (int k = 0; k < w.n; k++)
                    cr_assert(lex_find(seen, w.w[k]), "'%s' is not in train", w.w[k]);
            }
        free(seen);
        free(store);
    }
    corpus_free(&c);
}

/* ---- the French ---- */

Test(corpus, french_determiners_nouns_and_adjectives_agree) {
    Lex *en = lex_new(), *fr = lex_new();
    build_lex(en, fr);
    Corpus c = make_corpus(CORPUS_TRANSLATE);
    long nps = 0, les = 0;
    for (int s = 0; s < CORPUS_NSPLITS; s++)
        for (size_t i = 0; i < c.split[s].n; i++) {
            Words src, tgt;
            EnNp enp[MAXW];
            FrNp frp[MAXW];
            split(c.split[s].pairs[i].src, &src);
            split(c.split[s].pairs[i].tgt, &tgt);
            int ne = en_noun_phrases(&src, en, enp, MAXW);
            int nf = fr_noun_phrases(&tgt, fr, frp, MAXW);
            cr_assert_eq(ne, nf, "%d English and %d French noun phrases: %s | %s", ne, nf, src.buf,
                         tgt.buf);
            for (int k = 0; k < nf; k++) {
                cr_assert_eq(enp[k].plural, frp[k].plural, "noun phrase %d: number: %s | %s", k,
                             src.buf, tgt.buf);
                les += is(tgt.w[frp[k].start], "les");
            }
            nps += nf;
        }
    cr_assert_gt(les, 1000);
    cr_log_info("%ld noun phrases checked, %ld with les", nps, les);
    corpus_free(&c);
    free(en);
    free(fr);
}

static int pronoun_person(const char *w) {
    static const char *const p[] = {"je", "tu", "il", "elle", "nous", "ils"};
    static const int person[] = {0, 1, 2, 2, 3, 5};
    for (int i = 0; i < 6; i++)
        if (is(w, p[i])) return person[i];
    return -1;
}

/* The verb after token i (skipping ne) has person p. */
static void expect_verb(const Words *w, const Lex *fr, int i, int p, const char *why) {
    int j = i + 1 + (i + 1 < w->n && is(w->w[i + 1], "ne"));
    cr_assert_lt(j, w->n, "%s: no verb in: %s", why, w->buf);
    const Word *e = lex_find(fr, w->w[j]);
    cr_assert(e && e->verb >= 0 && (e->persons & (1 << p)), "%s: '%s' is not person %d in: %s", why,
              w->w[j], p, w->buf);
}

Test(corpus, french_verbs_agree_with_their_subjects) {
    Lex *en = lex_new(), *fr = lex_new();
    build_lex(en, fr);
    Corpus c = make_corpus(CORPUS_TRANSLATE);
    long checked[4] = {0};
    for (int s = 0; s < CORPUS_NSPLITS; s++)
        for (size_t i = 0; i < c.split[s].n; i++) {
            Words src, tgt;
            FrNp np[MAXW];
            split(c.split[s].pairs[i].src, &src);
            split(c.split[s].pairs[i].tgt, &tgt);
            /* pronouns: je vois, nous voyons, qu' il voit */
            for (int k = 0; k < tgt.n; k++) {
                int p = pronoun_person(tgt.w[k]);
                if (p < 0) continue;
                expect_verb(&tgt, fr, k, p, "pronoun");
                checked[0]++;
            }
            int n = fr_noun_phrases(&tgt, fr, np, MAXW);
            for (int k = 0; k < n; k++) {
                int after = np[k].end + 1;
                if (after >= tgt.n) continue;
                const char *next = tgt.w[after];
                int verb_next = is(next, "ne") || is_verb(fr, next);
                /* the sentence's subject: le chat noir voit */
                if (np[k].start == 0 && verb_next) {
                    expect_verb(&tgt, fr, np[k].end, np[k].plural ? 5 : 2, "subject");
                    checked[1]++;
                }
                /* a relative clause's subject: que le chat voit */
                if (np[k].start > 0 && verb_next &&
                    (is(tgt.w[np[k].start - 1], "que") || is(tgt.w[np[k].start - 1], "qu'"))) {
                    expect_verb(&tgt, fr, np[k].end, np[k].plural ? 5 : 2, "que");
                    checked[2]++;
                }
                /* the head of qui: le chat qui voit, les chats qui voient */
                if (is(next, "qui")) {
                    expect_verb(&tgt, fr, after, np[k].plural ? 5 : 2, "qui");
                    checked[2]++;
                }
                /* coordinated subjects: le chat et la souris voient */
                if (np[k].start == 0 && is(next, "et") && k + 1 < n &&
                    np[k + 1].start == after + 1 && np[k + 1].end + 1 < tgt.n &&
                    (is(tgt.w[np[k + 1].end + 1], "ne") || is_verb(fr, tgt.w[np[k + 1].end + 1]))) {
                    expect_verb(&tgt, fr, np[k + 1].end, 5, "coordination");
                    checked[3]++;
                }
            }
            /* English: he sees / he does not see; i see / we do not see */
            for (int k = 0; k + 1 < src.n; k++) {
                const char *w = src.w[k], *next = src.w[k + 1];
                const Word *e = lex_find(en, next);
                if (is(w, "he") || is(w, "she"))
                    cr_assert(is(next, "does") || (e && (e->persons & 4)), "%s", src.buf);
                if (is(w, "i") || is(w, "you") || is(w, "we") || is(w, "they"))
                    cr_assert(is(next, "do") || (e && (e->persons & 2)), "%s", src.buf);
            }
        }
    for (int k = 0; k < 4; k++)
        cr_assert_gt(checked[k], 100, "check %d ran %ld times", k, checked[k]);
    cr_log_info("agreement: %ld pronouns, %ld subjects, %ld relative clauses, %ld coordinations",
                checked[0], checked[1], checked[2], checked[3]);
    corpus_free(&c);
    free(en);
    free(fr);
}

Test(corpus, negation_is_ne_verb_pas_and_a_becomes_de_after_it) {
    Lex *en = lex_new(), *fr = lex_new();
    build_lex(en, fr);
    Corpus c = make_corpus(CORPUS_TRANSLATE);
    long negations = 0, pas_de = 0;
    for (int s = 0; s < CORPUS_NSPLITS; s++)
        for (size_t i = 0; i < c.split[s].n; i++) {
            Words src, tgt;
            split(c.split[s].pairs[i].src, &src);
            split(c.split[s].pairs[i].tgt, &tgt);
            int nots = 0, indefinite_objects = 0, ne = 0, pas = 0, de = 0;
            for (int k = 0; k < src.n; k++) {
                if (!is(src.w[k], "not")) continue;
                nots++;
                cr_assert(k > 0 && (is(src.w[k - 1], "does") || is(src.w[k - 1], "do")));
                const Word *e = k + 1 < src.n ? lex_find(en, src.w[k + 1]) : NULL;
                cr_assert(e && (e->persons & 2), "no base verb after not: %s", src.buf);
                int obj = k + 2 + is(src.w[k + 1], "look"); /* look for */
                if (obj < src.n && (is(src.w[obj], "a") || is(src.w[obj], "an")))
                    indefinite_objects++;
            }
            for (int k = 0; k < tgt.n; k++) {
                if (is(tgt.w[k], "pas")) pas++;
                if (is(tgt.w[k], "pas") && k + 1 < tgt.n && is(tgt.w[k + 1], "de")) de++;
                if (!is(tgt.w[k], "ne")) continue;
                ne++;
                cr_assert(k + 2 < tgt.n && is_verb(fr, tgt.w[k + 1]) && is(tgt.w[k + 2], "pas"),
                          "ne without verb pas: %s", tgt.buf);
                cr_assert(!(k + 3 < tgt.n && (is(tgt.w[k + 3], "un") || is(tgt.w[k + 3], "une"))),
                          "pas un: %s", tgt.buf);
            }
            cr_assert(nots == ne && ne == pas, "%d not, %d ne, %d pas: %s | %s", nots, ne, pas,
                      src.buf, tgt.buf);
            cr_assert_eq(indefinite_objects, de, "%s | %s", src.buf, tgt.buf);
            negations += ne;
            pas_de += de;
        }
    cr_assert_gt(negations, 5000);
    cr_assert_gt(pas_de, 500);
    corpus_free(&c);
    free(en);
    free(fr);
}

static int fr_vowel(const char *w) {
    if (strchr("aeiouy", w[0])) return 1;
    return (unsigned char)w[0] == 0xC3 || (unsigned char)w[0] == 0xC5; /* é è à ... œ */
}

Test(corpus, contractions_and_elisions_are_made) {
    Corpus c = make_corpus(CORPUS_TRANSLATE);
    long du = 0, des = 0, qu = 0, d = 0, an = 0;
    for (int s = 0; s < CORPUS_NSPLITS; s++)
        for (size_t i = 0; i < c.split[s].n; i++) {
            Words src, tgt;
            split(c.split[s].pairs[i].src, &src);
            split(c.split[s].pairs[i].tgt, &tgt);
            for (int k = 0; k + 1 < tgt.n; k++) {
                const char *w = tgt.w[k], *next = tgt.w[k + 1];
                cr_assert(!(is(w, "de") && (is(next, "le") || is(next, "les"))), "%s", tgt.buf);
                cr_assert(!((is(w, "de") || is(w, "que")) && fr_vowel(next)), "%s", tgt.buf);
                if (is(w, "qu'") || is(w, "d'")) cr_assert(fr_vowel(next), "%s", tgt.buf);
                if (is(w, "près"))
                    cr_assert(is(next, "de") || is(next, "du") || is(next, "des") || is(next, "d'"),
                              "%s", tgt.buf);
                du += is(w, "près") && is(next, "du");
                des += is(w, "près") && is(next, "des");
                qu += is(w, "qu'");
                d += is(w, "d'");
            }
            for (int k = 0; k < src.n; k++) {
                cr_assert(strchr(src.w[k], '\'') == NULL);
                an += is(src.w[k], "an");
            }
        }
    cr_assert(du > 50 && des > 50 && qu > 50 && d > 50 && an > 50,
              "du %ld, des %ld, qu' %ld, d' %ld, an %ld", du, des, qu, d, an);
    corpus_free(&c);
}

Test(corpus, lines_are_lower_case_tokens_separated_by_single_spaces) {
    for (int task = CORPUS_TRANSLATE; task <= CORPUS_REVERSE; task++) {
        Corpus c = make_corpus((CorpusTask)task);
        for (int s = 0; s < CORPUS_NSPLITS; s++)
            for (size_t i = 0; i < c.split[s].n; i++) {
                const char *line[2] = {c.split[s].pairs[i].src, c.split[s].pairs[i].tgt};
                for (int side = 0; side < 2; side++) {
                    const char *p = line[side];
                    cr_assert(*p && *p != ' ' && p[strlen(p) - 1] != ' ', "'%s'", p);
                    cr_assert(!strstr(p, "  ") && !strchr(p, '\t') && !strchr(p, '\n'));
                    for (; *p; p++) cr_assert(!(*p >= 'A' && *p <= 'Z'), "'%s'", line[side]);
                }
                /* the final " ." is on both sides or on neither */
                size_t a = strlen(line[0]), b = strlen(line[1]);
                cr_assert_eq(line[0][a - 1] == '.', line[1][b - 1] == '.');
            }
        corpus_free(&c);
    }
}

/* ---- the lexicon and the vocabulary ---- */

static int fr_consonant_initial(const char *w) {
    return !fr_vowel(w) && !(w[0] == 'h' && strcmp(w, "hibou") && strcmp(w, "hiboux"));
}

Test(corpus, french_nouns_pre_adjectives_and_verbs_start_with_a_consonant) {
    size_t nn, na, nv;
    const CorpusNoun *nouns = corpus_nouns(&nn);
    const CorpusAdj *adjs = corpus_adjs(&na);
    const CorpusVerb *verbs = corpus_verbs(&nv);
    /* so le/la/je/ne never elide (l', j', n' are not in the grammar) */
    for (size_t i = 0; i < nn; i++)
        cr_assert(fr_consonant_initial(nouns[i].fr_sg) && fr_consonant_initial(nouns[i].fr_pl),
                  "%s", nouns[i].fr_sg);
    for (size_t i = 0; i < na; i++)
        for (int s = 0; s < 4; s++)
            if (adjs[i].pre) cr_assert(fr_consonant_initial(adjs[i].fr[s]), "%s", adjs[i].fr[s]);
    for (size_t i = 0; i < nv; i++)
        for (int p = 0; p < 6; p++)
            cr_assert(fr_consonant_initial(verbs[i].fr[p]), "%s", verbs[i].fr[p]);
}

Test(corpus, vocabulary_sizes_are_in_the_stated_ranges) {
    size_t nn, na, nv, npre = 0;
    const CorpusAdj *adjs = corpus_adjs(&na);
    corpus_nouns(&nn);
    corpus_verbs(&nv);
    for (size_t i = 0; i < na; i++) npre += (size_t)adjs[i].pre;
    /* data/README.md states these ranges */
    cr_assert(nn >= 35 && nn <= 45, "%zu nouns", nn);
    cr_assert(na >= 20 && na <= 30, "%zu adjectives", na);
    cr_assert(npre >= 3 && npre <= 6, "%zu pre-noun adjectives", npre);
    cr_assert(nv >= 25 && nv <= 35, "%zu verbs", nv);
    Corpus c = make_corpus(CORPUS_TRANSLATE);
    for (int side = 0; side < 2; side++) {
        Lex *seen = lex_new();
        char *store = malloc(1 << 16);
        size_t used = 0;
        for (int s = 0; s < CORPUS_NSPLITS; s++)
            for (size_t i = 0; i < c.split[s].n; i++) {
                Words w;
                split(side ? c.split[s].pairs[i].tgt : c.split[s].pairs[i].src, &w);
                for (int k = 0; k < w.n; k++) {
                    if (lex_find(seen, w.w[k])) continue;
                    size_t len = strlen(w.w[k]) + 1;
                    memcpy(store + used, w.w[k], len);
                    lex_entry(seen, store + used);
                    used += len;
                }
            }
        if (side == 0)
            cr_assert(seen->n >= 180 && seen->n <= 240, "%d English words", seen->n);
        else
            cr_assert(seen->n >= 280 && seen->n <= 380, "%d French words", seen->n);
        cr_log_info("%s vocabulary: %d words", side ? "French" : "English", seen->n);
        /* the vous forms never occur; every other form does */
        size_t nverbs;
        const CorpusVerb *verbs = corpus_verbs(&nverbs);
        for (size_t v = 0; side == 1 && v < nverbs; v++)
            for (int p = 0; p < 6; p++)
                cr_assert_eq(lex_find(seen, verbs[v].fr[p]) != NULL, p != 4, "%s", verbs[v].fr[p]);
        free(seen);
        free(store);
    }
    corpus_free(&c);
}

/* ---- copy and reverse ---- */

Test(corpus, copy_and_reverse_targets_are_the_sequence_and_its_reverse) {
    for (int task = CORPUS_COPY; task <= CORPUS_REVERSE; task++) {
        Corpus c = make_corpus((CorpusTask)task);
        cr_assert_eq(c.split[CORPUS_GEN_LONG].n, 0);
        for (int s = 0; s < CORPUS_GEN_LONG; s++) {
            cr_assert_gt(c.split[s].n, 0);
            for (size_t i = 0; i < c.split[s].n; i++) {
                Words src, tgt;
                split(c.split[s].pairs[i].src, &src);
                split(c.split[s].pairs[i].tgt, &tgt);
                int lo = s == CORPUS_GEN ? CORPUS_COPY_MAX + 1 : CORPUS_COPY_MIN;
                int hi = s == CORPUS_GEN ? CORPUS_COPY_GEN_MAX : CORPUS_COPY_MAX;
                cr_assert(src.n >= lo && src.n <= hi, "length %d", src.n);
                cr_assert_eq(src.n, tgt.n);
                for (int k = 0; k < src.n; k++) {
                    cr_assert(strlen(src.w[k]) == 1 && src.w[k][0] >= '0' && src.w[k][0] <= '9');
                    const char *want = task == CORPUS_COPY ? src.w[k] : src.w[src.n - 1 - k];
                    cr_assert_str_eq(tgt.w[k], want, "%s -> %s", src.buf, tgt.buf);
                }
            }
        }
        corpus_free(&c);
    }
}

/* ---- the command line ---- */

typedef struct {
    const char *argv[16];
} Args;

static void run_main(void *ctx) {
    Args *a = ctx;
    int argc = 0;
    while (a->argv[argc]) argc++;
    if (!freopen("/dev/null", "w", stdout)) _exit(99);
    int rc = corpus_main(argc, (char **)a->argv);
    fflush(stdout);
    _exit(rc);
}

static const struct {
    Args args;
    const char *message;
} BAD_FLAGS[] = {
    {{{"gen", "--bogus", NULL}}, "unknown flag '--bogus'"},
    {{{"gen", "--seed", NULL}}, "flag '--seed' needs a value"},
    {{{"gen", "--seed", "-1", NULL}}, "--seed needs a non-negative integer, not '-1'"},
    {{{"gen", "--seed", "12x", NULL}}, "not '12x'"},
    {{{"gen", "--train", "2000000", NULL}}, "--train needs an integer from 0 to 1000000"},
    {{{"gen", "--test=", NULL}}, "--test needs an integer"},
    {{{"gen", "--task", "french", NULL}}, "unknown task 'french'"},
    {{{"gen", "extra", NULL}}, "unexpected argument 'extra'"},
    {{{"gen", "--out=", NULL}}, "needs a directory"},
    {{{"gen", "--task", "copy", "--gen-long", "5", NULL}},
     "--gen-long is only for --task translate"},
};

Test(gen_main, bad_flags_exit_2_with_a_message) {
    for (size_t i = 0; i < sizeof BAD_FLAGS / sizeof BAD_FLAGS[0]; i++) {
        Capture cap;
        Args a = BAD_FLAGS[i].args;
        capture_run(run_main, &a, &cap);
        cr_assert_eq(cap.exit_code, 2, "case %zu: exit %d, stderr: %s", i, cap.exit_code, cap.err);
        cr_assert(capture_has(&cap, BAD_FLAGS[i].message), "case %zu: stderr: %s", i, cap.err);
    }
}

Test(gen_main, help_exits_0_and_a_run_writes_the_files) {
    Capture cap;
    Args help = {{"gen", "--help", NULL}};
    capture_run(run_main, &help, &cap);
    cr_assert_eq(cap.exit_code, 0);
    char dir[] = "/tmp/attograd_gen_main_XXXXXX";
    cr_assert(mkdtemp(dir) != NULL);
    Args run = {{"gen", "--out", dir, "--task=reverse", "--seed", "7", "--train", "30", "--valid",
                 "3", "--test", "4", "--gen", "5", NULL}};
    capture_run(run_main, &run, &cap);
    cr_assert_eq(cap.exit_code, 0, "stderr: %s", cap.err);
    const size_t want[CORPUS_GEN_LONG] = {30, 3, 4, 5};
    for (int s = 0; s < CORPUS_GEN_LONG; s++) {
        char path[128];
        snprintf(path, sizeof path, "%s/%s", dir, corpus_file_name(CORPUS_REVERSE, s));
        size_t len, lines = 0;
        char *text = ts_read_text(path, &len);
        for (size_t k = 0; k < len; k++) lines += text[k] == '\n';
        cr_assert_eq(lines, want[s], "%s: %zu lines", path, lines);
        free(text);
    }
    remove_corpus_dir(dir, CORPUS_REVERSE);
}

Test(gen_main, write_errors_exit_1_naming_the_path_and_the_reason) {
    char dir[] = "/tmp/attograd_gen_err_XXXXXX";
    cr_assert(mkdtemp(dir) != NULL);
    /* --out under a regular file: the directory cannot be made */
    char file[128], out[160];
    snprintf(file, sizeof file, "%s/file", dir);
    FILE *f = fopen(file, "w");
    cr_assert(f != NULL);
    fclose(f);
    snprintf(out, sizeof out, "%s/sub", file);
    Capture cap;
    Args a = {
        {"gen", "--out", out, "--train", "5", "--valid", "1", "--test", "1", "--gen", "1", NULL}};
    capture_run(run_main, &a, &cap);
    cr_assert_eq(cap.exit_code, 1, "stderr: %s", cap.err);
    cr_assert(capture_has(&cap, out) && capture_has(&cap, strerror(ENOTDIR)), "%s", cap.err);
    /* a directory where train.tsv should be: it cannot be opened */
    char blocker[160];
    snprintf(blocker, sizeof blocker, "%s/train.tsv", dir);
    cr_assert_eq(mkdir(blocker, 0777), 0);
    Args b = {
        {"gen", "--out", dir, "--train", "5", "--valid", "1", "--test", "1", "--gen", "1", NULL}};
    capture_run(run_main, &b, &cap);
    cr_assert_eq(cap.exit_code, 1, "stderr: %s", cap.err);
    cr_assert(capture_has(&cap, blocker) && capture_has(&cap, strerror(EISDIR)), "%s", cap.err);
    rmdir(blocker);
    unlink(file);
    remove_corpus_dir(dir, CORPUS_TRANSLATE);
}

Test(corpus, oversized_or_missing_splits_are_refused) {
    CorpusConfig cfg = corpus_default_config(CORPUS_COPY);
    cfg.n[CORPUS_VALID] = (size_t)CORPUS_MAX_SPLIT + 1;
    Corpus c;
    cr_assert_eq(corpus_generate(&cfg, &c), AG_ERR_ARG);
    cr_assert(strstr(ag_last_error(), "valid") != NULL, "%s", ag_last_error());
    cfg = corpus_default_config(CORPUS_REVERSE);
    cfg.n[CORPUS_GEN_LONG] = 1;
    cr_assert_eq(corpus_generate(&cfg, &c), AG_ERR_ARG);
    cr_assert(strstr(ag_last_error(), "no gen_long split") != NULL, "%s", ag_last_error());
}
