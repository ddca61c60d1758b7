"""Command-line front end: ``concurrency-model COMMAND ...``; every command takes ``--json``.

Input errors (``ValueError``) print one line on stderr and exit with code 2, never a traceback.
"""
from __future__ import annotations

import argparse
import json
import sys
from importlib import import_module

from .version import __version__

# the commands, each a module of :mod:`.commands` with ``register(subparsers)``: a call imports only the module of
# the command it runs (and so only the libraries that command uses); help and unknown commands import them all
COMMANDS = ("workdepth", "op", "collective", "estimate", "sweep", "infer", "calibrate", "validate", "report", "presets",
            "cache", "converge")


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


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The argument parser with every command, or with command ``only`` alone (the others' modules not imported).

    >>> build_parser("presets").parse_args(["presets", "--json"]).json
    True
    """
    p = Parser(prog="concurrency-model", description=__doc__.splitlines()[0])
    p.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = p.add_subparsers(dest="command", required=True)
    for name in COMMANDS if only is None else (only,):
        import_module(f".commands.{name}", __package__).register(sub)
    return p


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    # the command is the first argument (the parser's only other option, --version, exits): build that one alone
    args = build_parser(argv[0] if argv and argv[0] in COMMANDS else None).parse_args(argv)
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
