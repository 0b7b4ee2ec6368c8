"""The ``gangstate`` command line (click), also a kubectl plugin (``kubectl gangstate``).

Where it sits: the outermost shell, on top of every layer. Each command parses its flags and
calls the module that does the work: ``fold`` (``streams.wire.traces``), ``schema``
(``streams.wire.contracts``), ``demo``/``worker``/``replay``/``tap`` (``streams.cli.pipeline``),
``watch``/``sink`` (``streams.cli.components``), ``get``/``describe``/``explain``
(``streams.cli.query``). The flags they share are in ``streams.cli.options``. Heavy imports
(Faust, Kafka clients) happen inside the command so that ``gangstate fold`` starts fast and
needs no broker.

Conventions (kubectl's): usage errors print on stderr and exit 2; ``--version``;
``-n/--namespace``, ``-A/--all-namespaces``, ``-o json|yaml|wide|name`` where they apply.
A bad environment variable (``streams.settings``) is one line on stderr and exit
status 2. Whatever else stops a command (``streams.kafka.waiting.Failure``: Kafka or a worker
out of reach after ``--timeout``, a 403; Ctrl-C; SIGTERM) is one line too, with the exit
status of the table in ``streams.kafka.waiting``. ``main(argv)`` returns the exit status (usage
errors, ``--help`` and ``--version`` raise ``SystemExit``, as argparse did).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Sequence

import click

from streams import __version__
from streams.cli.options import SECONDS, _at, output_option
from streams.cli.pipeline import records_cluster_option
from streams.settings import SettingsError


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(__version__, "--version", prog_name="gangstate",
                      message="%(prog)s %(version)s")
def cli() -> None:
    """Event-sourced gang state for Kubernetes gang scheduling: explains gang pods held at
    PreEnqueue and issues representative-switch commands."""


@cli.command(short_help="fold a trace offline (no broker) and print the outputs")
@click.argument("trace")
@output_option("text", "json", "yaml")
@click.option("--at", default=None, help="event time of the final tick, RFC 3339 (default: now)")
@click.option("--grace", type=SECONDS, default=None,
              help="grace period in seconds before a PreEnqueue-hold warning (default: "
                   "GANGSTATE_GRACE_SECONDS, 10)")
@records_cluster_option
def fold(trace: str, output: str, at: str | None, grace: float | None, cluster: str) -> int:
    """Run the pure fold over a gangstate.*/v1 JSON-lines TRACE, or over a cluster dump
    (`kubectl get nodes,pods,podgroups,events -o json`, gzipped or not; on a cluster with
    Kubernetes' own gangs also podgroups.scheduling.k8s.io, compositepodgroups.scheduling.k8s.io
    and workloads.scheduling.k8s.io) read as the records a watch would have published. The clock is the records' observed_at; the fold ends with a
    tick at --at. Malformed lines are reported on stderr with their line number and skipped. A
    record more than GANGSTATE_MAX_SKEW_SECONDS (60) ahead of the rest of the trace (the latest
    observed_at after it, or --at) is set aside, not folded, and reported on stderr (and in
    the JSON/YAML output's input.set_aside), as the worker dead-letters a record that far
    ahead of its Kafka timestamp. The fold's settings are the worker's (GANGSTATE_GRACE_SECONDS,
    GANGSTATE_STRANDED_SECONDS, GANGSTATE_HOLDS and its GANGSTATE_HOLD_* values). Each record
    is of the cluster it names (absent: 'default', or --cluster: a dump's records, of one
    cluster that the dump does not name, are of --cluster)."""
    from dataclasses import replace

    from producers.watch.dump import DumpError, trace_lines
    from streams.kafka.partitions import partition_of
    from streams.settings import environment, fold_settings
    from streams.wire.traces import fold_lines, format_text

    settings = fold_settings()
    if grace is not None:
        settings = replace(settings, grace_seconds=grace)
    max_skew = int(environment().max_skew_seconds * 1_000_000)
    try:
        result = fold_lines(list(trace_lines(Path(trace), cluster)), _at(at), settings,
                            max_skew, partition_of=partition_of)
    except OSError as err:
        print(f"gangstate fold: cannot read {trace}: {err.strerror}", file=sys.stderr)
        return 2
    except DumpError as err:
        print(f"gangstate fold: {err}", file=sys.stderr)
        return 2
    for number, error in result.errors:
        print(f"{trace}:{number}: skipped malformed record: {error}", file=sys.stderr)
    for number, _observed_at, reason in result.set_aside:
        print(f"{trace}:{number}: {reason}", file=sys.stderr)
    if output == "json":
        json.dump(result.to_json(), sys.stdout, indent=2, ensure_ascii=False)
        sys.stdout.write("\n")
    elif output == "yaml":
        import yaml

        sys.stdout.write(yaml.safe_dump(result.to_json(), sort_keys=False, allow_unicode=True))
    else:
        sys.stdout.write(format_text(result))
    if result.errors and not result.records:
        print(f"gangstate fold: {trace}: no valid record", file=sys.stderr)
        return 1
    return 0


@cli.command(short_help="write the contracts' JSON Schemas")
@click.option("--out", default="docs/schemas", show_default=True, help="folder")
def schema(out: str) -> int:
    """Write one JSON Schema per v1 record to a folder."""
    from streams.wire.contracts import json_schemas

    folder = Path(out)
    folder.mkdir(parents=True, exist_ok=True)
    for name, doc in json_schemas().items():
        (folder / name).write_text(json.dumps(doc, indent=2, sort_keys=True) + "\n")
        print(folder / name)
    return 0


def _register() -> None:
    from streams.cli import components, pipeline, query

    for group in (pipeline.COMMANDS, components.COMMANDS, query.COMMANDS):
        for command in group:
            cli.add_command(command)


_register()


LONG_RUNNING = ("worker", "watch", "sink")
"""Commands that run until stopped: a SIGTERM or SIGINT is how they end, exit status 0."""


def _command(argv: Sequence[str]) -> str:
    """The command's name in ``argv`` (its first word that is not a flag), for messages."""
    return next((a for a in argv if not a.startswith("-")), "")


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``gangstate`` and ``kubectl-gangstate``; returns the exit status (the
    table in ``streams.kafka.waiting``: 0 ok, 1 runtime failure, 2 usage or configuration,
    130 Ctrl-C, 143 SIGTERM of an interactive command). Whatever stops a command is one line on
    stderr, never a traceback."""
    from streams.kafka.waiting import (EXIT_INTERRUPTED, EXIT_TERMINATED, Failure, Stopped,
                                       quiet_libraries, raise_on_sigterm)

    prog = "gangstate"
    if argv is None and os.path.basename(sys.argv[0]).startswith("kubectl-"):
        prog = "kubectl gangstate"
    args = list(argv) if argv is not None else sys.argv[1:]
    who = f"{prog} {_command(args)}".rstrip()
    quiet_libraries()
    raise_on_sigterm()
    try:
        status = cli.main(args=args, prog_name=prog, standalone_mode=False)
    except click.exceptions.Exit as done:  # --help, --version
        raise SystemExit(done.exit_code) from None
    except click.ClickException as err:  # usage errors: stderr, exit 2
        err.show(file=sys.stderr)
        raise SystemExit(err.exit_code) from None
    except (click.exceptions.Abort, KeyboardInterrupt):  # Ctrl-C (click turns it into Abort)
        print(f"{who}: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except Stopped:  # before a long-running command has its own handlers, or interactive
        print(f"{who}: stopped by SIGTERM", file=sys.stderr)
        return 0 if _command(args) in LONG_RUNNING else EXIT_TERMINATED
    except SettingsError as err:  # a bad environment variable: one line, not a traceback
        print(f"{prog}: {err}", file=sys.stderr)
        return 2
    except Failure as err:  # Kafka, the API server or a worker out of reach; a 403; ...
        print(f"{who}: {err}", file=sys.stderr)
        return err.status
    except Exception as err:
        if not type(err).__module__.startswith("kafka."):
            raise  # a bug: its traceback is wanted
        from streams.kafka.waiting import one_line

        print(f"{who}: Kafka failed: {one_line(err)}", file=sys.stderr)  # the broker went away
        return 1
    if isinstance(status, int):
        return status
    return 0
