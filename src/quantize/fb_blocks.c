/*
 * fb_blocks.c - per-weight access to the codes of the K-quant and legacy blocks under their
 * stored scales, for the in-block part of the error feedback (feedback.c).
 *
 * fb_block_parse reads a block's (sub-block) scales into value = a[s] * code + b[s], code in
 * [cmin, cmax]; fb_block_set writes one weight's code. The layouts are ggml's (block_q4_0 ...
 * block_q6_K); only the code bits are rewritten, so the block stays valid for every decoder.
 * The values a*code+b are only used to steer the rounding; the feedback loop decodes the block
 * with iqf_dequantize afterwards.
 */
#include "fb_blocks.h"
#include "../codec/iq3_grids.h"
#include "../codec/iqgrid.h"
#include "../util/arch.h"

#include <math.h>
#include <pthread.h>
#include <string.h>

/* IQ4_NL / IQ4_XS levels (kvalues_iq4nl). */
static const int8_t kv4[16] = { -127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113 };

/* The IQ3_XXS (256 x 4) and IQ2_XS (512 x 8) grids, read once through the public decoder from
 * crafted blocks (d = 1, scale 0, no signs), so no codec table is needed here. */
static uint8_t grid3[256][4], grid2[512][8], grid2xxs[256][8], grid3s[512][4], grid2s[1024][8];
static bool grids_ok;
static pthread_once_t grids_once = PTHREAD_ONCE_INIT;

/* A grid as level indices, for the re-rounding's nearest-point search (nearest_point): its
 * points' components take the nl <= 8 distinct values lvl[0] < lvl[1] < ...; component k of
 * point p is lvl[(pk[p] >> 4k) & 15]. The encoder's key tables (kbits bits per component
 * level): kmap[key] >= 0 is the point with those levels, otherwise nb - kmap[key] - 1 is the
 * key's neighbour list [n, points...] (iq3_grids.h, iqgrid.h). */
typedef struct grid_tab {
    const uint8_t *grid; /* np points of w bytes */
    int np, w, nl, kbits;
    float lvl[16]; /* nl of them, then INF */
    uint32_t *pk;
    const int32_t *kmap;
    const uint16_t *nb;
} grid_tab;
static uint32_t pk3[256], pk2[512], pk2xxs[256], pk3s[512], pk2s[1024];
static grid_tab tab3 = { &grid3[0][0], 256, 4, 0, 3, { 0 }, pk3, NULL, NULL };
static grid_tab tab2 = { &grid2[0][0], 512, 8, 0, 2, { 0 }, pk2, NULL, NULL };
static grid_tab tab2xxs = { &grid2xxs[0][0], 256, 8, 0, 2, { 0 }, pk2xxs, NULL, NULL };
static grid_tab tab3s = { &grid3s[0][0], 512, 4, 0, 3, { 0 }, pk3s, NULL, NULL };
static grid_tab tab2s = { &grid2s[0][0], 1024, 8, 0, 2, { 0 }, pk2s, NULL, NULL };

/* Fills g's levels and packed points from its grid bytes, and takes the encoder's key tables;
 * false if the grid has more than 8 distinct component values, the tables are missing, or
 * they disagree with the grid (a point's key must map to that point). */
static bool tab_init(grid_tab *g) {
    if (g->kbits == 3) {
        iqf_iq3_key_tables(g->np, &g->kmap, &g->nb);
    } else {
        const iqf_iqgrid *q = iqf_iqgrid_get(g->np == 256 ? IQF_IQGRID_IQ2XXS : g->np == 512 ? IQF_IQGRID_IQ2XS : IQF_IQGRID_IQ2S);
        if (q) g->kmap = q->kmap, g->nb = q->neighbours;
    }
    if (!g->kmap || !g->nb) return false;
    bool seen[256] = { false };
    for (int i = 0; i < g->np * g->w; i++) seen[g->grid[i]] = true;
    int nl = 0, li[256];
    for (int v = 0; v < 256; v++) {
        if (!seen[v]) continue;
        if (nl == 8) return false;
        li[v] = nl;
        g->lvl[nl++] = (float)v;
    }
    g->nl = nl;
    for (int j = nl; j < 16; j++) g->lvl[j] = INFINITY;
    for (int p = 0; p < g->np; p++) {
        uint32_t pk = 0, key = 0;
        for (int k = g->w - 1; k >= 0; k--) {
            const int l = li[g->grid[p * g->w + k]];
            pk = pk << 4 | (uint32_t)l;
            key = key << g->kbits | (uint32_t)l;
        }
        g->pk[p] = pk;
        if (g->kmap[key] != p) return false;
    }
    return true;
}

