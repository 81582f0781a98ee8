/* corpus.c: the lexicon, the synchronous grammar that writes an English sentence and its
 * French translation side by side, the copy/reverse tasks, the splits (distinct sources
 * everywhere) and the TSV writer, and the command line that data/gen.c runs.
 * Every draw is rng_below() on src/tensor/rng.h's stream: integer arithmetic only, so a seed
 * gives byte-identical files on any machine. Not here: tokenizing, vocabularies and batching
 * (the translation example). Read data/README.md first: its table of phenomena is the map of
 * the gen_* functions below. */
#include "corpus.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "tensor/rng.h"

#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

/* ---- the lexicon ----
 * Every French noun, pre-noun adjective and verb form starts with a consonant (and no silent h),
 * so le/la/je/ne never elide; que and de elide before un/une/il/elle/ils (see fr_orthography). */

static const CorpusNoun NOUNS[] = {
    {"cat", "cats", "chat", "chats", 'm'},
    {"dog", "dogs", "chien", "chiens", 'm'},
    {"mouse", "mice", "souris", "souris", 'f'},
    {"horse", "horses", "cheval", "chevaux", 'm'},
    {"cow", "cows", "vache", "vaches", 'f'},
    {"fox", "foxes", "renard", "renards", 'm'},
    {"rabbit", "rabbits", "lapin", "lapins", 'm'},
    {"frog", "frogs", "grenouille", "grenouilles", 'f'},
    {"wolf", "wolves", "loup", "loups", 'm'},
    {"duck", "ducks", "canard", "canards", 'm'},
    {"goat", "goats", "chèvre", "chèvres", 'f'},
    {"pig", "pigs", "cochon", "cochons", 'm'},
    {"snake", "snakes", "serpent", "serpents", 'm'},
    {"lion", "lions", "lion", "lions", 'm'},
    {"monkey", "monkeys", "singe", "singes", 'm'},
    {"owl", "owls", "hibou", "hiboux", 'm'}, /* h aspiré: le hibou, du hibou */
    {"turtle", "turtles", "tortue", "tortues", 'f'},
    {"girl", "girls", "fille", "filles", 'f'},
    {"boy", "boys", "garçon", "garçons", 'm'},
    {"woman", "women", "femme", "femmes", 'f'},
    {"king", "kings", "roi", "rois", 'm'},
    {"queen", "queens", "reine", "reines", 'f'},
    {"sister", "sisters", "sœur", "sœurs", 'f'},
    {"brother", "brothers", "frère", "frères", 'm'},
    {"table", "tables", "table", "tables", 'f'},
    {"box", "boxes", "boîte", "boîtes", 'f'},
    {"house", "houses", "maison", "maisons", 'f'},
    {"car", "cars", "voiture", "voitures", 'f'},
    {"book", "books", "livre", "livres", 'm'},
    {"ball", "balls", "balle", "balles", 'f'},
    {"hat", "hats", "chapeau", "chapeaux", 'm'},
    {"bed", "beds", "lit", "lits", 'm'},
    {"door", "doors", "porte", "portes", 'f'},
    {"cake", "cakes", "gâteau", "gâteaux", 'm'},
    {"boat", "boats", "bateau", "bateaux", 'm'},
    {"knife", "knives", "couteau", "couteaux", 'm'},
    {"key", "keys", "clé", "clés", 'f'},
    {"newspaper", "newspapers", "journal", "journaux", 'm'},
    {"bus", "buses", "bus", "bus", 'm'},
    {"nose", "noses", "nez", "nez", 'm'},
    {"flower", "flowers", "fleur", "fleurs", 'f'},
    {"cup", "cups", "tasse", "tasses", 'f'},
};

static const CorpusAdj ADJS[] = {
    /* after the noun in French */
    {"black", {"noir", "noire", "noirs", "noires"}, 0},
    {"white", {"blanc", "blanche", "blancs", "blanches"}, 0},
    {"red", {"rouge", "rouge", "rouges", "rouges"}, 0},
    {"green", {"vert", "verte", "verts", "vertes"}, 0},
    {"blue", {"bleu", "bleue", "bleus", "bleues"}, 0},
    {"yellow", {"jaune", "jaune", "jaunes", "jaunes"}, 0},
    {"gray", {"gris", "grise", "gris", "grises"}, 0},
    {"brown", {"marron", "marron", "marron", "marron"}, 0},  /* invariable */
    {"orange", {"orange", "orange", "orange", "orange"}, 0}, /* invariable */
    {"happy", {"heureux", "heureuse", "heureux", "heureuses"}, 0},
    {"sad", {"triste", "triste", "tristes", "tristes"}, 0},
    {"fast", {"rapide", "rapide", "rapides", "rapides"}, 0},
    {"slow", {"lent", "lente", "lents", "lentes"}, 0},
    {"strong", {"fort", "forte", "forts", "fortes"}, 0},
    {"kind", {"gentil", "gentille", "gentils", "gentilles"}, 0},
    {"curious", {"curieux", "curieuse", "curieux", "curieuses"}, 0},
    {"dirty", {"sale", "sale", "sales", "sales"}, 0},
    {"heavy", {"lourd", "lourde", "lourds", "lourdes"}, 0},
    {"round", {"rond", "ronde", "ronds", "rondes"}, 0},
    {"wet", {"mouillé", "mouillée", "mouillés", "mouillées"}, 0},
    {"dry", {"sec", "sèche", "secs", "sèches"}, 0},
    {"noisy", {"bruyant", "bruyante", "bruyants", "bruyantes"}, 0},
    /* before the noun in French */
    {"small", {"petit", "petite", "petits", "petites"}, 1},
    {"big", {"grand", "grande", "grands", "grandes"}, 1},
    {"old", {"vieux", "vieille", "vieux", "vieilles"}, 1},
    {"young", {"jeune", "jeune", "jeunes", "jeunes"}, 1},
    {"pretty", {"joli", "jolie", "jolis", "jolies"}, 1},
};

