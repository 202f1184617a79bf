"""Options, argument parsers and output checks shared by the ``rumi`` subcommands.

Errors a user can act on are one line (``Error: <what> <where>``): a bad
value or an unusable output location is an :class:`OptionError` (exit status
2, like click's usage errors, but without the usage text), reported before
any work starts.
"""

from __future__ import annotations

import contextlib
import os
import re
import sys
import tempfile
from typing import IO, TYPE_CHECKING, Any, Final

import click

from rumi_core.errors import SourceError
from rumi_core.sources import url_scheme

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator
    from pathlib import Path

__all__ = [
    "REDACT_ENTRY_POINTS",
    "OptionError",
    "check_output_file",
    "counted",
    "failure",
    "header_option",
    "one_line",
    "parse_window",
    "probe_directory",
    "progress_bar",
    "read_header_file",
    "shown",
    "timeout_option",
]


@contextlib.contextmanager
def progress_bar(length: int, *, label: str, enabled: bool | None = None) -> Iterator[Callable[[int], None] | None]:
    """A progress bar on stderr for a long command, as an ``update(n)`` callable.

    Shown when ``enabled`` is True, or when it is None and stderr is a
    terminal; otherwise nothing is printed (click's hidden bar would still
    print its label) and None is yielded.
    """
    show = enabled if enabled is not None else sys.stderr.isatty()
    if not show or length <= 1:
        yield None
        return
    with click.progressbar(length=length, label=label, file=sys.stderr) as bar:
        yield bar.update


def counted(n: int, noun: str) -> str:
    """``n`` and the noun, plural unless ``n`` is 1 (nouns here add an s).

    >>> counted(1, "cube"), counted(0, "cube"), counted(3, "input")
    ('1 cube', '0 cubes', '3 inputs')
    """
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def one_line(err: BaseException) -> str:
    """The error's message on one line: decoder messages can span several."""
    return " ".join(str(err).split())


_CONTROL: Final = re.compile(r"[\x00-\x1f\x7f-\x9f]")


def printable(text: str) -> str:
    """``text`` with its control characters escaped, as Python writes them: a file's band text may hold a newline, a
    carriage return or a terminal escape, which would break a listing or drive the terminal.

    >>> printable("B4\\n\\x1b[31mred")
    'B4\\\\n\\\\x1b[31mred'
    """
    return _CONTROL.sub(lambda m: repr(m.group())[1:-1], text)


REDACT_ENTRY_POINTS: Final = "rumi.redact"
"""Entry-point group of functions ``(text) -> text`` that take credentials out of what a command shows.

The catalog package registers one that removes the signatures and
passwords of URLs (its ``catalog.credentials``), which rumi_core knows
nothing of; an entry point, as for ``rumi.sources``, since rumi_core must not
import catalog.
"""


def shown(text: str) -> str:
    """``text`` as a command may show it: passed through every function in :data:`REDACT_ENTRY_POINTS`."""
    from importlib.metadata import entry_points

    for hook in entry_points(group=REDACT_ENTRY_POINTS):
        text = hook.load()(text)
    return text


def failure(target: object, err: BaseException) -> click.ClickException:
    """A one-line ``Error: <target>: <message>`` (exit status 1) for a failed command, :func:`shown`.

    The target is named once: not again when the message already names it.
    """
    text = shown(one_line(err))
    where = shown(os.fspath(target) if isinstance(target, (str, os.PathLike)) else str(target))
    return click.ClickException(text if where in text else f"{where}: {text}")


class OptionError(click.UsageError):
    """A command-line value that cannot be used, shown as one line (exit status 2)."""

    def show(self, file: IO[Any] | None = None) -> None:
        """Print ``Error: <message>`` only: the message names the option."""
        click.echo(f"Error: {self.format_message()}", file=file, err=True)


def check_output_file(path: Path) -> None:
    """Check that a file can be written at ``path`` (the ``-o`` option) before any work starts.

    The path must not be a directory or a special file (``/dev/null``), and
    its directory must exist and accept a new file: a hidden probe file is
    created and removed there, which also catches read-only filesystems and
    permissions that ``os.access`` misjudges for root.

    Raises:
        OptionError: the location cannot take the output; the message says why.
    """
    if str(path) == "-":  # no command writes to standard output: its outputs are binary, or a GeoTIFF GDAL seeks in
        raise OptionError("-o -: the output is written to a file, not to standard output; give a file name")
    if path.is_dir():
        raise OptionError(f"-o {path}: is a directory; give a file name")
    if path.exists() and not path.is_file():
        raise OptionError(f"-o {path}: is not a regular file")
    parent = path.parent
    if not parent.exists():
        raise OptionError(f"-o {path}: directory {parent} does not exist")
    if not parent.is_dir():
        raise OptionError(f"-o {path}: {parent} is not a directory")
    probe_directory(parent, what=f"-o {path}")


def probe_directory(directory: Path, *, what: str) -> None:
    """Check that ``directory`` accepts a new entry by creating and removing a hidden probe file there.

    A probe also catches read-only filesystems and permissions that
    ``os.access`` misjudges for root.

    Raises:
        OptionError: ``<what>: cannot write into <directory>: <reason>``.
    """
    try:
        with tempfile.TemporaryFile(prefix=".rumi-probe.", dir=directory):
            pass
    except OSError as err:
        raise OptionError(f"{what}: cannot write into {directory}: {err.strerror}") from err


def _name(param: click.Parameter | None) -> str:
    opts = getattr(param, "opts", None)
    return str(opts[0]) if opts else "value"


def parse_window(
    ctx: click.Context | None, param: click.Parameter | None, value: str | None
) -> tuple[tuple[int, int], tuple[int, int]] | None:
    """Parse ``"y0:y1,x0:x1"`` into ``((y0, y1), (x0, x1))``."""
    if value is None:
        return None
    try:
        rows, cols = value.split(",")
        r0, r1 = (int(v) for v in rows.split(":"))
        c0, c1 = (int(v) for v in cols.split(":"))
    except ValueError as err:
        raise OptionError(f"{_name(param)}: expected y0:y1,x0:x1 such as 0:512,256:768, got {value!r}") from err
    return (r0, r1), (c0, c1)


def read_header_file(location: str | None, timeout: float | None = None) -> bytes | None:
    """Return the bytes of a header blob at a path or URL (any scheme a reader opens), or None; a URL within ``timeout`` seconds."""
    if location is None:
        return None
    from rumi_core.header import blob_bytes  # what a command without --header never needs

    try:
        return blob_bytes(location, timeout=timeout)  # a rumi file given for its blob is refused unread
    except SourceError as err:
        reason = err.strerror if url_scheme(location) is None and err.strerror else err
        raise OptionError(f"--header {location}: cannot read: {reason}") from err


def header_option(without: str = "one is built from the file's head") -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """``--header PATH_OR_URL``, whose help says what the command does ``without`` it."""
    return click.option(
        "--header", "header_path", metavar="PATH_OR_URL", default=None, help=f"The file's header blob (.rumih). Without it, {without}."
    )


timeout_option = click.option(
    "--timeout",
    type=click.FloatRange(min=0, min_open=True),
    default=None,
    metavar="SECONDS",
    help="Total seconds the command may wait on remote storage, every request, thread and retry included "
    "(default: 120 for http(s):// and gs://; local files do not wait).",
)
