/* The memory budget (internal/budget.h): a byte count under a mutex, waiters queued in arrival
 * order, each woken by a broadcast and served only when it is first in the queue and its bytes fit.
 * A waiter lives on its caller's stack. Lock order: b->mu, then nothing. */
#include <pthread.h>
#include <stdlib.h>

#include "internal/budget.h"
#include "internal/error.h"

typedef struct waiter {
    struct waiter *next;
} waiter;

struct nds_budget {
    pthread_mutex_t mu;
    pthread_cond_t freed; /* bytes were released, a waiter left, or give_up may have turned true */
    size_t total;         /* bytes of the budget (> 0) */
    size_t used;          /* bytes held; above total only while one oversized request runs alone */
    waiter *head, *tail;  /* the queue, in arrival order */
};

static _Thread_local size_t thread_held; /* bytes this thread holds, of any budget */

int nds_budget_new(nds_budget **out, size_t total) {
    nds_budget *b = calloc(1, sizeof *b);
    if (!b) return nds_err(NDS_ENOMEM, "out of memory creating a memory budget");
    pthread_mutex_init(&b->mu, NULL);
    pthread_cond_init(&b->freed, NULL);
    b->total = total ? total : 1;
    *out = b;
    return 0;
}

void nds_budget_free(nds_budget *b) {
    if (!b) return;
    pthread_mutex_destroy(&b->mu);
    pthread_cond_destroy(&b->freed);
    free(b);
}

size_t nds_budget_total(const nds_budget *b) { return b->total; }

size_t nds_budget_in_use(nds_budget *b) {
    pthread_mutex_lock(&b->mu);
    size_t used = b->used;
    pthread_mutex_unlock(&b->mu);
    return used;
}

/* Whether bytes may be taken now (b->mu held): they fit, or, larger than the whole budget, nothing
 * else is held. */
static bool fits(const nds_budget *b, size_t bytes) {
    return b->used == 0 || (bytes <= b->total && b->used <= b->total - bytes);
}

static void dequeue(nds_budget *b, waiter *w) {
    waiter **p = &b->head, *prev = NULL;
    while (*p != w) prev = *p, p = &(*p)->next;
    *p = w->next;
    if (b->tail == w) b->tail = prev;
}

bool nds_budget_acquire(nds_budget *b, size_t bytes, nds_budget_give_up_fn give_up, void *arg) {
    pthread_mutex_lock(&b->mu);
    bool taken = false;
    if (!b->head && fits(b, bytes)) {
        taken = true;
    } else {
        waiter w = {NULL};
        if (b->tail)
            b->tail->next = &w;
        else
            b->head = &w;
        b->tail = &w;
        for (;;) {
            if (give_up && give_up(arg)) break;
            if (b->head == &w && fits(b, bytes)) {
                taken = true;
                break;
            }
            pthread_cond_wait(&b->freed, &b->mu);
        }
        dequeue(b, &w);
        pthread_cond_broadcast(&b->freed); /* the next in line may fit */
    }
    if (taken) b->used += bytes;
    pthread_mutex_unlock(&b->mu);
    if (taken) thread_held += bytes;
    return taken;
}

void nds_budget_release(nds_budget *b, size_t bytes) {
    pthread_mutex_lock(&b->mu);
    b->used -= bytes;
    if (b->head) pthread_cond_broadcast(&b->freed);
    pthread_mutex_unlock(&b->mu);
    thread_held -= bytes;
}

void nds_budget_wake(nds_budget *b) {
    pthread_mutex_lock(&b->mu);
    if (b->head) pthread_cond_broadcast(&b->freed);
    pthread_mutex_unlock(&b->mu);
}

size_t nds_budget_held(void) { return thread_held; }
