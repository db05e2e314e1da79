/* core/src/backend.c — the backends: choosing one, starting CUDA (linking
 * the device code, the state on the device) and total energies. */
#define _GNU_SOURCE
#include "sim.h"

#include <cuda_runtime_api.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "jit.h"
#include "ranks.h"
#include "util.h"

int metro__cuda_fail(metro_error *err, int status, const char *what, ...)
{
    if (status == cudaSuccess) return METRO_OK;
    char w[1024];
    va_list ap;
    va_start(ap, what);
    vsnprintf(w, sizeof w, what, ap);
    va_end(ap);
    cudaGetLastError();
    return metro__fail(err, METRO_ERUN, "CUDA: %s failed: %s (%s)", w, cudaGetErrorName((cudaError_t)status),
                       cudaGetErrorString((cudaError_t)status));
}

#define CUDA_TRY(call, ...)                                                  \
    do {                                                                     \
        int rc_ = metro__cuda_fail(err, (int)(call), __VA_ARGS__);           \
        if (rc_) return rc_;                                                 \
    } while (0)

int metro__choose_backend(metro_sim *sim, const char *want, metro_error *err)
{
    int count = 0;
    cudaError_t e = strcmp(want, "cpu") ? cudaGetDeviceCount(&count) : cudaSuccess;
    if (!strcmp(want, "cpu") || (!strcmp(want, "auto") && (e != cudaSuccess || count == 0))) {
        sim->setup.backend = METRO_BACKEND_CPU;
        snprintf(sim->device_name, sizeof sim->device_name, "CPU");
        return METRO_OK;
    }
    if (e != cudaSuccess || count == 0) {
        /* where cuda was asked for: the config's line, a --set, or --device */
        metro__entry *at = metro__config_find(sim->cfg, "run", "device");
        return metro__fail(err, METRO_ERUN, "%s%s[run] device = cuda: no usable CUDA device (%s); run with --device cpu",
                           at ? at->where : "", at ? ": " : "", e != cudaSuccess ? cudaGetErrorString(e) : "none found");
    }
    /* MPI ranks take the host's GPUs in turn (one each where there are
     * enough); a plain run takes device 0 */
    sim->device = metro__rank() % count;
    CUDA_TRY(cudaSetDevice(sim->device), "selecting device %d", sim->device);
    struct cudaDeviceProp prop;
    CUDA_TRY(cudaGetDeviceProperties(&prop, sim->device), "reading the properties of device %d", sim->device);
    sim->setup.backend = METRO_BACKEND_CUDA;
    char which[32] = "";
    if (count > 1) snprintf(which, sizeof which, ", device %d of %d", sim->device, count);
    snprintf(sim->device_name, sizeof sim->device_name, "%s (sm_%d%d, %d SMs%s)", prop.name, prop.major, prop.minor,
             prop.multiProcessorCount, which);
    return METRO_OK;
}

int metro__device_memory(size_t *free_bytes, size_t *total_bytes, metro_error *err)
{
    CUDA_TRY(cudaMemGetInfo(free_bytes, total_bytes), "reading the free device memory");
    return METRO_OK;
}

/* Host -> device copy ordered with the plugins' work: on the run's stream
 * (non-blocking, so the legacy stream would not order it), then waited for. */
int metro__upload(metro_sim *sim, void *dst, const void *src, size_t n, metro_error *err, const char *what)
{
    cudaStream_t s = (cudaStream_t)sim->stream;
    CUDA_TRY(cudaMemcpyAsync(dst, src, n, cudaMemcpyHostToDevice, s), "uploading %s (%zu bytes)", what, n);
    CUDA_TRY(cudaStreamSynchronize(s), "uploading %s (%zu bytes)", what, n);
    return METRO_OK;
}

