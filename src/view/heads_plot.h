/* heads_plot.h: the pictures of ../lens/heads.h, drawn by gnuplot (src/run's script pieces):
 * head importance as two heatmaps side by side, and one layer's attention patterns as a grid.
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

#endif
