/* `ndstore serve URL [--port P] [--bind ADDR] [--threads N]`: the keys of any kvstore (file, lmdb,
 * versioned, s3, gcs, http) over HTTP, read-only, so a viewer such as neuroglancer can open the
 * arrays in it. A key is the URL path less its leading '/'; requests are answered by
 * serve_request.c, HTTP itself by libmicrohttpd.
 *
 * The listening socket is made here (so a bind error names its cause and --port 0 learns its
 * port), then handed to libmicrohttpd, whose pool of --threads threads answers the requests: at
 * most that many store reads run at once, and at most SERVE_CONNECTIONS connections are open.
 * Once listening it prints "http://ADDR:PORT/" on stdout (one line, flushed: scripts wait for it),
 * then waits for SIGINT or SIGTERM, stops the daemon (requests under way finish), frees the port
 * and exits 0.
 * Omits: TLS, authentication, writes (every method but GET, HEAD and OPTIONS is 405), listings.
 * Threading: the main thread only waits for a signal; the signals are blocked before the daemon's
 * threads start, so they inherit the mask and sigwait here receives them.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include "cli.h"
#include "serve.h"

/** Threads (and so store reads at once) when --threads is not given. */
#define SERVE_DEFAULT_THREADS 8
#define SERVE_MAX_THREADS 256
/** Connections open at once; more wait in the listen backlog. Each holds at most one block
 *  (SERVE_BLOCK_BYTES) and one send buffer (SERVE_SEND_BYTES): about 272 MiB at worst. */
#define SERVE_CONNECTIONS 256
/** Seconds an idle connection is kept. */
#define SERVE_IDLE_TIMEOUT 60

static const char usage[] = "ndstore serve URL [--port P] [--bind ADDR] [--threads N]";

static const char help[] =
    "usage: ndstore serve URL [--port P] [--bind ADDR] [--threads N]\n"
    "\n"
    "Serve the keys of a kvstore over HTTP, read-only: GET and HEAD of http://ADDR:PORT/KEY\n"
    "answer the value of KEY (a path ending in '/' answers its index.html). URL is any kvstore\n"
    "URL (file:///d/, a bare path, file:///d/|versioned:, lmdb:///d/db, s3://bucket/p/, ...);\n"
    "an array URL's trailing |FORMAT: is ignored, so the array's keys are served. Byte ranges\n"
    "(one per request) are answered 206 from ranged reads; every response allows any origin\n"
    "(CORS), so neuroglancer on another port can open precomputed://http://ADDR:PORT/... volumes.\n"
    "Prints the URL it listens on once ready; logs one line per request on stderr (method, path,\n"
    "status, body bytes, milliseconds); stops on SIGINT or SIGTERM and exits 0.\n"
    "\n"
    "  -p, --port P       TCP port (default 8080; 0 picks a free one, printed)\n"
    "  -b, --bind ADDR    IPv4 or IPv6 address to listen on (default 127.0.0.1: this machine)\n"
    "  -t, --threads N    threads answering requests, so store reads at once (default 8, 1..256)\n"
    "  -h, --help         show this help\n";

static const struct option options[] = {
    {"port", required_argument, NULL, 'p'},
    {"bind", required_argument, NULL, 'b'},
    {"threads", required_argument, NULL, 't'},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0},
};

typedef struct serve_opts {
    const char *url;
    const char *bind;
    long port;
    long threads;
} serve_opts;

static int parse_options(int argc, char **argv, serve_opts *o) {
    *o = (serve_opts){NULL, "127.0.0.1", 8080, SERVE_DEFAULT_THREADS};
    cli_getopt_reset();
    int c;
    while ((c = getopt_long(argc, argv, ":p:b:t:h", options, NULL)) != -1) {
        switch (c) {
        case 'p':
            if (cli_parse_long(optarg, 0, 65535, &o->port) != 0)
                return cli_usage(usage, "--port '%s' is not a port number (0..65535)", optarg);
            break;
        case 'b': o->bind = optarg; break;
        case 't':
            if (cli_parse_long(optarg, 1, SERVE_MAX_THREADS, &o->threads) != 0)
                return cli_usage(usage, "--threads '%s' is not a number of threads (1..%d)", optarg,
                                 SERVE_MAX_THREADS);
            break;
        case 'h': return cli_help(help) == CLI_OK ? -1 : CLI_FAIL;
        default: return cli_bad_option(usage, argv, c);
        }
    }
    if (optind >= argc)
        return cli_usage(usage, "no URL given");
    if (optind + 1 < argc)
        return cli_usage(usage, "unexpected argument '%s'", argv[optind + 1]);
    o->url = argv[optind];
    return cli_require_spec("URL", o->url);
}

