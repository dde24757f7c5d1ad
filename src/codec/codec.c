/*
 * codec.c - the codec registry and the public quantize/dequantize entry points.
 *
 * Everything that can be wrong with a request is checked here, once, so that the per-family
 * encoders can assume well-formed input (finite values, whole blocks, imatrix when required).
 */
#include "codec.h"
#include "../util/error.h"

#include "../util/parallel.h"
#include "../util/traits.h"

#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <strings.h>

/* One row per family file: its codecs and its table-init hook (NULL: none can fail). */
static const struct family {
    const iqf_codec *codecs;
    bool (*tables_init)(int type);
} families[] = {
    { iqf_codecs_float, NULL },   { iqf_codecs_iq3, NULL },     { iqf_codecs_iq2, iqf_iq2_tables_init },
    { iqf_codecs_iq1, iqf_iq1_tables_init }, { iqf_codecs_iq4, NULL }, { iqf_codecs_kquants, NULL },
    { iqf_codecs_legacy, NULL },  { iqf_codecs_fp4, NULL },     { iqf_codecs_lowbit, NULL },
};

static const struct family *family_of(int type, const iqf_codec **codec) {
    if (!iqf_type_get(type)) return NULL;
    for (size_t f = 0; f < sizeof(families) / sizeof(families[0]); f++)
        for (const iqf_codec *c = families[f].codecs; c->type >= 0; c++)
            if (c->type == type) {
                *codec = c;
                return &families[f];
            }
    return NULL;
}

const iqf_codec *iqf_codec_get(int type) {
    const iqf_codec *c = NULL;
    family_of(type, &c);
    return c;
}

bool iqf_can_encode(int type) {
    const iqf_codec *c = iqf_codec_get(type);
    return c && c->quantize_row;
}

bool iqf_can_decode(int type) {
    const iqf_codec *c = iqf_codec_get(type);
    return c && c->dequantize_row;
}

bool iqf_requires_imatrix(int type) {
    const iqf_type_traits *tr = iqf_traits(type);
    return tr && tr->ggml_imatrix;
}


iqf_quantize_params iqf_quantize_default_params(void) {
    iqf_quantize_params p = { IQF_MODE_COMPAT, 0, IQF_SIMD_AUTO };
    return p;
}

const char *iqf_mode_name(int mode) {
    switch (mode) {
    case IQF_MODE_COMPAT: return "compat";
    case IQF_MODE_BEST: return "best";
    default: return NULL;
    }
}

int iqf_mode_from_name(const char *name) {
    if (!name) return -1;
    for (int m = 0; m < IQF_MODE_COUNT; m++)
        if (strcasecmp(iqf_mode_name(m), name) == 0) return m;
    return -1;
}

static iqf_simd resolve_simd(iqf_simd want) { return iqf_simd_resolve(want); }

/* Checks shared by quantize and dequantize: type known and supported, shape whole. */
static iqf_status check_shape(int type, int64_t nrows, int64_t ncols, bool encode,
                              const iqf_codec **out, char *err, size_t errlen) {
    const iqf_type_info *t = iqf_type_get(type);
    if (!t) return iqf_fail(err, errlen, IQF_E_UNKNOWN_TYPE, "unknown tensor type id %d", type);
    const iqf_codec *c = iqf_codec_get(type);
    if (!c || !(encode ? c->quantize_row != NULL : c->dequantize_row != NULL))
        return iqf_fail(err, errlen, IQF_E_UNSUPPORTED, "type %s cannot be %s by this build", t->name,
                    encode ? "encoded" : "decoded");
    if (nrows < 0 || ncols < 0)
        return iqf_fail(err, errlen, IQF_E_INVALID_ARG, "negative row count or row length");
    if (ncols % t->blck_size != 0)
        return iqf_fail(err, errlen, IQF_E_SHAPE,
                    "row length %lld is not a multiple of %lld (the %s block size)",
                    (long long)ncols, (long long)t->blck_size, t->name);
    *out = c;
    return IQF_OK;
}

