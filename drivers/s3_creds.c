/* Credentials of the s3 driver, in the order the AWS tools use (the part of it ndstore implements):
 *   1. spec "aws_credentials": {"type": "anonymous"} forces unsigned requests;
 *      {"type": "profile", "profile": "name"} reads that profile only; {"type": "environment"} the
 *      environment only; {"type": "default"} (or no member) the chain below;
 *   2. AWS_ACCESS_KEY_ID + AWS_SECRET_ACCESS_KEY (+ AWS_SESSION_TOKEN);
 *   3. the profile AWS_PROFILE (else "default") of AWS_SHARED_CREDENTIALS_FILE (else
 * ~/.aws/credentials);
 *   4. anonymous.
 * Omits: ~/.aws/config credential_process / SSO / assume-role, EC2/ECS instance metadata.
 *
 * Secrets are never copied into messages; the buffers holding them are wiped when freed.
 * Threading: called once per open. Ownership: s3_creds owns its strings.
 */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>
#include <openssl/crypto.h>

#include "s3_internal.h"
#include "http_multi.h"
#include "internal/error.h"
#include "internal/json_util.h"
#include "internal/util.h"

#define S3_CREDENTIALS_MAX (1u << 20)

static void wipe_free(char *p) {
    if (p) {
        OPENSSL_cleanse(p, strlen(p));
        free(p);
    }
}

void s3_creds_free(s3_creds *c) {
    wipe_free(c->access_key);
    wipe_free(c->secret_key);
    wipe_free(c->session_token);
    memset(c, 0, sizeof *c);
}

static int set_keys(s3_creds *c, const char *ak, const char *sk, const char *token,
                    const char *source) {
    c->access_key = nds_strdup(ak);
    c->secret_key = nds_strdup(sk);
    c->session_token = token && *token ? nds_strdup(token) : NULL;
    snprintf(c->source, sizeof c->source, "%s", source);
    if (!c->access_key || !c->secret_key || (token && *token && !c->session_token)) {
        s3_creds_free(c);
        return nds_err(NDS_ENOMEM, "s3: out of memory loading credentials");
    }
    return 0;
}

/* 1 when found in the environment, 0 when not set, or an error when half set. */
static int from_env(s3_creds *c) {
    const char *ak = getenv("AWS_ACCESS_KEY_ID"), *sk = getenv("AWS_SECRET_ACCESS_KEY");
    if ((!ak || !*ak) && (!sk || !*sk)) return 0;
    if (!ak || !*ak || !sk || !*sk)
        return nds_err(NDS_EINVAL, "s3: %s is set but %s is not",
                       ak && *ak ? "AWS_ACCESS_KEY_ID" : "AWS_SECRET_ACCESS_KEY",
                       ak && *ak ? "AWS_SECRET_ACCESS_KEY" : "AWS_ACCESS_KEY_ID");
    int rc = set_keys(c, ak, sk, getenv("AWS_SESSION_TOKEN"), "environment");
    return rc ? rc : 1;
}

static char *trim(char *s) {
    while (isspace((unsigned char)*s)) s++;
    char *e = s + strlen(s);
    while (e > s && isspace((unsigned char)e[-1])) *--e = '\0';
    return s;
}

typedef struct profile_keys {
    char *ak, *sk, *token;
} profile_keys;

/* Parses one "name = value" line of the wanted section into k. */
static int profile_line(char *line, profile_keys *k) {
    char *eq = strchr(line, '=');
    if (!eq) return 0;
    *eq = '\0';
    char *name = trim(line), *value = trim(eq + 1);
    char **slot = strcmp(name, "aws_access_key_id") == 0       ? &k->ak
                  : strcmp(name, "aws_secret_access_key") == 0 ? &k->sk
                  : strcmp(name, "aws_session_token") == 0     ? &k->token
                                                               : NULL;
    if (!slot) return 0;
    wipe_free(*slot);
    *slot = nds_strdup(value);
    return *slot ? 0 : NDS_ENOMEM;
}

/* Reads section [profile] of the INI file at path into k. The file must be a regular file of at
 * most S3_CREDENTIALS_MAX bytes (a FIFO or /dev/zero named by AWS_SHARED_CREDENTIALS_FILE fails at
 * once). @return 1 found, 0 no file/section, or error */
