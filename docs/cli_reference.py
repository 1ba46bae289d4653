"""The command-line reference, one page a subcommand, drawn from the argparse parsers and the
registry together (a Sphinx extension; ``pages()`` also serves tests/test_cli_reference.py).

The parsers give every option, its help and its choices, but the training options default to
None on the command line by design (a command knows what the user gave); their true defaults
are the registry's (``registry.PACKSVM_PARAMS``, ``SVM_TYPE_PARAMS``, ``LINEAR_PARAMS``,
``THREADS``). Each option's shown default is the registry's where the registry holds the
parameter, else the parser's own. The pages are written at build time into cli/generated/.
"""
import argparse
import re
from pathlib import Path

from ppack.cli import build_parser
from ppack.cli.options import LINEAR_FLAGS, PACKSVM_FLAGS, SHARED
from ppack.registry import LINEAR_PARAMS, PACKSVM_PARAMS, SVM_TYPE_PARAMS, THREADS

PROG = "python -m ppack"
# the commands whose options the registry's tables define (add_packsvm_options, add_linear_options)
KERNEL_COMMANDS = ("train", "plan", "tune")
LINEAR_COMMANDS = ("train",)


def subcommands(parser=None, prefix=()):
    """(words, parser, help) for every leaf subcommand, e.g. (("data", "mnist8m"), its parser,
    its one-line help)."""
    parser = build_parser() if parser is None else parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {choice.dest: choice.help for choice in action._choices_actions}
            for name, sub in action.choices.items():
                if _has_subcommands(sub):
                    yield from subcommands(sub, prefix + (name,))
                else:
                    yield prefix + (name,), sub, helps.get(name)


def _has_subcommands(parser):
    return any(isinstance(a, argparse._SubParsersAction) for a in parser._actions)


def registry_default(command, action):
    """The registry's default of ``action``'s parameter in ``command``, as (found, value);
    a parameter two trainers share (--C, --seed, --class-weight) gives a dict {trainer: value}."""
    dest = action.dest
    if command in KERNEL_COMMANDS and dest in {**PACKSVM_PARAMS, **SVM_TYPE_PARAMS}:
        kernel = {**PACKSVM_PARAMS, **SVM_TYPE_PARAMS}[dest].default
        if command in LINEAR_COMMANDS and dest in SHARED:
            return True, {"packsvm": kernel, "linear solvers": LINEAR_PARAMS[dest].default}
        return True, kernel
    if command in LINEAR_COMMANDS and dest.startswith("linear_") and dest[len("linear_"):] in LINEAR_FLAGS:
        return True, LINEAR_PARAMS[dest[len("linear_"):]].default
    if dest == "threads":
        return True, THREADS.default
    return False, None


def default_text(command, action, parser=None):
    """What an option is when not given, in words: the registry's default or the parser's;
    where that is None and the help says "(default X)", the help's X (a default worked out
    when the run starts, as C's from sigma or the threads from the node)."""
    found, value = registry_default(command, action)
    if not found:
        if action.required or _required_choice(parser, action):
            return "required" + _required_choice(parser, action)
        value = action.default
        if isinstance(action, argparse._StoreTrueAction):
            return "off"
    said = re.search(r"\(default:? ([^()]*(?:\([^()]*\)[^()]*)*)\)", action.help or "")
    if isinstance(value, dict):
        return "; ".join(f"{trainer}: {_value_text(v, said)}" for trainer, v in value.items())
    if isinstance(action, argparse._StoreConstAction) and isinstance(value, bool):
        negated = action.option_strings[0].startswith("--no-")
        return f"off ({'on' if value else 'off'} unless given)" if negated else ("on" if value else "off")
    return _value_text(value, said)


def _required_choice(parser, action):
    """" (one of ...)" when ``action`` is in a required group of exclusive options, else ""."""
    for group in [] if parser is None else parser._mutually_exclusive_groups:
        if group.required and action in group._group_actions:
            return " (one of " + ", ".join(a.option_strings[0] for a in group._group_actions) + ")"
    return ""


def _value_text(value, said=None):
    if value is None and said is not None:
        return said[1]
    return "none" if value is None else f"{value:g}" if isinstance(value, float) else str(value)


def _escaped(text):
    """Plain text for a reStructuredText paragraph (help strings use *, _, | and backquotes),
    with the flags it names as literals (so that -- stays two hyphens)."""
    for char in "\\*`_|":
        text = text.replace(char, "\\" + char)
    return re.sub(r"(?<![\w-])(--[A-Za-z][A-Za-z0-9-]*)", r"``\1``", text)


def _help(parser, action):
    return parser._get_formatter()._expand_help(action) if action.help else ""


def _signature(action):
    if not action.option_strings:
        return action.metavar or action.dest
    if action.nargs == 0:
        return ", ".join(action.option_strings)
    if action.choices is not None:
        return f"{action.option_strings[0]} {{{','.join(map(str, action.choices))}}}"
    return f"{action.option_strings[0]} {action.metavar or action.dest.upper()}"


def _usage(parser):
    """The usage lines at a fixed width (argparse's own follows the terminal's)."""
    formatter = argparse.HelpFormatter(prog=parser.prog, width=76)
    formatter.add_usage(parser.usage, parser._actions, parser._mutually_exclusive_groups, prefix="")
    return formatter.format_help().strip()


def page(words, parser, summary=None):
    """The reStructuredText of one subcommand's page; ``summary``: its one-line help."""
    command = words[0]
    program = " ".join((PROG,) + words)
    title = f"``{' '.join(words)}``"
    lines = [f".. _cli-{'-'.join(words)}:", "", title, "=" * len(title), ""]
    for text in (summary, parser.description):
        if text:
            lines += [_escaped(text[0].upper() + text[1:]) + ("" if text.endswith(".") else "."), ""]
    usage = _usage(parser)
    lines += [".. code-block:: text", "", *("    " + line for line in usage.splitlines()), "",
              f".. program:: {program}", ""]
    for group in parser._action_groups:
        actions = [a for a in group._group_actions if not isinstance(a, argparse._HelpAction)]
        if not actions:
            continue
        heading = {"positional arguments": "Arguments", "options": "Options"}.get(group.title, group.title)
        heading = heading[0].upper() + heading[1:]
        lines += [_escaped(heading), "-" * len(_escaped(heading)), ""]
        if group.description:
            lines += [_escaped(group.description), ""]
        for action in actions:
            lines += [f".. option:: {_signature(action)}", ""]
            if action.option_strings:
                lines += [f"   Default: {_escaped(default_text(command, action, parser))}.", ""]
            help_text = _help(parser, action)
            if help_text:
                lines += ["   " + _escaped(help_text), ""]
    return "\n".join(lines) + "\n"


def pages():
    """{page name: reStructuredText} for every subcommand, e.g. {"data-mnist8m": ...}."""
    return {"-".join(words): page(words, parser, summary) for words, parser, summary in subcommands()}


def write_pages(app):
    """builder-inited: write cli/generated/<command>.rst, keeping unchanged files untouched."""
    folder = Path(app.srcdir) / "cli" / "generated"
    folder.mkdir(parents=True, exist_ok=True)
    texts = pages()
    for stale in folder.glob("*.rst"):
        if stale.stem not in texts:
            stale.unlink()
    for name, text in texts.items():
        path = folder / f"{name}.rst"
        if not path.exists() or path.read_text() != text:
            path.write_text(text)


def setup(app):
    app.connect("builder-inited", write_pages)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
