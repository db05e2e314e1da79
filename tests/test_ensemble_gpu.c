/* test_ensemble_gpu — the ensemble tests on CUDA: the systems run on
 * concurrent streams of one GPU and must still each equal the separate run
 * with its seed, byte for byte. */
#define DEVICE "cuda"
#define METRO_TEST_GPU 1
#include "test_ensemble.c"
