/*
 * ladder.h - the quality ladder's bookkeeping: one rung per (file type, encoder mode), the alarm
 * that judges a ladder, and its reports (table, JSON, CSV, SVG). Pure functions over measured
 * numbers; `iqforge ladder` (tools/cmd_ladder.c) does the quantizing and measuring.
 *
 * The alarm's contract (docs/LADDER.md states it for users):
 *  - family rule: rungs A and B of the same format family (IQ types; K-quant mixes; legacy;
 *    FP4; ternary/binary low-bit) and
 *    the same mode, A larger than B (file bytes), A's mean KLD worse than B's by more than
 *    z * sqrt(errA^2 + errB^2) (the two measurements' combined error) AND by more than the
 *    relative margin (KLD_A > KLD_B * (1 + margin));
 *  - cross-family rule: A larger than B, same mode, different families, KLD_A > factor * KLD_B
 *    (and the statistical test);
 *  - ppl rule: PPL(Q)/PPL(base) above the --max-ppl-ratio given for A's type (or for all);
 *  - smoke rule: the greedy continuation of --prompt does not contain --expect;
 *  - a rung whose measurement failed (quantize or evaluation error) also alarms.
 * Every inversion that is not an alarm is kept as a note.
 */
#ifndef IQF_LADDER_H
#define IQF_LADDER_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

typedef enum ladder_family {
    LADDER_FAMILY_IQ = 0,
    LADDER_FAMILY_K = 1,
    LADDER_FAMILY_LEGACY = 2,
    LADDER_FAMILY_FLOAT = 3,
    LADDER_FAMILY_FP4 = 4,    /* mxfp4, nvfp4 */
    LADDER_FAMILY_LOWBIT = 5, /* ternary and binary: tq1_0, tq2_0, q1_0, q2_0 */
    LADDER_FAMILY_OTHER = 6,  /* not a weight type (or unknown) */
    LADDER_FAMILY_COUNT = 7,
} ladder_family;

/* The family of a llama file type (IQF_FTYPE_*), or of a tensor type (IQF_TYPE_*). */
ladder_family iqf_ladder_family_of_ftype(int ftype);
ladder_family iqf_ladder_family_of_type(int type);
const char *iqf_ladder_family_name(ladder_family f);

/* The ladder's series (ladder_rung.mode): the encoder modes (IQF_MODE_COMPAT, IQF_MODE_BEST),
 * then two series of iqforge's full pipeline on the same file types:
 *  - feedback: best mode with error feedback from a captured Hessian (quantize --hessian);
 *  - full: per-tensor types chosen for the compat rung's file bytes (--target-size) with best
 *    mode and error feedback: what iqforge makes at llama-quantize's size. */
#define LADDER_MODE_FEEDBACK IQF_MODE_COUNT
#define LADDER_MODE_FULL (IQF_MODE_COUNT + 1)
#define LADDER_N_MODES (IQF_MODE_COUNT + 2)
/* "compat", "best", "feedback", "full" ("?" for another); and back (-1: unknown). */
const char *iqf_ladder_mode_str(int mode);
int iqf_ladder_mode_from_name(const char *name);

typedef struct ladder_rung {
    char name[16];          /* "IQ3_XXS" (a file type) or "iq3_xxs" (a simulated tensor type) */
    int ftype;              /* IQF_FTYPE_*, or -1 for a simulated rung */
    int ttype;              /* IQF_TYPE_* of a simulated rung, else -1 */
    int mode;               /* IQF_MODE_* or LADDER_MODE_* (a series) */
    ladder_family family;
    bool done;              /* measured (or loaded from the cache) */
    bool failed;            /* quantize or evaluation failed: `error` says why */
    char error[256];
    /* measured */
    uint64_t file_bytes;    /* whole file (simulated: the tensor bytes the types would take) */
    double bpw;             /* 8 * file_bytes / weights */
    double ppl, ppl_err;
    double ppl_ratio, ppl_ratio_err;
    double kld, kld_err, kld_p99, kld_max;
    double same_top, same_top_err;   /* fraction */
    double quantize_s, eval_s;
    int n_chunks;
    bool smoke_run, smoke_ok;
    char smoke_text[256];   /* the continuation (truncated) */
    bool cached;            /* taken from DIR, not recomputed */
    /* judged */
    bool alarm;
} ladder_rung;

