/* energy.cu — the energy observable's device side: one sample of every
 * slot's energy, read where the sampler keeps it, so measuring needs no
 * host sync (metro_observable_api.measure_device). */

/* out[t] = energy of the replica in slot t (slot_replica NULL: identity). */
extern "C" __global__ void energy_record(const double *energy, const int *slot_replica, int slots,
                                         double *out)
{
    for (int t = blockIdx.x * blockDim.x + threadIdx.x; t < slots; t += gridDim.x * blockDim.x)
        out[t] = energy[slot_replica ? slot_replica[t] : t];
}
