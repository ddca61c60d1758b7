"""Where calibration runs write: targets checked before any work (nothing overwritten without ``force``), each
file written to a temporary name in its directory and renamed over the target (``os.replace``, atomic on
POSIX), so that a reader never sees half a file and a run stopped half-way leaves the last whole one."""
from __future__ import annotations

import os
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
