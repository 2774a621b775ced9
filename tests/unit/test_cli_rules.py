"""Rules every changelake command follows, held for the whole parser."""

from __future__ import annotations

import argparse
import re
from collections.abc import Iterator

import pytest

from changelake.cli import NO_DEFAULT, build_parser
from tests.support import changelake


def _parsers(
    parser: argparse.ArgumentParser, name: str = "changelake"
) -> Iterator[tuple[str, argparse.ArgumentParser]]:
    yield name, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub, child in action.choices.items():
                yield from _parsers(child, f"{name} {sub}")


def test_every_option_with_a_default_shows_it_in_help() -> None:
    hidden = []
    for name, parser in _parsers(build_parser()):
        text = " ".join(parser.format_help().split())
        for action in parser._actions:
            if not action.option_strings or action.default in NO_DEFAULT:
                continue
            shown = " ".join((action.help or "").split())
            if "(default" not in shown:
                shown = f"{shown} (default: {action.default})"
            if shown not in text:
                hidden.append(f"{name} {action.option_strings[0]}")
    assert not hidden, f"options whose --help hides their default: {hidden}"


def test_every_help_names_each_of_its_subcommands() -> None:
    unnamed = []
    for name, parser in _parsers(build_parser()):
        # As a word of its own, outside the description (which may say "run" in passing).
        text = parser.format_help().replace(parser.description or "", "")
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                unnamed += [
                    f"{name} {sub}"
                    for sub in action.choices
                    if not re.search(rf"(?<![\w-]){re.escape(sub)}(?![\w-])", text)
                ]
    assert not unnamed, f"subcommands their parent's --help does not name: {unnamed}"


DESTRUCTIVE = ("--drop-slot", "--resnapshot")  # options that drop what cannot be had back


def test_every_command_that_destroys_takes_yes() -> None:
    missing = []
    for name, parser in _parsers(build_parser()):
        options = {o for a in parser._actions for o in a.option_strings}
        if options & set(DESTRUCTIVE) and "--yes" not in options:
            missing.append(name)
    assert not missing, f"commands that destroy without --yes: {missing}"


@pytest.mark.parametrize(
    "args",
    [("connectors", "delete", "shop-postgres", "--drop-slot"), ("run", "--resnapshot", "orders")],
)
def test_destroying_without_yes_and_without_a_terminal_changes_nothing(
    args: tuple[str, ...],
) -> None:
    refused = changelake(*args, check=False)  # stdin is no terminal: nobody to ask
    assert refused.returncode == 1, refused.stdout + refused.stderr
    assert "--yes: not given, and no terminal to ask whether to drop" in refused.stderr
    assert "nothing was changed" in refused.stderr


def test_tables_are_named_one_way_everywhere() -> None:
    """`--tables T,...`: no positional table, no `--table`."""
    other = []
    for name, parser in _parsers(build_parser()):
        for action in parser._actions:
            names = action.option_strings or [action.dest]
            if any("table" in n.lstrip("-") for n in names) and names != ["--tables"]:
                other.append(f"{name} {'/'.join(names)}")
    assert not other, f"tables named otherwise than --tables: {other}"


# Commands that act, printing progress only: their results are files, tables or a running
# pipeline (bench's report is results.json). Every other command prints results, and --json
# prints them for programs.
ACTS = {
    "setup",
    "connectors init",
    "connectors delete",
    "connectors rebuild",
    "demo seed",
    "demo load",
    "run",
    "bench",
}


def test_every_command_that_prints_results_has_json() -> None:
    missing = []
    for name, parser in _parsers(build_parser()):
        if any(isinstance(a, argparse._SubParsersAction) for a in parser._actions):
            continue  # a group of commands, not one
        command = name.removeprefix("changelake ")
        options = {o for a in parser._actions for o in a.option_strings}
        if command not in ACTS and "--json" not in options:
            missing.append(command)
    assert not missing, f"commands that print results without --json: {missing}"
