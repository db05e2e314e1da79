/* tests/plugins/halfterm.cu — a potential's device code without the
 * pair_delta_begin/add/end that metro/device.h asks of every term: the run
 * must not link, under any sampler (test_rundir). */
#include "metro/device.h"

extern "C" __device__ float METRO_TERM(pair_energy)(const void *P, float4 a, float4 b) { return 0.0f; }
extern "C" __device__ float METRO_TERM(external_energy)(const void *P, float4 a) { return 0.0f; }
extern "C" __device__ float METRO_TERM(pair_delta)(const void *P, float4 trial, float4 old, float4 b) { return 0.0f; }
