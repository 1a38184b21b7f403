/* Starting and steering tests/servers/strict_gcs.py (a GCS JSON-API test double on 127.0.0.1) from
 * a Check test's main(). The server runs until nds_test_gcs_stop or the starting process exits
 * (forked test children never stop it). Only the process that started a server stops it.
 */
#ifndef NDS_TEST_SUPPORT_STRICT_GCS_H
#define NDS_TEST_SUPPORT_STRICT_GCS_H

#include <sys/types.h>

typedef struct nds_test_gcs {
    pid_t pid;   /* the python process, 0 when not running */
    pid_t owner; /* the process that started it */
    int port;
    char endpoint[64]; /* "http://127.0.0.1:PORT" */
} nds_test_gcs;

/**
 * Starts the server with the extra arguments args (NULL-terminated; may be NULL) and waits until it
 * listens. The script is $NDS_STRICT_GCS, else tests/servers/strict_gcs.py next to this file's
 * tree.
 * @return 0, or -1 with a message on stderr
 */
int nds_test_gcs_start(nds_test_gcs *s, const char *const *args);
/** Stops a server this process started. Accepts a stopped one. */
void nds_test_gcs_stop(nds_test_gcs *s);
/**
 * Calls a control endpoint ("/_test/faults", "/_test/stats", ...) of the server at endpoint.
 * @return the response body (malloc'd, NUL-terminated) or NULL on a transport failure; *status the
 * HTTP status
 */
char *nds_test_gcs_control(const char *endpoint, const char *method, const char *path,
                           const char *body, long *status);
/** A counter from /_test/stats ("uploads", "tokens_issued", "requests", "faults_fired"), or -1. */
long nds_test_gcs_stat(const char *endpoint, const char *name);
/** Sets the fault rules (a JSON array text, e.g. [{"kind":"503","method":"POST","count":1}]); 0 on
 * success. */
int nds_test_gcs_faults(const char *endpoint, const char *rules_json);

#endif
