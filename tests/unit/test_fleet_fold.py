"""One fold for a fleet of clusters (issue 27): a record's ``cluster`` puts its gang in that
cluster, two clusters' gangs of the same name fold apart, everything the fold writes names its
cluster, a gang group's summaries never cross a cluster, and records without a cluster are the
``default`` cluster exactly as before."""

from __future__ import annotations

import json

import pytest

from streams.core.cluster import (DEFAULT_CLUSTER, cluster_of_key, cluster_problem, key_of,
                                  split_key)
from streams.core.fold import PartitionFold, new_state
from streams.core.state import from_wire, to_wire
from streams.wire.contracts import dead_letter, parse_time
from streams.wire.decoding import DecodeError, decode_input
from streams.wire.traces import fold_lines
from tests.fixtures.tracegen import pod

END = parse_time("2026-11-02T10:00:00Z")
GROUPS = ["ml/a", "ml/b"]


def in_cluster(line: str, cluster: str | None) -> str:
    """The trace line ``line`` with its ``cluster`` field set (``None``: left without one)."""
    if cluster is None:
        return line
    return json.dumps({**json.loads(line), "cluster": cluster})


def fold(lines: list[str]):
    return fold_lines(((n, line.encode()) for n, line in enumerate(lines, 1)), END)


def short_gang(cluster: str | None, members: int) -> list[str]:
    """``team-a/llm`` with min-available 3 and ``members`` pods, of ``cluster``."""
    return [in_cluster(pod("team-a", f"llm-{i}", i, 10 + i, gang="llm", min_available=3),
                       cluster) for i in range(members)]


# -- ids and keys ------------------------------------------------------------------------------

@pytest.mark.parametrize("key, parts", [
    ("team-a/llm", ("default", "team-a/llm")),
    ("eu-1:team-a/llm", ("eu-1", "team-a/llm")),
    ("eu-1:ml/a,ml/b", ("eu-1", "ml/a,ml/b")),
    ("team-a/composite:job@kube-scheduler", ("default", "team-a/composite:job@kube-scheduler")),
    ("us-2:team-a/composite:job@kube-scheduler",
     ("us-2", "team-a/composite:job@kube-scheduler")),
])
def test_a_key_splits_into_its_cluster_and_gang_id_and_back(key, parts):
    assert split_key(key) == parts
    assert key_of(*parts) == key
    assert cluster_of_key(key) == parts[0]


@pytest.mark.parametrize("cluster, problem", [
    ("eu-1", None),
    ("a", None),
    ("x" * 63, None),
    ("x" * 64, f"cluster {'x' * 64!r} is longer than 63 characters"),
    ("EU-1", "cluster 'EU-1' is not a DNS-1123 label (lowercase letters, digits and '-', "
             "starting and ending with a letter or digit)"),
    ("eu:1", "cluster 'eu:1' is not a DNS-1123 label (lowercase letters, digits and '-', "
             "starting and ending with a letter or digit)"),
    ("-eu", "cluster '-eu' is not a DNS-1123 label (lowercase letters, digits and '-', "
            "starting and ending with a letter or digit)"),
    ("", "cluster '' is not a DNS-1123 label (lowercase letters, digits and '-', "
         "starting and ending with a letter or digit)"),
    (7, "cluster must be a string, not int"),
])
def test_a_cluster_id_is_a_dns_label(cluster, problem):
    assert cluster_problem(cluster) == problem


# -- decoding ----------------------------------------------------------------------------------

def test_the_decoder_keys_a_record_within_its_cluster():
    line = pod("team-a", "llm-0", 0, 10, gang="llm", min_available=3)
    assert decode_input(line).key == "team-a/llm"
    assert decode_input(in_cluster(line, "default")).key == "team-a/llm"
    decoded = decode_input(in_cluster(line, "eu-1"))
    assert decoded.key == "eu-1:team-a/llm"
    assert decoded.record.gang == "team-a/llm"  # the record keeps its cluster's own names


def test_a_record_of_a_bad_cluster_is_refused_with_the_reason():
    line = in_cluster(pod("team-a", "llm-0", 0, 10, gang="llm", min_available=3), "EU_1")
    with pytest.raises(DecodeError) as err:
        decode_input(line)
    assert str(err.value) == ("invalid record: gangstate.kube/v1.cluster: String should match "
                              "pattern '^[a-z0-9]([-a-z0-9]*[a-z0-9])?$'")


def test_a_dead_letter_names_the_cluster_its_key_names():
    letter = dead_letter("2026-11-02T10:00:00.000000Z", "gangstate.gang-events", 3, 7,
                         b"eu-1:team-a/llm", b"{", "invalid record: not JSON")
    assert letter["cluster"] == "eu-1"
    plain = dead_letter("2026-11-02T10:00:00.000000Z", "gangstate.gang-events", 3, 7,
                        b"team-a/llm", b"{", "invalid record: not JSON")
    assert "cluster" not in plain
    odd = dead_letter("2026-11-02T10:00:00.000000Z", "gangstate.gang-events", 3, 7,
                      b"NOT A LABEL:x", b"{", "invalid record: not JSON")
    assert "cluster" not in odd and odd["key"] == "NOT A LABEL:x"


# -- folding -----------------------------------------------------------------------------------

