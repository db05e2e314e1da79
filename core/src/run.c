/* core/src/run.c — the run loop: equilibration, production with
 * measurements, energy checks, checkpoints (by sweeps and by wall time),
 * results. */
#define _GNU_SOURCE
#include "sim.h"

#include <cuda_runtime_api.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ranks.h"
#include "util.h"

/* ---- interruption ------------------------------------------------------- */

/* SIGINT/SIGTERM stop a run at the next chunk boundary with a checkpoint,
 * so a run cut short (^C, a batch system's time limit) can be resumed.  One
 * request often comes as two signals: coreutils' timeout signals the
 * process and then its process group, a batch system every process of the
 * job, and a process with CUDA's threads takes the first before the second
 * arrives (seen: `timeout -s TERM` killed a run on the GPU machine without
 * its checkpoint).  So a second signal within a second of the first is the
 * same request; a later one kills as usual. */
static volatile sig_atomic_t interrupted; /* the request; over MPI, agreed */
static volatile sig_atomic_t signalled;   /* this process's own signal came */
static struct timespec first_signal;
/* The handlers are the process's, and an ensemble runs its systems on
 * threads: they are installed when the first run starts and restored when
 * the last ends (restored by the first to end, a later signal killed the
 * others without their checkpoints), and a request stops every system */
static pthread_mutex_t signals_lock = PTHREAD_MUTEX_INITIALIZER;
static int signals_users;
static void (*old_int)(int), (*old_term)(int);

static void on_signal(int sig)
{
    struct timespec now; /* clock_gettime is async-signal-safe */
    clock_gettime(CLOCK_MONOTONIC, &now);
    /* not `interrupted`: a rank told to stop by the others may get its own
     * signal a moment later, and that is still the first */
    if (!signalled) {
        signalled = 1;
        first_signal = now;
        interrupted = sig;
        return;
    }
    if ((double)(now.tv_sec - first_signal.tv_sec) + 1e-9 * (double)(now.tv_nsec - first_signal.tv_nsec) < 1.0) return;
    signal(sig, SIG_DFL);
    raise(sig);
}

static void signals_take(void)
{
    pthread_mutex_lock(&signals_lock);
    if (signals_users++ == 0) {
        interrupted = signalled = 0;
        old_int = signal(SIGINT, on_signal);
        old_term = signal(SIGTERM, on_signal);
    }
    pthread_mutex_unlock(&signals_lock);
}

static void signals_give(void)
{
    pthread_mutex_lock(&signals_lock);
    /* a process stopped by its own signal is on its way out with exit 3,
     * its checkpoint written: the handler (a flag) stays, so a second
     * signal on the way (an impatient user, a scheduler's repeat) cannot
     * kill it there (it did, during LeakSanitizer's exit check) */
    if (--signals_users == 0 && !signalled) {
        signal(SIGINT, old_int);
        signal(SIGTERM, old_term);
    }
    pthread_mutex_unlock(&signals_lock);
}

/* ---- state ------------------------------------------------------------------ */

int metro__sync(metro_sim *sim, metro_error *err)
{
    if (sim->smp_api->sync(sim->smp.self, &sim->st))
        return metro__plugin_failed(&sim->smp, err, METRO_ERUN, "could not bring the state back");
    return METRO_OK;
}

const metro_state *metro_sim_state(metro_sim *sim, metro_error *err)
{
    return metro__sync(sim, err) ? NULL : &sim->st;
}

int metro_sim_advance(metro_sim *sim, long sweeps, metro_error *err)
{
    if (sweeps <= 0) return METRO_OK;
    if (sim->smp_api->advance(sim->smp.self, &sim->st, sweeps))
        return metro__plugin_failed(&sim->smp, err, METRO_ERUN, "failed");
    sim->st.sweep += sweeps;
    return METRO_OK;
}

double metro_sim_total_energy(metro_sim *sim, int r, metro_error *err)
{
    double *e = metro__xcalloc((size_t)sim->st.replicas, sizeof *e);
    double v = NAN;
    if (metro__sync(sim, err) == METRO_OK && metro__total_all(sim, e, err) == METRO_OK) v = e[r];
    free(e);
    return v;
}

/* Compare the running energies with a fresh computation; with resync,
 * take the fresh values so rounding cannot accumulate.  The check at the
 * end of a run only reports: a run extended later (resume --set
 * run.sweeps=...) then carries the same running energies as one run
 * straight through, whose schedule has no check there. */
