/* The process-wide table of open LMDB environments and the management of their maps: see
 * lmdb_env.h. Lock order: g_mu (the table) is never held while taking an environment's mu, and mu
 * is held only around counters and the remap itself. g_mu is held while an environment is opened
 * (its first write transaction included), so two threads never open one directory twice. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <time.h>
#include <unistd.h>

#include "ndstore/errors.h"
#include "internal/util.h"
#include "lmdb_env.h"

/* How long a resize waits for this process's transactions and reads to leave the map. */
#define LM_REMAP_WAIT_NS (UINT64_C(5) * 1000000000)
/* How long a transaction waits for a free reader slot. */
#define LM_READERS_WAIT_NS (UINT64_C(1) * 1000000000)

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER; /* guards g_envs and every refs */
static nds_lmdb_env *g_envs;
static pthread_once_t g_atfork_once = PTHREAD_ONCE_INIT;

/* How far past the end of the map a damaged page can make LMDB read (a node's offset and key size
 * are 16-bit each): a SIGSEGV that far past it while guarded is taken for corruption. */
#define LM_MAP_SLOP ((size_t)1 << 20)
/* Addresses below this are never mapped (Linux's default vm.mmap_min_addr). */
#define LM_NULL_PAGE ((uintptr_t)1 << 16)

/* ---- errors ---- */

/* The one place LMDB codes (its own and errnos) become statuses. */
static int lm_code(int rc) {
    switch (rc) {
    case MDB_NOTFOUND: case ENOENT: case ENOTDIR: return NDS_ENOTFOUND;
    case MDB_KEYEXIST: return NDS_EEXIST;
    case MDB_MAP_FULL: case MDB_READERS_FULL: case MDB_TXN_FULL: case MDB_CURSOR_FULL:
    case MDB_PAGE_FULL: case MDB_DBS_FULL: case MDB_TLS_FULL: case ENOSPC: case EDQUOT: case EFBIG:
        return NDS_ELIMIT;
    case MDB_BAD_VALSIZE: case EINVAL: return NDS_EINVAL;
    case MDB_CORRUPTED: case MDB_PAGE_NOTFOUND: case MDB_INVALID: return NDS_ECORRUPT;
    case MDB_VERSION_MISMATCH: return NDS_EUNSUPPORTED;
    case MDB_INCOMPATIBLE: return NDS_EFORMAT;
    case MDB_BAD_RSLOT: case MDB_BAD_TXN: case MDB_BAD_DBI: return NDS_EINTERNAL;
    case EACCES: case EPERM: return NDS_EPERM;
    case ENOMEM: return NDS_ENOMEM;
    case EROFS: return NDS_EREADONLY;
    default: return NDS_EIO; /* MDB_PANIC, MDB_MAP_RESIZED, EIO, ... */
    }
}

