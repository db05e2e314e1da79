/* core/src/sim.h — internals of a simulation, shared by the files that
 * each do one job of it:
 *
 *   sim.c         assembly: config -> plugins -> checks -> state, in an
 *                 order that writes nothing until everything is valid
 *   host.c        the services the core gives plugins (metro_host_api),
 *                 the log
 *   backend.c     the backends: choosing one, starting CUDA (JIT link,
 *                 state on the device), total energies
 *   rundir.c      the run directory: its lock, the resolved config,
 *                 result files written whole (temporary + rename)
 *   checkpoint.c  checkpoint.bin: identity of the chain, the state,
 *                 resume
 *   run.c         the run loop: equilibration, production, energy checks,
 *                 checkpoints by sweeps and wall time, results
 *   ensemble.c    many systems of one config in one process (and over
 *                 MPI ranks)
 *   ranks.c       MPI where the build has it, one rank otherwise
 *   core_params.c the declared parameters of [run] and [system]
 *   frames.c      trajectory files (GSD, extended XYZ); initial.c reads
 *                 a configuration from one
 *   compose.c     the system the core owns (species, chains) and an
 *                 energy of several potential terms: the CPU sum, the
 *                 placement, the generated device source
 */
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
    unsigned mask;                /* potential terms: the species it acts on (bits) */
    int walls;                    /* potential terms: it published cell_radius, so its wall keeps its species in */
    metro__rng rng;
    unsigned char *save_buf;
    size_t save_n, save_cap;
};

/* A result file being written (host->open_output): see rundir.c. */
typedef struct metro__output metro__output;

struct metro_sim {
    metro__config *cfg;
    metro_params *run, *system;
    metro_setup setup;
    metro_state st;
    struct metro_ctx *terms;      /* potential terms: [potential] or [potential NAME] ... */
    int nterms;
    struct metro_ctx smp;
    struct metro_ctx *obs;
    int nobs;
    /* what samplers see: the lone term, or the core's composite of them */
    const metro_potential_api *pot_api;
    void *pot_self;
    char pot_name[256];           /* "lj_fene", "lj_fene + coulomb_hs" */
    struct metro__composite *comp; /* NULL for a lone term */
    int bond_term;                /* the term that owns the bonds, -1 */
    int *chain_first, *chain_length; /* the topology's arrays */
    unsigned char *bond_next;
    int chain_pattern[64], chain_pattern_n; /* [system] chain_species */
    /* [system] initial: the frame, read before the terms' create() so that
     * the system may take its species and chains from it (initial.c) */
    struct metro__frame_in *initial_in;
    int initial_species, initial_chains; /* the species / chains came from it */
    int resuming;                 /* metro resume: positions from the checkpoint */
    struct metro__fact *facts;    /* host->fact_set */
    int nfacts;
    const metro_sampler_api *smp_api;

    long sweeps, equilibration, check_every;
    double checkpoint_minutes;
    double drift_tolerance;
    int warned_direct;            /* the slow direct energy sum was announced (backend.c) */
    int quiet;
    int dry;                      /* a dry run: no device code is linked (host.c's kernel()) */
    int creating;                 /* inside a plugin's create(): no run directory yet, so no output (rundir.c) */
    char *dir;                    /* run directory, NULL for none */
    int lock_fd;                  /* the run directory's lock, -1 for none */
    FILE *log;
    char *early_log;              /* lines logged before log.txt exists */
    size_t early_n;
    metro__output *outputs;       /* result files opened, not yet committed */
    char **claims;                /* the run directory's files the plugins write: */
    char **claim_owner;           /*   the name and the section writing it (rundir.c) */
    int nclaims;
    char **plots;                 /* gnuplot scripts to run after the commit */
    int nplots;
    unsigned char *ck;            /* resuming: the checkpoint read and checked */
    size_t ck_size;
    const unsigned char *ck_rest; /* its plugins' part, after the state */
    int ck_used_prev;             /* it is checkpoint.bin.prev (checkpoint.bin was damaged) */
    char device_name[512];
    double host_need, device_need; /* bytes, estimated before allocating */
    char mem_top[160];             /* the plugin whose memory() asks for the most, and how much */
    double mem_top_bytes;
    int spread;                   /* this system's replicas are spread over MPI ranks */
    int device;                   /* CUDA device (rank % devices) */
    int writer;                   /* this process writes the run directory (rank 0) */
    int asked_ranks;              /* the sampler asked which replicas are its */
    int grouped;                  /* its sampler joined others (metro_sims_group) */
    uint64_t device_digest;       /* CUDA: device, linked code and its constant bytes */

    /* CUDA backend */
    void *stream;                 /* cudaStream_t */
    void *library;                /* cudaLibrary_t */
    void *k_total;                /* metro_core_total_energy */
    double *d_total;
    double link_seconds;
    int cubin_cached;
    char dry_arch[16];            /* a dry run's --arch, "" for none */
    size_t dry_cubin;             /* the bytes it linked to */
};

