/* --scale INDEX|KEY|RESOLUTION, shared by every command that opens an array (read, write, info,
 * verify, attrs, resize, cp's source): the spec that opens one scale of a neuroglancer precomputed
 * volume. The volume is opened once (at the scale its spec names, else scale 0) to read its
 * "scales", the one named is found, and the spec that reopens the volume (nds_array_spec) gets
 * "scale_metadata": {"key": KEY}, so the format opens it as any spec naming a scale.
 * Omits: OME-Zarr multiscale groups (a zarr level is an array of its own: open its path; --scale on
 * any format but precomputed is refused).
 * Threading: none. Ownership: the spec returned is malloc'd (free).
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "cli.h"

#define PRECOMPUTED "neuroglancer_precomputed"

/* "8,8,40" (or "[8, 8, 40]") into res: three finite numbers above 0. 0, or -1. */
static int parse_resolution(const char *text, double *res) {
    const char *p = text + strspn(text, " [");
    for (int i = 0; i < 3; i++) {
        char *end;
        errno = 0;
        res[i] = strtod(p, &end);
        if (end == p || errno != 0 || !isfinite(res[i]) || res[i] <= 0)
            return -1;
        p = end + strspn(end, " ");
        if (i < 2 && *p++ != ',')
            return -1;
        p += strspn(p, " ");
    }
    return strcmp(p, "]") == 0 || *p == '\0' ? 0 : -1;
}

/* Scale s's resolution into res; false when it has none of 3 numbers. */
static bool scale_resolution(json_object *s, double *res) {
    json_object *r = NULL;
    if (!json_object_object_get_ex(s, "resolution", &r) ||
        !json_object_is_type(r, json_type_array) || json_object_array_length(r) != 3)
        return false;
    for (size_t i = 0; i < 3; i++)
        res[i] = json_object_get_double(json_object_array_get_idx(r, i));
    return true;
}

static const char *scale_key(json_object *s) {
    json_object *k = NULL;
    return json_object_object_get_ex(s, "key", &k) && json_object_is_type(k, json_type_string)
               ? json_object_get_string(k)
               : NULL;
}

/* The index in scales of the one text names (digits: an index; with commas: a resolution; else a
 * key), or -1. */
static long find_scale(json_object *scales, const char *text) {
    size_t n = json_object_array_length(scales);
    if (text[0] && strspn(text, "0123456789") == strlen(text)) {
        errno = 0;
        unsigned long long i = strtoull(text, NULL, 10);
        return errno == 0 && i < n ? (long)i : -1;
    }
    double want[3], have[3];
    bool by_resolution = strchr(text, ',') != NULL;
    if (by_resolution && parse_resolution(text, want) != 0)
        return -1;
    for (size_t i = 0; i < n; i++) {
        json_object *s = json_object_array_get_idx(scales, i);
        if (by_resolution ? scale_resolution(s, have) && have[0] == want[0] &&
                                have[1] == want[1] && have[2] == want[2]
                          : scale_key(s) && strcmp(scale_key(s), text) == 0)
            return (long)i;
    }
    return -1;
}

/* "0 (8_8_40, resolution 8,8,40), 1 (...)" into buf: what --scale can name. */
static void list_scales(json_object *scales, char *buf, size_t cap) {
    size_t used = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < json_object_array_length(scales) && used < cap; i++) {
        json_object *s = json_object_array_get_idx(scales, i);
        double r[3] = {0, 0, 0};
        bool has_res = scale_resolution(s, r);
        int n = snprintf(buf + used, cap - used, "%s%zu (%s, resolution %g,%g,%g)", i ? ", " : "",
                         i, scale_key(s) ? scale_key(s) : "?", has_res ? r[0] : 0,
                         has_res ? r[1] : 0, has_res ? r[2] : 0);
        used += n > 0 ? (size_t)n : 0;
    }
}

/* The scales array of a's metadata (info), into *doc (the caller puts it); CLI_FAIL printed. */
static int volume_scales(nds_array *a, json_object **doc, json_object **scales) {
    char *text = NULL;
    nds_error_clear();
    int st = nds_array_metadata(a, &text);
    if (st != 0)
        return cli_fail_nds(st, "--scale");
    *doc = json_tokener_parse(text);
    nds_free(text);
    if (!*doc || !json_object_object_get_ex(*doc, "scales", scales) ||
        !json_object_is_type(*scales, json_type_array))
        return cli_fail("--scale: %s: the volume's info has no \"scales\" list",
                        nds_kvstore_url(nds_array_kvstore(a)));
    return CLI_OK;
}

/* a's spec with "scale_metadata": {"key": key} (and no "scale_index"), as text into *out. */
static int spec_at_key(nds_array *a, const char *key, char **out) {
    char *text = NULL;
    nds_error_clear();
    int st = nds_array_spec(a, &text);
    if (st != 0)
        return cli_fail_nds(st, "--scale");
    json_object *spec = json_tokener_parse(text), *sm = json_object_new_object();
    nds_free(text);
    if (!spec || !sm) {
        json_object_put(spec);
        json_object_put(sm);
        return cli_fail("--scale: the volume's spec does not parse");
    }
    json_object_object_add(sm, "key", json_object_new_string(key));
    json_object_object_add(spec, "scale_metadata", sm);
    json_object_object_del(spec, "scale_index");
    const char *s = json_object_to_json_string_ext(spec, JSON_C_TO_STRING_PLAIN |
                                                             JSON_C_TO_STRING_NOSLASHESCAPE);
    *out = s ? strdup(s) : NULL;
    json_object_put(spec);
    return *out ? CLI_OK : cli_fail("out of memory");
}

/* The spec of scale text of the open volume a. */
static int spec_of_scale(nds_array *a, const char *text, char **out) {
    const char *url = nds_kvstore_url(nds_array_kvstore(a));
    if (strcmp(nds_array_format(a), PRECOMPUTED) != 0)
        return cli_fail("--scale %s: %s is a %s array: only neuroglancer precomputed volumes have "
                        "scales (a level of an OME-Zarr multiscale group is an array of its own: "
                        "open its path)", text, url, nds_array_format(a));
    json_object *doc = NULL, *scales = NULL;
    int rc = volume_scales(a, &doc, &scales);
    long i = rc == CLI_OK ? find_scale(scales, text) : -1;
    if (rc == CLI_OK && i < 0) {
        char list[2048];
        list_scales(scales, list, sizeof list);
        rc = cli_fail("--scale %s: no such scale in %s (give an index, a key or a resolution "
                      "x,y,z); its scales: %s", text, url, list);
    }
    const char *key = rc == CLI_OK ? scale_key(json_object_array_get_idx(scales, (size_t)i)) : NULL;
    if (rc == CLI_OK && !key)
        rc = cli_fail("--scale %s: scale %ld of %s has no key", text, i, url);
    if (rc == CLI_OK)
        rc = spec_at_key(a, key, out);
    json_object_put(doc);
    return rc;
}

int cli_scale_spec(const char *spec, const char *scale, char **out) {
    *out = NULL;
    if (!scale)
        return CLI_OK;
    if (scale[strspn(scale, " \t")] == '\0')
        return cli_fail("--scale is empty: give an index (0), a key (8_8_40) or a resolution "
                        "(8,8,40)");
    nds_array *a = NULL;
    int rc = cli_open_array(spec, NULL, 0, &a);
    if (rc == CLI_OK)
        rc = spec_of_scale(a, scale, out);
    nds_array_free(a);
    return rc;
}
