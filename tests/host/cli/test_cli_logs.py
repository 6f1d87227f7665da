"""Simulator and synthesis output of ``vckattn hw report`` goes to a log file under the build folder unless -v."""

from __future__ import annotations

import os

import pytest

from vckattn.host.cli import main

NOISE = "%Warning-VERILATOR cocotb INFO lots of simulator output"


@pytest.fixture
def fake_report(monkeypatch, tmp_path):
    from vckattn.sim import hw_report

    monkeypatch.setenv("VCKATTN_BUILD_DIR", str(tmp_path / "build"))
    row = {"lanes": 4, "lut": 1, "ff": 2, "dsp": 0, "bram": 0, "lutram": 0, "elements_per_cycle": 4.0,
           "latency_cycles": 7, "buffer_bits": 64}

    def fake(kernels, lanes, progress=None, score_bits=()):
        for k in kernels:
            progress(k)
            os.write(1, (NOISE + "\n").encode())  # as a simulator child process writes: to the file descriptors
            os.write(2, (NOISE + " (stderr)\n").encode())
        return {"kernels": {k: row for k in kernels}, "by_lanes": {"4": {k: row for k in kernels}}}

    monkeypatch.setattr(hw_report, "hw_report", fake)
    return tmp_path / "build" / "logs" / "hw_report.log"


def test_hw_report_logs_to_a_file(fake_report, capfd):
    assert main(["hw", "report", "--kernels", "swiftmax"]) == 0
    out, err = capfd.readouterr()
    assert NOISE not in out + err
    assert "swiftmax" in out  # the table
    assert f"log: {fake_report}" in err and len(err.strip().splitlines()) == 1
    text = fake_report.read_text()
    assert NOISE in text and NOISE + " (stderr)" in text


def test_hw_report_verbose_shows_the_output(fake_report, capfd):
    assert main(["hw", "report", "--kernels", "swiftmax", "-v"]) == 0
    out, err = capfd.readouterr()
    assert NOISE in out and NOISE + " (stderr)" in err
    assert not fake_report.exists()
