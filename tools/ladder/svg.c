/*
 * svg.c - the ladder's plot (DIR/ladder.svg). Panels sharing the bits-per-weight axis: mean KLD
 * (log scale) on top, perplexity below, and, when the ladder has compat and another mode, each
 * mode's KLD relative to compat's on the same type (1 = the same as llama-quantize; lower is
 * better), where modes that lie close together on the log axis are told apart. One colour per
 * mode, a line per format family, a point per rung labelled with its type, alarms ringed in red.
 *
 * Tick values are round numbers (1, 2 or 5 times a power of ten, the axis widened to a whole
 * step); labels are placed greedily, in bpw order, at the first of a few spots around their point
 * that overlaps no other label and no point of the panel (else the least-overlapping one).
 */
#include "report.h"

#include "iqforge.h"

#include <math.h>
#include <string.h>

static const char *const mode_colour[] = { "#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd" };
static const char *const family_dash[] = { "none", "6,3", "2,3", "1,1", "8,2,2,2", "4,4" };
#define N_DASH (int)(sizeof family_dash / sizeof family_dash[0])

#define W 960
#define X0 90.0
#define X1 860.0

typedef struct axis {
    double lo, hi;
    bool log;
    double p0, p1; /* pixel range */
} axis;

static double ax_map(const axis *a, double v) {
    double t;
    if (a->log) t = (log10(v) - log10(a->lo)) / (log10(a->hi) - log10(a->lo));
    else t = (v - a->lo) / (a->hi - a->lo);
    return a->p0 + t * (a->p1 - a->p0);
}

/* The round step (1, 2 or 5 x 10^k) that cuts [lo, hi] into at most max_ticks intervals. */
static double nice_step(double lo, double hi, int max_ticks) {
    double raw = (hi - lo) / max_ticks;
    if (!(raw > 0)) return 1;
    double p = pow(10, floor(log10(raw)));
    const double mult[] = { 1, 2, 5, 10 };
    for (int i = 0; i < 4; i++)
        if (mult[i] * p >= raw * (1 - 1e-9)) return mult[i] * p;
    return 10 * p;
}

/* A linear axis over [lo, hi] widened outward to whole round steps. */
static axis lin_axis(double lo, double hi, int max_ticks, double p0, double p1, double *step) {
    if (!(hi > lo)) lo -= 0.5, hi += 0.5;
    *step = nice_step(lo, hi, max_ticks);
    axis a = { floor(lo / *step + 1e-9) * *step, ceil(hi / *step - 1e-9) * *step, false, p0, p1 };
    if (a.hi <= a.lo) a.hi = a.lo + *step;
    return a;
}

static void put_xml(ladder_rep *o, const char *s) {
    for (; *s; s++) {
        if (*s == '<') iqf_ladder_put(o, "&lt;");
        else if (*s == '>') iqf_ladder_put(o, "&gt;");
        else if (*s == '&') iqf_ladder_put(o, "&amp;");
        else if (*s == '"') iqf_ladder_put(o, "&quot;");
        else iqf_ladder_put(o, "%c", *s);
    }
}

/* ------------------------------------------------------------------------------------------ */
/* Label placement                                                                            */

typedef struct box { double x0, y0, x1, y1; } box;

typedef struct placer {
    box b[1024];
    int n;
    box frame; /* the panel: labels stay inside */
} placer;

static double overlap(box a, box b) {
    double w = fmin(a.x1, b.x1) - fmax(a.x0, b.x0), h = fmin(a.y1, b.y1) - fmax(a.y0, b.y0);
    return w > 0 && h > 0 ? w * h : 0;
}

static void placer_add(placer *pl, box b) {
    if (pl->n < (int)(sizeof pl->b / sizeof pl->b[0])) pl->b[pl->n++] = b;
}

/* Places a 9px label for the point (px, py); returns the spot in *lx, *ly and whether the text
 * is anchored at its end (left of the point). */
