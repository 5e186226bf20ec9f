"""``caldera completion bash|zsh``: a shell completion script for every command and flag.

The script is generated from the argparse parser itself (`completion_tree` walks it), so a new
subcommand or flag completes without touching this file. It completes subcommands, flags, and the
values of flags with a fixed set of choices (``-o json|yaml|wide``, ``queue create -S``). zsh uses
the same script through ``bashcompinit``.

Install: ``source <(caldera completion bash)``, or for zsh ``source <(caldera completion zsh)``.
"""

from __future__ import annotations

import argparse
import shlex
import sys
from dataclasses import dataclass, field

__all__ = ["CompletionNode", "bash_script", "completion_tree", "register", "zsh_script"]


@dataclass
class CompletionNode:
    """What completes after one command path: its subcommands, flags and flag choices."""

    commands: list[str] = field(default_factory=list)
    options: list[str] = field(default_factory=list)
    choices: dict[str, list[str]] = field(default_factory=dict)


def completion_tree(parser: argparse.ArgumentParser) -> dict[str, CompletionNode]:
    """Every command path ("" for the root, "job list", ...) with what may follow it."""
    tree: dict[str, CompletionNode] = {}

    def walk(p: argparse.ArgumentParser, path: str) -> None:
        node = tree.setdefault(path, CompletionNode())
        for action in p._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, child in action.choices.items():
                    node.commands.append(name)
                    walk(child, f"{path} {name}".strip())
                continue
            if not action.option_strings:
                # a positional with fixed values (``completion bash|zsh``) completes like a command
                node.commands.extend(str(c) for c in action.choices or ())
                continue
            node.options.extend(action.option_strings)
            if action.choices is not None:
                values = [str(c) for c in action.choices]
                for opt in action.option_strings:
                    node.choices[opt] = values

    walk(parser, "")
    return tree


def bash_script(parser: argparse.ArgumentParser, prog: str = "caldera") -> str:
    """The bash completion script for `parser`."""
    tree = completion_tree(parser)
    fn = f"_{prog.replace('-', '_')}_complete"
    cmd_cases, opt_cases, choice_cases = [], [], []
    for path, node in sorted(tree.items()):
        key = shlex.quote(path)
        cmd_cases.append(f"        {key}) echo {shlex.quote(' '.join(node.commands))} ;;")
        opt_cases.append(f"        {key}) echo {shlex.quote(' '.join(node.options))} ;;")
        for opt, values in sorted(node.choices.items()):
            choice_cases.append(
                f"        {shlex.quote(path + '|' + opt)}) echo {shlex.quote(' '.join(values))} ;;"
            )
    return f"""# bash completion for {prog}; load with: source <({prog} completion bash)
{fn}_commands() {{
    case "$1" in
{chr(10).join(cmd_cases)}
    esac
}}
{fn}_options() {{
    case "$1" in
{chr(10).join(opt_cases)}
    esac
}}
{fn}_choices() {{
    case "$1" in
{chr(10).join(choice_cases)}
    esac
}}
{fn}() {{
    local cur="${{COMP_WORDS[COMP_CWORD]}}"
    local prev="${{COMP_WORDS[COMP_CWORD-1]}}"
    local path="" word i
    for ((i = 1; i < COMP_CWORD; i++)); do
        word="${{COMP_WORDS[i]}}"
        case " $({fn}_commands "$path") " in
            *" $word "*) path="${{path:+$path }}$word" ;;
        esac
    done
    local values
    values="$({fn}_choices "$path|$prev")"
    if [[ -n "$values" ]]; then
        COMPREPLY=($(compgen -W "$values" -- "$cur"))
        return 0
    fi
    if [[ "$cur" == -* ]]; then
        COMPREPLY=($(compgen -W "$({fn}_options "$path")" -- "$cur"))
    else
        COMPREPLY=($(compgen -W "$({fn}_commands "$path")" -- "$cur"))
    fi
    return 0
}}
complete -o default -F {fn} {prog}
"""


def zsh_script(parser: argparse.ArgumentParser, prog: str = "caldera") -> str:
    """The zsh completion script: the bash one, through zsh's bashcompinit."""
    return (
        f"# zsh completion for {prog}; load with: source <({prog} completion zsh)\n"
        "autoload -U +X compinit && compinit\n"
        "autoload -U +X bashcompinit && bashcompinit\n" + bash_script(parser, prog)
    )


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``caldera completion bash|zsh``."""
    p = sub.add_parser(
        "completion",
        help="print a shell completion script (bash or zsh)",
        description="Print a completion script: source <(caldera completion bash).",
    )
    p.add_argument("shell", choices=["bash", "zsh"], help="the shell")
    p.set_defaults(handler=_main)


def _main(args: argparse.Namespace) -> int:
    # Imported here: cli.main imports this module.
    from cli.main import build_parser

    parser = build_parser()
    script = bash_script(parser) if args.shell == "bash" else zsh_script(parser)
    sys.stdout.write(script)
    return 0
