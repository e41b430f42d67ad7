"""The run profile and the environment report."""

import pytest

from rosetta_utils import FRAMEWORKS
from rosetta_utils.envreport import environment_report, machine_lines, report_framework
from rosetta_utils.frameworks import is_installed, usable_cores
from rosetta_utils.profile import UnknownProfileError, current_profile, describe_profile


def test_profile_comes_from_the_environment(monkeypatch):
    monkeypatch.setenv("ROSETTA_PROFILE", "full")
    assert current_profile() == "full"
    monkeypatch.setenv("ROSETTA_PROFILE", " Smoke ")
    assert current_profile() == "smoke"


def test_profile_defaults_to_smoke_without_a_visible_gpu(monkeypatch):
    monkeypatch.delenv("ROSETTA_PROFILE", raising=False)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    assert current_profile() == "smoke"


def test_unknown_profile_is_a_clear_error(monkeypatch):
    monkeypatch.setenv("ROSETTA_PROFILE", "fast")
    with pytest.raises(UnknownProfileError, match="'fast' is not a profile: expected one of smoke, full"):
        current_profile()


def test_profile_description_says_what_smoke_means():
    assert "smoke" in describe_profile("smoke") and "2-core CPU" in describe_profile("smoke")


def test_machine_lines_name_cpu_cores_and_profile(monkeypatch):
    monkeypatch.setenv("ROSETTA_PROFILE", "smoke")
    first, second = machine_lines()
    assert f"{usable_cores()} usable cores" in first and "GPU:" in first
    assert second.startswith("Profile: smoke (") and "2-core CPU" in second


@pytest.mark.parametrize("name", [n for n in FRAMEWORKS if is_installed(n)])
def test_every_framework_reports_a_device_and_uses_every_core(name):
    report = report_framework(name)
    assert report.device
    assert report.threads == usable_cores(), f"{name} uses {report.threads} of {usable_cores()} cores"
    assert report.versions and all(report.versions.values())


def test_report_lists_every_framework_asked_for():
    installed = [n for n in FRAMEWORKS if is_installed(n)][:2]
    text = environment_report(installed)
    assert len(text.splitlines()) == 2 + len(installed)