/* ---- the listening socket ---- */

typedef struct listen_addr {
    struct sockaddr_storage sa;
    socklen_t len;
    bool v6;
} listen_addr;

/* Parses --bind (a numeric IPv4 or IPv6 address, no names: what is served is never exposed by a
 * name that resolves elsewhere). CLI_OK or CLI_USAGE. */
static int parse_bind(const char *text, long port, listen_addr *a) {
    memset(a, 0, sizeof *a);
    struct sockaddr_in *v4 = (struct sockaddr_in *)&a->sa;
    struct sockaddr_in6 *v6 = (struct sockaddr_in6 *)&a->sa;
    if (inet_pton(AF_INET, text, &v4->sin_addr) == 1) {
        v4->sin_family = AF_INET;
        v4->sin_port = htons((uint16_t)port);
        a->len = sizeof *v4;
        return CLI_OK;
    }
    if (inet_pton(AF_INET6, text, &v6->sin6_addr) == 1) {
        v6->sin6_family = AF_INET6;
        v6->sin6_port = htons((uint16_t)port);
        a->len = sizeof *v6;
        a->v6 = true;
        return CLI_OK;
    }
    return cli_usage(usage,
                     "--bind '%s' is not a numeric IPv4 or IPv6 address (e.g. 127.0.0.1, ::1)",
                     text);
}

/* Binds and listens on a; *fd receives the socket, *port the port bound. CLI_OK or CLI_FAIL. */
static int open_listener(listen_addr *a, const char *bind_text, int *fd, unsigned *port) {
    int s = socket(a->sa.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (s < 0)
        return cli_fail("serve: socket: %s", strerror(errno));
    int one = 1;
    (void)setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one); /* rebind after a restart */
    if (a->v6)
        (void)setsockopt(s, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof one);
    if (bind(s, (struct sockaddr *)&a->sa, a->len) != 0 || listen(s, 128) != 0) {
        int err = errno;
        close(s);
        unsigned asked = ntohs(a->v6 ? ((struct sockaddr_in6 *)&a->sa)->sin6_port
                                     : ((struct sockaddr_in *)&a->sa)->sin_port);
        return cli_fail("serve: cannot listen on %s port %u: %s", bind_text, asked, strerror(err));
    }
    struct sockaddr_storage got;
    socklen_t len = sizeof got;
    if (getsockname(s, (struct sockaddr *)&got, &len) != 0) {
        int err = errno;
        close(s);
        return cli_fail("serve: getsockname: %s", strerror(err));
    }
    *port = ntohs(a->v6 ? ((struct sockaddr_in6 *)&got)->sin6_port
                        : ((struct sockaddr_in *)&got)->sin_port);
    *fd = s;
    return CLI_OK;
}

/* ---- the store ---- */

/* Opens url's kvstore as a directory ("d/a" serves d/a/KEY, never d/a.bak), an array URL's
 * "|FORMAT:" left out. CLI_OK or CLI_FAIL (printed). */
static int open_store(const char *url, nds_kvstore **out) {
    char kvurl[8192];
    int rc = cli_kvstore_url(url, kvurl, sizeof kvurl, NULL, 0);
    if (rc != CLI_OK)
        return rc;
    nds_kvstore *kv = NULL;
    nds_error_clear();
    int st = nds_kvstore_open(&kv, kvurl, NULL);
    const char *path = st == 0 ? nds_kvstore_path(kv) : "";
    size_t n = strlen(path);
    if (st == 0 && n > 0 && path[n - 1] != '/') {
        nds_kvstore *dir = NULL;
        st = nds_kvstore_sub(&dir, kv, "/");
        nds_kvstore_free(kv);
        kv = dir;
    }
    if (st != 0)
        return cli_fail_nds(st, url);
    *out = kv;
    return CLI_OK;
}

/* Stops a listing at its first key. */
static int first_key(void *ctx, const char *key, uint64_t size) {
    (void)key;
    (void)size;
    *(bool *)ctx = true;
    return 1;
}

