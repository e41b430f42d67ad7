"""The CI workflows call the Makefile's targets rather than repeating its commands."""

import re
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
WORKFLOWS = sorted((ROOT / ".github" / "workflows").glob("*.yml"))


def makefile_targets(text: str) -> set[str]:
    return {match.group(1) for match in re.finditer(r"^([A-Za-z][\w-]*):(?!=)", text, re.M)}


def make_targets_called(workflow: dict) -> list[str]:
    called = []
    for job in workflow["jobs"].values():
        for step in job.get("steps", []):
            for line in str(step.get("run", "")).splitlines():
                words = line.split()
                if words[:1] == ["make"]:
                    called += [word for word in words[1:] if "=" not in word and not word.startswith("-")][:1]
    return called


def commands_run(workflow: dict) -> list[str]:
    return [line.strip() for job in workflow["jobs"].values() for step in job.get("steps", [])
            for line in str(step.get("run", "")).splitlines() if line.strip()]


@pytest.mark.parametrize("path", WORKFLOWS, ids=lambda path: path.name)
def test_every_run_step_is_a_makefile_target(path):
    targets = makefile_targets((ROOT / "Makefile").read_text())
    workflow = yaml.safe_load(path.read_text())
    commands = commands_run(workflow)
    assert commands, f"{path.name} runs nothing"
    for command in commands:
        assert command.startswith("make "), f"{path.name}: '{command}' repeats a command instead of calling make"
    for target in make_targets_called(workflow):
        assert target in targets, f"{path.name} calls 'make {target}', which the Makefile does not define"


def test_the_workflows_are_the_two_the_readme_promises():
    by_name = {path.stem: yaml.safe_load(path.read_text()) for path in WORKFLOWS}
    assert set(by_name) == {"test", "publish"}
    assert make_targets_called(by_name["test"]) == ["test", "gpu-dry-run"]
    publish = by_name["publish"]
    assert publish[True]["push"]["branches"] == ["main"]  # YAML reads the key `on` as True
    jobs = publish["jobs"]
    gpu, cpu = jobs["build"], jobs["build-on-cpu"]
    assert gpu["runs-on"] == ["self-hosted", "gpu"] and gpu["env"]["ROSETTA_PROFILE"] == "full"
    assert cpu["runs-on"] == "ubuntu-latest" and cpu["env"]["ROSETTA_PROFILE"] == "smoke"
    # exactly one of them runs: the GPU runner's once the repository says it has one
    assert gpu["if"] == "vars.GPU_RUNNER == '1'" and cpu["if"] == "vars.GPU_RUNNER != '1'"
    for job in (gpu, cpu):  # nothing published untested
        assert make_targets_called({"jobs": {"job": job}})[:2] == ["book", "site-tests"]
        assert any(step.get("uses", "").startswith("actions/upload-pages-artifact") for step in job["steps"])
    assert "BENCH=1" in gpu["steps"][1]["run"] and "BENCH" not in cpu["steps"][2]["run"]
    assert any(step.get("uses", "").startswith("actions/upload-artifact") for step in gpu["steps"])
    assert make_targets_called({"jobs": {"job": jobs["downloads"]}}) == ["downloads-check"]
    deploy = jobs["deploy"]
    assert deploy["needs"] == ["build", "build-on-cpu", "downloads"]
    assert "needs.build.result == 'success'" in deploy["if"] and "needs.build-on-cpu.result" in deploy["if"]
    assert "needs.downloads.result == 'success'" in deploy["if"]  # nothing published that a reader cannot run


def test_the_check_catches_a_workflow_that_repeats_a_command():
    broken = {"jobs": {"x": {"steps": [{"run": "make nonexistent"}]}}}
    assert make_targets_called(broken) == ["nonexistent"]
    assert "nonexistent" not in makefile_targets((ROOT / "Makefile").read_text())
