"""Where the shared conformance corpus lives (beside the repository), for tests that use it."""

from pathlib import Path

import pytest

CONFORMANCE = Path(__file__).resolve().parents[1].parent / "shared" / "conformance"
CASES = CONFORMANCE / "cases"


def case_dirs() -> list[Path]:
    return (
        sorted(p for p in CASES.iterdir() if (p / "module.hlo").exists()) if CASES.is_dir() else []
    )


def hlo_files() -> list[Path]:
    return [f for d in case_dirs() for f in (d / "module.hlo", d / "optimized.hlo") if f.exists()]


requires_corpus = pytest.mark.skipif(
    not CASES.is_dir(), reason="../shared/conformance is not present"
)
