"""tools/update_readme_perf.py: the performance page's tables are generated, never typed."""
import importlib.util
import os

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture(scope="module")
def tool():
    spec = importlib.util.spec_from_file_location(
        "update_readme_perf", os.path.join(ROOT, "tools", "update_readme_perf.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_replace_block_keeps_everything_outside_the_markers(tool):
    text = f"# t\nbefore\n{tool.BEGIN}\nold\nlines\n{tool.END}\nafter\n"
    new = tool.replace_block(text, "NEW TABLE")
    assert new == f"# t\nbefore\n{tool.BEGIN}\nNEW TABLE\n{tool.END}\nafter\n"
    assert tool.replace_block(new, "NEW TABLE") == new              # idempotent


@pytest.mark.parametrize("text", ["no markers", "<!-- perf:begin --> only",
                                  "<!-- perf:end -->\n<!-- perf:begin -->",
                                  "<!-- perf:begin -->\n<!-- perf:begin -->\n<!-- perf:end -->"])
def test_replace_block_refuses_bad_markers(tool, text):
    with pytest.raises(ValueError):
        tool.replace_block(text, "x")


def test_rewrites_a_page_from_a_real_run(tool, tmp_path, capsys):
    readme = tmp_path / "performance.md"
    readme.write_text(f"intro\n{tool.BEGIN}\nhand-typed numbers\n{tool.END}\nend\n")
    assert tool.main(["--page", str(readme), "--quick", "--only", "arena", "--no-tracker"]) == 0
    text = readme.read_text()
    assert "hand-typed" not in text
    assert text.startswith("intro\n") and text.endswith(f"{tool.END}\nend\n")
    assert "`python -m dod.bench --markdown --quick --only arena`" in text
    assert "| workload | time | vs baseline | note |" in text
    assert "Measured 20" in text and "cores" in text


def test_page_without_markers_is_left_alone(tool, tmp_path, capsys):
    readme = tmp_path / "performance.md"
    readme.write_text("no markers here\n")
    assert tool.main(["--page", str(readme), "--no-tracker", "--quick"]) == 1
    assert readme.read_text() == "no markers here\n"
    assert "perf:begin" in capsys.readouterr().err


def test_threaded_tracker_table_from_a_real_run(tool):
    got = tool._tracker_threads_markdown(True, "100")
    assert got is not None
    table, cmd = got
    assert cmd == "python -m dod.tracker.bench --threads 1,2 --sizes 100 --no-reference --markdown --quick"
    assert table.startswith("**dod.tracker tick time")
    assert "| 100 | 1 |" in table and "| 100 | 2 |" in table and "vs 1 thread" in table


def test_default_page_is_the_site_performance_page_and_holds_the_markers(tool):
    """The tables live on the site's performance page, not in the README."""
    assert tool.DEFAULT_PAGE == os.path.join(ROOT, "docs", "performance.md")
    text = open(tool.DEFAULT_PAGE).read()
    assert tool.replace_block(text, "NEW") != text               # both markers, once each, in order
    assert tool.BEGIN not in open(os.path.join(ROOT, "README.md")).read()
