"""Port options out of range are usage errors (``streams.cli.options.PORT``, 0-65535): one
click error line and exit status 2, never an ``OverflowError`` traceback from the socket when
the HTTP server starts (``gangstate worker --http-port 70000`` gave one)."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from streams.cli import cli
from streams.cli.options import PORT

TRACE = "tests/cases/insufficient-members/trace.jsonl"


@pytest.mark.parametrize("args,flag,value", [
    (["worker", "--http-port", "70000"], "--http-port", "70000"),
    (["worker", "--http-port", "-1"], "--http-port", "-1"),
    (["worker", "--web-port", "65536"], "--web-port", "65536"),
    (["sink", "--metrics-port", "70000"], "--metrics-port", "70000"),
    (["watch", "--http-port", "99999"], "--http-port", "99999"),
    (["replay", "--http-port", "70000", TRACE], "--http-port", "70000"),
], ids=["worker", "negative", "old spelling", "sink", "watch", "replay"])
def test_a_port_out_of_range_is_one_usage_error_line(args: list[str], flag: str,
                                                      value: str) -> None:
    result = CliRunner().invoke(cli, args, prog_name="gangstate")
    assert result.exit_code == 2
    errors = [line for line in result.stderr.splitlines() if line.startswith("Error")]
    assert errors == [f"Error: Invalid value for '{flag}': {value} is not in the range "
                      f"0<=x<=65535."]
    assert "Traceback" not in result.output and result.exception is not None \
        and isinstance(result.exception, SystemExit)


def test_the_ends_of_the_range_are_ports() -> None:
    assert (PORT.convert("0", None, None), PORT.convert("65535", None, None)) == (0, 65535)
