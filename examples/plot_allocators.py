"""Allocators compared on one workload
====================================

One frame of 1000 records of 32 bytes: allocate each record, write two of
its fields, then release them all. The arena releases the whole frame with
one store; malloc/free, calloc and pymalloc release record by record.
The kernels are the compiled Cython of ``python -m dod.bench`` (timed in C
around whole loops, so the numbers are the allocators', not the
interpreter's); ``quick=True`` runs its short version. The floor is the
same loop writing the fields with no allocation at all.
"""
import matplotlib.pyplot as plt

from dod.bench import arena

records, _, from_python = arena.run(quick=True)

rows = sorted(records.rows, key=lambda r: r.value)
for r in rows:
    print(f"{r.name:48s} {r.value:7.2f} ns/record")

fig, ax = plt.subplots(figsize=(8, 4))
ax.barh([r.name for r in rows], [r.value for r in rows], color="tab:blue")
ax.invert_yaxis()
ax.set_xlabel("ns per record (median; lower is better)")
ax.set_title("1000 x 32-byte records a frame: allocate, write, release")
fig.tight_layout()

# %%
# The same comparison from Python: eight float32 columns of 1000 rows a
# frame, as numpy arrays. Each array costs a Python object either way; the
# arena saves numpy's allocation and the free.
for r in from_python.rows:
    print(f"{r.name:24s} {r.value / 1000:6.2f} us/frame")

fig, ax = plt.subplots(figsize=(8, 2.2))
ax.barh([r.name for r in from_python.rows], [r.value / 1000 for r in from_python.rows], color="tab:green")
ax.invert_yaxis()
ax.set_xlabel("us per frame of 8 columns (median)")
fig.tight_layout()
plt.show()