static void grids_init(void) {
    uint8_t blk[98];
    float y[256];
    bool ok = true;
    for (int b = 0; b < 4 && ok; b++) {
        memset(blk, 0, sizeof blk);
        blk[0] = 0x00, blk[1] = 0x3C; /* fp16 1.0 */
        for (int g = 0; g < 64; g++) blk[2 + g] = (uint8_t)(64 * b + g);
        ok = iqf_dequantize(IQF_TYPE_IQ3_XXS, blk, y, 1, 256, 1, NULL, 0) == IQF_OK;
        for (int g = 0; g < 64 && ok; g++)
            for (int k = 0; k < 4; k++) grid3[64 * b + g][k] = (uint8_t)(y[4 * g + k] * 4.0f + 0.5f); /* db = 1/4 */
    }
    uint8_t b2[74];
    for (int b = 0; b < 16 && ok; b++) {
        memset(b2, 0, sizeof b2);
        b2[0] = 0x00, b2[1] = 0x3C;
        for (int g = 0; g < 32; g++) {
            uint16_t v = (uint16_t)(32 * b + g);
            memcpy(b2 + 2 + 2 * g, &v, 2);
        }
        ok = iqf_dequantize(IQF_TYPE_IQ2_XS, b2, y, 1, 256, 1, NULL, 0) == IQF_OK;
        for (int g = 0; g < 32 && ok; g++)
            for (int k = 0; k < 8; k++) grid2[32 * b + g][k] = (uint8_t)(y[8 * g + k] * 8.0f + 0.5f); /* db = 1/8 */
    }
    uint8_t b3[110];
    for (int b = 0; b < 8 && ok; b++) { /* IQ3_S: d = 1, scales 0 -> db = 1 */
        memset(b3, 0, sizeof b3);
        b3[0] = 0x00, b3[1] = 0x3C;
        for (int g = 0; g < 64; g++) {
            const int idx = 64 * b + g;
            b3[2 + g] = (uint8_t)(idx & 255);
            if (idx & 256) b3[66 + g / 8] |= (uint8_t)(1 << (g % 8));
        }
        ok = iqf_dequantize(IQF_TYPE_IQ3_S, b3, y, 1, 256, 1, NULL, 0) == IQF_OK;
        for (int g = 0; g < 64 && ok; g++)
            for (int k = 0; k < 4; k++) grid3s[64 * b + g][k] = (uint8_t)(y[4 * g + k] + 0.5f);
    }
    uint8_t bx[66];
    for (int b = 0; b < 8 && ok; b++) { /* IQ2_XXS: d = 1, scale 0 -> db = 1/8 */
        memset(bx, 0, sizeof bx);
        bx[0] = 0x00, bx[1] = 0x3C;
        for (int ib = 0; ib < 8; ib++)
            for (int l = 0; l < 4; l++) bx[2 + 8 * ib + l] = (uint8_t)(32 * b + 4 * ib + l);
        ok = iqf_dequantize(IQF_TYPE_IQ2_XXS, bx, y, 1, 256, 1, NULL, 0) == IQF_OK;
        for (int g = 0; g < 32 && ok; g++)
            for (int k = 0; k < 8; k++) grid2xxs[32 * b + g][k] = (uint8_t)(y[8 * g + k] * 8.0f + 0.5f);
    }
    uint8_t bs2[82];
    for (int b = 0; b < 32 && ok; b++) { /* IQ2_S: d = 1, scales 0 -> db = 1/8 */
        memset(bs2, 0, sizeof bs2);
        bs2[0] = 0x00, bs2[1] = 0x3C;
        for (int g = 0; g < 32; g++) {
            const int idx = 32 * b + g;
            bs2[2 + g] = (uint8_t)(idx & 255);
            bs2[66 + g / 4] |= (uint8_t)(((idx >> 8) & 3) << (2 * (g % 4)));
        }
        ok = iqf_dequantize(IQF_TYPE_IQ2_S, bs2, y, 1, 256, 1, NULL, 0) == IQF_OK;
        for (int g = 0; g < 32 && ok; g++)
            for (int k = 0; k < 8; k++) grid2s[32 * b + g][k] = (uint8_t)(y[8 * g + k] * 8.0f + 0.5f);
    }
    ok = ok && tab_init(&tab3) && tab_init(&tab2) && tab_init(&tab2xxs) && tab_init(&tab3s) && tab_init(&tab2s);
    grids_ok = ok;
}

static float h2f(const uint8_t *p) {
    uint16_t h;
    memcpy(&h, p, 2);
    return iqf_fp16_to_fp32(h);
}

static void scale_min_k4(int j, const uint8_t *q, int *d, int *m) {
    if (j < 4) {
        *d = q[j] & 63;
        *m = q[j + 4] & 63;
    } else {
        *d = (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4);
        *m = (q[j + 4] >> 4) | ((q[j - 0] >> 6) << 4);
    }
}

bool fb_block_supported(int type) {
    switch (type) {
    case IQF_TYPE_Q4_0: case IQF_TYPE_Q4_1: case IQF_TYPE_Q5_0: case IQF_TYPE_Q5_1: case IQF_TYPE_Q8_0:
    case IQF_TYPE_Q2_K: case IQF_TYPE_Q3_K: case IQF_TYPE_Q4_K: case IQF_TYPE_Q5_K: case IQF_TYPE_Q6_K:
    case IQF_TYPE_IQ4_NL: case IQF_TYPE_IQ4_XS:
        return true;
    case IQF_TYPE_IQ3_XXS: case IQF_TYPE_IQ2_XS: case IQF_TYPE_IQ2_XXS: case IQF_TYPE_IQ3_S: case IQF_TYPE_IQ2_S:
        pthread_once(&grids_once, grids_init);
        return grids_ok;
    default:
        return false;
    }
}

