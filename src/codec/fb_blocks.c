/*
 * fb_blocks.c - per-weight access to the codes of the K-quant, legacy and IQ blocks under their
 * stored scales, for the in-block part of the error feedback (src/quantize/feedback.c).
 *
 * iqf_fb_block_parse reads a block's (sub-block) scales into value = a[s] * code + b[s], code in
 * [cmin, cmax]; iqf_fb_block_set writes one weight's code. The layouts are blocks.h's structs
 * (ggml's block_q4_0 ... block_iq2_s), the scales unpacked by the codecs' own helpers
 * (kq_common.h) and the grids the codecs' tables (iq3_grids.h, iqgrid.h); only the code bits are
 * rewritten, so the block stays valid for every decoder. The values a*code+b are only used to
 * steer the rounding; the feedback loop decodes the block with iqf_dequantize afterwards.
 */
#include "fb_blocks.h"
#include "blocks.h"
#include "codec.h"
#include "iq3_grids.h"
#include "iqgrid.h"
#include "kq_common.h"
#include "../util/traits.h"

#include <assert.h>
#include <math.h>
#include <pthread.h>
#include <string.h>

/* The grids as bytes per point: the IQ3 decoder tables (iq3_grids.h) and the IQ2 grids decoded
 * from their keys at levels 8, 25, 43 (iqgrid.h, as iq2.c's decoder). */
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

/* The 8-point IQ2 grid of `keys` as bytes (ggml-common.h's iq2xxs/iq2xs/iq2s_grid). */
static void iq2_grid_bytes(const uint16_t *keys, int size, uint8_t (*out)[8]) {
    static const int8_t lev[3] = { 8, 25, 43 };
    uint64_t tab[1024];
    iqf_iqgrid_decode_table(keys, size, lev, tab);
    for (int p = 0; p < size; p++)
        for (int k = 0; k < 8; k++) out[p][k] = (uint8_t)(tab[p] >> 8 * k);
}

static void grids_init(void) {
    for (int p = 0; p < 256; p++)
        for (int k = 0; k < 4; k++) grid3[p][k] = (uint8_t)(iqf_iq3xxs_grid[p] >> 8 * k);
    for (int p = 0; p < 512; p++)
        for (int k = 0; k < 4; k++) grid3s[p][k] = (uint8_t)(iqf_iq3s_grid[p] >> 8 * k);
    iq2_grid_bytes(iqf_iq2xs_keys, 512, grid2);
    iq2_grid_bytes(iqf_iq2xxs_keys, 256, grid2xxs);
    iq2_grid_bytes(iqf_iq2s_keys, 1024, grid2s);
    grids_ok = tab_init(&tab3) && tab_init(&tab2) && tab_init(&tab2xxs) && tab_init(&tab3s) && tab_init(&tab2s);
}

static float h2f(iqf_half h) { return iqf_fp16_to_fp32(h); }

static iqf_fb_kind fb_kind(int type) {
    const iqf_type_traits *tr = iqf_traits(type);
    return tr ? tr->fb : IQF_FB_NONE;
}

bool iqf_fb_block_supported(int type) {
    switch (fb_kind(type)) {
    case IQF_FB_SCALAR: return true;
    case IQF_FB_GRID:
        pthread_once(&grids_once, grids_init);
        return grids_ok;
    case IQF_FB_NONE: break;
    }
    return false;
}

static bool grid_type(int type) { return fb_kind(type) == IQF_FB_GRID; }

int iqf_fb_block_group(int type) { return grid_type(type) ? 8 : 1; }

/* A block's (sub-block) scale bytes of IQ2_XS / IQ2_S / IQ3_S: 4-bit field j of scales. */
static int nibble(const uint8_t *scales, int j) { return (scales[j / 2] >> 4 * (j % 2)) & 0xf; }

/* The 32-bit word ib of IQ2_XXS's and IQ3_XXS's 7-bit signs and 4-bit scale (LE, unaligned). */
static uint32_t aux32(const uint8_t *p) {
    uint32_t a;
    memcpy(&a, p, 4);
    return a;
}

