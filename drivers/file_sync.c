/* Grouped directory fsyncs: see file_sync.h. Tickets order events in the process: a caller takes
 * one after its rename; a sync takes one when it starts. A completed sync that started with ticket
 * S covers every caller whose ticket is below S. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "file_sync.h"

typedef struct sync_slot {
    char *dir;         /* NULL: free */
    bool running;      /* a sync of dir is under way */
    unsigned waiters;  /* callers waiting on this slot: it is not reused while any wait */
    uint64_t covered;  /* callers with a ticket below this are covered by the last completed sync */
    int err;           /* that sync's result */
    uint64_t last_use; /* for reuse, least recently used first */
} sync_slot;

static pthread_mutex_t sync_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t sync_cv = PTHREAD_COND_INITIALIZER;
static uint64_t sync_ticket;
static uint64_t sync_calls, sync_fsyncs; /* under sync_mu */
static sync_slot sync_slots[NDS_FILE_SYNC_SLOTS];

/* One fsync of a directory. @return 0 or an errno */
static int fsync_dir_now(int fd) {
    pthread_mutex_lock(&sync_mu);
    sync_fsyncs++;
    pthread_mutex_unlock(&sync_mu);
    return fsync(fd) == 0 || errno == EINVAL ? 0 : errno; /* EINVAL: no directory fsync here */
}

/* The slot tracking dir, claiming the least recently used idle one if none does. NULL when every
 * slot is busy (or out of memory). Called with sync_mu held. */
static sync_slot *slot_for(const char *dir, uint64_t now) {
    sync_slot *idle = NULL;
    for (size_t i = 0; i < NDS_FILE_SYNC_SLOTS; i++) {
        sync_slot *s = &sync_slots[i];
        if (s->dir && strcmp(s->dir, dir) == 0) {
            s->last_use = now;
            return s;
        }
        if (!s->running && s->waiters == 0 && (!idle || s->last_use < idle->last_use)) idle = s;
    }
    char *copy = idle ? strdup(dir) : NULL;
    if (!copy) return NULL;
    free(idle->dir);
    *idle = (sync_slot){.dir = copy, .last_use = now};
    return idle;
}

int nds_file_sync_dir(const char *dir, int fd) {
    pthread_mutex_lock(&sync_mu);
    uint64_t mine = ++sync_ticket;
    sync_calls++;
    sync_slot *s = slot_for(dir, mine);
    if (!s) {
        pthread_mutex_unlock(&sync_mu);
        return fsync_dir_now(fd);
    }
    s->waiters++;
    while (s->running && s->covered <= mine) pthread_cond_wait(&sync_cv, &sync_mu);
    s->waiters--;
    if (s->covered > mine) { /* a sync that started after our change has completed */
        int err = s->err;
        pthread_mutex_unlock(&sync_mu);
        return err;
    }
    s->running = true;
    uint64_t start = ++sync_ticket;
    pthread_mutex_unlock(&sync_mu);
    int err = fsync_dir_now(fd);
    pthread_mutex_lock(&sync_mu);
    s->running = false;
    s->covered = start;
    s->err = err;
    pthread_cond_broadcast(&sync_cv);
    pthread_mutex_unlock(&sync_mu);
    return err;
}

void nds_file_sync_counts(uint64_t *calls, uint64_t *fsyncs) {
    pthread_mutex_lock(&sync_mu);
    *calls = sync_calls;
    *fsyncs = sync_fsyncs;
    pthread_mutex_unlock(&sync_mu);
}

size_t nds_file_dir_len(const char *path) {
    const char *slash = strrchr(path, '/');
    return !slash ? 0 : slash == path ? 1 : (size_t)(slash - path);
}

char *nds_file_dir_of(const char *path) {
    size_t n = nds_file_dir_len(path);
    return n ? strndup(path, n) : strdup(".");
}