static bool grid_type(int type) {
    return type == IQF_TYPE_IQ3_XXS || type == IQF_TYPE_IQ2_XS || type == IQF_TYPE_IQ2_XXS || type == IQF_TYPE_IQ3_S ||
           type == IQF_TYPE_IQ2_S;
}

int fb_block_group(int type) { return grid_type(type) ? 8 : 1; }

static bool parse(int type, const uint8_t *x, fb_block *f) {
    memset(f, 0, sizeof *f);
    f->dec_exact = type != IQF_TYPE_Q4_0 && type != IQF_TYPE_Q5_0;
    switch (type) {
    case IQF_TYPE_Q4_0: { /* d; qs[16] */
        const float d = h2f(x);
        f->sub = 32; f->cmin = 0; f->cmax = 15; f->a[0] = d; f->b[0] = -8 * d;
        return true;
    }
    case IQF_TYPE_Q4_1: { /* d, m; qs[16] */
        f->sub = 32; f->cmin = 0; f->cmax = 15; f->a[0] = h2f(x); f->b[0] = h2f(x + 2);
        return true;
    }
    case IQF_TYPE_Q5_0: { /* d; qh[4]; qs[16] */
        const float d = h2f(x);
        f->sub = 32; f->cmin = 0; f->cmax = 31; f->a[0] = d; f->b[0] = -16 * d;
        return true;
    }
    case IQF_TYPE_Q5_1: { /* d, m; qh[4]; qs[16] */
        f->sub = 32; f->cmin = 0; f->cmax = 31; f->a[0] = h2f(x); f->b[0] = h2f(x + 2);
        return true;
    }
    case IQF_TYPE_Q8_0: { /* d; qs[32] */
        f->sub = 32; f->cmin = -127; f->cmax = 127; f->a[0] = h2f(x); f->no_b = true;
        return true;
    }
    case IQF_TYPE_Q2_K: { /* scales[16]; qs[64]; d; dmin */
        const float d = h2f(x + 80), dm = h2f(x + 82);
        f->sub = 16; f->cmin = 0; f->cmax = 3;
        for (int s = 0; s < 16; s++) {
            f->a[s] = d * (float)(x[s] & 0xF);
            f->b[s] = -(dm * (float)(x[s] >> 4));
        }
        return true;
    }
    case IQF_TYPE_Q3_K: { /* hmask[32]; qs[64]; scales[12]; d */
        const float d = h2f(x + 108);
        uint32_t aux[4];
        memcpy(aux, x + 96, 12);
        const uint32_t kmask1 = 0x03030303, kmask2 = 0x0f0f0f0f, tmp = aux[2];
        aux[2] = ((aux[0] >> 4) & kmask2) | (((tmp >> 4) & kmask1) << 4);
        aux[3] = ((aux[1] >> 4) & kmask2) | (((tmp >> 6) & kmask1) << 4);
        aux[0] = (aux[0] & kmask2) | (((tmp >> 0) & kmask1) << 4);
        aux[1] = (aux[1] & kmask2) | (((tmp >> 2) & kmask1) << 4);
        int8_t sc[16];
        memcpy(sc, aux, 16);
        f->sub = 16; f->cmin = -4; f->cmax = 3;
        for (int s = 0; s < 16; s++) f->a[s] = d * (float)(sc[s] - 32);
        f->no_b = true;
        return true;
    }
    case IQF_TYPE_Q4_K: case IQF_TYPE_Q5_K: { /* d; dmin; scales[12]; [qh[32]]; qs[128] */
        const float d = h2f(x), dm = h2f(x + 2);
        f->sub = 32; f->cmin = 0; f->cmax = type == IQF_TYPE_Q4_K ? 15 : 31;
        for (int s = 0; s < 8; s++) {
            int sc, m;
            scale_min_k4(s, x + 4, &sc, &m);
            f->a[s] = d * (float)sc;
            f->b[s] = -(dm * (float)m);
        }
        return true;
    }
    case IQF_TYPE_IQ4_NL: { /* d; qs[16] */
        f->sub = 32; f->cmin = 0; f->cmax = 15; f->a[0] = h2f(x); f->table = kv4;
        return true;
    }
    case IQF_TYPE_IQ4_XS: { /* d; scales_h (u16); scales_l[4]; qs[128] */
        const float d = h2f(x);
        uint16_t sh;
        memcpy(&sh, x + 2, 2);
        f->sub = 32; f->cmin = 0; f->cmax = 15; f->table = kv4;
        for (int ib = 0; ib < 8; ib++) {
            const int ls = ((x[4 + ib / 2] >> 4 * (ib % 2)) & 0xf) | (((sh >> 2 * ib) & 3) << 4);
            f->a[ib] = d * (float)(ls - 32);
        }
        return true;
    }
    case IQF_TYPE_IQ3_XXS: { /* d; qs[64]; scales_and_signs[8] */
        const float d = h2f(x);
        f->sub = 32;
        for (int ib = 0; ib < 8; ib++) {
            uint32_t a;
            memcpy(&a, x + 66 + 4 * ib, 4);
            f->a[ib] = d * (0.5f + (float)(a >> 28)) * 0.5f;
        }
        return true;
    }
    case IQF_TYPE_IQ2_XXS: { /* d; per 32: 4 grid bytes, u32 signs/scale */
        const float d = h2f(x);
        f->sub = 32;
        for (int ib = 0; ib < 8; ib++) {
            uint32_t a;
            memcpy(&a, x + 2 + 8 * ib + 4, 4);
            f->a[ib] = d * (0.5f + (float)(a >> 28)) * 0.25f;
        }
        return true;
    }
    case IQF_TYPE_IQ3_S: { /* d; qs[64]; qh[8]; signs[32]; scales[4] */
        const float d = h2f(x);
        f->sub = 32;
        for (int ib = 0; ib < 8; ib++) f->a[ib] = d * (float)(1 + 2 * ((x[106 + ib / 2] >> 4 * (ib % 2)) & 0xf));
        return true;
    }
    case IQF_TYPE_IQ2_S: { /* d; qs[32]; signs[32]; qh[8]; scales[8] */
        const float d = h2f(x);
        f->sub = 16;
        for (int s = 0; s < 16; s++) f->a[s] = d * (0.5f + (float)((x[74 + s / 2] >> 4 * (s % 2)) & 0xf)) * 0.25f;
        return true;
    }
    case IQF_TYPE_IQ2_XS: { /* d; qs[32] (u16); scales[8] */
        const float d = h2f(x);
        f->sub = 16;
        for (int s = 0; s < 16; s++) f->a[s] = d * (0.5f + (float)((x[66 + s / 2] >> 4 * (s % 2)) & 0xf)) * 0.25f;
        return true;
    }
    case IQF_TYPE_Q6_K: { /* ql[128]; qh[64]; scales[16] (int8); d */
        const float d = h2f(x + 208);
        f->sub = 16; f->cmin = -32; f->cmax = 31;
        for (int s = 0; s < 16; s++) f->a[s] = d * (float)(int8_t)x[192 + s];
        f->no_b = true;
        return true;
    }
    default:
        return false;
    }
}