static int check_energy(metro_sim *sim, double *worst, int resync, metro_error *err)
{
    metro_state *st = &sim->st;
    double *e = metro__xcalloc((size_t)st->replicas, sizeof *e);
    int rc = metro__total_all(sim, e, err);
    for (int r = 0; !rc && r < st->replicas; ++r) {
        double scale = fmax(fabs(e[r]), (double)st->particles);
        double drift = fabs(st->energy[r] - e[r]) / scale;
        if (!(drift <= *worst)) *worst = drift;
        if (isnan(e[r]))
            /* the sum itself has no number: no move's bookkeeping is to
             * blame, and drift says nothing */
            rc = metro__fail(err, METRO_ERUN,
                             "energy check at sweep %lld: replica %d runs at E = %.10g but recomputes to %g: %s%s gave a "
                             "non-finite energy ([potential] %s)",
                             st->sweep, r, st->energy[r], e[r], sim->smp_api->total ? "the sampler's total() or " : "",
                             st->backend == METRO_BACKEND_CUDA ? "the potential's device energy functions"
                                                               : "the potential's total()",
                             sim->pot_name);
        else if (!isfinite(e[r]) || !(drift <= sim->drift_tolerance))
            rc = metro__fail(err, METRO_ERUN,
                             "energy check at sweep %lld: replica %d runs at E = %.10g but recomputes to %.10g "
                             "(relative drift %.3g > drift_tolerance %.3g): the sampler's bookkeeping or the potential's delta() is wrong",
                             st->sweep, r, st->energy[r], e[r], drift, sim->drift_tolerance);
        if (resync) st->energy[r] = e[r];
    }
    if (!rc && resync && st->backend == METRO_BACKEND_CUDA)
        rc = metro__upload(sim, st->d_energy, st->energy, (size_t)st->replicas * sizeof(double), err, "energies");
    free(e);
    return rc;
}

static long gcd(long a, long b)
{
    while (b) { long t = a % b; a = b; b = t; }
    return a;
}

static void progress(metro_sim *sim, const char *phase, long done, long total, double t0, int final)
{
    static double last;
    double now = metro__now();
    if (sim->quiet || !isatty(2) || (!final && now - last < 0.5)) return;
    last = now;
    double rate = done / fmax(now - t0, 1e-9);
    double eta = rate > 0 ? (double)(total - done) / rate : 0;
    fprintf(stderr, "\r%s: sweep %ld/%ld (%.1f%%), %.4g sweeps/s, ETA %.0f s   %s", phase, done, total,
            total ? 100.0 * done / total : 100.0, rate, eta, final ? "\n" : "");
    fflush(stderr);
}

static int stop_requested(metro_sim *sim, metro_error *err)
{
    if (!interrupted) return METRO_OK;
    int rc = metro_sim_checkpoint(sim, err);
    if (rc) return rc;
    return metro__fail(err, METRO_ESTOPPED, "interrupted by signal %d at sweep %lld; the checkpoint is written: metro resume %s continues",
                       (int)interrupted, sim->st.sweep, sim->dir ? sim->dir : "(the run directory)");
}

/* Checkpoints come at every energy check and, in between, every
 * checkpoint_minutes of wall time, so a kill early in a long run loses
 * minutes, not a tenth of the run.  A checkpoint only reads the state:
 * where it falls does not change the chain. */
typedef struct schedule {
    long check, next_check; /* check 0: at sweeps 1, 2, 4, 8, ... */
    double last_ck;
    double worst;
} schedule;

/* The first energy check after `sweep`.  By default at the powers of two:
 * points that do not depend on how long the run is, so a run extended
 * later (resume --set run.sweeps=...) resyncs its running energies where a
 * run straight through does, and makes the same chain on the GPU too,
 * where the resync changes the last bits (ten checks a run, at a tenth of
 * its length, put them elsewhere once the length changed: parallel
 * tempering's exchanges, which read the running energies, then differed).
 * About log2 of the sweeps checks a run. */
static long check_after(const schedule *s, long long sweep)
{
    if (s->check > 0) return (long)((sweep / s->check + 1) * s->check);
    long p = 1;
    while (p <= sweep) p <<= 1;
    return p;
}

