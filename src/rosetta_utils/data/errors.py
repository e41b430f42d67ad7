"""What the data loaders raise and warn: :class:`DataError` and :class:`StandInWarning`."""

from __future__ import annotations


class DataError(ValueError):
    """A data set could not be downloaded, verified, extracted or read."""


class StandInWarning(UserWarning):
    """The network was unreachable: a synthetic stand-in replaces the real data."""
