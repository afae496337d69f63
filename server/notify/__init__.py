"""Telling people: incident notices (notices.py) delivered to Alertmanager-style webhooks and Slack
(webhooks.py)."""
