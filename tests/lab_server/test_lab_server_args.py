"""The lab server's command line: SGLang's flag names, argparse rejection, SGLang's consistency rules."""

from __future__ import annotations

import pytest

from k26ctl.errors import ConfigError
from k26ctl.lab.server.server_args import parse_args


def test_defaults_and_ddtree_resolution() -> None:
    args = parse_args(["--speculative-algorithm", "DDTREE", "--speculative-ddtree-budget", "16"])
    assert args.speculative_num_draft_tokens == 8  # from the shipped draft config
    assert args.speculative_ddtree_budget == 16
    assert args.disable_overlap_schedule and args.page_size == 1
    assert args.max_running_requests == 48
    assert args.served_model_name == args.model_path


def test_gpu_only_flags_are_accepted() -> None:
    args = parse_args(
        [
            "--cuda-graph-backend-decode",
            "disabled",
            "--cuda-graph-backend-prefill",
            "disabled",
            "--attention-backend",
            "triton",
            "--trust-remote-code",
            "--mem-fraction-static",
            "0.88",
            "--watchdog-timeout",
            "600",
            "--tool-call-parser",
            "kimi_k2",
            "--skip-server-warmup",
            "--tp-size",
            "1",
        ]
    )
    assert args.attention_backend == "triton" and args.skip_server_warmup


def test_unknown_flag_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        parse_args(["--speculative-ddtree-budgte", "16"])
    assert exc.value.code == 2
    assert "unrecognized arguments" in capsys.readouterr().err


def test_block_size_flags_must_agree() -> None:
    args = parse_args(
        [
            "--speculative-algorithm",
            "DFLASH",
            "--speculative-dflash-block-size",
            "4",
            "--speculative-num-draft-tokens",
            "4",
        ]
    )
    assert args.speculative_num_draft_tokens == 4
    with pytest.raises(ConfigError):
        parse_args(
            [
                "--speculative-algorithm",
                "DFLASH",
                "--speculative-dflash-block-size",
                "8",
                "--speculative-num-draft-tokens",
                "16",
            ]
        )


@pytest.mark.parametrize(
    "argv",
    [
        ["--speculative-algorithm", "DDTREE"],
        ["--speculative-algorithm", "DDTREE", "--speculative-ddtree-budget", "7", "--page-size", "16"],
        ["--speculative-algorithm", "EAGLE3"],
        ["--speculative-ddtree-budget", "7"],
        ["--tp-size", "8"],
    ],
)
def test_inconsistent_values_are_config_errors(argv: list[str]) -> None:
    with pytest.raises(ConfigError):
        parse_args(argv)


@pytest.mark.parametrize("name", ["none", "ddtree-b7", "ddtree-b16", "ddtree-b16-patched"])
def test_lab_profiles_render_flags_the_lab_server_accepts(name: str) -> None:
    from k26ctl.profile import load_profile
    from k26ctl.render import render_launch
    from k26ctl.resources import profiles_dir

    profile = load_profile(profiles_dir() / "lab" / f"{name}.yaml").profile
    assert profile.host.lab == "k26lab" and profile.sglang.entrypoint == "k26ctl.lab.serve"
    launch = render_launch(profile)
    assert launch.argv[:3] == ["/opt/k26lab/venv/bin/python", "-m", "k26ctl.lab.serve"]
    assert launch.env["PYTHONPATH"] == "/opt/k26lab" and "CUDA_HOME" not in launch.env
    args = parse_args(launch.argv[3:])
    assert args.model_path == "/opt/k26lab/models/k26lab-tiny"
    if name == "none":
        assert args.speculative_algorithm is None
    else:
        assert args.speculative_algorithm == "DDTREE" and args.speculative_num_draft_tokens == 8
        assert args.speculative_ddtree_budget == (7 if name == "ddtree-b7" else 16)
        assert launch.env["SGLANG_DDTREE_MAX_TOPK"] == "1"
    assert profile.patches == (["triton-ddtree-verify-width"] if name.endswith("patched") else [])


def test_serve_rejects_unknown_flags_like_argparse() -> None:
    import subprocess
    import sys

    proc = subprocess.run(
        [sys.executable, "-m", "k26ctl.lab.serve", "--no-such-flag"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2 and "unrecognized arguments: --no-such-flag" in proc.stderr