/* A regular -er verb: the six present-tense forms from its stem. */
#define ER(en, en3, stem)                                                                          \
    {                                                                                              \
        en, en3, stem "er", { stem "e", stem "es", stem "e", stem "ons", stem "ez", stem "ent" }   \
    }

static const CorpusVerb VERBS[] = {
    {"see", "sees", "voir", {"vois", "vois", "voit", "voyons", "voyez", "voient"}},
    {"take", "takes", "prendre", {"prends", "prends", "prend", "prenons", "prenez", "prennent"}},
    {"know",
     "knows",
     "connaître",
     {"connais", "connais", "connaît", "connaissons", "connaissez", "connaissent"}},
    {"follow", "follows", "suivre", {"suis", "suis", "suit", "suivons", "suivez", "suivent"}},
    {"sell", "sells", "vendre", {"vends", "vends", "vend", "vendons", "vendez", "vendent"}},
    {"bite", "bites", "mordre", {"mords", "mords", "mord", "mordons", "mordez", "mordent"}},
    {"paint", "paints", "peindre", {"peins", "peins", "peint", "peignons", "peignez", "peignent"}},
    {"read", "reads", "lire", {"lis", "lis", "lit", "lisons", "lisez", "lisent"}},
    {"want", "wants", "vouloir", {"veux", "veux", "veut", "voulons", "voulez", "veulent"}},
    {"build",
     "builds",
     "construire",
     {"construis", "construis", "construit", "construisons", "construisez", "construisent"}},
    {"throw", "throws", "lancer", {"lance", "lances", "lance", "lançons", "lancez", "lancent"}},
    {"eat", "eats", "manger", {"mange", "manges", "mange", "mangeons", "mangez", "mangent"}},
    {"prefer",
     "prefers",
     "préférer",
     {"préfère", "préfères", "préfère", "préférons", "préférez", "préfèrent"}},
    {"clean",
     "cleans",
     "nettoyer",
     {"nettoie", "nettoies", "nettoie", "nettoyons", "nettoyez", "nettoient"}},
    ER("watch", "watches", "regard"),
    ER("look for", "looks for", "cherch"),
    ER("carry", "carries", "port"),
    ER("touch", "touches", "touch"),
    ER("push", "pushes", "pouss"),
    ER("pull", "pulls", "tir"),
    ER("keep", "keeps", "gard"),
    ER("wash", "washes", "lav"),
    ER("scratch", "scratches", "gratt"),
    ER("chase", "chases", "chass"),
    ER("draw", "draws", "dessin"),
    ER("count", "counts", "compt"),
    ER("find", "finds", "trouv"),
    ER("hide", "hides", "cach"),
    ER("hit", "hits", "frapp"),
    ER("save", "saves", "sauv"),
    ER("greet", "greets", "salu"),
};

/* Indices into ADJS and NOUNS; test_gen.c checks them against the names in the comments. */
static const CorpusHeldOut HELD_OUT[] = {
    {0, 3},   /* black horse: cheval noir, chevaux noirs */
    {1, 2},   /* white mouse: souris blanche */
    {2, 30},  /* red hat: chapeau rouge */
    {3, 7},   /* green frog: grenouille verte */
    {4, 27},  /* blue car: voiture bleue */
    {9, 4},   /* happy cow: vache heureuse */
    {15, 5},  /* curious fox: renard curieux */
    {17, 25}, /* heavy box: boîte lourde */
    {20, 33}, /* dry cake: gâteau sec */
    {22, 26}, /* small house: petite maison */
    {23, 1},  /* big dog: grand chien */
    {24, 21}, /* old queen: vieille reine */
    {25, 0},  /* young cat: jeune chat */
    {26, 34}, /* pretty boat: joli bateau */
};

typedef struct {
    const char *en, *fr;
    int person; /* index into CorpusVerb.fr */
} Pronoun;

/* "you" is always tu and "they" always ils: one translation per source word. */
static const Pronoun PRONOUNS[] = {
    {"i", "je", 0},     {"you", "tu", 1},  {"he", "il", 2},
    {"she", "elle", 2}, {"we", "nous", 3}, {"they", "ils", 5},
};

static const char *const NUM_EN[] = {"two",   "three", "four", "five", "six",
                                     "seven", "eight", "nine", "ten"};
static const char *const NUM_FR[] = {"deux", "trois", "quatre", "cinq", "six",
                                     "sept", "huit",  "neuf",   "dix"};

static const char *const PREP_EN[] = {"on", "under", "near", "with", "behind", "in", "in front of"};
static const char *const PREP_FR[] = {"sur",      "sous", "près de", "avec",
                                      "derrière", "dans", "devant"};

const CorpusNoun *corpus_nouns(size_t *n) {
    *n = COUNT(NOUNS);
    return NOUNS;
}

