"""Extract a downloaded ``.tar.gz`` into the cache safely and all at once.

:func:`extract_validated` extracts into a temporary folder beside the
destination, lets the caller read and validate what came out, and only then
renames the folder into place: the cache never holds a half-extracted copy.
Before writing anything, the whole gzip stream is checked (a cut archive
fails here, not later) and every member is refused that has an absolute path,
a ``..`` component, or is a link or special file.
"""

from __future__ import annotations

import gzip
import os
import re
import shutil
import tarfile
import tempfile
import zlib
from pathlib import Path
from typing import Callable, TypeVar

from .errors import DataError

_T = TypeVar("_T")


def extract_validated(archive: Path, dest: Path, read: Callable[[Path], _T], origin: str) -> _T:
    """Extract ``archive`` into a temporary folder beside ``dest``, ``read`` it, then rename it to ``dest``.

    ``read`` validates the extracted files and returns what they hold. If
    anything fails the temporary folder is removed; a :class:`DataError`
    (the archive is unreadable, unsafe or malformed) removes the archive too,
    so the cache is as before the download. ``origin`` names the archive in messages.
    """
    tmp = Path(tempfile.mkdtemp(prefix=f".{dest.name}.partial-", dir=dest.parent))
    try:
        safe_extract_tar_gz(archive, tmp, origin)
        result = read(tmp)
        try:
            os.rename(tmp, dest)
        except OSError:
            if not dest.is_dir():  # else another process finished the same extraction first
                raise
        return result
    except DataError as exc:
        archive.unlink(missing_ok=True)
        raise DataError(f"{exc}; nothing was cached") from exc
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)


def safe_extract_tar_gz(archive: Path, target: Path, origin: str) -> None:
    """Extract a ``.tar.gz`` into ``target`` after checking the whole stream and every member.

    Refuses, before writing anything, members with an absolute path, a ``..``
    component, or that are links or special files.
    """
    try:
        # tarfile can take a cut archive for a shorter one; gzip checks the stream's end and CRC.
        with gzip.open(archive, "rb") as stream:
            while stream.read(1 << 20):
                pass
        with tarfile.open(archive, "r:gz") as tar:
            members = tar.getmembers()
            for member in members:
                _check_member(member, origin)
            if hasattr(tarfile, "data_filter"):
                tar.extractall(target, members=members, filter="data")
            else:  # pragma: no cover - Python without extraction filters; members were checked above
                tar.extractall(target, members=members)
    except (tarfile.TarError, EOFError, zlib.error, gzip.BadGzipFile) as exc:
        raise DataError(f"{origin} is truncated or corrupt ({exc})") from exc


def _check_member(member: tarfile.TarInfo, origin: str) -> None:
    name = member.name
    parts = re.split(r"[\\/]+", name)
    if name.startswith(("/", "\\")) or re.match(r"[A-Za-z]:", name) or ".." in parts:
        raise DataError(f"{origin} has a member {name!r} that would be written outside the extraction folder")
    if not (member.isfile() or member.isdir()):
        raise DataError(f"{origin} has a member {name!r} that is a link or special file, which is refused")
