"""A tiny cross-encoder the tests build themselves: a BERT-style pair tokenizer (``tokenizer.json`` made
with the ``tokenizers`` library) and an ONNX graph (made with ``onnx.helper``) with the usual inputs
(``input_ids``, ``attention_mask``, ``token_type_ids``) and a ``logits`` output of shape ``[n, 1]``.

Its weights are random (seeded): it proves the loading, tokenization and scoring code runs, not quality.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

WORDS = [
    "apple",
    "revenue",
    "guidance",
    "cloud",
    "microsoft",
    "rain",
    "weather",
    "cut",
    "grew",
    "quarter",
    "the",
    "a",
    "of",
    "in",
    "and",
]
DIM = 8


def build(directory: Path, *, seed: int = 7, two_class: bool = False) -> Path:
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    from tokenizers import Tokenizer, models, pre_tokenizers, processors

    directory.mkdir(parents=True, exist_ok=True)
    vocab = {"[PAD]": 0, "[UNK]": 1, "[CLS]": 2, "[SEP]": 3} | {w: i + 4 for i, w in enumerate(WORDS)}
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1", special_tokens=[("[CLS]", 2), ("[SEP]", 3)]
    )
    tok.save(str(directory / "tokenizer.json"))

    rng = np.random.default_rng(seed)
    outputs = 2 if two_class else 1
    inits = [
        numpy_helper.from_array(rng.normal(size=(len(vocab), DIM)).astype(np.float32), "word_emb"),
        numpy_helper.from_array(rng.normal(size=(2, DIM)).astype(np.float32), "type_emb"),
        numpy_helper.from_array(rng.normal(size=(DIM, outputs)).astype(np.float32), "w"),
        numpy_helper.from_array(np.zeros(outputs, dtype=np.float32), "b"),
        numpy_helper.from_array(np.array([1], dtype=np.int64), "axis1"),
        numpy_helper.from_array(np.array([2], dtype=np.int64), "axis2"),
    ]
    nodes = [
        helper.make_node("Gather", ["word_emb", "input_ids"], ["words"]),
        helper.make_node("Gather", ["type_emb", "token_type_ids"], ["types"]),
        helper.make_node("Add", ["words", "types"], ["tokens"]),
        helper.make_node("Cast", ["attention_mask"], ["mask_f"], to=TensorProto.FLOAT),
        helper.make_node("Unsqueeze", ["mask_f", "axis2"], ["mask3"]),
        helper.make_node("Mul", ["tokens", "mask3"], ["masked"]),
        helper.make_node("ReduceSum", ["masked", "axis1"], ["summed"], keepdims=0),
        helper.make_node("ReduceSum", ["mask3", "axis1"], ["count"], keepdims=0),
        helper.make_node("Div", ["summed", "count"], ["pooled"]),
        helper.make_node("MatMul", ["pooled", "w"], ["projected"]),
        helper.make_node("Add", ["projected", "b"], ["logits"]),
    ]
    ints = [
        helper.make_tensor_value_info(name, TensorProto.INT64, ["batch", "tokens"])
        for name in ("input_ids", "attention_mask", "token_type_ids")
    ]
    graph = helper.make_graph(
        nodes,
        "tiny-cross-encoder",
        ints,
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", outputs])],
        inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    onnx.save(model, str(directory / "model.onnx"))
    return directory