static int after_chunk(metro_sim *sim, schedule *s, int synced, metro_error *err)
{
    int rc = METRO_OK;
    metro_state *st = &sim->st;
    if (st->sweep >= s->next_check) {
        if (!synced) rc = metro__sync(sim, err);
        if (!rc) rc = check_energy(sim, &s->worst, 1, err);
        if (!rc) rc = metro_sim_checkpoint(sim, err);
        s->last_ck = metro__now();
        s->next_check = check_after(s, st->sweep);
    } else {
        /* wall time and signals differ between ranks: rank 0 decides for
         * all, so the collectives of a checkpoint meet */
        int due = sim->checkpoint_minutes > 0 && metro__now() - s->last_ck >= 60 * sim->checkpoint_minutes;
        if (sim->spread) due = metro__ranks_agree(due);
        if (due) {
            rc = metro_sim_checkpoint(sim, err);
            s->last_ck = metro__now();
        }
    }
    /* any rank's signal stops them all (rank 0's alone did: a signal to
     * another rank was lost, and its second one killed the job) */
    if (sim->spread) interrupted = metro__ranks_any(interrupted);
    if (!rc) rc = stop_requested(sim, err);
    return rc;
}

/* The next chunk of sweeps: twice this one while one took under 0.2 s
 * (from c0), up to 2^20; over MPI rank 0's clock decides for all, so every
 * rank meets the same collectives */
static long next_chunk(metro_sim *sim, long chunk, double c0)
{
    int grow = metro__now() - c0 < 0.2 && chunk < (1 << 20);
    if (sim->spread) grow = metro__ranks_agree(grow);
    return grow ? 2 * chunk : chunk;
}

