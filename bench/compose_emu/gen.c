/* bench/compose_emu/gen.c — prints the generated device source of a
 * composite (lj_fene on species 0 with lj_fene's default r_c, coulomb_hs
 * on both species) as core/src/compose.c writes it for NVRTC. */
#include <stdio.h>
#include "sim.h"
int main(void) {
    static int first[2] = {0, 8}, length[2] = {8, 8};
    static const metro_topology chains = {2, first, length, NULL};
    metro__compose_desc d = {.n = 2, .all = 3, .bond = 0, .topology = &chains};
    d.name[0] = "lj_fene"; d.mask[0] = 1; d.range[0] = 1.559073;
    d.name[1] = "coulomb_hs"; d.mask[1] = 3;
    fputs(metro__compose_text(&d), stdout);
    return 0;
}
