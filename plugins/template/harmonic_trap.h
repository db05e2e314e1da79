/* harmonic_trap.h — the physics of the template plugin, shared by the host
 * (.c) and device (.cu) code: ideal particles in an isotropic harmonic
 * trap, U = (k/2) |r|^2 per particle, no pair or bond terms.
 * Equipartition makes <E> = (3/2) N T exactly: a check any sampler can hit.
 * Written in the C subset with METRO_HD so both compilers take it. */
#ifndef HARMONIC_TRAP_H
#define HARMONIC_TRAP_H

#include "metro/hd.h"

typedef struct harmonic_trap_params {
    float k;    /* spring constant */
} harmonic_trap_params;

METRO_HD float harmonic_trap_external(const harmonic_trap_params *p, metro_float4 a)
{
    return 0.5f * p->k * (a.x * a.x + a.y * a.y + a.z * a.z);
}

#endif
