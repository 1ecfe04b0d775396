"""XLA's invalid modules (../shared/xla-suite/invalid/, skipped when absent): every one is
rejected with a MinixlaError, except the ones listed in ACCEPTED, which minixla deliberately
accepts for the reason given there. Each is verified with the option its XLA test uses
(STRICT_PRECISION). Both directions are asserted, so the list stays true: a
new rule that rejects a listed module must take it off the list, and an accepted module that
is not listed fails the test."""

from pathlib import Path

import pytest

import minixla
from minixla.errors import MinixlaError

SUITE = Path(__file__).resolve().parents[1].parent / "shared" / "xla-suite"

# Why a module XLA's test rejects is accepted, by kind of reason.
PASS = (
    "XLA's error comes from a pass, tool or backend run on the module, not from its parser "
    "or HloVerifier: the module text itself is valid"
)
MUTATED = (
    "the module text is valid; the C++ test breaks the module after parsing (changes a "
    "shape, window or layout, adds aliasing) and verifies that"
)
LAYOUT = (
    "only XLA's layout-sensitive verifier (run after layout assignment) rejects it; "
    "minixla's verifier, like XLA's default one, compares shapes without layouts"
)
CONFIG = (
    "XLA rejects it against the HloModuleConfig its test passes (replica or partition "
    "count); minixla checks device ids only against counts the module header gives"
)
OPT_IN = "an XLA verifier option its test turns on and that is off by default"
XLA_TESTS_DISAGREE = (
    "the rule would reject modules of XLA's own tests that are expected to "
    "load (modules/ of the suite), so minixla leaves it out"
)
NOT_YET = "a rule minixla does not implement yet"

ACCEPTED = {
    "hlo__evaluator__hlo_evaluator_test.076": PASS + " (the evaluator has no outfeed)",
    "hlo__evaluator__hlo_evaluator_test.077": PASS + " (the evaluator has no outfeed)",
    "hlo__evaluator__hlo_evaluator_test.084": PASS + " (arguments of the wrong shape at run time)",
    "hlo__tools__tests__hlo_opt_nonexistent_pass_failure.000": PASS + " (an unknown pass name "
    "on hlo-opt's command "
    "line)",
    "hlo__transforms__bfloat16_propagation_test.011": PASS,
    "hlo__transforms__collectives__infeed_token_propagation_test.022": PASS,
    **dict.fromkeys(
        [f"hlo__transforms__hlo_module_stitcher_test.{n:03d}" for n in (2, 3, 5, 13, 14, 15)], PASS
    ),
    **dict.fromkeys(
        [f"hlo__transforms__host_offloader_test.{n:03d}" for n in (2, 26, 37, 70)], PASS
    ),
    "hlo__transforms__simplifiers__gemv_rewriter_test.005": PASS,
    "service__async_collective_custom_call_rewriter_test.003": PASS,
    "service__async_collective_custom_call_rewriter_test.004": PASS,
    "service__buffer_assignment_test.025": PASS + " (a buffer assignment proto)",
    "service__call_marker_test.006": PASS,
    **dict.fromkeys([f"service__call_outliner_test.{n:03d}" for n in range(14, 19)], PASS),
    "service__cpu_gpu_shape_verifier_test.000": PASS + " (the CPU/GPU backends' own shape "
    "verifier refuses E(8) on u8)",
    "service__gather_expander_test.000": PASS,
    "service__hlo_instruction_test.018": PASS + " (HloInstruction::Unfuse)",
    "service__latency_hiding_scheduler_test.069": PASS,
    "service__layout_assignment_test.047": PASS,
    **dict.fromkeys(
        [f"service__legalize_scheduling_annotations_test.{n:03d}" for n in (23, 24, 27)], PASS
    ),
    "service__profile_guided_latency_estimator_test.003": PASS,
    **dict.fromkeys([f"service__sharding_propagation_test.{n:03d}" for n in (70, 71, 72)], PASS),
    **dict.fromkeys([f"service__while_util_test.{n:03d}" for n in (4, 5, 6)], PASS),
    "service__xla_transform_test.010": PASS,
    "service__xla_transform_test.011": PASS,
    "tests__get_dimension_size_test.001": PASS + " (a backend run without its expander pass)",
    **dict.fromkeys(
        [f"tests__rng_test.{n:03d}" for n in range(4)],
        PASS + " (a backend run without its expander pass)",
    ),
    **dict.fromkeys([f"service__hlo_verifier_test.{n:03d}" for n in (4, 14, 24, 78, 176)], MUTATED),
    **dict.fromkeys(
        [f"service__hlo_verifier_test.{n:03d}" for n in (28, 29, 31, 36, 95, 173, 175, 190, 242)],
        LAYOUT,
    ),
    **dict.fromkeys([f"service__hlo_verifier_test.{n:03d}" for n in (106, 108, 153, 220)], CONFIG),
    "service__hlo_verifier_test.142": OPT_IN + " (instruction names must match "
    "metadata.scheduling_name)",
    **dict.fromkeys(
        [f"service__hlo_verifier_test.{n:03d}" for n in (205, 206, 207, 209, 210, 211, 212)],
        OPT_IN + " (send/recv deadlock detection on scheduled modules)",
    ),
    **dict.fromkeys(
        ["service__hlo_verifier_test.167", "service__hlo_verifier_test.169"],
        "unbounded `?` dims are rejected by XLA's verifier unless allowed; "
        "minixla allows them (StableHLO imports produce them)",
    ),
    "service__hlo_verifier_test.081": XLA_TESTS_DISAGREE + " (an async computation that wraps "
    "several instructions: XLA's verifier accepts such computations in its evaluator's late-binding "
    "test and its send/recv group tests, and what sets this one apart is not in its text)",
    "service__hlo_verifier_test.140": OPT_IN + " (HloVerifierOpts::VerifyBroadcastDimensionsOrder: "
    "broadcast dimensions in increasing order)",
    "hlo__parser__hlo_parser_test.198": NOT_YET + " (debug_attributes are kept as text: XLA's "
    "tests show log_mode=default and "
    "fusion_debugger, and without XLA's full list "
    "of modes a check could refuse valid ones)",
}


