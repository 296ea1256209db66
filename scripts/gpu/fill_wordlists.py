"""Fill k26ctl's word-list cache with every list the detectors read, named for the GPU image's Python.

usage: python3 fill_wordlists.py OUTDIR     (writes OUTDIR/k26ctl/wordlists/wordfreq-<v>-py312-m<m>/)

The cache files are marshal data of str tuples and frozensets, a format Python 3.11 and 3.12 share
(marshal version 4); the GPU machine sets XDG_CACHE_HOME=OUTDIR and reads them without wordfreq's data.
"""

from __future__ import annotations

import marshal
import os
import shutil
import sys
from pathlib import Path


def main(out: Path) -> None:
    from k26ctl.smoke import lexicon, wordlists

    for langs in lexicon.CANDIDATES.values():
        for lang in langs:
            wordlists.members(lang, "small")
            wordlists.ranked_head(lang, "small")
    wordlists.members("en", "best")
    wordlists.ranked_head("en", "best")
    source = wordlists.cache_dir()
    if source is None or not source.is_dir():
        sys.exit("no word-list cache directory (is wordfreq installed?)")
    target_name = source.name.rsplit("-py", 1)[0] + f"-py312-m{marshal.version}"
    target = out / "k26ctl" / "wordlists" / target_name
    shutil.rmtree(out, ignore_errors=True)
    shutil.copytree(source, target)
    print(f"{len(os.listdir(target))} lists -> {target}")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