bool fb_block_parse(int type, const uint8_t *x, fb_block *f) {
    if (!parse(type, x, f)) return false;
    for (int s = 0; s < 16; s++) f->ia[s] = f->a[s] != 0 ? 1.f / f->a[s] : 0.f;
    return true;
}

static void set_nibble(uint8_t *p, int hi, int v) {
    *p = hi ? (uint8_t)((*p & 0x0F) | (v << 4)) : (uint8_t)((*p & 0xF0) | v);
}

static void set_bit(uint8_t *p, int bit, int v) {
    *p = (uint8_t)((*p & ~(1u << bit)) | ((unsigned)v << bit));
}

static inline __attribute__((always_inline)) void set_code(int type, uint8_t *x, int i, int code) {
    switch (type) {
    case IQF_TYPE_IQ4_NL:
        set_nibble(&x[2 + i % 16], i >= 16, code);
        return;
    case IQF_TYPE_IQ4_XS:
        set_nibble(&x[8 + 16 * (i / 32) + i % 16], (i % 32) >= 16, code);
        return;
    case IQF_TYPE_Q4_0: case IQF_TYPE_Q4_1: {
        uint8_t *qs = x + (type == IQF_TYPE_Q4_0 ? 2 : 4);
        set_nibble(&qs[i % 16], i >= 16, code);
        return;
    }
    case IQF_TYPE_Q5_0: case IQF_TYPE_Q5_1: {
        uint8_t *qh = x + (type == IQF_TYPE_Q5_0 ? 2 : 4), *qs = qh + 4;
        set_nibble(&qs[i % 16], i >= 16, code & 15);
        set_bit(&qh[i / 8], i % 8, code >> 4);
        return;
    }
    case IQF_TYPE_Q8_0:
        x[2 + i] = (uint8_t)(int8_t)code;
        return;
    case IQF_TYPE_Q2_K: {
        const int n = i / 128, r = i % 128, j = r / 32, h = (r % 32) / 16, l = r % 16;
        uint8_t *p = &x[16 + 32 * n + 16 * h + l];
        *p = (uint8_t)((*p & ~(3u << (2 * j))) | ((unsigned)code << (2 * j)));
        return;
    }
    case IQF_TYPE_Q3_K: {
        const int n = i / 128, r = i % 128, j = r / 32, h = (r % 32) / 16, l = r % 16;
        const int c4 = code + 4;
        uint8_t *p = &x[32 + 32 * n + 16 * h + l];
        *p = (uint8_t)((*p & ~(3u << (2 * j))) | ((unsigned)(c4 & 3) << (2 * j)));
        set_bit(&x[16 * h + l], 4 * n + j, c4 >> 2);
        return;
    }
    case IQF_TYPE_Q4_K: {
        const int c = i / 64, h = (i % 64) / 32, l = i % 32;
        set_nibble(&x[16 + 32 * c + l], h, code);
        return;
    }
    case IQF_TYPE_Q5_K: {
        const int c = i / 64, h = (i % 64) / 32, l = i % 32;
        set_nibble(&x[48 + 32 * c + l], h, code & 15);
        set_bit(&x[16 + l], 2 * c + h, code >> 4);
        return;
    }
    case IQF_TYPE_Q6_K: {
        const int n = i / 128, r = i % 128, g = r / 32, l = r % 32;
        const int c6 = code + 32;
        set_nibble(&x[64 * n + l + 32 * (g & 1)], g >> 1, c6 & 15);
        uint8_t *p = &x[128 + 32 * n + l];
        *p = (uint8_t)((*p & ~(3u << (2 * g))) | ((unsigned)(c6 >> 4) << (2 * g)));
        return;
    }
    default:
        return;
    }
}

