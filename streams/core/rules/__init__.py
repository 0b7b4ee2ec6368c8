"""The core's rule families, one module each (``hold``, ``group``, ``spec``, ``permit``,
``unschedulable``, ``preemption``, ``lost``, ``stranded``, ``representative``, ``scheduled``,
``resend``, on
the shared ``base``), and their registry (``registry``, re-exported here: ``RULES``, ``TIMERS``,
``REASONS``, ``REASON_NAMES``, ``message``, ``next_timer``, ...). The registry sits in a module
of its own so that it is compiled with the rest of the core (``setup.py`` leaves every
``__init__`` as Python).
"""

from __future__ import annotations

from .registry import DECISIONS as DECISIONS
from .registry import DECISIONS_FOR as DECISIONS_FOR
from .registry import FINDINGS_FOR as FINDINGS_FOR
from .registry import TIMERS_FOR as TIMERS_FOR
from .registry import WHY_FOR as WHY_FOR
from .registry import FINDINGS as FINDINGS
from .registry import REASON_NAMES as REASON_NAMES
from .registry import REASONS as REASONS
from .registry import RULES as RULES
from .registry import TIMER_RULES as TIMER_RULES
from .registry import TIMERS as TIMERS
from .registry import WHY as WHY
from .registry import message as message
from .registry import next_timer as next_timer
from .registry import reason_type as reason_type
from .registry import timers as timers
