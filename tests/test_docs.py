"""Runs every code block that docs/*.md and README.md mark runnable (see docs/README.md).

A block is runnable when the line before its opening fence is `<!-- runnable -->`. Each runs
on its own in a temporary directory holding a copy of examples/; a failure names the page and
the block's first line.
"""

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
MARKER = "<!-- runnable -->"
# At most three spaces of indent: four or more make an indented code block, where the marker is
# text being shown (docs/README.md shows it that way).
MARKER_LINE = re.compile(r"^ {0,3}<!-- runnable -->\s*$")
FENCE = re.compile(r"^(\s*)(`{3,}|~{3,})\s*([\w+-]*)")
SHELLS = ("sh", "bash", "shell")
PAGES = sorted((ROOT / "docs").glob("*.md")) + [ROOT / "README.md"]


def runnable_blocks(path: Path) -> list[tuple[int, str, str]]:
    """(line of the opening fence, language, code) for each marked block in `path`."""
    lines = path.read_text().splitlines()
    blocks = []
    for i, line in enumerate(lines):
        if not MARKER_LINE.match(line):
            continue
        fence = FENCE.match(lines[i + 1]) if i + 1 < len(lines) else None
        if fence is None:
            raise AssertionError(f"{path.name}:{i + 1}: {MARKER} is not followed by a fence")
        indent, ticks, language = fence.groups()
        end = next(
            (j for j in range(i + 2, len(lines)) if lines[j].strip().startswith(ticks)), None
        )
        if end is None:
            raise AssertionError(f"{path.name}:{i + 2}: the code block is never closed")
        code = "\n".join(text[len(indent) :] for text in lines[i + 2 : end])
        blocks.append((i + 2, language, code + "\n"))
    return blocks


def _cases():
    for page in PAGES:
        if page.exists():
            for line, language, code in runnable_blocks(page):
                where = f"{page.relative_to(ROOT)}:{line}"
                yield pytest.param(where, language, code, id=where)


@pytest.fixture(scope="session")
def cache_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("docs-cache")


@pytest.mark.parametrize("where, language, code", list(_cases()))
def test_runnable_block(where, language, code, tmp_path, cache_dir):
    shutil.copytree(ROOT / "examples", tmp_path / "examples")
    env = dict(
        os.environ,
        MINIXLA_CACHE_DIR=str(cache_dir),
        PATH=os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")]),
    )
    env.pop("MINIXLA_FLAGS", None)
    if language == "python":
        script, command = tmp_path / "block.py", [sys.executable, "block.py"]
    elif language in SHELLS:
        script, command = tmp_path / "block.sh", ["bash", "-e", "-o", "pipefail", "block.sh"]
    else:
        pytest.fail(f"{where}: a runnable block must be python or sh, not {language!r}")
    script.write_text(code)
    done = subprocess.run(
        command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600
    )
    if done.returncode != 0:
        pytest.fail(
            f"{where}: the block exited with {done.returncode}\n"
            f"--- stdout ---\n{done.stdout[-3000:]}\n--- stderr ---\n"
            f"{done.stderr[-3000:]}",
            pytrace=False,
        )


def test_every_page_with_a_marker_has_well_formed_blocks():
    for page in PAGES:
        if page.exists():
            runnable_blocks(page)  # raises on a marker without a block
