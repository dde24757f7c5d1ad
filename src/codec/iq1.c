/* iq1.c - placeholder: no codecs of this family yet. */
#include "codec.h"

const iqf_codec iqf_codecs_iq1[] = {
    { -1, NULL, NULL, NULL },
};