void fb_block_set(int type, uint8_t *x, int i, int code) { set_code(type, x, i, code); }

/* One loop per type (the type's case of set_code inlined with a constant type): the same
 * writes in the same order as n calls of fb_block_set. */
#define FB_SET_MANY_CASE(T)                                                 \
    case T:                                                                 \
        for (int k = 0; k < n; k++) set_code(T, x, pos[k], code[k]);        \
        return;
/* Every weight of a 256-weight super-block set, in order (pos[k] == k): the code bytes packed
 * whole. The bytes are those n calls of fb_block_set write (only the code bits of each byte,
 * all of which are rewritten). q2_K..q6_K; false for another type. */
static bool set_all(int type, uint8_t *x, const int16_t *code) {
    switch (type) {
    case IQF_TYPE_Q2_K:
    case IQF_TYPE_Q3_K: {
        /* weight i = 128 n + 32 j + m: bits 2j of qs[32 n + m]; q3_K's third bit (of code + 4) is
         * bit i / 32 of hmask[m] */
        const int off = type == IQF_TYPE_Q2_K ? 16 : 32, add = type == IQF_TYPE_Q2_K ? 0 : 4;
        for (int m = 0; m < 32; m++) {
            unsigned hm = 0;
            for (int n = 0; n < 2; n++) {
                unsigned b = 0;
                for (int j = 0; j < 4; j++) {
                    const unsigned c = (unsigned)(code[128 * n + 32 * j + m] + add);
                    b |= (c & 3) << (2 * j);
                    hm |= (c >> 2 & 1) << (4 * n + j);
                }
                x[off + 32 * n + m] = (uint8_t)b;
            }
            if (type == IQF_TYPE_Q3_K) x[m] = (uint8_t)hm;
        }
        return true;
    }
    case IQF_TYPE_Q4_K:
        for (int c = 0; c < 4; c++)
            for (int l = 0; l < 32; l++)
                x[16 + 32 * c + l] = (uint8_t)((code[64 * c + l] & 15) | (code[64 * c + 32 + l] & 15) << 4);
        return true;
    case IQF_TYPE_Q5_K:
        for (int l = 0; l < 32; l++) {
            unsigned hb = 0;
            for (int c = 0; c < 4; c++) {
                x[48 + 32 * c + l] = (uint8_t)((code[64 * c + l] & 15) | (code[64 * c + 32 + l] & 15) << 4);
                hb |= (unsigned)(code[64 * c + l] >> 4 & 1) << (2 * c) | (unsigned)(code[64 * c + 32 + l] >> 4 & 1) << (2 * c + 1);
            }
            x[16 + l] = (uint8_t)hb;
        }
        return true;
    case IQF_TYPE_Q6_K:
        for (int n = 0; n < 2; n++)
            for (int l = 0; l < 32; l++) {
                int c6[4];
                for (int g = 0; g < 4; g++) c6[g] = code[128 * n + 32 * g + l] + 32;
                x[64 * n + l] = (uint8_t)((c6[0] & 15) | (c6[2] & 15) << 4);
                x[64 * n + 32 + l] = (uint8_t)((c6[1] & 15) | (c6[3] & 15) << 4);
                x[128 + 32 * n + l] = (uint8_t)((c6[0] >> 4 & 3) | (c6[1] >> 4 & 3) << 2 | (c6[2] >> 4 & 3) << 4 | (c6[3] >> 4 & 3) << 6);
            }
        return true;
    default:
        return false;
    }
}

/* Weight i's code as the block stores it (the inverse of set_code), q2_K..q6_K; -1000 for
 * another type. */
