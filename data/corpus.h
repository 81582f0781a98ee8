/* corpus.h: the toy English-to-French corpus of the translation example, and two tiny tasks
 * (copy, reverse), made by a deterministic generator: a seed gives the same files on every
 * machine (the stream is src/tensor/rng.h's xoshiro256**, integer draws only).
 * The translation pairs come from a small synchronous grammar: each rule writes its English and
 * its French side at once, so the French is a function of the English (no synonyms).
 * Not here: the command line (data/gen.c calls corpus_main), tokenizing and batching (the
 * translation example's job). Read data/README.md for the grammar, then corpus.c. */
#ifndef ATTOGRAD_CORPUS_H
#define ATTOGRAD_CORPUS_H

#include <stddef.h>
#include <stdint.h>

#include "tensor/tensor.h" /* the status codes AG_OK, AG_ERR_*, ag_last_error() */

/* ---- the lexicon (exposed so that tests can check the text against it) ---- */

typedef struct {
    const char *en_sg, *en_pl;
    const char *fr_sg, *fr_pl;
    char gender; /* 'm' or 'f' */
} CorpusNoun;

/* fr[] is indexed by CORPUS_AGREE(gender, plural): masculine singular, feminine singular,
 * masculine plural, feminine plural. A pre adjective goes before the noun in French. */
typedef struct {
    const char *en;
    const char *fr[4];
    int pre;
} CorpusAdj;
#define CORPUS_AGREE(gender, plural) (((plural) ? 2 : 0) + ((gender) == 'f' ? 1 : 0))

/* fr[] is indexed by person: je, tu, il/elle, nous, vous, ils/elles (vous is listed for
 * completeness; the corpus never uses it). en is the base form, en_3sg the he/she form. */
typedef struct {
    const char *en, *en_3sg;
    const char *fr_inf;
    const char *fr[6];
} CorpusVerb;

/* A held-out (adjective, noun) pair: never together in train, valid or test; every gen_test
 * and gen_long sentence has at least one. Indices into the tables above. */
typedef struct {
    int adj, noun;
} CorpusHeldOut;

const CorpusNoun *corpus_nouns(size_t *n);
const CorpusAdj *corpus_adjs(size_t *n);
const CorpusVerb *corpus_verbs(size_t *n);
const CorpusHeldOut *corpus_held_out(size_t *n);
/* 1 if this (adjective, noun) pair is held out. */
int corpus_is_held_out(int adj, int noun);

/* ---- limits of the generated sentences (tokens are space-separated, the final "." counts) ---- */

enum {
    CORPUS_MAX_LEN = 25,     /* train/valid/test: at most this many tokens on either side */
    CORPUS_MAX_MODS = 2,     /* train/valid/test: at most this many PPs + relative clauses */
    CORPUS_GEN_MIN_MODS = 3, /* gen_test and gen_long: at least this many PPs + relative
                                clauses; gen_test keeps to CORPUS_MAX_LEN tokens */
    CORPUS_GEN_MAX_LEN = 40, /* gen_long: at most this many tokens on either side, and more than
                                CORPUS_MAX_LEN words (the "." not counted) on both sides */
    CORPUS_COPY_MIN = 3,     /* copy/reverse: sequence lengths in train/valid/test */
    CORPUS_COPY_MAX = 10,
    CORPUS_COPY_GEN_MAX = 15, /* copy/reverse gen split: lengths CORPUS_COPY_MAX + 1 .. this */
    CORPUS_COPY_SYMBOLS = 10, /* the alphabet: the digits 0..9 */
    CORPUS_MAX_SPLIT = 1000000
};

/* ---- generating ---- */

typedef enum { CORPUS_TRANSLATE, CORPUS_COPY, CORPUS_REVERSE } CorpusTask;

/* CORPUS_GEN: translate: deeper sentences with held-out pairs (gen_test.tsv); copy/reverse:
 * longer sequences. CORPUS_GEN_LONG: translate only: also longer than train (gen_long.tsv). */
enum { CORPUS_TRAIN, CORPUS_VALID, CORPUS_TEST, CORPUS_GEN, CORPUS_GEN_LONG, CORPUS_NSPLITS };

typedef struct {
    CorpusTask task;
    uint64_t seed;
    size_t n[CORPUS_NSPLITS]; /* pairs per split, indexed by CORPUS_TRAIN ... CORPUS_GEN_LONG */
} CorpusConfig;

typedef struct {
    char *src, *tgt; /* one malloc'd line each, no tab, no newline */
} CorpusPair;

typedef struct {
    CorpusPair *pairs;
    size_t n;
} CorpusSplit;

typedef struct {
    CorpusConfig cfg;
    CorpusSplit split[CORPUS_NSPLITS];
} Corpus;

/* The default configuration of a task (seed 1; sizes as in data/README.md). */
CorpusConfig corpus_default_config(CorpusTask task);

/* Generates every split of cfg into *c (free it with corpus_free). No source sentence occurs
 * twice in the whole corpus, so no valid/test/gen pair is in train. Each split draws from its
 * own stream (seeded by the seed and the split), and test, valid and gen are made before
 * train: changing the train size leaves the other splits unchanged.
 * Returns AG_OK; AG_ERR_ARG for a size over CORPUS_MAX_SPLIT or a gen_long split asked of copy
 * or reverse, AG_ERR_RANGE when a split cannot
 * be filled with distinct pairs, AG_ERR_NOMEM; ag_last_error() then says more. On failure *c
 * holds nothing to free. */
int corpus_generate(const CorpusConfig *cfg, Corpus *c);
void corpus_free(Corpus *c);

/* The file name of a split: train.tsv, valid.tsv, test.tsv, gen_test.tsv, gen_long.tsv for
 * translation, copy_train.tsv ... copy_gen.tsv and reverse_... for the small tasks; NULL for a
 * split the task does not have (copy/reverse have no gen_long). */
const char *corpus_file_name(CorpusTask task, int split);

/* Writes each split of the task as "source<TAB>target\n" lines into dir (created if missing; its parent
 * must exist). Returns AG_OK, or AG_ERR_IO with ag_last_error() naming the path and the
 * reason. */
int corpus_write(const Corpus *c, const char *dir);

/* The command line of data/gen.c: parses argv, generates, writes, prints a summary on stdout.
 * Returns the exit status: 0 done (or --help), 1 generating or writing failed, 2 bad flags
 * (a message on stderr). */
int corpus_main(int argc, char **argv);

#endif
