"""The local model catalogue: every model loads verified and embeds sensibly; a Maven model is fetched once
(from Maven Central, or a mirror), verified before use, cached, and then needs no network; every way it can
go wrong is a typed error that says what to do."""

from __future__ import annotations

import asyncio
import math
import os
import shutil
import ssl
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from embeddings import (
    LOCAL_MODELS,
    EmbeddingSettings,
    LocalEmbedder,
    MavenArtifact,
    ModelIntegrityError,
    ModelUnavailable,
    ProviderConfigError,
    create_embedder,
    find_model,
    locate_model,
)
from embeddings._local import token_batches

from .._maven_mirror import MODEL, MavenMirror, https_maven_mirror, maven_jar, maven_mirror, model_folder

__all__ = ["https_maven_mirror", "maven_jar", "maven_mirror"]  # fixtures

IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")


def _cos(a: list[float], b: list[float]) -> float:
    return sum(x * y for x, y in zip(a, b, strict=True))


# -- the catalogue -------------------------------------------------------------------------------------


def test_every_entry_pins_its_files_and_says_how_to_run_it() -> None:
    ids = [m.model_id for m in LOCAL_MODELS.values()]
    assert len(set(ids)) == len(ids)  # vectors of two entries never share an index
    for model in LOCAL_MODELS.values():
        for pinned in (model.model_file, model.tokenizer_file):
            assert len(pinned.sha256) == 64
            assert pinned.size > 0
        if isinstance(model.source, MavenArtifact):
            assert len(model.source.sha256) == 64
            assert model.source.path.endswith(f"/{model.source.version}/{model.source.filename}")
        assert model.pooling in ("cls", "mean")
        assert model.dimensions == 384
        assert model.max_tokens in (256, 512)


def test_models_are_found_by_name_alias_or_id_and_an_unknown_one_lists_the_catalogue() -> None:
    assert find_model("bge-small").name == "bge-small-en-v1.5"
    assert find_model("E5-SMALL-V2").name == "e5-small-v2"
    assert find_model("all-MiniLM-L6-v2-onnx-int8").name == "all-MiniLM-L6-v2"
    with pytest.raises(ProviderConfigError, match=r"bge-small-en-v1\.5"):
        find_model("gte-large")


