"""tools/sort_triggers.py: the A/B script behind the README's sort-trigger table."""
import importlib.util
import pathlib

import pytest

TOOL = pathlib.Path(__file__).resolve().parents[1] / "tools" / "sort_triggers.py"


def _tool():
    spec = importlib.util.spec_from_file_location("sort_triggers", TOOL)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_prints_one_row_per_config_with_its_sorts(capsys):
    tool = _tool()
    tool.main(["300", "30", "2", "5", "sort_when_displaced=0, sort_when_mixed=0",
               "sort_every=4, sort_when_displaced=0, sort_when_mixed=0"])
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("N=300, 30 scans (5 untimed), threads=2")
    assert "sorts   0" in lines[1] and "sorts   7" in lines[2]      # 30 // 4 scheduled sorts
    assert all("p50" in ln and "p99" in ln for ln in lines[1:])


def test_blocks_print_when_each_sorted_and_the_p50_per_block(capsys):
    tool = _tool()
    tool.main(["--blocks", "10", "300", "30", "1", "5", "sort_every=4, sort_when_displaced=0, sort_when_mixed=0"])
    lines = capsys.readouterr().out.splitlines()
    assert "sorts   7" in lines[1]
    assert lines[2].startswith("    sorted at scans [3, 7, 11, 15, 19, 23, 27]; p50 per 10 ticks: ")
    assert len(lines[2].split(":")[-1].split()) == 3                    # 25 timed ticks: blocks of 10, 10, 5


def test_configs_are_literals_only():
    tool = _tool()
    assert tool.keywords("initiation='two_point', sort_every=3") == {"initiation": "two_point", "sort_every": 3}
    assert tool.keywords("") == {}
    with pytest.raises(ValueError):
        tool.keywords("threads=__import__('os').cpu_count()")
    with pytest.raises(SystemExit):
        tool.main(["300"])
