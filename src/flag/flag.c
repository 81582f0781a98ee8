/* flag.c: the table-driven flag parser (flag.h): finding a row by any of its spellings, the
 * strict readers of integers, reals and integer lists, the range checks, and --help (the
 * table, and a command's usage around it: flag_usage, flag_parse_cmd).
 * Not here: a program's own checks between flags (examples/). Read next: flag.h's users,
 * examples/induction/main.c, examples/gpt/train.c, examples/translate/cli.c. */
#include "flag.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../tensor/tensor.h"

/* The k-th spelling of a row's name ("steps|max-iters": 0 steps, 1 max-iters): its start, its
 * length in *len; NULL when there are not so many. */
static const char *spelling(const Flag *f, int k, size_t *len) {
    const char *p = f->name;
    for (; k > 0; k--) {
        p = strchr(p, '|');
        if (!p) return NULL;
        p++;
    }
    *len = strcspn(p, "|");
    return p;
}

/* the row spelled s[0..len) (by any of its spellings), or NULL; *which: the spelling's index */
static Flag *lookup(Flag *fl, int n, const char *s, size_t len, int *which) {
    for (int i = 0; i < n; i++) {
        size_t l;
        const char *p;
        for (int k = 0; (p = spelling(&fl[i], k, &l)) != NULL; k++)
            if (l == len && strncmp(p, s, len) == 0) {
                *which = k;
                return &fl[i];
            }
    }
    return NULL;
}

/* every spelling once in the table, none empty (a misuse aborts) */
static void check_table(Flag *fl, int n) {
    for (int i = 0; i < n; i++) {
        AG_CHECK(fl[i].name && fl[i].ptr, "flag_parse: row %d has no name or no value pointer", i);
        AG_CHECK(fl[i].type != FLAG_CHOICE || fl[i].choices, "flag_parse: --%s has no choices",
                 fl[i].name);
        size_t l;
        const char *p;
        int which;
        for (int k = 0; (p = spelling(&fl[i], k, &l)) != NULL; k++)
            AG_CHECK(l > 0 && lookup(fl, n, p, l, &which) == &fl[i] && which == k,
                     "flag_parse: '%.*s' (in '%s') is empty or in the table twice", (int)l, p,
                     fl[i].name);
    }
}

/* ---- strict numbers: 0 read, -1 not a number of that form, 1 beyond the type's reach ---- */

static int digits(const char *s) {
    const char *p = s;
    while (*p >= '0' && *p <= '9') p++;
    return (int)(p - s);
}

/* -?[0-9]+ */
static int read_i64(const char *s, long long *out) {
    const char *p = s + (*s == '-');
    if (digits(p) == 0 || p[digits(p)]) return -1;
    errno = 0;
    *out = strtoll(s, NULL, 10);
    return errno == ERANGE ? 1 : 0;
}

/* [0-9]+; a '-' before digits is "below the range" (1) */
static int read_u64(const char *s, unsigned long long *out) {
    if (*s == '-') {
        long long x;
        return read_i64(s, &x) < 0 ? -1 : (x == 0 ? (*out = 0, 0) : 1);
    }
    if (digits(s) == 0 || s[digits(s)]) return -1;
    errno = 0;
    *out = strtoull(s, NULL, 10);
    return errno == ERANGE ? 1 : 0;
}

/* -?(D+.?D*|.D+)([eE][+-]?D+)? */
static int read_double(const char *s, double *out) {
    const char *p = s + (*s == '-');
    int a = digits(p), b = 0;
    p += a;
    if (*p == '.') b = digits(++p), p += b;
    if (a + b == 0) return -1;
    if (*p == 'e' || *p == 'E') {
        p++;
        if (*p == '+' || *p == '-') p++;
        if (digits(p) == 0) return -1;
        p += digits(p);
    }
    if (*p) return -1;
    errno = 0;
    *out = strtod(s, NULL);
    return errno == ERANGE && isinf(*out) ? 1 : 0; /* an underflow is a number like any other */
}

/* an integer range of a row, its doubles clamped to what the type holds */
static void int_range(const Flag *f, long long *lo, long long *hi) {
    long long min = f->type == FLAG_I64 ? LLONG_MIN : INT_MIN;
    long long max = f->type == FLAG_I64 ? LLONG_MAX : INT_MAX;
    *lo = f->lo <= (double)min ? min : (long long)f->lo;
    *hi = f->hi >= (double)max ? max : (long long)f->hi;
}