/* Warns when kv lists no key at all (a mistyped path serves nothing but 404s). A store that cannot
 * list (http) is not warned about; nor is one whose listing fails: serving may still work. */
static void warn_if_empty(nds_kvstore *kv) {
    bool any = false;
    nds_error_clear();
    int rc = nds_kvstore_list(kv, "", first_key, &any);
    if ((rc == 0 || rc == 1) && !any)
        fprintf(stderr, "ndstore serve: warning: %s holds no keys: every request will be 404\n",
                nds_kvstore_url(kv));
}

/* ---- running ---- */

static struct MHD_Daemon *start_daemon(int fd, bool v6, long threads, serve_site *site) {
    unsigned flags =
        MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_AUTO | MHD_USE_ITC | MHD_USE_ERROR_LOG;
    if (v6)
        flags |= MHD_USE_IPv6;
    return MHD_start_daemon(
        flags, 0, NULL, NULL, serve_answer, site, MHD_OPTION_LISTEN_SOCKET, (MHD_socket)fd,
        MHD_OPTION_THREAD_POOL_SIZE, (unsigned)threads, MHD_OPTION_CONNECTION_LIMIT,
        (unsigned)SERVE_CONNECTIONS, MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)SERVE_IDLE_TIMEOUT,
        MHD_OPTION_UNESCAPE_CALLBACK, serve_keep_escapes, NULL, MHD_OPTION_NOTIFY_COMPLETED,
        serve_completed, site, MHD_OPTION_END);
}

/* Blocks SIGINT and SIGTERM in this thread (and so in the daemon's threads, started after) so that
 * wait_for_stop receives them; SIGPIPE is ignored (a client that hangs up is not fatal). */
static void block_stop_signals(sigset_t *set) {
    sigemptyset(set);
    sigaddset(set, SIGINT);
    sigaddset(set, SIGTERM);
    pthread_sigmask(SIG_BLOCK, set, NULL);
    signal(SIGPIPE, SIG_IGN);
}

static int wait_for_stop(const sigset_t *set) {
    int sig = 0;
    while (sigwait(set, &sig) != 0)
        ;
    return sig;
}

static void print_listening(const char *bind_text, bool v6, unsigned port, const char *url) {
    printf(v6 ? "http://[%s]:%u/\n" : "http://%s:%u/\n", bind_text, port);
    fflush(stdout);
    fprintf(stderr, "ndstore serve: serving %s read-only on port %u (SIGINT or SIGTERM stops)\n",
            url, port);
}

int cli_cmd_serve(int argc, char **argv) {
    serve_opts o;
    int rc = parse_options(argc, argv, &o);
    if (rc != CLI_OK)
        return rc < 0 ? CLI_OK : rc;
    listen_addr addr;
    if ((rc = parse_bind(o.bind, o.port, &addr)) != CLI_OK)
        return rc;
    nds_kvstore *kv = NULL;
    if ((rc = open_store(o.url, &kv)) != CLI_OK)
        return rc;
    sigset_t stop;
    block_stop_signals(&stop);
    int fd = -1;
    unsigned port = 0;
    if ((rc = open_listener(&addr, o.bind, &fd, &port)) != CLI_OK) {
        nds_kvstore_free(kv);
        return rc;
    }
    serve_site site = {kv, !(nds_kvstore_capabilities(kv) & NDS_KV_CAP_LOCAL)};
    struct MHD_Daemon *d = start_daemon(fd, addr.v6, o.threads, &site);
    if (!d) {
        close(fd);
        nds_kvstore_free(kv);
        return cli_fail("serve: the HTTP server did not start on port %u", port);
    }
    warn_if_empty(kv); /* once listening: a command that fails says one line, its error */
    print_listening(o.bind, addr.v6, port, nds_kvstore_url(kv));
    int sig = wait_for_stop(&stop);
    fprintf(stderr, "ndstore serve: %s received, stopping\n", sig == SIGINT ? "SIGINT" : "SIGTERM");
    /* Quiesced, the daemon hands the socket back and accepts no more; stopping it joins the pool
     * (requests under way finish first); only then may the socket be closed. */
    MHD_socket lsock = MHD_quiesce_daemon(d);
    MHD_stop_daemon(d);
    if (lsock != MHD_INVALID_SOCKET)
        close(lsock);
    nds_kvstore_free(kv);
    return CLI_OK;
}
