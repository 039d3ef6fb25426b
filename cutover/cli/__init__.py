"""The `cutover` command line: thin commands, one error boundary.

Commands parse, call one function, and render. Expected failures are CutoverError
subclasses and leave through `main` as a message on stderr and their exit code;
tracebacks only with --debug.
"""

from __future__ import annotations

import logging
import sys
import traceback

import click

from cutover import __version__, secrets
from cutover.errors import CutoverError, ExitCode


class _ScrubbingHandler(logging.StreamHandler):  # type: ignore[type-arg]
    def format(self, record: logging.LogRecord) -> str:
        return secrets.scrub(super().format(record))


def _setup_logging(debug: bool, verbose: bool, quiet: bool = False) -> None:
    handler = _ScrubbingHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger("cutover")
    root.handlers[:] = [handler]
    root.setLevel(logging.DEBUG if debug else logging.INFO if verbose else logging.ERROR if quiet else logging.WARNING)
    root.propagate = False
    logging.getLogger("cutover.kafka.librdkafka").setLevel(logging.DEBUG if debug else logging.CRITICAL + 10)
    # py4j logs a Python traceback when a foreachBatch callback raises; cutover reports the error itself.
    logging.getLogger("py4j").setLevel(logging.DEBUG if debug else logging.CRITICAL + 10)


#: The flags every command takes, before or after its name: `cutover --debug plan check` is
#: `cutover plan check --debug`.
_VERBOSITY = {"debug": (("--debug",), "Show debug logs and tracebacks."),
              "verbose": (("-v", "--verbose"), "Show informational logs on stderr."),
              "quiet": (("-q", "--quiet"), "Only results (stdout) and errors (stderr): no progress or warnings.")}


def _verbosity(name: str) -> click.Option:
    def turn_on(ctx: click.Context, _param: click.Parameter, value: bool) -> None:
        if not value:
            return
        root = ctx.find_root()
        root.obj = {**(root.obj or {}), name: True}
        _apply_verbosity(root.obj)

    flags, text = _VERBOSITY[name]
    return click.Option(list(flags), is_flag=True, expose_value=False, callback=turn_on, help=text)


def _apply_verbosity(flags: dict[str, bool]) -> None:
    from cutover import output

    debug, verbose, quiet = (bool(flags.get(n)) for n in ("debug", "verbose", "quiet"))
    if quiet and (debug or verbose):
        raise click.UsageError("--quiet cannot be used with --debug or --verbose")
    _setup_logging(debug, verbose, quiet)
    output.set_reporter((lambda _line: None) if quiet else output.to_stderr)


class _Workflow(click.Group):
    """Commands listed in the order a migration uses them, not alphabetically."""

    ORDER = ("demo", "local", "init", "plan", "assess", "registry", "rights", "mirror", "offsets", "readers", "shadow",
             "verify", "drill", "promote", "status", "exporter", "rollback", "complete", "cancel", "jars")

    def list_commands(self, ctx: click.Context) -> list[str]:
        names = super().list_commands(ctx)
        return sorted(names, key=lambda n: (self.ORDER.index(n) if n in self.ORDER else len(self.ORDER), n))


@click.group(cls=_Workflow, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 76})
@click.version_option(__version__, "-V", "--version", prog_name="cutover")
@click.pass_context
def cli(ctx: click.Context) -> None:
    """Move Kafka workloads, and the Iceberg tables fed from them, between clusters: provably, reversibly."""
    ctx.obj = {"debug": False, **(ctx.obj or {})}
    _apply_verbosity(ctx.obj)


def _register() -> None:
    from cutover.cli import (
        assess,
        drill,
        exporter,
        init,
        local,
        mirror,
        plan,
        readers,
        registry,
        rights,
        shadow,
        switch,
        verify,
    )

    cli.add_command(init.init_cmd)
    cli.add_command(assess.assess_cmd)
    cli.add_command(plan.plan_group)
    cli.add_command(local.local_group)
    cli.add_command(local.jars_group)
    cli.add_command(mirror.mirror_group)
    cli.add_command(mirror.offsets_group)
    cli.add_command(readers.readers_group)
    cli.add_command(registry.registry_group)
    cli.add_command(rights.rights_group)
    cli.add_command(shadow.shadow_group)
    cli.add_command(verify.verify_cmd)
    cli.add_command(switch.promote_cmd)
    cli.add_command(switch.rollback_cmd)
    cli.add_command(switch.status_cmd)
    cli.add_command(exporter.exporter_cmd)
    cli.add_command(switch.complete_cmd)
    cli.add_command(switch.cancel_cmd)
    cli.add_command(drill.drill_group)
    cli.add_command(drill.demo_cmd)
    _add_verbosity(cli)
    from cutover.cli import examples

    examples.attach(cli)


def _add_verbosity(command: click.Command) -> None:
    """--debug, -v and -q on the command and every command under it."""
    command.params += [_verbosity(name) for name in _VERBOSITY]
    for sub in getattr(command, "commands", {}).values():
        _add_verbosity(sub)


_register()


def main(argv: list[str] | None = None) -> None:
    """Entry point: run the CLI and map every outcome to an exit code."""
    from cutover import interrupt
    from cutover.cli import renames

    args = renames.rewrite(list(argv if argv is not None else sys.argv[1:]), cli)
    debug = "--debug" in args
    interrupt.install()
    try:
        code = cli.main(args=args, prog_name="cutover", standalone_mode=False)
    except CutoverError as exc:
        if debug:
            traceback.print_exc()
        click.echo(secrets.scrub(exc.render()), err=True)
        code = exc.exit_code
    except click.exceptions.Exit as exc:
        code = exc.exit_code
    except click.ClickException as exc:
        exc.show()
        if isinstance(exc, click.NoSuchOption) and exc.ctx is not None and exc.ctx.parent is None \
                and exc.option_name not in ("-h", "--help"):
            click.echo(f"  fix: options go after the command's name: cutover COMMAND {exc.option_name} ... "
                       "(cutover --help lists the commands)", err=True)
        code = ExitCode.USAGE if isinstance(exc, click.UsageError) else ExitCode.ERROR
    except (KeyboardInterrupt, click.exceptions.Abort):
        click.echo("interrupted", err=True)
        if argv is None:  # the cutover process itself: threads stuck in a client library are not waited for
            interrupt.disarm()
            interrupt.exit_now(ExitCode.INTERRUPTED)
        code = ExitCode.INTERRUPTED
    except Exception as exc:  # an unexpected failure: a bug, reported as one (a cluster's answer: as that)
        if debug:
            traceback.print_exc()
        click.echo(secrets.scrub(_unexpected(exc)), err=True)
        code = ExitCode.ERROR
    finally:
        interrupt.disarm()
    sys.exit(int(code or 0) if isinstance(code, int) else 0)


def _unexpected(exc: Exception) -> str:
    from cutover.errors import unexpected

    message, fix = unexpected(exc)
    return f"error: {message}\n  " + (fix if fix.startswith("(") else f"fix: {fix}")
