/* heads_plot.h: the pictures of ../lens/heads.h, drawn by gnuplot (src/run's script pieces):
 * head importance as two heatmaps side by side, one layer's attention patterns as a grid, and
 * a grid of any heatmaps of one size (view_grid_png).
 * Each returns src/run's RUN_PLOT_DRAWN, RUN_PLOT_SKIPPED (gnuplot is not installed:
 * ag_last_error() says so) or RUN_PLOT_FAILED (ag_last_error() says why); the script is kept
 * beside the PNG (.gp).
 * Not here: the measures and the patterns (../lens/heads.c), gnuplot itself (../run/run_gp.c).
 * Read next: heads_plot.c. */
#ifndef ATTOGRAD_VIEW_HEADS_PLOT_H
#define ATTOGRAD_VIEW_HEADS_PLOT_H

#include "../lens/heads.h"

/* Rows: blocks ("enc self 0"), columns: heads; the loss increase (white to red) beside the
 * gradient score (white to blue, [0, 1]); title NULL: "head importance". */
int view_heads_png(const LensHeadImportance *h, const char *png, const char *title);
/* The blocks of a at layer (in the order added) as rows, a column per head, queries down and
 * keys across, tokens on the axes, probabilities 0 white to 1 blue; caption (may be NULL) a
 * second title line, cut to the picture's width. A layer without blocks aborts. */
int view_patterns_png(const LensPatterns *a, int layer, const char *caption, const char *png);
/* A grid of heatmaps of the same size (patterns before and after training, a column a head):
 * panels v[r * n_cols + c] of (rows, cols) values, row 0 at the top, each cell x cell pixels
 * and titled titles[r * n_cols + c], the colour range [0, hi] in gnuplot's default palette, a
 * colour bar at the right of each row, drawn into dir/name (run_gp_script_draw: the script
 * kept as .gp; a skip or failure said on stderr as "prog: <why>"). 1 when drawn, then ", name"
 * is added to drawn (view_drawn; NULL: none) of size bytes; 0 when not. */
typedef struct ViewGrid {
    const float *const *v;
    const char *const *titles;
    int n_rows, n_cols; /* panels */
    int rows, cols;     /* values of a panel */
    int cell;           /* pixels a panel */
    double hi;
} ViewGrid;
int view_grid_png(const char *dir, const char *name, const ViewGrid *g, const char *prog,
                  char *drawn, size_t size);

#endif
