"""``rumi validate``: check a file (and its blob) against every MUST.

Exit status: 0 valid, 1 invalid (with a one-line reason), 2 usage or I/O error, or a
resource limit that stopped the check (which, per the specification, does not make a
file invalid).
"""

from __future__ import annotations

import os
import sys

import click

from rumi_core.cli.options import OptionError, header_option, one_line, read_header_file, shown, timeout_option
from rumi_core.errors import HeaderMismatchError, InvalidHeaderError, ResourceLimitError, RumiError, SourceError
from rumi_core.header import blob_beside
from rumi_core.sources import url_scheme
from rumi_core.validate import validate

__all__ = ["validate_command"]


@click.command("validate")
@click.argument("file", metavar="FILE_OR_URL")
@header_option("the one beside the file is checked too, when there is one")
@click.option("--quick", is_flag=True, help="Check structure only; do not decode frames.")
@timeout_option
def validate_command(file: str, header_path: str | None, quick: bool, timeout: float | None) -> None:
    """Check FILE_OR_URL against the rumi 0.1.0 specification.

    Without --header, the blob beside it (FILE + "h", the one rumi read
    locates frames with) is checked too, when there is one.
    """
    blob, header_path, unread = _header(file, header_path, timeout)
    try:
        structure = validate(file, blob, quick=quick, timeout=timeout)
    except SourceError as err:
        _report(file, "cannot read", err)
        sys.exit(2)
    except ResourceLimitError as err:
        # Resource limits: exceeding one "does not make the rumi file invalid",
        # so this is not exit 1 but a failure to check (exit 2).
        _report(file, "cannot check", err)
        sys.exit(2)
    except (InvalidHeaderError, HeaderMismatchError) as err:
        _report(file, f"invalid: header blob {header_path}", err)
        sys.exit(1)
    except RumiError as err:
        _report(file, "invalid", err)
        sys.exit(1)
    lay = structure.head.layout
    what = "structure" if quick else f"structure and {lay.frame_count} frames"
    extra = f" and header blob {header_path}" if blob is not None else ""
    if unread is not None:
        click.echo(shown(f"{file}: no header blob checked ({one_line(unread)})"), err=True)
    click.echo(shown(f"{file}: valid ({what}{extra} checked)"))


def _header(file: str, header_path: str | None, timeout: float | None) -> tuple[bytes | None, str | None, SourceError | None]:
    """The blob to check FILE with and where it is (--header's, else the one beside FILE), and why none was read beside a URL."""
    if header_path is not None:
        return read_header_file(header_path, timeout), header_path, None  # unreadable: an I/O error, exit 2
    beside = blob_beside(file)
    if url_scheme(file) is None:
        return (read_header_file(beside), beside, None) if os.path.isfile(beside) else (None, None, None)
    try:
        return read_header_file(beside, timeout), beside, None
    except OptionError as err:
        cause = err.__cause__ or err
        if not isinstance(cause, SourceError) or cause.status is None:
            _report(file, "cannot read", cause)  # no answer: the file's own request would fail alike
            sys.exit(2)
        # The store answered: beside a URL, "no blob there" and "a blob not readable" look alike
        # (a signed URL signs its file alone: 403 for the blob), so the file is checked alone, and
        # a valid one is said to be checked without its blob.
        return None, None, cause


def _report(file: str, verdict: str, err: BaseException) -> None:
    """``FILE: verdict: message`` on stderr, :func:`shown`, naming the file once where the message begins with it too."""
    name, text = shown(file), shown(one_line(err))
    if text.startswith(f"{name}: "):
        text = text[len(name) + 2 :]
    click.echo(f"{name}: {verdict}: {text}", err=True)
