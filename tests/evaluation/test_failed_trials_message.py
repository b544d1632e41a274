"""A failed shape's message agrees with its max-error column: it quotes the failing trial
with the largest error, and says when a passing trial's error was larger still."""

from __future__ import annotations

from evaluation.harness.compare import Comparison
from evaluation.harness.stages.correctness import failed_trials_message


def trial(abs_err: float, passed: bool) -> Comparison:
    reason = None if passed else f"output 'out': 3 of 64 elements wrong (max abs error {abs_err:.4g})"
    return Comparison(passed, abs_err, 0.1, "out", reason)


def test_the_worst_failing_trial_is_quoted_not_the_first() -> None:
    trials = [trial(1.211, False), trial(0.01, True), trial(1.59375, False)]
    failures = [t for t in trials if not t.passed]
    message = failed_trials_message(failures, trials)
    assert message.startswith("2 of 3 trials failed; the worst: ")
    assert "max abs error 1.594" in message and "1.211" not in message
    assert "over all trials" not in message  # the column's 1.59375 is the quoted trial's


def test_a_larger_error_within_tolerance_in_a_passing_trial_is_named() -> None:
    trials = [trial(0.5, False), trial(4.0, True)]
    message = failed_trials_message([trials[0]], trials)
    assert "max abs error 0.5)" in message
    assert message.endswith("(over all trials max abs error 4, within tolerance there)")
