/* flag.h: the command line of a program, read from one table of flags. A row names a flag, its
 * type, where its value goes, its range, its help and its other spellings; flag_parse reads
 * "--name VALUE" and "--name=VALUE", checks every value strictly and remembers which flags were
 * given; flag_help prints the table (defaults, ranges, aliases) for --help. An error returns
 * AG_ERR_ARG with a message naming the flag as typed and the value (ag_last_error); the library
 * prints nothing and never exits: the program prints "PROG CMD: message" and exits 2.
 * flag_parse_cmd is both for one command: the flags, and its usage for --help.
 * Not here: what a program does with its flags, its exit codes, its usage line.
 * Read next: flag.c; examples/classify.c is the shortest program on it (through src/run). */
#ifndef AG_FLAG_H
#define AG_FLAG_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* What a value is, and what Flag.ptr points to. Numbers are base 10 only: an integer is an
 * optional '-' and digits ("010" is ten, "0x100", "1e3", "+5", " 5" and "" are refused); a real
 * is an optional '-', digits with an optional '.', an optional exponent ("1e-3", ".5";
 * "nan", "inf" and hexadecimal are refused). Beyond the type's reach is out of range. */
typedef enum {
    FLAG_INT,    /* int */
    FLAG_I64,    /* int64_t */
    FLAG_U64,    /* uint64_t (a seed): a '-' is out of range */
    FLAG_DOUBLE, /* double; an underflow gives the subnormal or 0 strtod gives */
    FLAG_STR,    /* const char *: any text, the empty one included */
    FLAG_PATH,   /* const char *: a file, a folder or any other text that may not be empty */
    FLAG_SWITCH, /* int: takes no value; set to (int)lo when given */
    FLAG_CHOICE, /* int: the index of the value in choices */
    FLAG_INTS,   /* FlagInts: "3,4,9", each element in [lo, hi], none empty */
} FlagType;

#define FLAG_INTS_MAX 1024
typedef struct FlagInts {
    int n;
    int v[FLAG_INTS_MAX];
} FlagInts;

typedef struct Flag {
    const char *name; /* its spellings without "--", '|' between them: the canonical one first,
                       * then the aliases accepted ("steps|max-iters") */
    FlagType type;
    void *ptr;       /* where the value goes (FlagType); it holds the default before parsing */
    const char *arg; /* the value's name in --help and messages ("N", "DIR"); NULL: by type */
    const char *help;
    double lo, hi; /* numbers and list elements: the range; FLAG_SWITCH: lo is stored */
    const char *const *choices; /* FLAG_CHOICE: the names, NULL-terminated */
    int given; /* set by flag_parse: 0, or 1 + the index of the spelling last used (1: the
                * canonical one); a table starts it at 0 */
} Flag;

/* The ranges the programs built on this parser share, one per concept (docs/architecture.md):
 * the learning rate and the cosine's floor (up to 1e6: a rate meant to diverge, as the NaN
 * stop's test gives, is still a rate), AdamW's weight decay, the clipping norm. */
#define FLAG_LR_MAX 1e6
#define FLAG_WD_MAX 10.0
#define FLAG_CLIP_MAX 1e30

/* A row without the fields its type leaves unused (given starts at 0): FLAG_ROW a text or a
 * path (FLAG_STR, FLAG_PATH); FLAG_SW a switch that stores 1; FLAG_NUM a number or a list in
 * [lo, hi]; FLAG_ONE_OF a choice among names (NULL-terminated) */
#define FLAG_ROW(name, type, ptr, arg, help)                                                       \
    { name, type, ptr, arg, help, 0, 0, NULL, 0 }
#define FLAG_SW(name, ptr, help)                                                                   \
    { name, FLAG_SWITCH, ptr, NULL, help, 1, 0, NULL, 0 }
#define FLAG_NUM(name, type, ptr, arg, help, lo, hi)                                               \
    { name, type, ptr, arg, help, lo, hi, NULL, 0 }
#define FLAG_ONE_OF(name, ptr, arg, help, names)                                                   \
    { name, FLAG_CHOICE, ptr, arg, help, 0, 0, names, 0 }

/* flag_parse's answer when --help or -h was given (nothing after it is read) */
#define FLAG_HELP 1

/* Parses argv[0..argc) into the table fl[0..n). An argument that does not start with '-', a
 * lone "-" and everything after "--" are positional: they go to pos (*npos of them; room for
 * argc) when pos is not NULL, else they are an error; pos may be argv itself: they then gather
 * at its front, in order (as GNU getopt permutes argv). A flag given twice keeps its last value.
 * Returns AG_OK, FLAG_HELP, or AG_ERR_ARG with the message (ag_last_error), e.g.
 * "'--steps ten' is not an integer". A table with a name twice aborts (misuse). */
int flag_parse(Flag *fl, int n, int argc, char **argv, char **pos, int *npos);
/* 1 when argv[0..argc) holds --help or -h before any "--" (a flag's value counts too): for a
 * program that prints text of its own around the table's help, before parsing */
int flag_help_asked(int argc, char **argv);

/* The help of every flag, a line each: "  --steps N  training steps (1000) [1, 1000000];
 * also --max-iters". The default is the value *ptr holds (not shown when the help already says
 * "(default"; nothing for a switch or an empty text). */
void flag_help(FILE *f, const Flag *fl, int n);

/* A command's usage for --help, on out: "usage: PROG CMD ARGS", what (lines without a final
 * newline), a blank line, "flags (default) [range]:" and flag_help's table. */
void flag_usage(FILE *out, const char *prog, const char *cmd, const char *args, const char *what,
                const Flag *fl, int n);
/* flag_parse, then for --help flag_usage on stdout: the one way a command reads its flags.
 * Returns flag_parse's AG_OK, FLAG_HELP (the usage printed; the command exits 0) or AG_ERR_ARG
 * (nothing printed: the program says "PROG CMD: message" its own way and exits 2). */
int flag_parse_cmd(const char *prog, const char *cmd, const char *args, const char *what, Flag *fl,
                   int n, int argc, char **argv, char **pos, int *npos);

/* The row whose canonical spelling is name; a name not in the table aborts (misuse). */
Flag *flag_find(Flag *fl, int n, const char *name);
/* flag_find(...)->given != 0 */
int flag_given(const Flag *fl, int n, const char *name);
/* The spelling the user typed, or the canonical one when the flag was not given, into buf
 * (cap bytes, without "--"): for messages. Returns buf. */
const char *flag_spelling(const Flag *f, char *buf, size_t cap);

#endif
