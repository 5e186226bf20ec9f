"""What the hashed lock files promise, checked: `python -m scripts.lockcheck` (and unit tests).

Caldera is installed only from `requirements/*.lock` (`make install`, the image). A lock is
worth something only if it is complete and agrees with `pyproject.toml`, so this module checks,
as pure functions over the files' text:

- every pinned package carries at least one sha256 hash (pip's `--require-hashes` needs them
  all, and refuses the whole file otherwise; this says which line);
- every dependency `pyproject.toml` declares is pinned in the lock that installs it, at a
  version its specifier allows;
- the runtime lock (the image) and the dev lock (the tests) pin the same version of every package
  they share, so the image runs what CI tested;
- no pin, and no lower bound in `pyproject.toml`, is below the first fixed version of an
  advisory in `ADVISORIES` (docs/reliability.md, "Supply chain", lists them and how they were
  found).
"""

from __future__ import annotations

import re
import sys
import tomllib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from packaging.markers import Marker
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

ROOT: Final = Path(__file__).resolve().parent.parent
LOCK_DIR: Final = ROOT / "requirements"

# Locks are resolved for every Python (uv --universal); they are checked for the one the
# project is tested on and whose image it ships.
TARGET_ENV: Final = {"python_version": "3.11", "python_full_version": "3.11.0"}


@dataclass(frozen=True)
class Advisory:
    """A published vulnerability and the first release of the package that fixes it."""

    package: str
    fixed_in: str
    ids: str
    what: str


ADVISORIES: Final = (
    Advisory(
        "aiohttp",
        "3.13.3",
        "CVE-2025-69224 and the others of 3.13.3",
        "decompression bombs and other server-side denial of service in request reading",
    ),
    Advisory(
        "aiohttp",
        "3.13.4",
        "aiohttp#10596",
        "the server waited forever on a chunked body whose chunk size did not match its data",
    ),
    Advisory(
        "aiohttp",
        "3.14.4",
        "3.14.4's fixes",
        "the server trusted the scheme of an absolute-form request target; form fields uncapped",
    ),
    Advisory(
        "cryptography",
        "46.0.6",
        "CVE-2026-34073 (GHSA-m959-cc7f-wv43)",
        "fixed in 46.0.6; releases up to 44.0.0 also bundled vulnerable OpenSSL builds",
    ),
    Advisory(
        "urllib3",
        "2.8.0",
        "GHSA-8988-9cw3-xx77, GHSA-vxq7-64xx-v4gw, GHSA-gh4c-6fx4-qh6g",
        "unbounded chunk-size lines, a chunked deflate loop, proxy TLS settings ignored",
    ),
    Advisory("idna", "3.7", "CVE-2024-3651", "quadratic time on crafted input to idna.encode"),
    Advisory("certifi", "2024.7.4", "CVE-2024-39689", "GLOBALTRUST roots still trusted"),
    Advisory("pyyaml", "5.4", "CVE-2020-14343", "code execution through full_load"),
    Advisory("setuptools", "78.1.1", "CVE-2024-6345, CVE-2025-47273", "code injection, paths"),
    Advisory("pip", "25.3", "CVE-2025-8869", "an sdist's tar symlinks could write outside"),
)


@dataclass(frozen=True)
class Pin:
    """One package line of a lock: its version, the Pythons it applies to, its hashes."""

    name: str
    version: Version
    marker: Marker | None
    hashes: tuple[str, ...]
    line: int

    def applies(self) -> bool:
        return self.marker is None or self.marker.evaluate(dict(TARGET_ENV))


_HASH: Final = re.compile(r"--hash=sha256:([0-9a-f]{64})")


def parse_lock(text: str) -> list[Pin]:
    """The pins of a lock written by `uv pip compile --generate-hashes` (pure).

    A pin starts at the beginning of a line (``name==version ; marker \\``); its hashes follow
    on indented lines; ``#`` lines are uv's notes on who needs what.
    """
    entries: list[tuple[int, str, list[str]]] = []
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.rstrip().removesuffix("\\").rstrip()
        if not line or line.lstrip().startswith("#"):
            continue
        if not raw[0].isspace():
            entries.append((number, line, []))
        elif entries:
            entries[-1][2].extend(_HASH.findall(line))
    pins = []
    for number, spec, hashes in entries:
        requirement = Requirement(spec)
        versions = [s.version for s in requirement.specifier if s.operator == "=="]
        if len(versions) != 1:
            raise ValueError(f"line {number}: {spec!r} is not pinned with ==")
        pins.append(
            Pin(
                name=canonicalize_name(requirement.name),
                version=Version(versions[0]),
                marker=requirement.marker,
                hashes=tuple(hashes),
                line=number,
            )
        )
    return pins


