"""What exporter/model/storage.py's packed gauges save: a fleet's chain readings' plain gauges
kept packed (one ``bytes`` of float64s a reading) against a plain tuple of floats, each
reading's values parsed afresh as a reader makes them (new float objects), measured with
tracemalloc. Run on demand (a second or two):

    .venv/bin/python benchmarks/bench_storage.py               # 3000 nodes x 3 chains
    .venv/bin/python benchmarks/bench_storage.py --nodes 1000
"""

from __future__ import annotations

import argparse
import random
import tracemalloc
from collections.abc import Callable

from exporter.model.fields import CHAIN_GAUGES, pack_gauges


def measure(texts: list[list[str]], keep: Callable[[list[float]], object]) -> int:
    """Bytes held by every reading's gauges kept with ``keep``."""
    tracemalloc.start()
    kept = [keep([float(text) for text in row]) for row in texts]
    size, _ = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    del kept
    return size


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=3000, help="fleet size (3000)")
    parser.add_argument("--chains", type=int, default=3, help="chains a node (3)")
    args = parser.parse_args()
    readings = args.nodes * args.chains
    chance = random.Random(1)
    texts = [[str(chance.randrange(10**7)) for _ in CHAIN_GAUGES] for _ in range(readings)]
    packed, plain = measure(texts, pack_gauges), measure(texts, tuple)
    print(f"{readings} chain readings of {len(CHAIN_GAUGES)} gauges (one cycle's snapshot):")
    for name, size in (("packed (storage.GaugeStore)", packed), ("tuple of floats", plain)):
        print(f"  {name:28} {size / readings:6.0f} B a reading  {size / 2**20:6.2f} MiB")
    print(f"  saved: {(plain - packed) / 2**20:.2f} MiB a snapshot (two are held at a time)")


if __name__ == "__main__":
    main()
