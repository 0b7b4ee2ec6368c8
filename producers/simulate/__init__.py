"""``gangstate simulate``: a discrete-event simulation of a Koordinator-like gang scheduler.

Where it sits: a producer, like the watch producer and the scheduler shim. It plays a cluster in
virtual time (``scenario`` loads node pools and a job mix; ``scheduler`` models PreEnqueue,
NextPod, Filter, Permit, Strict/NonStrict rejection, binding and completion, emitting the
``gangstate.kube/v1`` and ``gangstate.cycle/v1`` records a real cluster would; ``run`` connects
it to a ``PartitionFold`` in-process or to Kafka live, applies commands through the shim's
fencing core, and measures). The command line is ``streams.cli.components``.

Must not: read the wall clock or draw randomness other than ``random.Random(seed)`` in
in-process mode (same seed, same output); decide anything the fold decides.
"""

from __future__ import annotations
