"""Command-line front end: ``concurrency-model COMMAND ...``; every command takes ``--json``.

Input errors (``ValueError``) print one line on stderr and exit with code 2, never a traceback.
"""
from __future__ import annotations

import argparse
import json
import sys

from . import __version__
from .commands import calibrate, collective, estimate, infer, op, presets, report, sweep, validate, workdepth

COMMANDS = (workdepth, op, collective, estimate, sweep, infer, calibrate, validate, report, presets)


# the optional extras (pyproject.toml) and how to install them; torch first, pinned (see .ci/run)
EXTRAS = {"onnx": "pip install 'concurrency-model[onnx]'",
          "torch": "pip install torch==2.13.0, then 'concurrency-model[torch]'"}


def missing_extra(e: ImportError) -> str:
    """One line for a missing optional package: what is missing and the command that installs it.

    >>> missing_extra(ModuleNotFoundError("No module named 'torch'", name="torch"))
    "needs torch, which is not installed: pip install torch==2.13.0, then 'concurrency-model[torch]'"
    """
    top = (e.name or "").split(".")[0]
    if top in EXTRAS:
        return f"needs {top}, which is not installed: {EXTRAS[top]}"
    return str(e).splitlines()[0] if str(e) else f"a module could not be imported ({type(e).__name__})"


class Parser(argparse.ArgumentParser):
    """Bad arguments: one line on stderr (``prog: error: ...``) and exit code 2, without the usage block."""

    def error(self, message):
        self.exit(2, f"{self.prog}: error: {message}\n")


def build_parser() -> argparse.ArgumentParser:
    p = Parser(prog="concurrency-model", description=__doc__.splitlines()[0])
    p.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = p.add_subparsers(dest="command", required=True)
    for command in COMMANDS:
        command.register(sub)
    return p


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    try:
        out = args.run(args)
    except ValueError as e:
        print(f"concurrency-model {args.command}: error: {e}", file=sys.stderr)
        return 2
    except (OverflowError, MemoryError) as e:  # an input number far beyond any real model or machine
        print(f"concurrency-model {args.command}: error: an input number is too large to compute with "
              f"({type(e).__name__}: {e})", file=sys.stderr)
        return 2
    except RecursionError:  # an input object nested deeper than any file the readers name (checks.json_object)
        print(f"concurrency-model {args.command}: error: an input object nests too deeply to read (more than about "
              f"{sys.getrecursionlimit():,} levels)", file=sys.stderr)
        return 2
    except ImportError as e:  # an optional extra is not installed
        print(f"concurrency-model {args.command}: error: {missing_extra(e)}", file=sys.stderr)
        return 2
    # a command may finish with errors it reports beside its output (e.g. validate with a broken dataset)
    code, errors = (out.pop("_exit_code", 0), out.pop("_errors", [])) if isinstance(out, dict) else (0, [])
    try:
        if args.json:
            print(json.dumps(out))
        else:
            args.show(out)
        sys.stdout.flush()
    except BrokenPipeError:  # e.g. piped into head
        sys.stderr.close()
    for line in errors:
        print(f"concurrency-model {args.command}: error: {line}", file=sys.stderr)
    return code


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
