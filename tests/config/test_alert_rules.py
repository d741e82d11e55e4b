"""The Prometheus alert rules shipped in deploy/prometheus/alerts.yml: well formed, every expression valid PromQL.

That they name only metrics /metrics exports is checked against a real scrape in tests/rag/test_metrics_server.py.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import promql_parser
import pytest
import yaml

ALERTS = Path(__file__).resolve().parents[2] / "deploy" / "prometheus" / "alerts.yml"


def alert_rules() -> list[dict[str, Any]]:
    groups = yaml.safe_load(ALERTS.read_text())["groups"]
    return [rule for group in groups for rule in group["rules"]]


def metric_names(expression: str) -> set[str]:
    """The metrics a PromQL expression reads (every vector selector's name)."""
    names: set[str] = set()

    def visit(node: Any) -> None:
        if isinstance(node, promql_parser.VectorSelector) and node.name:
            names.add(node.name)

    promql_parser.walk(promql_parser.parse(expression), pre_visit=visit)
    return names


def test_every_rule_is_an_alert_with_a_severity_a_summary_and_a_duration() -> None:
    rules = alert_rules()
    assert rules
    for rule in rules:
        assert set(rule) == {"alert", "expr", "for", "labels", "annotations"}, rule.get("alert")
        assert rule["labels"]["severity"] in {"warning", "critical"}, rule["alert"]
        assert rule["annotations"]["summary"], rule["alert"]


def test_alert_names_are_unique() -> None:
    names = [rule["alert"] for rule in alert_rules()]
    assert len(names) == len(set(names))


@pytest.mark.parametrize("rule", alert_rules(), ids=lambda rule: rule["alert"])
def test_every_expression_is_valid_promql_reading_some_metric(rule: dict[str, Any]) -> None:
    assert metric_names(rule["expr"]), rule["expr"]


@pytest.mark.skipif(shutil.which("promtool") is None, reason="promtool (Prometheus' own checker) is not installed")
def test_promtool_accepts_the_rules() -> None:
    result = subprocess.run(["promtool", "check", "rules", str(ALERTS)], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr
