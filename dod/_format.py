"""Human-readable numbers for the allocators' and tables' repr (internal)."""


def fmt_bytes(n):
    """1536 -> '1.5 KiB'; exact bytes under 1 KiB."""
    x = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if x < 1024.0 or unit == "GiB":
            return f"{n} B" if unit == "B" else f"{x:.1f} {unit}"
        x /= 1024.0
