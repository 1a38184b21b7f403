/* Helpers shared by the byte codecs: one-integer configs and concatenated streams
 * (codec_util.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codec_util.h"
#include "internal/error.h"
#include "internal/json_util.h"

int nds_int_config_create(void **state, const json_object *config, const char *name,
                          const char *member, int64_t min, int64_t max, int64_t dflt) {
    char doc[64];
    snprintf(doc, sizeof doc, "%s config", name);
    int64_t value = dflt;
    if (config) {
        if (!json_object_is_type(config, json_type_object))
            return nds_err(NDS_EFORMAT, "%s: expected a json object", doc);
        json_object_object_foreach((json_object *)config, key, val) {
            (void)val;
            if (strcmp(key, "id") && strcmp(key, member))
                return nds_err(NDS_EFORMAT, "%s: unknown member \"%s\"", doc, key);
        }
        int rc = nds_json_get_int(config, member, true, min, max, doc, &value);
        if (rc) return rc;
    }
    nds_int_config *s = malloc(sizeof *s);
    if (!s) return nds_err(NDS_ENOMEM, "%s: out of memory", name);
    s->value = value;
    *state = s;
    return 0;
}

int nds_int_config_json(const void *state, const char *name, const char *member,
                        json_object **out) {
    const nds_int_config *s = state;
    json_object *o = json_object_new_object();
    if (!o) return nds_err(NDS_ENOMEM, "%s: out of memory", name);
    json_object_object_add(o, "id", json_object_new_string(name));
    json_object_object_add(o, member, json_object_new_int64(s->value));
    *out = o;
    return 0;
}

int nds_decode_streams(const uint8_t *in, size_t len, uint8_t *out, size_t out_cap, size_t *out_len,
                       nds_stream_decode_fn decode_one, nds_stream_fail_fn fail) {
    uint8_t dummy;
    if (!out) {
        out = &dummy;
        out_cap = 0;
    }
    size_t pos = 0, total = 0;
    do {
        nds_stream_result r;
        memset(&r, 0, sizeof r);
        if (decode_one(in + pos, len - pos, out + total, out_cap - total, &r)) {
            /* Python drops undecodable data after a complete stream. */
            if (pos > 0 && r.not_stream) break;
            return fail(&r, out_cap, pos);
        }
        pos += r.used;
        total += r.produced;
    } while (pos < len);
    *out_len = total;
    return 0;
}
