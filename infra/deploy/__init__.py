"""Deploy tools: what a change will do (`openpod plan` and its rules), the upgrade order, and the read-only
account checks before a deploy (preflight, Capacity Block offerings).
"""
