/* kquants.c - placeholder: no codecs of this family yet. */
#include "codec.h"

const iqf_codec iqf_codecs_kquants[] = {
    { -1, NULL, NULL, NULL },
};
