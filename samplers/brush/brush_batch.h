/* brush_batch.h — several brush systems in the same launches (an
 * ensemble's systems of one size and layout on one GPU; issue 11).
 *
 * Each system keeps everything of its own: positions, energy, uniforms
 * (drawn from its own stream, on its own CUDA stream), flags, epoch, slot,
 * acceptance counts.  Only the launch is shared: one grid whose blocks
 * take tickets from one counter, interleaved over the systems,
 *
 *     ticket t  ->  system slot s = t mod k,  its own ticket t div k
 *
 * (own ticket = cycle x groups + group, as in a launch of its own,
 * brush.h).  A block only ever waits for own tickets below its own, of its
 * own system, whose global tickets are smaller: deadlock-free whatever the
 * hardware's block order, as for one system.  The interleaving starts every
 * system's chain at once, and blocks free their slots in chain order, so
 * the resident blocks are the fronts of all k chains.  Systems may run
 * different numbers of cycles in one launch: the grid covers the largest,
 * and a block whose cycle is past its system's count leaves at once.  The
 * counter is never re-armed: each launch passes the counter's value at its
 * start (`base`) and blocks subtract it (unsigned, so wrapping is fine).
 *
 * Which block computes what never depends on which systems share a launch,
 * or on timing: a system's chain is bit for bit its separate run's.
 *
 * On the host, the systems meet per launch in a rendezvous (brush_rv
 * below): each system's thread draws its uniforms on its stream, records
 * an event, posts its launch and waits; the last of the members still
 * running to post (or, when a member leaves, one that waits) makes the
 * launch for all, on the group's stream after every posted member's event,
 * and makes every posted member's stream wait for the launch's end.  No
 * member ever waits on the device for a launch that is not yet made, so
 * the rendezvous cannot deadlock on the device.
 */
#ifndef BRUSH_BATCH_H
#define BRUSH_BATCH_H

#include "brush.h"

/* Systems per launch at most: the kernel's parameter block holds one
 * brush_batch_var per system (16 B each: 2 KiB, inside the classic 4 KiB
 * parameter limit).  More systems form several groups. */
#define BRUSH_BATCH_MAX 128

/* What changes per launch for one system (the rest is in its brush_launch
 * in device memory, written once). */
typedef struct brush_batch_var {
    int sys;         /* index into brush_batch.sys */
    unsigned epoch;  /* its first cycle's flag value */
    int slot;        /* its first cycle's entry of cycle_acc */
    int cycles;      /* its cycles in this launch (<= brush_batch.cycles) */
} brush_batch_var;

/* The kernel parameter of brush_batch_p{1,2,4}. */
typedef struct brush_batch {
    const brush_launch *sys;  /* device: one per member; ticket, slot, epoch, cycles, trace unused */
    unsigned *ticket;         /* block counter of the group, never re-armed */
    unsigned base;            /* its value when this launch starts */
    int k;                    /* systems in this launch */
    int cycles;               /* the most cycles of any of them */
    int groups;               /* groups per cycle (the same for all) */
    brush_batch_var var[BRUSH_BATCH_MAX];
} brush_batch;

/* Block ticket t of a launch of k systems: the system's slot in the launch
 * and the block's own ticket in that system's chain. */
METRO_HD void brush_batch_ticket(unsigned t, int k, int *slot, unsigned *own)
{
    *slot = (int)(t % (unsigned)k);
    *own = t / (unsigned)k;
}

#ifndef __CUDACC__
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

/* What must be equal for two systems to share a launch: the kernel's
 * layout.  (That one module's kernel may run for all of them — the same
 * device, code and constant bytes — the core has checked before it offers
 * them to join(): metro_sims_group.) */
typedef struct brush_batch_key {
    int device, n, threads, per_thread, eta, group_size, tile, pre, chain;
    size_t smem;
} brush_batch_key;

static inline int brush_batch_key_equal(const brush_batch_key *a, const brush_batch_key *b)
{
    return a->device == b->device && a->n == b->n && a->threads == b->threads && a->per_thread == b->per_thread &&
           a->eta == b->eta && a->group_size == b->group_size && a->tile == b->tile && a->pre == b->pre &&
           a->chain == b->chain && a->smem == b->smem;
}

