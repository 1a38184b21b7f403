/* A memory budget: bytes of chunks in flight, shared by every call on a context (lib/pool.c
 * acquires it around each chunk task). Internally synchronised; one mutex, taken by nothing else
 * while held.
 *
 * Rules:
 * - a request waits until its bytes are free; one larger than the whole budget waits until nothing
 *   else is held, then runs alone;
 * - requests are served in arrival order (a large one is not starved by a stream of small ones);
 * - a thread that already holds budget (of any context) must not wait for more: it would wait for
 *   itself. The pool therefore runs nested tasks under what the thread holds (nds_budget_held). */
#ifndef NDS_INTERNAL_BUDGET_H
#define NDS_INTERNAL_BUDGET_H

#include <stdbool.h>
#include <stddef.h>

typedef struct nds_budget nds_budget;

/** Creates a budget of total bytes (> 0). */
int nds_budget_new(nds_budget **out, size_t total);
/** Frees a budget nothing holds. Accepts NULL. */
void nds_budget_free(nds_budget *b);
/** The budget's size in bytes. */
size_t nds_budget_total(const nds_budget *b);
/** Bytes held now, by all threads (a snapshot, for tests and reports). */
size_t nds_budget_in_use(nds_budget *b);

/** A waiter's way out: returns true once the bytes are no longer wanted (checked under the budget's
 *  lock at each wake-up; must not block or take locks). */
typedef bool (*nds_budget_give_up_fn)(void *arg);
/**
 * Takes bytes of b, waiting until they are free (or, bytes > total, until nothing is held).
 * give_up may be NULL. @return true when the bytes were taken, false when give_up said so first.
 */
bool nds_budget_acquire(nds_budget *b, size_t bytes, nds_budget_give_up_fn give_up, void *arg);
/** Gives back bytes taken by nds_budget_acquire on this thread, waking the waiters. */
void nds_budget_release(nds_budget *b, size_t bytes);
/** Wakes every waiter to check its give_up again (call after making one true). */
void nds_budget_wake(nds_budget *b);
/** Bytes the calling thread holds, of any budget. */
size_t nds_budget_held(void);

#endif