def test_embeddings_model_picks_the_catalogue_entry(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EMBEDDINGS_MODEL", "e5-small-v2")
    embedder = create_embedder(EmbeddingSettings())
    assert embedder.model_id == "e5-small-v2-onnx-int8"


@given(st.lists(st.integers(min_value=1, max_value=600), max_size=80), st.integers(1, 2048), st.integers(1, 40))
def test_token_batches_hold_every_text_once_within_the_budget(lengths: list[int], budget: int, size: int) -> None:
    batches = token_batches(lengths, budget=budget, max_size=size)
    assert sorted(i for batch in batches for i in batch) == list(range(len(lengths)))
    for batch in batches:
        assert 1 <= len(batch) <= size
        assert len(batch) == 1 or len(batch) * max(lengths[i] for i in batch) <= budget


# -- every model, for real ---------------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("name", list(LOCAL_MODELS))
async def test_every_catalogue_model_loads_verified_and_ranks_the_relevant_text_first(name: str) -> None:
    embedder = LocalEmbedder(name, max_batch_size=4)
    try:
        await embedder.load()
        query = await embedder.embed_query("What is the capital of France?")
        texts = ["Paris is the capital and largest city of France.", "Bananas are yellow.", "word " * 900]
        docs = await embedder.embed_documents(texts)
        assert len(query) == embedder.dimensions == 384
        assert all(math.isfinite(x) for x in query)
        assert math.sqrt(_cos(docs[2], docs[2])) == pytest.approx(1.0, abs=1e-3)  # longer than max_tokens: cut
        assert _cos(query, docs[0]) > _cos(query, docs[1])
        # A text's vector does not depend on what else was in the call.
        alone = [(await embedder.embed_documents([t]))[0] for t in texts]
        for together, single in zip(docs, alone, strict=True):
            assert _cos(together, single) > 0.9999
    finally:
        await embedder.aclose()


async def test_documents_come_back_in_the_order_given_whatever_their_lengths() -> None:
    embedder = LocalEmbedder("all-MiniLM-L6-v2", max_batch_size=8, batch_tokens=64)
    try:
        texts = [("word " * n) + f"topic {n}" for n in (40, 1, 17, 3, 60, 2, 9, 30)]
        together = await embedder.embed_documents(texts)
        for text, vector in zip(texts, together, strict=True):
            assert _cos(vector, (await embedder.embed_documents([text]))[0]) > 0.9999
    finally:
        await embedder.aclose()


async def test_a_query_does_not_wait_behind_a_queue_of_document_batches() -> None:
    embedder = LocalEmbedder("all-MiniLM-L6-v2", threads=1, max_batch_size=1)
    try:
        await embedder.load()
        ingest = asyncio.create_task(
            embedder.embed_documents([f"a document about topic {i} " * 30 for i in range(200)])
        )
        await asyncio.sleep(0.2)  # the batch lane is busy for seconds
        loop = asyncio.get_running_loop()
        started = loop.time()
        await embedder.embed_query("a query while ingesting")
        query_s = loop.time() - started
        assert not ingest.done()  # the query came back while the documents were still being embedded
        await ingest
        assert query_s < 2.0
    finally:
        await embedder.aclose()


# -- fetched once, verified, cached ------------------------------------------------------------------------


async def test_a_model_is_fetched_once_from_a_mirror_and_then_loads_with_the_repository_gone(
    maven_mirror: MavenMirror, tmp_path: Path
) -> None:
    first = LocalEmbedder(MODEL.name, cache_dir=tmp_path, repository=maven_mirror.url)
    await first.load()
    await first.aclose()
    assert len(maven_mirror.requests) == 1
    assert sorted(p.name for p in model_folder(tmp_path).iterdir()) == sorted(
        [MODEL.model_file.name, MODEL.tokenizer_file.name]
    )
    assert not list((tmp_path / "downloads").iterdir())  # the jar is not kept: the two files are
    again = LocalEmbedder(MODEL.name, cache_dir=tmp_path, repository="http://127.0.0.1:9/nothing-listens-here")
    try:
        assert len(await again.embed_query("from the cache")) == 384
    finally:
        await again.aclose()
    assert len(maven_mirror.requests) == 1


def test_an_https_mirror_needs_a_ca_the_machine_trusts_and_ssl_cert_file_is_honoured(
    https_maven_mirror: MavenMirror, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache = tmp_path / "refused"
    with pytest.raises(ModelUnavailable, match="CERTIFICATE_VERIFY_FAILED") as info:
        locate_model(MODEL, cache_dir=cache, repository=https_maven_mirror.url)
    assert str(cache / "downloads") in str(info.value)  # says where to put the jar
    assert not [p for p in cache.rglob("*") if p.is_file() and ".locks" not in p.parts]  # nothing kept
    assert https_maven_mirror.ca_file is not None
    monkeypatch.setenv("SSL_CERT_FILE", str(https_maven_mirror.ca_file))
    files = locate_model(MODEL, cache_dir=tmp_path / "trusted", repository=https_maven_mirror.url)
    assert files.model.name == MODEL.model_file.name
    assert len(https_maven_mirror.requests) == 1  # the refused handshake never reached the server


@pytest.mark.slow
def test_a_ca_in_the_systems_trust_store_is_trusted_with_no_ssl_variables(
    https_maven_mirror: MavenMirror, tmp_path: Path
) -> None:
    """As pip and mvn do, the fetch trusts the operating system's store, not only certifi's bundle (httpx's
    default): a TLS-inspecting proxy or a company mirror whose CA the machine trusts works with no
    SSL_CERT_FILE. Here the system's CA file is, in a mount namespace of its own, the mirror's test CA."""
    system_cafile = Path(ssl.get_default_verify_paths().openssl_cafile).resolve()
    unshare = shutil.which("unshare")
    if unshare is None or os.geteuid() != 0 or not system_cafile.is_file():
        if IN_CI:
            pytest.fail(f"CI=true: this test needs `unshare --mount` as root and {system_cafile}")
        pytest.skip(f"needs `unshare --mount` as root and {system_cafile}")
    code = textwrap.dedent(
        f"""
        from pathlib import Path
        from embeddings import find_model, locate_model
        files = locate_model(find_model({MODEL.name!r}), cache_dir=Path({str(tmp_path / "cache")!r}),
                             repository={https_maven_mirror.url!r})
        print(files.model.name)
        """
    )
    unset = ("SSL_CERT_FILE", "SSL_CERT_DIR", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE")
    script = 'mount --bind "$1" "$2" && exec "$3" -c "$4"'
    args = (str(https_maven_mirror.ca_file), str(system_cafile), sys.executable, code)
    done = subprocess.run(
        [unshare, "--mount", "sh", "-c", script, "sh", *args],
        env={k: v for k, v in os.environ.items() if k not in unset},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == MODEL.model_file.name
    assert len(https_maven_mirror.requests) == 1


def test_concurrent_first_uses_in_several_processes_fetch_once(maven_mirror: MavenMirror, tmp_path: Path) -> None:
    maven_mirror.mode = "slow"
    code = textwrap.dedent(
        f"""
        from pathlib import Path
        from embeddings import find_model, locate_model
        model, cache = find_model({MODEL.name!r}), Path({str(tmp_path)!r})
        files = locate_model(model, cache_dir=cache, repository={maven_mirror.url!r})
        print(files.model)
        """
    )
    procs = [
        subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for _ in range(3)
    ]
    outputs = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [0, 0, 0], outputs
    assert len({out.strip() for out, _ in outputs}) == 1
    assert len(maven_mirror.requests) == 1


@pytest.mark.parametrize(
    ("mode", "error", "says"),
    [
        ("truncated", ModelIntegrityError, "12,283,794 bytes with sha256"),
        ("tampered", ModelIntegrityError, "24,567,589 bytes with sha256"),
        ("cut", ModelUnavailable, "could not be fetched .*peer closed connection"),
    ],
)
def test_a_download_that_is_not_the_pinned_artifact_is_refused_and_nothing_is_kept(
    maven_mirror: MavenMirror, tmp_path: Path, mode: str, error: type[Exception], says: str
) -> None:
    maven_mirror.mode = mode
    with pytest.raises(error, match=says):
        locate_model(MODEL, cache_dir=tmp_path, repository=maven_mirror.url)
    assert not model_folder(tmp_path).exists()
    assert not [p for p in tmp_path.rglob("*") if p.is_file() and not p.name.endswith(".lock")]


async def test_a_tampered_cached_file_is_never_loaded(maven_mirror: MavenMirror, tmp_path: Path) -> None:
    files = locate_model(MODEL, cache_dir=tmp_path, repository=maven_mirror.url)
    original = files.model.read_bytes()
    data = bytearray(original)
    data[len(data) // 3] ^= 0x01
    files.model.write_bytes(bytes(data))
    embedder = LocalEmbedder(MODEL.name, cache_dir=tmp_path, repository=maven_mirror.url)
    with pytest.raises(ModelIntegrityError, match=rf"sha256 .* expected {MODEL.model_file.sha256}.*delete"):
        await embedder.load()
    await embedder.aclose()
    files.model.write_bytes(original)
    files.tokenizer.write_text("{}")  # truncated
    with pytest.raises(ModelIntegrityError, match="truncated or replaced"):
        locate_model(MODEL, cache_dir=tmp_path)


def test_a_missing_artifact_says_what_to_fetch_and_where_to_put_it(maven_mirror: MavenMirror, tmp_path: Path) -> None:
    maven_mirror.mode = "missing"
    artifact = MODEL.source
    assert isinstance(artifact, MavenArtifact)
    with pytest.raises(ModelUnavailable) as caught:
        locate_model(MODEL, cache_dir=tmp_path, repository=maven_mirror.url)
    message = str(caught.value)
    assert "HTTP 404" in message
    assert artifact.path in message
    assert artifact.sha256 in message
    assert str(tmp_path / "downloads") in message
    assert "EMBEDDINGS_MODEL_DIR" in message


def test_an_unreachable_repository_is_a_typed_error_without_the_mirrors_password(tmp_path: Path) -> None:
    with pytest.raises(ModelUnavailable) as caught:
        locate_model(MODEL, cache_dir=tmp_path, repository="http://builder:s3cret@127.0.0.1:9/maven2", timeout_s=5)
    assert "could not be fetched" in str(caught.value)
    assert "s3cret" not in str(caught.value)
    assert "***@127.0.0.1" in str(caught.value)


def test_a_jar_seeded_by_hand_is_used_without_the_network(maven_jar: bytes, tmp_path: Path) -> None:
    artifact = MODEL.source
    assert isinstance(artifact, MavenArtifact)
    (tmp_path / "downloads").mkdir()
    (tmp_path / "downloads" / artifact.filename).write_bytes(maven_jar)
    files = locate_model(MODEL, cache_dir=tmp_path, repository="http://127.0.0.1:9/nothing")
    assert files.model.stat().st_size == MODEL.model_file.size


# -- no network at all ---------------------------------------------------------------------------------


def _in_network_namespace(code: str) -> subprocess.CompletedProcess[str]:
    """Run ``code`` with this interpreter in a new network namespace: no interface up, not even loopback."""
    unshare = shutil.which("unshare")
    if unshare is None or os.geteuid() != 0:
        if IN_CI:
            pytest.fail("CI=true: the offline test needs `unshare -n` (util-linux) as root")
        pytest.skip("needs `unshare -n` as root")
    return subprocess.run(
        [unshare, "--net", sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "EMBEDDINGS_MAVEN_REPOSITORY": "https://repo1.maven.org/maven2"},
    )


@pytest.mark.slow
def test_a_seeded_cache_or_a_model_directory_works_with_no_network_at_all(
    maven_mirror: MavenMirror, tmp_path: Path
) -> None:
    seeded = tmp_path / "seeded-cache"
    files = locate_model(MODEL, cache_dir=seeded, repository=maven_mirror.url)
    model_dir = tmp_path / "model-dir"
    model_dir.mkdir()
    for path in (files.model, files.tokenizer):
        shutil.copy(path, model_dir / path.name)
    result = _in_network_namespace(
        f"""
        import asyncio
        from embeddings import LocalEmbedder
        async def main():
            for embedder in (LocalEmbedder({MODEL.name!r}, cache_dir={str(seeded)!r}),
                             LocalEmbedder({MODEL.name!r}, model_dir={str(model_dir)!r})):
                print(len(await embedder.embed_query("offline")))
                await embedder.aclose()
        asyncio.run(main())
        """
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["384", "384"]
    empty = _in_network_namespace(
        f"""
        from pathlib import Path
        from embeddings import ModelUnavailable, find_model, locate_model
        try:
            locate_model(find_model({MODEL.name!r}), cache_dir=Path({str(tmp_path / "empty")!r}))
        except ModelUnavailable as exc:
            print(exc)
        """
    )
    assert empty.returncode == 0, empty.stderr
    assert "could not be fetched" in empty.stdout
    assert "EMBEDDINGS_MODEL_DIR" in empty.stdout
