"""Rules as data: loading them (the shipped `rules.toml` plus a user directory) and matching lines,
behind a one-regex prefilter so the common line, which matches nothing, costs one C-level search."""

from __future__ import annotations

import re
import tomllib
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache, cached_property
from importlib import resources
from pathlib import Path

import re2

from gpuwatch.diagnosis.bytescan import PREFILTER_MAX_MEM, ByteScanner, compile_prefilter
from gpuwatch.taxonomy import REASONS

ROLES = ("root", "cascade", "ignore")
#: What a matched line says about how the run ended, weakest first: a warning the run may go on from,
#: an error, a fatal error (a traceback's final exception), the exit itself (a launcher's or the
#: scheduler's account of how a process ended: "exitcode: -9", "CANCELLED ... DUE TO TIME LIMIT").
SEVERITIES = ("warning", "error", "fatal", "exit")


@cache
def _pattern(source: str) -> re.Pattern[str]:
    return re.compile(source)


@dataclass(frozen=True, slots=True)
class Rule:
    id: str
    reason: str
    role: str
    keywords: tuple[str, ...]
    sources: tuple[str, ...]  # the patterns as written, compiled at a rule's first keyword hit (`patterns`)
    confidence: float
    priority: int
    examples: tuple[str, ...] = ()
    severity: str = "error"

    @property
    def patterns(self) -> tuple[re.Pattern[str], ...]:
        """The compiled patterns. Compiled when first asked for: a log meets a handful of the rules'
        keywords, and compiling all 700 patterns was most of `gpuwatch diagnose`'s start-up."""
        return tuple(_pattern(p) for p in self.sources)

    def matches(self, line: str, lower: str) -> bool:
        return self.match_at(line, lower) is not None

    def match_at(self, line: str, lower: str) -> int | None:
        """Where in ``line`` the rule's earliest pattern match starts, or None when it does not match."""
        if not any(k in lower for k in self.keywords):
            return None
        starts = [m.start() for p in self.patterns if (m := p.search(line)) is not None]
        return min(starts) if starts else None


def _parse(raw: dict, origin: str, check: bool = True) -> Rule:
    """A rule from its TOML table; ``check``: compile its patterns now (a user's rules; the shipped ones are
    compiled by their tests, and here only when a log first meets their keywords)."""
    try:
        rule = Rule(
            id=raw["id"],
            reason=raw["reason"],
            role=raw.get("role", "root"),
            keywords=tuple(k.lower() for k in raw["keywords"]),
            sources=tuple(raw["patterns"]),
            confidence=float(raw["confidence"]),
            priority=int(raw["priority"]),
            examples=tuple(raw.get("examples", ())),
            severity=raw.get("severity", "error"),
        )
        if check:  # a pattern that does not compile is refused now, naming its file
            rule.patterns  # noqa: B018
    except (KeyError, TypeError, ValueError, re.error) as exc:
        raise ValueError(f"{origin}: rule {raw.get('id', '?')!r} is invalid: {exc}") from None
    if rule.reason not in REASONS:
        raise ValueError(f"{origin}: rule {rule.id!r} names {rule.reason!r}, which is not in the failure taxonomy")
    if rule.role not in ROLES or not 0 <= rule.confidence <= 1 or not rule.keywords:
        raise ValueError(f"{origin}: rule {rule.id!r}: role must be one of {ROLES}, confidence 0..1, keywords given")
    if rule.severity not in SEVERITIES:
        raise ValueError(f"{origin}: rule {rule.id!r}: severity must be one of {SEVERITIES}")
    return rule


_PACKAGE_NAME = re.compile(r"[a-z_][a-z0-9_*]*")
# A relative frame path's first directory (`megatron/training.py`, not `./train.py` or `train.py`).
_RELATIVE_PACKAGE = re.compile(r"([A-Za-z_]\w*)[\\/]")
_INSTALLED_PACKAGE = re.compile(r"(?:site|dist)-packages[\\/]([A-Za-z_]\w*)")
# A framework's own repository checked out and run from there: the package's directory right inside a
# directory of the same name, perhaps with a branch suffix or a src/ between ("/root/flair/flair/",
# "deepke-main/src/deepke/", "PaddleRS-develop/paddlers/"), the repository's dashes for the package's
# underscores ("/content/Torch-Pruning/torch_pruning/", case 2108). A project that vendors a framework under
# another name ("/data/bevfusion/mmdet3d/", case 816) is not one.
_PATH_SEP = re.compile(r"[\\/]")
_IDENTIFIER = re.compile(r"[A-Za-z_]\w*")
_BRANCH_SUFFIX = re.compile(r"(?i)[-_.](?:main|master|develop|dev|v?\d[\w.]*)$")