static int read_profile(const char *path, const char *profile, profile_keys *k) {
    char *text = NULL;
    size_t len = 0;
    int rc = nds_read_secret_file(path, S3_CREDENTIALS_MAX, "s3: credentials file", &text, &len);
    if (rc == NDS_ENOTFOUND) return 0;
    if (rc) return rc;
    bool in = false, found = false;
    for (char *line = text, *next; rc == 0 && line < text + len; line = next) {
        char *nl = memchr(line, '\n', (size_t)(text + len - line));
        next = nl ? nl + 1 : text + len;
        if (nl) *nl = '\0';
        char *t = trim(line);
        if (*t == '#' || *t == ';' || !*t) continue;
        if (*t == '[') {
            char *close = strchr(t, ']');
            if (close) *close = '\0';
            char *name = trim(t + 1);
            if (strncmp(name, "profile ", 8) == 0) name = trim(name + 8);
            in = strcmp(name, profile) == 0;
            found |= in;
            continue;
        }
        if (in) rc = profile_line(t, k);
    }
    OPENSSL_cleanse(text, len);
    free(text);
    if (rc) return nds_err(NDS_ENOMEM, "s3: out of memory reading %s", path);
    return found ? 1 : 0;
}

/* 1 when the profile gave keys, 0 when absent (and not required), or an error. */
static int from_profile(s3_creds *c, const char *profile, bool required) {
    const char *file = getenv("AWS_SHARED_CREDENTIALS_FILE");
    char *path = NULL;
    if (file && *file) {
        path = nds_strdup(file);
    } else {
        const char *home = getenv("HOME");
        if (!home || !*home) {
            if (required) return nds_err(NDS_EINVAL, "s3: no HOME to find ~/.aws/credentials");
            return 0;
        }
        path = nds_asprintf("%s/.aws/credentials", home);
    }
    if (!path) return nds_err(NDS_ENOMEM, "s3: out of memory");
    profile_keys k = {0};
    int rc = read_profile(path, profile, &k);
    if (rc == 1 && (!k.ak || !k.sk || !*k.ak || !*k.sk))
        rc = nds_err(NDS_EINVAL,
                     "s3: profile \"%s\" of %s lacks aws_access_key_id or aws_secret_access_key",
                     profile, path);
    if (rc == 1) {
        char source[64];
        snprintf(source, sizeof source, "profile %.50s", profile);
        rc = set_keys(c, k.ak, k.sk, k.token, source);
        rc = rc ? rc : 1;
    } else if (rc == 0 && required) {
        rc = nds_err(NDS_ENOTFOUND, "s3: profile \"%s\" not found in %s", profile, path);
    }
    wipe_free(k.ak);
    wipe_free(k.sk);
    wipe_free(k.token);
    free(path);
    return rc;
}

static void set_anonymous(s3_creds *c) {
    c->anonymous = true;
    snprintf(c->source, sizeof c->source, "anonymous");
}

int s3_creds_load(s3_creds *c, const struct json_object *spec_creds) {
    memset(c, 0, sizeof *c);
    const char *type = "default", *profile = NULL;
    const char *doc = "s3 spec member \"aws_credentials\"";
    if (spec_creds) {
        if (!json_object_is_type(spec_creds, json_type_object))
            return nds_err(NDS_EINVAL, "%s must be an object like {\"type\": \"anonymous\"}", doc);
        int rc = nds_json_get_string(spec_creds, "type", true, doc, &type);
        if (!rc) rc = nds_json_get_string(spec_creds, "profile", true, doc, &profile);
        if (rc) return s3_spec_error(rc);
        json_object_object_foreach((json_object *)spec_creds, k, v) {
            (void)v;
            if (strcmp(k, "type") != 0 && strcmp(k, "profile") != 0)
                return nds_err(NDS_EINVAL,
                               "%s: unknown member \"%s\" (secrets are never accepted in a spec; "
                               "use the environment or ~/.aws/credentials)",
                               doc, k);
        }
    }
    const char *env_profile = getenv("AWS_PROFILE");
    const char *want = profile ? profile : env_profile && *env_profile ? env_profile : "default";
    if (strcmp(type, "anonymous") == 0) {
        set_anonymous(c);
        return 0;
    }
    if (strcmp(type, "environment") == 0) {
        int rc = from_env(c);
        if (rc == 0)
            rc = nds_err(
                NDS_EINVAL,
                "s3: aws_credentials type \"environment\" but AWS_ACCESS_KEY_ID is not set");
        return rc < 0 ? rc : 0;
    }
    if (strcmp(type, "profile") == 0) {
        int rc = from_profile(c, want, true);
        return rc < 0 ? rc : 0;
    }
    if (strcmp(type, "default") != 0)
        return nds_err(NDS_EINVAL,
                       "%s: type must be default, environment, profile or anonymous, not \"%s\"",
                       doc, type);
    int rc = from_env(c);
    if (rc == 0) rc = from_profile(c, want, profile != NULL || (env_profile && *env_profile));
    if (rc == 0) set_anonymous(c);
    return rc < 0 ? rc : 0;
}
