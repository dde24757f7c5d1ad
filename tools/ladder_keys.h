/*
 * ladder_keys.h - the ladder's cache keys (ladder_keys.c): the identity of each input (a model
 * file, a Hugging Face checkpoint directory, a text), and the small "key K" files that say which
 * inputs a cached base measurement or importance matrix was made from (tools/cmd_ladder.c).
 */
#ifndef IQF_LADDER_KEYS_H
#define IQF_LADDER_KEYS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Hashes a whole file into h (its byte count to *size unless NULL); false if it cannot be read. */
bool ladder_hash_file(const char *path, uint64_t *h, uint64_t *size);
/* The base model's identity into h. A file: its size and its first and last 8 MiB (hashing a
 * 100 GB model whole would cost more than a rung); *size its byte count. A directory (a Hugging
 * Face checkpoint, converted in memory): every regular file not starting with '.' in name order,
 * each by its name, size and first and last 8 MiB, then the iqforge version (the conversion is
 * part of the input); *size the files' bytes. False (errno set) if something cannot be read. */
bool ladder_hash_model(const char *path, uint64_t *h, uint64_t *size);
/* h extended by s with its terminating NUL (NULL hashes as ""). */
uint64_t ladder_hash_str(uint64_t h, const char *s);

/* A small "key value" text file (base.txt, imatrix.txt): true if its first line is "key KEY"
 * (and, with v1, the next two are "ppl V1" and "ppl_err V2", finite, read into them). */
bool ladder_key_file_matches(const char *path, const char *key, double *v1, double *v2);
/* Writes such a file atomically (v1 NULL: the key line only). 0, or 1 with the message printed. */
int ladder_write_key_file(const char *path, const char *key, const double *v1, const double *v2);

#endif
