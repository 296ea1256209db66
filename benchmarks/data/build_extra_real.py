"""Build extra_real.jsonl: real texts, each with the package, version and file it was read from.

Bad samples are model outputs quoted verbatim: the degenerate outputs quoted in the project's anchor
notes (SGLang and vLLM issues, the seed host), and generation examples printed in the docstrings of the
`transformers` wheel. Good samples are real model outputs from the same docstrings and real human text
shipped by Debian and PyPI packages (poems and songs with repeated lines, Chinese poems, IRC transcripts,
ASCII art, legal text, constant tables, test code, HTML, JSON, logs, READMEs with tables and emoji):
the hard negatives a detector must leave alone. Texts longer than ~1500 characters are cut at a line end.

Usage: python benchmarks/data/build_extra_real.py WORKDIR   (downloads the packages into WORKDIR once)
The selection rules below are mechanical (first N items matching a structural test), not picked by score.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import zipfile
from pathlib import Path

OUT = Path(__file__).with_name("extra_real.jsonl")
TRANSFORMERS = "5.24.0"
FORTUNES_DEB = ["fortunes", "fortunes-zh"]
LIMIT = 1500


def cut(text: str, limit: int = LIMIT) -> str:
    if len(text) <= limit:
        return text
    end = text.rfind("\n", 0, limit)
    return text[: end if end > limit // 2 else limit]


def rec(text: str, label: str, category: str, source: str, engine: str, note: str = "") -> dict[str, str]:
    return {
        "text": text,
        "label": label,
        "category": category,
        "source": source,
        "engine": engine,
        "note": note,
    }


def anchors() -> list[dict[str, str]]:
    note = "quoted as given in shared/docs/anchors.md (the report's own excerpt, elision kept)"
    return [
        rec(
            "资料资料资料...",
            "bad",
            "cjk-token-loop",
            "https://github.com/sgl-project/sglang/issues/40843",
            "sglang (DFlash)",
            note,
        ),
        rec(
            "help1 ay1/saj dey-//-o-1sCj",
            "bad",
            "token-soup",
            "https://github.com/vllm-project/vllm/issues/41262",
            "vllm (DFlash)",
            note,
        ),
        rec(
            "foss foss foss",
            "bad",
            "token-loop",
            "https://github.com/sgl-project/sglang/issues/23264",
            "sglang",
            note + "; /health was 200 meanwhile",
        ),
        rec(
            "The.r!!!!!!!!!!",
            "bad",
            "char-run",
            "k26ctl seed host: SGLang Triton DDTree budget 16",
            "sglang (DDTree, unpatched mask)",
            "the seed deployment's answer, quoted in README.md",
        ),
    ]


# (file inside the wheel, first characters of the printed output, label, category, note)
TRANSFORMERS_OUTPUTS: list[tuple[str, str, str, str, str]] = [
    (
        "transformers/generation/logits_process.py",
        "Alice and Bob. The third member's name was Bob.",
        "bad",
        "phrase-loop",
        "bloomz-560m with encoder_repetition_penalty=1.2: the sentence repeats (prompt included)",
    ),
    (
        "transformers/generation/logits_process.py",
        "I'm not going to be able to do that. I'm going to be able",
        "bad",
        "answer-restart",
        "distilgpt2 greedy: the docstring's example of repetition (prompt included)",
    ),
    (
        "transformers/generation/logits_process.py",
        "Alice: I love cats. What do you love?\nBob: I love cats.",
        "bad",
        "echo-repeat",
        "bloomz-560m greedy: 'Bob repeating Alice' per the docstring (prompt included)",
    ),
    (
        "transformers/models/video_llava/modeling_video_llava.py",
        '"USER:  Why is this video funny? ASSISTANT: The video is funny because the baby is playing',
        "bad",
        "stray-glyph",
        "a stray Cyrillic 'Ъ' inside English prose (prompt included)",
    ),
    (
        "transformers/generation/logits_process.py",
        "Alice and Bob. The third member's name was not",
        "good",
        "short-answer",
        "",
    ),
    (
        "transformers/generation/logits_process.py",
        "Alice: I love cats. What do you love?\nBob: My cats",
        "good",
        "chat-transcript",
        "",
    ),
    (
        "transformers/generation/logits_process.py",
        "A sequence: 1, 2, 3, 4, 5, 6, 7, 8, 9",
        "good",
        "number-list",
        "",
    ),
    (
        "transformers/generation/logits_process.py",
        "Just wanted to let you know, I received a link to an ebook, the book How To Start A Social Network"
        " which was\npublished in 2010. Although",
        "good",
        "prose",
        "",
    ),
    (
        "transformers/models/instructblip/modeling_instructblip.py",
        "The unusual aspect of this image",
        "good",
        "prose",
        "",
    ),
    (
        "transformers/models/exaone4/modeling_exaone4.py",
        '"[|system|]',
        "good",
        "emoji-chat",
        "answer only: the printed chat template and prompt before </think> removed",
    ),
    (
        "transformers/models/exaone_moe/modeling_exaone_moe.py",
        '"<|system|>',
        "good",
        "chat",
        "answer only: the printed chat template and prompt before </think> removed",
    ),
    ("transformers/models/cpmant/modeling_cpmant.py", "['今天天气不错", "good", "cjk-prose", ""),
    (
        "transformers/models/persimmon/modeling_persimmon.py",
        "'human: Hey, what should I eat",
        "good",
        "emoji-chat",
        "",
    ),
    ("transformers/models/bitnet/modeling_bitnet.py", '"User: Hey, are you conscious?', "good", "chat", ""),
    (
        "transformers/models/qwen3_vl_moe/modeling_qwen3_vl_moe.py",
        '"A woman in a plaid shirt',
        "good",
        "prose",
        "",
    ),
    (
        "transformers/models/lfm2_vl/modeling_lfm2_vl.py",
        "'This image depicts a vibrant street scene",
        "good",
        "prose",
        "",
    ),
    (
        "transformers/models/gemma3/modeling_gemma3.py",
        '"user\\nYou are a helpful assistant.',
        "good",
        "chat",
        "six blank lines where the image tokens were",
    ),
    (
        "transformers/models/idefics2/modeling_idefics2.py",
        "['In this image, we can see",
        "good",
        "prose",
        "second of two outputs",
    ),
    ("transformers/models/blenderbot/modeling_blenderbot.py", "Bot: That's unfortunate.", "good", "chat", ""),
    (
        "transformers/models/opt/modeling_opt.py",
        "\"Hey, are you conscious? Can you talk to me?\\nI'm not conscious. I'm just",
        "good",
        "chat",
        "",
    ),
]


def _literal(text: str) -> str:
    """Docstring outputs are printed as Python literals (a repr or a list of them) or as plain text."""
    import ast

    stripped = text.strip()
    try:
        value = ast.literal_eval(stripped)
    except (ValueError, SyntaxError):
        return stripped
    if isinstance(value, list):
        return value[-1] if "second of two" in text else value[0]
    return value if isinstance(value, str) else stripped


def transformers_outputs(work: Path) -> list[dict[str, str]]:
    wheel = next(work.glob(f"transformers-{TRANSFORMERS}-*.whl"), None)
    if wheel is None:
        subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "download",
                "--no-deps",
                f"transformers=={TRANSFORMERS}",
                "-d",
                str(work),
                "-q",
            ],
            check=True,
        )
        wheel = next(work.glob(f"transformers-{TRANSFORMERS}-*.whl"))
    rows = []
    with zipfile.ZipFile(wheel) as zf:
        for path, start, label, category, note in TRANSFORMERS_OUTPUTS:
            source = zf.read(path).decode("utf-8")
            lines = source.splitlines()
            depth = start.count("\n") + 1
            idx = next(
                (
                    i
                    for i in range(len(lines))
                    if "\n".join(x.strip() for x in lines[i : i + depth]).startswith(start)
                ),
                None,
            )
            if idx is None:
                raise SystemExit(f"{path}: no printed output starts with {start!r}")
            indent = len(lines[idx]) - len(lines[idx].lstrip())
            block = []
            for line in lines[idx:]:
                if not line.strip() or line.strip().startswith((">>>", "```")):
                    break
                block.append(line[indent:])
            printed = "\n".join(block)
            if "second of two" in note:
                import ast

                text = ast.literal_eval(printed.strip())[1]
            else:
                text = _literal(printed)
            if "answer only" in note:
                text = text.split("</think>", 1)[1].strip()
            rows.append(
                rec(
                    text,
                    label,
                    category,
                    f"pypi transformers {TRANSFORMERS}: {path} (docstring example, line {idx + 1})",
                    "transformers",
                    note or "model output printed in a docstring",
                )
            )
    return rows


def _deb(work: Path, package: str) -> Path:
    root = work / "deb-root"
    debs = list(work.glob(f"{package}_*.deb"))
    if not debs:
        subprocess.run(["apt-get", "download", package], cwd=work, check=True, capture_output=True)
        debs = list(work.glob(f"{package}_*.deb"))
    subprocess.run(["dpkg-deb", "-x", str(debs[0]), str(root)], check=True)
    return root


def _deb_version(work: Path, package: str) -> str:
    deb = next(work.glob(f"{package}_*.deb"))
    return deb.name.split("_")[1].replace("%3a", ":")


def fortune_items(path: Path) -> list[str]:
    """Items of a fortune file; terminal colour codes (fortunes-zh colours titles) are removed."""
    raw = re.sub(r"\x1b\[[0-9;]*m", "", path.read_text(encoding="utf-8", errors="replace"))
    return [x.strip("\n") for x in raw.split("\n%\n") if x.strip()]


def fortunes(work: Path) -> list[dict[str, str]]:
    root = _deb(work, "fortunes")
    _deb(work, "fortunes-zh")
    games = root / "usr/share/games/fortunes"
    rows = []

    def add(package: str, name: str, items: list[str], category: str, note: str) -> None:
        version = _deb_version(work, package)
        for item in items:
            rows.append(
                rec(
                    cut(item),
                    "good",
                    category,
                    f"debian {package} {version}: /usr/share/games/fortunes/{name}",
                    "none (human-written)",
                    note,
                )
            )

    songs = fortune_items(games / "songs-poems")

    def repeats_lines(item: str) -> bool:
        lines = [x.strip() for x in item.splitlines() if x.strip()]
        return len(lines) >= 6 and len(lines) - len(set(lines)) >= 2 and len(item) >= 250

    add(
        "fortunes",
        "songs-poems",
        [s for s in songs if repeats_lines(s)][:10],
        "song-refrain",
        "first ten items with at least two repeated lines",
    )
    linux = fortune_items(games / "linux")
    irc = [x for x in linux if len(re.findall(r"(?m)^\s*<[^>\s]+>", x)) >= 4][:5]
    add("fortunes", "linux", irc, "chat-transcript", "first five IRC excerpts (four or more '<nick>' lines)")
    art = [x for x in fortune_items(games / "ascii-art") if len(x) >= 200][:4]
    add("fortunes", "ascii-art", art, "ascii-art", "first four items of 200+ characters")
    law = [x for x in fortune_items(games / "law") if len(x) >= 300][:3]
    add("fortunes", "law", law, "prose-anecdote", "first three items of 300+ characters")
    for name, count in (("tang300", 4), ("song100", 3), ("chinese", 3)):
        items = [x for x in fortune_items(games / name) if len(x) >= 60][:count]
        add(
            "fortunes-zh",
            name,
            items,
            "cjk-poem" if name != "chinese" else "cjk-prose",
            f"first {count} items of 60+ characters; terminal colour codes removed",
        )
    return rows


def system_files() -> list[dict[str, str]]:
    """Files of Debian packages installed on this machine (package named with dpkg -S)."""
    site = (
        Path(sys.prefix)
        / "lib"
        / f"python{sys.version_info.major}.{sys.version_info.minor}"
        / "site-packages"
    )
    picks: list[tuple[Path, str, str, str]] = [
        (
            Path("/usr/lib/python3.11/encodings/cp1252.py"),
            "code-constant-table",
            "lines 170-290 (decoding table)",
            "170:290",
        ),
        (
            Path("/usr/lib/python3/dist-packages/lazr/uri/tests/test_uri.py"),
            "code-tests",
            "first 60 lines",
            "0:60",
        ),
        (Path("/usr/share/common-licenses/GPL-3"), "legal", "section 15-17 (repeated clauses)", "590:640"),
        (Path("/usr/share/common-licenses/Apache-2.0"), "legal", "first 45 lines", "0:45"),
        (Path("/usr/share/doc/base-passwd/users-and-groups.html"), "html", "first 50 lines", "0:50"),
        (Path("/usr/share/doc/nodejs/api/synopsis.json"), "json", "first 60 lines", "0:60"),
        (
            Path("/usr/share/cmake-3.25/Templates/MSBuild/FlagTables/v142_CL.json"),
            "json-repetitive",
            "first 70 lines",
            "0:70",
        ),
    ]
    rows = []
    for path, category, what, span in picks:
        if not path.exists():
            continue
        owner = subprocess.run(["dpkg", "-S", str(path)], capture_output=True, text=True).stdout.split(":")[0]
        version = subprocess.run(
            ["dpkg-query", "-W", "-f=${Version}", owner], capture_output=True, text=True
        ).stdout
        a, b = (int(x) for x in span.split(":"))
        text = "\n".join(path.read_text(encoding="utf-8", errors="replace").splitlines()[a:b])
        rows.append(
            rec(
                cut(text), "good", category, f"debian {owner} {version}: {path}", "none (human-written)", what
            )
        )
    for dist, category, pattern in (
        ("charset_normalizer", "markdown-table", r"(?m)^\|.*\|\s*$"),
        ("typer", "readme-emoji", r"[\U0001F300-\U0001FAFF]"),
        ("orjson", "markdown-table", r"(?m)^\|.*\|\s*$"),
    ):
        meta = next(site.glob(f"{dist}-*.dist-info/METADATA"), None)
        if meta is None:
            continue
        body = meta.read_text(encoding="utf-8").split("\n\n", 1)[1]
        m = re.search(pattern, body)
        if not m:
            continue
        start = body.rfind("\n\n", 0, m.start()) + 2
        rows.append(
            rec(
                cut(body[start : start + LIMIT]),
                "good",
                category,
                f"pypi {meta.parent.name.removesuffix('.dist-info').replace('-', ' ')}: METADATA (README)",
                "none (human-written)",
                "from the paragraph before the first match on",
            )
        )
    return rows


def main() -> int:
    work = Path(sys.argv[1] if len(sys.argv) > 1 else "/tmp/k26-extra-real")
    work.mkdir(parents=True, exist_ok=True)
    rows = anchors() + transformers_outputs(work) + fortunes(work) + system_files()
    OUT.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    print(f"wrote {len(rows)} texts ({sum(r['label'] == 'bad' for r in rows)} bad) to {OUT}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
