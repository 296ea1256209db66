"""The lab server's command line: SGLang's flag names, argparse rejection, SGLang's consistency rules."""

from __future__ import annotations

import pytest

from k26ctl.errors import ConfigError
from k26ctl.lab.server_args import parse_args


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
