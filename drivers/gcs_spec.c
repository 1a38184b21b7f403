/* The gcs driver's spec members (gcs_internal.h): the bucket, the endpoint (or the emulator named
 * by $STORAGE_EMULATOR_HOST, with anonymous credentials), "credentials" (parsed by gcs_auth.c),
 * request concurrency, retries, timeouts and bounds (http_multi.h), and the userProject to bill.
 * Members are checked strictly: an unknown one is a typo, refused with NDS_EINVAL.
 *
 * Omits: the gs://bucket/path/ URL form (kv_gcs.c parses it into these members). Threading: runs
 * once per open, on the opening thread. Ownership: what it sets in the state is freed by the
 * driver's close, also after an error.
 */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "gcs_internal.h"
#include "internal/error.h"
#include "internal/json_util.h"
#include "internal/util.h"

#define GCS_DEFAULT_ENDPOINT "https://storage.googleapis.com"

bool nds_gcs_bucket_ok(const char *b, size_t n) {
    if (n < 3 || n > 222 || !isalnum((unsigned char)b[0]) || !isalnum((unsigned char)b[n - 1]))
        return false;
    for (size_t i = 0; i < n; i++)
        if (!(islower((unsigned char)b[i]) || isdigit((unsigned char)b[i]) || strchr("._-", b[i])))
            return false;
    return true;
}

/* Every spec member the driver knows, space-separated. */
static const char gcs_members[] =
    " driver path bucket endpoint credentials gcs_request_concurrency "
    "gcs_request_retries gcs_request_timeout gcs_user_project gcs_max_response_bytes "
    "gcs_request_deadline gcs_stall_timeout context ";

/* A duration member (json_util.h): "250ms", "1.5s", "2m" or seconds, into milliseconds. */
static int duration_ms(json_object *v, const char *member, long *out) {
    return nds_json_duration_ms(v, "gcs", member, out);
}

/* "gcs_request_retries": {"max_retries": N, "initial_delay": D, "max_delay": D}. */
static int parse_retries(gcs_state *s, json_object *v) {
    const char *doc = "gcs: spec member \"gcs_request_retries\"";
    if (!json_object_is_type(v, json_type_object))
        return nds_err(NDS_EINVAL, "%s must be an object", doc);
    int64_t n = s->retry.max_attempts - 1;
    int rc = nds_json_get_int(v, "max_retries", true, 0, 100, doc, &n);
    s->retry.max_attempts = (int)n + 1;
    json_object_object_foreach(v, k, d) {
        if (rc) break;
        if (strcmp(k, "initial_delay") == 0)
            rc = duration_ms(d, k, &s->retry.base_delay_ms);
        else if (strcmp(k, "max_delay") == 0)
            rc = duration_ms(d, k, &s->retry.max_delay_ms);
        else if (strcmp(k, "max_retries") != 0)
            rc = nds_err(NDS_EINVAL, "%s: unknown member \"%s\"", doc, k);
    }
    return rc;
}

/* "endpoint": http(s)://host[:port][/base], never with user:password in it. Without one, the
 * emulator convention of Google's client libraries applies: $STORAGE_EMULATOR_HOST, with anonymous
 * credentials. */
static int parse_endpoint(gcs_state *s, json_object *spec, nds_gcs_auth_config *cfg) {
    const char *e = NULL, *emu = getenv("STORAGE_EMULATOR_HOST");
    char *owned = NULL;
    int rc = nds_json_get_string(spec, "endpoint", true, "gcs: spec", &e);
    if (rc) return rc;
    if (!e && emu && emu[0]) {
        e = owned = strstr(emu, "://") ? nds_strdup(emu) : nds_asprintf("http://%s", emu);
        s->endpoint_from_env = true;
        if (!json_object_object_get_ex(spec, "credentials", NULL))
            cfg->source = NDS_GCS_CRED_ANONYMOUS;
    }
    if (!e) e = owned ? owned : GCS_DEFAULT_ENDPOINT;
    const char *host = strncmp(e, "https://", 8) == 0  ? e + 8
                       : strncmp(e, "http://", 7) == 0 ? e + 7
                                                       : NULL;
    size_t authority = host ? strcspn(host, "/") : 0;
    if (!host || authority == 0 || memchr(host, '@', authority) || strpbrk(e, "?# \t\r\n")) {
        free(owned);
        return nds_err(NDS_EINVAL,
                       "gcs: %s must be an http:// or https:// URL without credentials, query or "
                       "fragment",
                       s->endpoint_from_env ? "STORAGE_EMULATOR_HOST" : "spec member \"endpoint\"");
    }
    size_t n = strlen(e);
    while (n > 0 && e[n - 1] == '/') n--;
    s->endpoint = nds_asprintf("%.*s", (int)n, e);
    free(owned);
    return s->endpoint ? 0 : nds_err(NDS_ENOMEM, "gcs: out of memory");
}

