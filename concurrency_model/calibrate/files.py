"""Where calibration runs (and the report) write: targets checked before any work (nothing overwritten without
``force``; a directory that cannot be written refused before measuring, :func:`stage_dir`), each file written to a
temporary name in its directory and renamed over the target (``os.replace``, atomic on POSIX), so that a reader never
sees half a file and a run stopped half-way leaves the last whole one. Files that belong together (measurements and
the profile fitted to them; a page and its figures) are built in a directory beside the target and swapped in with
one rename (:func:`swap_in`)."""
from __future__ import annotations

import ctypes
import errno
import os
import shutil
import time
from pathlib import Path


def check_targets(out_dir, force: bool, names) -> Path:
    """``out_dir`` as a Path; ``ValueError`` if one of ``names`` exists there and not ``force``."""
    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise ValueError(f"out: {out} exists and is not a directory")
    for name in names:
        if (out / name).exists() and not force:
            raise ValueError(f"out: {out / name} exists; pass --force to overwrite it")
    return out


def atomic_write(path: Path, text: str) -> None:
    """``text`` into ``path`` through a temporary file in the same directory (removed if anything fails)."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{time.monotonic_ns()}.tmp")
    try:
        with open(tmp, "x", newline="") as f:  # a new file; its mode follows the umask
            f.write(text)
            f.flush()
            os.fsync(f.fileno())  # the data is on disk before the name points at it
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def _exchange(a: Path, b: Path) -> bool:
    """Swap the paths ``a`` and ``b`` (both existing) in one atomic rename: Linux's ``renameat2(...,
    RENAME_EXCHANGE)`` (rename(2), Linux 3.15, glibc 2.28). False where the system has no such call."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        call = libc.renameat2
    except (OSError, AttributeError):
        return False
    at_fdcwd, rename_exchange = -100, 2  # <fcntl.h> AT_FDCWD, <linux/fs.h> RENAME_EXCHANGE
    if call(at_fdcwd, os.fsencode(str(a)), at_fdcwd, os.fsencode(str(b)), rename_exchange) == 0:
        return True
    err = ctypes.get_errno()
    if err in (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP):  # a file system or kernel without the exchange
        return False
    raise OSError(err, os.strerror(err), str(a))


def stage_dir(out_dir, what: str = "out") -> Path:
    """A new empty directory beside ``out_dir`` (``.NAME.new-PID-NS``) to build the next contents of ``out_dir``
    in, for :func:`swap_in`; made before any work, so that a directory that cannot be written is refused at once
    (``ValueError`` naming ``what``) rather than after minutes of measuring."""
    out = Path(out_dir).absolute()
    if out.exists() and not out.is_dir():
        raise ValueError(f"{what}: {out_dir} exists and is not a directory")
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        if out.exists() and not os.access(out, os.W_OK):
            raise PermissionError(errno.EACCES, "Permission denied")
        stage = out.parent / f".{out.name}.new-{os.getpid()}-{time.monotonic_ns()}"
        stage.mkdir()
    except OSError as e:
        why = "a part of the path is a file" if isinstance(e, (FileExistsError, NotADirectoryError)) else \
            e.strerror or type(e).__name__
        raise ValueError(f"{what}: cannot write into {out_dir} ({why}); nothing was done") from None
    return stage


def swap_in(stage: Path, out_dir, names) -> None:
    """Make ``stage`` (from :func:`stage_dir`, holding the new ``names``) the directory ``out_dir`` in one rename:
    the other entries of ``out_dir`` are linked (or copied) into ``stage`` first, then the two directories are
    exchanged atomically and the old one removed. A reader, or a run stopped at any point, sees either all the old
    files or all the new ones, never a mix. Where the system cannot exchange (not Linux), ``out_dir`` is renamed
    aside and ``stage`` into its place: between the two renames ``out_dir`` is missing, its old contents whole
    under ``.NAME.old-PID``."""
    out = Path(out_dir).absolute()
    if not out.exists():
        os.rename(stage, out)
        return
    for entry in out.iterdir():  # what the new contents do not replace is kept
        if entry.name in names or (stage / entry.name).exists():
            continue
        if entry.is_dir() and not entry.is_symlink():
            shutil.copytree(entry, stage / entry.name, symlinks=True, copy_function=_link_or_copy)
        else:
            _link_or_copy(entry, stage / entry.name)
    if _exchange(stage, out):
        shutil.rmtree(stage, ignore_errors=True)  # now the old contents
        return
    old = out.parent / f".{out.name}.old-{os.getpid()}"
    os.rename(out, old)
    os.rename(stage, out)
    shutil.rmtree(old, ignore_errors=True)


def _link_or_copy(src, dst) -> None:
    """A hard link (no copy of the bytes; the old directory's entry goes when it is removed), else a copy."""
    try:
        if os.path.islink(src):
            os.symlink(os.readlink(src), dst)
        else:
            os.link(src, dst)
    except OSError:
        shutil.copy2(src, dst, follow_symlinks=False)


def discard(stage: Path) -> None:
    """Remove a stage that will not be swapped in (a run stopped or failed)."""
    shutil.rmtree(stage, ignore_errors=True)


def partial_path(path: Path) -> Path:
    """Where a long run keeps what it has measured so far (``NAME.partial``), beside the file it will replace
    once, at the end: a run stopped half-way leaves the last whole file and its own partial one."""
    return path.with_name(f"{path.name}.partial")