int metro__link_device(metro_sim *sim, const char *arch, int cache, void **cubin, size_t *size, metro_error *err)
{
    /* each term's parameter block must fit its slot of the module's
     * metro_potential_params (checked again against the loaded symbol) */
    for (int k = 0; k < sim->nterms; ++k) {
        metro_ctx *t = &sim->terms[k];
        size_t psize = 0;
        ((const metro_potential_api *)t->plugin->d->api)->device_params(t->self, &psize);
        if (psize > METRO_PARAMS_MAX)
            return metro__fail(err, METRO_ERUN, "[%s] %s: device parameter block of %zu bytes exceeds %d (a plugin "
                                                "bug: device_params() of the potential)",
                               t->section, t->plugin->d->name, psize, METRO_PARAMS_MAX);
    }
    metro__ir irs[3 + METRO_MAX_TERMS + 64];
    int n = 0;
    irs[n++] = (metro__ir){"core", metro__core_ir, metro__core_ir_size, 0};
    /* the run-wide device functions: the terms' sum and the chains' bonds */
    char *src = metro__compose_source(sim);
    if (!src) return metro__fail(err, METRO_ERUN, "out of memory writing the composed device source");
    irs[n++] = (metro__ir){"the composed energy (generated)", (const unsigned char *)src, strlen(src), 1};
    for (int k = 0; k < sim->nterms; ++k) {
        int dup = 0; /* a plugin that is several terms is linked once */
        for (int j = 0; j < k; ++j) dup |= sim->terms[j].plugin == sim->terms[k].plugin;
        const metro_plugin *d = sim->terms[k].plugin->d;
        if (!d->device_ir_size) {
            free(src);
            return metro__fail(err, METRO_ERUN, "[%s] %s: the potential has no device code, which a run on the GPU "
                                                "links (its plugin was built without DEVICE: metro_add_plugin(NAME "
                                                "SOURCES ... DEVICE NAME.cu))",
                               sim->terms[k].section, d->name);
        }
        if (!dup) irs[n++] = (metro__ir){d->name, d->device_ir, d->device_ir_size, 0};
    }
    irs[n++] = (metro__ir){sim->smp.plugin->d->name, sim->smp.plugin->d->device_ir, sim->smp.plugin->d->device_ir_size, 0};
    for (int i = 0; i < sim->nobs && n < (int)(sizeof irs / sizeof *irs); ++i) {
        /* an observable used twice is linked once */
        int dup = 0;
        for (int j = 0; j < i; ++j) dup |= sim->obs[j].plugin == sim->obs[i].plugin;
        if (!dup)
            irs[n++] = (metro__ir){sim->obs[i].plugin->d->name, sim->obs[i].plugin->d->device_ir,
                                   sim->obs[i].plugin->d->device_ir_size, 0};
    }
    double t0 = metro__now();
    int rc = cache ? metro__jit_cached(irs, n, arch, cubin, size, &sim->cubin_cached, err)
                   : metro__jit_link(irs, n, arch, cubin, size, err);
    free(src);
    if (rc) return rc;
    sim->link_seconds = metro__now() - t0;
    return METRO_OK;
}

int metro__start_cuda(metro_sim *sim, metro_error *err)
{
    struct cudaDeviceProp prop;
    CUDA_TRY(cudaGetDeviceProperties(&prop, sim->device), "reading the properties of device %d", sim->device);
    char arch[16];
    snprintf(arch, sizeof arch, "sm_%d%d", prop.major, prop.minor);
    void *cubin;
    size_t size;
    int rc = metro__link_device(sim, arch, 1, &cubin, &size, err);
    if (rc) return rc;
    cudaStream_t s;
    CUDA_TRY(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "creating a stream");
    sim->stream = s;
    cudaLibrary_t lib;
    cudaError_t e = cudaLibraryLoadData(&lib, cubin, NULL, NULL, 0, NULL, NULL, 0);
    /* the device code and (below) its constants, for metro_sims_group */
    sim->device_digest = metro__fnv(metro__fnv(METRO__FNV_INIT, &sim->device, sizeof sim->device), cubin, size);
    free(cubin);
    CUDA_TRY(e, "loading the linked device code (%zu bytes)", size);
    sim->library = lib;
    void *sym;
    size_t symsize;
    CUDA_TRY(cudaLibraryGetGlobal(&sym, &symsize, lib, "metro_potential_params"), "finding metro_potential_params");
    /* each term's own parameter block, at k * METRO_PARAMS_MAX */
    for (int k = 0; k < sim->nterms; ++k) {
        metro_ctx *t = &sim->terms[k];
        size_t psize = 0;
        const void *params = ((const metro_potential_api *)t->plugin->d->api)->device_params(t->self, &psize);
        /* the block's own size was checked by metro__link_device */
        if ((size_t)(k + 1) * METRO_PARAMS_MAX > symsize)
            return metro__fail(err, METRO_ERUN, "[%s] %s: the linked module's metro_potential_params (%zu bytes) has "
                                                "no slot for term %d", t->section, t->plugin->d->name, symsize, k + 1);
        if (psize && (rc = metro__upload(sim, (char *)sym + (size_t)k * METRO_PARAMS_MAX, params, psize, err,
                                         "a potential term's parameters")))
            return rc;
    }
    cudaKernel_t k;
    CUDA_TRY(cudaLibraryGetKernel(&k, lib, "metro_core_total_energy"), "finding metro_core_total_energy");
    sim->k_total = (void *)k;
    /* systems whose kernels may run for each other (metro_sims_group):
     * the same code and the same constant bytes, read back as the device
     * holds them */
    unsigned char *cbytes = metro__xmalloc(symsize ? symsize : 1);
    e = cudaMemcpy(cbytes, sym, symsize, cudaMemcpyDeviceToHost);
    sim->device_digest = metro__fnv(sim->device_digest, cbytes, symsize);
    free(cbytes);
    CUDA_TRY(e, "reading back the device constants");
    size_t np = (size_t)sim->st.particles * (size_t)sim->st.replicas, nr = (size_t)sim->st.replicas;
    CUDA_TRY(cudaMalloc((void **)&sim->st.d_pos, np * sizeof(metro_float4)), "cudaMalloc of %zu bytes for positions",
             np * sizeof(metro_float4));
    CUDA_TRY(cudaMalloc((void **)&sim->st.d_energy, nr * sizeof(double)), "cudaMalloc of %zu bytes for energies",
             nr * sizeof(double));
    CUDA_TRY(cudaMalloc((void **)&sim->d_total, nr * sizeof(double)), "cudaMalloc of %zu bytes for energies",
             nr * sizeof(double));
    return metro__upload(sim, sim->st.d_pos, sim->st.pos, np * sizeof(metro_float4), err, "positions");
}

