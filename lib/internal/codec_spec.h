/* Compact codec strings, ndstore's format-neutral way to name a chunk codec on the command line and
 * in a spec's "schema": "none", "zstd[:level]", "blosc[:cname[:clevel[:shuffle]]]" (shuffle:
 * noshuffle, shuffle, bitshuffle, or 0/1/2/-1), "gzip[:level]", "zlib[:level]", "bz2[:level]",
 * "lz4[:acceleration]", "xz[:preset]". Each format maps the resulting numcodecs-style config to its
 * own spelling. */
#ifndef NDS_INTERNAL_CODEC_SPEC_H
#define NDS_INTERNAL_CODEC_SPEC_H

#include <json-c/json.h>

/**
 * Parses a compact codec string into a new numcodecs-style config object
 * ({"id":"blosc","cname":"lz4", "clevel":5,"shuffle":1,"blocksize":0}); *out is NULL for "none".
 * @return 0, or NDS_EINVAL naming the bad part
 */
int nds_codec_spec_parse(const char *text, json_object **out);

#endif
