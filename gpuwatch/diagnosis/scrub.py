"""Masking secrets in log lines before they leave the cluster (the LLM analyser's prompt).

Training logs carry more secrets than one would think: a launcher echoing its environment
(`HF_TOKEN=…`, `WANDB_API_KEY=…`), a data loader printing an S3 URL with credentials, a failed
request with its `Authorization: Bearer …` header, a key file cat'ed by mistake. Each pattern below
keeps what tells the failure apart (the variable's name, the URL's host, the word `Bearer`) and
replaces only the secret with `***`, so the line still reads the same to the model.

The patterns are deliberately narrow where logs are noisy: `KeyError: 'x'` or `num_tokens=4096` must
reach the model unchanged, so a generic assignment is masked only for an UPPERCASE variable whose name
ends in KEY, TOKEN, SECRET, PASSWORD … (the way environments are written), or for one of a few
well-known lowercase names. The patterns are RE2 (linear time): log text is untrusted, and a 16 KiB
line built to make a backtracking engine crawl must not stall the diagnosis.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import re2

MASK = "***"

_BEGIN_KEY = re2.compile(r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY( BLOCK)?-----")
_END_KEY = re2.compile(r"-----END [A-Z0-9 ]*PRIVATE KEY( BLOCK)?-----")

# (pattern, replacement); the replacement keeps group 1 (what the secret is) where there is one.
_RULES: list[tuple[Any, str]] = [
    # Authorization headers and their like: "Bearer <token>", "Basic <base64>"
    (re2.compile(r"(?i)\b(bearer|basic)\s+[A-Za-z0-9._~+/=-]{8,}"), r"\1 " + MASK),
    # gpuwatch's own tokens (node gwn_, admin gwa_), wherever they stand
    (re2.compile(r"\bgw[na]_[A-Za-z0-9_-]{16,}"), "gw_" + MASK),
    # API keys with a recognisable shape: OpenAI/Anthropic sk-…, GitHub, Slack, Hugging Face
    (re2.compile(r"\bsk-[A-Za-z0-9_-]{16,}"), "sk-" + MASK),
    (re2.compile(r"\b(?:gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,})"), "gh_" + MASK),
    (re2.compile(r"\bxox[abposr]-[A-Za-z0-9-]{10,}"), "xox-" + MASK),
    (re2.compile(r"\bhf_[A-Za-z0-9]{20,}"), "hf_" + MASK),
    # AWS access key ids (long-term AKIA…, temporary ASIA…)
    (re2.compile(r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b"), "AKIA" + MASK),
    # user:password@ in a URL: the user and host stay, the password goes
    (re2.compile(r"\b([a-zA-Z][a-zA-Z0-9+.-]*://[^/\s:@]+):[^/\s@]+@"), r"\1:" + MASK + "@"),
    # environment assignments: FOO_API_KEY=…, export HF_TOKEN="…", DB_PASSWORD: …
    (
        re2.compile(
            r"\b([A-Z][A-Z0-9_]*(?:KEY|TOKEN|SECRET|PASSWORD|PASSWD|PASS|PWD|CREDENTIALS?)[\"']?\s*[=:]\s*)"
            r"(?:\"[^\"]*\"|'[^']*'|[^\s,;]+)"
        ),
        r"\1" + MASK,
    ),
    # well-known lowercase names in configs, JSON and URLs' query strings: password=…, "api_key": "…"
    (
        re2.compile(
            r"(?i)\b((?:password|passwd|secret|client_secret|api_?key|access_?key|secret_?key|private_?key"
            r"|auth_?token|access_?token|refresh_?token|session_?token|token)[\"']?\s*[=:]\s*)"
            r"(?:\"[^\"]*\"|'[^']*'|[^\s,;&\"']+)"
        ),
        r"\1" + MASK,
    ),
    # command-line flags: --password X, --api-key=X, --hf-token X
    (
        re2.compile(
            r"(?i)(--(?:[a-z0-9]+-)*(?:password|passwd|token|api-key|apikey|secret|access-key|secret-key)(?:=|\s+))"
            r"\S+"
        ),
        r"\1" + MASK,
    ),
]

# One search per line decides whether any rule applies: most lines have no secret and pay only this.
_ANY = re2.compile("(?i)" + "|".join(f"(?:{p.pattern.removeprefix('(?i)')})" for p, _ in _RULES))


def scrub_line(line: str) -> str:
    """``line`` with every secret the rules know replaced by ``***``."""
    if not _ANY.search(line):
        return line
    for pattern, replacement in _RULES:
        line = pattern.sub(replacement, line)
    return line


def scrub_lines(lines: Iterable[str]) -> list[str]:
    """Each line scrubbed; the lines inside a PEM private key block (its base64 body has no shape of
    its own) are replaced whole, the BEGIN and END lines kept so the model sees what was there."""
    out: list[str] = []
    in_key = False
    for line in lines:
        if in_key:
            end = _END_KEY.search(line)
            in_key = end is None
            out.append(MASK if end is None else line[: end.end()])
            continue
        begin = _BEGIN_KEY.search(line)
        if begin is not None:
            end = _END_KEY.search(line, begin.end())
            if end is None:  # the block goes on over the next lines
                in_key = True
                out.append(line[: begin.end()])
            else:  # a whole key on one line (a JSON string with \n, say)
                out.append(scrub_line(line[: begin.end()] + MASK + line[end.start() :]))
            continue
        out.append(scrub_line(line))
    return out
