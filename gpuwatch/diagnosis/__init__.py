"""Failure diagnosis: pure functions over log lines, kernel-log lines and exit statuses.

The CLI (`gpuwatch diagnose`), the supervisor and the server call the same code, so the same log
gets the same answer everywhere. Layers: normalise → rules (data, with a prefilter) → root cause
across ranks → optionally the LLM analyser when the rules are not confident.
"""
