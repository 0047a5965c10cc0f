"""Download-once files (public recordings that the project may not ship): fetched on
first use, checked against their SHA-256, kept in a cache directory."""

from __future__ import annotations

import hashlib
import os
import pathlib
import shutil
import tempfile
import urllib.error
import urllib.parse
import urllib.request

__all__ = ["cache_directory", "cached_download"]


def cache_directory() -> pathlib.Path:
    """The cache folder of jaxrbd's downloads: ``$JAXRBD_CACHE`` if set, else
    ``$XDG_CACHE_HOME/jaxrbd``, else ``~/.cache/jaxrbd``.

    Example:
        >>> cache_directory().name in ("jaxrbd", os.environ.get("JAXRBD_CACHE", "jaxrbd"))
        True
    """
    if os.environ.get("JAXRBD_CACHE"):
        return pathlib.Path(os.environ["JAXRBD_CACHE"]).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or pathlib.Path.home() / ".cache"
    return pathlib.Path(base).expanduser() / "jaxrbd"


def _sha256(path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def cached_download(url: str, sha256: str | None = None, *, filename: str | None = None,
                    cache_dir=None, timeout: float = 60.0) -> pathlib.Path:
    """The local path of ``url``'s file, downloaded into the cache on first use.

    A cached file is used without a network access when its SHA-256 matches (or when no
    ``sha256`` is given). A download goes to a temporary file in the cache folder and is
    renamed into place only after its checksum matches, so an interrupted or corrupted
    download never masquerades as the file.

    Args:
        url: ``https://``, ``http://`` or ``file://`` address.
        sha256: the expected hex digest (recommended: it pins the file's content).
        filename: the name in the cache (default: the URL's last path component).
        cache_dir: the folder (default `cache_directory`); created if needed.
        timeout: seconds to wait for the server.

    Returns:
        The `pathlib.Path` of the cached file.

    Raises:
        ConnectionError: the file is not cached and cannot be downloaded (offline, the
            server refuses): the message names the URL and where to put the file by hand.
        ValueError: the downloaded file's SHA-256 differs from ``sha256`` (a cached
            file that differs is downloaded again); a bad download is deleted.

    Example:
        >>> import tempfile, pathlib
        >>> d = pathlib.Path(tempfile.mkdtemp())
        >>> _ = (d / "a.txt").write_text("hello")
        >>> p = cached_download((d / "a.txt").as_uri(), cache_dir=d / "cache")
        >>> p.read_text(), p.parent.name
        ('hello', 'cache')
    """
    name = filename or pathlib.PurePosixPath(urllib.parse.urlparse(url).path).name
    if not name or name in (".", ".."):
        raise ValueError(f"cannot name the cached file of {url!r}: pass filename=")
    folder = pathlib.Path(cache_dir) if cache_dir is not None else cache_directory()
    path = folder / name
    expected = None if sha256 is None else sha256.lower()
    if path.exists():
        if expected is None or _sha256(path) == expected:
            return path
    folder.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{name}.", dir=folder)
    try:
        try:
            with urllib.request.urlopen(url, timeout=timeout) as src, os.fdopen(fd, "wb") as dst:
                shutil.copyfileobj(src, dst)
        except (urllib.error.URLError, OSError) as e:
            reason = getattr(e, "reason", e)
            raise ConnectionError(
                f"could not download {url} ({reason}). Without network access, fetch the "
                f"file elsewhere and put it at {path}, or pass the folder that holds the "
                f"data instead of downloading") from e
        got = _sha256(tmp)
        if expected is not None and got != expected:
            raise ValueError(f"{url} has SHA-256 {got}, expected {expected}: not the pinned "
                             f"file (the download was discarded)")
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return path
