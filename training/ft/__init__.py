"""Fault tolerance helpers (issue 13): step heartbeats and hang detection."""
