"""The recorded real-format outputs under tests/data, and the emulator printing the same shapes."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests.emulators.conftest import Emu, wait_for

DATA = Path(__file__).resolve().parents[1] / "data"
CONDOR_TYPES = {
    "ClusterId": int,
    "ProcId": int,
    "JobStatus": int,
    "ExitCode": int,
    "HoldReason": str,
    "HoldReasonCode": int,
    "JobBatchName": str,
    "Cmd": str,
    "Iwd": str,
    "RequestCpus": int,
    "RequestMemory": int,
    "EnteredCurrentStatus": int,
    "QDate": int,
    "GlobalJobId": str,
    "ExitBySignal": bool,
    "RemoveReason": str,
    "CompletionDate": int,
    "RemoteWallClockTime": float,
}


@pytest.mark.parametrize("name", ["condor_q_running.json", "condor_history_completed.json"])
def test_recorded_condor_ads_have_classad_types(name: str) -> None:
    ads = json.loads((DATA / "htcondor" / name).read_text())
    assert ads
    for ad in ads:
        for attr, kind in CONDOR_TYPES.items():
            if attr in ad:
                assert type(ad[attr]) is kind, (name, attr)
    assert (DATA / "htcondor" / "condor_q_empty.json").read_text() == ""


def test_recorded_bjobs_values_are_strings() -> None:
    document = json.loads((DATA / "lsf" / "bjobs_mixed.json").read_text())
    assert document["COMMAND"] == "bjobs" and document["JOBS"] == len(document["RECORDS"])
    for record in document["RECORDS"]:
        assert all(isinstance(value, str) for value in record.values())
    assert re.search(r"Job <(\d+)>", (DATA / "lsf" / "bsub_output.txt").read_text()).group(1) == "123"


def test_emulator_prints_the_recorded_shapes(emu: Emu) -> None:
    Path("job.sub").write_text("executable = /bin/true\nJobBatchName = b\nqueue 3\n")
    assert emu.call("condor_submit", "job.sub").out == (
        DATA / "htcondor" / "condor_submit_output.txt"
    ).read_text().replace("16", "1")
    wait_for(lambda: len(emu.condor_q(history=True)) == 3)
    recorded = json.loads((DATA / "htcondor" / "condor_history_completed.json").read_text())[0]
    emulated = emu.condor_q("1.0", history=True)[0]
    for attr, value in recorded.items():
        assert type(emulated.get(attr, value)) is type(value), attr
    assert set(recorded) - set(emulated) == set()
    emu.bsub("true")
    wait_for(lambda: emu.bjobs("-o", "stat", "1")["RECORDS"][0]["STAT"] == "DONE")
    fields = "jobid stat exit_code job_name queue exec_host submit_time start_time finish_time jobindex"
    record = emu.bjobs("-a", "-o", fields, "1", "2")["RECORDS"]
    recorded_lsf = json.loads((DATA / "lsf" / "bjobs_mixed.json").read_text())["RECORDS"]
    assert list(record[0]) == list(recorded_lsf[0]) and list(record[1]) == list(recorded_lsf[-1])
    assert emu.call("bjobs").err == (DATA / "lsf" / "bjobs_no_unfinished.stderr.txt").read_text()
