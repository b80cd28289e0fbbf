"""The selection rule: by the objective the key's claims judge; never a diverged candidate."""

from __future__ import annotations

import dataclasses

from psml_core.tuning.rule import Candidate, choose

RES = 1 / 360  # one test sample
ACC = "final_test_accuracy"
TIME = "time_to_target_s"


def cand(factor: float, acc: float | None, momentum: float = 0.9, diverged: str | None = None,
         time: float | None = None, **kw) -> Candidate:  # fmt: skip
    declared = (factor, momentum) == (1.0, 0.9) and kw.pop("declared", True)
    return Candidate(
        stage=kw.pop("stage", 1),
        lr_factor=factor,
        lr=0.1 * factor,
        momentum=momentum,
        momentum_handling="server" if momentum else "none",
        warmup_iterations=kw.pop("warmup", 0),
        final_accuracy=acc,
        evaluations=() if acc is None else (acc,),
        samples_to_target=None,
        diverged=diverged,
        declared=declared,
        time_to_target_s=time,
        declared_momentum=momentum == 0.9,
        declared_warmup=kw.pop("declared_warmup", True),
        **kw,
    )


def test_a_diverged_candidate_is_never_chosen_even_with_the_best_accuracy():
    """Its accuracy before diverging (here the mean of its last evaluations) was the best."""
    best_but_diverged = cand(2.0, 0.97, diverged="loss fell to 0.2, then returned to 2.3", time=1)
    for metric in (ACC, TIME):
        choice = choose([cand(1.0, 0.90, time=5), best_but_diverged, cand(0.5, 0.93, time=4)],
                        metric, 0.01, RES)  # fmt: skip
        assert choice.candidate.lr_factor == 0.5 and not choice.all_diverged


def test_on_accuracy_the_highest_wins_beyond_one_test_sample():
    choice = choose([cand(1.0, 0.90), cand(2.0, 0.90 + 2 * RES)], ACC, 0.01, RES)
    assert choice.candidate.lr_factor == 2.0 and choice.why.startswith("highest")


def test_on_accuracy_a_tie_within_one_test_sample_goes_to_the_declared_point():
    choice = choose([cand(1.0, 0.90), cand(2.0, 0.90 + RES)], ACC, 0.01, RES)
    assert choice.candidate.declared and "declared point" in choice.why


def test_ties_go_to_the_smaller_lr_then_the_declared_momentum_then_no_warmup():
    cands = [cand(1.0, 0.5), cand(2.0, 0.90), cand(0.5, 0.90, momentum=0.0),
             cand(0.5, 0.90 + RES), cand(0.5, 0.90, warmup=8, declared_warmup=False)]  # fmt: skip
    choice = choose(cands, ACC, 0.01, RES)
    c = choice.candidate
    assert (c.lr_factor, c.momentum, c.warmup_iterations) == (0.5, 0.9, 0)


def test_when_every_candidate_diverged_the_declared_point_stays_marked():
    cands = [cand(f, 0.1, diverged="ends at chance") for f in (0.5, 1.0, 2.0)]
    choice = choose(cands, TIME, 0.01, RES)
    assert choice.all_diverged and choice.candidate.declared
    warm = cand(1.0, 0.85, stage=2, warmup=8, declared=False, declared_warmup=False, time=3.0)
    rescued = choose([*cands, warm], TIME, 0.01, RES)
    assert rescued.candidate is warm and not rescued.all_diverged


def test_a_time_objective_takes_the_fastest_within_the_accuracy_margin():
    """The audit's case: 0.003 of accuracy for 32% fewer samples to target."""
    slow_best = cand(1.0, 0.975, time=27.1)
    fast = cand(2.0, 0.972, time=18.4)
    assert choose([slow_best, fast], TIME, 0.01, RES).candidate is fast
    assert choose([slow_best, fast], ACC, 0.01, RES).candidate is slow_best
    # Outside the margin a faster candidate is not eligible.
    too_lossy = dataclasses.replace(fast, final_accuracy=0.975 - 0.011)
    assert choose([slow_best, too_lossy], TIME, 0.01, RES).candidate is slow_best


def test_the_margin_is_never_below_one_test_sample():
    best = cand(1.0, 0.975, time=27.1)
    one_sample_lower = cand(2.0, 0.975 - RES, time=18.4)
    assert choose([best, one_sample_lower], TIME, 0.0, RES).candidate is one_sample_lower


def test_a_censored_candidate_ranks_after_every_one_that_held_the_target():
    censored_best = cand(2.0, 0.98, time=None)
    held = cand(1.0, 0.975, time=30.0)
    assert choose([censored_best, held], TIME, 0.01, RES).candidate is held


def test_when_no_eligible_candidate_held_the_target_the_accuracy_rule_decides_and_says_so():
    choice = choose([cand(1.0, 0.90), cand(2.0, 0.95)], TIME, 0.01, RES)
    assert choice.candidate.lr_factor == 2.0
    assert choice.why.startswith("no candidate within")


def test_equal_times_go_to_the_declared_free_parameter_then_the_smaller_lr():
    own = cand(1.0, 0.95, time=2.0, params={"codec.params.block_size": 256}, declared=False)
    other = dataclasses.replace(own, params={"codec.params.block_size": 8}, declared_params=False)
    assert choose([other, own], TIME, 0.01, RES).candidate is own
    slower_lr = dataclasses.replace(own, lr=0.2, lr_factor=2.0)
    assert choose([slower_lr, own], TIME, 0.01, RES).candidate is own


def test_bytes_to_target_is_an_objective_too():
    a = dataclasses.replace(cand(1.0, 0.95), bytes_to_target=5e6)
    b = dataclasses.replace(cand(2.0, 0.95), bytes_to_target=4e6)
    assert choose([a, b], "bytes_to_target", 0.01, RES).candidate is b


def test_an_unstable_candidate_is_passed_over_like_a_diverged_one():
    """It held on the tuning seed, fastest, but diverged at a check seed: the next one wins."""
    edge = cand(2.0, 0.97, time=1.0, unstable="diverged at check seed 1002: loss non-finite")
    for metric in (ACC, TIME):
        choice = choose([cand(1.0, 0.965, time=3.0), edge, cand(0.5, 0.96, time=4.0)],
                        metric, 0.01, RES)  # fmt: skip
        assert choice.candidate.lr_factor == 1.0 and not choice.all_diverged
    choice = choose([dataclasses.replace(edge, declared=True)], TIME, 0.01, RES)
    assert choice.all_diverged and "check seed" in choice.why