static const char *arg_name(const Flag *f) {
    if (f->arg) return f->arg;
    switch (f->type) {
    case FLAG_DOUBLE: return "X";
    case FLAG_STR: return "TEXT";
    case FLAG_PATH: return "PATH";
    case FLAG_INTS: return "LIST";
    case FLAG_CHOICE: return "NAME";
    default: return "N";
    }
}

static void range_text(const Flag *f, char *buf, size_t cap) {
    if (f->type == FLAG_DOUBLE) {
        snprintf(buf, cap, "[%g, %g]", f->lo, f->hi);
    } else if (f->type == FLAG_U64) {
        unsigned long long hi =
            f->hi >= 18446744073709551615.0 ? ULLONG_MAX : (unsigned long long)f->hi;
        snprintf(buf, cap, "[%llu, %llu]", (unsigned long long)(f->lo > 0 ? f->lo : 0), hi);
    } else {
        long long lo, hi;
        int_range(f, &lo, &hi);
        snprintf(buf, cap, "[%lld, %lld]", lo, hi);
    }
}

static int out_of_range(const Flag *f, const char *sp, const char *v) {
    char r[96];
    range_text(f, r, sizeof r);
    return ag_fail(AG_ERR_ARG, "'--%s %s' is out of range %s", sp, v, r);
}

/* "3,4,9": every element an integer in the row's range, none empty, at most FLAG_INTS_MAX */
static int read_ints(const Flag *f, const char *sp, const char *v) {
    FlagInts *l = f->ptr;
    long long lo, hi;
    int_range(f, &lo, &hi);
    int n = 0;
    const char *p = v;
    for (;;) {
        const char *end = strchr(p, ',');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        char el[32];
        long long x;
        if (len == 0)
            return ag_fail(AG_ERR_ARG, "'--%s %s' has an empty element: give integers like 3,4", sp,
                           v);
        if (len >= sizeof el)
            return ag_fail(AG_ERR_ARG, "'--%s %s': '%.*s' is not an integer", sp, v, (int)len, p);
        memcpy(el, p, len);
        el[len] = '\0';
        int rc = read_i64(el, &x);
        if (rc < 0) return ag_fail(AG_ERR_ARG, "'--%s %s': '%s' is not an integer", sp, v, el);
        if (rc > 0 || x < lo || x > hi)
            return ag_fail(AG_ERR_ARG, "'--%s %s': %s is out of range [%lld, %lld]", sp, v, el, lo,
                           hi);
        if (n == FLAG_INTS_MAX)
            return ag_fail(AG_ERR_ARG, "'--%s' has more than %d values", sp, FLAG_INTS_MAX);
        l->v[n++] = (int)x;
        if (!end) break;
        p = end + 1;
    }
    l->n = n;
    return AG_OK;
}

/* the value v of row f (spelled sp) into *f->ptr */
static int set_value(Flag *f, const char *sp, const char *v) {
    switch (f->type) {
    case FLAG_INT:
    case FLAG_I64: {
        long long x, lo, hi;
        int rc = read_i64(v, &x);
        int_range(f, &lo, &hi);
        if (rc < 0) return ag_fail(AG_ERR_ARG, "'--%s %s' is not an integer", sp, v);
        if (rc > 0 || x < lo || x > hi) return out_of_range(f, sp, v);
        if (f->type == FLAG_INT)
            *(int *)f->ptr = (int)x;
        else
            *(int64_t *)f->ptr = x;
        return AG_OK;
    }
    case FLAG_U64: {
        unsigned long long x;
        int rc = read_u64(v, &x);
        if (rc < 0) return ag_fail(AG_ERR_ARG, "'--%s %s' is not an integer", sp, v);
        if (rc > 0 || (double)x < f->lo || (f->hi < 18446744073709551615.0 && x > f->hi))
            return out_of_range(f, sp, v);
        *(uint64_t *)f->ptr = x;
        return AG_OK;
    }
    case FLAG_DOUBLE: {
        double x;
        int rc = read_double(v, &x);
        if (rc < 0) return ag_fail(AG_ERR_ARG, "'--%s %s' is not a number", sp, v);
        if (rc > 0 || x < f->lo || x > f->hi) return out_of_range(f, sp, v);
        *(double *)f->ptr = x;
        return AG_OK;
    }
    case FLAG_PATH:
        if (!*v) return ag_fail(AG_ERR_ARG, "'--%s' is empty: give a %s", sp, arg_name(f));
        /* fall through */
    case FLAG_STR: *(const char **)f->ptr = v; return AG_OK;
    case FLAG_CHOICE: {
        int k = 0;
        while (f->choices[k] && strcmp(f->choices[k], v) != 0) k++;
        if (f->choices[k]) {
            *(int *)f->ptr = k;
            return AG_OK;
        }
        char list[256] = "";
        for (int j = 0; f->choices[j]; j++) {
            strncat(list, j ? ", " : "", sizeof list - strlen(list) - 1);
            strncat(list, f->choices[j], sizeof list - strlen(list) - 1);
        }
        return ag_fail(AG_ERR_ARG, "'--%s %s': expected one of %s", sp, v, list);
    }
    case FLAG_INTS: return read_ints(f, sp, v);
    case FLAG_SWITCH: break;
    }
    return AG_OK;
}

