/* core/src/core_params.c — the parameters of the core's own sections,
 * [run] and [system]: one table, read by the assembly (sim.c) and by the
 * config fuzzer (tests/fuzz), so the fuzzer validates what a run does. */
#include "core_params.h"

const metro_param_decl metro__run_params[] = {
    {"seed", METRO_PARAM_INT, "1", 0, 9.2e18, NULL, "", "seed of every random stream of the run"},
    /* at most 2^62 each, so that sweeps + equilibration cannot overflow */
    {"sweeps", METRO_PARAM_INT, NULL, 0, 4.6e18, NULL, "sweeps", "production sweeps (measured)"},
    {"equilibration", METRO_PARAM_INT, "0", 0, 4.6e18, NULL, "sweeps",
     "sweeps before measuring starts"},
    {"device", METRO_PARAM_CHOICE, "auto", 0, 0, "auto|cpu|cuda", "",
     "backend: auto takes the GPU when one is there"},
    {"output", METRO_PARAM_STRING, "", 0, 0, NULL, "",
     "run directory (default runs/<config name>)"},
    {"systems", METRO_PARAM_INT, "1", 1, 4096, NULL, "",
     "independent copies of this system (seeds seed, seed+1, ...), run together in one process"},
    {"scan", METRO_PARAM_STRING, "", 0, 0, NULL, "",
     "SECTION.KEY: v1, v2, ...: one system per value, run together in one process"},
    {"check_every", METRO_PARAM_INT, "0", 0, 9.2e18, NULL, "sweeps",
     "recompute the total energy this often, report the drift and checkpoint (0: at sweeps 1, 2, 4, 8, ..., the same points in a run extended later)"},
    {"checkpoint_minutes", METRO_PARAM_REAL, "10", 0, 1e6, NULL, "min",
     "also checkpoint this often in wall time between energy checks (0: only at energy checks)"},
    {"drift_tolerance", METRO_PARAM_REAL, "1e-4", 0, 1, NULL, "",
     "largest allowed |E_running - E_recomputed| / max(|E|, N); beyond it the run stops"},
    METRO_PARAM_END};

const metro_param_decl metro__system_params[] = {
    {"particles", METRO_PARAM_INT, "0", 0, 2147483647.0, NULL, "",
     "particles per replica (0: the sum of counts)"},
    {"species", METRO_PARAM_STRING, "", 0, 0, NULL, "",
     "names of the particles' species, e.g. monomer, counterion (empty: one kind, or the lone potential's own)"},
    {"charges", METRO_PARAM_REAL_LIST, "", -1000, 1000, NULL, "e", "valence of each species (none given: all 0)"},
    {"diameters", METRO_PARAM_REAL_LIST, "", 0, 1e9, NULL, "length",
     "hard-core diameter of each species (one value: all; none: 0)"},
    {"counts", METRO_PARAM_REAL_LIST, "", 0, 2147483647.0, NULL, "", "particles of each species"},
    {"chains", METRO_PARAM_STRING, "", 0, 0, NULL, "",
     "linear chains, first in index order: lengths, each LENGTH or COUNTxLENGTH (e.g. 64 or 4x32, 16)"},
    {"chain_species", METRO_PARAM_STRING, "", 0, 0, NULL, "",
     "species along every chain, the list repeated (e.g. monomer, or cm, m, m for one charged in three)"},
    {"initial", METRO_PARAM_STRING, "", 0, 0, NULL, "",
     "start every replica from this configuration (.gsd, or extended .xyz); empty: the potential places the particles"},
    {"initial_frame", METRO_PARAM_INT, "-1", -9.2e18, 9.2e18, NULL, "",
     "frame of the initial file: 0 the first, -1 the last, -2 the one before"},
    {"numbering", METRO_PARAM_CHOICE, "placed", 0, 0, "placed|space", "",
     "the placed free particles' indices: as placed, or space: along a Z-order curve, so that the sweep in index "
     "order walks through space (hierarchical on the CPU: 1.3-1.8x faster from 2^20, its tree's cells stay in "
     "cache; on CUDA 1.4-1.7x slower: a batch's mates become neighbours); what is sampled is the same"},
    METRO_PARAM_END};

