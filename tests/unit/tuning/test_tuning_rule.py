"""The selection rule: a diverged candidate is never chosen; ties go as the rule says."""

from __future__ import annotations

import dataclasses

from psml_core.tuning.rule import Candidate, choose_stage1, choose_warmup

RES = 1 / 360  # one test sample


def cand(factor: float, acc: float, momentum: float = 0.9, diverged: str | None = None, **kw):
    return Candidate(
        stage=kw.pop("stage", 1),
        lr_factor=factor,
        lr=0.1 * factor,
        momentum=momentum,
        momentum_handling="server" if momentum else "none",
        warmup_iterations=kw.pop("warmup", 0),
        final_accuracy=acc,
        evaluations=(acc,),
        samples_to_target=None,
        diverged=diverged,
        declared=(factor, momentum) == (1.0, 0.9) and kw.pop("declared", True),
    )


def test_a_diverged_candidate_is_never_chosen_even_with_the_best_accuracy():
    """Its accuracy before diverging (here the mean of its last evaluations) was the best."""
    best_but_diverged = cand(2.0, 0.97, diverged="loss fell to 0.2, then returned to 2.3")
    choice = choose_stage1([cand(1.0, 0.90), best_but_diverged, cand(0.5, 0.93)], "server", RES)
    assert choice.candidate.lr_factor == 0.5 and not choice.all_diverged


def test_the_highest_accuracy_wins_beyond_one_test_sample():
    choice = choose_stage1([cand(1.0, 0.90), cand(2.0, 0.90 + 2 * RES)], "server", RES)
    assert choice.candidate.lr_factor == 2.0 and choice.why.startswith("highest")


def test_a_tie_within_one_test_sample_goes_to_the_declared_point():
    choice = choose_stage1([cand(1.0, 0.90), cand(2.0, 0.90 + RES)], "server", RES)
    assert choice.candidate.declared and "declared point" in choice.why


def test_without_the_declared_point_a_tie_goes_to_the_smaller_lr_then_declared_momentum():
    cands = [cand(1.0, 0.5), cand(2.0, 0.90), cand(0.5, 0.90, momentum=0.0),
             cand(0.5, 0.90 + RES)]  # fmt: skip
    choice = choose_stage1(cands, "server", RES)
    assert (choice.candidate.lr_factor, choice.candidate.momentum) == (0.5, 0.9)
    assert "smallest lr" in choice.why


def test_when_every_candidate_diverged_the_declared_point_stays_marked():
    cands = [cand(f, 0.1, diverged="ends at chance") for f in (0.5, 1.0, 2.0)]
    choice = choose_stage1(cands, "server", RES)
    assert choice.all_diverged and choice.candidate.declared
    # A warm-up that trains rescues it; one that diverges too leaves it marked.
    warm = cand(1.0, 0.85, stage=2, warmup=8, declared=False)
    rescued = choose_warmup(choice, warm, RES)
    assert rescued.candidate is warm and not rescued.all_diverged
    assert choose_warmup(choice, dataclasses.replace(warm, diverged="x"), RES).all_diverged


def test_warmup_must_gain_more_than_one_test_sample():
    stage1 = choose_stage1([cand(1.0, 0.90)], "server", RES)
    same = cand(1.0, 0.90 + RES, stage=2, warmup=8, declared=False)
    better = dataclasses.replace(same, final_accuracy=0.90 + 2 * RES)
    assert choose_warmup(stage1, same, RES) is stage1
    assert choose_warmup(stage1, better, RES).candidate is better
    assert choose_warmup(stage1, dataclasses.replace(better, diverged="x"), RES) is stage1