const CorpusAdj *corpus_adjs(size_t *n) {
    *n = COUNT(ADJS);
    return ADJS;
}

const CorpusVerb *corpus_verbs(size_t *n) {
    *n = COUNT(VERBS);
    return VERBS;
}

const CorpusHeldOut *corpus_held_out(size_t *n) {
    *n = COUNT(HELD_OUT);
    return HELD_OUT;
}

int corpus_is_held_out(int adj, int noun) {
    for (size_t i = 0; i < COUNT(HELD_OUT); i++)
        if (HELD_OUT[i].adj == adj && HELD_OUT[i].noun == noun) return 1;
    return 0;
}

/* ---- a sentence being built: two token lists ---- */

enum { MAX_TOK = 96 };

typedef struct {
    const char *s; /* not NUL-terminated: s[0 .. len) */
    int len;
} Tok;

typedef struct {
    Tok t[MAX_TOK];
    int n;
    int overflow; /* more than MAX_TOK tokens were emitted: the sentence is rejected */
} Side;

/* How sentences are drawn: probabilities in thousandths. */
typedef struct {
    int coord_clause;  /* "S and S" */
    int pronoun;       /* a subject is a pronoun */
    int coord_subject; /* a subject is "NP and NP" (when not a pronoun) */
    int negation;      /* a verb is negated */
    int det[4];        /* the (singular), the (plural), a, a number: weights */
    int pre_adj;       /* an NP has a pre-noun adjective (small, big, old, young, pretty) */
    int post_adj;      /* an NP has a post-noun adjective */
    int modifier;      /* an NP gets a PP or a relative clause, while the budget lasts */
    int mod_kind[3];   /* PP, subject relative (qui), object relative (que): weights */
    int budget;        /* PPs + relative clauses per sentence */
    int held_out;      /* an NP is drawn from the held-out pairs (gen_test only) */
    int period;        /* the pair ends with " ." on both sides */
} Style;

static const Style IN_DIST = {
    .coord_clause = 100,
    .pronoun = 350,
    .coord_subject = 150,
    .negation = 300,
    .det = {35, 25, 20, 20},
    .pre_adj = 200,
    .post_adj = 350,
    .modifier = 300,
    .mod_kind = {50, 25, 25},
    .budget = CORPUS_MAX_MODS,
    .held_out = 0,
    .period = 500,
};

/* gen_test: 3 or 4 modifiers in at most CORPUS_MAX_LEN tokens, so short subjects and objects */
static const Style GEN_DEEP = {
    .coord_clause = 50,
    .pronoun = 400,
    .coord_subject = 50,
    .negation = 300,
    .det = {35, 25, 20, 20},
    .pre_adj = 200,
    .post_adj = 300,
    .modifier = 800,
    .mod_kind = {40, 30, 30},
    .budget = CORPUS_GEN_MIN_MODS + 1,
    .held_out = 350,
    .period = 500,
};

/* gen_long: longer than anything in train */
static const Style GEN_LONG = {
    .coord_clause = 300,
    .pronoun = 200,
    .coord_subject = 200,
    .negation = 300,
    .det = {35, 25, 20, 20},
    .pre_adj = 250,
    .post_adj = 400,
    .modifier = 750,
    .mod_kind = {40, 30, 30},
    .budget = 5,
    .held_out = 350,
    .period = 500,
};

typedef struct {
    Rng *rng;
    const Style *st;
    int budget; /* modifiers still allowed */
    int n_mod;  /* modifiers used */
    int n_held; /* held-out (adjective, noun) pairs used */
    Side en, fr;
} Gen;

static int chance(Gen *g, int thousandths) { return (int)rng_below(g->rng, 1000) < thousandths; }

static int pick(Gen *g, size_t n) { return (int)rng_below(g->rng, n); }

static int pick_weighted(Gen *g, const int *w, int n) {
    int total = 0;
    for (int i = 0; i < n; i++) total += w[i];
    int x = pick(g, (size_t)total);
    for (int i = 0; i < n; i++) {
        if (x < w[i]) return i;
        x -= w[i];
    }
    return n - 1;
}

/* Appends the space-separated words of s ("in front of" is three tokens). */
static void emit(Side *side, const char *s) {
    while (*s) {
        while (*s == ' ') s++;
        const char *e = s;
        while (*e && *e != ' ') e++;
        if (e == s) break;
        if (side->n == MAX_TOK) {
            side->overflow = 1;
            return;
        }
        side->t[side->n++] = (Tok){s, (int)(e - s)};
        s = e;
    }
}

static int tok_is(Tok t, const char *s) {
    return (int)strlen(s) == t.len && memcmp(t.s, s, (size_t)t.len) == 0;
}

/* ---- the grammar ----
 * sentence := clause [and clause] [.]
 * clause   := subject vp
 * subject  := pronoun | np | np and np
 * vp       := [not] verb np            object after a negated verb: a/an -> de
 * np       := det [pre-adj] [post-adj] noun [pp | that vp | that subject [not] verb]
 * Each gen_ function emits both sides; French reorders inside an NP (adjectives) and around a
 * verb (ne ... pas); orthography (du, des, qu', d', an) is fixed afterwards on the tokens. */

enum { NP_NEG_OBJECT = 1 };

static int gen_np(Gen *g, int flags);
static int gen_subject(Gen *g, int allow_coordination);