int flag_parse(Flag *fl, int n, int argc, char **argv, char **pos, int *npos) {
    AG_CHECK_ARG(fl);
    AG_CHECK(n > 0 && argc >= 0 && (argv || argc == 0) && (!pos || npos),
             "flag_parse: %d rows, argc %d, argv %s, pos without npos %d", n, argc,
             argv ? "given" : "NULL", pos && !npos);
    check_table(fl, n);
    if (npos) *npos = 0;
    int only_pos = 0;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        if (only_pos || a[0] != '-' || strcmp(a, "-") == 0) {
            if (!pos) return ag_fail(AG_ERR_ARG, "unexpected argument '%s'", a);
            pos[(*npos)++] = argv[i];
            continue;
        }
        if (strcmp(a, "--") == 0) {
            only_pos = 1;
            continue;
        }
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) return FLAG_HELP;
        if (strncmp(a, "--", 2) != 0) return ag_fail(AG_ERR_ARG, "unknown flag '%s'", a);
        const char *name = a + 2, *eq = strchr(name, '=');
        int which;
        Flag *f = lookup(fl, n, name, eq ? (size_t)(eq - name) : strlen(name), &which);
        if (!f) return ag_fail(AG_ERR_ARG, "unknown flag '%s'", a);
        f->given = 1 + which;
        char sp[64];
        flag_spelling(f, sp, sizeof sp);
        if (f->type == FLAG_SWITCH) {
            if (eq) return ag_fail(AG_ERR_ARG, "flag '--%s' takes no value", sp);
            *(int *)f->ptr = (int)f->lo;
        } else {
            const char *v = eq ? eq + 1 : i + 1 < argc ? argv[++i] : NULL;
            if (!v) return ag_fail(AG_ERR_ARG, "flag '--%s' needs a value (%s)", sp, arg_name(f));
            int rc = set_value(f, sp, v);
            if (rc != AG_OK) return rc;
        }
    }
    return AG_OK;
}

/* the default a row holds, or "" */
static void default_text(const Flag *f, char *buf, size_t cap) {
    buf[0] = '\0';
    switch (f->type) {
    case FLAG_INT: snprintf(buf, cap, "%d", *(const int *)f->ptr); break;
    case FLAG_I64: snprintf(buf, cap, "%lld", (long long)*(const int64_t *)f->ptr); break;
    case FLAG_U64: snprintf(buf, cap, "%llu", (unsigned long long)*(const uint64_t *)f->ptr); break;
    case FLAG_DOUBLE: snprintf(buf, cap, "%g", *(const double *)f->ptr); break;
    case FLAG_STR:
    case FLAG_PATH: {
        const char *s = *(const char *const *)f->ptr;
        snprintf(buf, cap, "%s", s ? s : "");
        break;
    }
    case FLAG_CHOICE: {
        int k = *(const int *)f->ptr, m = 0;
        while (f->choices[m]) m++;
        if (k >= 0 && k < m) snprintf(buf, cap, "%s", f->choices[k]);
        break;
    }
    case FLAG_INTS: {
        const FlagInts *l = f->ptr;
        for (int i = 0; i < l->n && strlen(buf) + 16 < cap; i++)
            snprintf(buf + strlen(buf), cap - strlen(buf), "%s%d", i ? "," : "", l->v[i]);
        break;
    }
    case FLAG_SWITCH: break;
    }
}

