"""Fetch a file once into the cache, verified against its pinned checksum.

The cache folder is ``data_dir``, else ``$ROSETTA_DATA_DIR``, else
``pooch.os_cache("rosetta")`` (:func:`cache_dir`). :func:`fetch` downloads
with :mod:`pooch`, which writes to a temporary file and moves it into place
only when its checksum matches, so a failed download leaves nothing behind;
every failure becomes a :class:`~rosetta_utils.data.errors.DataError`, except
a network that cannot be reached at all (:class:`NetworkUnavailable`), after
which the loaders fall back to their stand-in. :func:`verified_bytes` reads a
cached file and checks its checksum on the very bytes that get parsed.
:func:`offline_reason` says whether ``offline=`` or ``ROSETTA_OFFLINE=1``
forbids downloading.
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
import sys
import warnings
from pathlib import Path
from urllib.parse import urlsplit

import requests

from .errors import DataError

with warnings.catch_warnings():
    # pooch imports tqdm.auto, which in a notebook kernel without ipywidgets warns that
    # it cannot draw widget bars; downloads draw a bar only on a terminal (see fetch).
    warnings.filterwarnings("ignore", message="IProgress not found")
    import pooch

#: (connect, read) timeouts of a download, in seconds.
TIMEOUT = (10, 60)


class NetworkUnavailable(Exception):
    """No connection could be made (refused, DNS failure, connect timeout) and no response arrived."""


def cache_dir(data_dir: str | os.PathLike[str] | None = None) -> Path:
    """The cache folder: ``data_dir``, else ``$ROSETTA_DATA_DIR``, else ``pooch.os_cache("rosetta")``."""
    if data_dir is not None:
        return Path(data_dir).expanduser()
    configured = os.environ.get("ROSETTA_DATA_DIR")
    if configured:
        return Path(configured).expanduser()
    return Path(pooch.os_cache("rosetta"))


def checked_sha256(sha256: str) -> str:
    """The 64 hexadecimal digits of ``sha256`` (``"sha256:"`` may precede them), lower case."""
    value = sha256.lower().removeprefix("sha256:")
    if not re.fullmatch(r"[0-9a-f]{64}", value):
        raise ValueError(f"sha256 must be 64 hexadecimal digits, not {sha256!r}")
    return value


def offline_reason(offline: bool | None) -> str | None:
    """Why nothing may be downloaded (``offline=True``, or None with ``ROSETTA_OFFLINE=1``), else None."""
    if offline:
        return "offline=True"
    if offline is None and os.environ.get("ROSETTA_OFFLINE") == "1":
        return "offline: ROSETTA_OFFLINE=1"
    return None


_DIGEST_LENGTHS = {"sha256": 64, "md5": 32}


def checked_known_hash(value: str, name: str) -> tuple[str, str]:
    """``(algorithm, hex digest)`` from ``"sha256:<hex>"``, ``"md5:<hex>"`` or a bare SHA-256."""
    text = value.strip().lower()
    algorithm, colon, digest = text.partition(":")
    if not colon:
        algorithm, digest = "sha256", text
    length = _DIGEST_LENGTHS.get(algorithm)
    if length is None or not re.fullmatch(f"[0-9a-f]{{{length}}}", digest):
        hint = " (an MD5? write it as 'md5:<hex>')" if re.fullmatch(r"[0-9a-f]{32}", text) else ""
        raise ValueError(
            f"{name} must be 'sha256:<64 hex digits>', 'md5:<32 hex digits>' "
            f"or 64 bare hex digits, not {value!r}{hint}"
        )
    return algorithm, digest


def verified_bytes(path: Path, algorithm: str, digest: str, label: str) -> bytes:
    """The bytes of ``path``, once their checksum is known to be ``digest``: the bytes that get parsed.

    Reading and hashing the same bytes in memory leaves no moment at which the
    file could change between the check and its use.
    """
    try:
        payload = path.read_bytes()
    except OSError as exc:
        raise DataError(f"could not read {label} ({exc})") from exc
    actual = hashlib.new(algorithm, payload).hexdigest()
    if actual != digest:
        raise DataError(
            f"checksum mismatch for {label}: expected {algorithm} {digest}, got {actual}; "
            "it was not loaded"
        )
    return payload


def fetch(url: str, known_hash: str, fname: str, cache: Path) -> Path:
    """``cache/fname``, downloaded from ``url`` with pooch unless a copy with checksum ``known_hash`` is there.

    ``known_hash`` is ``"<algorithm>:<hex digest>"`` (``sha256`` or ``md5``).
    A failed download leaves nothing behind (pooch writes to a temporary file
    and moves it into place only when its checksum matches). Raises
    :class:`DataError`, or :class:`NetworkUnavailable` when no connection
    could be made at all.
    """
    if urlsplit(url).scheme not in ("http", "https"):
        raise DataError(f"cannot download {url!r}: only http and https URLs are supported")
    responses: list[requests.Response] = []  # any means the server answered: not a network outage

    def on_response(response: requests.Response, *args: object, **kwargs: object) -> None:
        responses.append(response)

    downloader = pooch.HTTPDownloader(
        progressbar=_stderr_is_terminal(), timeout=TIMEOUT, hooks={"response": on_response}
    )
    logger = pooch.get_logger()
    level = logger.level
    logger.setLevel(logging.WARNING)
    try:
        path = pooch.retrieve(url, known_hash=known_hash, fname=fname, path=cache, downloader=downloader)
    except requests.exceptions.HTTPError as exc:
        status = exc.response.status_code if exc.response is not None else "error"
        reason = exc.response.reason if exc.response is not None else exc
        raise DataError(f"HTTP {status} ({reason}) from {url}; nothing was cached") from exc
    except requests.exceptions.SSLError as exc:
        raise DataError(f"TLS error connecting to {url}: {exc}") from exc
    except requests.exceptions.ConnectionError as exc:
        if not responses:
            raise NetworkUnavailable(f"could not connect to {url}: {exc}") from exc
        raise DataError(f"connection dropped during the download of {url} ({exc}); nothing was cached") from exc
    except requests.exceptions.ChunkedEncodingError as exc:
        raise DataError(f"connection dropped during the download of {url} ({exc}); nothing was cached") from exc
    except requests.exceptions.RequestException as exc:
        raise DataError(f"download of {url} failed ({type(exc).__name__}: {exc}); nothing was cached") from exc
    except ValueError as exc:
        if "does not match the known hash" in str(exc):  # pooch's wording: "... but got <hash>. Deleted ..."
            got = re.search(r"but got (\S+?)\.? ", f"{exc} ")
            actual = got.group(1) if got else "another checksum"
            algorithm, _, expected = known_hash.partition(":")
            raise DataError(
                f"checksum mismatch for {url}: expected {algorithm} {expected}, got {actual}; "
                "the download was discarded"
            ) from exc
        raise DataError(f"could not download {url}: {exc}") from exc
    finally:
        logger.setLevel(level)
        for response in responses:  # pooch leaves a failed streaming response open
            response.close()
    return Path(path)


def _stderr_is_terminal() -> bool:
    try:
        return bool(sys.stderr is not None and sys.stderr.isatty())
    except (AttributeError, ValueError):
        return False


def discard(paths: list[Path]) -> None:
    """Remove the files of a download that failed later (a missing one is fine)."""
    for path in paths:
        path.unlink(missing_ok=True)
