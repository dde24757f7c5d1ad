/*
 * fuzz_hf_json.c - libFuzzer target for the Hugging Face JSON reading of iqforge convert
 * (src/convert/json.c over the vendored yyjson): the input is parsed as a JSON document (strict,
 * depth-limited); an accepted document is walked with the helpers the converter uses (object
 * lookups of config.json keys, integers, numbers, strings), every string's bytes touched. Also
 * parsed as a model.safetensors.index.json-style object through the same helpers.
 */
#include "convert/json.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static volatile unsigned sink;

static void walk(yyjson_val *v, int depth) {
    if (depth > IQF_JSON_MAX_DEPTH + 1) abort(); /* the parser must have refused it */
    int64_t i64;
    double d;
    size_t len;
    const char *s = iqf_json_str(v, &len);
    if (s)
        for (size_t k = 0; k < len; k++) sink += (unsigned char)s[k];
    if (iqf_json_int(v, &i64)) sink += (unsigned)i64;
    if (iqf_json_num(v, &d)) sink += d == d;
    if (yyjson_is_arr(v)) {
        size_t idx, max;
        yyjson_val *e;
        yyjson_arr_foreach(v, idx, max, e) walk(e, depth + 1);
    } else if (yyjson_is_obj(v)) {
        static const char *const keys[] = { "architectures", "num_hidden_layers", "rope_parameters", "weight_map",
                                            "model", "added_tokens", "vocab", "merges", NULL };
        for (int k = 0; keys[k]; k++) sink += iqf_json_get(v, keys[k]) != NULL;
        size_t idx, max;
        yyjson_val *k, *e;
        yyjson_obj_foreach(v, idx, max, k, e) {
            if (!yyjson_is_str(k)) abort();
            walk(e, depth + 1);
        }
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char err[512];
    yyjson_doc *d = iqf_json_parse((const char *)data, size, "fz.json", err, sizeof err);
    if (d) {
        walk(yyjson_doc_get_root(d), 0);
        size_t n = 0;
        char *out = yyjson_val_write(yyjson_doc_get_root(d), YYJSON_WRITE_NOFLAG, &n);
        if (out) {
            /* what we write back must parse again */
            yyjson_doc *d2 = iqf_json_parse(out, n, "fz2.json", err, sizeof err);
            if (!d2) abort();
            yyjson_doc_free(d2);
            free(out);
        }
        yyjson_doc_free(d);
    } else if (strncmp(err, "fz.json: ", 9) != 0)
        abort();
    return 0;
}