def test_two_clusters_gangs_of_one_name_fold_apart():
    """eu-1's team-a/llm has 2 of min-available 3 pods (short: GangMembersInsufficient after
    the 10 s grace); default's has 3 (complete: nothing to say before the scheduler speaks)."""
    result = fold(short_gang(None, 3) + short_gang("eu-1", 2))
    assert sorted(result.states) == ["eu-1:team-a/llm", "team-a/llm"]
    eu, home = result.states["eu-1:team-a/llm"], result.states["team-a/llm"]
    assert (eu.cluster, eu.gang, len(eu.members)) == ("eu-1", "team-a/llm", 2)
    assert (home.cluster, home.gang, len(home.members)) == ("default", "team-a/llm", 3)
    [told] = [d for d in result.diagnostics if d["reason"] == "GangMembersInsufficient"]
    assert told["cluster"] == "eu-1"
    assert told["gang"] == "team-a/llm"
    assert told["id"].startswith("eu-1:team-a/llm#GangMembersInsufficient#")
    assert told["message"].startswith("gang team-a/llm has 2 of minMember 3 pods")
    assert [i["name"] for i in told["involved"]] == ["llm-0", "llm-1"]
    assert told["observed_at"] == "2026-11-02T09:00:10.000000Z"  # short since llm-0 at 0 s,
    # told after the 10 s grace


def test_the_same_situation_in_two_clusters_gives_the_same_diagnostics_but_their_ids():
    one = fold(short_gang("eu-1", 2)).diagnostics
    two = fold(short_gang("us-2", 2)).diagnostics
    plain = fold(short_gang(None, 2)).diagnostics
    assert len(one) == len(two) == len(plain) == 1
    strip = lambda d: {k: v for k, v in d.items() if k not in ("cluster", "id")}  # noqa: E731
    assert strip(one[0]) == strip(two[0]) == strip(plain[0])
    assert "cluster" not in plain[0]  # the default cluster's outputs are as before clusters
    assert plain[0]["id"] == one[0]["id"].removeprefix("eu-1:") \
        == two[0]["id"].removeprefix("us-2:")


def test_a_gang_group_is_told_only_by_its_own_clusters_gangs():
    """ml/a (complete) and ml/b (1 of 2) form a gang group in eu-1; in us-2 only ml/a exists,
    complete. eu-1's ml/a is held by its short peer (1 of 2); us-2's ml/a is held by us-2's ml/b,
    which it never saw (0 members): it hears nothing of eu-1's ml/b."""
    eu = [in_cluster(pod("ml", "a-0", 0, 10, gang="a", min_available=2, groups=GROUPS), "eu-1"),
          in_cluster(pod("ml", "a-1", 1, 11, gang="a", min_available=2, groups=GROUPS), "eu-1"),
          in_cluster(pod("ml", "b-0", 2, 12, gang="b", min_available=2, groups=GROUPS), "eu-1")]
    us = [in_cluster(pod("ml", "a-0", 0, 20, gang="a", min_available=2, groups=GROUPS), "us-2"),
          in_cluster(pod("ml", "a-1", 1, 21, gang="a", min_available=2, groups=GROUPS), "us-2")]
    result = fold(eu + us)
    by = [(d.get("cluster"), d["gang"], d["reason"], d["facts"]) for d in result.diagnostics]
    assert by == [
        ("eu-1", "ml/b", "GangMembersInsufficient",
         {"members": 1, "min_member": 2, "total_number": 2}),
        ("eu-1", "ml/a", "GangGroupIncomplete",
         {"gang_group": "ml/a,ml/b", "blocking_gang": "ml/b", "members": 1, "min_member": 2}),
        # us-2's ml/b was never seen in us-2: no members, whatever eu-1's ml/b has
        ("us-2", "ml/a", "GangGroupIncomplete",
         {"gang_group": "ml/a,ml/b", "blocking_gang": "ml/b", "members": 0}),
    ]
    assert "us-2:ml/b" not in result.states  # asked, never seen: nothing kept of it
    assert len(result.states["eu-1:ml/b"].members) == 1


def test_a_fleet_log_folds_each_cluster_as_its_own_log_would():
    """The merged log of two clusters gives each cluster exactly the diagnostics its own log
    gives alone (ids apart)."""
    eu, us = short_gang("eu-1", 2), short_gang("us-2", 1)
    merged = fold([eu[0], us[0], eu[1]]).diagnostics
    alone_eu, alone_us = fold(eu).diagnostics, fold(us).diagnostics
    assert [d for d in merged if d["cluster"] == "eu-1"] == alone_eu
    assert [d for d in merged if d["cluster"] == "us-2"] == alone_us


def test_a_state_keeps_its_cluster_on_the_wire():
    state = new_state("eu-1:team-a/llm")
    assert (state.cluster, state.gang, state.key) == ("eu-1", "team-a/llm", "eu-1:team-a/llm")
    wire = to_wire(state)
    assert wire["cl"] == "eu-1"
    assert from_wire(json.loads(json.dumps(wire))) == state
    plain = new_state("team-a/llm")
    assert "cl" not in to_wire(plain) and from_wire(to_wire(plain)).cluster == DEFAULT_CLUSTER


def test_the_offline_loopback_routes_summaries_within_their_cluster():
    store: dict = {}
    fold_ = PartitionFold(store)
    for line in [in_cluster(pod("ml", "a-0", 0, 10, gang="a", min_available=1,
                                groups=GROUPS), "eu-1")]:
        decoded = decode_input(line)
        fold_.feed(decoded.key, decoded.record)
    assert sorted(store) == ["eu-1:ml/a", "eu-1:ml/b"]


def test_the_text_of_a_fleet_fold_is_by_cluster_then_gang():
    """``gangstate fold``'s text: default's zz/short before eu-1's team-a/llm (by the raw key
    eu-1:... would come first), each gang outside default named by its key."""
    from streams.wire.traces import format_text

    zz = [pod("zz", "short-0", 0, 10, gang="short", min_available=2)]
    text = format_text(fold(zz + short_gang("eu-1", 2)))
    heads = [line.split()[1] for line in text.splitlines() if line.startswith("gang ")]
    assert heads == ["zz/short", "eu-1:team-a/llm"]