static bool place_label(placer *pl, double px, double py, const char *text, double *lx, double *ly) {
    static const double spot[][3] = { /* dx, dy (baseline), end anchor */
        { 5, -5, 0 }, { 5, 12, 0 }, { -5, -5, 1 }, { -5, 12, 1 }, { 7, 3, 0 }, { -7, 3, 1 },
        { 5, -15, 0 }, { -5, -15, 1 }, { 5, 22, 0 }, { -5, 22, 1 }, { 5, -25, 0 }, { 5, 32, 0 },
    };
    const double w = 5.4 * (double)strlen(text) + 2, h = 10;
    double best = INFINITY;
    int pick = 0;
    for (int s = 0; s < (int)(sizeof spot / sizeof spot[0]); s++) {
        double x = px + spot[s][0], y = py + spot[s][1];
        box b = spot[s][2] ? (box){ x - w, y - h + 2, x, y + 2 } : (box){ x, y - h + 2, x + w, y + 2 };
        double cost = 0;
        if (b.x0 < pl->frame.x0 || b.x1 > pl->frame.x1 || b.y0 < pl->frame.y0 || b.y1 > pl->frame.y1) cost += 1e6;
        for (int i = 0; i < pl->n; i++) cost += overlap(b, pl->b[i]);
        cost += s * 1e-3; /* ties: the nearer spot */
        if (cost < best) best = cost, pick = s;
    }
    *lx = px + spot[pick][0];
    *ly = py + spot[pick][1];
    bool end = spot[pick][2] != 0;
    placer_add(pl, end ? (box){ *lx - w, *ly - h + 2, *lx, *ly + 2 } : (box){ *lx, *ly - h + 2, *lx + w, *ly + 2 });
    return end;
}

/* ------------------------------------------------------------------------------------------ */
/* Panels                                                                                     */

typedef struct plot {
    const ladder_rung *r;
    int n;
    bool modes[LADDER_N_MODES];
    axis X;
    double x_step;
} plot;

/* The rungs of mode m with a value on this panel, sorted by bpw; returns the count. */
static int series(const plot *pl, int m, double (*val)(const plot *, int), int *idx, int max) {
    int k = 0;
    for (int i = 0; i < pl->n && k < max; i++)
        if (ladder_usable(&pl->r[i]) && pl->r[i].mode == m && val(pl, i) > 0) idx[k++] = i;
    for (int a = 1; a < k; a++) /* insertion sort by bpw */
        for (int b = a; b > 0 && pl->r[idx[b]].bpw < pl->r[idx[b - 1]].bpw; b--) {
            int t = idx[b]; idx[b] = idx[b - 1]; idx[b - 1] = t;
        }
    return k;
}

static double val_kld(const plot *pl, int i) { return pl->r[i].kld; }
static double val_ppl(const plot *pl, int i) { return pl->r[i].ppl; }

/* The compat rung of the same type as rung i, or -1. */
static int compat_twin(const plot *pl, int i) {
    for (int k = 0; k < pl->n; k++)
        if (k != i && pl->r[k].mode == IQF_MODE_COMPAT && ladder_usable(&pl->r[k]) && !strcmp(pl->r[k].name, pl->r[i].name))
            return k;
    return -1;
}

/* KLD relative to compat on the same type (non-compat rungs with a compat twin), else 0. */
static double val_rel(const plot *pl, int i) {
    if (pl->r[i].mode == IQF_MODE_COMPAT) return 0;
    int c = compat_twin(pl, i);
    return c >= 0 && pl->r[c].kld > 0 && pl->r[i].kld > 0 ? pl->r[i].kld / pl->r[c].kld : 0;
}