/* Where each super-block's signs-and-scale words start: IQ3_XXS after the 64 grid bytes; IQ2_XXS
 * the second word of each sub-block's pair. */
static const uint8_t *iq3xxs_aux(const block_iq3_xxs *b, int ib) { return b->qs + QK_K / 4 + 4 * ib; }
static const uint8_t *iq2xxs_bytes(const block_iq2_xxs *b) { return (const uint8_t *)b->qs; }

static bool parse(int type, const uint8_t *x, iqf_fb_block *f) {
    memset(f, 0, sizeof *f);
    f->dec_exact = type != IQF_TYPE_Q4_0 && type != IQF_TYPE_Q5_0;
    switch (type) {
    case IQF_TYPE_Q4_0: {
        const float d = h2f(((const block_q4_0 *)x)->d);
        f->sub = 32; f->cmin = 0; f->cmax = 15; f->a[0] = d; f->b[0] = -8 * d;
        return true;
    }
    case IQF_TYPE_Q4_1: {
        const block_q4_1 *b = (const block_q4_1 *)x;
        f->sub = 32; f->cmin = 0; f->cmax = 15; f->a[0] = h2f(b->d); f->b[0] = h2f(b->m);
        return true;
    }
    case IQF_TYPE_Q5_0: {
        const float d = h2f(((const block_q5_0 *)x)->d);
        f->sub = 32; f->cmin = 0; f->cmax = 31; f->a[0] = d; f->b[0] = -16 * d;
        return true;
    }
    case IQF_TYPE_Q5_1: {
        const block_q5_1 *b = (const block_q5_1 *)x;
        f->sub = 32; f->cmin = 0; f->cmax = 31; f->a[0] = h2f(b->d); f->b[0] = h2f(b->m);
        return true;
    }
    case IQF_TYPE_Q8_0: {
        f->sub = 32; f->cmin = -127; f->cmax = 127; f->a[0] = h2f(((const block_q8_0 *)x)->d); f->no_b = true;
        return true;
    }
    case IQF_TYPE_Q2_K: {
        const block_q2_K *b = (const block_q2_K *)x;
        const float d = h2f(b->d), dm = h2f(b->dmin);
        f->sub = 16; f->cmin = 0; f->cmax = 3;
        for (int s = 0; s < 16; s++) {
            f->a[s] = d * (float)(b->scales[s] & 0xF);
            f->b[s] = -(dm * (float)(b->scales[s] >> 4));
        }
        return true;
    }
    case IQF_TYPE_Q3_K: {
        const block_q3_K *b = (const block_q3_K *)x;
        const float d = h2f(b->d);
        f->sub = 16; f->cmin = -4; f->cmax = 3;
        for (int s = 0; s < 16; s++) f->a[s] = d * (float)kq_q3_K_scale(b->scales, s);
        f->no_b = true;
        return true;
    }
    case IQF_TYPE_Q4_K: case IQF_TYPE_Q5_K: { /* the same d, dmin, scales[12] first */
        const block_q4_K *b = (const block_q4_K *)x;
        const float d = h2f(b->d), dm = h2f(b->dmin);
        f->sub = 32; f->cmin = 0; f->cmax = type == IQF_TYPE_Q4_K ? 15 : 31;
        for (int s = 0; s < 8; s++) {
            uint8_t sc, m;
            kq_get_scale_min_k4(s, b->scales, &sc, &m);
            f->a[s] = d * (float)sc;
            f->b[s] = -(dm * (float)m);
        }
        return true;
    }
    case IQF_TYPE_IQ4_NL: {
        f->sub = 32; f->cmin = 0; f->cmax = 15; f->a[0] = h2f(((const block_iq4_nl *)x)->d); f->table = iqf_kvalues_iq4nl;
        return true;
    }
    case IQF_TYPE_IQ4_XS: {
        const block_iq4_xs *b = (const block_iq4_xs *)x;
        const float d = h2f(b->d);
        f->sub = 32; f->cmin = 0; f->cmax = 15; f->table = iqf_kvalues_iq4nl;
        for (int ib = 0; ib < 8; ib++) {
            const int ls = nibble(b->scales_l, ib) | (((b->scales_h >> 2 * ib) & 3) << 4);
            f->a[ib] = d * (float)(ls - 32);
        }
        return true;
    }
    case IQF_TYPE_IQ3_XXS: {
        const block_iq3_xxs *b = (const block_iq3_xxs *)x;
        const float d = h2f(b->d);
        f->sub = 32;
        for (int ib = 0; ib < 8; ib++) f->a[ib] = d * (0.5f + (float)(aux32(iq3xxs_aux(b, ib)) >> 28)) * 0.5f;
        return true;
    }
    case IQF_TYPE_IQ2_XXS: {
        const block_iq2_xxs *b = (const block_iq2_xxs *)x;
        const float d = h2f(b->d);
        f->sub = 32;
        for (int ib = 0; ib < 8; ib++) f->a[ib] = d * (0.5f + (float)(aux32(iq2xxs_bytes(b) + 8 * ib + 4) >> 28)) * 0.25f;
        return true;
    }
    case IQF_TYPE_IQ3_S: {
        const block_iq3_s *b = (const block_iq3_s *)x;
        const float d = h2f(b->d);
        f->sub = 32;
        for (int ib = 0; ib < 8; ib++) f->a[ib] = d * (float)(1 + 2 * nibble(b->scales, ib));
        return true;
    }
    case IQF_TYPE_IQ2_S: {
        const block_iq2_s *b = (const block_iq2_s *)x;
        const float d = h2f(b->d);
        f->sub = 16;
        for (int s = 0; s < 16; s++) f->a[s] = d * (0.5f + (float)nibble(b->scales, s)) * 0.25f;
        return true;
    }
    case IQF_TYPE_IQ2_XS: {
        const block_iq2_xs *b = (const block_iq2_xs *)x;
        const float d = h2f(b->d);
        f->sub = 16;
        for (int s = 0; s < 16; s++) f->a[s] = d * (0.5f + (float)nibble(b->scales, s)) * 0.25f;
        return true;
    }
    case IQF_TYPE_Q6_K: {
        const block_q6_K *b = (const block_q6_K *)x;
        const float d = h2f(b->d);
        f->sub = 16; f->cmin = -32; f->cmax = 31;
        for (int s = 0; s < 16; s++) f->a[s] = d * (float)b->scales[s];
        f->no_b = true;
        return true;
    }
    default:
        return false;
    }
}

