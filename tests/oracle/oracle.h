/*
 * oracle.h - the reference implementation (ggml 0.25.1's libggml-base.so from npm
 * @node-llama-cpp/linux-x64@3.22.1), loaded with dlopen for differential tests only.
 * tests/oracle is the one oracle library (iqf_oracle) of the differential tests: this loader
 * (oracle.c), the oracle's known corrupt blocks (compat.c), and on the same libraries
 * libllama's quantizer (llama_oracle.h) and inference (llama_infer.h).
 *
 * Location: $IQF_ORACLE_LIB, else $IQF_ORACLE_DIR/node_modules/@node-llama-cpp/PLATFORM/bins/
 * PLATFORM/libggml-base.so, with IQF_ORACLE_DIR defaulting to ~/.cache/iqforge/oracle
 * (scripts/install-oracle.sh installs it there). PLATFORM is the build's own (ORACLE_PLATFORM):
 * linux-x64, or linux-arm64 for an aarch64 build (the same release built for arm64:
 * `scripts/install-oracle.sh arm64`, loaded under qemu-aarch64 in scripts/arm64-ci.sh), whose
 * compat bytes are that platform's llama-quantize's.
 */
#ifndef IQF_TEST_ORACLE_H
#define IQF_TEST_ORACLE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#if defined(__aarch64__)
#define ORACLE_PLATFORM "linux-arm64"
#else
#define ORACLE_PLATFORM "linux-x64"
#endif

/* Loads the oracle once (thread-safe after the first call from the main thread) and calls
 * ggml_init. Returns true on success. */
bool oracle_load(void);

/* oracle_load(), or: under CI (tu_ci: CI=true, CI=1, ...) print why and exit(1); otherwise print a skip note and
 * exit(77) (ctest's SKIP_RETURN_CODE). */
void oracle_require(void);

/* Directory of the oracle's shared libraries (for libllama). */
const char *oracle_lib_dir(void);

/* ggml_quantize_chunk over all rows (start 0). Returns bytes written. */
size_t oracle_quantize(int type, const float *src, void *dst, int64_t nrows, int64_t ncols,
                       const float *imatrix);
/* to_float of the type's traits over n values (one or more whole rows). */
void oracle_dequantize(int type, const void *src, float *dst, int64_t n);
bool oracle_validate(int type, const void *data, size_t nbytes);
bool oracle_requires_imatrix(int type);
const char *oracle_type_name(int type);
int64_t oracle_blck_size(int type);
size_t oracle_type_size(int type);
/* dlsym in libggml-base (NULL if absent). */
void *oracle_sym(const char *name);

/*
 * Known oracle bugs (tests/oracle/compat.c): true if the oracle's block `b` of a row is corrupt
 * for input x (one row) in the type. Codec owners add their cases there and in docs/COMPAT.md.
 */
bool compat_oracle_corrupt(int type, const float *row, int64_t cols, int64_t block);

#endif
