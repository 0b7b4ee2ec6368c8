"""The scheduler shim: its fencing core as tables of named scenarios, and restart recovery.

Every scenario feeds commands (and the representative the scheduler holds) into the pure core
and compares the acks and the resulting representative with values worked out by hand from
contracts.md ("gangstate.command/v1", "gangstate.ack/v1"). The last test runs the Kafka shell
against the real broker (``@pytest.mark.kafka``).
"""

from __future__ import annotations

import json
import time
import uuid

import pytest

from producers.shim.fencing import (ShimState, apply_command, apply_pending, buffer_command,
                                    make_ack, recover)

G = "team-a/llm"
W0, W1, W2, W3 = (f"team-a/llm-w-{i}" for i in range(4))


def cmd(epoch: int, expected: str | None, rep: str, type_: str = "SwitchRepresentative",
        group: str = G) -> dict:
    """A command as the decision agent writes it (id ``<group>#<epoch>``)."""
    return {"schema": "gangstate.command/v1", "id": f"{group}#{epoch}",
            "issued_at": f"2026-11-02T09:00:{epoch:02d}.000000Z", "type": type_,
            "gang_group": group, "epoch": epoch, "expected_representative": expected,
            "representative": rep, "reason": "MemberFailedCycle", "cycle": 500 + epoch}


# (name, representative before, commands in arrival order, expected outcomes, representative after)
SEQUENCES = [
    ("switch applies", W0, [cmd(1, W0, W3)], ["Applied"], W3),
    ("duplicate is stale", W0, [cmd(1, W0, W3), cmd(1, W0, W3)], ["Applied", "Stale"], W3),
    ("older epoch after newer is stale", W0, [cmd(2, W0, W2), cmd(1, W0, W3)],
     ["Applied", "Stale"], W2),
    ("expected no longer current", W1, [cmd(1, W0, W3)], ["PreconditionFailed"], W1),
    ("chain of switches in order", W0, [cmd(1, W0, W1), cmd(2, W1, W2)],
     ["Applied", "Applied"], W2),
    ("reordered chain: second fails its precondition, first is then stale", W0,
     [cmd(2, W1, W2), cmd(1, W0, W1)], ["PreconditionFailed", "Stale"], W0),
    ("elect when the group has none", None, [cmd(1, W0, W2, "ElectRepresentative")],
     ["Applied"], W2),
    ("elect when the old one is still current", W0, [cmd(1, W0, W2, "ElectRepresentative")],
     ["Applied"], W2),
    ("elect when another pod is representative", W1,
     [cmd(1, W0, W2, "ElectRepresentative")], ["PreconditionFailed"], W1),
    ("switch when the group has no representative", None, [cmd(1, W0, W3)],
     ["PreconditionFailed"], None),
]


@pytest.mark.parametrize("name,before,commands,outcomes,after", SEQUENCES,
                         ids=[s[0] for s in SEQUENCES])
def test_apply_command_sequences(name, before, commands, outcomes, after):
    state, rep, got = ShimState(), before, []
    for c in commands:
        state, ack = apply_command(state, c, rep)
        if ack["outcome"] == "Applied":
            rep = ack["representative"]
        got.append(ack["outcome"])
    assert got == outcomes
    assert rep == after


def test_redelivered_failed_command_never_applies_later():
    # epoch 1 fails CAS (w1 is current); the scheduler later comes back to w0 by itself and the
    # same command is redelivered: it must be Stale, never applied against old facts.
    state, ack = apply_command(ShimState(), cmd(1, W0, W3), W1)
    assert ack["outcome"] == "PreconditionFailed"
    state, ack = apply_command(state, cmd(1, W0, W3), W0)
    assert (ack["outcome"], ack["representative"]) == ("Stale", W0)
    assert state.fence(G) == 1


def test_ack_shape_follows_the_contract():
    state, ack = apply_command(ShimState(), cmd(7, W0, W3), W0, at="2026-11-02T09:01:00.000000Z",
                               shim_id="s1")
    assert ack == {"schema": "gangstate.ack/v1", "observed_at": "2026-11-02T09:01:00.000000Z",
                   "command_id": "team-a/llm#7", "gang_group": G, "epoch": 7,
                   "outcome": "Applied", "representative": W3, "shim": "s1"}
    assert state.fences == {G: 7}
    # the default observed_at is the command's issued_at: a pure function of the inputs
    _, ack = apply_command(ShimState(), cmd(3, W1, W3), W0)
    assert (ack["observed_at"], ack["outcome"], ack["representative"]) == (
        "2026-11-02T09:00:03.000000Z", "PreconditionFailed", W0)
    with pytest.raises(ValueError):
        make_ack(cmd(1, W0, W1), "Maybe", None, "x")


def test_candidates_guard_a_pod_that_is_no_longer_pending():
    _, ack = apply_command(ShimState(), cmd(1, W0, W3), W0, candidates=[W1, W2])
    assert ack["outcome"] == "PreconditionFailed"
    _, ack = apply_command(ShimState(), cmd(1, W0, W3), W0, candidates=[W3])
    assert ack["outcome"] == "Applied"


def test_fences_are_per_gang_group():
    other = "team-b/moe"
    state, a1 = apply_command(ShimState(), cmd(5, W0, W1), W0)
    state, a2 = apply_command(state, cmd(1, "team-b/moe-0", "team-b/moe-1", group=other),
                              "team-b/moe-0")
    assert (a1["outcome"], a2["outcome"]) == ("Applied", "Applied")
    assert state.fences == {G: 5, other: 1}