/* A pre- or post-noun adjective for this noun; a held-out pair only in gen_test and gen_long. */
static int pick_adj(Gen *g, int noun, int pre) {
    for (;;) {
        int a = pick(g, COUNT(ADJS));
        if (ADJS[a].pre != pre) continue;
        if (corpus_is_held_out(a, noun)) {
            if (!g->st->held_out) continue;
            g->n_held++;
        }
        return a;
    }
}

/* The verb, negated or not, agreeing with person (0..5); no object. */
static void gen_verb(Gen *g, int person, int negated) {
    const CorpusVerb *v = &VERBS[pick(g, COUNT(VERBS))];
    int third_singular = person == 2;
    if (negated) {
        emit(&g->en, third_singular ? "does not" : "do not");
        emit(&g->en, v->en);
        emit(&g->fr, "ne");
        emit(&g->fr, v->fr[person]);
        emit(&g->fr, "pas");
    } else {
        emit(&g->en, third_singular ? v->en_3sg : v->en);
        emit(&g->fr, v->fr[person]);
    }
}

static void gen_vp(Gen *g, int person) {
    int negated = chance(g, g->st->negation);
    gen_verb(g, person, negated);
    gen_np(g, negated ? NP_NEG_OBJECT : 0);
}

static void gen_modifier(Gen *g, int head_person) {
    int kind = pick_weighted(g, g->st->mod_kind, 3);
    if (kind == 0) { /* on the table -> sur la table */
        int p = pick(g, COUNT(PREP_EN));
        emit(&g->en, PREP_EN[p]);
        emit(&g->fr, PREP_FR[p]);
        gen_np(g, 0);
    } else if (kind == 1) { /* that sees the dog -> qui voit le chien */
        emit(&g->en, "that");
        emit(&g->fr, "qui");
        gen_vp(g, head_person);
    } else { /* that the dog sees -> que le chien voit */
        emit(&g->en, "that");
        emit(&g->fr, "que");
        int person = gen_subject(g, 0);
        gen_verb(g, person, chance(g, g->st->negation));
    }
}

/* Emits a noun phrase; returns its person as a subject: 2 (singular) or 5 (plural). */
static int gen_np(Gen *g, int flags) {
    int noun, pre = -1, post = -1;
    if (g->st->held_out && chance(g, g->st->held_out)) {
        const CorpusHeldOut *h = &HELD_OUT[pick(g, COUNT(HELD_OUT))];
        noun = h->noun;
        if (ADJS[h->adj].pre)
            pre = h->adj;
        else
            post = h->adj;
        g->n_held++;
    } else {
        noun = pick(g, COUNT(NOUNS));
    }
    if (pre < 0 && chance(g, g->st->pre_adj)) pre = pick_adj(g, noun, 1);
    if (post < 0 && chance(g, g->st->post_adj)) post = pick_adj(g, noun, 0);
    int det = pick_weighted(g, g->st->det, 4);
    int plural = det == 1 || det == 3;
    const CorpusNoun *n = &NOUNS[noun];
    int agree = CORPUS_AGREE(n->gender, plural);
    if (det == 3) {
        int k = pick(g, COUNT(NUM_EN));
        emit(&g->en, NUM_EN[k]);
        emit(&g->fr, NUM_FR[k]);
    } else if (det == 2) {
        emit(&g->en, "a");
        emit(&g->fr, (flags & NP_NEG_OBJECT) ? "de" : n->gender == 'f' ? "une" : "un");
    } else {
        emit(&g->en, "the");
        emit(&g->fr, plural ? "les" : n->gender == 'f' ? "la" : "le");
    }
    if (pre >= 0) emit(&g->en, ADJS[pre].en);
    if (post >= 0) emit(&g->en, ADJS[post].en);
    emit(&g->en, plural ? n->en_pl : n->en_sg);
    if (pre >= 0) emit(&g->fr, ADJS[pre].fr[agree]);
    emit(&g->fr, plural ? n->fr_pl : n->fr_sg);
    if (post >= 0) emit(&g->fr, ADJS[post].fr[agree]);
    int person = plural ? 5 : 2;
    if (g->budget > 0 && chance(g, g->st->modifier)) {
        g->budget--;
        g->n_mod++;
        gen_modifier(g, person);
    }
    return person;
}

/* Emits a subject; returns its person (0..5). */
static int gen_subject(Gen *g, int allow_coordination) {
    if (chance(g, g->st->pronoun)) {
        const Pronoun *p = &PRONOUNS[pick(g, COUNT(PRONOUNS))];
        emit(&g->en, p->en);
        emit(&g->fr, p->fr);
        return p->person;
    }
    int person = gen_np(g, 0);
    if (allow_coordination && chance(g, g->st->coord_subject)) {
        emit(&g->en, "and");
        emit(&g->fr, "et");
        gen_np(g, 0);
        person = 5; /* the cat and the dog see -> le chat et le chien voient */
    }
    return person;
}

static void gen_clause(Gen *g) { gen_vp(g, gen_subject(g, 1)); }

/* A French word that starts with a vowel sound (for elision): a, e, i, o, u, y, their accented
 * forms and œ. No word of the lexicon starts with a silent h. */
