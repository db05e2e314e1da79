/* core/src/sim.h — internals of a simulation shared by sim.c and cli.c. */
#ifndef METRO__SIM_H
#define METRO__SIM_H

#include <curand.h>
#include <stdio.h>

#include "config.h"
#include "loader.h"
#include "rng.h"
#include "metro/metro.h"

/* One plugin instance and its link to the run (the metro_ctx of plugin.h). */
struct metro_ctx {
    metro_sim *sim;
    char *section;                /* "sampler", "observable energy" ... */
    const metro__plugin *plugin;
    metro_params *params;
    void *self;
    long every;                   /* observables: measure every K sweeps */
    char err[2048];               /* last host->fail() message */
    int host_rng;                 /* draw on the host even on CUDA (potentials) */
    metro__rng rng;
    unsigned char *save_buf;
    size_t save_n, save_cap;
};

struct metro_sim {
    metro__config *cfg;
    metro_params *run, *system;
    metro_setup setup;
    metro_state st;
    struct metro_ctx pot, smp;
    struct metro_ctx *obs;
    int nobs;
    const metro_potential_api *pot_api;
    const metro_sampler_api *smp_api;

    long sweeps, equilibration, check_every;
    double drift_tolerance;
    int quiet;
    char *dir;                    /* run directory, NULL for none */
    FILE *log;
    char device_name[512];

    /* CUDA backend */
    void *stream;                 /* cudaStream_t */
    void *library;                /* cudaLibrary_t */
    void *k_total;                /* metro_core_total_energy */
    double *d_total;
    double link_seconds;
    int cubin_cached;
};

#endif