def _checkout_packages(frame: str) -> list[str]:
    """The package directories in ``frame`` that sit right inside (or under src/ or python/ of) a directory
    named for them: a framework's repository run from its checkout. The repository's name may carry its
    organisation's prefix ("lightning-thunder/thunder/")."""
    parts = _PATH_SEP.split(frame)[:-1]  # the directories; the last part is the file
    found = []
    for k in range(2, len(parts)):
        package = parts[k]
        if not _IDENTIFIER.fullmatch(package):
            continue
        outer = parts[k - 2] if parts[k - 1].lower() in ("src", "python") and k >= 3 else parts[k - 1]
        base = _BRANCH_SUFFIX.sub("", outer)
        names = {outer, base, base.rsplit("-", 1)[-1]}
        if package.lower().replace("_", "") in {n.lower().replace("-", "").replace("_", "") for n in names}:
            found.append(package)
    return found


def _names(patterns: Sequence[str]) -> re.Pattern[str]:
    return re.compile("|".join(p.replace("*", r"\w*") for p in patterns) or "(?!)")


class Frameworks:
    """Whose code a traceback's frame is: a framework's (its exceptions are `framework_error`) or the run's
    (`script_error`). Data, as the rules are: `[frameworks]` in rules.toml, extended by a user directory's
    files (a site's own training framework, installed or run from a checkout, named once there).

    ``paths`` are regular expressions searched in a frame's path (an installed package's directory, a
    framework's checkout); ``packages`` are the installed packages, by name (``*`` for any letters),
    that are frameworks rather than an application installed as a package, whose code bugs are the run's;
    ``libraries`` are general-purpose libraries (numpy, scipy), whose argument errors are their caller's.
    """

    def __init__(self, packages: Sequence[str], paths: Sequence[str], libraries: Sequence[str] = ()) -> None:
        self.packages = tuple(dict.fromkeys(packages))
        self.libraries = tuple(dict.fromkeys(libraries))
        self.paths = tuple(dict.fromkeys(paths))
        self._package = _names(self.packages)
        self._library = _names(self.libraries)
        self._path = re.compile("|".join(f"(?:{p})" for p in self.paths) or "(?!)")

    def package(self, name: str) -> bool:
        """Whether the installed package ``name`` is a framework."""
        return self._package.fullmatch(name.lower()) is not None

    def library(self, name: str) -> bool:
        """Whether the package ``name`` is a general-purpose library (numpy, scipy): its refusal of the
        arguments the run's own code called it with is the run's."""
        return self._library.fullmatch(name.lower()) is not None

    def path(self, frame: str) -> bool:
        """Whether a frame's path is inside a framework (or any installed package). A relative path is
        a framework's when its first directory is a framework package's name: Python names a module
        imported from the working directory that way, and a framework run from its own checkout
        (`File "mmselfsup/models/backbones/simmim_swin.py"`, case 1457) is still that framework."""
        if self._path.search(frame) is not None:
            return True
        if (m := _RELATIVE_PACKAGE.match(frame)) is not None and self.package(m.group(1)):
            return True
        return any(self.package(package) for package in _checkout_packages(frame))

    @staticmethod
    def installed_package(frame: str) -> str | None:
        """The package of a frame in site- or dist-packages (either slash), or None for any other path."""
        return m.group(1) if (m := _INSTALLED_PACKAGE.search(frame)) is not None else None

    @staticmethod
    def package_of(frame: str) -> str | None:
        """The package a frame's path names: an installed one's, or a relative path's first directory."""
        if (package := Frameworks.installed_package(frame)) is not None:
            return package
        return m.group(1) if (m := _RELATIVE_PACKAGE.match(frame)) is not None else None


_FRAMEWORK_LISTS = ("packages", "libraries", "paths")


def _frameworks_of(raw: object, origin: str) -> dict[str, list[str]]:
    if not isinstance(raw, dict) or set(raw) - set(_FRAMEWORK_LISTS):
        raise ValueError(f"{origin}: [frameworks] holds only the lists {', '.join(_FRAMEWORK_LISTS)}")
    lists = {key: list(raw.get(key, [])) for key in _FRAMEWORK_LISTS}
    for key, one in (("packages", "package"), ("libraries", "library")):
        for name in lists[key]:
            if not isinstance(name, str) or not _PACKAGE_NAME.fullmatch(name):
                raise ValueError(f"{origin}: [frameworks] {one} {name!r} is not a lower-case package name (* allowed)")
    for path in lists["paths"]:
        try:
            re.compile(path)
        except (TypeError, re.error) as exc:
            raise ValueError(f"{origin}: [frameworks] path {path!r} is not a regular expression: {exc}") from None
    return lists


@cache
def _shipped() -> dict:
    """The shipped rules.toml, parsed once (a tenth of `gpuwatch diagnose`'s start-up each time)."""
    return tomllib.loads(resources.files("gpuwatch.diagnosis").joinpath("rules.toml").read_text())


def load_frameworks(user_dir: Path | None = None) -> Frameworks:
    """The shipped `[frameworks]`, extended by each user file's."""
    lists = _frameworks_of(_shipped()["frameworks"], "rules.toml")
    if user_dir is not None:
        for path in sorted(Path(user_dir).glob("*.toml")):
            raw = tomllib.loads(path.read_text()).get("frameworks")
            if raw is not None:
                for key, more in _frameworks_of(raw, str(path)).items():
                    lists[key] += more
    return Frameworks(**lists)