static int fr_vowel_initial(Tok t) {
    const unsigned char *s = (const unsigned char *)t.s;
    if (t.len == 0) return 0;
    if (strchr("aeiouy", s[0])) return 1;
    if (t.len >= 2 && s[0] == 0xC3) /* à â ä è é ê ë î ï ô ö ù û ü */
        return memchr("\xA0\xA2\xA4\xA8\xA9\xAA\xAB\xAE\xAF\xB4\xB6\xB9\xBB\xBC", s[1], 14) != NULL;
    return t.len >= 2 && s[0] == 0xC5 && s[1] == 0x93; /* œ */
}

/* de le -> du, de les -> des (près du chat); que/de before a vowel -> qu' / d' (que il ->
 * qu' il, près de un -> près d' un). The elided word keeps its apostrophe and stays a token. */
static void fr_orthography(Side *fr) {
    int w = 0;
    for (int r = 0; r < fr->n; r++) {
        Tok t = fr->t[r];
        if (tok_is(t, "de") && r + 1 < fr->n) {
            Tok next = fr->t[r + 1];
            if (tok_is(next, "le") || tok_is(next, "les")) {
                fr->t[w++] = tok_is(next, "le") ? (Tok){"du", 2} : (Tok){"des", 3};
                r++;
                continue;
            }
            if (fr_vowel_initial(next)) t = (Tok){"d'", 2};
        } else if (tok_is(t, "que") && r + 1 < fr->n && fr_vowel_initial(fr->t[r + 1])) {
            t = (Tok){"qu'", 3};
        }
        fr->t[w++] = t;
    }
    fr->n = w;
}

/* a -> an before a vowel letter (an old cat, an owl); every English word of the lexicon that
 * starts with a vowel letter starts with a vowel sound. */
static void en_orthography(Side *en) {
    for (int i = 0; i + 1 < en->n; i++)
        if (tok_is(en->t[i], "a") && strchr("aeiou", en->t[i + 1].s[0])) en->t[i] = (Tok){"an", 2};
}

static void gen_sentence(Gen *g) {
    g->budget = g->st->budget;
    g->n_mod = g->n_held = 0;
    g->en.n = g->fr.n = 0;
    g->en.overflow = g->fr.overflow = 0;
    gen_clause(g);
    if (chance(g, g->st->coord_clause)) {
        emit(&g->en, "and");
        emit(&g->fr, "et");
        gen_clause(g);
    }
    if (chance(g, g->st->period)) {
        emit(&g->en, ".");
        emit(&g->fr, ".");
    }
    en_orthography(&g->en);
    fr_orthography(&g->fr);
}

/* A malloc'd line: the tokens joined by single spaces. */
static char *side_join(const Side *s) {
    size_t len = 1;
    for (int i = 0; i < s->n; i++) len += (size_t)s->t[i].len + 1;
    char *out = malloc(len), *p = out;
    if (!out) return NULL;
    for (int i = 0; i < s->n; i++) {
        if (i) *p++ = ' ';
        memcpy(p, s->t[i].s, (size_t)s->t[i].len);
        p += s->t[i].len;
    }
    *p = '\0';
    return out;
}

/* ---- a set of strings (distinct sources; vocabularies) ---- */

typedef struct {
    Tok *keys; /* keys[i].s == NULL: empty slot */
    size_t cap, n;
} StrSet;

static uint64_t tok_hash(Tok t) {
    uint64_t h = 0xCBF29CE484222325ull; /* FNV-1a */
    for (int i = 0; i < t.len; i++) h = (h ^ (unsigned char)t.s[i]) * 0x100000001B3ull;
    return h;
}

static int set_init(StrSet *s, size_t expected) {
    s->cap = 64;
    while (s->cap < 2 * expected + 2) s->cap *= 2;
    s->n = 0;
    s->keys = calloc(s->cap, sizeof *s->keys);
    return s->keys ? 0 : -1;
}

static void set_free(StrSet *s) {
    free(s->keys);
    s->keys = NULL;
}

/* Adds t (the set keeps the pointer: t.s must outlive it). 1 if added, 0 if already there,
 * -1 if the set is full (it never grows: set_init sizes it). */
static int set_add(StrSet *s, Tok t) {
    if (2 * (s->n + 1) > s->cap) return -1;
    size_t i = (size_t)tok_hash(t) & (s->cap - 1);
    while (s->keys[i].s) {
        if (s->keys[i].len == t.len && memcmp(s->keys[i].s, t.s, (size_t)t.len) == 0) return 0;
        i = (i + 1) & (s->cap - 1);
    }
    s->keys[i] = t;
    s->n++;
    return 1;
}

/* ---- splits ---- */

static const char *const SPLIT_NAME[CORPUS_NSPLITS] = {"train", "valid", "test", "gen", "gen_long"};

CorpusConfig corpus_default_config(CorpusTask task) {
    CorpusConfig c = {.task = task, .seed = 1};
    if (task == CORPUS_TRANSLATE) {
        c.n[CORPUS_TRAIN] = 30000;
        c.n[CORPUS_VALID] = 1000;
        c.n[CORPUS_TEST] = 2000;
        c.n[CORPUS_GEN] = 1000;
        c.n[CORPUS_GEN_LONG] = 1000;
    } else {
        c.n[CORPUS_TRAIN] = 2000;
        c.n[CORPUS_VALID] = 200;
        c.n[CORPUS_TEST] = 200;
        c.n[CORPUS_GEN] = 200;
    }
    return c;
}

