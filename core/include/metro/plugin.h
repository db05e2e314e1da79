/* metro/plugin.h — the plugin ABI.
 *
 * A plugin is a shared object exporting one symbol, metro_plugin_entry,
 * that returns a constant descriptor (METRO_PLUGIN below writes it).  The
 * descriptor names the plugin, declares its parameters, carries a table of
 * host functions for its kind and the LTO-IR of its device code.
 *
 * The core hands every plugin a const table of services (metro_host_api) so
 * plugins link nothing of the core (SQLite's sqlite3_api_routines pattern).
 * Every table starts with a version and is append-only: a member added later
 * is read only by a core that checks the table's version first.
 *
 * Return convention of every function in these tables: 0 on success,
 * non-zero on failure after calling host->fail() with a message.  Plugins
 * never exit() and never print to stderr themselves.  A message about one
 * parameter starts with its name ("cell_radius: ..."): the core then
 * points at that key's line of the config file (else the section's).
 */
#ifndef METRO_PLUGIN_H
#define METRO_PLUGIN_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "metro/hd.h"

#ifdef __cplusplus
extern "C" {
#endif

/* 2: host->cuda(), the optional memory() of every kind, open_output()
 * files committed whole at the end of the run.
 * 3: composed systems (docs/COMPOSITION.md): the system's species and
 * topology belong to the core (metro_setup.species_table, .topology); the
 * Coulomb-shaped fields chain, cell_radius and bjerrum left metro_setup
 * (named facts instead: host->fact_set / fact); potentials are terms with
 * per-pair host functions and per-plugin device names (metro/device.h).
 * The layout of metro_setup changed, so only version 3 plugins load.
 * Samplers may offer join()/leave(): an ensemble's systems sharing
 * launches (issue 11).
 * 4: metro_pd_sum (metro/hd.h) grew the core's `near`, and the device runs
 * of pair-deltas a second pass for a composite's short-ranged terms
 * (metro_pair_delta_near / _near_add, metro/device.h).  Potentials return
 * the struct by value, so only version 4 plugins load.
 * 5: samplers may offer total(): the energies the core starts from and
 * checks against, by the sampler's own means (a tree instead of the O(N²)
 * direct sum); the sampler table grew, so only version 5 plugins load.
 * 6: samplers may offer cost(): their own estimate of a sweep's time for
 * the dry run (a tree instead of the direct sum's N² pair terms); the
 * sampler table grew again.
 * 7: host->claim_output(): a plugin names in create() the files it will
 * write, so two sections writing one file are refused before the run.
 * 8: samplers and observables may name parameters a resume may change
 * (.resumable: a fit window, a thread count); both tables grew. */
#define METRO_ABI_VERSION 8u

/* ---- ABI version 8, in the sampler's and the observable's tables ----
 * resumable: NULL, or the NULL-terminated names of the plugin's parameters
 * that change neither the chain nor what save() keeps (an analysis's fit
 * window, a thread count that gives the same chain), so that `metro resume`
 * and `metro analyze` take a new value (--set) and the results use it.
 * Every other parameter defines the run: a resume that changes it is
 * refused as another chain's.  Each name must be a declared parameter, and
 * restore() must keep the value create() read. */
#define METRO_RESUMABLE_FIELD const char *const *resumable

/* The core's direct sum of pair terms, measured (bench/NOTES.md): pair
 * terms per second on one CPU core and on one H100 at large N.  The core
 * times its O(N²) sums with them (the dry run, the CPU's warning); a
 * sampler with a faster sum may use them to choose between the two. */
#define METRO_DIRECT_RATE_CPU 2.2e8
#define METRO_DIRECT_RATE_CUDA 1.1e12

typedef enum metro_kind {
    METRO_KIND_POTENTIAL = 1,
    METRO_KIND_SAMPLER = 2,
    METRO_KIND_OBSERVABLE = 3
} metro_kind;

typedef enum metro_backend {
    METRO_BACKEND_CPU = 1,
    METRO_BACKEND_CUDA = 2
} metro_backend;

/* ---- declared parameters ------------------------------------------------ */

typedef enum metro_param_type {
    METRO_PARAM_INT = 1,    /* long; range [min, max] */
    METRO_PARAM_REAL,       /* double; range [min, max] */
    METRO_PARAM_BOOL,       /* true/false, yes/no, on/off, 1/0 */
    METRO_PARAM_CHOICE,     /* one of choices, "a|b|c" (no blanks around '|') */
    METRO_PARAM_STRING,     /* any text */
    METRO_PARAM_REAL_LIST   /* comma-separated doubles, each in [min, max] */
} metro_param_type;

/* One parameter a plugin accepts.  default_value is text as it would be
 * written in the INI file; NULL makes the parameter required. */
typedef struct metro_param_decl {
    const char *name;
    metro_param_type type;
    const char *default_value;
    double min, max;         /* INT, REAL, REAL_LIST; ignored otherwise */
    const char *choices;     /* CHOICE: "a|b|c", no blanks around '|' */
    const char *unit;        /* "" when dimensionless */
    const char *doc;         /* one line */
} metro_param_decl;

#define METRO_PARAM_END { NULL, (metro_param_type)0, NULL, 0, 0, NULL, NULL, NULL }

/* Validated values of one section, read through host->param_*(). */
typedef struct metro_params metro_params;

/* ---- services the core gives plugins ------------------------------------ */

typedef struct metro_rng metro_rng;   /* cuRAND Philox4_32_10 stream */
typedef struct metro_ctx metro_ctx;   /* one plugin instance's link to the run */
typedef struct metro_frame metro_frame;           /* a configuration for a trajectory */
typedef struct metro_frame_mark metro_frame_mark; /* where a trajectory file stands */

typedef enum metro_log_level {
    METRO_LOG_ERROR = 0, METRO_LOG_WARN, METRO_LOG_INFO, METRO_LOG_DEBUG
} metro_log_level;

typedef struct metro_host_api {
    uint32_t version;        /* METRO_ABI_VERSION of the core */

    /* Record why the current call failed; returns -1 so that a plugin can
     * write `return host->fail(ctx, "...", ...);`. */
    int (*fail)(metro_ctx *ctx, const char *fmt, ...);
    /* Log a line to the run's log (and to stderr when not quiet). */
    void (*log)(metro_ctx *ctx, metro_log_level level, const char *fmt, ...);

    /* Parameter values by declared name (an undeclared name, or one read as
     * another type, is a bug in the plugin: the process exits 1 with a
     * message naming it).  The declarations themselves are checked when the
     * plugin is loaded (names, types, ranges, defaults). */
    long (*param_int)(const metro_params *p, const char *name);
    double (*param_real)(const metro_params *p, const char *name);
    int (*param_bool)(const metro_params *p, const char *name);
    const char *(*param_string)(const metro_params *p, const char *name);
    /* REAL_LIST: number of values in *n; array owned by the core. */
    const double *(*param_list)(const metro_params *p, const char *name, int *n);

    /* Uniform floats in (0, 1] from the plugin instance's own Philox stream.
     * out is host memory on the CPU backend, device memory on CUDA (written
     * asynchronously on ctx's stream).  Both backends give the same numbers
     * for the same seed and plugin instance. */
    int (*uniform)(metro_ctx *ctx, float *out, size_t n);

    /* CUDA backend only: a kernel of the JIT-linked module by its
     * extern "C" name; the value is a cudaKernel_t, launch it with
     * cudaLaunchKernel((const void *)k, ...) on host->stream(ctx). */
    int (*kernel)(metro_ctx *ctx, const char *name, void **kernel);
    /* CUDA backend only: the run's stream (a cudaStream_t). */
    void *(*stream)(metro_ctx *ctx);

    /* Open a file in the run directory for writing ("w") — the only place
     * plugins write — from measure() or finish(): in create() there is no
     * run directory yet (it is made once every check has passed), and the
     * call fails.  NULL (with the reason recorded) on failure.  What is
     * written goes to a temporary file; the core moves every file opened
     * this way into place under its name only after the sampler's and
     * every observable's finish() have succeeded and the data is on disk,
     * so results are never seen half-written and a failed run leaves the
     * previous results as they were.  Write errors (a full disk, a file
     * size limit) are caught by the core even where fclose() is not
     * checked.  A file has one writer: a name another section (or the
     * core: config.ini, log.txt, checkpoint.bin; or *.tmp) writes is
     * refused, and a parameter `file` naming one of the core's is refused
     * before the run starts.  An
     * observable whose file names depend on its parameters names those
     * parameters file, prefix, format, replicas or slots: two sections of
     * one plugin that agree on all of them (or whose plugin has none) are
     * refused before the run starts. */
    FILE *(*open_output)(metro_ctx *ctx, const char *filename);
    /* The run directory, for messages. */
    const char *(*run_dir)(metro_ctx *ctx);

    /* Byte buffer for save(); append n bytes. */
    int (*save_bytes)(metro_ctx *ctx, const void *data, size_t n);

    /* ---- ABI version 2 ---- */
    /* The one CUDA error path: 0 when status (a cudaError_t) is
     * cudaSuccess; otherwise records "CUDA: WHAT failed: NAME (text)" with
     * WHAT printf-formatted by the caller, naming the call and the sizes
     * involved, and returns -1:
     *     if (host->cuda(ctx, cudaMalloc(&p, n), "cudaMalloc of %zu bytes", n)) return -1; */
    int (*cuda)(metro_ctx *ctx, int status, const char *what, ...);
    /* Draw plots from a gnuplot script this plugin wrote with open_output,
     * run in the run directory once the results are in place (plots are
     * made from the committed files).  A missing gnuplot or a failing
     * script is logged as a warning, never an error. */
    void (*plot)(metro_ctx *ctx, const char *script);
    /* Trajectories (metro_frame, metro_frame_mark below).  Append one
     * configuration to the trajectory FILENAME in the run directory, in the
     * format its extension names: .gsd (HOOMD-blue's GSD, schema hoomd) or
     * .xyz / .extxyz (extended XYZ as ASE and OVITO read it).  Unlike
     * open_output() files, a trajectory grows during the run: each frame is
     * synced as it is written and becomes visible to readers only whole.
     * *mark is where the file stands and is advanced by the call: a zeroed
     * mark creates (replaces) the file; otherwise the file must be exactly
     * as that mark left it.  Without a run directory nothing is written.
     * It may be called from a thread of the plugin's own while no other
     * call of the plugin with the same ctx runs (a failure's message is
     * ctx's, reported by the plugin's next call returning non-zero). */
    int (*frame_append)(metro_ctx *ctx, const char *filename, const metro_frame *frame,
                        metro_frame_mark *mark);
    /* Cut FILENAME back to *mark (one frame_append returned, kept through
     * save()/restore()), so that a resumed run continues the file exactly
     * as a straight run writes it; a zeroed mark removes the file.  Call it
     * from measure()/finish(), not from restore(): the run directory is
     * locked only after restore(). */
    int (*frame_truncate)(metro_ctx *ctx, const char *filename, const metro_frame_mark *mark);
    /* Ranks (an MPI build running one system over several processes).
     * The replicas this process advances: [*first, *last) of `replicas`;
     * the whole range in a plain build or with one rank.  A sampler that
     * asks spreads its replicas over ranks; one that never asks runs whole
     * on every rank (the same chain, computed several times). */
    void (*replicas_here)(metro_ctx *ctx, int replicas, int *first, int *last);
    /* array holds one record of `bytes` per replica, each process having
     * written its own [first, last): afterwards every process has every
     * record (collective: every rank calls it, in the same order). */
    int (*share_replicas)(metro_ctx *ctx, void *array, int replicas, size_t bytes);

    /* ---- ABI version 3 ---- */
    /* Named facts about the system that a potential term knows and others
     * need, so that the core's structs do not grow with each potential
     * family.  A term publishes them in create(); samplers and observables
     * (created later) read them.  Names in use: "cell_radius" (a spherical
     * hard wall: centres within cell_radius - d/2), "bjerrum" (a Coulomb
     * term's λ_B at the run's unit temperature), "bond_length" (where a
     * bonded pair sits at rest, for placing chains).  Publishing a name
     * another term published with a different value fails, naming both.
     * fact() returns 1 and sets *value when the fact is known, else 0. */
    int (*fact_set)(metro_ctx *ctx, const char *name, double value);
    int (*fact)(metro_ctx *ctx, const char *name, double *value);

    /* ---- ABI version 7 ---- */
    /* Name, in create(), a file this instance will write with open_output
     * or frame_append: a name the core or another section writes fails the
     * call (-1, the reason recorded), so the config is refused before the
     * run starts instead of when the second writer first writes.  A plugin
     * whose file names are computed from its parameters (a stem and a
     * suffix a replica) claims them here; the later open or append of a
     * claimed name by the same instance passes. */
    int (*claim_output)(metro_ctx *ctx, const char *filename);
} metro_host_api;

/* ---- the simulated state ------------------------------------------------ */

#define METRO_MAX_SPECIES 8

/* A kind of particle.  Declared once for the run — in [system] (species,
 * charges, diameters, counts), by the initial file, or, in a run of one
 * potential that declares none there, by that potential — and read by
 * every term.  Particle w holds its species index (0 without species). */
typedef struct metro_species {
    char name[16];
    double charge;           /* valence, units of e */
    double diameter;         /* hard-core diameter, length units */
    long count;              /* particles of this species per replica */
} metro_species;

/* The bonds of a system: linear chains.  Chain c is the particles
 * first[c] .. first[c] + length[c] - 1, each bonded to the next; chains do
 * not overlap; particles in no chain are free.  bond_next[i] is 1 when
 * particle i is bonded to i + 1 (NULL when there are no chains).  Owned by
 * the core, the same for every replica. */
typedef struct metro_topology {
    int chains;
    const int *first, *length;
    const unsigned char *bond_next;
} metro_topology;

/* Whether particles i and j are bonded (host code). */
static inline int metro_bonded_pair(const metro_topology *t, int i, int j)
{
    int lo = i < j ? i : j;
    return t->bond_next && (i - j == 1 || j - i == 1) && t->bond_next[lo];
}

/* The species along pos[0..n-1] (into w) for count[s] particles of species
 * s (summing to n): at each index the species furthest behind its share,
 * so every prefix holds each species within one of its share (nearly
 * neutral for ions).  How the core lays out the free particles of a
 * system; tools that place a system without the core use it to lay it out
 * the same way. */
static inline void metro_species_interleave(metro_float4 *pos, int n, const long *count, int nspecies)
{
    long placed[METRO_MAX_SPECIES] = {0};
    for (int i = 0; i < n; ++i) {
        int best = 0;
        double lag = -1e300;
        for (int s = 0; s < nspecies; ++s) {
            if (placed[s] >= count[s]) continue;
            double l = (double)(i + 1) * (double)count[s] / (double)n - (double)placed[s];
            if (l > lag) lag = l, best = s;
        }
        placed[best]++;
        pos[i].w = (float)best;
    }
}

/* The 21 low bits of v spread to every third bit: one coordinate's share
 * of a Z-order (Morton) code, spread(x) << 2 | spread(y) << 1 | spread(z).
 * The core numbers particles along that curve ([system] numbering =
 * space); an octree's cells stored in that order have their eight
 * children side by side. */
static inline uint64_t metro_morton_spread(uint64_t v)
{
    v &= 0x1fffff;
    v = (v | v << 32) & 0x1f00000000ffffull;
    v = (v | v << 16) & 0x1f0000ff0000ffull;
    v = (v | v << 8) & 0x100f00f00f00f00full;
    v = (v | v << 4) & 0x10c30c30c30c30c3ull;
    v = (v | v << 2) & 0x1249249249249249ull;
    return v;
}

/* Facts about the system.  The core fills particles, backend, seed,
 * species (when [system] or the initial file declares them), topology and
 * terms before the potentials' create(); a lone potential may fill species
 * when the core left them empty; the sampler's create sets replicas.
 * Observables are created last and see all of it. */
typedef struct metro_setup {
    int particles;           /* per replica */
    int replicas;            /* default 1 */
    metro_backend backend;
    uint64_t seed;
    int species;             /* 0 when the system has none */
    metro_species species_table[METRO_MAX_SPECIES];
    metro_topology topology; /* chains; topology.chains = 0: no bonds */
    int terms;               /* potential terms of the energy (1: a lone potential) */
    /* ---- ABI version 2 ---- */
    long long sweeps;        /* production sweeps of the run ([run] sweeps) */
    long long equilibration; /* [run] equilibration */
    long every;              /* for an observable's create() and memory(): its
                                own measuring interval; 0 otherwise */
} metro_setup;

/* The live state, owned by the core.  Replica r's particles are
 * pos[r * particles ... (r+1) * particles - 1].  Temperatures belong to
 * slots: slot t runs at beta[t] and currently holds replica slot_replica[t]
 * (parallel tempering permutes this instead of moving coordinates). */
typedef struct metro_state {
    metro_backend backend;
    int particles;
    int replicas;
    int chain;               /* 1 when the system has bonds (topology) */
    const metro_topology *topology;
    metro_float4 *pos;       /* host copy */
    metro_float4 *d_pos;     /* device copy (CUDA backend), NULL on CPU */
    double *energy;          /* host: total energy of each replica */
    double *d_energy;        /* device copy (CUDA backend) */
    double *beta;            /* host: inverse temperature of each slot */
    int *slot_replica;       /* host: replica in each slot */
    int *d_slot_replica;     /* device copy of slot_replica, kept by samplers
                                that permute slots (NULL: the identity) */
    long long *accepted;     /* host: accepted local moves of each replica */
    long long *attempted;    /* host: attempted local moves of each replica */
    long long sweep;         /* sweeps done so far, equilibration included */
    int measuring;           /* 0 during equilibration, 1 after */
    /* Samplers keep each replica's running energy in energy / d_energy
     * (the core recomputes it from scratch now and then, checks the drift
     * and writes the fresh value into both).
     * The core keeps host and device copies in step: before an observable
     * or a check reads pos/energy/slot_replica on the host it calls the
     * sampler's sync(CUDA->host). */
} metro_state;

/* ---- trajectory frames (host->frame_append) ------------------------------ */

/* One configuration to be written: a replica's particles with what the
 * file says about them. */
struct metro_frame {
    int particles;
    const metro_float4 *pos;          /* x, y, z; w = species index (0 without species) */
    int species;                      /* rows of species_table; 0: one kind of particle */
    const metro_species *species_table;
    double cell_radius;               /* spherical cell; 0 = open space */
    const metro_topology *topology;   /* bonds to write (GSD bonds/), NULL: none */
    long long sweep;
    int replica;                      /* the replica these positions belong to */
    int slot;                         /* its temperature slot, -1 when not known */
    double temperature;               /* of that slot (1/beta), 0 when not known */
};

/* Where a trajectory file stands after the last complete frame: what an
 * observable saves so that a resumed run can cut the file back to it.
 * Opaque but for frames; all zeros: no file yet. */
struct metro_frame_mark {
    uint64_t frames;                  /* complete frames */
    uint64_t bytes;                   /* length of the file */
    uint64_t index_at, index_entries; /* GSD: where its index lies, its capacity */
};

/* ---- kind-specific host tables ------------------------------------------ */

/* Optional in every table from ABI version 2 (NULL when absent): the bytes
 * this instance will allocate for the sizes in setup, on the host and on
 * the device (CUDA backend), beyond the core's own state.  Called right
 * after create() — so create() must not allocate anything that grows with
 * the system — and before anything large is allocated: the core adds the
 * figures up and refuses a run that cannot fit, before it starts. */
#define METRO_MEMORY_FN \
    int (*memory)(void *self, const metro_setup *setup, size_t *host_bytes, size_t *device_bytes)

/* metro_potential_api.flags */
#define METRO_POTENTIAL_BONDS 1u  /* defines a bond energy of its own: it is the
                                     term that owns the system's bonds */

/* Potentials: each is one term of the run's energy (docs/COMPOSITION.md).
 * The device side implements, in its LTO-IR, the per-term functions of
 * metro/device.h under its own name (pair, bond and external energies,
 * pair-deltas).  The host side provides whole loops, used when the term is
 * the run's only one, so the pair function inlines on the CPU too; and the
 * per-pair functions, from which the core sums a composed system. */
typedef struct metro_potential_api {
    uint32_t version;
    int (*create)(const metro_host_api *host, metro_ctx *ctx,
                  const metro_params *params, metro_setup *setup, void **self);
    void (*destroy)(void *self);
    /* The parameter block its device functions read (copied verbatim into
     * the module's metro_potential_params, at most METRO_PARAMS_MAX bytes). */
    const void *(*device_params)(void *self, size_t *size);
    /* Fill pos[0..n-1] with an allowed starting configuration. */
    int (*initial)(void *self, metro_ctx *ctx, metro_float4 *pos, int n);
    /* Energy change of moving particle i of pos[0..n-1] to trial, against
     * every other particle plus bonds and external terms; +INFINITY for a
     * forbidden trial.  Summed in double. */
    double (*delta)(void *self, const metro_float4 *pos, int n, int i, metro_float4 trial);
    /* Total energy of pos[0..n-1], summed in double. */
    double (*total)(void *self, const metro_float4 *pos, int n);
    /* ---- ABI version 2 ---- */
    METRO_MEMORY_FN;
    /* ---- ABI version 3 ---- */
    unsigned flags;          /* METRO_POTENTIAL_* */
    /* The same floats as the device functions NAME__pair_energy,
     * __bond_energy and __external_energy (metro/device.h), for composed
     * systems on the CPU.  bond is NULL unless flags has BONDS. */
    float (*pair)(void *self, metro_float4 a, metro_float4 b);
    float (*bond)(void *self, metro_float4 a, metro_float4 b);
    float (*external)(void *self, metro_float4 a);
    /* The distance r_c from which its pair energy (and so its pair-delta) is
     * exactly 0 for every pair of species; 0: no pair term; INFINITY or a
     * NULL function: long-ranged.  The core's composite then evaluates the
     * term only for partners nearer than r_c, which keeps a short-ranged
     * term nearly free beside a long-ranged one (docs/COMPOSITION.md). */
    double (*cutoff)(void *self);
} metro_potential_api;

/* Samplers own the Markov chain. */
typedef struct metro_sampler_api {
    uint32_t version;
    /* May set setup->replicas and must fill state->beta after start. */
    int (*create)(const metro_host_api *host, metro_ctx *ctx,
                  const metro_params *params, metro_setup *setup, void **self);
    void (*destroy)(void *self);
    /* Positions and energies are initialised (host, and device on CUDA);
     * pot is the potential's table and instance for CPU loops.  Fill beta
     * and slot_replica. */
    int (*start)(void *self, metro_state *st, const metro_potential_api *pot, void *pot_self);
    /* Advance the chain by `sweeps` sweeps. On CUDA this may return before
     * the device finishes; sync() is the barrier. */
    int (*advance)(void *self, metro_state *st, long sweeps);
    /* Bring the host copies of pos, energy and slot_replica up to date. */
    int (*sync)(void *self, metro_state *st);
    /* Write acceptance statistics etc. into the run directory and log. */
    int (*finish)(void *self, metro_state *st);
    /* Exact restart.  save() is called after sync(): append with
     * host->save_bytes whatever the chain needs beyond metro_state.
     * restore() is called after start() when a run resumes: metro_state
     * (host and device copies of positions and energies, and the host
     * arrays beta, slot_replica, accepted, attempted, sweep) is already
     * restored; restore the rest and re-upload any device copies the
     * sampler keeps of them. */
    int (*save)(void *self);
    int (*restore)(void *self, const void *data, size_t size);
    /* ---- ABI version 2 ---- */
    METRO_MEMORY_FN;
    /* ---- ABI version 3: shared launches, the sampler's optional join() /
     * leave() (appended; both NULL when absent) ----
     * join(selves, k): the core offers the k started instances of this
     * plugin that one process advances at once, each from its own thread
     * (an ensemble's systems, in system order), before any of them
     * advances; on CUDA only instances on the same device whose linked
     * code and constant bytes are the same, so one instance's kernel may
     * run for all.  The sampler may then advance instances it can combine
     * (same size and layout) in the same device launches,
     * provided every system's chain stays, bit for bit, the chain of its
     * separate run.  Instances so joined meet inside advance(): from then
     * on each must be advanced by its own thread, and the core calls
     * leave(self) from that thread as soon as the system will advance no
     * more (its run ended or failed), so it never holds the others up.
     * destroy() leaves too.  A sampler that cannot combine the instances
     * (CPU backend, different sizes) returns 0 and changes nothing. */
    int (*join)(void *const *selves, int k);
    void (*leave)(void *self);
    /* ---- ABI version 5: the sampler's optional total() (NULL when absent) ----
     * total(self, st, out): each replica's total energy at st's current
     * positions, computed by the sampler's own means where the core's direct
     * sum (O(N²) pair terms) would be slow: a tree, within the drift check's
     * tolerance.  The core asks it for the initial energies (after start(),
     * before the first advance(); start() must not read st->energy) and for
     * every energy check (after sync()).  Returns 0 with out[] filled, 1 to
     * leave this call to the core's direct sum, or -1 on failure (reason
     * given through host->fail).  An overlap gives +INFINITY, as the direct
     * sum would. */
    int (*total)(void *self, const metro_state *st, double *out);
    /* ---- ABI version 6: the sampler's optional cost() (NULL when absent) ----
     * cost(self, setup, seconds): the seconds one sweep of this instance
     * (created, not started) is expected to take on setup->backend, for
     * `metro run --dry-run`, where the core would quote the direct sum's
     * N(N-1) pair terms per replica at its measured rates.  Returns 0 with
     * *seconds set (and may name its basis in host->log at debug level),
     * or 1 to leave the estimate to the core. */
    int (*cost)(void *self, const metro_setup *setup, double *seconds);
    /* ---- ABI version 8 (METRO_RESUMABLE_FIELD, above) ---- */
    METRO_RESUMABLE_FIELD;
} metro_sampler_api;

/* Observables measure the state every `every` sweeps after equilibration.
 * They are created last, after the device code is linked (host->kernel()
 * works in create()). */
typedef struct metro_observable_api {
    uint32_t version;
    int (*create)(const metro_host_api *host, metro_ctx *ctx,
                  const metro_params *params, const metro_setup *setup, void **self);
    void (*destroy)(void *self);
    /* Host copies are current when this is called. */
    int (*measure)(void *self, const metro_state *st);
    /* Write results (CSV with a header row) into the run directory. */
    int (*finish)(void *self, const metro_state *st);
    /* Accumulators for exact restart and for re-running finish() on a
     * stopped run (metro resume); same contract as the sampler's. */
    int (*save)(void *self);
    int (*restore)(void *self, const void *data, size_t size);
    /* Optional (NULL when absent).  On the CUDA backend, when every
     * observable due at a sweep has it, the core skips the host sync and
     * calls this instead of measure(): read st->d_pos, st->d_energy and
     * st->d_slot_replica, accumulate on the device (kernels on
     * host->stream), copy back in bulk in finish() and save(). */
    int (*measure_device)(void *self, const metro_state *st);
    /* ---- ABI version 2 ---- */
    METRO_MEMORY_FN;
    /* ---- ABI version 8 (METRO_RESUMABLE_FIELD, above) ---- */
    METRO_RESUMABLE_FIELD;
} metro_observable_api;

/* ---- the descriptor ----------------------------------------------------- */

typedef struct metro_plugin {
    uint32_t abi_version;            /* METRO_ABI_VERSION */
    metro_kind kind;
    const char *name;                /* must equal the file's stem */
    const char *version;             /* "1.0.0" */
    const char *summary;             /* one line */
    const metro_param_decl *params;  /* ends with METRO_PARAM_END */
    const void *api;                 /* metro_{potential,sampler,observable}_api */
    const unsigned char *device_ir;  /* fatbin holding LTO-IR, or NULL */
    size_t device_ir_size;
} metro_plugin;

#define METRO_PLUGIN_ENTRY "metro_plugin_entry"
typedef const metro_plugin *(*metro_plugin_entry_fn)(void);

#if defined(__GNUC__)
#define METRO_EXPORT __attribute__((visibility("default")))
#else
#define METRO_EXPORT
#endif

/* Device IR embedded by the build (plugins/MetroPlugin.cmake); weak so a
 * plugin without device code links too. */
extern const unsigned char metro_device_ir[] __attribute__((weak));
extern const size_t metro_device_ir_size __attribute__((weak));

/* METRO_PLUGIN(kind, name, version, summary, params, api): defines the
 * entry symbol.  The api argument is type-checked against the kind's table
 * at compile time: in C11 a table of another kind is an error of its own
 * (_Generic: a pointer's return alone was only a warning, and the loader
 * then read a potential's table as a sampler's); in C++ the return is. */
#define METRO__API_TYPE_1 metro_potential_api
#define METRO__API_TYPE_2 metro_sampler_api
#define METRO__API_TYPE_3 metro_observable_api
#define METRO__CAT(a, b) a##b
#define METRO__API_TYPE(k) METRO__CAT(METRO__API_TYPE_, k)
#define METRO__KIND_potential 1
#define METRO__KIND_sampler 2
#define METRO__KIND_observable 3

#if defined(__cplusplus) || !defined(__STDC_VERSION__) || __STDC_VERSION__ < 201112L
#define METRO__API_KIND_CHECK(kind_, api_) /* C++ and C before C11: the return's check alone */
#else
#define METRO__API_KIND_CHECK(kind_, api_)                                               \
    _Static_assert(_Generic(&(api_), const METRO__API_TYPE(METRO__KIND_##kind_) *: 1,    \
                            METRO__API_TYPE(METRO__KIND_##kind_) *: 1, default: 0),       \
                   "METRO_PLUGIN(" #kind_ ", ...): the api table is not a metro_" #kind_ \
                   "_api (the kind and the table disagree)");
#endif

#define METRO_PLUGIN(kind_, name_, version_, summary_, params_, api_)                  \
    METRO__API_KIND_CHECK(kind_, api_)                                               \
    static const METRO__API_TYPE(METRO__KIND_##kind_) *metro__api_check(void)         \
    {                                                                                \
        return &(api_);                                                              \
    }                                                                                \
    METRO_EXPORT const metro_plugin *metro_plugin_entry(void)                        \
    {                                                                                \
        static metro_plugin d;                                                       \
        d.abi_version = METRO_ABI_VERSION;                                           \
        d.kind = (metro_kind)METRO__KIND_##kind_;                                    \
        d.name = (name_);                                                            \
        d.version = (version_);                                                      \
        d.summary = (summary_);                                                      \
        d.params = (params_);                                                        \
        d.api = metro__api_check();                                                  \
        d.device_ir = &metro_device_ir ? metro_device_ir : NULL;                    \
        d.device_ir_size = &metro_device_ir_size ? metro_device_ir_size : 0;         \
        return &d;                                                                   \
    }

#ifdef __cplusplus
}
#endif

#endif
