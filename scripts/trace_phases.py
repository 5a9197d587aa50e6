#!/usr/bin/python3
"""The phase track of a tpusim trace (--trace FILE, docs/profiling.md) as text: per chip, its phase
slices in time order with start and length in microseconds, their track ("phase", "phase 2", ...)
and the commands each covers, so that a step's story can be read without Perfetto.

    scripts/trace_phases.py TRACE.json [--chip N] [--limit K]
"""
import argparse
import json
import sys


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("trace", help="a trace written by tpusim --trace")
    ap.add_argument("--chip", type=int, default=None, help="only this chip (default: every chip)")
    ap.add_argument("--limit", type=int, default=0, help="at most this many slices per chip")
    a = ap.parse_args()
    try:
        with open(a.trace, encoding="utf-8") as f:
            doc = json.load(f)
    except (OSError, ValueError) as e:
        print(f"trace_phases: {a.trace}: {e}", file=sys.stderr)
        return 2
    events = doc.get("traceEvents") if isinstance(doc, dict) else None
    if not isinstance(events, list):
        print(f"trace_phases: {a.trace}: no traceEvents list", file=sys.stderr)
        return 2
    process, thread, phases = {}, {}, {}
    for e in events:
        if e.get("ph") == "M" and e.get("name") == "process_name":
            process[e["pid"]] = e["args"]["name"]
        elif e.get("ph") == "M" and e.get("name") == "thread_name":
            thread[(e["pid"], e["tid"])] = e["args"]["name"]
        elif e.get("ph") == "X" and e.get("cat") == "phase":
            phases.setdefault(e["pid"], []).append(e)
    for pid in sorted(process):
        if a.chip is not None and pid != a.chip:
            continue
        rows = sorted(phases.get(pid, []), key=lambda e: (e["ts"], -e["dur"]))
        tracks = sorted({thread.get((pid, e["tid"]), "?") for e in rows})
        print(f"{process[pid]}: {len(rows)} phase slices on {', '.join(tracks) or 'no track'}")
        for e in rows[: a.limit or None]:
            track = thread.get((pid, e["tid"]), "?")
            args = e.get("args", {})
            print(f"  {e['ts']:10.3f} us  {e['dur']:9.3f} us  {track:8s}  {e['name']}"
                  f"  ({args.get('commands', '?')} commands)")
        if a.limit and len(rows) > a.limit:
            print(f"  ... {len(rows) - a.limit} more")
    return 0


if __name__ == "__main__":
    sys.exit(main())
