"""The process tree below a process, from ``/proc``: what a test started and whether it is still alive."""

from __future__ import annotations

from pathlib import Path


def descendants(root: int) -> dict[int, tuple[int, str]]:
    """The live processes below ``root``: pid -> (parent pid, command line), from /proc."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                # The command name in field 2 may hold spaces: the parent pid is the second field after it.
                parents[int(entry.name)] = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError):
                continue
    found, frontier = {}, [root]
    while frontier:
        children = [pid for pid, parent in parents.items() if parent in frontier]
        for pid in children:
            try:
                found[pid] = (parents[pid], (Path("/proc") / str(pid) / "cmdline").read_text().replace("\0", " "))
            except OSError:
                continue
        frontier = children
    return found


def alive(pid: int) -> bool:
    """Whether ``pid`` is a live process (a zombie, exited but not yet reaped, is not)."""
    try:
        return (Path("/proc") / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False
