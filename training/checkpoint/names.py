"""The one rule for names that untrusted input (markers, peers, DCP metadata) joins to a snapshot directory."""

from __future__ import annotations


def check_file_name(name: object) -> str:
    """``name`` if it is one plain file name: no separators, no ``.``/``..``, no NUL; else ValueError.

    Markers, peers and DCP metadata name the files of a snapshot; a name is joined to a
    snapshot directory only after this check, so none of them can reach outside it.
    """
    if (not isinstance(name, str) or name in ("", ".", "..") or "/" in name or "\\" in name
            or "\x00" in name or len(name) > 255):
        raise ValueError(f"bad snapshot file name {name!r}: allowed are plain names without separators or '..'")
    return name
