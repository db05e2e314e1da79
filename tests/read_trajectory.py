"""Read one frame of a metro trajectory with a format's own library and
print it for the C tests to compare against metro's state.

usage: /usr/bin/python3 read_trajectory.py READER FILE FRAME
READER: gsd (gsd.hoomd on gsd's C file layer), pygsd (gsd's pure-Python
reader), ase (ASE's extended-XYZ reader; this ASE reads no GSD).
FRAME: index as Python takes it (-1: the last).
Prints: "frames F", "step S", then one line per particle
"x y z charge name" with positions as float32 written exactly (%.9g).
Exit 77 with "skipped: ..." when the library is not installed.
"""
import sys


def skip(what):
    print("skipped: %s not installed" % what)
    sys.exit(77)


def main():
    reader, path, frame = sys.argv[1], sys.argv[2], int(sys.argv[3])
    try:
        import numpy as np
    except ImportError:
        skip("python3-numpy")
    if reader in ("gsd", "pygsd"):
        try:
            import gsd.hoomd
            import gsd.pygsd
        except ImportError:
            skip("python3-gsd")
        if reader == "gsd":
            traj = gsd.hoomd.open(path, "rb")
        else:
            traj = gsd.hoomd.HOOMDTrajectory(gsd.pygsd.GSDFile(open(path, "rb")))
        n = len(traj)
        f = traj[frame]
        pos = np.asarray(f.particles.position, dtype=np.float32)
        q = np.asarray(f.particles.charge, dtype=np.float64)
        names = [f.particles.types[t] for t in f.particles.typeid]
        step = int(f.configuration.step)
    else:
        try:
            import ase.io
        except ImportError:
            skip("python3-ase")
        frames = ase.io.read(path, index=":", format="extxyz")
        n = len(frames)
        a = frames[frame]
        pos = np.asarray(a.positions, dtype=np.float32)
        q = np.asarray(a.get_initial_charges(), dtype=np.float64)
        if "metro_species" in a.arrays:
            names = list(a.arrays["metro_species"])
        else:
            names = a.get_chemical_symbols()
        step = int(a.info.get("sweep", -1))
    print("frames %d" % n)
    print("step %d" % step)
    for i in range(len(pos)):
        print("%.9g %.9g %.9g %.9g %s" % (pos[i][0], pos[i][1], pos[i][2], q[i], names[i]))


main()
