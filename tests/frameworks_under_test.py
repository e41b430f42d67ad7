"""Which frameworks this test run covers, and where each runs: in the test process (this
run's environment) or in a process of its own environment. Read at import, with no side
effects (tests/conftest.py makes the run's settings)."""

import os

import pytest

from rosetta_book.environments import ENVIRONMENTS, available_frameworks, check_environment
from rosetta_utils.frameworks import is_installed, selected_frameworks


#: Which environment this test run is (``make unit-tests`` runs both): ``current`` runs
#: every test; ``legacy`` runs only those marked ``legacy``, which import MXNet or Chainer
#: in the test's own process (in the current run their legacy cases are absent or skip).
TEST_ENVIRONMENT = check_environment(os.environ.get("ROSETTA_TEST_ENVIRONMENT", "current"))


LEGACY_FRAMEWORKS = ENVIRONMENTS["legacy"]


#: The frameworks under test: the ones the build selects (``ROSETTA_FRAMEWORKS``, default
#: all five). Each must run here; one that does not fails the suite at its start
#: (:func:`pytest_configure`) instead of losing its tests without a word.
SELECTED = selected_frameworks()


#: The selected frameworks (a part runs in a process of its own environment).
AVAILABLE = [name for name in SELECTED if name in available_frameworks()]


#: The selected frameworks of this run's environment: they import in this test process.
IN_PROCESS = [name for name in SELECTED if name in ENVIRONMENTS[TEST_ENVIRONMENT] and is_installed(name)]


def missing_frameworks() -> list[str]:
    """Selected frameworks this machine cannot test: no environment runs them, or this
    run's environment should import them and does not."""
    missing = [name for name in SELECTED if name not in AVAILABLE]
    missing += [name for name in SELECTED if name in ENVIRONMENTS[TEST_ENVIRONMENT]
                and name not in IN_PROCESS and name not in missing]
    return missing


#: ``IN_PROCESS`` for ``pytest.mark.parametrize``: the legacy ones marked ``legacy``.
IN_PROCESS_PARAMS = [pytest.param(name, marks=pytest.mark.legacy) if name in LEGACY_FRAMEWORKS else name
                     for name in IN_PROCESS]
