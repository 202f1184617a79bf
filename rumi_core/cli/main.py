"""The ``rumi`` command group.

Subcommands are entry points in the ``rumi.commands`` group, so other
packages (the conversion pipeline, the catalogue) add theirs without this
package importing them. Logging is configured here, and then each function
in the ``rumi.logging`` entry-point group is called with the ``-v`` count,
so a package can set the loggers of the libraries it uses (this one uses none).
"""

from __future__ import annotations

import codecs
import logging
import os
import signal
import sys
from importlib.metadata import entry_points

import click

__all__ = ["cli", "main"]


class _EntryPointGroup(click.Group):
    """A group whose commands are loaded lazily from entry points."""

    def _commands(self) -> dict[str, str]:
        return {ep.name: ep.value for ep in entry_points(group="rumi.commands")}

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(set(super().list_commands(ctx)) | set(self._commands()))

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        found = super().get_command(ctx, cmd_name)
        if found is not None:
            return found
        for ep in entry_points(group="rumi.commands", name=cmd_name):
            command = ep.load()
            if isinstance(command, click.Command):
                return command
        return None


@click.group(cls=_EntryPointGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("-v", "--verbose", count=True, help="More log output (repeat for debug).")
@click.version_option(package_name="rumi-forge")
def cli(verbose: int) -> None:
    """rumi: write, catalogue and read stateless raster cubes."""
    level = logging.WARNING - 10 * min(verbose, 2)
    logging.basicConfig(level=level, format="%(levelname)s %(name)s: %(message)s")
    for hook in entry_points(group="rumi.logging"):
        hook.load()(verbose)


def _exit_on_interrupt(signum: int, frame: object) -> None:
    raise SystemExit(128 + signum)


def _in_utf8_mode() -> None:
    """Start the command again in Python's UTF-8 mode where file names are not read as UTF-8 (a Latin-1 or ASCII locale).

    GDAL opens files, and STAC and the manifest name them, by their names as
    UTF-8. Under another locale Python reads a name's bytes with the locale's
    codec: ``Zürich`` became ``ZÃ¼rich``, which GDAL then looked for, and every
    input under it was a dead letter (or its name "not UTF-8 text"). The
    arguments, already read with that codec, go back to their bytes in
    ``execv`` and are read again as UTF-8; ``PYTHONUTF8`` carries the mode to the
    worker processes a run starts. A no-op in UTF-8 mode or a UTF-8 locale.
    """
    if sys.flags.utf8_mode or codecs.lookup(sys.getfilesystemencoding()).name == "utf-8":
        return
    os.environ["PYTHONUTF8"] = "1"
    os.execv(sys.executable, [sys.executable, "-X", "utf8", *sys.orig_argv[1:]])


def main() -> None:
    """Console-script entry point.

    Ctrl-C ends a command with status 130 (128 + SIGINT), as a shell reports an
    interrupted program, where click would print "Aborted!" and exit 1. A
    process started with SIGINT ignored (``nohup``, ``&`` in a script) keeps ignoring it.
    SIGTERM ends it alike, with status 143, unwinding as an exit does (its
    temporary files go), where the process died on the spot. File names are
    read as UTF-8 whatever the locale (:func:`_in_utf8_mode`). A standard
    output that cannot be written (a full disk, ``> /dev/full``) is one line
    and status 2, an I/O error, where it was a traceback and status 1 (which
    ``rumi validate`` gives an invalid file).
    """
    _in_utf8_mode()
    if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
        signal.signal(signal.SIGINT, _exit_on_interrupt)
    if signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:
        signal.signal(signal.SIGTERM, _exit_on_interrupt)
    try:
        cli()
    except OSError as err:
        if not _writing_stdout(err):
            raise
        sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - what is left in the old buffer would fail again at exit
        click.echo(f"Error: cannot write to standard output: {err.strerror or err}", err=True)
        sys.exit(2)


def _writing_stdout(err: OSError) -> bool:
    """Whether ``err`` was raised writing to standard output (``click.echo``'s ``file``), not by a command's own I/O."""
    trace = err.__traceback__
    while trace is not None and trace.tb_next is not None:
        trace = trace.tb_next
    target = trace.tb_frame.f_locals.get("file") if trace is not None else None
    try:
        return target is not None and target.fileno() == 1
    except (AttributeError, OSError, ValueError):  # not a file, or one without a descriptor
        return False