int metro_sim_run(metro_sim *sim, metro_error *err)
{
    metro_state *st = &sim->st;
    /* the device is per host thread: an ensemble runs each system on its own */
    if (st->backend == METRO_BACKEND_CUDA) cudaSetDevice(sim->device);
    signals_take();
    double t0 = metro__now();
    schedule sch = {0};
    sch.check = sim->check_every;
    sch.next_check = check_after(&sch, st->sweep);
    sch.last_ck = t0;
    int rc = METRO_OK;
    long long first = st->sweep, att0 = 0; /* resumed runs: rates count this invocation */
    for (int r = 0; r < st->replicas; ++r) att0 += st->attempted[r];

    /* equilibration, in chunks for progress, checks and checkpoints */
    long chunk = 1;
    long eq_done = st->sweep < sim->equilibration ? (long)st->sweep : sim->equilibration;
    long prod_done = (long)st->sweep - eq_done;
    st->measuring = eq_done == sim->equilibration;
    for (long done = eq_done; done < sim->equilibration && !rc;) {
        long k = chunk;
        if (k > sim->equilibration - done) k = sim->equilibration - done;
        if (k > sch.next_check - st->sweep) k = sch.next_check - st->sweep;
        if (k < 1) k = 1;
        double c0 = metro__now();
        rc = metro_sim_advance(sim, k, err);
        if (st->backend == METRO_BACKEND_CUDA) cudaStreamSynchronize((cudaStream_t)sim->stream);
        done += k;
        chunk = next_chunk(sim, chunk, c0);
        progress(sim, "equilibration", done, sim->equilibration, t0, done == sim->equilibration);
        if (!rc) rc = after_chunk(sim, &sch, 0, err);
    }
    if (!rc && sim->equilibration)
        metro__log(sim, METRO_LOG_DEBUG, "equilibration: %ld sweeps done at %.1f s", sim->equilibration, metro__now() - t0);
    /* production: advance to the next measurement, sync, measure */
    long step = 0;
    for (int i = 0; i < sim->nobs; ++i) step = step ? gcd(step, sim->obs[i].every) : sim->obs[i].every;
    if (!step) step = sim->sweeps ? sim->sweeps : 1;
    st->measuring = 1;
    double p0 = metro__now();
    for (long done = prod_done; done < sim->sweeps && !rc;) {
        /* to the next multiple of step: a resumed run may stand between two
         * (it ended at a sweeps that was not one, and is extended) */
        long k = step - done % step;
        if (k > sim->sweeps - done) k = sim->sweeps - done;
        /* no longer than a chunk, nor past the next energy check: progress,
         * checks and wall-time checkpoints come between measurements too (a
         * run with no observables went through its production in one
         * advance, without a check or a checkpoint) */
        if (k > chunk) k = chunk;
        if (sch.next_check > st->sweep && k > sch.next_check - st->sweep) k = sch.next_check - st->sweep;
        double c0 = metro__now();
        rc = metro_sim_advance(sim, k, err);
        done += k;
        if (rc) break;
        /* timed on the host: on CUDA, where sweeps queue on the stream,
         * chunks soon reach their cap (measurements and checks then bound
         * them, as before) and the stream is never drained for it */
        chunk = next_chunk(sim, chunk, c0);
        /* Observables measure from host copies, which costs a sync, unless
         * on CUDA every one due can measure on the device. */
        int due = 0, host = 0;
        for (int i = 0; i < sim->nobs; ++i) {
            const metro_observable_api *a = sim->obs[i].plugin->d->api;
            int d = done % sim->obs[i].every == 0;
            due |= d;
            /* spread over ranks, a device holds only its rank's replicas
             * between syncs: measure from the shared host copies */
            host |= d && (st->backend != METRO_BACKEND_CUDA || !a->measure_device || sim->spread);
        }
        int synced = host || st->sweep >= sch.next_check;
        if (synced) rc = metro__sync(sim, err);
        for (int i = 0; i < sim->nobs && !rc && due; ++i) {
            metro_ctx *o = &sim->obs[i];
            const metro_observable_api *a = o->plugin->d->api;
            if (done % o->every) continue;
            if (host ? a->measure(o->self, st) : a->measure_device(o->self, st))
                rc = metro__plugin_failed(o, err, METRO_ERUN, "could not measure");
        }
        progress(sim, "production", done - prod_done, sim->sweeps - prod_done, p0, done == sim->sweeps);
        if (!rc && done % (sim->sweeps / 10 > step ? sim->sweeps / 10 / step * step : step) == 0)
            metro__log(sim, METRO_LOG_DEBUG, "production: %ld of %ld sweeps at %.1f s", done, sim->sweeps, metro__now() - t0);
        if (!rc) rc = after_chunk(sim, &sch, synced, err);
    }
    /* on CUDA the sweeps run on after advance() returns: their time ends
     * when the stream is done */
    if (st->backend == METRO_BACKEND_CUDA) cudaStreamSynchronize((cudaStream_t)sim->stream);
    double t_finish = metro__now();
    if (!rc) rc = metro__sync(sim, err);
    if (!rc) rc = check_energy(sim, &sch.worst, 0, err);
    if (!rc) rc = metro_sim_checkpoint(sim, err);
    if (!rc && sim->smp_api->finish(sim->smp.self, st))
        rc = metro__plugin_failed(&sim->smp, err, METRO_ERUN, "could not write its results");
    for (int i = 0; i < sim->nobs && !rc; ++i) {
        metro_ctx *o = &sim->obs[i];
        if (((const metro_observable_api *)o->plugin->d->api)->finish(o->self, st))
            rc = metro__plugin_failed(o, err, METRO_ERUN, "could not write its results");
    }
    /* the result files appear together, whole, or not at all */
    if (!rc) {
        rc = metro__outputs_commit(sim, err);
    } else {
        metro__outputs_report(sim, err);
        metro__outputs_discard(sim);
    }
    if (!rc) metro__plots_run(sim);
    if (!rc) metro__log(sim, METRO_LOG_DEBUG, "results written in %.1f s", metro__now() - t_finish);
    signals_give();
    double wall = metro__now() - t0;
    long long att = 0, acc = 0;
    for (int r = 0; r < st->replicas; ++r) { att += st->attempted[r]; acc += st->accepted[r]; }
    if (!rc) {
        /* after a resume the time and the rates are this run's alone: say so,
         * or "90 sweeps in 428 s" reads as twice the real speed */
        char what[96] = "";
        if (first) snprintf(what, sizeof what, " (%lld of them since the resume at sweep %lld)", st->sweep - first, first);
        /* the sweeps alone (their periodic checks and checkpoints
         * included), without the closing check, checkpoint and results,
         * which at 2^23 ions take seconds: the rates are theirs */
        const double sampling = t_finish - t0;
        metro__log(sim, METRO_LOG_INFO,
                   "done: %lld sweeps%s in %.3f s (sampling %.3f s: %.4g sweeps/s, %.4g moves/s), acceptance %.4f, "
                   "largest energy drift %.3g",
                   st->sweep, what, wall, sampling, (st->sweep - first) / fmax(sampling, 1e-9),
                   (att - att0) / fmax(sampling, 1e-9), att ? (double)acc / att : 0.0, sch.worst);
    } else if (sim->log) { /* the program prints err itself */
        fprintf(sim->log, "run stopped: %s", err->msg);
        fflush(sim->log);
    }
    return rc;
}