/* Partition k systems by key, in order, into groups of at most `max`:
 * lead[i] = the first system of i's group, or -1 where i shares with none
 * (a group of one, or key NULL: cannot batch).  Returns the number of
 * groups of two or more. */
static inline int brush_batch_partition(const brush_batch_key *const *keys, int k, int max, int *lead)
{
    int *size = calloc((size_t)(k > 0 ? k : 1), sizeof *size);
    if (!size) return -1;
    for (int i = 0; i < k; ++i) {
        lead[i] = -1;
        if (!keys[i]) continue;
        for (int j = 0; j < i && lead[i] < 0; ++j) /* an open group with this key */
            if (keys[j] && lead[j] == j && size[j] < max && brush_batch_key_equal(keys[i], keys[j])) lead[i] = j;
        if (lead[i] < 0) lead[i] = i;
        size[lead[i]]++;
    }
    int groups = 0;
    for (int i = 0; i < k; ++i) {
        if (lead[i] >= 0 && size[lead[i]] < 2) lead[i] = -1;
        else if (lead[i] == i) ++groups;
    }
    free(size);
    return groups;
}

/* The rendezvous: k members (one host thread each) post a launch per
 * round; when every member still in has posted, one of them (the last to
 * post, or one woken by a member leaving) calls launch(arg, has, k) with
 * the lock held, has[m] = 1 for the members posted in this round.  A
 * failed launch (nonzero) fails that round's posts and every later one. */
typedef struct brush_rv {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int k;                    /* members */
    int active;               /* members that have not left */
    int posted;               /* members waiting in this round */
    unsigned long long round; /* rounds launched */
    int rc;
    unsigned char *in, *has;  /* per member: still in; posted this round */
    int (*launch)(void *arg, const unsigned char *has, int k);
    void *arg;
} brush_rv;

static inline int brush_rv_init(brush_rv *rv, int k, int (*launch)(void *, const unsigned char *, int), void *arg)
{
    memset(rv, 0, sizeof *rv);
    rv->in = calloc((size_t)k, 1);
    rv->has = calloc((size_t)k, 1);
    if (!rv->in || !rv->has) {
        free(rv->in);
        free(rv->has);
        return -1;
    }
    pthread_mutex_init(&rv->mu, NULL);
    pthread_cond_init(&rv->cv, NULL);
    rv->k = rv->active = k;
    memset(rv->in, 1, (size_t)k);
    rv->launch = launch;
    rv->arg = arg;
    return 0;
}

static inline void brush_rv_free(brush_rv *rv)
{
    pthread_mutex_destroy(&rv->mu);
    pthread_cond_destroy(&rv->cv);
    free(rv->in);
    free(rv->has);
    rv->in = rv->has = NULL;
}

/* Member m posts (its launch data already in place) and returns once the
 * round's launch is made: 0, or the failure of that launch. */
static inline int brush_rv_post(brush_rv *rv, int m)
{
    pthread_mutex_lock(&rv->mu);
    const unsigned long long r = rv->round;
    rv->has[m] = 1;
    rv->posted++;
    while (rv->round == r) {
        if (rv->posted == rv->active) {
            if (!rv->rc) rv->rc = rv->launch(rv->arg, rv->has, rv->k);
            memset(rv->has, 0, (size_t)rv->k);
            rv->posted = 0;
            rv->round++;
            pthread_cond_broadcast(&rv->cv);
            break;
        }
        pthread_cond_wait(&rv->cv, &rv->mu);
    }
    const int rc = rv->rc;
    pthread_mutex_unlock(&rv->mu);
    return rc;
}

/* Member m will post no more (its own thread, not while posted). */
static inline void brush_rv_leave(brush_rv *rv, int m)
{
    pthread_mutex_lock(&rv->mu);
    if (rv->in[m]) {
        rv->in[m] = 0;
        rv->active--;
        if (rv->posted && rv->posted == rv->active) pthread_cond_broadcast(&rv->cv); /* one of them launches */
    }
    pthread_mutex_unlock(&rv->mu);
}
#endif

#endif