# XLA's HloVerifierTest verifies with allow_mixed_precision=false (HloVerifierOpts' default);
# the tests of every other file load modules through test bases that allow mixed precision,
# as minixla's verifier does by default.
STRICT_PRECISION = "service__hlo_verifier_test."


def _load(path: Path):
    module = minixla.parse_hlo_module(path.read_text(), verify=False)
    minixla.verify(module, allow_mixed_precision=not path.stem.startswith(STRICT_PRECISION))
    return module


def _modules():
    folder = SUITE / "invalid"
    return sorted(folder.glob("*.hlo")) if folder.is_dir() else []


@pytest.mark.skipif(not (SUITE / "invalid").is_dir(), reason="../shared/xla-suite absent")
def test_xla_invalid_modules_are_rejected_unless_listed():
    accepted, rejected_but_listed, crashed = [], [], []
    for path in _modules():
        try:
            _load(path)
        except MinixlaError:
            if path.stem in ACCEPTED:
                rejected_but_listed.append(path.stem)
            continue
        except Exception as exc:  # a raw exception is a bug whatever the module
            crashed.append(f"{path.stem}: {type(exc).__name__}: {exc}")
            continue
        if path.stem not in ACCEPTED:
            accepted.append(path.stem)
    assert crashed == []
    assert accepted == [], "accepted, but not listed in ACCEPTED"
    assert rejected_but_listed == [], "now rejected: take these off ACCEPTED"
    assert set(ACCEPTED) <= {p.stem for p in _modules()}


@pytest.mark.skipif(not (SUITE / "invalid").is_dir(), reason="../shared/xla-suite absent")
@pytest.mark.parametrize(
    "stem",
    [
        "service__hlo_verifier_test.032",  # select of f32 and bf16
        "service__hlo_verifier_test.085",
    ],
)  # map of f64 by an f32 fn
def test_mixed_precision_is_rejected_only_with_the_strict_option(stem):
    text = (SUITE / "invalid" / f"{stem}.hlo").read_text()
    module = minixla.parse_hlo_module(text)
    with pytest.raises(MinixlaError):
        minixla.verify(module, allow_mixed_precision=False)
