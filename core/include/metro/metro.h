/* metro/metro.h — libmetro's public API: assemble a simulation from a
 * config, run it, look at it.  The `metro` program, the tests and the
 * benchmarks are all written on this.
 */
#ifndef METRO_METRO_H
#define METRO_METRO_H

#include "metro/plugin.h"

#ifdef __cplusplus
extern "C" {
#endif

#define METRO_VERSION_STRING "0.1.0"

/* Exit statuses of the program, and the status of every call below. */
enum {
    METRO_OK = 0,
    METRO_ERUN = 1,    /* failure at run time */
    METRO_EUSAGE = 2,  /* bad usage or bad config: nothing was run */
    METRO_ESTOPPED = 3 /* stopped by SIGINT/SIGTERM with its checkpoint
                          written: `metro resume` continues (a batch
                          script can requeue on it) */
};

/* Error text a call leaves behind: one line per problem. */
typedef struct metro_error {
    int status;
    char msg[8192];
} metro_error;

typedef struct metro_options {
    const char *config_path;          /* INI file ...                      */
    const char *config_text;          /* ... or its text (then path names it
                                         in messages, default "<text>")     */
    const char *const *sets;          /* "section.key=value" overrides     */
    int nsets;
    const char *device;               /* overrides [run] device when set   */
    const char *output;               /* overrides [run] output when set;
                                         "" writes no run directory        */
    int quiet;                        /* no progress line, log to file only */
    int overwrite;                    /* replace an existing run directory */
    int resume;                       /* continue the run in `output` from its
                                         checkpoint.bin (config_path is then
                                         normally output/config.ini) */
    int whole;                        /* MPI: this process runs the whole system
                                         and writes it (an ensemble's systems);
                                         0: one system spread over the ranks */
    int dry_run;                      /* validate, create the plugins and size
                                         the run, then stop: metro_sim_plan()
                                         prints it; nothing is written */
    const char *const *set_where;     /* NULL, or for each of sets where it
                                         came from, for messages (NULL entry:
                                         the --set itself): an ensemble's
                                         scan names its [run] scan line */
    const char *arch;                 /* dry_run: also link the run's device
                                         code for this GPU architecture
                                         ("sm_90"), no GPU needed, and check
                                         the terms' parameter blocks */
} metro_options;

typedef struct metro_sim metro_sim;

/* Read and validate the config, load the plugins, create them, check the
 * memory the sizes need, place the particles, pick the backend
 * (JIT-linking the device code on CUDA) and — only when all of that
 * worked — create (or lock, resuming) the run directory.  Returns METRO_OK
 * and *out, or METRO_EUSAGE / METRO_ERUN with err filled, *out NULL and
 * nothing written.  With opt->dry_run it stops after the checks and the
 * memory estimate (*out is then only for metro_sim_plan and destroy). */
int metro_sim_create(const metro_options *opt, metro_sim **out, metro_error *err);

/* Print the resolved config and the work of the run: sizes, pair
 * evaluations per sweep, memory, an estimated time. */
int metro_sim_plan(metro_sim *sim, FILE *f);

/* Equilibration, production with measurements, results, plots: the whole
 * run of the config.  METRO_OK, METRO_ERUN or METRO_ESTOPPED (err filled). */
int metro_sim_run(metro_sim *sim, metro_error *err);

/* Advance the chain by `sweeps` without measuring (tests, benchmarks). */
int metro_sim_advance(metro_sim *sim, long sweeps, metro_error *err);

/* The state with host copies brought up to date. */
const metro_state *metro_sim_state(metro_sim *sim, metro_error *err);

/* Backend actually in use, and a description ("CPU", "NVIDIA H100 ..."). */
metro_backend metro_sim_backend(const metro_sim *sim);
/* The CUDA stream the plugins run on (a cudaStream_t; NULL on the CPU):
 * for timing with CUDA events. */
void *metro_sim_stream(const metro_sim *sim);
const char *metro_sim_device_name(const metro_sim *sim);

/* Total energy of replica r recomputed from scratch (CPU loop of the
 * potential on host positions, or the core's kernel on CUDA). */
double metro_sim_total_energy(metro_sim *sim, int r, metro_error *err);

/* Write <run dir>/checkpoint.bin: the state, every random stream's
 * position and every plugin's saved state, atomically.  The run loop does
 * this at every energy check and at the end. */
int metro_sim_checkpoint(metro_sim *sim, metro_error *err);

void metro_sim_destroy(metro_sim *sim);

/* Ensembles ([run] systems = K > 1, or [run] scan = SECTION.KEY: v1, v2,
 * ..., a scan of one value included): the number of systems the options
 * ask for (resuming: the number of system_NNN folders in the run
 * directory), 0 for a single run, or -1 with err filled. */
int metro_ensemble_systems(const metro_options *opt, metro_error *err);
/* Validate every system, then run them together (a thread and a CUDA
 * stream each), each in RUNDIR/system_NNN, and write the combined tables.
 * METRO_OK, or the first failure with every system's message in err.
 * With dry_run: validate every system, write nothing. */
int metro_ensemble_run(const metro_options *opt, metro_error *err);

/* Let the samplers of sims[0..k), which this process will advance at
 * once, one thread each, share device launches where they can (the
 * sampler's join(): brush combines systems of one size and layout on CUDA
 * into one launch per cycle); each system's chain stays bit for bit that of
 * its separate run.  Grouped sims meet inside metro_sim_advance(), so every
 * one must be advanced by its own thread, and metro_sim_ungroup() called
 * from that thread when it will advance no more (metro_sim_destroy() does
 * it too).  metro_ensemble_run() does all this itself.  METRO_OK or
 * METRO_ERUN. */
int metro_sims_group(metro_sim *const *sims, int k, metro_error *err);
void metro_sim_ungroup(metro_sim *sim);

/* Renumber pos[0..n) along a Z-order (Morton) curve through the cube
 * around them: consecutive indices then lie close in space, as an
 * octree's leaves do ([system] numbering = space; numbering.c says why).
 * The particles keep their species (w).  0, or -1 when out of memory. */
int metro_number_by_space(metro_float4 *pos, int n);

/* The command-line program: metro run|list|describe|--help|--version. */
int metro_main(int argc, char **argv);

#ifdef __cplusplus
}
#endif

#endif
