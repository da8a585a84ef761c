"""Writing a user's file without ever half-writing it: a temporary file beside the target, with the
permissions an ordinary write would give (an existing file's own, else 0666 less the umask),
fsynced, then renamed over it; temporaries a killed writer left behind are removed; a folder, a
device, a pipe or a socket is never replaced. The rename replaces a symlink planted at the name
(never its target; a dangling one creates nothing outside the folder). Used by every writer:
results, sidecars, Chrome traces, figures (:func:`write_figure`), checkpoints and campaign files
(:func:`new_file_mode` for the permissions of a file they create).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import socket
import stat
import tempfile
import threading
from pathlib import Path

__all__ = ["as_path", "atomic_write", "check_target", "digest", "named_error", "new_file_mode", "replace_with",
           "temp_beside", "write_figure"]


def as_path(path, what: str) -> Path:
    """``path`` as a Path; TypeError naming ``what`` for None, numbers and empty names."""
    if isinstance(path, bytes):
        path = os.fsdecode(path)
    if not isinstance(path, (str, os.PathLike)) or str(path) == "":
        raise TypeError(f"{what} needs a file name (str or pathlib.Path), got {path!r}")
    return Path(path)


_umask_lock = threading.Lock()
_HOST = "".join(c for c in socket.gethostname() if c.isalnum())[:16] or "host"


def _umask() -> int:
    try:  # Linux: read it without changing it (os.umask would, for every thread)
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    with _umask_lock:
        old = os.umask(0o022)
        os.umask(old)
    return old


def new_file_mode() -> int:
    """The permissions of a new file, as ``open(path, "w")`` leaves them: 0666 less the umask."""
    return 0o666 & ~_umask()


def _mode_for(path: Path) -> int:
    """The permissions ``open(path, "w")`` would leave: an existing plain file's own, else 0666 less
    the umask (a symlink's target's mode is not copied: the link is replaced, not its target)."""
    try:
        st = os.lstat(path)
        if stat.S_ISREG(st.st_mode):
            return stat.S_IMODE(st.st_mode)
    except OSError:
        pass
    return new_file_mode()


def check_target(path: Path, what: str = "save") -> None:
    """Refuse (before writing) a target that is a folder, a device, a pipe or a socket."""
    try:
        st = os.stat(path)
    except OSError:
        return  # absent (or unreachable: the write itself will say so)
    if stat.S_ISDIR(st.st_mode):
        raise IsADirectoryError(f"{what}: {str(path)!r} is a folder; give a file name inside it")
    if not stat.S_ISREG(st.st_mode):
        raise FileExistsError(f"{what}: {str(path)!r} is a device, pipe or socket, not a regular file; "
                              "results are written to regular files only")


def named_error(e: OSError, path: Path) -> OSError:
    """``e`` again, naming the target rather than the temporary file."""
    err = type(e)(f"cannot write {str(path)!r}: {e.strerror or e}")
    err.errno = e.errno
    return err


def _remove_stale_temps(path: Path) -> None:
    """Remove temporaries of ``path`` left by a writer on this host that no longer runs (kill -9)."""
    prefix = f".{path.name}.{_HOST}-"
    with contextlib.suppress(OSError):
        for name in os.listdir(path.parent):
            if not (name.startswith(prefix) and name.endswith(".tmp")):
                continue
            pid = name[len(prefix):].split(".", 1)[0]
            if not pid.isdigit() or int(pid) == os.getpid():
                continue
            try:
                os.kill(int(pid), 0)
            except ProcessLookupError:
                with contextlib.suppress(OSError):
                    os.unlink(path.parent / name)
            except OSError:
                pass  # alive, another user's


@contextlib.contextmanager
def _or_remove(tmp: str, path: Path):
    """On any failure inside: remove ``tmp``; an OSError is raised again naming ``path``."""
    try:
        yield
    except BaseException as e:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        if isinstance(e, OSError):
            raise named_error(e, path) from e
        raise


def temp_beside(path: Path, write) -> str:
    """``write(tmp)`` to a temporary file beside ``path``, fsynced; its name (removed on failure)."""
    _remove_stale_temps(path)
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.{_HOST}-{os.getpid()}.", suffix=".tmp", dir=path.parent)
    except OSError as e:
        raise named_error(e, path) from e
    os.close(fd)
    with _or_remove(tmp, path):
        write(tmp)
        os.chmod(tmp, _mode_for(path))
        with open(tmp, "rb+") as f:
            os.fsync(f.fileno())
    return tmp


def replace_with(tmp: str, path: Path) -> None:
    with _or_remove(tmp, path):
        os.replace(tmp, path)


def atomic_write(path: Path, write) -> None:
    """Write ``path`` through a temporary file and a rename: a failure (disk full, a
    crash, Ctrl-C) leaves ``path`` as it was, and no temporary behind."""
    check_target(path)
    replace_with(temp_beside(path, write), path)


#: The formats a figure is written in, by suffix.
FIGURE_FORMATS = {".png": "png", ".svg": "svg", ".pdf": "pdf"}


def write_figure(fig, path, **savefig_kw) -> Path:
    """Save a matplotlib figure to ``path`` as :func:`atomic_write` does (its format from the suffix:
    .png, .svg or .pdf): a symlink planted at ``path`` is replaced, never written through."""
    path = as_path(path, "write_figure")
    fmt = FIGURE_FORMATS.get(path.suffix.lower())
    if fmt is None:
        raise ValueError(f"a figure is written as {', '.join(FIGURE_FORMATS)}; {str(path)!r} has none of these")
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(path, lambda tmp: fig.savefig(tmp, format=fmt, **savefig_kw))
    return path


def digest(path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()
