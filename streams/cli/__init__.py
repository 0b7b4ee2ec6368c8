"""The ``gangstate`` command line (argparse).

Where it sits: the outermost shell. Each subcommand parses its arguments and calls the module
that does the work: ``fold`` (``streams.wire.traces``), ``schema`` (``streams.wire.contracts``),
``replay`` (``producers.replay``), ``tap`` (``streams.kafka.reading``), ``worker`` (``streams.worker.app``),
``demo`` (``streams.dev.demo``). Heavy imports (Faust, Kafka clients) happen inside the subcommand
so that ``gangstate fold`` starts fast and needs no broker.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any, Sequence

from streams.cli.options import _at, _seconds  # noqa: F401  (used by the commands below)
from streams.wire.traces import format_text


def cmd_fold(args: argparse.Namespace) -> int:
    """``gangstate fold TRACE``: fold a trace offline and print outputs and final state."""
    from streams.core.fold import FoldSettings
    from streams.wire.traces import fold_trace

    settings = FoldSettings(grace_seconds=args.grace)
    try:
        result = fold_trace(Path(args.trace), _at(args.at), settings)
    except OSError as err:
        print(f"gangstate fold: cannot read {args.trace}: {err.strerror}", file=sys.stderr)
        return 2
    for number, error in result.errors:
        print(f"{args.trace}:{number}: skipped malformed record: {error}", file=sys.stderr)
    if args.output == "json":
        json.dump(result.to_json(), sys.stdout, indent=2, ensure_ascii=False)
        sys.stdout.write("\n")
    else:
        sys.stdout.write(format_text(result))
    if result.errors and not result.records:
        print(f"gangstate fold: {args.trace}: no valid record", file=sys.stderr)
        return 1
    return 0


def cmd_schema(args: argparse.Namespace) -> int:
    """``gangstate schema``: write the contracts' JSON Schemas to a folder."""
    from streams.wire.contracts import json_schemas

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    for name, doc in json_schemas().items():
        (out / name).write_text(json.dumps(doc, indent=2, sort_keys=True) + "\n")
        print(out / name)
    return 0


def build_parser() -> argparse.ArgumentParser:
    """The argparse parser of every ``gangstate`` subcommand."""
    parser = argparse.ArgumentParser(
        prog="gangstate",
        description="Event-sourced gang state for Kubernetes gang scheduling: explains gang pods "
                    "held at PreEnqueue and issues representative-switch commands.")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = sub.add_parser("fold", help="fold a trace offline (no broker) and print the outputs",
                       description="Run the pure fold over a gangstate.*/v1 JSON-lines trace. "
                                   "The clock is the records' observed_at; the fold ends with a "
                                   "tick at --at. Malformed lines are reported on stderr with "
                                   "their line number and skipped.")
    p.add_argument("trace", help="path of a JSON-lines trace")
    p.add_argument("--output", "-o", choices=("json", "text"), default="text",
                   help="json: one object {diagnostics, commands, gangs}; text: for people")
    p.add_argument("--at", default=None,
                   help="event time of the final tick, RFC 3339 (default: now)")
    p.add_argument("--grace", type=_seconds, default=10.0,
                   help="grace period in seconds before a hold warning (default 10)")
    p.set_defaults(func=cmd_fold)

    p = sub.add_parser("schema", help="write the contracts' JSON Schemas",
                       description="Write one JSON Schema per v1 record to a folder.")
    p.add_argument("--out", default="docs/schemas", help="folder (default docs/schemas)")
    p.set_defaults(func=cmd_schema)

    _add_kafka_commands(sub)
    return parser


def _add_kafka_commands(sub: Any) -> None:
    """Subcommands that talk to Kafka (defined in their own modules, imported lazily)."""
    from streams.cli import pipeline as kafka_cli

    kafka_cli.add_commands(sub)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``gangstate`` console script; returns the exit status."""
    parser = build_parser()
    args = parser.parse_args(argv)
    return int(args.func(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
