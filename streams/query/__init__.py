"""The query side: what ``get gangs``, ``describe gang`` and ``explain pod`` answer, built from
gang states (``answers``); the worker serves them over HTTP, the CLI prints them.

Where it sits: above the core, below the worker and the CLI. Must not: do I/O."""