const char *corpus_file_name(CorpusTask task, int split) {
    static const char *const names[3][CORPUS_NSPLITS] = {
        {"train.tsv", "valid.tsv", "test.tsv", "gen_test.tsv", "gen_long.tsv"},
        {"copy_train.tsv", "copy_valid.tsv", "copy_test.tsv", "copy_gen.tsv", NULL},
        {"reverse_train.tsv", "reverse_valid.tsv", "reverse_test.tsv", "reverse_gen.tsv", NULL},
    };
    return names[task][split];
}

/* One translation pair drawn for split; 1 if it fits the split's limits. */
static int draw_translation(Gen *g, int split, char **src, char **tgt) {
    g->st = split == CORPUS_GEN ? &GEN_DEEP : split == CORPUS_GEN_LONG ? &GEN_LONG : &IN_DIST;
    gen_sentence(g);
    if (g->en.overflow || g->fr.overflow) return 0;
    if (split >= CORPUS_GEN && (g->n_mod < CORPUS_GEN_MIN_MODS || g->n_held < 1)) return 0;
    if (split == CORPUS_GEN_LONG) {
        int period = g->en.n > 0 && tok_is(g->en.t[g->en.n - 1], ".");
        if (g->en.n - period <= CORPUS_MAX_LEN || g->fr.n - period <= CORPUS_MAX_LEN ||
            g->en.n > CORPUS_GEN_MAX_LEN || g->fr.n > CORPUS_GEN_MAX_LEN)
            return 0;
    } else if (g->en.n > CORPUS_MAX_LEN || g->fr.n > CORPUS_MAX_LEN) {
        return 0;
    }
    *src = side_join(&g->en);
    *tgt = side_join(&g->fr);
    return 1;
}

/* One copy or reverse pair: digits, lengths 3..10 (gen split: 11..15). */
static int draw_sequence(Rng *r, CorpusTask task, int split, char **src, char **tgt) {
    int lo = split == CORPUS_GEN ? CORPUS_COPY_MAX + 1 : CORPUS_COPY_MIN;
    int hi = split == CORPUS_GEN ? CORPUS_COPY_GEN_MAX : CORPUS_COPY_MAX;
    int len = lo + (int)rng_below(r, (uint64_t)(hi - lo + 1));
    char sym[CORPUS_COPY_GEN_MAX];
    for (int i = 0; i < len; i++) sym[i] = (char)('0' + rng_below(r, CORPUS_COPY_SYMBOLS));
    *src = malloc(2 * (size_t)len);
    *tgt = malloc(2 * (size_t)len);
    if (!*src || !*tgt) return 1; /* the caller sees the NULL */
    for (int i = 0; i < len; i++) {
        (*src)[2 * i] = sym[i];
        (*tgt)[2 * i] = task == CORPUS_REVERSE ? sym[len - 1 - i] : sym[i];
        (*src)[2 * i + 1] = (*tgt)[2 * i + 1] = i + 1 < len ? ' ' : '\0';
    }
    return 1;
}

void corpus_free(Corpus *c) {
    for (int s = 0; s < CORPUS_NSPLITS; s++) {
        for (size_t i = 0; i < c->split[s].n; i++) {
            free(c->split[s].pairs[i].src);
            free(c->split[s].pairs[i].tgt);
        }
        free(c->split[s].pairs);
        c->split[s].pairs = NULL;
        c->split[s].n = 0;
    }
}

int corpus_generate(const CorpusConfig *cfg, Corpus *c) {
    memset(c, 0, sizeof *c);
    c->cfg = *cfg;
    size_t total = 0;
    for (int s = 0; s < CORPUS_NSPLITS; s++) {
        if (cfg->n[s] > CORPUS_MAX_SPLIT)
            return ag_fail(AG_ERR_ARG, "corpus: %zu %s pairs asked, at most %d", cfg->n[s],
                           SPLIT_NAME[s], CORPUS_MAX_SPLIT);
        if (cfg->n[s] && !corpus_file_name(cfg->task, s))
            return ag_fail(AG_ERR_ARG, "corpus: the %s task has no %s split",
                           cfg->task == CORPUS_COPY ? "copy" : "reverse", SPLIT_NAME[s]);
        total += cfg->n[s];
    }
    StrSet seen;
    if (set_init(&seen, total) != 0) return ag_fail(AG_ERR_NOMEM, "corpus: out of memory");
    /* test and valid first, then gen and gen_long, then train: a split does not depend on the
     * sizes of the splits made after it */
    static const int order[CORPUS_NSPLITS] = {CORPUS_TEST, CORPUS_VALID, CORPUS_GEN,
                                              CORPUS_GEN_LONG, CORPUS_TRAIN};
    int rc = AG_OK;
    for (int k = 0; k < CORPUS_NSPLITS && rc == AG_OK; k++) {
        int s = order[k];
        CorpusSplit *sp = &c->split[s];
        size_t want = cfg->n[s];
        sp->pairs = calloc(want ? want : 1, sizeof *sp->pairs);
        if (!sp->pairs) {
            rc = ag_fail(AG_ERR_NOMEM, "corpus: out of memory");
            break;
        }
        Rng rng;
        rng_seed(&rng, rng_hash(cfg->seed, (uint64_t)cfg->task * 16 + (uint64_t)s));
        Gen g = {.rng = &rng};
        size_t attempts = 0, max_attempts = 1000 * want + 100000;
        while (sp->n < want) {
            if (++attempts > max_attempts) {
                rc = ag_fail(AG_ERR_RANGE,
                             "corpus: only %zu distinct %s pairs found in %zu draws (%zu asked)",
                             sp->n, SPLIT_NAME[s], max_attempts, want);
                break;
            }
            char *src = NULL, *tgt = NULL;
            int ok = cfg->task == CORPUS_TRANSLATE ? draw_translation(&g, s, &src, &tgt)
                                                   : draw_sequence(&rng, cfg->task, s, &src, &tgt);
            if (ok && (!src || !tgt)) {
                free(src);
                free(tgt);
                rc = ag_fail(AG_ERR_NOMEM, "corpus: out of memory");
                break;
            }
            if (!ok || set_add(&seen, (Tok){src, (int)strlen(src)}) != 1) {
                free(src);
                free(tgt);
                continue;
            }
            sp->pairs[sp->n++] = (CorpusPair){src, tgt};
        }
    }
    set_free(&seen);
    if (rc != AG_OK) corpus_free(c);
    return rc;
}

