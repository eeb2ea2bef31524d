"""Moves a transformer and a trained pipeline to and from a GPU machine whose file transfers are capped
(64 MiB each way and 16 MiB a file, say).

A Hugging Face model travels as a half-precision safetensors copy (m3e-small: 92 MB of float32 weights,
48 MB in float16); a trained pipeline comes back with its transformer's weights in float16, packed with xz
and cut into parts. Loading either puts the weights back into float32 parameters, so a model trained
there is scored here on the very weights that came back (the rounding to float16 is the only change).

    python benchmarks/tools/device_model.py pack-hf ../shared/vectors/m3e-small .devdata/m3e-small     # here
    python benchmarks/tools/device_model.py pack-pipeline training/trf/resume_gpu/flat0/model-best $OUT/flat0
    python benchmarks/tools/device_model.py unpack-pipeline FETCHED/flat0 training/trf/resume_gpu/flat0/model-best
"""

import argparse
import io
import shutil
import subprocess
import tarfile
import tempfile
from collections import OrderedDict
from pathlib import Path
from typing import Dict

import srsly
import torch

PART_BYTES = 15 * 1024 * 1024


def half(state: Dict[str, torch.Tensor]) -> Dict[str, torch.Tensor]:
    """Floating-point tensors in float16, the rest (position ids) as they are; a state dict's `_metadata`
    (module versions, read by `load_state_dict`) is kept."""
    out = OrderedDict((k, v.half() if v.is_floating_point() else v) for k, v in state.items())
    metadata = getattr(state, "_metadata", None)
    if metadata is not None:
        out._metadata = metadata  # type: ignore[attr-defined]
    for key, value in out.items():
        if value.is_floating_point() and not torch.isfinite(value).all():
            raise ValueError(f"{key} does not fit float16")
    return out


def pack_hf(source: Path, dest: Path) -> None:
    """A Hugging Face model directory with its weights as float16 safetensors: config and tokenizer
    files copied, `pytorch_model.bin` or `model.safetensors` replaced."""
    from safetensors.torch import load_file, save_file

    dest.mkdir(parents=True, exist_ok=True)
    if (source / "model.safetensors").exists():
        state = load_file(source / "model.safetensors")
    else:
        state = torch.load(source / "pytorch_model.bin", map_location="cpu", weights_only=True)
    tensors = {k: v.contiguous() for k, v in half(state).items()}
    save_file(tensors, dest / "model.safetensors", metadata={"format": "pt"})
    for path in source.iterdir():
        if path.is_file() and path.name not in {"pytorch_model.bin", "model.safetensors"}:
            shutil.copy(path, dest / path.name)
    print(f"{dest}: {sum(p.stat().st_size for p in dest.iterdir()) / 1e6:.1f} MB")


def halve_transformer(model_dir: Path) -> int:
    """Rewrites a spacy-transformers component's weights in float16. `transformer/model` is thinc's
    `Model.to_bytes` (a msgpack whose "shims" hold each node's shim bytes); the HF shim's bytes are a
    msgpack whose "state" is a `torch.save`d state dict, which `from_bytes` loads back into float32
    parameters.

    RETURNS (int): The state dicts rewritten (0: the pipeline has no `transformer` component).
    """
    path = model_dir / "transformer" / "model"
    if not path.exists():
        return 0
    halved = 0
    msg = srsly.msgpack_loads(path.read_bytes())
    for node in msg["shims"]:
        for k, shim_bytes in enumerate(node):
            shim = srsly.msgpack_loads(shim_bytes)
            if not shim.get("state"):
                continue
            state = torch.load(io.BytesIO(shim["state"]), map_location="cpu", weights_only=True)
            buffer = io.BytesIO()
            torch.save(half(state), buffer)
            shim["state"] = buffer.getvalue()
            node[k] = srsly.msgpack_dumps(shim)
            halved += 1
    path.write_bytes(srsly.msgpack_dumps(msg))
    return halved


def pack_pipeline(model_dir: Path, dest: Path) -> None:
    """The pipeline, its transformer in float16, as `pipeline.tar.xz.partNN` files of at most 15 MiB."""
    dest.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        copy = Path(tmp) / "model"
        shutil.copytree(model_dir, copy)
        halved = halve_transformer(copy)
        archive = Path(tmp) / "pipeline.tar"
        with tarfile.open(archive, "w") as tar:
            tar.add(copy, arcname="model")
        subprocess.run(["xz", "-T0", "-6", str(archive)], check=True)
        data = (Path(tmp) / "pipeline.tar.xz").read_bytes()
    for k in range(0, len(data), PART_BYTES):
        (dest / f"pipeline.tar.xz.part{k // PART_BYTES:02d}").write_bytes(data[k : k + PART_BYTES])
    weights = f"{halved} transformer state dict(s) in float16" if halved else "no transformer: weights as saved"
    print(f"{dest}: {len(data) / 1e6:.1f} MB in {-(-len(data) // PART_BYTES)} parts; {weights}")


def unpack_pipeline(parts: Path, dest: Path) -> None:
    """The pipeline that `pack_pipeline` cut into parts, as a directory `dest`."""
    data = b"".join(p.read_bytes() for p in sorted(parts.glob("pipeline.tar.xz.part*")))
    with tempfile.TemporaryDirectory() as tmp:
        with tarfile.open(fileobj=io.BytesIO(data), mode="r:xz") as tar:
            # The "data" filter (no absolute paths, links out or devices) where this Python has it.
            if hasattr(tarfile, "data_filter"):
                tar.extractall(tmp, filter="data")
            else:
                tar.extractall(tmp)
        if dest.exists():
            shutil.rmtree(dest)
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.move(str(Path(tmp) / "model"), dest)
    print(f"{dest}: unpacked from {len(data) / 1e6:.1f} MB")


def main() -> None:
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers(dest="command", required=True)
    for name in ("pack-hf", "pack-pipeline", "unpack-pipeline"):
        command = sub.add_parser(name)
        command.add_argument("source", type=Path)
        command.add_argument("dest", type=Path)
    args = parser.parse_args()
    {"pack-hf": pack_hf, "pack-pipeline": pack_pipeline, "unpack-pipeline": unpack_pipeline}[args.command](
        args.source, args.dest
    )


if __name__ == "__main__":
    main()
