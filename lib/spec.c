/* Array spec parsing: JSON text, "@file.json", or a URL pipeline
 * "KVURL(|ADAPTER:REST)*|FORMAT:". */
#include <errno.h>
#include <stdio.h>
#include <sys/stat.h>
#include <stdlib.h>
#include <string.h>

#include "ndstore/array.h"
#include "internal/error.h"
#include "internal/json_util.h"
#include "internal/kvstore_internal.h"
#include "internal/registry.h"
#include "internal/spec.h"
#include "internal/util.h"

/* Specs from files are small documents; refuse anything absurd before reading it. */
#define SPEC_FILE_MAX (16u << 20)

static int read_spec_file(const char *path, char **out) {
    FILE *f = fopen(path, "rb");
    if (!f) return nds_err_errno(errno, "spec file %s", path);
    struct stat st;
    if (fstat(fileno(f), &st) != 0 || st.st_size > SPEC_FILE_MAX) {
        fclose(f);
        return nds_err(NDS_ELIMIT, "spec file %s: larger than %u bytes", path, SPEC_FILE_MAX);
    }
    char *buf = malloc((size_t)st.st_size + 1);
    size_t n = buf ? fread(buf, 1, (size_t)st.st_size, f) : 0;
    int err = ferror(f);
    fclose(f);
    if (!buf) return nds_err(NDS_ENOMEM, "out of memory reading %s", path);
    if (err) {
        free(buf);
        return nds_err(NDS_EIO, "spec file %s: read error", path);
    }
    buf[n] = '\0';
    *out = buf;
    return 0;
}

/* Neuroglancer's data source prefixes: "NAME://" in front of a kvstore URL names the format
 * ("precomputed://gs://b/v" is "gs://b/v|neuroglancer_precomputed:"). "zarr" names zarr v2 or v3,
 * whichever metadata exists: the format is left to detection (format ""). */
static const struct ng_prefix {
    const char *name;
    const char *format;
} ng_prefixes[] = {
    {"precomputed", "neuroglancer_precomputed"}, {"zarr", ""}, {"zarr2", "zarr"},
    {"zarr3", "zarr3"}, {"n5", "n5"},
};

/* The neuroglancer prefix url starts with ("NAME://"), or NULL; *rest: what follows its "://". */
static const struct ng_prefix *ng_prefix_of(const char *url, const char **rest) {
    const char *sep = strstr(url, "://");
    for (size_t i = 0; sep && i < sizeof ng_prefixes / sizeof ng_prefixes[0]; i++) {
        size_t n = strlen(ng_prefixes[i].name);
        if ((size_t)(sep - url) == n && strncmp(url, ng_prefixes[i].name, n) == 0) {
            *rest = sep + 3;
            return &ng_prefixes[i];
        }
    }
    return NULL;
}

/* 1 when url starts with "SCHEME://" for a registered kvstore scheme. */
static int has_kvstore_scheme(const char *url) {
    const char *sep = strstr(url, "://");
    char scheme[32];
    size_t n = sep ? (size_t)(sep - url) : 0;
    if (n == 0 || n >= sizeof scheme) return 0;
    memcpy(scheme, url, n);
    scheme[n] = '\0';
    return nds_kv_driver_find_scheme(scheme) != NULL;
}

/* A neuroglancer prefix at the start of url: *start is where the kvstore URL begins (0 when there
 * is none), *ng the prefix. A prefix with no kvstore URL after it (a scheme is required, as in
 * neuroglancer) or two prefixes is NDS_EINVAL, an unknown "NAME://" NDS_ENOTFOUND (as an unknown
 * kvstore scheme always was), each naming the url. */
