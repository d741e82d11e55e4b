from __future__ import annotations

import pytest

from rag.retrieval.fusion import max_rrf_score, reciprocal_rank_fusion


def test_an_id_ranked_well_by_both_lists_beats_one_ranked_first_by_only_one():
    fused = reciprocal_rank_fusion([["a", "b", "c"], ["b", "d", "a"]])
    assert [item for item, _ in fused][:2] == ["b", "a"]


def test_scores_follow_the_formula_with_k_60():
    fused = dict(reciprocal_rank_fusion([["a", "b"], ["b"]]))
    assert fused["a"] == pytest.approx(1 / 61)
    assert fused["b"] == pytest.approx(1 / 62 + 1 / 61)


def test_weights_scale_each_ranking():
    fused = dict(reciprocal_rank_fusion([["a"], ["b"]], weights=[2.0, 0.5]))
    assert fused["a"] == pytest.approx(2 / 61) and fused["b"] == pytest.approx(0.5 / 61)
    assert reciprocal_rank_fusion([["a"], ["b"]], weights=[0.0, 1.0])[0][0] == "b"


def test_duplicates_within_a_ranking_count_once_at_their_best_rank():
    fused = dict(reciprocal_rank_fusion([["a", "a", "b"]]))
    assert fused == {"a": pytest.approx(1 / 61), "b": pytest.approx(1 / 63)}


def test_ties_keep_first_appearance_order_and_empty_input_gives_nothing():
    assert [i for i, _ in reciprocal_rank_fusion([["x"], ["y"]])] == ["x", "y"]
    assert reciprocal_rank_fusion([[], []]) == []


def test_bad_arguments_are_refused():
    with pytest.raises(ValueError):
        reciprocal_rank_fusion([["a"]], weights=[1.0, 1.0])
    with pytest.raises(ValueError):
        reciprocal_rank_fusion([["a"]], k=0)


def test_max_score_bounds_every_fused_score():
    weights = [1.0, 0.7]
    fused = reciprocal_rank_fusion([["a", "b"], ["a", "c"]], weights=weights)
    assert fused[0][1] == pytest.approx(max_rrf_score(weights))
    assert all(score <= max_rrf_score(weights) for _, score in fused)