def applicable(pins: Iterable[Pin]) -> dict[str, Pin]:
    """The pins that apply to the target Python, by package name."""
    return {pin.name: pin for pin in pins if pin.applies()}


def declared(pyproject: Mapping[str, object], extras: Iterable[str] = ()) -> list[Requirement]:
    """The requirements `pyproject.toml` declares: the runtime ones plus the given extras."""
    project = pyproject["project"]
    assert isinstance(project, dict)
    found = [Requirement(text) for text in project["dependencies"]]
    optional = project.get("optional-dependencies", {})
    for extra in extras:
        found.extend(Requirement(text) for text in optional[extra])
    return [r for r in found if r.marker is None or r.marker.evaluate(dict(TARGET_ENV))]


def unhashed(pins: Iterable[Pin]) -> list[str]:
    """Pins without a hash."""
    return [f"line {pin.line}: {pin.name} has no --hash" for pin in pins if not pin.hashes]


def unsatisfied(requirements: Iterable[Requirement], pins: Mapping[str, Pin]) -> list[str]:
    """Declared requirements the lock does not pin, or pins at a version they refuse."""
    problems = []
    for requirement in requirements:
        pin = pins.get(canonicalize_name(requirement.name))
        if pin is None:
            problems.append(f"{requirement} is declared but not pinned")
        elif not requirement.specifier.contains(pin.version, prereleases=True):
            problems.append(f"{requirement} is declared but {pin.name}=={pin.version} is pinned")
    return problems


def disagreements(first: Mapping[str, Pin], second: Mapping[str, Pin]) -> list[str]:
    """Packages two locks both pin, at different versions."""
    return [
        f"{name}: {first[name].version} against {second[name].version}"
        for name in sorted(first.keys() & second.keys())
        if first[name].version != second[name].version
    ]


def vulnerable(
    pins: Mapping[str, Pin],
    requirements: Iterable[Requirement],
    advisories: Iterable[Advisory] = ADVISORIES,
) -> list[str]:
    """Pins below an advisory's fix, and declared lower bounds that would still admit it."""
    problems = []
    declared_by_name = {canonicalize_name(r.name): r for r in requirements}
    for advisory in advisories:
        name = canonicalize_name(advisory.package)
        fixed = Version(advisory.fixed_in)
        pin = pins.get(name)
        if pin is not None and pin.version < fixed:
            problems.append(f"{name}=={pin.version} is pinned; {advisory.ids} is fixed in {fixed}")
        requirement = declared_by_name.get(name)
        if requirement is not None and not _floor_at_least(requirement, fixed):
            problems.append(f"{requirement} admits versions before {fixed} ({advisory.ids})")
    return problems


def _floor_at_least(requirement: Requirement, fixed: Version) -> bool:
    floors = [
        Version(s.version) for s in requirement.specifier if s.operator in (">=", "==", "~=", ">")
    ]
    return any(floor >= fixed for floor in floors)


def check(root: Path = ROOT) -> list[str]:
    """Every problem of the project's locks, as lines to print (empty when all hold)."""
    pyproject = tomllib.loads((root / "pyproject.toml").read_text())
    build_in = [
        Requirement(line.split("#", 1)[0].strip())
        for line in (root / "requirements/build.in").read_text().splitlines()
        if line.split("#", 1)[0].strip()
    ]
    problems: list[str] = []
    locks: dict[str, dict[str, Pin]] = {}
    wanted = {
        "build": build_in,
        "runtime": [*declared(pyproject), *build_in],
        "dev": [*declared(pyproject, ["dev"]), *build_in],
    }
    for name, requirements in wanted.items():
        pins = parse_lock((root / f"requirements/{name}.lock").read_text())
        locks[name] = applicable(pins)
        problems += [f"{name}.lock {p}" for p in unhashed(pins)]
        problems += [f"{name}.lock: {p}" for p in unsatisfied(requirements, locks[name])]
        problems += [f"{name}.lock: {p}" for p in vulnerable(locks[name], requirements)]
    problems += [
        f"runtime and dev differ: {p}" for p in disagreements(locks["runtime"], locks["dev"])
    ]
    problems += [f"build, dev: {p}" for p in disagreements(locks["build"], locks["dev"])]
    return problems


def main() -> int:
    problems = check()
    for problem in problems:
        print(problem)
    print("locks: ok" if not problems else f"locks: {len(problems)} problem(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