static int get_code(int type, const uint8_t *x, int i) {
    switch (type) {
    case IQF_TYPE_Q2_K: {
        const int n = i / 128, r = i % 128, j = r / 32, m = r % 32;
        return x[16 + 32 * n + m] >> (2 * j) & 3;
    }
    case IQF_TYPE_Q3_K: {
        const int n = i / 128, r = i % 128, j = r / 32, m = r % 32;
        return ((x[32 + 32 * n + m] >> (2 * j) & 3) | (x[m] >> (4 * n + j) & 1) << 2) - 4;
    }
    case IQF_TYPE_Q4_K: {
        const int c = i / 64, h = (i % 64) / 32, l = i % 32;
        return x[16 + 32 * c + l] >> (4 * h) & 15;
    }
    case IQF_TYPE_Q5_K: {
        const int c = i / 64, h = (i % 64) / 32, l = i % 32;
        return (x[48 + 32 * c + l] >> (4 * h) & 15) | (x[16 + l] >> (2 * c + h) & 1) << 4;
    }
    case IQF_TYPE_Q6_K: {
        const int n = i / 128, r = i % 128, g = r / 32, l = r % 32;
        return ((x[64 * n + l + 32 * (g & 1)] >> (4 * (g >> 1)) & 15) | (x[128 + 32 * n + l] >> (2 * g) & 3) << 4) - 32;
    }
    default:
        return -1000;
    }
}

void fb_block_set_many(int type, uint8_t *x, const int16_t *pos, const int16_t *code, int n) {
    if (n == 256 && pos[0] == 0 && pos[255] == 255) { /* ascending and distinct: every weight, in order */
        if (set_all(type, x, code)) return;
    }
    if (n >= 128 && get_code(type, x, 0) != -1000) {
        /* most of a K-quant super-block (the sweep leaves the first weights of a unit, which
         * received no error, as they are): the others' codes read back, the block packed whole */
        int16_t all[256];
        for (int i = 0, k = 0; i < 256; i++) all[i] = k < n && pos[k] == i ? code[k++] : (int16_t)get_code(type, x, i);
        set_all(type, x, all);
        return;
    }
    switch (type) {
    FB_SET_MANY_CASE(IQF_TYPE_Q4_0)
    FB_SET_MANY_CASE(IQF_TYPE_Q4_1)
    FB_SET_MANY_CASE(IQF_TYPE_Q5_0)
    FB_SET_MANY_CASE(IQF_TYPE_Q5_1)
    FB_SET_MANY_CASE(IQF_TYPE_Q8_0)
    FB_SET_MANY_CASE(IQF_TYPE_Q2_K)
    FB_SET_MANY_CASE(IQF_TYPE_Q3_K)
    FB_SET_MANY_CASE(IQF_TYPE_Q4_K)
    FB_SET_MANY_CASE(IQF_TYPE_Q5_K)
    FB_SET_MANY_CASE(IQF_TYPE_Q6_K)
    default:
        for (int k = 0; k < n; k++) set_code(type, x, pos[k], code[k]);
        return;
    }
}

int fb_block_nearest(const fb_block *f, int i, float t) {
    const int s = i / f->sub;
    const float a = f->a[s], b = f->b[s];
    if (f->table) {
        int best = 0;
        float be = INFINITY;
        for (int c = f->cmin; c <= f->cmax; c++) {
            const float e = fabsf(t - (a * (float)f->table[c] + b));
            if (e < be) { be = e; best = c; }
        }
        return best;
    }
    return fb_block_nearest_linear(f, s, t);
}

float fb_block_value(const fb_block *f, int i, int code) {
    const int s = i / f->sub;
    if (!f->table) return fb_block_value_linear(f, s, code);
    const float p = f->a[s] * (float)f->table[code];
    return f->no_b ? p : p + f->b[s];
}

/* x with its sign flipped when bit is 1: -x bit for bit (IEEE negation flips only the sign),
 * without a branch (sign patterns are data; a branch per weight mispredicts half the time). */
static inline float flip_sign(float x, unsigned bit) {
    uint32_t b;
    memcpy(&b, &x, 4);
    b ^= (bit & 1u) << 31;
    memcpy(&x, &b, 4);
    return x;
}

/* Sign pattern: bit k = weight k negative, even parity (ksigns_iq2xs: index = low 7 bits). */
static int choose_signs(const float *t, const float *imp, float *u) {
    int neg = 0, kmin = 0;
    float cmin = INFINITY;
    for (int k = 0; k < 8; k++) {
        neg |= (t[k] < 0) << k;
        const float c = (imp ? imp[k] : 1.f) * t[k] * t[k];
        kmin = c < cmin ? k : kmin;
        cmin = c < cmin ? c : cmin;
    }
    if (__builtin_popcount((unsigned)neg) & 1) neg ^= 1 << kmin;
    for (int k = 0; k < 8; k++) u[k] = flip_sign(t[k], (unsigned)neg >> k);
    return neg;
}

/* The re-rounding's nearest-point search, in two steps. grid_terms: the error of a point is
 * sum_k imp_k (u_k - db g_k)^2, one term per component, each (imp_k * d) * d with
 * d = u_k - db * g_k; A[k][j] is component k's term at level j. Returns the key (kbits bits per
 * component) of the levels with the first smallest term in each component, or -1 if a term is
 * NaN. This is the reference of fb_grid_lanes.h's kernels (the same A and key). */
