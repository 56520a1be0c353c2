"""Submit description parsing: commands, macros, queue forms, quoting of arguments and environment."""

from __future__ import annotations

import pytest

from b2batch.emulators.submit_file import (
    SubmitError,
    disk_kb,
    memory_mb,
    parse,
    split_arguments,
    split_environment,
)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ('"3 simple arguments"', ["3", "simple", "arguments"]),
        ("\"one 'two with spaces' 3\"", ["one", "two with spaces", "3"]),
        ("\"one \"\"two\"\" 'spacey ''quoted'' argument'\"", ["one", '"two"', "spacey 'quoted' argument"]),
        ("\"''\"", [""]),
        ('"  a\t b  "', ["a", "b"]),
        ("3 simple arguments", ["3", "simple", "arguments"]),
        ('one \\"two\\" 3', ["one", '"two"', "3"]),
        ("", []),
        ('""', []),
    ],
)
def test_arguments_new_and_old_syntax(value: str, expected: list[str]) -> None:
    assert split_arguments(value) == expected


@pytest.mark.parametrize("value", ['"unterminated', '"a \'open"', '"a " b"'])
def test_bad_arguments_are_rejected(value: str) -> None:
    with pytest.raises(SubmitError):
        split_arguments(value)


def test_environment_new_and_old_syntax() -> None:
    assert split_environment('"A=1 B=\'x y\' C=""q"" D=\'\'"') == {"A": "1", "B": "x y", "C": '"q"', "D": ""}
    assert split_environment("A=1;B=two") == {"A": "1", "B": "two"}


def test_macros_and_queue_forms() -> None:
    description = parse(
        "executable = /bin/echo\n"
        "# a comment\n"
        'Arguments = "$(Cluster).$(Process) $(ClusterId)_$(ProcId) $(name) $(missing:dflt)"\n'
        "name = first\n"
        "queue 2\n"
        "name = second\n"
        "queue\n"
        "queue name in (x, y\n"
        "  z)\n"
    )
    procs = description.procs(16)
    args = [split_arguments(p.commands["arguments"]) for p in procs]
    assert args[0] == ["16.0", "16_0", "first", "dflt"]
    assert args[1] == ["16.1", "16_1", "first", "dflt"]
    assert args[2] == ["16.2", "16_2", "second", "dflt"]
    assert [a[2] for a in args[3:]] == ["x", "y", "z"]
    assert [p.proc for p in procs] == list(range(6))


def test_custom_attributes_and_continuation_lines() -> None:
    description = parse('executable = /bin/true\n+MyAttr = "v"\nMY.Other = 3\narguments = a \\\n  b\nqueue\n')
    proc = description.procs(1)[0]
    assert proc.custom == {"MyAttr": '"v"', "Other": "3"}
    assert split_arguments(proc.commands["arguments"]) == ["a", "b"]


def test_env_macro(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("B2B_TEST_VALUE", "hello")
    proc = parse("executable = /bin/true\narguments = $ENV(B2B_TEST_VALUE)\nqueue\n").procs(1)[0]
    assert proc.commands["arguments"] == "hello"


def test_no_queue_and_syntax_errors_use_condor_wording() -> None:
    with pytest.raises(SubmitError, match='doesn\'t contain any "queue" commands'):
        parse("executable = /bin/true\n")
    with pytest.raises(SubmitError, match=r"Failed to parse command file \(line 2\)"):
        parse("executable = /bin/true\nthis line has no equals sign\nqueue\n")


@pytest.mark.parametrize(("value", "mb"), [("2048", 2048), ("2GB", 2048), ("2 G", 2048), ("512M", 512), ("1024K", 1)])
def test_memory_units(value: str, mb: int) -> None:
    assert memory_mb(value) == mb


def test_disk_units() -> None:
    assert (disk_kb("100"), disk_kb("1GB"), disk_kb("2M")) == (100, 1024 * 1024, 2048)
    with pytest.raises(SubmitError):
        memory_mb("lots")
