"""The local launcher's fetch, without Maven or a server: nodes started together share one distribution."""

from __future__ import annotations

import threading
import time
import zipfile
from pathlib import Path

import pytest

from storage.local_es import LocalElasticsearch

VERSION = "8.19.21"


def test_two_nodes_fetching_one_version_at_once_download_and_unpack_it_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    downloads: list[str] = []

    def slow_download(node: LocalElasticsearch) -> None:
        downloads.append(node.name)
        time.sleep(0.3)  # long enough for the other node to arrive while this one writes
        with zipfile.ZipFile(node.zip_path, "w") as archive:
            archive.writestr(f"elasticsearch-{VERSION}/bin/elasticsearch", "#!/bin/sh\n")

    monkeypatch.setattr(LocalElasticsearch, "_download", slow_download)
    nodes = [LocalElasticsearch(version=VERSION, cache_dir=tmp_path, name=f"n{i}") for i in range(2)]
    homes: list[Path] = []
    threads = [threading.Thread(target=lambda n=n: homes.append(n.fetch())) for n in nodes]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(downloads) == 1
    assert homes == [nodes[0].home, nodes[0].home]
    assert (nodes[0].home / "bin" / "elasticsearch").exists()
    assert not list(nodes[0].home.parent.glob(".partial-*"))  # nothing half-unpacked left beside it