bool iqf_fb_block_parse(int type, const uint8_t *x, iqf_fb_block *f) {
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
        set_nibble(&((block_iq4_nl *)x)->qs[i % 16], i >= 16, code);
        return;
    case IQF_TYPE_IQ4_XS:
        set_nibble(&((block_iq4_xs *)x)->qs[16 * (i / 32) + i % 16], (i % 32) >= 16, code);
        return;
    case IQF_TYPE_Q4_0: case IQF_TYPE_Q4_1: {
        uint8_t *qs = type == IQF_TYPE_Q4_0 ? ((block_q4_0 *)x)->qs : ((block_q4_1 *)x)->qs;
        set_nibble(&qs[i % 16], i >= 16, code);
        return;
    }
    case IQF_TYPE_Q5_0: case IQF_TYPE_Q5_1: {
        uint8_t *qh = type == IQF_TYPE_Q5_0 ? ((block_q5_0 *)x)->qh : ((block_q5_1 *)x)->qh;
        uint8_t *qs = type == IQF_TYPE_Q5_0 ? ((block_q5_0 *)x)->qs : ((block_q5_1 *)x)->qs;
        set_nibble(&qs[i % 16], i >= 16, code & 15);
        set_bit(&qh[i / 8], i % 8, code >> 4);
        return;
    }
    case IQF_TYPE_Q8_0:
        ((block_q8_0 *)x)->qs[i] = (int8_t)code;
        return;
    case IQF_TYPE_Q2_K: {
        const int n = i / 128, r = i % 128, j = r / 32, h = (r % 32) / 16, l = r % 16;
        uint8_t *p = &((block_q2_K *)x)->qs[32 * n + 16 * h + l];
        *p = (uint8_t)((*p & ~(3u << (2 * j))) | ((unsigned)code << (2 * j)));
        return;
    }
    case IQF_TYPE_Q3_K: {
        block_q3_K *b = (block_q3_K *)x;
        const int n = i / 128, r = i % 128, j = r / 32, h = (r % 32) / 16, l = r % 16;
        const int c4 = code + 4;
        uint8_t *p = &b->qs[32 * n + 16 * h + l];
        *p = (uint8_t)((*p & ~(3u << (2 * j))) | ((unsigned)(c4 & 3) << (2 * j)));
        set_bit(&b->hmask[16 * h + l], 4 * n + j, c4 >> 2);
        return;
    }
    case IQF_TYPE_Q4_K: {
        const int c = i / 64, h = (i % 64) / 32, l = i % 32;
        set_nibble(&((block_q4_K *)x)->qs[32 * c + l], h, code);
        return;
    }
    case IQF_TYPE_Q5_K: {
        block_q5_K *b = (block_q5_K *)x;
        const int c = i / 64, h = (i % 64) / 32, l = i % 32;
        set_nibble(&b->qs[32 * c + l], h, code & 15);
        set_bit(&b->qh[l], 2 * c + h, code >> 4);
        return;
    }
    case IQF_TYPE_Q6_K: {
        block_q6_K *b = (block_q6_K *)x;
        const int n = i / 128, r = i % 128, g = r / 32, l = r % 32;
        const int c6 = code + 32;
        set_nibble(&b->ql[64 * n + l + 32 * (g & 1)], g >> 1, c6 & 15);
        uint8_t *p = &b->qh[32 * n + l];
        *p = (uint8_t)((*p & ~(3u << (2 * g))) | ((unsigned)(c6 >> 4) << (2 * g)));
        return;
    }
    default:
        return;
    }
}