static int split_ng_prefix(const char *url, size_t *start, const struct ng_prefix **ng) {
    const char *rest = NULL;
    *start = 0;
    *ng = ng_prefix_of(url, &rest);
    const char *sep = strstr(url, "://");
    if (!*ng) {
        /* an unknown scheme before any '|': neither a kvstore nor a data source prefix */
        if (sep && sep < url + strcspn(url, "|") && !has_kvstore_scheme(url))
            return nds_err(NDS_ENOTFOUND,
                           "url \"%s\": unknown scheme \"%.*s://\": neither a kvstore (file://, "
                           "s3://, gs://, http(s)://, memory://, lmdb://) nor a data source prefix "
                           "(precomputed://, zarr://, zarr2://, zarr3://, n5://)",
                           url, (int)(sep - url), url);
        return 0;
    }
    const char *dummy;
    if (*rest == '\0' || *rest == '|')
        return nds_err(NDS_EINVAL, "url \"%s\": %s:// names no data source: a kvstore url follows "
                       "it (%s://gs://bucket/path, %s://file:///dir)", url, (*ng)->name,
                       (*ng)->name, (*ng)->name);
    if (ng_prefix_of(rest, &dummy))
        return nds_err(NDS_EINVAL, "url \"%s\": two data source prefixes (%s:// and another): "
                       "give one, then a kvstore url", url, (*ng)->name);
    if (!has_kvstore_scheme(rest))
        return nds_err(NDS_EINVAL, "url \"%s\": %s:// must be followed by a kvstore url with its "
                       "scheme (gs://, s3://, http(s)://, file://, ...), not \"%s\"", url,
                       (*ng)->name, rest);
    *start = (size_t)(rest - url);
    return 0;
}

/* The one splitter of array URLs: [NG_PREFIX://]KVURL(|ADAPTER:REST)*[|FORMAT:]. The kvstore URL
 * is url[*kv_start, *kv_start + *kv_len); format (cap bytes) the format's name, "" when none (to
 * be detected). A prefix and a "|FORMAT:" that name different formats are NDS_EINVAL. */
static int array_url_split(const char *url, size_t *kv_start, size_t *kv_len, char *format,
                           size_t cap) {
    const struct ng_prefix *ng = NULL;
    int rc = split_ng_prefix(url, kv_start, &ng);
    if (!rc && (rc = nds_url_split(url + *kv_start, kv_len, format, cap)) && ng)
        rc = nds_err_prefix(rc, "url \"%s\"", url);
    if (rc || !ng) return rc;
    bool zarr_any = ng->format[0] == '\0';
    if (format[0] == '\0') {
        snprintf(format, cap, "%s", ng->format);
    } else if (zarr_any ? strcmp(format, "zarr") != 0 && strcmp(format, "zarr3") != 0
                        : strcmp(format, ng->format) != 0) {
        return nds_err(NDS_EINVAL, "url \"%s\": %s:// and \"|%s:\" name different formats",
                       url, ng->name, format);
    }
    return 0;
}

/* "[NG_PREFIX://]KVURL(|ADAPTER:REST)*|FORMAT:" -> {"driver": FORMAT, "kvstore": {...}}
 * (array_url_split says where the kvstore URL is); a URL that names no format leaves driver
 * unset. */
static int parse_url_pipeline(const char *text, json_object **out) {
    size_t kv_start = 0, kv_len = 0;
    char format[64];
    int rc = array_url_split(text, &kv_start, &kv_len, format, sizeof format);
    if (rc) return rc;
    char *kvurl = strndup(text + kv_start, kv_len);
    if (!kvurl) return nds_err(NDS_ENOMEM, "out of memory");
    json_object *kv = NULL;
    rc = nds_kvstore_url_to_spec(kvurl, &kv);
    free(kvurl);
    if (rc) return rc;
    json_object *spec = json_object_new_object();
    json_object_object_add(spec, "kvstore", kv);
    if (format[0]) json_object_object_add(spec, "driver", json_object_new_string(format));
    *out = spec;
    return 0;
}

int nds_spec_url_split(const char *url, char **kvstore_url, char **format) {
    *kvstore_url = *format = NULL;
    size_t kv_start = 0, kv_len = 0;
    char name[64];
    int rc = array_url_split(url, &kv_start, &kv_len, name, sizeof name);
    if (rc) return rc;
    *kvstore_url = strndup(url + kv_start, kv_len);
    *format = name[0] ? nds_strdup(name) : NULL;
    if (!*kvstore_url || (name[0] && !*format)) {
        free(*kvstore_url);
        free(*format);
        *kvstore_url = *format = NULL;
        return nds_err(NDS_ENOMEM, "out of memory");
    }
    return 0;
}