/* Recompute every replica's total energy into out[] (host): the
 * sampler's own sum where it offers one (total(), ABI 5: a tree), else the
 * direct sum of every pair.  On CUDA replicas are the grid's y dimension,
 * at most 65535 per launch: more are done in batches, so every replica
 * count the config accepts runs. */
int metro__total_all(metro_sim *sim, double *out, metro_error *err)
{
    metro_state *st = &sim->st;
    if (sim->smp_api->total) {
        int own = sim->smp_api->total(sim->smp.self, st, out);
        if (own < 0) return metro__plugin_failed(&sim->smp, err, METRO_ERUN, "could not sum the energy");
        if (own == 0) return METRO_OK;
    }
    if (st->backend == METRO_BACKEND_CPU) {
        /* a direct sum that takes minutes says so, once, rather than sit
         * silent (at the measured rate of one core) */
        double pairs = (double)st->particles * st->particles * st->replicas / 2;
        if (pairs > 1e10 && !sim->warned_direct) {
            sim->warned_direct = 1;
            metro__log(sim, METRO_LOG_WARN, "energy: %.3g pair terms on the CPU, about %.3g s per sum", pairs,
                       pairs / METRO_DIRECT_RATE_CPU);
        }
        for (int r = 0; r < st->replicas; ++r)
            out[r] = sim->pot_api->total(sim->pot_self, st->pos + (size_t)r * st->particles, st->particles);
        return METRO_OK;
    }
    cudaStream_t s = (cudaStream_t)sim->stream;
    size_t nr = (size_t)st->replicas;
    CUDA_TRY(cudaMemsetAsync(sim->d_total, 0, nr * sizeof(double), s), "clearing %zu energies", nr);
    int threads = 256;
    int blocks = (st->particles + threads - 1) / threads;
    if (blocks > 1024) blocks = 1024;
    int n = st->particles, chain = st->chain;
    for (int r0 = 0; r0 < st->replicas; r0 += 65535) {
        int batch = st->replicas - r0 < 65535 ? st->replicas - r0 : 65535;
        dim3 grid = {(unsigned)blocks, (unsigned)batch, 1}, block = {(unsigned)threads, 1, 1};
        const metro_float4 *pos = st->d_pos + (size_t)r0 * (size_t)n;
        double *o = sim->d_total + r0;
        void *args[] = {&pos, &n, &chain, &o};
        CUDA_TRY(cudaLaunchKernel((const void *)sim->k_total, grid, block, args, 0, s),
                 "launching the energy check (grid %d x %d, %d threads, replicas %d..%d)", blocks, batch, threads,
                 r0, r0 + batch - 1);
    }
    CUDA_TRY(cudaMemcpyAsync(out, sim->d_total, nr * sizeof(double), cudaMemcpyDeviceToHost, s),
             "reading %zu energies", nr);
    CUDA_TRY(cudaStreamSynchronize(s), "computing total energies");
    return METRO_OK;
}
