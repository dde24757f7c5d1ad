/* codec_calls_model.c - a file of the codec layer that calls the engine (src/model), built only by
 * tests/layers/link_reject.sh: iqf_linkreject_codec_model links it with the codec layer's objects
 * and the libraries the codec layer may use (iqf_util), which must fail ("undefined reference to
 * `iqf_model_free'"); iqf_linkok_codec_util, the same file calling util instead
 * (IQF_CALL_UTIL), must link. */
#include "iqforge.h"
#include "util/traits.h"

void iqf_layer_probe(void);
#ifdef IQF_CALL_UTIL
void iqf_layer_probe(void) { (void)iqf_traits(0); }
#else
void iqf_layer_probe(void) { iqf_model_free(NULL); }
#endif

int main(void) {
    iqf_layer_probe();
    return 0;
}
