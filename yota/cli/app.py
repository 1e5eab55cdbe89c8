"""The ``yota-ir`` command group, its errors and exit codes, and running the user's code
(an exception there is reported with the user's traceback, not as a crash)."""

from __future__ import annotations

import contextlib
import os
import sys
import traceback
from collections.abc import Iterator
from typing import Any

import click

from yota.ir.errors import YotaError

EXIT_ERROR = 1  # an error in the user's code, a Yota error, a failed check
EXIT_INTERNAL = 3  # a bug in Yota itself


class ToolError(click.ClickException):
    """An error reported as ``error: <message>`` on stderr, with exit status 1."""

    exit_code = EXIT_ERROR

    def show(self, file: Any = None) -> None:
        click.echo(f"error: {self.format_message()}", err=True)


class InternalError(ToolError):
    """A bug in Yota, reported with exit status 3."""

    exit_code = EXIT_INTERNAL


_PKG_DIRS = tuple(os.path.dirname(os.path.abspath(m.__file__ or "")) + os.sep
                  for m in (click, sys.modules["yota"], sys.modules["yota.ir"]))


def _is_machinery(filename: str) -> bool:
    """Frames of this tool, click, Yota and importlib that lead into the user's code."""
    return (filename.startswith("<frozen importlib")
            or os.path.abspath(filename).startswith(_PKG_DIRS))


def user_traceback(e: BaseException) -> str | None:
    """``e``'s traceback from the first frame of the user's code on (None if it has no
    such frame: then the error is Yota's own). A SyntaxError gives its location."""
    tb = e.__traceback__
    while tb is not None and _is_machinery(tb.tb_frame.f_code.co_filename):
        tb = tb.tb_next
    if tb is None and not isinstance(e, SyntaxError):
        return None
    return "".join(traceback.format_exception(type(e), e, tb)).rstrip()


@contextlib.contextmanager
def user_code(what: str) -> Iterator[None]:
    """Run the user's code: an exception raised there (not a YotaError) is reported with
    the user's traceback, not as a crash of the tool. YotaErrors, and exceptions that
    never passed through the user's code, propagate."""
    try:
        yield
    except (YotaError, click.ClickException, click.exceptions.Exit, click.Abort):
        raise
    except Exception as e:
        tb = user_traceback(e)
        if tb is None:
            raise
        raise ToolError(f"{what} raised {type(e).__name__}:\n\n{tb}") from e


class _Group(click.Group):
    """Turns YotaErrors into clean messages and anything else into a reported bug."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except (click.ClickException, click.exceptions.Exit, click.Abort):
            raise
        except YotaError as e:
            if ctx.meta.get("yota_ir.traceback"):
                click.echo("".join(traceback.format_exception(e)).rstrip(), err=True)
            raise ToolError(f"{type(e).__name__}: {e}") from e
        except Exception as e:
            tb = "".join(traceback.format_exception(e)).rstrip()
            raise InternalError(f"internal error in Yota (a bug: please report it with this "
                            f"traceback)\n\n{tb}") from e


_CONTEXT = {"help_option_names": ["-h", "--help"], "max_content_width": 100}


@click.group(cls=_Group, context_settings=_CONTEXT)
@click.version_option(package_name="yota", prog_name="yota-ir")
@click.option("--traceback", "show_traceback", is_flag=True,
              help="Also print the Python traceback of Yota errors.")
@click.pass_context
def main(ctx: click.Context, show_traceback: bool) -> None:
    """Look at every stage of Yota: tapes, IR before and after each pass, graphs, and a
    gradient check.

    TARGET is FILE.py:FUNC or package.module:FUNC; its example arguments come from
    --args 'EXPR' or --example FUNC (see each command's --help).

    \b
    Examples:
      yota-ir tape model.py:loss --args 'Linear(np.random.rand(3,4), np.random.rand(3)), np.random.rand(4,5)'
      yota-ir ir model.py:loss --example example --stage grad
      yota-ir ir model.py:loss --example example --all-stages --changed
      yota-ir ir model.py:loss --example example --stage grad > grad.yir
      yota-ir opt grad.yir --passes simplify,cse,dce
      yota-ir graph model.py:loss --example example -o loss.svg
      yota-ir graph model.py:loss --example example --values -o loss.svg
      yota-ir check model.py:loss --example example
      yota-ir compile model.py:loss --example example
      yota-ir ir model.py:loss --example example --stage planned --timings
      yota-ir profile model.py:loss --example example --trace loss.json

    \b
    Exit status: 0 success; 1 an error in your code, a Yota error, or a failed check;
    2 bad usage; 3 an internal error of Yota (please report it).
    """
    ctx.meta["yota_ir.traceback"] = show_traceback
