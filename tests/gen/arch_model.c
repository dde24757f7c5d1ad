/*
 * arch_model.c - iqf-archmodel: rebuilds a random-weight model of any architecture from its
 * skeleton, for tests/cli/archs.sh (the suite's subset of the architecture matrix).
 *
 *   iqf-archmodel SKELETON SIZE OUT.gguf [SEED] [--unit-norms]
 *
 * SKELETON is the head of a GGUF (tests/data/archs/ *.skel: the first bytes of a model that
 * llama.cpp's test-llama-archs -o wrote, up to its tensor data: header, metadata, tensor infos,
 * padding). The tool appends zeros up to SIZE bytes (the original file size), checks the result
 * with the GGUF reader, and fills every F32/F16 tensor with near-normal values of standard
 * deviation 0.1 (Irwin-Hall, 4 uniforms) from a generator seeded by SEED and the tensor's name
 * (FNV-1a), as test-llama-archs does with its own generator (Mamba's ssm_a negative; gemma4's
 * layer_output_scale 1 + that).
 * Deterministic without libm: the same bytes on every machine. --unit-norms sets every
 * *norm.weight tensor to 1 instead (as trained models' are near 1; with N(0, 0.1) norms the
 * logits have a standard deviation of ~0.2 and quantization KLDs fall below 1e-6): for
 * quality measurements (bench/feedback_archs.sh), not for the byte-compatibility tests.
 */
#include "iqforge.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint64_t mix(uint64_t z) {
    z += 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static double uni(uint64_t *s) {
    *s = mix(*s);
    return ((double)(*s >> 11) + 0.5) * (1.0 / 9007199254740992.0);
}

static int fail(const char *msg, const char *what) {
    fprintf(stderr, "iqf-archmodel: %s%s\n", msg, what ? what : "");
    return 1;
}

int main(int argc, char **argv) {
    const bool unit_norms = argc >= 5 && !strcmp(argv[argc - 1], "--unit-norms");
    if (unit_norms) argc--;
    if (argc < 4 || argc > 5) {
        fprintf(stderr, "usage: iqf-archmodel SKELETON SIZE OUT.gguf [SEED] [--unit-norms]\n");
        return 2;
    }
    const long long size = atoll(argv[2]);
    const uint64_t seed = argc == 5 ? strtoull(argv[4], NULL, 10) : 42;
    FILE *in = fopen(argv[1], "rb");
    if (!in) return fail("cannot open ", argv[1]);
    FILE *out = fopen(argv[3], "wb");
    if (!out) {
        fclose(in);
        return fail("cannot create ", argv[3]);
    }
    char buf[65536];
    size_t n;
    long long w = 0;
    while ((n = fread(buf, 1, sizeof buf, in)) > 0) {
        fwrite(buf, 1, n, out);
        w += (long long)n;
    }
    fclose(in);
    memset(buf, 0, sizeof buf);
    while (w < size) {
        size_t k = size - w < (long long)sizeof buf ? (size_t)(size - w) : sizeof buf;
        fwrite(buf, 1, k, out);
        w += (long long)k;
    }
    if (fclose(out) != 0 || w != size) return fail("cannot write ", argv[3]);

    char err[512];
    iqf_gguf *g = iqf_gguf_open(argv[3], err, sizeof err);
    if (!g) return fail(err, NULL);
    const int64_t nt = iqf_gguf_n_tensors(g);
    const uint64_t base = iqf_gguf_data_offset(g);
    FILE *f = fopen(argv[3], "r+b");
    if (!f) {
        iqf_gguf_close(g);
        return fail("cannot reopen ", argv[3]);
    }
    int rc = 0;
    for (int64_t i = 0; i < nt && !rc; i++) {
        const iqf_gguf_tensor *t = iqf_gguf_tensor_at(g, i);
        if (t->type != IQF_TYPE_F32 && t->type != IQF_TYPE_F16) continue;
        int64_t ne = 1;
        for (int d = 0; d < 4; d++) ne *= t->ne[d];
        uint64_t s = 0xcbf29ce484222325ull;
        for (const char *p = t->name; *p; p++) s = (s ^ (uint8_t)*p) * 0x100000001b3ull;
        s = mix(s ^ mix(seed));
        const bool neg = strstr(t->name, "ssm_a") != NULL;
        /* gemma4's per-layer output scalars around 1 (1 + N(0, 0.1)): at N(0, 0.1) six layers
         * shrink the residual stream by ~1e-6 below the norms' epsilon, and the logits become
         * float noise (engine vs libllama and one-token-per-call vs batch both ~4e-5 apart) */
        const bool around1 = strstr(t->name, "layer_output_scale") != NULL;
        const size_t nl = strlen(t->name);
        const bool one = unit_norms && nl >= 11 && !strcmp(t->name + nl - 11, "norm.weight");
        const size_t esz = t->type == IQF_TYPE_F32 ? 4 : 2;
        if (fseek(f, (long)(base + t->offset), SEEK_SET) != 0) {
            rc = fail("seek failed in ", argv[3]);
            break;
        }
        unsigned char chunk[4096 * 4];
        size_t used = 0;
        for (int64_t k = 0; k < ne && !rc; k++) {
            /* Irwin-Hall: the sum of 4 uniforms, centred and scaled to standard deviation 0.1
             * (plain arithmetic: the same bits on every machine and libm) */
            double z = (uni(&s) + uni(&s) + uni(&s) + uni(&s) - 2.0) * 0.17320508075688773;
            if (neg && z > 0) z = -z;
            if (around1) z += 1.0;
            if (one) z = 1.0;
            if (esz == 4) {
                const float x = (float)z;
                memcpy(chunk + used, &x, 4);
            } else {
                const uint16_t h = iqf_fp32_to_fp16((float)z);
                memcpy(chunk + used, &h, 2);
            }
            used += esz;
            if (used == sizeof chunk || k + 1 == ne) {
                if (fwrite(chunk, 1, used, f) != used) rc = fail("write failed in ", argv[3]);
                used = 0;
            }
        }
    }
    if (fclose(f) != 0 && !rc) rc = fail("cannot write ", argv[3]);
    iqf_gguf_close(g);
    return rc;
}
