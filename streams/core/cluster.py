"""The cluster of a gang: one gangstate for a fleet of clusters (issue 27, docs/fleet.md).

Where it sits: the functional core, below everything that names a gang. A gang is identified
by its cluster and its id within the cluster (``team-a/llm``, ``team-a/llm@kube-scheduler``,
``streams.core.native``). The rules never look at the cluster: two clusters' gangs of the same
name are two gangs, each folded by the same rules, and nothing one tells another crosses a
cluster. The cluster is part of the gang's *key* only:

- on the wire, every record names objects as its own cluster does (``team-a/llm``) and says
  which cluster in an optional ``cluster`` field; absent means ``default`` (so every topic,
  trace and case recorded before clusters existed stays valid);
- in the fold, the table and the Kafka keys, a gang's key is ``<cluster>:<gang id>``
  (``eu-1:team-a/llm``), or the bare gang id in the ``default`` cluster (``key_of``);
  ``:`` is in no namespace (a DNS label), so the cluster is whatever stands before a ``:``
  that comes before the first ``/`` (``split_key``).

A cluster id is a DNS-1123 label (lowercase letters, digits and ``-``, at most 63
characters, starting and ending with a letter or digit): it goes into keys, Event fields and
metric labels as it is. It is configuration (``GANGSTATE_CLUSTER``), never guessed.

Must not: import anything outside the standard library; read the clock.
"""

from __future__ import annotations

import re

DEFAULT_CLUSTER = "default"
"""The cluster of every record without a ``cluster`` field, and of every gang before fleets:
its gangs' keys are their bare ids."""

CLUSTER_MAX_LENGTH = 63
"""The longest cluster id: a DNS-1123 label's bound."""

CLUSTER_PATTERN = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
"""A cluster id's form: a DNS-1123 label (the contracts' JSON Schemas carry it too)."""
_LABEL = re.compile(CLUSTER_PATTERN)


def cluster_problem(cluster: object) -> str | None:
    """Why ``cluster`` cannot be a cluster id (one line), or ``None`` when it can: a string
    that is a DNS-1123 label of at most 63 characters (``eu-1``, ``gpu-h100-a``)."""
    if not isinstance(cluster, str):
        return f"cluster must be a string, not {type(cluster).__name__}"
    if len(cluster) > CLUSTER_MAX_LENGTH:
        return f"cluster {cluster[:70]!r} is longer than {CLUSTER_MAX_LENGTH} characters"
    if not _LABEL.match(cluster):
        return (f"cluster {cluster!r} is not a DNS-1123 label (lowercase letters, digits and "
                f"'-', starting and ending with a letter or digit)")
    return None


def key_of(cluster: str, gang: str) -> str:
    """The key of gang id ``gang`` (``team-a/llm``, or a gang group id ``ns/a,ns/b``) in
    ``cluster``: ``eu-1:team-a/llm``; the bare id in the ``default`` cluster."""
    return gang if cluster == DEFAULT_CLUSTER else f"{cluster}:{gang}"


def split_key(key: str) -> tuple[str, str]:
    """``(cluster, gang id)`` of a key made by ``key_of``: ``eu-1:team-a/llm`` ->
    ``("eu-1", "team-a/llm")``; ``team-a/llm`` -> ``("default", "team-a/llm")``; a
    CompositePodGroup's ``team-a/composite:job@kube-scheduler`` (its ``:`` after the ``/``)
    -> ``("default", ...)``."""
    colon = key.find(":")
    if colon < 0:
        return DEFAULT_CLUSTER, key
    slash = key.find("/")
    if 0 <= slash < colon:
        return DEFAULT_CLUSTER, key
    return key[:colon], key[colon + 1:]


def cluster_of_key(key: str) -> str:
    """The cluster of a key (``split_key``)."""
    return split_key(key)[0]
