# Sourced by the bench scripts: the paper's 3:-1 electrolyte (seed 002 §5)
# at N ions on the CUDA backend, from the random placement (seed $SEED,
# default 2), as an INI on stdout:
#   ini N SAMPLER SWEEPS EXTRA   EXTRA: the sampler's further keys, and
#                                whatever sections follow it; $SYSTEM, when
#                                set: more [system] keys (numbering = space)
#   potential                    its [potential] section alone (for
#                                scripts that write the rest themselves)
potential() {
  cat <<INI
[potential]
plugin = coulomb_hs
valences = 3, -1
diameters = 7.5
concentration = 0.0019008922
bjerrum = 7.117
INI
}
ini() { # N SAMPLER SWEEPS EXTRA
  cat <<INI
[run]
seed = ${SEED:-2}
equilibration = 0
sweeps = $3
check_every = 1000000   ; the drift check once, at the end: in "done: ... in T s" but not in its "sampling T s"
device = cuda
[system]
particles = $1
${SYSTEM:-}
$(potential)
[sampler]
plugin = $2
$4
INI
}