/* A prefix of x (whole runs of 1024) known to be finite: the fixed-length loop without an early
 * exit vectorizes, so validation stays far cheaper than the fast encoders (q8_0, q4_1). One body,
 * compiled for the baseline and for AVX2 (twice the lanes; the same answer). */
#define SKIP_FINITE_BODY                                                                          \
    int64_t b = 0;                                                                                \
    for (; b + 1024 <= n; b += 1024) {                                                            \
        uint32_t bad = 0;                                                                         \
        for (int j = 0; j < 1024; j++) {                                                          \
            uint32_t u;                                                                           \
            memcpy(&u, &x[b + j], 4);                                                             \
            bad |= (~u & 0x7f800000u) == 0;                                                       \
        }                                                                                         \
        if (bad) break;                                                                           \
    }                                                                                             \
    return b;

static int64_t skip_finite_base(const float *x, int64_t n) { SKIP_FINITE_BODY }
#ifdef IQF_ARCH_X86
__attribute__((target("avx2"))) static int64_t skip_finite_avx2(const float *x, int64_t n) { SKIP_FINITE_BODY }
#endif

static int64_t skip_finite(iqf_simd simd, const float *x, int64_t n) {
#ifdef IQF_ARCH_X86
    if (IQF_SIMD_IS_X86(simd)) return skip_finite_avx2(x, n);
#endif
    (void)simd;
    return skip_finite_base(x, n);
}

/* Column of the first non-finite value of row x, or -1. */
static int64_t first_nonfinite(iqf_simd simd, const float *x, int64_t n) {
    for (int64_t j = skip_finite(simd, x, n); j < n; j++)
        if (!isfinite(x[j])) return j;
    return -1;
}

#ifndef NDEBUG
/* The contract codec.h states for quantize_row / dequantize_row (checked by assert in debug and
 * sanitizer builds): a known type with that codec, whole blocks, rows of iqf_row_size bytes. */
static inline bool row_contract_ok(const iqf_codec *c, int64_t ncols, size_t row_bytes) {
    const iqf_type_info *t = iqf_type_get(c->type);
    return t && iqf_codec_get(c->type) == c && ncols >= 0 && ncols % t->blck_size == 0 &&
           row_bytes == iqf_row_size(c->type, ncols);
}
#endif

/*
 * Rows are validated by the worker that encodes them, right before encoding, so the input is
 * read once (the fast encoders are memory-bound). The error names the FIRST bad row whatever the
 * thread count: a worker skips only rows after a bad row already found, so every row before the
 * final minimum has been checked.
 */
typedef struct qjob {
    const iqf_codec *c;
    iqf_qctx ctx;
    const float *src;
    uint8_t *dst;
    int64_t ncols;
    size_t row_bytes;
    const float *imatrix;
    atomic_int_fast64_t bad_row; /* smallest row with a non-finite value, or INT64_MAX */
} qjob;

static void quantize_range(void *arg, int64_t b, int64_t e, int tid) {
    (void)tid;
    qjob *j = arg;
    for (int64_t r = b; r < e; r++) {
        if (r > atomic_load(&j->bad_row)) return;
        const float *x = j->src + r * j->ncols;
        if (first_nonfinite(j->ctx.simd, x, j->ncols) >= 0) {
            int_fast64_t cur = atomic_load(&j->bad_row);
            while (r < cur && !atomic_compare_exchange_weak(&j->bad_row, &cur, r)) {}
            return;
        }
        /* codec.h: quantize_row never fails, the registry has checked everything */
        assert(row_contract_ok(j->c, j->ncols, j->row_bytes) && first_nonfinite(IQF_SIMD_SCALAR, x, j->ncols) < 0);
        j->c->quantize_row(&j->ctx, x, j->dst + (size_t)r * j->row_bytes, j->ncols, j->imatrix);
    }
}