def load_rules(user_dir: Path | None = None) -> list[Rule]:
    """The shipped rules, then the user's (`*.toml` in ``user_dir``); a user rule replaces a shipped
    rule of the same id."""
    shipped = [_parse(raw, "rules.toml", check=False) for raw in _shipped()["rules"]]
    rules = {r.id: r for r in shipped}
    if len(rules) != len(shipped):  # the later of two shipped rules of one id would silently replace the earlier
        twice = sorted(i for i, n in Counter(r.id for r in shipped).items() if n > 1)
        raise ValueError(f"rules.toml: rule id used twice: {', '.join(twice)}")
    if user_dir is not None:
        for path in sorted(Path(user_dir).glob("*.toml")):
            for raw in tomllib.loads(path.read_text()).get("rules", []):
                rule = _parse(raw, str(path))
                rules[rule.id] = rule
    return list(rules.values())


class RuleSet:
    """Matches lines against rules, behind a prefilter: one case-insensitive alternation of every
    rule's keywords, run once over the whole log as bytes (Hyperscan's SIMD literal matching, each line
    it flags confirmed by RE2, or RE2's DFA alone: bytescan.py), so a line that contains no keyword
    costs nothing in Python. Python's `re` ran the same alternation at 3,000 lines/s, an Aho-Corasick
    automaton (pyahocorasick) at 250,000."""

    def __init__(
        self, rules: list[Rule], extra_keywords: tuple[str, ...] = (), frameworks: Frameworks | None = None
    ) -> None:
        self.rules = rules
        self.frameworks = frameworks if frameworks is not None else load_frameworks()
        keywords = sorted({k for r in rules for k in r.keywords} | set(extra_keywords), key=lambda k: (-len(k), k))
        alternation = "(?i)" + "|".join(re.escape(k) for k in keywords)
        self.keywords = tuple(keywords)
        self.alternation = alternation  # the prefilter's pattern, for a scan of a file's bytes (stream.py)
        self._line_search = compile_prefilter(alternation).search
        owners: dict[str, list[int]] = {}
        for n, rule in enumerate(rules):
            for k in rule.keywords:
                owners.setdefault(k, []).append(n)
        self._owners = tuple((k, tuple(ns)) for k, ns in owners.items())  # each keyword, the rules it opens

    @cached_property
    def byte_scanner(self) -> ByteScanner:
        """The prefilter over bytes: what `candidate_lines` and a streamed file run."""
        return ByteScanner(self.alternation, self.keywords)

    @cached_property
    def _keyword_set(self) -> re2.Set:
        """Every keyword as one pattern of an RE2 set, which names all of them a line holds, overlapping
        ones included (an alternation finds one of two that overlap)."""
        options = re2.Options()
        options.case_sensitive = False
        options.max_mem = PREFILTER_MAX_MEM
        keywords = re2.Set.SearchSet(options)
        for k, _ in self._owners:
            keywords.Add(re2.escape(k))
        keywords.Compile()
        return keywords

    def prefilter(self, line: str) -> bool:
        """Whether any rule could match ``line``."""
        return self._line_search(line) is not None

    def candidate_lines(self, lines: Sequence[str]) -> list[int]:
        """Indices of the lines that pass the prefilter (the RE2 bytes pattern's matches), found in one
        pass over the joined log."""
        data = "\n".join(lines).encode("utf-8", errors="surrogatepass")
        scanner = self.byte_scanner
        hits, _ = scanner.hits(data, len(data))
        found: list[int] = []
        line, counted_to, checked = 0, 0, -1
        for at in hits:
            line += data.count(b"\n", counted_to, at)
            counted_to = at
            if line == checked:
                continue
            checked = line
            if scanner.needs_confirming:
                start, end = data.rfind(b"\n", 0, at) + 1, data.find(b"\n", at)
                if scanner.exact.search(data, start, len(data) if end < 0 else end) is None:
                    continue
            found.append(line)
        return found

    def match(self, line: str) -> list[Rule]:
        return [rule for rule, _ in self.match_at(line)]

    def match_at(self, line: str) -> list[tuple[Rule, int]]:
        """The rules that match ``line``, each with where its match starts, in the rules' order. Only the
        rules one of whose keywords the line holds are tried: each keyword is looked for once, not once for
        every rule that has it (`rules suggest` over the corpus spent 80 % of its time asking each of 900
        rules in turn)."""
        # On ASCII, where RE2's case folding and str.lower agree, the set names the keywords in one pass; it finds
        # none where the prefilter finds one only if its DFA ran out of memory, and then the loop below decides.
        found = None
        if line.isascii() and not (found := self._keyword_set.Match(line)) and not self.prefilter(line):
            return []
        lower = line.lower()
        tried: set[int] = set()
        owners = self._owners
        if found:
            for k in found:
                tried.update(owners[k][1])
        else:
            for k, ns in owners:
                if k in lower:
                    tried.update(ns)
        rules = self.rules
        return [(r, at) for n in sorted(tried) if (at := (r := rules[n]).match_at(line, lower)) is not None]
