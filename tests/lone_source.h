/* tests/lone_source.h — the generated run-wide device functions
 * (core/src/compose.c) for one potential plugin alone, as a run of it
 * links them: tests that link plugins' device code by hand add this. */
#ifndef METRO_TEST_LONE_SOURCE_H
#define METRO_TEST_LONE_SOURCE_H

#include <string.h>

#include "jit.h"
#include "sim.h"

/* heap text; a potential that owns bonds gets one chain of 13 particles */
static inline char *lone_source(const metro_plugin *pot)
{
    static int first = 0, length = 13;
    static const metro_topology one_chain = {1, &first, &length, NULL};
    int bonds = (((const metro_potential_api *)pot->api)->flags & METRO_POTENTIAL_BONDS) != 0;
    metro__compose_desc d = {.n = 1, .all = 1, .bond = bonds ? 0 : -1, .topology = bonds ? &one_chain : NULL};
    d.name[0] = pot->name;
    d.mask[0] = 1;
    return metro__compose_text(&d);
}

static inline metro__ir lone_ir(const char *text)
{
    return (metro__ir){"the composed energy (generated)", (const unsigned char *)text, strlen(text), 1};
}

#endif
