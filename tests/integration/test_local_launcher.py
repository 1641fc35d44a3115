"""The local launcher never leaves a JVM behind: not on Ctrl-C, not when its parent is killed."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from storage.local_es import LocalElasticsearch, default_cache_dir, default_version, find_java_home

pytestmark = pytest.mark.slow


def _processes_mentioning(marker: str) -> list[int]:
    pids = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cmdline = (proc / "cmdline").read_bytes()
        except OSError:
            continue
        if marker.encode() in cmdline:
            pids.append(int(proc.name))
    return pids


def _wait_gone(marker: str, timeout_s: float) -> list[int]:
    deadline = time.monotonic() + timeout_s
    while (alive := _processes_mentioning(marker)) and time.monotonic() < deadline:
        time.sleep(0.2)
    return alive


def _start_cli(name: str) -> tuple[subprocess.Popen[str], str]:
    version = default_version()
    proc = subprocess.Popen(
        [sys.executable, "-m", "storage.local_es", "run", "--name", name, "--ephemeral", "--version", version],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        # SIGINT ignored, as a shell's background job (or a pytest-xdist worker's child) starts: the launcher
        # must install its own handler before it says Ctrl-C stops it.
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN),
    )
    assert proc.stdout is not None
    deadline = time.monotonic() + 180
    for line in proc.stdout:
        if "is running at" in line:
            return proc, line
        if time.monotonic() > deadline:
            break
    proc.kill()
    proc.communicate()
    pytest.fail("the launcher did not report a running Elasticsearch")


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGKILL], ids=["ctrl-c", "parent-killed"])
def test_no_jvm_survives_an_interrupted_or_killed_launcher(sig: signal.Signals) -> None:
    name = f"orphan-check-{uuid.uuid4().hex[:8]}"
    marker = f"local-{name}"  # node.name=local-<name> is on the JVM's command line
    proc, line = _start_cli(name)
    jvms = _processes_mentioning(marker)
    assert jvms, f"no JVM found for {line!r}"
    proc.send_signal(sig)
    try:
        proc.communicate(timeout=180)  # waits and closes the pipe (a hang guard: a JVM's stop on busy cores is slow)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
    survivors = _wait_gone(marker, timeout_s=30)
    for pid in survivors:  # clean up before failing, by PID
        os.kill(pid, signal.SIGKILL)
    assert survivors == [], f"JVM(s) left running after {sig.name}: {survivors}"
    if sig == signal.SIGINT:
        assert not (default_cache_dir() / "instances").joinpath(f"{default_version()}-{name}").exists()


def test_stop_terminates_the_whole_process_group() -> None:
    node = LocalElasticsearch(name=f"stop-check-{uuid.uuid4().hex[:8]}", ephemeral=True)
    url = node.start()
    assert url.startswith("http://127.0.0.1:")
    pid = node.pid
    assert pid is not None
    node.stop()
    with pytest.raises(ProcessLookupError):
        os.killpg(pid, 0)
    assert not node.instance_dir.exists()


def test_jdk_is_chosen_to_fit_the_version() -> None:
    for version, major in (("8.19.21", 17), ("9.3.8", 21)):
        home = find_java_home(version)
        release = (home / "release").read_text()
        found = int(release.split('JAVA_VERSION="')[1].split(".")[0].split('"')[0])
        assert found >= major, (version, home)


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "storage.local_es", *args], capture_output=True, text=True, timeout=240, check=False
    )


def test_start_stop_and_status_agree_on_a_name_and_a_restart_keeps_its_url() -> None:
    name = f"life-{uuid.uuid4().hex[:6]}"
    try:
        started = _cli("start", "--name", name)
        assert started.returncode == 0, started.stdout + started.stderr
        url = started.stdout.split("export ES_URL=", 1)[1].split()[0]
        assert f"stop with: python -m storage.local_es stop --name {name}" in started.stdout
        status = _cli("status")
        assert name in status.stdout
        assert f"export ES_URL={url}" in status.stdout
        unnamed = _cli("stop")  # the default name: not this one, and it says how to stop this one
        assert f"stop --name {name}" in unnamed.stdout
        stopped = _cli("stop", "--name", name)
        assert f"stopped {name}" in stopped.stdout
        assert name not in _cli("status").stdout
        again = _cli("start", "--name", name)
        assert again.returncode == 0, again.stdout + again.stderr
        assert f"export ES_URL={url}" in again.stdout  # the same port: an exported ES_URL stays good
    finally:
        _cli("stop", "--name", name)
        for directory in (default_cache_dir() / "instances").glob(f"*-{name}"):
            shutil.rmtree(directory, ignore_errors=True)
