"""Use the compiled downstream module from Python (after building it)."""
import numpy as np

from dod.arena import Arena
from dod.table import Schema, Table

import particle_step

particles = Table(Schema(pos="float32[3]", vel="float32[3]", age="float32"), capacity=1000)
handles = particles.insert_many(pos=np.zeros((10, 3)), vel=(1, 0, 0), age=np.arange(10))
scratch = Arena(1 << 16)

removed = particle_step.step(particles, scratch, 0.5, 7.0)    # ages 7.5, 8.5, 9.5 pass 7
print(removed, len(particles))                                 # prints: 3 7
print(sorted(particles["age"].tolist()))                       # prints: [0.5, 1.5, 2.5, 3.5, 4.5, 5.5, 6.5]
print(particles.get(int(handles[0]))["pos"])                   # prints: [0.5 0.  0. ]
print(scratch.used)                                            # prints: 0