/* "gcs_request_concurrency": N or {"limit": N}; "gcs_user_project": "p" or {"project_id": "p"}. */
static int parse_limits(json_object *spec, int64_t *concurrency, const char **project) {
    json_object *v, *inner;
    if (json_object_object_get_ex(spec, "gcs_request_concurrency", &v)) {
        bool obj = json_object_is_type(v, json_type_object); /* TensorStore's {"limit": N} form */
        int rc =
            nds_json_get_int(obj ? v : spec, obj ? "limit" : "gcs_request_concurrency", false, 1,
                             1024, "gcs: spec member \"gcs_request_concurrency\"", concurrency);
        if (rc) return rc;
    }
    if (json_object_object_get_ex(spec, "gcs_user_project", &v)) {
        if (json_object_is_type(v, json_type_object) &&
            json_object_object_get_ex(v, "project_id", &inner))
            v = inner;
        if (!json_object_is_type(v, json_type_string) || json_object_get_string_len(v) == 0)
            return nds_err(NDS_EINVAL,
                           "gcs: spec member \"gcs_user_project\" must be a project id or "
                           "{\"project_id\": id}");
        *project = json_object_get_string(v);
    }
    return 0;
}

static int gcs_fetch(void *ctx, const nds_http_request *req, nds_http_response *resp) {
    gcs_state *s = ctx;
    return nds_http_perform(s->http, req, &s->retry, resp);
}

int nds_gcs_options(gcs_state *s, const json_object *cspec) {
    json_object *spec = (json_object *)cspec, *v;
    json_object_object_foreach(spec, key, val) {
        (void)val;
        char word[80];
        snprintf(word, sizeof word, " %.70s ", key);
        if (strchr(key, ' ') || !strstr(gcs_members, word))
            return nds_err(NDS_EINVAL, "gcs: unknown spec member \"%.60s\"", key);
    }
    const char *bucket = NULL, *project = NULL;
    int64_t concurrency = 32;
    nds_gcs_auth_config cfg = {NDS_GCS_CRED_DEFAULT, NULL, NULL, NULL, 0, gcs_fetch, s, NULL};
    s->retry = (nds_http_retry)NDS_HTTP_RETRY_DEFAULT;
    int rc = nds_json_get_string(spec, "bucket", false, "gcs: spec", &bucket);
    if (!rc && !nds_gcs_bucket_ok(bucket, strlen(bucket)))
        rc = nds_err(NDS_EINVAL, "gcs: \"%.80s\" is not a bucket name", bucket);
    if (!rc && !(s->bucket = nds_strdup(bucket))) rc = nds_err(NDS_ENOMEM, "gcs: out of memory");
    if (!rc) rc = parse_endpoint(s, spec, &cfg);
    if (!rc) rc = parse_limits(spec, &concurrency, &project);
    if (!rc && json_object_object_get_ex(spec, "gcs_request_retries", &v)) rc = parse_retries(s, v);
    if (!rc && json_object_object_get_ex(spec, "gcs_request_timeout", &v))
        rc = duration_ms(v, "gcs_request_timeout", &s->timeout_ms);
    json_object *creds;
    if (!rc && json_object_object_get_ex(spec, "credentials", &creds))
        rc = nds_gcs_auth_config_parse(creds, &cfg);
    if (!rc && project) {
        char *ep = nds_http_escape(project, false);
        s->user_project = ep ? nds_asprintf("userProject=%s", ep) : NULL;
        free(ep);
        if (!s->user_project) rc = nds_err(NDS_ENOMEM, "gcs: out of memory");
    }
    nds_http_limits limits;
    if (!rc) rc = nds_http_limits_init(&limits, "gcs_");
    if (!rc) rc = nds_http_limits_parse(&limits, spec, "gcs");
    if (!rc) rc = nds_http_client_new(&s->http, (int)concurrency);
    if (!rc) nds_http_client_set_limits(s->http, &limits);
    if (!rc) rc = nds_gcs_auth_new(&s->auth, &cfg);
    return rc;
}
