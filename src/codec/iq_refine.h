/* iq_refine.h - warm-started re-encodings of IQ grid blocks (the error feedback's re-encodings,
 * src/quantize/feedback.c). */
#ifndef IQF_CODEC_IQ_REFINE_H
#define IQF_CODEC_IQ_REFINE_H

#include "iqforge.h"

#include <stdbool.h>

/* iq3.c: re-encodes one IQ3_XXS / IQ3_S super-block blk (in place) from x with importance qw
 * (may be NULL: ggml's x^2 weights), the encoder's search over only nw candidate scales per
 * sub-block, centred on the sub-block's current scale in blk (all of them where that is 0, or
 * nw <= 0). False (blk untouched) for another type. Every simd level gives the same bytes. */
bool iqf_iq3_refine(iqf_simd simd, int type, const float *x, const float *qw, void *blk, int nw);

/* iq2.c: the same for IQ2_XXS / IQ2_XS / IQ2_S (qw must not be NULL for IQ2_XXS / IQ2_XS, as
 * for their encoders). */
bool iqf_iq2_refine(iqf_simd simd, int type, const float *x, const float *qw, void *blk, int nw);

#endif