iqf_status iqf_quantize(int type, const float *src, void *dst, int64_t nrows, int64_t ncols,
                        const float *imatrix, const iqf_quantize_params *params, char *err,
                        size_t errlen) {
    const iqf_codec *c;
    iqf_status st = check_shape(type, nrows, ncols, true, &c, err, errlen);
    if (st) return st;
    if (nrows > 0 && ncols > 0 && (!src || !dst))
        return iqf_fail(err, errlen, IQF_E_INVALID_ARG, "NULL source or destination");
    const char *name = iqf_type_get(type)->name;
    if (!imatrix && iqf_requires_imatrix(type))
        return iqf_fail(err, errlen, IQF_E_NEED_IMATRIX, "type %s needs an importance matrix", name);
    if (imatrix) {
        for (int64_t j = 0; j < ncols; j++) {
            if (!isfinite(imatrix[j]) || imatrix[j] < 0)
                return iqf_fail(err, errlen, IQF_E_NONFINITE,
                            "importance matrix column %lld is %g (must be finite and >= 0)",
                            (long long)j, (double)imatrix[j]);
        }
    }
    iqf_quantize_params p = params ? *params : iqf_quantize_default_params();
    if ((int)p.mode < 0 || p.mode >= IQF_MODE_COUNT)
        return iqf_fail(err, errlen, IQF_E_INVALID_ARG, "unknown encoder mode %d", (int)p.mode);
    if (c->init) c->init();
    /* the family's table-init hook: encoder tables that can fail to build */
    const iqf_codec *fc = NULL;
    const struct family *fam = family_of(type, &fc);
    if (fam && fam->tables_init && !fam->tables_init(type))
        return iqf_fail(err, errlen, IQF_E_NOMEM, "out of memory building the %s tables", name);
    qjob j = { c, { p.mode, resolve_simd(p.simd) }, src, dst, ncols, iqf_row_size(type, ncols),
               imatrix, INT64_MAX };
    /* Grain: about 64K weights per task keeps scheduling cheap and load balanced. */
    int64_t grain = ncols > 0 ? (65536 + ncols - 1) / ncols : 1;
    if (iqf_parallel_for(p.n_threads, nrows, grain, quantize_range, &j))
        return iqf_fail(err, errlen, IQF_E_NOMEM, "could not start worker threads");
    int64_t r = atomic_load(&j.bad_row);
    if (r != INT64_MAX) {
        const float *x = src + r * ncols;
        int64_t col = first_nonfinite(IQF_SIMD_SCALAR, x, ncols);
        return iqf_fail(err, errlen, IQF_E_NONFINITE, "row %lld, column %lld: value is %s", (long long)r,
                    (long long)col, isnan(x[col]) ? "NaN" : "Inf");
    }
    return IQF_OK;
}

typedef struct djob {
    const iqf_codec *c;
    const uint8_t *src;
    float *dst;
    int64_t ncols;
    size_t row_bytes;
} djob;

static void dequantize_range(void *arg, int64_t b, int64_t e, int tid) {
    (void)tid;
    const djob *j = arg;
    assert(row_contract_ok(j->c, j->ncols, j->row_bytes));
    for (int64_t r = b; r < e; r++)
        j->c->dequantize_row(j->src + (size_t)r * j->row_bytes, j->dst + r * j->ncols, j->ncols);
}

iqf_status iqf_dequantize(int type, const void *src, float *dst, int64_t nrows, int64_t ncols,
                          int n_threads, char *err, size_t errlen) {
    const iqf_codec *c;
    iqf_status st = check_shape(type, nrows, ncols, false, &c, err, errlen);
    if (st) return st;
    if (nrows > 0 && ncols > 0 && (!src || !dst))
        return iqf_fail(err, errlen, IQF_E_INVALID_ARG, "NULL source or destination");
    if (c->init) c->init();
    djob j = { c, src, dst, ncols, iqf_row_size(type, ncols) };
    int64_t grain = ncols > 0 ? (262144 + ncols - 1) / ncols : 1;
    if (iqf_parallel_for(n_threads, nrows, grain, dequantize_range, &j))
        return iqf_fail(err, errlen, IQF_E_NOMEM, "could not start worker threads");
    return IQF_OK;
}
