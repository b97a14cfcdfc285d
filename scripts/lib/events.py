"""A run directory's events.jsonl for the benchmark scripts: each record with a start
lateness (events that waited for a dependency have none), parsed; a line that is not JSON
stops the script with its file and line."""
import json
import sys


def started(run):
    """Yields every record of RUN/events.jsonl that has a `start_lateness`."""
    path = f"{run}/events.jsonl"
    with open(path) as f:
        for i, line in enumerate(f, 1):
            try:
                r = json.loads(line)
            except ValueError as err:
                sys.exit(f"{path}:{i}: {err}")
            if r.get("start_lateness") is not None:
                yield r
