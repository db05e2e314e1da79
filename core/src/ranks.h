/* core/src/ranks.h — MPI, where the build has it (-DMETRO_MPI=ON); one rank
 * otherwise.  Only the core speaks MPI: plugins see ranks through the host
 * API (replicas_here, share_replicas), so no plugin links MPI.
 *
 * The one rule for splitting R replicas over S ranks: rank s owns
 * [s*R/S, (s+1)*R/S) (integer division), the same on every rank. */
#ifndef METRO__RANKS_H
#define METRO__RANKS_H

#include <stddef.h>

/* MPI_Init when built with MPI; harmless otherwise. */
void metro__ranks_init(int *argc, char ***argv);
void metro__ranks_finalize(void);
/* End every rank with status (MPI_Abort), so no rank waits forever in a
 * collective for one that failed. */
void metro__ranks_abort(int status);
int metro__rank(void);
int metro__ranks(void);
void metro__rank_range(int rank, int ranks, int items, int *first, int *last);
/* Every rank has filled its own items [first, last) of array (items of
 * `bytes` each); afterwards every rank has all of them.  0, or -1. */
int metro__ranks_share(void *array, int items, size_t bytes);
void metro__ranks_barrier(void);
/* How many ranks share this rank's host, and so its memory (1 without MPI). */
int metro__ranks_on_host(void);
/* The sum of value over the ranks on this rank's host (value without
 * MPI).  Collective. */
double metro__ranks_host_sum(double value);
/* Rank 0's value, on every rank. */
int metro__ranks_agree(int value);
/* The largest of every rank's value (a flag any rank may raise): the same
 * on every rank.  Collective, like metro__ranks_agree. */
int metro__ranks_any(int value);

#endif