void iqf_fb_block_set(int type, uint8_t *x, int i, int code) { set_code(type, x, i, code); }

/* One loop per type (the type's case of set_code inlined with a constant type): the same
 * writes in the same order as n calls of iqf_fb_block_set. */
#define FB_SET_MANY_CASE(T)                                                 \
    case T:                                                                 \
        for (int k = 0; k < n; k++) set_code(T, x, pos[k], code[k]);        \
        return;
/* Every weight of a 256-weight super-block set, in order (pos[k] == k): the code bytes packed
 * whole. The bytes are those n calls of iqf_fb_block_set write (only the code bits of each byte,
 * all of which are rewritten). q2_K..q6_K; false for another type. */
static bool set_all(int type, uint8_t *x, const int16_t *code) {
    switch (type) {
    case IQF_TYPE_Q2_K:
    case IQF_TYPE_Q3_K: {
        /* weight i = 128 n + 32 j + m: bits 2j of qs[32 n + m]; q3_K's third bit (of code + 4) is
         * bit i / 32 of hmask[m] */
        uint8_t *qs = type == IQF_TYPE_Q2_K ? ((block_q2_K *)x)->qs : ((block_q3_K *)x)->qs;
        const int add = type == IQF_TYPE_Q2_K ? 0 : 4;
        for (int m = 0; m < 32; m++) {
            unsigned hm = 0;
            for (int n = 0; n < 2; n++) {
                unsigned b = 0;
                for (int j = 0; j < 4; j++) {
                    const unsigned c = (unsigned)(code[128 * n + 32 * j + m] + add);
                    b |= (c & 3) << (2 * j);
                    hm |= (c >> 2 & 1) << (4 * n + j);
                }
                qs[32 * n + m] = (uint8_t)b;
            }
            if (type == IQF_TYPE_Q3_K) ((block_q3_K *)x)->hmask[m] = (uint8_t)hm;
        }
        return true;
    }
    case IQF_TYPE_Q4_K: {
        uint8_t *qs = ((block_q4_K *)x)->qs;
        for (int c = 0; c < 4; c++)
            for (int l = 0; l < 32; l++)
                qs[32 * c + l] = (uint8_t)((code[64 * c + l] & 15) | (code[64 * c + 32 + l] & 15) << 4);
        return true;
    }
    case IQF_TYPE_Q5_K: {
        block_q5_K *b = (block_q5_K *)x;
        for (int l = 0; l < 32; l++) {
            unsigned hb = 0;
            for (int c = 0; c < 4; c++) {
                b->qs[32 * c + l] = (uint8_t)((code[64 * c + l] & 15) | (code[64 * c + 32 + l] & 15) << 4);
                hb |= (unsigned)(code[64 * c + l] >> 4 & 1) << (2 * c) | (unsigned)(code[64 * c + 32 + l] >> 4 & 1) << (2 * c + 1);
            }
            b->qh[l] = (uint8_t)hb;
        }
        return true;
    }
    case IQF_TYPE_Q6_K: {
        block_q6_K *b = (block_q6_K *)x;
        for (int n = 0; n < 2; n++)
            for (int l = 0; l < 32; l++) {
                int c6[4];
                for (int g = 0; g < 4; g++) c6[g] = code[128 * n + 32 * g + l] + 32;
                b->ql[64 * n + l] = (uint8_t)((c6[0] & 15) | (c6[2] & 15) << 4);
                b->ql[64 * n + 32 + l] = (uint8_t)((c6[1] & 15) | (c6[3] & 15) << 4);
                b->qh[32 * n + l] = (uint8_t)((c6[0] >> 4 & 3) | (c6[1] >> 4 & 3) << 2 | (c6[2] >> 4 & 3) << 4 | (c6[3] >> 4 & 3) << 6);
            }
        return true;
    }
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
        return ((const block_q2_K *)x)->qs[32 * n + m] >> (2 * j) & 3;
    }
    case IQF_TYPE_Q3_K: {
        const block_q3_K *b = (const block_q3_K *)x;
        const int n = i / 128, r = i % 128, j = r / 32, m = r % 32;
        return ((b->qs[32 * n + m] >> (2 * j) & 3) | (b->hmask[m] >> (4 * n + j) & 1) << 2) - 4;
    }
    case IQF_TYPE_Q4_K: {
        const int c = i / 64, h = (i % 64) / 32, l = i % 32;
        return ((const block_q4_K *)x)->qs[32 * c + l] >> (4 * h) & 15;
    }
    case IQF_TYPE_Q5_K: {
        const block_q5_K *b = (const block_q5_K *)x;
        const int c = i / 64, h = (i % 64) / 32, l = i % 32;
        return (b->qs[32 * c + l] >> (4 * h) & 15) | (b->qh[l] >> (2 * c + h) & 1) << 4;
    }
    case IQF_TYPE_Q6_K: {
        const block_q6_K *b = (const block_q6_K *)x;
        const int n = i / 128, r = i % 128, g = r / 32, l = r % 32;
        return ((b->ql[64 * n + l + 32 * (g & 1)] >> (4 * (g >> 1)) & 15) | (b->qh[32 * n + l] >> (2 * g) & 3) << 4) - 32;
    }
    default:
        return -1000;
    }
}

