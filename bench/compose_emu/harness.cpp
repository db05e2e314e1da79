// bench/compose_emu/harness.cpp — the generated source (composed.cu),
// compiled for the host (with -include shim.h), and the parameter blocks
// it reads.
#include <math.h>
#include "composed.cu"
unsigned char metro_potential_params[sizeof metro_potential_params]; // the size the generated source declares
