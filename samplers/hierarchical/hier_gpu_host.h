/* hier_gpu_host.h — the CUDA path of the hierarchical sampler as
 * hierarchical.c calls it (hier_gpu.c). */
#ifndef HIER_GPU_HOST_H
#define HIER_GPU_HOST_H

#include <cuda_runtime_api.h>

#include "metro/plugin.h"

#include "hier_gpu.h"

typedef struct hier_gpu_cfg {
    coulomb_hs_params prm;
    const metro_potential_api *pot; /* the reference's delta(), for what the exact pass leaves open */
    void *pot_self;
    int L, order, order_hi, direct_max, batch;
    int refine; /* > 0: the trials the first look leaves near their threshold get a refined look */
    double Rt, theta, dcut, bound_scale;
    float step;
    int ideal; /* reference = exact: the exact sum's decisions (DESIGN.md, "The exact chain") */
} hier_gpu_cfg;

/* Moves decided by the enclosure, by the exact pass inside the chain
 * (both running totals of the device), by the exact pass of a stopped
 * chain, by the reference on the host; and the trials given the refined
 * look (a running total of the device) */
typedef struct hier_gpu_stats {
    long long enclosure, chain, exact, fallback, refined;
} hier_gpu_stats;

typedef struct hier_gpu hier_gpu;

/* Memory, kernels, and the tree of st->d_pos; 0 or -1 (reason recorded) */
int hier_gpu_create(const metro_host_api *host, metro_ctx *ctx, const hier_gpu_cfg *cfg, metro_state *st,
                    hier_gpu **out);
void hier_gpu_free(hier_gpu *g);
/* The device bytes hier_gpu_create allocates for n particles and cfg (only
 * its sizes are read: L, order_hi, batch): the sampler's memory() */
size_t hier_gpu_bytes(const hier_gpu_cfg *cfg, int n);
/* The tree afresh from st->d_pos (before the first cycle, after a restore) */
int hier_gpu_rebuild(hier_gpu *g);
/* The total energy of the positions the tree holds (built or updated),
 * within *bound of the direct sum of the reference's float pair energies;
 * *bad counts the particles that overlap another or share its place */
int hier_gpu_total(hier_gpu *g, double *energy, double *bound, long long *bad);
/* The cycle's uniforms go here (one float4 per particle) before a cycle */
float4 *hier_gpu_uniforms(hier_gpu *g);
cudaStream_t hier_gpu_stream(hier_gpu *g);
/* One cycle (the run's cycle-th, for messages) of particles 0 ... trials-1;
 * the acceptances in *accepted */
int hier_gpu_cycle(hier_gpu *g, metro_state *st, long long cycle, int trials, hier_gpu_stats *stats,
                   long long *accepted);

/* reference = exact: the failure of a move that not even the last resort
 * (hier_ideal_reference) can decide (hierarchical.c) */
int hier_undecidable(const metro_host_api *host, metro_ctx *ctx, long long cycle, int i, double de, float u);

#endif