static int grid_terms_ref(const grid_tab *g, const float *u, const float *imp, float db, float (*A)[16]) {
    bool nan = false;
    int key = 0;
    for (int k = 0; k < g->w; k++) {
        const float ik = imp ? imp[k] : 1.f;
        float m = INFINITY;
        for (int j = 0; j < g->nl; j++) {
            const float d = u[k] - db * g->lvl[j];
            A[k][j] = ik * d * d;
            if (isnan(A[k][j])) nan = true;
            m = A[k][j] < m ? A[k][j] : m;
        }
        int jm = 0;
        while (jm < g->nl - 1 && !(A[k][jm] == m)) jm++;
        key |= jm << g->kbits * k;
    }
    return nan ? -1 : key;
}

#ifdef IQF_ARCH_X86
#define VL_W 8
#define VL_TGT __attribute__((target("avx2,fma")))
#define VL_SFX(name) name##_avx2
#include "../codec/vec_lanes.h"
#include "fb_grid_lanes.h"
#undef VL_W
#undef VL_TGT
#undef VL_SFX

#define VL_W 16
#define VL_TGT __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq")))
#define VL_SFX(name) name##_avx512
#include "../codec/vec_lanes.h"
#include "fb_grid_lanes.h"
#undef VL_W
#undef VL_TGT
#undef VL_SFX
#endif

/* Point p's error from the terms: A[0][l0] + A[1][l1] + ... in that order. */
static inline float point_error(const grid_tab *g, const float (*A)[16], int p) {
    const uint32_t pk = g->pk[p];
    float e = A[0][pk & 15];
    for (int k = 1; k < g->w; k++) e += A[k][(pk >> (4 * k)) & 15];
    return e;
}

/* The point chosen for u / db: the point made of each component's nearest level when the grid
 * has it (the error is a sum of one term per component, so it is the nearest point); otherwise
 * the first smallest error among that key's neighbour list, the points the encoder itself
 * considers for it (ggml's lists: every point within the first two or three distances of the
 * key); every point when a term is NaN. The first smallest wins; point 0 (or the list's first)
 * if nothing is below INF. The same choice at every SIMD level (grid_terms and the list scan are
 * vectorised, fb_grid_lanes.h). */
static int nearest_point(const grid_tab *g, const float *u, const float *imp, float db, iqf_simd simd) {
    float A[8][16];
#ifdef IQF_ARCH_X86
    const int key = simd >= IQF_SIMD_AVX512 ? grid_terms_avx512(g, u, imp, db, A)
                    : simd >= IQF_SIMD_AVX2 ? grid_terms_avx2(g, u, imp, db, A)
                                            : grid_terms_ref(g, u, imp, db, A);
#else
    (void)simd;
    const int key = grid_terms_ref(g, u, imp, db, A);
#endif
    int n, best = 0;
    const uint16_t *list = NULL;
    if (key >= 0) {
        if (g->kmap[key] >= 0) return g->kmap[key];
        list = g->nb - g->kmap[key] - 1;
    }
    n = list ? list[0] : g->np;
    if (list) best = list[1];
#ifdef IQF_ARCH_X86
    if (list && n > 8 && simd >= IQF_SIMD_AVX2) /* short lists (IQ3's 5-7 points): the scalar loop is faster */
        return simd >= IQF_SIMD_AVX512 ? list_scan_avx512(g, (const float (*)[16])A, list + 1, n, best)
                                       : list_scan_avx2(g, (const float (*)[16])A, list + 1, n, best);
#endif
    float be = INFINITY;
    for (int j = 0; j < n; j++) {
        const int p = list ? list[1 + j] : j;
        const float e = point_error(g, (const float (*)[16])A, p);
        best = e < be ? p : best; /* selects, not branches: which point wins is data */
        be = e < be ? e : be;
    }
    return best;
}

void fb_block_group_values(int type, const fb_block *f, const uint8_t *x, int i0, float *v) {
    const float db = f->a[i0 / f->sub];
    const int ib = i0 / 32, l = (i0 % 32) / 8;
    int neg, g0, g1 = 0;
    const uint8_t *grid;
    bool w4 = false;
    uint32_t a;
    uint16_t q;
    switch (type) {
    case IQF_TYPE_IQ3_XXS:
        grid = &grid3[0][0], w4 = true;
        g0 = x[2 + 8 * ib + 2 * l], g1 = x[2 + 8 * ib + 2 * l + 1];
        memcpy(&a, x + 66 + 4 * ib, 4);
        neg = (int)((a >> (7 * l)) & 127);
        break;
    case IQF_TYPE_IQ3_S:
        grid = &grid3s[0][0], w4 = true;
        g0 = x[2 + 8 * ib + 2 * l] | ((x[66 + ib] >> (2 * l)) & 1) << 8;
        g1 = x[2 + 8 * ib + 2 * l + 1] | ((x[66 + ib] >> (2 * l + 1)) & 1) << 8;
        neg = x[74 + 4 * ib + l];
        break;
    case IQF_TYPE_IQ2_XS:
        grid = &grid2[0][0];
        memcpy(&q, x + 2 + 2 * (i0 / 8), 2);
        g0 = q & 511, neg = q >> 9;
        break;
    case IQF_TYPE_IQ2_XXS:
        grid = &grid2xxs[0][0];
        g0 = x[2 + 8 * ib + l];
        memcpy(&a, x + 2 + 8 * ib + 4, 4);
        neg = (int)((a >> (7 * l)) & 127);
        break;
    default: /* IQ2_S */
        grid = &grid2s[0][0];
        g0 = x[2 + 4 * ib + l] | ((x[66 + ib] >> (2 * l)) & 3) << 8;
        neg = x[34 + 4 * ib + l];
        break;
    }
    if (type == IQF_TYPE_IQ3_XXS || type == IQF_TYPE_IQ2_XS || type == IQF_TYPE_IQ2_XXS)
        neg |= (__builtin_popcount((unsigned)neg) & 1) << 7; /* even parity */
    for (int k = 0; k < 8; k++) {
        const float m = db * (float)(w4 ? (k < 4 ? grid[g0 * 4 + k] : grid[g1 * 4 + k - 4]) : grid[g0 * 8 + k]);
        v[k] = flip_sign(m, (unsigned)neg >> k);
    }
}

void fb_block_round_group(int type, const fb_block *f, uint8_t *x, int i0, const float *t, const float *imp, float *v) {
    if (!grid_type(type)) {
        const int c = fb_block_nearest(f, i0, t[0]);
        fb_block_set(type, x, i0, c);
        v[0] = fb_block_value(f, i0, c);
        return;
    }
    float u[8];
    int neg;
    if (type == IQF_TYPE_IQ3_S || type == IQF_TYPE_IQ2_S) { /* all 8 sign bits stored */
        neg = 0;
        for (int k = 0; k < 8; k++) {
            neg |= (t[k] < 0) << k;
            u[k] = fabsf(t[k]);
        }
    } else {
        neg = choose_signs(t, imp, u);
    }
    const float db = f->a[i0 / f->sub];
    const int ib = i0 / 32, l = (i0 % 32) / 8;
    float m[8];
    if (type == IQF_TYPE_IQ3_XXS || type == IQF_TYPE_IQ3_S) {
        const grid_tab *gtab = type == IQF_TYPE_IQ3_XXS ? &tab3 : &tab3s;
        const uint8_t *grid = gtab->grid;
        const int g0 = nearest_point(gtab, u, imp, db, f->simd);
        const int g1 = nearest_point(gtab, u + 4, imp ? imp + 4 : NULL, db, f->simd);
        for (int k = 0; k < 8; k++) m[k] = db * (float)(k < 4 ? grid[g0 * 4 + k] : grid[g1 * 4 + k - 4]);
        if (type == IQF_TYPE_IQ3_XXS) {
            x[2 + 8 * ib + 2 * l] = (uint8_t)g0;
            x[2 + 8 * ib + 2 * l + 1] = (uint8_t)g1;
            uint32_t a;
            memcpy(&a, x + 66 + 4 * ib, 4);
            a = (a & ~(127u << (7 * l))) | ((uint32_t)(neg & 127) << (7 * l));
            memcpy(x + 66 + 4 * ib, &a, 4);
        } else {
            const int k0 = 2 * l;
            x[2 + 8 * ib + k0] = (uint8_t)(g0 & 255);
            x[2 + 8 * ib + k0 + 1] = (uint8_t)(g1 & 255);
            uint8_t *qh = &x[66 + ib];
            *qh = (uint8_t)((*qh & ~(3u << k0)) | ((unsigned)(g0 >> 8) << k0) | ((unsigned)(g1 >> 8) << (k0 + 1)));
            x[74 + 4 * ib + l] = (uint8_t)neg;
        }
    } else {
        const grid_tab *gtab = type == IQF_TYPE_IQ2_XS ? &tab2 : type == IQF_TYPE_IQ2_XXS ? &tab2xxs : &tab2s;
        const uint8_t *grid = gtab->grid;
        const int g = nearest_point(gtab, u, imp, db, f->simd);
        for (int k = 0; k < 8; k++) m[k] = db * (float)grid[g * 8 + k];
        if (type == IQF_TYPE_IQ2_XS) {
            const uint16_t q = (uint16_t)(g | ((neg & 127) << 9));
            memcpy(x + 2 + 2 * (i0 / 8), &q, 2);
        } else if (type == IQF_TYPE_IQ2_XXS) {
            x[2 + 8 * ib + l] = (uint8_t)g;
            uint32_t a;
            memcpy(&a, x + 2 + 8 * ib + 4, 4);
            a = (a & ~(127u << (7 * l))) | ((uint32_t)(neg & 127) << (7 * l));
            memcpy(x + 2 + 8 * ib + 4, &a, 4);
        } else {
            x[2 + 4 * ib + l] = (uint8_t)(g & 255);
            x[34 + 4 * ib + l] = (uint8_t)neg;
            uint8_t *qh = &x[66 + ib];
            *qh = (uint8_t)((*qh & ~(3u << (2 * l))) | ((unsigned)(g >> 8) << (2 * l)));
        }
    }
    for (int k = 0; k < 8; k++) v[k] = flip_sign(m[k], (unsigned)neg >> k);
}