/* ---- writing ---- */

int corpus_write(const Corpus *c, const char *dir) {
    if (mkdir(dir, 0777) != 0 && errno != EEXIST)
        return ag_fail(AG_ERR_IO, "cannot create directory %s: %s", dir, strerror(errno));
    for (int s = 0; s < CORPUS_NSPLITS; s++) {
        const char *name = corpus_file_name(c->cfg.task, s);
        if (!name) continue;
        char path[4096];
        int len = snprintf(path, sizeof path, "%s/%s", dir, name);
        if (len < 0 || (size_t)len >= sizeof path)
            return ag_fail(AG_ERR_IO, "cannot write into %s: path too long", dir);
        FILE *f = fopen(path, "w");
        if (!f) return ag_fail(AG_ERR_IO, "cannot open %s for writing: %s", path, strerror(errno));
        const CorpusSplit *sp = &c->split[s];
        for (size_t i = 0; i < sp->n; i++)
            if (fprintf(f, "%s\t%s\n", sp->pairs[i].src, sp->pairs[i].tgt) < 0) break;
        int err = ferror(f) ? (errno ? errno : EIO) : 0;
        if (fclose(f) != 0 && !err) err = errno ? errno : EIO;
        if (err) return ag_fail(AG_ERR_IO, "error writing %s: %s", path, strerror(err));
    }
    return AG_OK;
}

/* ---- the command line ---- */

static const char USAGE[] =
    "usage: gen [--out DIR] [--task translate|copy|reverse] [--seed N]\n"
    "           [--train N] [--valid N] [--test N] [--gen N] [--gen-long N] [--stats]\n"
    "Writes a toy corpus as TSV files (source<TAB>target, one pair a line) into DIR\n"
    "(default build/data; created if missing). The same seed gives the same files.\n"
    "  --task translate  train.tsv valid.tsv test.tsv gen_test.tsv gen_long.tsv: English to\n"
    "                    French from a small grammar (default sizes 30000 1000 2000 1000 1000;\n"
    "                    see data/README.md)\n"
    "  --task copy       copy_{train,valid,test,gen}.tsv: digit sequences and the same sequence\n"
    "  --task reverse    reverse_{train,valid,test,gen}.tsv: the sequence reversed\n"
    "                    (default sizes 2000 200 200 200; lengths 3-10, gen split 11-15)\n"
    "  --seed N          the seed (default 1)\n"
    "  --train/--valid/--test/--gen/--gen-long N   pairs in that split (at most 1000000;\n"
    "                    --gen-long only for translate)\n"
    "  --stats           also print a histogram of the source lengths of each split\n"
    "  --help            this text\n"
    "Exit status: 0 done, 1 could not generate or write, 2 bad flags.\n";

static int parse_u64(const char *s, uint64_t *out) {
    if (!s || *s < '0' || *s > '9') return -1;
    errno = 0;
    char *end;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || *end) return -1;
    *out = (uint64_t)v;
    return 0;
}

static int bad_flag(const char *fmt, const char *arg) {
    fprintf(stderr, "gen: ");
    fprintf(stderr, fmt, arg);
    fprintf(stderr, " (see gen --help)\n");
    return 2;
}

static void count_tokens(const char *s, int *n) {
    *n = 1;
    for (; *s; s++) *n += *s == ' ';
}

