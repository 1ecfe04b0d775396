"""Shared pytest set-up.

* Passes verify the module after every change for the whole session.
* Every executable's results are checked against the declared result shape and dtype.
* Every tests/hlo/**/*.hlo file with `// RUN:` lines becomes test items, run in-process
  (see minixla/testing/lit.py).
"""

from pathlib import Path

import pytest

import minixla.passes.base
import minixla.runtime.compile_memo
import minixla.runtime.executable

HLO_TESTS = Path(__file__).resolve().parent / "hlo"


def pytest_addoption(parser):
    parser.addoption(
        "--fuzz-full",
        action="store_true",
        default=False,
        help="run the differential fuzzer's full sweep (tests/test_fuzz.py)",
    )
    parser.addoption(
        "--opcode-sweep-full",
        action="store_true",
        default=False,
        help="sweep every element type of every elementwise row (tests/test_cpu_opcode_sweep.py)",
    )
    parser.addoption(
        "--spmd-full",
        action="store_true",
        default=False,
        help="partition every conformance case, not a sample (tests/test_spmd_partitioner.py)",
    )


@pytest.fixture(autouse=True)
def _fresh_compile_memo():
    """Tests patch handlers, passes and registries: each starts without memoized programs."""
    minixla.runtime.compile_memo.clear()
    yield


def pytest_configure(config):
    minixla.passes.base.VERIFY_BETWEEN_PASSES = True
    minixla.runtime.executable.CHECK_RESULTS = True


def pytest_collect_file(parent, file_path):
    if file_path.suffix != ".hlo" or HLO_TESTS not in file_path.parents:
        return None
    from minixla.testing.lit import HloTestFile, run_lines

    if not run_lines(file_path.read_text()):
        return None  # not a RUN-line test (syntax corpora and the like)
    return HloTestFile.from_parent(parent, path=file_path)