void flag_help(FILE *out, const Flag *fl, int n) {
    AG_CHECK_ARG(out);
    AG_CHECK_ARG(fl);
    for (int i = 0; i < n; i++) {
        const Flag *f = &fl[i];
        char head[96], def[160], range[96] = "";
        size_t l;
        const char *name = spelling(f, 0, &l);
        if (f->type == FLAG_SWITCH)
            snprintf(head, sizeof head, "--%.*s", (int)l, name);
        else if (f->type == FLAG_CHOICE && !f->arg) {
            char list[64] = "";
            for (int j = 0; f->choices[j]; j++)
                snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", j ? "|" : "",
                         f->choices[j]);
            snprintf(head, sizeof head, "--%.*s %s", (int)l, name, list);
        } else
            snprintf(head, sizeof head, "--%.*s %s", (int)l, name, arg_name(f));
        fprintf(out, "  %-22s %s", head, f->help ? f->help : "");
        default_text(f, def, sizeof def);
        if (*def && !(f->help && strstr(f->help, "(default"))) fprintf(out, " (%s)", def);
        if (f->type == FLAG_INT || f->type == FLAG_I64 || f->type == FLAG_U64 ||
            f->type == FLAG_DOUBLE || f->type == FLAG_INTS)
            range_text(f, range, sizeof range);
        if (*range) fprintf(out, " %s", range);
        const char *a;
        for (int k = 1; (a = spelling(f, k, &l)) != NULL; k++)
            fprintf(out, "%s--%.*s", k == 1 ? "; also " : ", ", (int)l, a);
        fprintf(out, "\n");
    }
}

void flag_usage(FILE *out, const char *prog, const char *cmd, const char *args, const char *what,
                const Flag *fl, int n) {
    AG_CHECK_ARG(out);
    AG_CHECK_ARG(prog);
    AG_CHECK_ARG(cmd);
    AG_CHECK_ARG(args);
    AG_CHECK_ARG(what);
    AG_CHECK_ARG(fl);
    fprintf(out, "usage: %s %s %s\n%s\n\nflags (default) [range]:\n", prog, cmd, args, what);
    flag_help(out, fl, n);
}

int flag_parse_cmd(const char *prog, const char *cmd, const char *args, const char *what, Flag *fl,
                   int n, int argc, char **argv, char **pos, int *npos) {
    AG_CHECK_ARG(prog);
    AG_CHECK_ARG(cmd);
    AG_CHECK_ARG(args);
    AG_CHECK_ARG(what);
    AG_CHECK_ARG(fl);
    int rc = flag_parse(fl, n, argc, argv, pos, npos);
    if (rc == FLAG_HELP) flag_usage(stdout, prog, cmd, args, what, fl, n);
    return rc;
}

Flag *flag_find(Flag *fl, int n, const char *name) {
    AG_CHECK_ARG(fl);
    AG_CHECK_ARG(name);
    for (int i = 0; i < n; i++) {
        size_t l;
        const char *p = spelling(&fl[i], 0, &l);
        if (l == strlen(name) && strncmp(p, name, l) == 0) return &fl[i];
    }
    AG_CHECK(0, "flag_find: no flag --%s in the table (by its canonical spelling)", name);
    return NULL;
}

int flag_help_asked(int argc, char **argv) {
    AG_CHECK_ARG(argv);
    for (int i = 0; i < argc && strcmp(argv[i], "--") != 0; i++)
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) return 1;
    return 0;
}

int flag_given(const Flag *fl, int n, const char *name) {
    AG_CHECK_ARG(fl);
    AG_CHECK_ARG(name);
    return flag_find((Flag *)fl, n, name)->given != 0;
}

const char *flag_spelling(const Flag *f, char *buf, size_t cap) {
    AG_CHECK_ARG(f);
    AG_CHECK_ARG(buf);
    size_t l;
    const char *p = spelling(f, f->given > 0 ? f->given - 1 : 0, &l);
    if (!p) p = spelling(f, 0, &l);
    snprintf(buf, cap, "%.*s", (int)l, p);
    return buf;
}
