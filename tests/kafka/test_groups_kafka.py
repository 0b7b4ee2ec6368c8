"""Gang groups through real Kafka: the worker and the offline fold agree (moved from
``tests/unit/test_groups.py``, whose gangs it uses)."""

from __future__ import annotations

import json

import pytest

from tests.fixtures.throughkafka import offline, through_kafka
from tests.fixtures.tracegen import pod
from tests.unit.test_groups import END, gang_a, gang_b


@pytest.mark.kafka
def test_kafka_and_the_offline_fold_agree_on_gang_groups(kafka_settings):
    """Regression: summaries reach the other gang's partition late, so a hold by the group
    must wait for fresh news instead of calling a gang that is on its way missing."""
    group = ["ml/ps", "ml/worker"]
    lines = [pod("ml", "ps-0", 0, 1, gang="ps", min_available=1, groups=group)]
    lines += [pod("ml", f"worker-{i}", 1 + i, 2 + i, gang="worker", min_available=4,
                  groups=group) for i in range(4)]
    lines += gang_a() + gang_b()
    numbered = [("groups", n, line.encode()) for n, line in enumerate(sorted(
        lines, key=lambda l: json.loads(l)["observed_at"]), 1)]
    expected = offline(numbered, END)
    got = through_kafka(kafka_settings, numbered, at=END,
                        topics=[kafka_settings.topics.diagnostics])
    def view(ds):
        return sorted((d["gang"], d["observed_at"], d["reason"], json.dumps(d["facts"],
                                                                          sort_keys=True))
                      for d in ds)
    kafka_view, offline_view = view(got[kafka_settings.topics.diagnostics]), view(expected.diagnostics)
    assert [x for x in kafka_view if x not in offline_view] == []
    assert [x for x in offline_view if x not in kafka_view] == []
    assert not any(d["gang"] == "ml/ps" for d in expected.diagnostics)  # never falsely held