#ifndef NDEBUG
/* fb_blocks.h's contract of iqf_fb_block_set_many: strictly ascending positions in the block. */
static inline bool positions_ok(int type, const int16_t *pos, int n) {
    const int64_t B = iqf_type_get(type)->blck_size;
    for (int k = 0; k < n; k++)
        if (pos[k] < 0 || pos[k] >= B || (k > 0 && pos[k] <= pos[k - 1])) return false;
    return true;
}
#endif

void iqf_fb_block_set_many(int type, uint8_t *x, const int16_t *pos, const int16_t *code, int n) {
    assert(n >= 0 && positions_ok(type, pos, n));
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

int iqf_fb_block_nearest(const iqf_fb_block *f, int i, float t) {
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
    return iqf_fb_block_nearest_linear(f, s, t);
}

float iqf_fb_block_value(const iqf_fb_block *f, int i, int code) {
    const int s = i / f->sub;
    if (!f->table) return iqf_fb_block_value_linear(f, s, code);
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

/* the NEON level: the plain width at 8 lanes (lanes_neon.h) */
#define VL_KERNELS "fb_grid_lanes.h"
#include "lanes_neon.h"
#ifdef IQF_ARCH_X86
#define VL_W 8
#define VL_TGT __attribute__((target("avx2,fma")))
#define VL_SFX(name) name##_avx2
#include "vec_lanes.h"
#include "fb_grid_lanes.h"
#undef VL_W
#undef VL_TGT
#undef VL_SFX

#define VL_W 16
#define VL_TGT __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq")))
#define VL_SFX(name) name##_avx512
#include "vec_lanes.h"
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
    const int key = simd == IQF_SIMD_AVX512 ? grid_terms_avx512(g, u, imp, db, A)
                    : IQF_SIMD_IS_X86(simd) ? grid_terms_avx2(g, u, imp, db, A)
                    : simd == IQF_SIMD_NEON ? grid_terms_neon(g, u, imp, db, A)
                                            : grid_terms_ref(g, u, imp, db, A);
#else
    const int key = simd == IQF_SIMD_NEON ? grid_terms_neon(g, u, imp, db, A) : grid_terms_ref(g, u, imp, db, A);
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
    if (list && n > 8 && IQF_SIMD_IS_X86(simd)) /* short lists (IQ3's 5-7 points): the scalar loop is faster */
        return simd == IQF_SIMD_AVX512 ? list_scan_avx512(g, (const float (*)[16])A, list + 1, n, best)
                                       : list_scan_avx2(g, (const float (*)[16])A, list + 1, n, best);
#endif
    if (list && n > 8 && simd == IQF_SIMD_NEON)
        return list_scan_neon(g, (const float (*)[16])A, list + 1, n, best);
    float be = INFINITY;
    for (int j = 0; j < n; j++) {
        const int p = list ? list[1 + j] : j;
        const float e = point_error(g, (const float (*)[16])A, p);
        best = e < be ? p : best; /* selects, not branches: which point wins is data */
        be = e < be ? e : be;
    }
    return best;
}

/* Group l's 7 stored sign bits in the little-endian word at p (IQ3_XXS, IQ2_XXS). */
static void set_signs7(uint8_t *p, int l, int neg) {
    uint32_t a = aux32(p);
    a = (a & ~(127u << (7 * l))) | ((uint32_t)(neg & 127) << (7 * l));
    memcpy(p, &a, 4);
}

void iqf_fb_block_group_values(int type, const iqf_fb_block *f, const uint8_t *x, int i0, float *v) {
    assert(i0 >= 0 && i0 % 8 == 0 && i0 < 256 && grid_type(type));
    const float db = f->a[i0 / f->sub];
    const int ib = i0 / 32, l = (i0 % 32) / 8;
    int neg, g0, g1 = 0;
    const uint8_t *grid;
    bool w4 = false;
    switch (type) {
    case IQF_TYPE_IQ3_XXS: {
        const block_iq3_xxs *b = (const block_iq3_xxs *)x;
        grid = &grid3[0][0], w4 = true;
        g0 = b->qs[8 * ib + 2 * l], g1 = b->qs[8 * ib + 2 * l + 1];
        neg = (int)((aux32(iq3xxs_aux(b, ib)) >> (7 * l)) & 127);
        break;
    }
    case IQF_TYPE_IQ3_S: {
        const block_iq3_s *b = (const block_iq3_s *)x;
        grid = &grid3s[0][0], w4 = true;
        g0 = b->qs[8 * ib + 2 * l] | ((b->qh[ib] >> (2 * l)) & 1) << 8;
        g1 = b->qs[8 * ib + 2 * l + 1] | ((b->qh[ib] >> (2 * l + 1)) & 1) << 8;
        neg = b->signs[4 * ib + l];
        break;
    }
    case IQF_TYPE_IQ2_XS: {
        const uint16_t q = ((const block_iq2_xs *)x)->qs[i0 / 8];
        grid = &grid2[0][0];
        g0 = q & 511, neg = q >> 9;
        break;
    }
    case IQF_TYPE_IQ2_XXS: {
        const uint8_t *q = iq2xxs_bytes((const block_iq2_xxs *)x);
        grid = &grid2xxs[0][0];
        g0 = q[8 * ib + l];
        neg = (int)((aux32(q + 8 * ib + 4) >> (7 * l)) & 127);
        break;
    }
    default: { /* IQ2_S: the 32 grid bytes, then the 32 sign bytes */
        const block_iq2_s *b = (const block_iq2_s *)x;
        grid = &grid2s[0][0];
        g0 = b->qs[4 * ib + l] | ((b->qh[ib] >> (2 * l)) & 3) << 8;
        neg = b->qs[QK_K / 8 + 4 * ib + l];
        break;
    }
    }
    if (type == IQF_TYPE_IQ3_XXS || type == IQF_TYPE_IQ2_XS || type == IQF_TYPE_IQ2_XXS)
        neg = iqf_iq3_ksigns[neg]; /* the 8th bit by even parity */
    for (int k = 0; k < 8; k++) {
        const float m = db * (float)(w4 ? (k < 4 ? grid[g0 * 4 + k] : grid[g1 * 4 + k - 4]) : grid[g0 * 8 + k]);
        v[k] = flip_sign(m, (unsigned)neg >> k);
    }
}

void iqf_fb_block_round_group(int type, const iqf_fb_block *f, uint8_t *x, int i0, const float *t, const float *imp, float *v) {
    assert(i0 >= 0 && i0 % iqf_fb_block_group(type) == 0 && i0 < iqf_type_get(type)->blck_size);
    if (!grid_type(type)) {
        const int c = iqf_fb_block_nearest(f, i0, t[0]);
        iqf_fb_block_set(type, x, i0, c);
        v[0] = iqf_fb_block_value(f, i0, c);
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
            block_iq3_xxs *b = (block_iq3_xxs *)x;
            b->qs[8 * ib + 2 * l] = (uint8_t)g0;
            b->qs[8 * ib + 2 * l + 1] = (uint8_t)g1;
            set_signs7(b->qs + QK_K / 4 + 4 * ib, l, neg);
        } else {
            block_iq3_s *b = (block_iq3_s *)x;
            const int k0 = 2 * l;
            b->qs[8 * ib + k0] = (uint8_t)(g0 & 255);
            b->qs[8 * ib + k0 + 1] = (uint8_t)(g1 & 255);
            uint8_t *qh = &b->qh[ib];
            *qh = (uint8_t)((*qh & ~(3u << k0)) | ((unsigned)(g0 >> 8) << k0) | ((unsigned)(g1 >> 8) << (k0 + 1)));
            b->signs[4 * ib + l] = (uint8_t)neg;
        }
    } else {
        const grid_tab *gtab = type == IQF_TYPE_IQ2_XS ? &tab2 : type == IQF_TYPE_IQ2_XXS ? &tab2xxs : &tab2s;
        const uint8_t *grid = gtab->grid;
        const int g = nearest_point(gtab, u, imp, db, f->simd);
        for (int k = 0; k < 8; k++) m[k] = db * (float)grid[g * 8 + k];
        if (type == IQF_TYPE_IQ2_XS) {
            ((block_iq2_xs *)x)->qs[i0 / 8] = (uint16_t)(g | ((neg & 127) << 9));
        } else if (type == IQF_TYPE_IQ2_XXS) {
            uint8_t *q = (uint8_t *)((block_iq2_xxs *)x)->qs;
            q[8 * ib + l] = (uint8_t)g;
            set_signs7(q + 8 * ib + 4, l, neg);
        } else {
            block_iq2_s *b = (block_iq2_s *)x;
            b->qs[4 * ib + l] = (uint8_t)(g & 255);
            b->qs[QK_K / 8 + 4 * ib + l] = (uint8_t)neg;
            uint8_t *qh = &b->qh[ib];
            *qh = (uint8_t)((*qh & ~(3u << (2 * l))) | ((unsigned)(g >> 8) << (2 * l)));
        }
    }
    for (int k = 0; k < 8; k++) v[k] = flip_sign(m[k], (unsigned)neg >> k);
}
