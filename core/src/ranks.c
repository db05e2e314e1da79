/* core/src/ranks.c — see ranks.h. */
#include "ranks.h"

#include <stdint.h>
#include <stdlib.h>

#ifdef METRO_MPI
#include <mpi.h>
#endif

void metro__rank_range(int rank, int ranks, int items, int *first, int *last)
{
    *first = (int)((long long)rank * items / ranks);
    *last = (int)((long long)(rank + 1) * items / ranks);
}

#ifdef METRO_MPI

static int started;

static int on_host = 1;                   /* ranks sharing this rank's host (its memory) */
static MPI_Comm host_comm = MPI_COMM_NULL; /* those ranks */

void metro__ranks_init(int *argc, char ***argv)
{
    int already = 0;
    MPI_Initialized(&already);
    if (!already) MPI_Init(argc, argv);
    started = !already;
    /* once, here, where every rank passes: a collective */
    if (MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &host_comm) == MPI_SUCCESS)
        MPI_Comm_size(host_comm, &on_host);
    else
        host_comm = MPI_COMM_NULL;
}

double metro__ranks_host_sum(double value)
{
    double sum = value;
    if (host_comm != MPI_COMM_NULL && on_host > 1)
        MPI_Allreduce(&value, &sum, 1, MPI_DOUBLE, MPI_SUM, host_comm);
    return sum;
}

int metro__ranks_on_host(void)
{
    return on_host;
}

void metro__ranks_finalize(void)
{
    int done = 0;
    MPI_Finalized(&done);
    if (!done && host_comm != MPI_COMM_NULL) MPI_Comm_free(&host_comm);
    if (started && !done) MPI_Finalize();
}

void metro__ranks_abort(int status)
{
    if (metro__ranks() > 1) MPI_Abort(MPI_COMM_WORLD, status);
}

static int inited(void)
{
    int i = 0;
    MPI_Initialized(&i);
    return i;
}

int metro__rank(void)
{
    int r = 0;
    if (inited()) MPI_Comm_rank(MPI_COMM_WORLD, &r);
    return r;
}

int metro__ranks(void)
{
    int s = 1;
    if (inited()) MPI_Comm_size(MPI_COMM_WORLD, &s);
    return s;
}

int metro__ranks_share(void *array, int items, size_t bytes)
{
    int S = metro__ranks();
    if (S == 1) return 0;
    /* counts in bytes; MPI's int counts hold a rank's share of any array
     * the config accepts (2^24 replicas of at most 2^31 bytes in all) */
    int *counts = malloc(sizeof *counts * (size_t)S), *displs = malloc(sizeof *displs * (size_t)S);
    if (!counts || !displs) { free(counts); free(displs); return -1; }
    for (int s = 0; s < S; ++s) {
        int f, l;
        metro__rank_range(s, S, items, &f, &l);
        counts[s] = (int)((size_t)(l - f) * bytes);
        displs[s] = (int)((size_t)f * bytes);
    }
    int rc = MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_BYTE, array, counts, displs, MPI_BYTE, MPI_COMM_WORLD);
    free(counts);
    free(displs);
    return rc == MPI_SUCCESS ? 0 : -1;
}

void metro__ranks_barrier(void)
{
    if (metro__ranks() > 1) MPI_Barrier(MPI_COMM_WORLD);
}

int metro__ranks_agree(int value)
{
    if (metro__ranks() > 1) MPI_Bcast(&value, 1, MPI_INT, 0, MPI_COMM_WORLD);
    return value;
}

int metro__ranks_any(int value)
{
    int all = value;
    if (metro__ranks() > 1) MPI_Allreduce(&value, &all, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    return all;
}

#else

void metro__ranks_init(int *argc, char ***argv) { (void)argc, (void)argv; }
int metro__ranks_on_host(void) { return 1; }
double metro__ranks_host_sum(double value) { return value; }
void metro__ranks_finalize(void) {}
void metro__ranks_abort(int status) { (void)status; }
int metro__rank(void) { return 0; }
int metro__ranks(void) { return 1; }
int metro__ranks_share(void *array, int items, size_t bytes) { (void)array, (void)items, (void)bytes; return 0; }
void metro__ranks_barrier(void) {}
int metro__ranks_agree(int value) { return value; }
int metro__ranks_any(int value) { return value; }

#endif
