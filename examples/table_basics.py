"""A struct-of-arrays table from Python
====================================

Schema, batch insert, handles,
zero-copy columns, and Arrow export (python examples/table_basics.py)."""
import numpy as np

from dod.table import Column, Schema, Table

schema = Schema(
    pos="float32[3]",                      # per-row shape
    vel="float32[3]",
    id="uint32",
    hits=Column("uint8", zero=False),      # always written on insert: skip the clearing
)
particles = Table(schema, capacity=10_000)

# One batch: arrays of shape (n, *row_shape), or one row that broadcasts.
handles = particles.insert_many(pos=np.random.rand(1000, 3), vel=(0, 0, 1), id=np.arange(1000), hits=0)

# Columns are numpy views of the live rows (zero copy, writable).
pos, vel = particles["pos"], particles["vel"]
pos += 0.02 * vel
del pos, vel                               # views block removes (rows would move under them)

# Handles stay valid when other rows move; a removed row's handle goes stale.
h = int(handles[10])
particles.remove(int(handles[0]))          # the last row moves into row 0
print(particles.get(h)["id"], h in particles, int(handles[0]) in particles)

# Arrow: pyarrow and polars read the table's memory without copying.
try:
    import pyarrow as pa

    batch = pa.record_batch(particles)
    print(batch.schema)
    del batch
except ImportError:
    pass

print(particles)