static void frame(ladder_rep *o, const plot *pl, const axis *Y, const char *id, const char *ylabel) {
    double top = fmin(Y->p0, Y->p1), bot = fmax(Y->p0, Y->p1);
    iqf_ladder_put(o, "<g class=\"panel\" id=\"%s\">\n", id);
    iqf_ladder_put(o, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"none\" stroke=\"black\"/>\n", X0, top,
               X1 - X0, bot - top);
    for (double b = pl->X.lo; b <= pl->X.hi + 1e-9; b += pl->x_step) {
        double px = ax_map(&pl->X, b);
        iqf_ladder_put(o, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#ddd\"/>\n", px, top, px, bot);
        iqf_ladder_put(o, "<text class=\"xtick\" x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">%g</text>\n", px, bot + 16, b);
    }
    iqf_ladder_put(o, "<text x=\"24\" y=\"%.1f\" transform=\"rotate(-90 24 %.1f)\" text-anchor=\"middle\">%s</text>\n",
               (top + bot) / 2, (top + bot) / 2, ylabel);
    iqf_ladder_put(o, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">bits per weight (file)</text>\n", (X0 + X1) / 2,
               bot + 34);
}

static void ytick(ladder_rep *o, const axis *Y, double v) {
    double py = ax_map(Y, v);
    iqf_ladder_put(o, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#ddd\"/>\n", X0, py, X1, py);
    iqf_ladder_put(o, "<text class=\"ytick\" x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\">%g</text>\n", X0 - 6, py + 4, v);
}

/* Log-axis ticks: the decades, and 2x and 5x within them when the axis spans two decades or less. */
static void log_ticks(ladder_rep *o, const axis *Y) {
    bool fine = Y->hi / Y->lo <= 100.0 * 1.0001;
    for (double d = Y->lo; d <= Y->hi * 1.0001; d *= 10) {
        ytick(o, Y, d);
        for (int m = 2; fine && m <= 5; m += 3)
            if (d * m < Y->hi * 0.9999) ytick(o, Y, d * m);
    }
}

/* The points, family lines, alarm rings and labels of one panel. Labels go on one mode only
 * (compat, or the first mode present): the other modes' points sit beside them. */
static void draw_series(ladder_rep *o, const plot *pl, const axis *Y, double (*val)(const plot *, int), const char *cls) {
    placer P = { .n = 0, .frame = { X0, fmin(Y->p0, Y->p1), X1, fmax(Y->p0, Y->p1) } };
    for (int i = 0; i < pl->n; i++) {
        double v = ladder_usable(&pl->r[i]) ? val(pl, i) : 0;
        if (v > 0) {
            double px = ax_map(&pl->X, pl->r[i].bpw), py = ax_map(Y, v);
            placer_add(&P, (box){ px - 4, py - 4, px + 4, py + 4 });
        }
    }
    int label_mode = -1;
    for (int m = 0; m < LADDER_N_MODES && label_mode < 0; m++) {
        int tmp[1];
        if (pl->modes[m] && series(pl, m, val, tmp, 1)) label_mode = m;
    }
    for (int m = 0; m < LADDER_N_MODES; m++) {
        if (!pl->modes[m]) continue;
        int idx[512];
        int k = series(pl, m, val, idx, 512);
        if (!k) continue;
        const char *col = mode_colour[m % 4];
        iqf_ladder_put(o, "<g class=\"series\" data-mode=\"%s\">\n", iqf_ladder_mode_str(m));
        for (int fam = 0; fam < N_DASH; fam++) { /* a line per format family: a family's ladder reads as a curve */
            int cnt = 0;
            for (int a = 0; a < k; a++) cnt += (int)pl->r[idx[a]].family == fam;
            if (cnt < 2) continue;
            iqf_ladder_put(o, "<polyline class=\"family\" data-family=\"%s\" fill=\"none\" stroke=\"%s\" stroke-width=\"1.2\" "
                          "stroke-dasharray=\"%s\" points=\"", iqf_ladder_family_name((ladder_family)fam), col, family_dash[fam]);
            for (int a = 0; a < k; a++)
                if ((int)pl->r[idx[a]].family == fam)
                    iqf_ladder_put(o, "%.1f,%.1f ", ax_map(&pl->X, pl->r[idx[a]].bpw), ax_map(Y, val(pl, idx[a])));
            iqf_ladder_put(o, "\"/>\n");
        }
        for (int a = 0; a < k; a++) {
            const ladder_rung *x = &pl->r[idx[a]];
            double px = ax_map(&pl->X, x->bpw), py = ax_map(Y, val(pl, idx[a]));
            iqf_ladder_put(o, "<circle class=\"%s\" data-type=\"%s\" cx=\"%.1f\" cy=\"%.1f\" r=\"3.5\" fill=\"%s\"/>\n", cls,
                       x->name, px, py, col);
            if (x->alarm)
                iqf_ladder_put(o, "<circle class=\"alarm\" data-type=\"%s\" cx=\"%.1f\" cy=\"%.1f\" r=\"9\" fill=\"none\" "
                              "stroke=\"red\" stroke-width=\"2.5\"/>\n", x->name, px, py);
            if (m != label_mode) continue;
            double lx, ly;
            bool end = place_label(&P, px, py, x->name, &lx, &ly);
            iqf_ladder_put(o, "<text class=\"label\" x=\"%.1f\" y=\"%.1f\" font-size=\"9\" fill=\"#444\"%s>%s</text>\n", lx, ly,
                       end ? " text-anchor=\"end\"" : "", x->name);
        }
        iqf_ladder_put(o, "</g>\n");
    }
    iqf_ladder_put(o, "</g>\n");
}

static void legend(ladder_rep *o, const plot *pl) {
    double ly = 70;
    for (int m = 0; m < LADDER_N_MODES; m++) {
        if (!pl->modes[m]) continue;
        iqf_ladder_put(o, "<rect x=\"880\" y=\"%.1f\" width=\"12\" height=\"12\" fill=\"%s\"/><text class=\"legend\" x=\"896\" "
                      "y=\"%.1f\">%s</text>\n", ly, mode_colour[m % 4], ly + 10, iqf_ladder_mode_str(m));
        ly += 18;
    }
    iqf_ladder_put(o, "<circle cx=\"886\" cy=\"%.1f\" r=\"6\" fill=\"none\" stroke=\"red\" stroke-width=\"2.5\"/><text "
                  "class=\"legend\" x=\"896\" y=\"%.1f\">alarm</text>\n", ly + 6, ly + 10);
    ly += 30;
    for (int fam = 0; fam < N_DASH; fam++) {
        bool used = false;
        for (int i = 0; i < pl->n; i++) used |= ladder_usable(&pl->r[i]) && (int)pl->r[i].family == fam;
        if (!used) continue;
        iqf_ladder_put(o, "<line x1=\"872\" y1=\"%.1f\" x2=\"892\" y2=\"%.1f\" stroke=\"#444\" stroke-dasharray=\"%s\"/>"
                      "<text class=\"legend\" x=\"896\" y=\"%.1f\">%s</text>\n", ly, ly, family_dash[fam], ly + 4,
                   iqf_ladder_family_name((ladder_family)fam));
        ly += 18;
    }
}

int iqf_ladder_write_svg(const char *path, const ladder_inputs *in, const ladder_rung *r, int n, char *err,
                     size_t errlen) {
    plot pl = { .r = r, .n = n };
    double bmin = INFINITY, bmax = -INFINITY, kmin = INFINITY, kmax = -INFINITY, pmin = INFINITY, pmax = -INFINITY;
    double rmin = 1, rmax = 1;
    bool rel = false;
    for (int i = 0; i < n; i++) {
        const ladder_rung *x = &r[i];
        if (!ladder_usable(x)) continue;
        if ((unsigned)x->mode < LADDER_N_MODES) pl.modes[x->mode] = true;
        bmin = fmin(bmin, x->bpw), bmax = fmax(bmax, x->bpw);
        if (x->kld > 0) kmin = fmin(kmin, x->kld), kmax = fmax(kmax, x->kld);
        pmin = fmin(pmin, x->ppl), pmax = fmax(pmax, x->ppl);
        double q = val_rel(&pl, i);
        if (q > 0) rel = true, rmin = fmin(rmin, q), rmax = fmax(rmax, q);
    }
    if (!(bmin < INFINITY)) bmin = 1, bmax = 9, pmin = 1, pmax = 2;
    if (!(kmin < INFINITY)) kmin = 1e-4, kmax = 1;
    /* bpw: whole bits (or halves, on a narrow ladder); KLD: decades; PPL and the ratio: round steps. */
    pl.X = lin_axis(bmin - 0.2, bmax + 0.2, 10, X0, X1, &pl.x_step);
    if (pl.x_step < 0.5) pl.X = lin_axis(floor(bmin - 0.2), ceil(bmax + 0.2), 10, X0, X1, &pl.x_step);
    axis K = { pow(10, floor(log10(kmin))), pow(10, ceil(log10(kmax))), true, 400, 60 };
    if (K.hi <= K.lo) K.hi = K.lo * 10;
    double ps, rs;
    axis P = lin_axis(pmin, pmax, 5, 700, 480, &ps);
    axis R = lin_axis(fmin(rmin, 1) - 0.02, fmax(rmax, 1) + 0.02, 5, 980, 780, &rs);
    const int height = rel ? 1060 : 800;
    ladder_rep o;
    if (iqf_ladder_rep_open(&o, path, err, errlen)) return -1;
    iqf_ladder_put(&o, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
                   "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" "
                   "font-family=\"sans-serif\" font-size=\"12\">\n<rect width=\"%d\" height=\"%d\" fill=\"white\"/>\n<title>"
                   "iqforge ladder: ", W, height, W, height, W, height);
    put_xml(&o, in->model ? in->model : "");
    iqf_ladder_put(&o, "</title>\n<text x=\"480\" y=\"28\" text-anchor=\"middle\" font-size=\"16\">iqforge ladder: ");
    put_xml(&o, in->model ? in->model : "");
    iqf_ladder_put(&o, "</text>\n");
    frame(&o, &pl, &K, "kld", "mean KLD (log scale)");
    log_ticks(&o, &K);
    draw_series(&o, &pl, &K, val_kld, "rung");
    frame(&o, &pl, &P, "ppl", "perplexity");
    for (double v = P.lo; v <= P.hi + ps * 1e-6; v += ps) ytick(&o, &P, v);
    draw_series(&o, &pl, &P, val_ppl, "rung");
    if (rel) {
        frame(&o, &pl, &R, "relative", "KLD / compat's (same type)");
        for (double v = R.lo; v <= R.hi + rs * 1e-6; v += rs) ytick(&o, &R, v);
        double y1 = ax_map(&R, 1);
        iqf_ladder_put(&o, "<line class=\"compat-level\" x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#1f77b4\" "
                       "stroke-dasharray=\"4,3\"/>\n", X0, y1, X1, y1);
        draw_series(&o, &pl, &R, val_rel, "ratio");
    }
    legend(&o, &pl);
    iqf_ladder_put(&o, "</svg>\n");
    return iqf_ladder_rep_close(&o, err, errlen);
}
