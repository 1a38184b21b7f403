/* Starting and steering the strict GCS test double (support_strict_gcs.h). Uses libcurl directly
 * for the control endpoints, so the tests do not depend on the code they test to set up their
 * faults. */
#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "support_strict_gcs.h"

/* The script: $NDS_STRICT_GCS, else ../servers/strict_gcs.py relative to this source file. */
static char *script_path(void) {
    const char *env = getenv("NDS_STRICT_GCS");
    if (env && env[0]) return strdup(env);
    char *src = strdup(__FILE__), *out = NULL;
    if (src && asprintf(&out, "%s/../servers/strict_gcs.py", dirname(src)) < 0) out = NULL;
    free(src);
    return out;
}

/* Reads the port the server wrote, waiting up to 15 s; 0 when it never came. */
static int wait_port(const char *port_file, pid_t pid) {
    for (int i = 0; i < 300; i++) {
        FILE *f = fopen(port_file, "r");
        int port = 0;
        if (f) {
            if (fscanf(f, "%d", &port) != 1) port = 0;
            fclose(f);
            if (port > 0) return port;
        }
        if (waitpid(pid, NULL, WNOHANG) == pid) return 0; /* it died */
        struct timespec ts = {0, 50 * 1000000L};
        nanosleep(&ts, NULL);
    }
    return 0;
}

int nds_test_gcs_start(nds_test_gcs *s, const char *const *args) {
    memset(s, 0, sizeof *s);
    char *script = script_path(), port_file[] = "/tmp/nds-strict-gcs-port.XXXXXX";
    int fd = mkstemp(port_file);
    if (!script || fd < 0) {
        fprintf(stderr, "strict_gcs: cannot set up (%s)\n", strerror(errno));
        free(script);
        return -1;
    }
    close(fd);
    unlink(port_file); /* the server creates it once it listens */
    const char *argv[48] = {"python3", script, "--port-file", port_file};
    size_t n = 4;
    for (size_t i = 0; args && args[i] && n < 46; i++) argv[n++] = args[i];
    argv[n] = NULL;
    pid_t pid = fork();
    if (pid == 0) {
        int null = open("/dev/null", O_WRONLY);
        if (null >= 0) dup2(null, 1);
        execvp("python3", (char *const *)argv);
        _exit(127);
    }
    free(script);
    s->port = pid > 0 ? wait_port(port_file, pid) : 0;
    unlink(port_file);
    if (s->port <= 0) {
        fprintf(stderr, "strict_gcs: the server did not start\n");
        if (pid > 0) kill(pid, SIGKILL), waitpid(pid, NULL, 0);
        return -1;
    }
    s->pid = pid;
    s->owner = getpid();
    snprintf(s->endpoint, sizeof s->endpoint, "http://127.0.0.1:%d", s->port);
    return 0;
}

void nds_test_gcs_stop(nds_test_gcs *s) {
    if (!s->pid || s->owner != getpid()) return;
    kill(s->pid, SIGTERM);
    waitpid(s->pid, NULL, 0);
    s->pid = 0;
}

static size_t collect(char *p, size_t size, size_t n, void *ctx) {
    char **buf = ctx;
    size_t old = *buf ? strlen(*buf) : 0;
    char *grown = realloc(*buf, old + size * n + 1);
    if (!grown) return 0;
    memcpy(grown + old, p, size * n);
    grown[old + size * n] = '\0';
    *buf = grown;
    return size * n;
}

char *nds_test_gcs_control(const char *endpoint, const char *method, const char *path,
                           const char *body, long *status) {
    CURL *c = curl_easy_init();
    char url[256], *out = calloc(1, 1);
    snprintf(url, sizeof url, "%s%s", endpoint, path);
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
    if (body) curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, collect);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &out);
    curl_easy_setopt(c, CURLOPT_TIMEOUT, 10L);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    CURLcode rc = curl_easy_perform(c);
    *status = 0;
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, status);
    curl_easy_cleanup(c);
    if (rc != CURLE_OK) {
        free(out);
        return NULL;
    }
    return out;
}

long nds_test_gcs_stat(const char *endpoint, const char *name) {
    long status, value = -1;
    char *body = nds_test_gcs_control(endpoint, "GET", "/_test/stats", NULL, &status), key[64];
    snprintf(key, sizeof key, "\"%s\": ", name);
    const char *p = body ? strstr(body, key) : NULL;
    if (p) value = strtol(p + strlen(key), NULL, 10);
    free(body);
    return value;
}

int nds_test_gcs_faults(const char *endpoint, const char *rules_json) {
    char *body = NULL;
    long status = 0;
    if (asprintf(&body, "{\"rules\": %s}", rules_json) < 0) return -1;
    char *resp = nds_test_gcs_control(endpoint, "POST", "/_test/faults", body, &status);
    free(body);
    free(resp);
    return resp && status == 200 ? 0 : -1;
}
