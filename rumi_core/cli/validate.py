"""``rumi validate``: check a file (and its blob) against every MUST.

Exit status: 0 valid, 1 invalid (with a one-line reason), 2 usage or I/O error, or a
resource limit that stopped the check (which, per the specification, does not make a
file invalid).
"""

from __future__ import annotations

import os
import sys

import click

from rumi_core.cli.options import header_option, one_line, read_header_file, shown
from rumi_core.errors import HeaderMismatchError, InvalidHeaderError, ResourceLimitError, RumiError, SourceError
from rumi_core.sources import url_scheme
from rumi_core.validate import validate

__all__ = ["validate_command"]


@click.command("validate")
@click.argument("file", metavar="FILE_OR_URL")
@header_option
@click.option("--quick", is_flag=True, help="Check structure only; do not decode frames.")
def validate_command(file: str, header_path: str | None, quick: bool) -> None:
    """Check FILE_OR_URL against the rumi 0.1.0 specification.

    Without --header, a local file's blob beside it (FILE + "h", the one
    rumi read locates frames with) is checked too.
    """
    if header_path is None and url_scheme(file) is None and os.path.isfile(file + "h"):
        header_path = file + "h"
    # An unreadable blob is an I/O error: OptionError exits with 2, not 1.
    blob = read_header_file(header_path)
    try:
        structure = validate(file, blob, quick=quick)
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
    click.echo(shown(f"{file}: valid ({what}{extra} checked)"))


def _report(file: str, verdict: str, err: BaseException) -> None:
    """``FILE: verdict: message`` on stderr, :func:`shown`, naming the file once where the message begins with it too."""
    name, text = shown(file), shown(one_line(err))
    if text.startswith(f"{name}: "):
        text = text[len(name) + 2 :]
    click.echo(f"{name}: {verdict}: {text}", err=True)