static void print_summary(const Corpus *c, const char *dir, int stats) {
    StrSet vocab[2] = {{0}};
    size_t tokens = 0;
    for (int s = 0; s < CORPUS_NSPLITS; s++)
        for (size_t i = 0; i < c->split[s].n; i++)
            tokens += strlen(c->split[s].pairs[i].src) + strlen(c->split[s].pairs[i].tgt);
    int have_vocab = set_init(&vocab[0], tokens) == 0 && set_init(&vocab[1], tokens) == 0;
    for (int s = 0; s < CORPUS_NSPLITS; s++) {
        if (!corpus_file_name(c->cfg.task, s)) continue;
        const CorpusSplit *sp = &c->split[s];
        int lo[2] = {1 << 30, 1 << 30}, hi[2] = {0, 0}, hist[CORPUS_GEN_MAX_LEN + 2] = {0};
        double sum[2] = {0, 0};
        for (size_t i = 0; i < sp->n; i++) {
            const char *line[2] = {sp->pairs[i].src, sp->pairs[i].tgt};
            for (int side = 0; side < 2; side++) {
                int n;
                count_tokens(line[side], &n);
                if (n < lo[side]) lo[side] = n;
                if (n > hi[side]) hi[side] = n;
                sum[side] += n;
                if (side == 0) hist[n <= CORPUS_GEN_MAX_LEN ? n : CORPUS_GEN_MAX_LEN + 1]++;
                for (const char *p = line[side]; have_vocab && *p;) {
                    const char *e = strchr(p, ' ');
                    if (!e) e = p + strlen(p);
                    set_add(&vocab[side], (Tok){p, (int)(e - p)});
                    p = *e ? e + 1 : e;
                }
            }
        }
        printf("%s/%s: %zu pairs", dir, corpus_file_name(c->cfg.task, s), sp->n);
        if (sp->n)
            printf(", source %d-%d tokens (mean %.1f), target %d-%d (mean %.1f)", lo[0], hi[0],
                   sum[0] / (double)sp->n, lo[1], hi[1], sum[1] / (double)sp->n);
        printf("\n");
        if (stats && sp->n) {
            printf("  source length: pairs\n");
            for (int n = 0; n <= CORPUS_GEN_MAX_LEN + 1; n++)
                if (hist[n]) printf("  %s%2d: %d\n", n > CORPUS_GEN_MAX_LEN ? ">" : "", n, hist[n]);
        }
    }
    if (have_vocab)
        printf("vocabulary: %zu source tokens, %zu target tokens\n", vocab[0].n, vocab[1].n);
    set_free(&vocab[0]);
    set_free(&vocab[1]);
}

int corpus_main(int argc, char **argv) {
    const char *out = "build/data";
    CorpusTask task = CORPUS_TRANSLATE;
    uint64_t seed = 1, size[CORPUS_NSPLITS] = {0};
    int size_set[CORPUS_NSPLITS] = {0}, stats = 0;
    static const char *const size_flag[CORPUS_NSPLITS] = {"--train", "--valid", "--test", "--gen",
                                                          "--gen-long"};
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        if (!strcmp(arg, "--help") || !strcmp(arg, "-h")) {
            fputs(USAGE, stdout);
            return 0;
        }
        if (!strcmp(arg, "--stats")) {
            stats = 1;
            continue;
        }
        if (strncmp(arg, "--", 2) != 0) return bad_flag("unexpected argument '%s'", arg);
        /* --flag VALUE or --flag=VALUE */
        char name[32];
        const char *value;
        const char *eq = strchr(arg, '=');
        size_t name_len = eq ? (size_t)(eq - arg) : strlen(arg);
        if (name_len >= sizeof name) return bad_flag("unknown flag '%s'", arg);
        memcpy(name, arg, name_len);
        name[name_len] = '\0';
        int known = !strcmp(name, "--out") || !strcmp(name, "--task") || !strcmp(name, "--seed");
        for (int s = 0; s < CORPUS_NSPLITS; s++) known |= !strcmp(name, size_flag[s]);
        if (!known) return bad_flag("unknown flag '%s'", arg);
        if (eq)
            value = eq + 1;
        else if (i + 1 < argc)
            value = argv[++i];
        else
            return bad_flag("flag '%s' needs a value", arg);
        if (!strcmp(name, "--out")) {
            if (!*value) return bad_flag("flag '%s' needs a directory", name);
            out = value;
        } else if (!strcmp(name, "--task")) {
            if (!strcmp(value, "translate"))
                task = CORPUS_TRANSLATE;
            else if (!strcmp(value, "copy"))
                task = CORPUS_COPY;
            else if (!strcmp(value, "reverse"))
                task = CORPUS_REVERSE;
            else
                return bad_flag("unknown task '%s': translate, copy or reverse", value);
        } else if (!strcmp(name, "--seed")) {
            if (parse_u64(value, &seed) != 0)
                return bad_flag("--seed needs a non-negative integer, not '%s'", value);
        } else {
            for (int s = 0; s < CORPUS_NSPLITS; s++) {
                if (strcmp(name, size_flag[s]) != 0) continue;
                if (parse_u64(value, &size[s]) != 0 || size[s] > CORPUS_MAX_SPLIT) {
                    fprintf(stderr, "gen: %s needs an integer from 0 to %d, not '%s'\n", name,
                            CORPUS_MAX_SPLIT, value);
                    return 2;
                }
                size_set[s] = 1;
            }
        }
    }
    if (task != CORPUS_TRANSLATE && size_set[CORPUS_GEN_LONG] && size[CORPUS_GEN_LONG]) {
        fprintf(stderr, "gen: --gen-long is only for --task translate\n");
        return 2;
    }
    CorpusConfig cfg = corpus_default_config(task);
    cfg.seed = seed;
    for (int s = 0; s < CORPUS_NSPLITS; s++)
        if (size_set[s]) cfg.n[s] = (size_t)size[s];
    Corpus c;
    if (corpus_generate(&cfg, &c) != AG_OK) {
        fprintf(stderr, "gen: %s\n", ag_last_error());
        return 1;
    }
    int rc = 0;
    if (corpus_write(&c, out) != AG_OK) {
        fprintf(stderr, "gen: %s\n", ag_last_error());
        rc = 1;
    } else {
        print_summary(&c, out, stats);
    }
    corpus_free(&c);
    return rc;
}
