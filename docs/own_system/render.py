"""Draw a metro configuration: the starting file (read with ASE) beside the
last frame of the run's GSD trajectory (read with gsd), ions coloured by
species, the hard wall of the cell as a wireframe.

    /usr/bin/python3 docs/own_system/render.py salt.xyz \
        runs/own_system_salt/trajectory.gsd docs/results/own_system_salt.png
"""
import sys

import numpy as np
import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt
import ase.io
import gsd.hoomd

start_file, traj_file, out = sys.argv[1:4]
start = ase.io.read(start_file, format="extxyz")
traj = gsd.hoomd.open(traj_file, "rb")
last = traj[-1]
R = float(last.log["metro/cell_radius"][0])
colour = {"Na": "tab:orange", "Cl": "tab:green"}

fig = plt.figure(figsize=(11, 5.4))
panels = [
    ("start: %s (ASE)" % start_file.split("/")[-1], start.positions, start.get_chemical_symbols()),
    ("sweep %d: last frame of %s (gsd)" % (last.configuration.step, traj_file.split("/")[-1]),
     last.particles.position, [last.particles.types[t] for t in last.particles.typeid]),
]
u, v = np.mgrid[0:2 * np.pi:40j, 0:np.pi:20j]
for k, (title, pos, names) in enumerate(panels):
    ax = fig.add_subplot(1, 2, k + 1, projection="3d")
    ax.plot_wireframe(R * np.cos(u) * np.sin(v), R * np.sin(u) * np.sin(v), R * np.cos(v),
                      color="0.85", linewidth=0.4)
    for s in ("Na", "Cl"):
        sel = np.array([n == s for n in names])
        ax.scatter(*np.asarray(pos)[sel].T, s=14, color=colour[s], depthshade=True,
                   label="%s (%d)" % (s + ("$^+$" if s == "Na" else "$^-$"), sel.sum()))
    ax.set_xlim(-R, R), ax.set_ylim(-R, R), ax.set_zlim(-R, R)
    ax.set_box_aspect((1, 1, 1))
    ax.set_xlabel("x (Å)"), ax.set_ylabel("y (Å)"), ax.set_zlabel("z (Å)")
    ax.set_title(title, fontsize=10)
    ax.legend(loc="upper left", fontsize=8)
fig.suptitle("metro: 250 Na$^+$ + 250 Cl$^-$ (d = 4 Å, $\\lambda_B$ = 7.117 Å) in a hard-wall sphere of R = %g Å, "
             "brush sampler (configs/own_system_salt.ini)" % R, fontsize=10)
fig.tight_layout()
fig.savefig(out, dpi=110)
print("wrote", out)
