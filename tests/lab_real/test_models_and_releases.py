"""The real-SGLang lab parts that need no server: the shipped model's checksums, its untrained twin,
the release cache's bookkeeping, and the host's provisioning of /opt/sglang."""

from __future__ import annotations

import hashlib
import json
import struct
from pathlib import Path

import pytest

from k26ctl.errors import K26Error
from k26ctl.lab.real import host_parts, releases
from k26ctl.lab.real.untrained import WEIGHTS, write_untrained

SHIPPED = host_parts.SHIPPED_MODELS / host_parts.GOOD_MODEL


def _tensors(path: Path) -> dict[str, dict[str, object]]:
    raw = path.read_bytes()
    (size,) = struct.unpack("<Q", raw[:8])
    header: dict[str, dict[str, object]] = json.loads(raw[8 : 8 + size])
    header.pop("__metadata__", None)
    return header


def test_the_shipped_model_matches_its_checksums_and_a_changed_byte_is_caught(tmp_path: Path) -> None:
    host_parts.verify_checksums(SHIPPED)
    copy = tmp_path / "m"
    copy.mkdir()
    for item in SHIPPED.iterdir():
        copy.joinpath(item.name).write_bytes(item.read_bytes())
    data = bytearray((copy / WEIGHTS).read_bytes())
    data[-1] ^= 0xFF
    (copy / WEIGHTS).write_bytes(bytes(data))
    with pytest.raises(K26Error, match="checksum"):
        host_parts.verify_checksums(copy)


def test_the_shipped_model_is_the_documented_architecture() -> None:
    config = json.loads((SHIPPED / "config.json").read_text())
    assert config["architectures"] == ["LlamaForCausalLM"]
    assert (config["hidden_size"], config["num_hidden_layers"], config["tie_word_embeddings"]) == (
        128,
        2,
        True,
    )
    template = json.loads((SHIPPED / "tokenizer_config.json").read_text())["chat_template"]
    assert "<|im_start|>" in template and "<think></think>" in template


def test_the_untrained_twin_has_the_same_tensors_new_values_and_is_reproducible(tmp_path: Path) -> None:
    first = write_untrained(SHIPPED, tmp_path / "a")
    second = write_untrained(SHIPPED, tmp_path / "b")
    digest = [hashlib.sha256((d / WEIGHTS).read_bytes()).hexdigest() for d in (first, second)]
    assert digest[0] == digest[1]  # the same bytes on every run (and machine: pure Python)
    trained, untrained = _tensors(SHIPPED / WEIGHTS), _tensors(first / WEIGHTS)
    assert {k: (v["dtype"], v["shape"]) for k, v in trained.items()} == {
        k: (v["dtype"], v["shape"]) for k, v in untrained.items()
    }
    assert (SHIPPED / WEIGHTS).read_bytes() != (first / WEIGHTS).read_bytes()
    assert (first / "tokenizer.json").read_bytes() == (SHIPPED / "tokenizer.json").read_bytes()
    assert not (first / "SHA256SUMS").exists()  # it would describe the trained weights


def test_a_release_is_installed_only_when_stamped_and_reporting_its_version(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(releases.CACHE_ENV, str(tmp_path))
    assert releases.venv_dir("0.5.15") == tmp_path / "0.5.15" / "venv"
    assert not releases.installed("0.5.15")  # nothing there
    venv = releases.venv_dir("0.5.15")
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "python").symlink_to(releases.base_python())
    (venv / releases.STAMP).write_text(json.dumps({"sglang": "0.5.15"}))
    # stamped, but this interpreter has no sglang: a half-made venv is not an install
    assert releases.venv_version(venv) is None
    assert not releases.installed("0.5.15")
    with pytest.raises(K26Error, match="not a lab release"):
        releases.ensure_release("0.4.0")
    assert releases.main(["--check", "0.5.15"]) == 1


def test_provisioning_fills_opt_sglang_and_binds_each_release(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[str] = []

    def fake_ensure(version: str, say: object) -> Path:  # the install itself is the realsglang tests' job
        calls.append(version)
        return tmp_path / "cache" / version / "venv"

    monkeypatch.setattr(host_parts, "ensure_release", fake_ensure)
    binds = host_parts.provision(tmp_path / "opt", ("0.5.15", "0.5.23"), say=lambda _: None)
    assert calls == ["0.5.15", "0.5.23"]
    assert binds == [
        (tmp_path / "cache" / "0.5.15" / "venv", "/opt/sglang/0.5.15/venv"),
        (tmp_path / "cache" / "0.5.23" / "venv", "/opt/sglang/0.5.23/venv"),
    ]
    root = tmp_path / "opt" / "sglang"
    assert (root / "0.5.15" / "venv").is_dir() and (root / "0.5.23" / "venv").is_dir()  # mount points
    assert (root / "cpu-ops" / "sgl_kernel" / "__init__.py").is_file()
    assert (root / "models" / "k26real-tiny" / WEIGHTS).is_file()
    assert (root / "models" / "k26real-garbage" / WEIGHTS).is_file()
