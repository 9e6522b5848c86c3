"""dod._report: the one renderer of the benchmark CLIs (text and Markdown tables, sections)."""
import pytest

from dod import _report
from dod.bench import Section


def test_text_table_aligns_columns_and_draws_separators():
    out = _report.table(("N", "|", "p50", "ratio"), [(10, "|", "0.003", "269.4x"), (10000, "|", "1.250", "5.0x")],
                        [">"] * 4)
    assert out.splitlines() == ["    N |   p50  ratio",
                                "   10 | 0.003 269.4x",
                                "10000 | 1.250   5.0x"]


def test_markdown_table_drops_separators_and_keeps_alignment():
    out = _report.table(("name", "|", "time"), [("a", "|", "1 ns")], ("<", ">", ">"), markdown=True)
    assert out.splitlines() == ["| name | time |", "|---|---:|", "| a | 1 ns |"]


def test_bad_rows_raise():
    with pytest.raises(ValueError, match="2 cells for 3 columns"):
        _report.table(("a", "b", "c"), [(1, 2)])
    with pytest.raises(ValueError, match="align"):
        _report.table(("a", "b"), [(1, 2)], align=["<"])


def test_section_ratios_against_the_baseline():
    s = Section("Demo", baseline="malloc", per="record", goal=">= 2x malloc")
    s.add("malloc", 4.0)
    s.add("arena", 1.0, note="fast")
    s.add("free lunch", 0.0)
    text = _report.section(s).splitlines()
    assert text[0] == "Demo (per record; ratio = malloc / row)" and set(text[1]) == {"-"}
    assert text[2].split() == ["malloc", "4.00", "ns", "1.00x"]
    assert text[3].split() == ["arena", "1.00", "ns", "4.00x", "fast"] and "4.00x  fast" in text[3]
    assert text[4].split()[-1] == "infx"
    assert text[5] == "  goal: >= 2x malloc"
    md = _report.section(s, markdown=True)
    assert "| arena | 1.00 ns | 4.00x | fast |" in md and md.startswith("**Demo")


def test_header_names_program_machine_and_command():
    h = _report.header("dod.bench", ["--quick"], "some cpu").splitlines()
    assert h[0].startswith("dod.bench  ") and h[0].endswith("UTC")
    assert h[1:] == ["some cpu", "command: python -m dod.bench --quick"]
    assert "cores" in _report.machine_line()