/* ---- host.c ---- */
extern const metro_host_api metro__host_api;
void metro__log(metro_sim *sim, metro_log_level level, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Write the lines logged so far into the (now open) log file. */
void metro__log_flush_early(metro_sim *sim);
/* A plugin's failure as one error line: "[section] name (kind) what: msg",
 * prefixed FILE:LINE: of the key the message starts with, else of the
 * section. */
int metro__plugin_failed(metro_ctx *ctx, metro_error *err, int status, const char *what);

/* ---- backend.c ---- */
/* The one CUDA error path: METRO_OK for cudaSuccess, else METRO_ERUN with
 * "CUDA: WHAT failed: NAME (text)". */
int metro__cuda_fail(metro_error *err, int status, const char *what, ...)
    __attribute__((format(printf, 3, 4)));
int metro__choose_backend(metro_sim *sim, const char *want, metro_error *err);
/* Free device memory in bytes and the card's total (CUDA backend). */
int metro__device_memory(size_t *free_bytes, size_t *total_bytes, metro_error *err);
/* The run's device code (the core's, the composed energy, every plugin's)
 * linked for `arch` by nvJitLink, through the cache where `cache`: no GPU
 * is needed, so a dry run can check it (--arch) and write nothing.
 * *cubin is the caller's to free. */
int metro__link_device(metro_sim *sim, const char *arch, int cache, void **cubin, size_t *size, metro_error *err);
int metro__start_cuda(metro_sim *sim, metro_error *err);
int metro__upload(metro_sim *sim, void *dst, const void *src, size_t n, metro_error *err,
                  const char *what);
int metro__total_all(metro_sim *sim, double *out, metro_error *err);

/* ---- rundir.c ---- */
/* The run directory path the options and config ask for ("" for none). */
const char *metro__rundir_path(const metro_sim *sim, const metro_options *opt, char *buf, size_t n);
/* Refuse, before anything is written, a new run into an existing run
 * directory (unless --overwrite) or a resume without a checkpoint. */
int metro__rundir_check(metro_sim *sim, const metro_options *opt, metro_error *err);
/* Create (or, resuming, open) the run directory, lock it, remove stale
 * temporaries, write config.ini (new run, or resume with --set) and open
 * log.txt.  Called only when everything else is valid. */
int metro__rundir_open(metro_sim *sim, const metro_options *opt, metro_error *err);
/* The run directory's lock alone, taken ahead of metro__rundir_open (which
 * then keeps it): an ensemble's resume holds every system's before it
 * writes into any, so a system in use elsewhere leaves the others as they
 * were.  An existing folder only (a resume's). */
int metro__rundir_lock(metro_sim *sim, const metro_options *opt, metro_error *err);
void metro__rundir_close(metro_sim *sim);
/* metro_sim_create, with the run directory made (open_dir) or left to
 * metro__sim_open: an ensemble places every system before any folder is
 * made or emptied, so a system that cannot start leaves the old results
 * (--overwrite) as they were, as a single run's refusal does. */
int metro__sim_create(const metro_options *opt, int open_dir, metro_sim **out, metro_error *err);
int metro__sim_open(metro_sim *sim, const metro_options *opt, metro_error *err);
/* Whether `host` bytes fit this machine (memory and swap), `host_here`
 * of them this process (its address-space limit), and `device` bytes the
 * GPU's free memory on the CUDA backend, `who` naming what needs them
 * ("3 systems"); METRO_OK, or METRO_EUSAGE with the sizes. */
int metro__memory_fits(metro_sim *sim, const char *who, double host, double host_here, double device,
                       metro_error *err);
/* An ensemble's own folder (above its system_NNN): checked as a new run's
 * (with overwrite: a run directory may be there), made unless resuming,
 * and locked as a run directory is (*lock_fd, closed by the caller at the
 * end); METRO_OK, or METRO_EUSAGE naming the holder of the lock.  With
 * overwrite, metro__ensemble_dir_clear then takes a former run's files and
 * system folders, once every system has started. */
int metro__ensemble_dir_open(const char *dir, int resume, int overwrite, int *lock_fd, metro_error *err);
int metro__ensemble_dir_clear(const char *dir, metro_error *err);
/* An ensemble's folder of k systems can be resumed: not in use, and every
 * system with a checkpoint (one without is named with how to start the
 * ensemble again, not the system alone, which the ensemble would refuse) */
int metro__ensemble_resumable(const char *dir, int k, metro_error *err);
/* A new ensemble that failed to start, its folder let go (lock_fd closed)
 * and put back: taken away if this run made it (fresh), else emptied if
 * this run emptied it (made), else left as it was, the lock this run took
 * in a folder holding no run removed. */
void metro__ensemble_dir_undo(const char *dir, int lock_fd, int fresh, int made);
/* A run directory this process made and nothing ran in, taken away: its
 * files, its lock and the folder (left where it holds anything else).
 * The caller has let go of the lock. */
void metro__rundir_unmake(const char *dir);
/* The resolved config: every section, every default written out. */
void metro__write_resolved(metro_sim *sim, FILE *f, const char *what);
/* Write data to path through path.tmp, fsync and rename: the one way a
 * whole file is written.  keep (or NULL): where the file it replaces goes,
 * renamed just before (checkpoint.bin.prev). */
int metro__write_atomic(const char *path, const void *data, size_t n, const char *keep, metro_error *err);
/* host->open_output, and the commit of every file it opened. */
FILE *metro__output_open(metro_ctx *ctx, const char *filename);
/* filename is ctx's to write: a plain name, not the core's own and not
 * another section's (the first to name, open or append it claims it); -1
 * with the reason in ctx->err otherwise.  metro__output_open and the
 * trajectories check through it (opening: refused in create(), where
 * there is no run directory), host->claim_output names a file ahead. */
int metro__output_claim(metro_ctx *ctx, const char *filename, int opening);
/* NULL, or why no plugin may write `filename` in a run directory: one of
 * the core's own files, or a temporary's name (*.tmp, removed at start) */
const char *metro__core_file(const char *filename);
void metro__output_claims_free(metro_sim *sim);
int metro__outputs_commit(metro_sim *sim, metro_error *err);
/* host->plot, and running the scripts after the commit. */
void metro__plot_request(metro_ctx *ctx, const char *script);
void metro__plots_run(metro_sim *sim);
/* After a plugin failed to write: add each result file's own error
 * (the errno the core saw), then discard them all. */
void metro__outputs_report(metro_sim *sim, metro_error *err);
void metro__outputs_discard(metro_sim *sim);

/* ---- checkpoint.c ---- */
/* Read checkpoint.bin (or, when it is damaged, the previous one, with a
 * warning) into sim->ck and refuse, before anything is written, a
 * checkpoint of another chain: its recorded identity must equal this
 * config's, but for the keys a resume may change. */
int metro__checkpoint_check(metro_sim *sim, metro_error *err);
/* Only the positions of sim->ck into the state, in place of a placement. */
int metro__resume_positions(metro_sim *sim, metro_error *err);
/* The state part of sim->ck into the state (before the sampler starts). */
int metro__resume_state(metro_sim *sim, metro_error *err);
/* The rest: every plugin's saved state (after the sampler started). */
int metro__resume_plugins(metro_sim *sim, metro_error *err);
/* The plugin instances in one order: the potential terms, the sampler, the
 * observables (checkpoints keep their states in it). */
metro_ctx *metro__ctx_at(metro_sim *sim, int i);
int metro__nctx(const metro_sim *sim);
int metro__ctx_kind(const metro_sim *sim, int i);   /* METRO_KIND_* of instance i */

/* ---- compose.c ---- */
typedef struct metro__composite metro__composite;
struct metro__fact {
    char name[32];
    double value;
    const char *section;
};
/* [system]'s species and chains, the bond term, each term's species: before
 * the terms' create(). */
int metro__system_read(metro_sim *sim, metro_error *err);
/* After create(): the cross-checks, and sim->pot_api / pot_self. */
int metro__terms_finish(metro_sim *sim, metro_error *err);
int metro__compose_check_table(metro_sim *sim, metro_error *err);
/* The species of every particle into pos[].w, for `replicas` replicas of
 * [system] particles each (the chains' and counts' checks with it). */
int metro__assign_species(metro_sim *sim, metro_float4 *pos, int replicas, metro_error *err);
/* The instance whose random stream places a composed system. */
metro_ctx *metro__placing_ctx(metro_sim *sim);
/* The run-wide device functions (metro/device.h) as CUDA source (heap):
 * for this run, or for a description (tests link lone plugins with it). */
char *metro__compose_source(metro_sim *sim);
typedef struct metro__compose_desc {
    int n;                          /* terms */
    const char *name[METRO_MAX_TERMS]; /* their plugins */
    unsigned mask[METRO_MAX_TERMS]; /* species each acts on */
    unsigned all;                   /* every species */
    double range[METRO_MAX_TERMS];  /* a short-ranged term's r_c (its api's cutoff); 0: long-ranged */
    unsigned char nopair[METRO_MAX_TERMS]; /* the term has no pair energy (cutoff 0) */
    int bond;                       /* the term owning the bonds, -1 */
    const metro_topology *topology; /* NULL: no bonds */
} metro__compose_desc;
char *metro__compose_text(const metro__compose_desc *d);
void metro__compose_free(metro_sim *sim);

/* ---- run.c ---- */
int metro__sync(metro_sim *sim, metro_error *err);

#endif