/* Sets "lmdb: <formatted>: <mdb_strerror>" with the LMDB code as cause; returns the status. */
int nds_lmdb_err(int rc, const char *fmt, ...) {
    char msg[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return nds_err_cause(lm_code(rc), NDS_CAUSE_MDB, rc, "lmdb: %s: %s", msg, mdb_strerror(rc));
}

/* ---- guarding LMDB against corrupt files ---- */

/* One nds_lmdb_guarded call on this thread: where to jump back to. */
typedef struct lm_guard {
    sigjmp_buf jump;
    const nds_lmdb_env *e;
    struct lm_guard *outer; /* the guard this one nests in, or NULL */
} lm_guard;

/* Initial-exec: the handler must not make the dynamic loader allocate a TLS block. */
static __thread lm_guard *t_guard __attribute__((tls_model("initial-exec")));
static __thread int t_fault_sig __attribute__((tls_model("initial-exec"))); /* 0: an assertion */
static __thread char t_fault_msg[200] __attribute__((tls_model("initial-exec")));

/* The handlers in place before ours (g_mu), and how many environments are open to need ours. */
static struct sigaction g_old_bus, g_old_segv;
static int g_handler_users;

/* A fault address belongs to the guarded environment's map (SIGSEGV: or just past it, or near
 * NULL). */
static bool lm_in_map(const lm_guard *g, int sig, const void *addr) {
    const char *a = addr, *map = g->e->map_addr;
    size_t size = g->e->map_size + (sig == SIGSEGV ? LM_MAP_SLOP : 0);
    /* A damaged node flag can send LMDB through a NULL member (a sub-database cursor the
     * database does not have): the first 64 KiB are never mapped (vm.mmap_min_addr). */
    if (sig == SIGSEGV && (uintptr_t)a < LM_NULL_PAGE)
        return true;
    if (!map) /* map not found: only the mapped file can raise SIGBUS in a guarded call */
        return sig == SIGBUS;
    return a >= map && (size_t)(a - map) < size;
}

static void lm_jump(lm_guard *g, int sig) {
    t_fault_sig = sig;
    t_guard = g->outer;
    siglongjmp(g->jump, 1);
}

/* Passes a fault that is not ours to the handler installed before ours. A default action is
 * restored and the faulting instruction runs again (a sent signal is raised again). */
static void lm_forward(int sig, siginfo_t *si, void *uc) {
    const struct sigaction *old = sig == SIGBUS ? &g_old_bus : &g_old_segv;
    if (old->sa_flags & SA_SIGINFO) {
        old->sa_sigaction(sig, si, uc);
        return;
    }
    if (old->sa_handler != SIG_DFL && old->sa_handler != SIG_IGN) {
        old->sa_handler(sig);
        return;
    }
    struct sigaction dfl;
    memset(&dfl, 0, sizeof dfl);
    dfl.sa_handler = SIG_DFL;
    sigaction(sig, &dfl, NULL);
    if (si->si_code <= 0)
        raise(sig);
}

static void lm_on_fault(int sig, siginfo_t *si, void *uc) {
    lm_guard *g = t_guard;
    if (g && lm_in_map(g, sig, si->si_addr))
        lm_jump(g, sig);
    lm_forward(sig, si, uc);
}

/* LMDB calls this on a failed assertion, then abort()s: only a jump can avoid the abort. */
static void lm_on_assert(MDB_env *env, const char *msg) {
    (void)env;
    lm_guard *g = t_guard;
    if (!g)
        return; /* an LMDB call outside every guard: nothing to return to */
    snprintf(t_fault_msg, sizeof t_fault_msg, "%s", msg);
    lm_jump(g, 0);
}

/* Installs the fault handler for the first open environment (g_mu held). SA_NODEFER: the jump
 * leaves the handler without sigreturn, and the signal must not stay blocked. */
static int lm_handler_acquire(void) {
    if (g_handler_users++ > 0)
        return 0;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = lm_on_fault;
    sa.sa_flags = SA_SIGINFO | SA_NODEFER | SA_ONSTACK;
    sigemptyset(&sa.sa_mask);
    if (sigaction(SIGBUS, &sa, &g_old_bus) == 0 && sigaction(SIGSEGV, &sa, &g_old_segv) == 0)
        return 0;
    int err = errno;
    sigaction(SIGBUS, &g_old_bus, NULL);
    g_handler_users--;
    return nds_err_errno(err, "lmdb: install the SIGBUS handler");
}

/* Puts the previous handlers back when the last environment closes (g_mu held), unless someone
 * installed another handler over ours since. */
static void lm_handler_release(void) {
    if (--g_handler_users > 0)
        return;
    static const int sigs[2] = {SIGBUS, SIGSEGV};
    for (int i = 0; i < 2; i++) {
        struct sigaction cur;
        if (sigaction(sigs[i], NULL, &cur) == 0 && (cur.sa_flags & SA_SIGINFO) &&
            cur.sa_sigaction == lm_on_fault)
            sigaction(sigs[i], sigs[i] == SIGBUS ? &g_old_bus : &g_old_segv, NULL);
    }
}

int nds_lmdb_guarded(nds_lmdb_env *e, int (*fn)(void *arg), void *arg, const char *what) {
    lm_guard g;
    g.e = e;
    g.outer = t_guard;
    if (sigsetjmp(g.jump, 0) != 0) {
        if (t_fault_sig == 0)
            return nds_err(NDS_ECORRUPT, "lmdb: %s in %s: data.mdb is corrupt (LMDB assertion "
                           "failed: %s)", what, e->canon, t_fault_msg);
        return nds_err(NDS_ECORRUPT, "lmdb: %s in %s: data.mdb is corrupt (%s reading the map: a "
                       "damaged page points past the file)", what, e->canon,
                       t_fault_sig == SIGBUS ? "SIGBUS" : "SIGSEGV");
    }
    t_guard = &g;
    int rc = fn(arg);
    t_guard = g.outer;
    return rc;
}

void nds_lmdb_mark_broken(nds_lmdb_env *e) {
    pthread_mutex_lock(&e->mu);
    e->broken = true;
    pthread_mutex_unlock(&e->mu);
}

/* The file size and the bytes the newest meta page needs. @return 0 or an errno / LMDB code */
static int lm_sizes(nds_lmdb_env *e, uint64_t *file, uint64_t *need) {
    MDB_envinfo info;
    MDB_stat st;
    mdb_filehandle_t fd;
    struct stat sb;
    int rc = mdb_env_info(e->env, &info);
    if (rc == 0)
        rc = mdb_env_stat(e->env, &st);
    if (rc == 0)
        rc = mdb_env_get_fd(e->env, &fd);
    if (rc == 0 && fstat(fd, &sb) != 0)
        rc = errno;
    if (rc == 0) {
        *file = (uint64_t)sb.st_size;
        *need = ((uint64_t)info.me_last_pgno + 1) * st.ms_psize;
    }
    return rc;
}

int nds_lmdb_check_size(nds_lmdb_env *e) {
    uint64_t file, need;
    int rc = lm_sizes(e, &file, &need);
    if (rc)
        return nds_lmdb_err(rc, "size of data.mdb in %s", e->canon);
    atomic_store_explicit(&e->file_size, file, memory_order_relaxed);
    if (file < need)
        return nds_err(NDS_ECORRUPT, "lmdb: data.mdb in %s is corrupt: %llu bytes, but its meta "
                       "page needs %llu (the file was truncated)", e->canon,
                       (unsigned long long)file, (unsigned long long)need);
    return 0;
}

/* data.mdb's size as last seen, looked at again when a value reaches past it (the file only
 * grows while the environment is sound). */
static uint64_t lm_file_size(nds_lmdb_env *e, uint64_t end) {
    uint64_t size = atomic_load_explicit(&e->file_size, memory_order_relaxed);
    mdb_filehandle_t fd;
    struct stat sb;
    if (end > size && mdb_env_get_fd(e->env, &fd) == 0 && fstat(fd, &sb) == 0) {
        size = (uint64_t)sb.st_size;
        atomic_store_explicit(&e->file_size, size, memory_order_relaxed);
    }
    return size;
}

int nds_lmdb_check_val(nds_lmdb_env *e, const MDB_val *v, bool file_too, const char *key) {
    const char *p = v->mv_data, *map = e->map_addr;
    if (!map) /* map not found (no /proc): the guard is all there is */
        return 0;
    size_t off = p >= map ? (size_t)(p - map) : 0;
    bool inside = p >= map && off <= e->map_size && v->mv_size <= e->map_size - off;
    if (inside && file_too)
        inside = off + v->mv_size <= lm_file_size(e, off + v->mv_size);
    if (inside)
        return 0;
    return nds_err(NDS_ECORRUPT, "lmdb: %s in %s: data.mdb is corrupt: a value of %zu bytes "
                   "reaches past the %s", key, e->canon, v->mv_size,
                   file_too ? "end of the file" : "map");
}

/* ---- the map: users and resizes ---- */

static const char *lm_find_map(nds_lmdb_env *e);

static void lm_deadline(struct timespec *ts, uint64_t ns) {
    clock_gettime(CLOCK_MONOTONIC, ts);
    uint64_t t = (uint64_t)ts->tv_nsec + ns % 1000000000;
    ts->tv_sec += (time_t)(ns / 1000000000 + t / 1000000000);
    ts->tv_nsec = (long)(t % 1000000000);
}

/* Registers a user of the map (waiting while a resize is pending); *seen gets the map size. */
static void lm_use_begin(nds_lmdb_env *e, size_t *seen) {
    pthread_mutex_lock(&e->mu);
    while (e->resizing)
        pthread_cond_wait(&e->cv, &e->mu);
    e->active++;
    *seen = e->map_size;
    pthread_mutex_unlock(&e->mu);
}

void nds_lmdb_use_end(nds_lmdb_env *e) {
    pthread_mutex_lock(&e->mu);
    if (--e->active == 0)
        pthread_cond_broadcast(&e->cv);
    pthread_mutex_unlock(&e->mu);
}

/* Remaps e to size bytes (0: adopt what another process set) once no transaction or zero-copy read
 * of this process uses the map. seen is the size the caller's failed transaction ran with: when the
 * map changed since, another thread already did the work and the caller just retries. */
static int lm_remap(nds_lmdb_env *e, size_t seen, size_t size) {
    pthread_mutex_lock(&e->mu);
    while (e->map_size == seen && e->resizing)
        pthread_cond_wait(&e->cv, &e->mu);
    if (e->map_size != seen) {
        pthread_mutex_unlock(&e->mu);
        return 0;
    }
    e->resizing = true;
    struct timespec until;
    lm_deadline(&until, LM_REMAP_WAIT_NS);
    while (e->active > 0 && pthread_cond_timedwait(&e->cv, &e->mu, &until) != ETIMEDOUT) {
    }
    int rc = 0, busy = e->active;
    MDB_envinfo info;
    if (busy == 0 && (rc = mdb_env_set_mapsize(e->env, size)) == 0 &&
        (rc = mdb_env_info(e->env, &info)) == 0) {
        e->map_size = info.me_mapsize;
        e->map_addr = lm_find_map(e);
    }
    e->resizing = false;
    pthread_cond_broadcast(&e->cv);
    pthread_mutex_unlock(&e->mu);
    if (busy)
        return nds_err(NDS_ELIMIT, "lmdb: map of %s must be resized but %d reads of this process "
                       "still hold it (dispose read results sooner)", e->canon, busy);
    return rc ? nds_lmdb_err(rc, "resize map of %s to %zu bytes", e->canon, size) : 0;
}

/* Doubles the map after MDB_MAP_FULL (up to max_map). */
int nds_lmdb_grow(nds_lmdb_env *e, size_t seen) {
    if (seen >= e->max_map)
        return nds_err_cause(NDS_ELIMIT, NDS_CAUSE_MDB, MDB_MAP_FULL,
                             "lmdb: %s is full: map reached max_map_size (%zu bytes)", e->canon,
                             e->max_map);
    return lm_remap(e, seen, seen > e->max_map / 2 ? e->max_map : seen * 2);
}

/* See lmdb_env.h. MDB_MAP_RESIZED: adopt the size another process set, retry. MDB_READERS_FULL:
 * clear the slots of dead processes (mdb_reader_check), retry, and give live readers a while. */
int nds_lmdb_txn_begin(nds_lmdb_env *e, unsigned flags, MDB_txn **txn, size_t *seen) {
    uint64_t until = 0;
    pthread_mutex_lock(&e->mu);
    bool broken = e->broken;
    pthread_mutex_unlock(&e->mu);
    if (!(flags & MDB_RDONLY) && broken)
        return nds_err(NDS_ECORRUPT, "lmdb: %s is corrupt (a write transaction of this process "
                       "met a damaged page): no more writes until it is reopened", e->canon);
    for (int attempt = 0;; attempt++) {
        lm_use_begin(e, seen);
        int rc = mdb_txn_begin(e->env, NULL, flags, txn);
        if (rc == 0)
            return 0;
        nds_lmdb_use_end(e);
        if (rc == MDB_MAP_RESIZED && attempt < 16) {
            if ((rc = lm_remap(e, *seen, 0)) != 0)
                return rc;
            continue;
        }
        if (rc != MDB_READERS_FULL)
            return nds_lmdb_err(rc, "begin transaction on %s", e->canon);
        int dead = 0;
        mdb_reader_check(e->env, &dead);
        if (until == 0)
            until = nds_now_ns() + LM_READERS_WAIT_NS;
        if (dead == 0 && nds_now_ns() > until)
            return nds_lmdb_err(rc, "all reader slots of %s in use (raise max_readers, dispose "
                                "read results sooner)", e->canon);
        if (dead == 0)
            nds_sleep_ns(1000000);
    }
}

/* ---- the environment table ---- */

static void lm_atfork_prepare(void) { pthread_mutex_lock(&g_mu); }
static void lm_atfork_after(void) { pthread_mutex_unlock(&g_mu); }
static void lm_atfork_register(void) {
    pthread_atfork(lm_atfork_prepare, lm_atfork_after, lm_atfork_after);
}

/* mkdir -p of dir. @return 0 or an errno */
static int lm_mkdirs(const char *dir) {
    char *p = nds_strdup(dir);
    if (!p)
        return ENOMEM;
    int err = 0;
    for (char *s = p + 1; err == 0; s++) {
        bool end = *s == '\0';
        if (*s != '/' && !end)
            continue;
        *s = '\0';
        if (mkdir(p, 0777) != 0 && errno != EEXIST)
            err = errno;
        if (end)
            break;
        *s = '/';
    }
    free(p);
    return err;
}

/* lm_env_init's transaction, where a guard that cuts it short leaves it for the caller. */
typedef struct lm_init {
    nds_lmdb_env *e;
    MDB_txn *txn;
    int mrc; /* LMDB code */
} lm_init;

/* Opens the databases and reads (or sets) env_id in one write transaction (fn of a guard). */
static int lm_env_init_fn(void *arg) {
    lm_init *in = arg;
    nds_lmdb_env *e = in->e;
    int rc = mdb_txn_begin(e->env, NULL, 0, &in->txn);
    if (rc) {
        in->txn = NULL;
        in->mrc = rc;
        return 0;
    }
    MDB_txn *txn = in->txn;
    MDB_val k = {6, "env_id"}, v;
    uint8_t id[8];
    if ((rc = mdb_dbi_open(txn, "data", MDB_CREATE, &e->data)) == 0 &&
        (rc = mdb_dbi_open(txn, "meta", MDB_CREATE, &e->meta)) == 0 &&
        (rc = mdb_get(txn, e->meta, &k, &v)) == MDB_NOTFOUND) {
        uint64_t r = nds_random_u64();
        for (int i = 0; i < 8; i++)
            id[i] = (uint8_t)(r >> (56 - 8 * i));
        v = (MDB_val){8, id};
        rc = mdb_put(txn, e->meta, &k, &v, 0);
    }
    if (rc == 0 && v.mv_size != 8)
        rc = MDB_INCOMPATIBLE;
    for (int i = 0; rc == 0 && i < 8; i++)
        e->env_id = e->env_id << 8 | ((const uint8_t *)v.mv_data)[i];
    if (rc == 0)
        rc = mdb_txn_commit(txn);
    else
        mdb_txn_abort(txn);
    in->txn = NULL;
    in->mrc = rc;
    return 0;
}

/* lm_env_init_fn under a guard. @return 0 or an LMDB code; -1 with *nds = NDS_ECORRUPT when the
 * guard cut it short */
static int lm_env_init(nds_lmdb_env *e, int *nds) {
    lm_init in = {e, NULL, 0};
    if ((*nds = nds_lmdb_guarded(e, lm_env_init_fn, &in, "open")) == 0)
        return in.mrc;
    if (in.txn)
        mdb_txn_abort(in.txn); /* cut short: only release it */
    return -1;
}

/* Where data.mdb is mapped: its mapping at offset 0 in /proc/self/maps (LMDB does not say:
 * me_mapaddr is the address asked for with MDB_FIXEDMAP). NULL when not found. */
static const char *lm_find_map(nds_lmdb_env *e) {
    mdb_filehandle_t fd;
    struct stat sb;
    FILE *f = NULL;
    if (mdb_env_get_fd(e->env, &fd) != 0 || fstat(fd, &sb) != 0 ||
        !(f = fopen("/proc/self/maps", "re")))
        return NULL;
    char line[1024];
    const char *found = NULL;
    while (!found && fgets(line, sizeof line, f)) {
        unsigned long start, end, off, ino;
        unsigned maj, min;
        if (sscanf(line, "%lx-%lx %*s %lx %x:%x %lu", &start, &end, &off, &maj, &min, &ino) == 6 &&
            off == 0 && ino == (unsigned long)sb.st_ino && maj == major(sb.st_dev) &&
            min == minor(sb.st_dev))
            found = (const char *)(uintptr_t)start;
    }
    fclose(f);
    return found;
}

/* Takes the map's address and size into e. @return an LMDB code */
static int lm_map_info(nds_lmdb_env *e) {
    MDB_envinfo info;
    int rc = mdb_env_info(e->env, &info);
    if (rc == 0) {
        e->map_size = info.me_mapsize;
        e->map_addr = lm_find_map(e);
    }
    return rc;
}

/* Creates and opens an MDB_env for canon. @return 0 or an LMDB code; *nds: an NDS_E* status
 * already set (a corrupt file), else 0 */
static int lm_env_open(nds_lmdb_env *e, const nds_lmdb_options *o, int *nds) {
    *nds = 0;
    int rc = mdb_env_create(&e->env);
    if (rc)
        return rc;
    unsigned flags = MDB_NOTLS | (o->nosync ? MDB_NOSYNC : 0);
    if ((rc = mdb_env_set_maxreaders(e->env, (unsigned)o->max_readers)) == 0 &&
        (rc = mdb_env_set_maxdbs(e->env, 2)) == 0 &&
        (rc = mdb_env_set_assert(e->env, lm_on_assert)) == 0 &&
        (rc = mdb_env_set_mapsize(e->env, (size_t)o->map_size)) == 0 &&
        (rc = mdb_env_open(e->env, e->canon, flags, 0666)) == 0 && (rc = lm_map_info(e)) == 0 &&
        (rc = (*nds = nds_lmdb_check_size(e)) ? -1 : 0) == 0) {
        int dead = 0;
        mdb_reader_check(e->env, &dead); /* slots left by killed processes */
        e->max_key = mdb_env_get_maxkeysize(e->env);
        rc = lm_env_init(e, nds);
        /* init may have grown past map_size when another process had grown it (MDB_MAP_RESIZED) */
        if (rc == MDB_MAP_RESIZED && (rc = mdb_env_set_mapsize(e->env, 0)) == 0 &&
            (rc = lm_map_info(e)) == 0)
            rc = lm_env_init(e, nds);
        if (rc == 0)
            rc = lm_map_info(e);
    }
    if (rc)
        mdb_env_close(e->env);
    return rc;
}

static void lm_env_free(nds_lmdb_env *e) {
    pthread_mutex_destroy(&e->mu);
    pthread_cond_destroy(&e->cv);
    free(e->canon);
    free(e);
}

static nds_lmdb_env *lm_env_new(const char *canon, const nds_lmdb_options *o) {
    nds_lmdb_env *e = calloc(1, sizeof *e);
    pthread_condattr_t ca;
    if (!e || !(e->canon = nds_strdup(canon))) {
        free(e);
        return NULL;
    }
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&e->cv, &ca);
    pthread_condattr_destroy(&ca);
    pthread_mutex_init(&e->mu, NULL);
    e->pid = getpid();
    e->refs = 1;
    e->max_map = (size_t)o->max_map;
    return e;
}