/* Normalises "kvstore" (URL string or object) and a top-level "path" into one kvstore object. */
static int normalise_kvstore(json_object *spec) {
    json_object *kv;
    if (!json_object_object_get_ex(spec, "kvstore", &kv))
        return nds_err(NDS_EINVAL, "spec: missing member \"kvstore\"");
    if (json_object_is_type(kv, json_type_string)) {
        json_object *obj;
        int rc = nds_kvstore_url_to_spec(json_object_get_string(kv), &obj);
        if (rc) return rc;
        json_object_object_add(spec, "kvstore", obj);
        kv = obj;
    } else if (!json_object_is_type(kv, json_type_object)) {
        return nds_err(NDS_EINVAL, "spec: \"kvstore\" must be an object or a url string");
    }
    json_object *extra;
    if (json_object_object_get_ex(spec, "path", &extra)) {
        if (!json_object_is_type(extra, json_type_string))
            return nds_err(NDS_EINVAL, "spec: \"path\" must be a string");
        const char *base = "";
        nds_json_get_string(kv, "path", true, "kvstore spec", &base);
        char *joined = NULL;
        int rc = nds_path_join(base, json_object_get_string(extra), "spec: \"path\"", &joined);
        if (rc) return rc;
        json_object_object_add(kv, "path", json_object_new_string(joined));
        free(joined);
        json_object_object_del(spec, "path");
    }
    return 0;
}

/* Spec text after leading blanks (spaces, tabs, line ends). */
static const char *skip_blanks(const char *text) {
    return text + strspn(text, " \t\r\n\v\f");
}

int nds_spec_parse(const char *text, json_object **out) {
    text = skip_blanks(text);
    json_object *spec = NULL;
    int rc;
    /* An empty spec would become the url "" and so the current directory: a create with
     * delete_existing there would empty it. */
    if (*text == '\0')
        return nds_err(NDS_EINVAL, "spec is empty: give a url, a path or a json spec");
    if (*text == '@') {
        char *content = NULL;
        if ((rc = read_spec_file(text + 1, &content))) return rc;
        if (*skip_blanks(content) == '\0')
            rc = nds_err(NDS_EINVAL, "spec file %s is empty", text + 1);
        else
            rc = nds_spec_parse(content, out);
        free(content);
        return rc;
    }
    if (*text == '{')
        rc = nds_json_parse(text, strlen(text), "spec", &spec);
    else
        rc = parse_url_pipeline(text, &spec);
    if (rc) return rc;
    if (!json_object_is_type(spec, json_type_object))
        rc = nds_err(NDS_EINVAL, "spec: expected a json object");
    if (!rc) rc = normalise_kvstore(spec);
    if (rc) {
        json_object_put(spec);
        return rc;
    }
    *out = spec;
    return 0;
}

int nds_spec_mode(const json_object *spec, unsigned *mode) {
    bool open = false, create = false, del = false, open_given = false;
    json_object *v;
    int rc = nds_json_get_bool(spec, "create", true, "spec", &create);
    if (!rc) rc = nds_json_get_bool(spec, "delete_existing", true, "spec", &del);
    if (!rc && json_object_object_get_ex(spec, "open", &v)) {
        open_given = true;
        rc = nds_json_get_bool(spec, "open", false, "spec", &open);
    }
    if (rc) return rc;
    if (!open_given && !create) open = true; /* plain spec: open an existing array */
    if (del && !create) return nds_err(NDS_EINVAL, "spec: \"delete_existing\" requires \"create\"");
    if (del && open)
        return nds_err(NDS_EINVAL, "spec: \"delete_existing\" and \"open\" exclude each other");
    *mode = (open ? NDS_OPEN_EXISTING : 0) | (create ? NDS_OPEN_CREATE : 0) |
            (del ? NDS_OPEN_DELETE_EXISTING : 0);
    return 0;
}
