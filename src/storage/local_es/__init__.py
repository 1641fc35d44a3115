"""A real Elasticsearch on 127.0.0.1 without Docker: fetched from Maven Central, run as a local process.

This is how development machines and CI get a real server. It:

1. fetches ``org.elasticsearch.distribution.integ-test-zip:elasticsearch:<version>:zip`` with the ordinary
   Maven client (``mvn dependency:copy``) into a cache directory, reused when present;
2. unpacks it (keeping the executable bits) and installs what the minimal distribution lacks, built from
   its own jars (``_plugins.py``: the ``english`` analyzer and English filters, ``GET /``);
3. picks a JDK from ``ES_JAVA_HOME`` or ``/usr/lib/jvm`` that fits the version (8.x: Java 17+,
   9.x: Java 21+), preferring the oldest that fits (the best-tested one);
4. starts it bound to 127.0.0.1 on free ports with a small heap, ``discovery.type=single-node`` and
   security off, and waits until the cluster is yellow or green;
5. stops it with SIGTERM to its process group, then SIGKILL after a grace period.

No orphan JVMs: the launcher process group is stopped on exit, on exceptions, on SIGINT/SIGTERM (via the
context manager / ``atexit``), and, if the Python process dies hard, the kernel sends the Elasticsearch
launcher SIGTERM (``PR_SET_PDEATHSIG``); the server JVM exits when its launcher's pipe closes.

Layout: ``_host.py`` (the machine: JDKs, ports, the service user, process groups), ``_node.py`` (one node:
fetch, configure, start, stop), ``_plugins.py`` (build and install the plugins; Java in ``plugins/``),
``_cluster.py`` (several nodes; ``url_or_local`` for scripts),
``__main__.py`` (the command line).

Command line::

    python -m storage.local_es run      # start, print the URL, wait for Ctrl-C, stop
    python -m storage.local_es start    # start in the background, print the ES_URL to export
    python -m storage.local_es status   # what runs, and the URL of each
    python -m storage.local_es stop     # stop it (--name N: the one started with that name)
    python -m storage.local_es fetch    # only download and unpack

An instance keeps its port across restarts (``--port`` picks one), so an exported ``ES_URL`` stays good.
"""

from ._cluster import LocalCluster, url_or_local
from ._host import VERSION_8, VERSION_9, LocalElasticsearchError, default_cache_dir, default_version, find_java_home
from ._node import LocalElasticsearch
from ._plugins import install_plugins

__all__ = [
    "VERSION_8",
    "VERSION_9",
    "LocalCluster",
    "LocalElasticsearch",
    "LocalElasticsearchError",
    "default_cache_dir",
    "default_version",
    "find_java_home",
    "install_plugins",
    "url_or_local",
]
