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
    build = publish["jobs"]["build"]
    assert build["runs-on"] == ["self-hosted", "gpu"] and build["env"]["ROSETTA_PROFILE"] == "full"
    assert make_targets_called(publish)[:2] == ["book", "site-tests"]  # nothing published untested
    uses = [step.get("uses", "") for job in publish["jobs"].values() for step in job["steps"]]
    assert any(use.startswith("actions/upload-pages-artifact") for use in uses)
    assert any(use.startswith("actions/upload-artifact") for use in uses)


def test_the_check_catches_a_workflow_that_repeats_a_command():
    broken = {"jobs": {"x": {"steps": [{"run": "make nonexistent"}]}}}
    assert make_targets_called(broken) == ["nonexistent"]
    assert "nonexistent" not in makefile_targets((ROOT / "Makefile").read_text())
