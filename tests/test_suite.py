"""The suite's own machinery: what `make test` relies on to share work between its workers."""

import subprocess
import sys
import textwrap


def test_an_xdist_group_runs_on_one_worker(tmp_path):
    """`--dist loadgroup` sends a group's tests to one worker, so a module fixture (the SLURM
    cluster's local run, the tiny GPU check) is set up once. pytest 9.2 broke it silently
    (pytest-xdist issue 1386: the group suffix no longer reaches the node id), which set the
    tiny check up twice and split the SLURM tests across both workers; pyproject.toml pins pytest
    below 9.2 until that is fixed."""
    (tmp_path / "test_grouped.py").write_text(textwrap.dedent("""
        import os
        import pytest

        pytestmark = pytest.mark.xdist_group("one")

        @pytest.mark.parametrize("i", range(6))
        def test_grouped(i):
            with open("workers.txt", "a") as f:
                f.write(os.environ["PYTEST_XDIST_WORKER"] + "\\n")
        """))
    (tmp_path / "test_free.py").write_text("import pytest\n\n@pytest.mark.parametrize('i', range(6))\n"
                                           "def test_free(i):\n    pass\n")
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "2",
                          "--dist", "loadgroup", "-o", "addopts=", "--rootdir", str(tmp_path), str(tmp_path)],
                         cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    workers = (tmp_path / "workers.txt").read_text().split()
    assert len(workers) == 6 and len(set(workers)) == 1, workers


def test_make_test_leaves_the_whole_quick_build_to_make_test_build():
    """`make test` makes no quick build of every target: conftest marks the tests that read one
    ``build``, which `make test-build` runs and the default selection leaves out; the workflow's
    mechanics read the tiny build."""
    from conftest import ROOT

    def collected(*args):
        run = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", "-n", "0",
                              *args, "tests/test_workflow.py", "tests/test_damage.py", "tests/test_nonfinite.py"],
                             cwd=ROOT, capture_output=True, text=True, timeout=300)
        assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
        return {line for line in run.stdout.splitlines() if "::" in line}

    default, build = collected(), collected("-m", "build")
    assert len(build) == 11 and all("quick_build" in test for test in build), build
    assert default and not default & build
    assert any("test_damage.py" in test for test in default) and any("rebuild" in test for test in default)
