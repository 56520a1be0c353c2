"""The ClassAd subset behind -constraint: comparisons, logic with UNDEFINED, functions, rendering."""

from __future__ import annotations

import json

import pytest

from b2batch.emulators.classad import ClassAdError, compile_constraint, dumps_ads, parse_literal, unparse

AD = {"ClusterId": 16, "ProcId": 3, "JobStatus": 2, "JobBatchName": "Run-1", "Owner": "me", "Rate": 1.5}


@pytest.mark.parametrize(
    ("expr", "matches"),
    [
        ("ClusterId == 16", True),
        ("clusterid == 16 && ProcId == 3", True),
        ("ClusterId == 16 && ProcId == 4", False),
        ('JobBatchName == "run-1"', True),  # == on strings ignores case, as in real ClassAds
        ('JobBatchName =?= "run-1"', False),  # =?= does not
        ('JobBatchName =?= "Run-1"', True),
        ("Missing == 1", False),  # UNDEFINED never matches
        ("Missing =?= undefined", True),
        ("isUndefined(Missing) && JobStatus != 1", True),
        ("JobStatus == 1 || JobStatus == 2", True),
        ("!(JobStatus == 2)", False),
        ("Missing == 1 || ProcId >= 3", True),
        ("Rate * 2 > 2.5 && ProcId - 1 == 2", True),
        ('regexp("^Run", JobBatchName)', True),
        ('stringListMember("me", "you,me")', True),
        ('(ClusterId == 16) && (JobBatchName == "Run-1")', True),
    ],
)
def test_constraints(expr: str, matches: bool) -> None:
    assert compile_constraint(expr)(AD) is matches


def test_unparsable_constraint_raises() -> None:
    with pytest.raises(ClassAdError):
        compile_constraint("ClusterId == = 3")


def test_literals_round_trip() -> None:
    assert parse_literal("42") == 42 and parse_literal("1.5") == 1.5 and parse_literal('"a\\"b"') == 'a"b'
    assert parse_literal("True") is True and parse_literal("x + 1") == {"expr": "x + 1"}
    assert unparse('a"b') == '"a\\"b"' and unparse(None) == "undefined" and unparse(False) == "false"


def test_json_layout_matches_condor_q() -> None:
    text = dumps_ads([{"ProcId": 0, "ClusterId": 1, "E": {"expr": "x + 1"}}, {"ClusterId": 2}])
    assert text.startswith('[\n{\n  "ClusterId": 1,') and "\n}\n,\n{\n" in text and text.endswith("}\n]\n")
    assert json.loads(text)[0]["E"] == "/Expr(x + 1)/"