# Buffered application at AfterPostFilter / PreEnqueue: (name, buffered, current, acks, rep)
BUFFERED = [
    ("nothing buffered", [], W0, [], W0),
    ("applied in epoch order whatever the arrival order", [cmd(2, W1, W2), cmd(1, W0, W1)], W0,
     [("team-a/llm#1", "Applied"), ("team-a/llm#2", "Applied")], W2),
    ("a duplicate in the buffer is buffered once", [cmd(1, W0, W1), cmd(1, W0, W1)], W0,
     [("team-a/llm#1", "Applied")], W1),
    ("stale second switch from the same old representative", [cmd(1, W0, W1), cmd(2, W0, W2)],
     W0, [("team-a/llm#1", "Applied"), ("team-a/llm#2", "PreconditionFailed")], W1),
]


@pytest.mark.parametrize("name,buffered,current,acks,rep", BUFFERED,
                         ids=[b[0] for b in BUFFERED])
def test_apply_pending(name, buffered, current, acks, rep):
    state = ShimState()
    for c in buffered:
        state = buffer_command(state, c)
    state, got_rep, got = apply_pending(state, G, current)
    assert [(a["command_id"], a["outcome"]) for a in got] == acks
    assert got_rep == rep
    assert G not in state.pending
    # a second apply point with nothing new does nothing
    _, again, none = apply_pending(state, G, got_rep)
    assert (again, none) == (got_rep, [])


def test_apply_pending_leaves_other_groups_buffered():
    other = cmd(1, "team-b/moe-0", "team-b/moe-1", group="team-b/moe")
    state = buffer_command(buffer_command(ShimState(), cmd(1, W0, W1)), other)
    state, rep, acks = apply_pending(state, G, W0)
    assert rep == W1 and len(acks) == 1
    assert state.pending == {"team-b/moe": (other,)}


RECOVERY = [
    ("highest applied epoch wins", None,
     [("Applied", 3, None), ("Applied", 5, None), ("Stale", 9, None)], {G: 5}),
    ("precondition failures fence too", None,
     [("Applied", 2, None), ("PreconditionFailed", 4, None)], {G: 4}),
    ("only this shim's acks count", "s1",
     [("Applied", 2, "s1"), ("Applied", 8, "s2"), ("Applied", 3, None)], {G: 2}),
    ("no acks: nothing fenced", None, [], {}),
]


@pytest.mark.parametrize("name,shim,acks,fences", RECOVERY, ids=[r[0] for r in RECOVERY])
def test_recover_from_acks(name, shim, acks, fences):
    records = []
    for outcome, epoch, owner in acks:
        a = make_ack(cmd(epoch, W0, W1), outcome, W1, "2026-11-02T09:00:00.000000Z", owner)
        records.append(a)
    records.append({"schema": "gangstate.cycle/v1", "gang_group": G, "epoch": 99})
    state = recover(records, shim_id=shim)
    assert dict(state.fences) == fences


def test_restart_never_applies_twice():
    state, ack = apply_command(ShimState(), cmd(4, W0, W3), W0, shim_id="s1")
    restarted = recover([ack], shim_id="s1")
    # after a restart the scheduler's in-memory representative is back to w0: the CAS would hold,
    # the fence must still refuse the redelivered command
    _, again = apply_command(restarted, cmd(4, W0, W3), W0, shim_id="s1")
    assert again["outcome"] == "Stale"
    _, newer = apply_command(restarted, cmd(5, W0, W2), W0, shim_id="s1")
    assert newer["outcome"] == "Applied"


# -- the Kafka shell, against the real broker ---------------------------------------------------

def _send_commands(settings, commands):
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=settings.bootstrap,
                             key_serializer=str.encode,
                             value_serializer=lambda v: json.dumps(v).encode())
    for c in commands:
        producer.send(settings.topics.commands, key=c["gang_group"], value=c)
    producer.flush()
    producer.close()


def _wait(predicate, timeout=20.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return False


@pytest.mark.kafka
def test_shim_restart_recovers_fences_from_its_acks(kafka_settings):
    from producers.shim.shim import Shim, read_acks

    group = f"team-a/llm-{uuid.uuid4().hex[:6]}"
    w0, w3 = f"{group}-w-0", f"{group}-w-3"
    first = cmd(1, w0, w3, group=group)
    shim = Shim(kafka_settings, [group], shim_id="s1")
    shim.start()
    try:
        assert shim.wait_assigned()
        shim.set_representative(group, w0)
        _send_commands(kafka_settings, [first])
        assert _wait(lambda: shim.pending(group) == 1)
        assert shim.pre_enqueue(group) == w3
    finally:
        shim.close()
    acks = [a for a in read_acks(kafka_settings) if a["gang_group"] == group]
    assert [(a["command_id"], a["outcome"], a["shim"]) for a in acks] == [
        (first["id"], "Applied", "s1")]

    # a new process: in-memory state is gone, the scheduler's representative is w0 again, and
    # the same command arrives again (a producer retry) together with a newer one
    restarted = Shim(kafka_settings, [group], shim_id="s1")
    restarted.start()
    try:
        assert restarted.wait_assigned()
        assert restarted.state.fence(group) == 1
        restarted.set_representative(group, w0)
        second = cmd(2, w0, f"{group}-w-2", group=group)
        _send_commands(kafka_settings, [first, second])
        assert _wait(lambda: restarted.pending(group) == 2)
        assert restarted.after_post_filter(group) == f"{group}-w-2"
        assert [(a["command_id"], a["outcome"]) for a in restarted.acks_sent] == [
            (first["id"], "Stale"), (second["id"], "Applied")]
    finally:
        restarted.close()