typedef struct ladder_limits {
    double z;               /* statistical test: z * combined error (default 2) */
    double margin;          /* family rule: relative margin (default 0.10) */
    double cross_factor;    /* cross-family rule: factor (default 2.0) */
    double max_ppl_ratio;   /* for every type; <= 0: none */
    int n_ppl_limits;       /* per-type limits, overriding max_ppl_ratio */
    int ppl_limit_ftype[64];
    double ppl_limit[64];
} ladder_limits;

ladder_limits iqf_ladder_default_limits(void);

typedef enum ladder_finding_kind {
    LADDER_NOTE_INVERSION = 0,     /* healthy-looking inversion, shown as a note */
    LADDER_ALARM_FAMILY = 1,
    LADDER_ALARM_CROSS = 2,
    LADDER_ALARM_PPL = 3,
    LADDER_ALARM_SMOKE = 4,
    LADDER_ALARM_FAILED = 5,
    LADDER_NOTE_MODE = 6,          /* a non-compat mode worse than compat on the same type */
} ladder_finding_kind;

typedef struct ladder_finding {
    ladder_finding_kind kind;
    int a, b;               /* rung indices: a is the worse / failing rung; b the other or -1 */
    char text[320];
} ladder_finding;

/* Judges the rungs (done ones only). Writes up to max findings (alarms first in rung order,
 * then notes), sets rungs[i].alarm, returns the number of findings written; *n_alarms gets the
 * alarm count (over all findings, also those beyond max). */
int iqf_ladder_judge(ladder_rung *rungs, int n, const ladder_limits *lim, ladder_finding *out,
                 int max, int *n_alarms);

/* Inputs and versions recorded with the results. */
typedef struct ladder_inputs {
    const char *model, *eval_text, *imatrix, *calibration;
    uint64_t model_bytes, n_weights;
    int n_ctx, n_chunks, n_threads;
    bool simulate;
    const char *prompt, *expect;
    double base_ppl, base_ppl_err;
    const char *key;        /* the inputs' hash, as used for the cache */
} ladder_inputs;

/* Reports. Each returns 0 or -1 (I/O error: errno set). The table goes to an open stream; the
 * files are written through the atomic output helper (whole or not at all) by the caller-given
 * path. */
void iqf_ladder_print_table(FILE *f, const ladder_rung *r, int n, const ladder_finding *fd, int nf);
int iqf_ladder_write_json(const char *path, const ladder_inputs *in, const ladder_rung *r, int n,
                      const ladder_finding *fd, int nf, int n_alarms, char *err, size_t errlen);
int iqf_ladder_write_csv(const char *path, const ladder_rung *r, int n, char *err, size_t errlen);
int iqf_ladder_write_svg(const char *path, const ladder_inputs *in, const ladder_rung *r, int n,
                     char *err, size_t errlen);

/* The cache record of one rung: a small "key value" text file. iqf_ladder_rung_save writes it
 * atomically; iqf_ladder_rung_load reads it back and returns true only if it parses completely and
 * its recorded key, name and mode equal r's (r->name, r->mode are set by the caller) (anything else: false, treated as absent;
 * the file is input from disk and is parsed as hostile). */
int iqf_ladder_rung_save(const char *path, const char *key, const ladder_rung *r, char *err, size_t errlen);
bool iqf_ladder_rung_load(const char *path, const char *key, ladder_rung *r);

/* A stock llama-perplexity's output (llama_output.c), for `ladder --evaluator llama-perplexity`:
 * iqf_ladder_parse_llama_base reads the base run's "Final estimate: PPL = X +/- Y";
 * iqf_ladder_parse_llama_kld reads a --kl-divergence run's statistics into r (ppl, ppl_ratio, kld,
 * kld_p99, kld_max, same_top with their errors, n_chunks). 0, or -1 with err naming the line
 * that is missing or malformed (r untouched). */
int iqf_ladder_parse_llama_base(const char *text, double *ppl, double *ppl_err, char *err, size_t errlen);
int iqf_ladder_parse_llama_kld(const char *text, ladder_rung *r, char *err, size_t errlen);

/* 64-bit FNV-1a, for the inputs' key. */
uint64_t iqf_ladder_fnv1a(uint64_t h, const void *data, size_t n);
#define LADDER_FNV_INIT 0xcbf29ce484222325ull

#endif
