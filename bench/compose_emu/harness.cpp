// bench/compose_emu/harness.cpp — the generated source (composed.cu),
// compiled for the host with shims for the few CUDA names it uses.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
struct float4 { float x, y, z, w; };
#define __device__
#define __constant__
#define __forceinline__ inline
static inline float __int_as_float(int i) { float f; memcpy(&f, &i, 4); return f; }
#include "composed.cu"
unsigned char metro_potential_params[1024 * 8];
