/* imatrix_gguf.c - GGUF imatrix reader/writer (needs the GGUF container, branch gguf). */
#include "imatrix.h"

#include <stdio.h>
#include <string.h>

iqf_status iqf_imatrix_parse_gguf(const void *data, size_t size, iqf_imatrix *im, char *err,
                                  size_t errlen) {
    (void)data;
    (void)size;
    memset(im, 0, sizeof *im);
    if (err && errlen) snprintf(err, errlen, "GGUF imatrix files are not supported by this build yet");
    return IQF_E_UNSUPPORTED;
}

iqf_status iqf_imatrix_write_gguf(const char *path, const iqf_imatrix_stats *stats, int n,
                                  const iqf_imatrix_meta *meta, char *err, size_t errlen) {
    (void)path;
    (void)stats;
    (void)n;
    (void)meta;
    if (err && errlen) snprintf(err, errlen, "GGUF imatrix output is not supported by this build yet");
    return IQF_E_UNSUPPORTED;
}
