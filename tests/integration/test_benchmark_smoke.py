"""`bench/run.py --quick` runs end to end (the smoke run of the benchmark suite; figures are not asserted)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from .test_scifact_quality import IN_CI, SCIFACT

ROOT = Path(__file__).parents[2]


@pytest.mark.slow
def test_the_benchmark_runs_in_quick_mode(es_url: str, tmp_path: Path) -> None:
    if not SCIFACT.exists():
        (pytest.fail if IN_CI else pytest.skip)(f"SciFact not found at {SCIFACT}; set SCIFACT_DIR")
    scifact_dir = SCIFACT
    env = {**os.environ, "ES_URL": es_url, "HAYSTACK_TELEMETRY_ENABLED": "False"}
    done = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "run.py"), "--quick", "--beir", str(scifact_dir), "--out", str(tmp_path)],
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    result = json.loads((tmp_path / "benchmark-quick.json").read_text())
    assert {"ingest", "quality", "latency_1x", "client_overhead", "throughput_qps", "scale"} <= set(result)
    assert (tmp_path / "benchmark-quick.png").stat().st_size > 10_000
    print(done.stdout[-1500:])
