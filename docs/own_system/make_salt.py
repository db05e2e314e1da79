"""Prepare a starting configuration for metro with ASE: 250 Na+ and 250 Cl-
on a rock-salt lattice (spacing 6 Å) around the centre of a spherical cell,
written as extended XYZ.  metro checks it against the config before the run
(particle and species counts, charges, the cell, hard cores).

    /usr/bin/python3 docs/own_system/make_salt.py salt.xyz
"""
import sys

import numpy as np
from ase import Atoms
import ase.io

spacing, per_species = 6.0, 250
k = np.arange(-8, 9)
grid = np.array([(i, j, l) for i in k for j in k for l in k])
grid = grid[np.argsort(np.linalg.norm(grid, axis=1), kind="stable")]
symbols, positions = [], []
count = {"Na": 0, "Cl": 0}
for p in grid:  # nearest sites first; Na where i+j+l is even, Cl where odd
    s = "Na" if p.sum() % 2 == 0 else "Cl"
    if count[s] < per_species:
        count[s] += 1
        symbols.append(s)
        positions.append(spacing * p)
atoms = Atoms(symbols, positions=positions)
atoms.set_initial_charges([1.0 if s == "Na" else -1.0 for s in symbols])
ase.io.write(sys.argv[1] if len(sys.argv) > 1 else "salt.xyz", atoms, format="extxyz")
print("%d ions, farthest centre %.1f Å from the origin"
      % (len(atoms), np.linalg.norm(atoms.positions, axis=1).max()))
