"""Ray's own floor: the memory of an empty Ray worker, started as `research batch` starts its workers.

An async actor of one CPU that imports nothing of this project, on a local Ray in a network namespace
of loopback alone (``coordinator.batch.loopback``), reports its memory as a batch worker reports its
own as it closes (``coordinator.batch.memory``). What a batch worker holds beyond it is this
project's: ``benchmarks/batch.py`` prints both. Run as root or where user namespaces are allowed:

    unshare --net -- .venv/bin/python benchmarks/ray_floor.py    (prints one JSON line, in bytes)
"""

from __future__ import annotations

import json
import logging
import sys
from dataclasses import asdict
from pathlib import Path

import ray

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from coordinator.batch.loopback import up  # noqa: E402
from coordinator.batch.memory import Memory  # noqa: E402


@ray.remote(num_cpus=1)
class EmptyWorker:
    async def memory(self) -> Memory:
        return Memory.of_this_process()


def main() -> int:
    up()
    ray.init(num_cpus=1, include_dashboard=False, log_to_driver=False, logging_level=logging.ERROR)
    try:
        worker = EmptyWorker.remote()  # type: ignore[attr-defined]  # an actor class
        memory: Memory = ray.get(worker.memory.remote(), timeout=120)
    finally:
        ray.shutdown()
    print(json.dumps(asdict(memory)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
