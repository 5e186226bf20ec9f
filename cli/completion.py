"""``caldera completion bash|zsh``: a shell completion script for every command and flag (the
command line of ``completion`` itself is in `cli.commands`).

The script is generated from the argparse parser itself (`completion_tree` walks it), so a new
subcommand or flag completes without touching this file. It completes subcommands, flags, the
values of flags with a fixed set of choices (``-o json|yaml|wide``, ``queue create -S``), and
object names: where an argument names a job, queue, cronjob or namespace (`cli.commands` marks
it), the script runs ``caldera completion names RESOURCE`` with the ``-n`` and connection flags
already typed, which prints the names it can list (nothing, silently, when it cannot). zsh uses
the same script through ``bashcompinit``.

Install: ``source <(caldera completion bash)``, or for zsh ``source <(caldera completion zsh)``.
"""

from __future__ import annotations

import argparse
import shlex
import sys
from dataclasses import dataclass, field

from cli.commands import COMPLETES

__all__ = ["CompletionNode", "bash_script", "completion_tree", "print_script", "zsh_script"]


@dataclass
class CompletionNode:
    """What completes after one command path: its subcommands, flags, flag choices, and the
    resource whose names complete a flag's value (``-N`` -> jobs) or the NAME positional
    (key ``NAME``)."""

    commands: list[str] = field(default_factory=list)
    options: list[str] = field(default_factory=list)
    choices: dict[str, list[str]] = field(default_factory=dict)
    names: dict[str, str] = field(default_factory=dict)


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
            resource: str = getattr(action, COMPLETES, "")
            if not action.option_strings:
                # a positional with fixed values (``completion bash|zsh``) completes like a command
                node.commands.extend(str(c) for c in action.choices or ())
                if resource:
                    node.names["NAME"] = resource
                continue
            node.options.extend(action.option_strings)
            for opt in action.option_strings if resource else ():
                node.names[opt] = resource
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
    cmd_cases, opt_cases, choice_cases, name_cases = [], [], [], []
    for path, node in sorted(tree.items()):
        key = shlex.quote(path)
        cmd_cases.append(f"        {key}) echo {shlex.quote(' '.join(node.commands))} ;;")
        opt_cases.append(f"        {key}) echo {shlex.quote(' '.join(node.options))} ;;")
        for opt, values in sorted(node.choices.items()):
            choice_cases.append(
                f"        {shlex.quote(path + '|' + opt)}) echo {shlex.quote(' '.join(values))} ;;"
            )
        for opt, resource in sorted(node.names.items()):
            name_cases.append(f"        {shlex.quote(path + '|' + opt)}) echo {resource} ;;")
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
{fn}_names() {{
    case "$1" in
{chr(10).join(name_cases)}
    esac
}}
{fn}() {{
    local cur="${{COMP_WORDS[COMP_CWORD]}}"
    local prev="${{COMP_WORDS[COMP_CWORD-1]}}"
    local path="" word i
    local -a flags=()
    for ((i = 1; i < COMP_CWORD; i++)); do
        word="${{COMP_WORDS[i]}}"
        case " $({fn}_commands "$path") " in
            *" $word "*) path="${{path:+$path }}$word" ;;
        esac
        # the flags already typed that say where to list names (not the word being completed)
        if ((i + 1 < COMP_CWORD)); then
            case "$word" in
                -n|--namespace|-k|--kubeconfig|--context|-s|--master)
                    flags+=("$word" "${{COMP_WORDS[i+1]}}") ;;
            esac
        fi
    done
    local values resource
    values="$({fn}_choices "$path|$prev")"
    if [[ -n "$values" ]]; then
        COMPREPLY=($(compgen -W "$values" -- "$cur"))
        return 0
    fi
    resource="$({fn}_names "$path|$prev")"
    if [[ -z "$resource" && "$cur" != -* && "$prev" != -* ]]; then
        resource="$({fn}_names "$path|NAME")"
    fi
    if [[ -n "$resource" ]]; then
        values="$({prog} completion names "$resource" "${{flags[@]}}" 2>/dev/null)"
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


def print_script(args: argparse.Namespace) -> int:
    # Imported here: cli.main imports this module.
    from cli.main import build_parser

    parser = build_parser()
    shell: str = args.completion_command
    script = bash_script(parser) if shell == "bash" else zsh_script(parser)
    sys.stdout.write(script)
    return 0