/* Finds or opens the environment at dir (created on demand) and takes a reference. The first opener
 * in a process sets the options; later opens share its environment as it is. */
int nds_lmdb_env_acquire(const char *dir, const nds_lmdb_options *o, nds_lmdb_env **out) {
    pthread_once(&g_atfork_once, lm_atfork_register);
    int err = lm_mkdirs(dir);
    char *canon = err ? NULL : realpath(dir, NULL);
    if (!canon)
        return nds_err_errno(err ? err : errno, "lmdb: create environment directory %s", dir);
    pthread_mutex_lock(&g_mu);
    nds_lmdb_env *e = g_envs;
    while (e && (e->pid != getpid() || strcmp(e->canon, canon) != 0))
        e = e->next;
    int rc = 0;
    if (e) {
        e->refs++;
    } else if (!(e = lm_env_new(canon, o))) {
        rc = nds_err(NDS_ENOMEM, "lmdb: out of memory opening %s", dir);
    } else if ((rc = lm_handler_acquire()) != 0) {
        lm_env_free(e);
        e = NULL;
    } else if ((err = lm_env_open(e, o, &rc)) != 0) {
        if (rc == 0)
            rc = nds_lmdb_err(err, "open environment %s", canon);
        lm_handler_release();
        lm_env_free(e);
        e = NULL;
    } else {
        e->next = g_envs;
        g_envs = e;
    }
    pthread_mutex_unlock(&g_mu);
    free(canon);
    *out = e;
    return rc;
}

void nds_lmdb_env_ref(nds_lmdb_env *e) {
    pthread_mutex_lock(&g_mu);
    e->refs++;
    pthread_mutex_unlock(&g_mu);
}

/* Drops a reference; the last one closes the environment (never one inherited through fork). */
void nds_lmdb_env_release(nds_lmdb_env *e) {
    pthread_mutex_lock(&g_mu);
    bool last = --e->refs == 0;
    if (last) {
        nds_lmdb_env **p = &g_envs;
        while (*p != e)
            p = &(*p)->next;
        *p = e->next;
        if (e->pid == getpid())
            lm_handler_release();
    }
    pthread_mutex_unlock(&g_mu);
    if (!last || e->pid != getpid())
        return;
    mdb_env_close(e->env);
    lm_env_free(e);
}
