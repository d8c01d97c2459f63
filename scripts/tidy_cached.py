#!/usr/bin/env python3
"""clang-tidy-19 over translation units, skipping those it already found clean.

    scripts/tidy_cached.py BUILD_DIR UNIT...

Runs run-clang-tidy-19 (-warnings-as-errors='*', BUILD_DIR's compile_commands.json) on each
UNIT (a path relative to the source tree) whose inputs changed since a run that passed, and
exits with its status. A unit's inputs are everything clang-tidy reads for it: its compile
commands, and the text (comments and NOLINTs included) of its source and of every header
the same flags include (clang-19 or clang++-19 -M lists them), every .clang-tidy file of the tree, this
script, scripts/lint.sh and clang-tidy-19's version. Paths under the source tree and the
build directory are hashed as placeholders, so that a clean clone elsewhere (CI's) finds
what an earlier clone checked. A unit whose headers cannot be listed is always checked.
When every checked unit passes, their keys are kept as empty files in HURRAY_TIDY_CACHE
(default ~/.cache/hurray-clang-tidy); keys unused for 30 days are removed. Units missing
from compile_commands.json are left out, as run-clang-tidy does.
"""

import concurrent.futures
import hashlib
import json
import os
import pathlib
import shlex
import subprocess
import sys
import time

TIDY = "clang-tidy-19"
RUN_TIDY = "run-clang-tidy-19"
PREPROCESSORS = {".c": "clang-19"}  # Any other suffix: clang++-19.
KEEP_SECONDS = 30 * 24 * 3600


def compile_arguments(entry):
    """The entry's arguments, as a list."""
    if "arguments" in entry:
        return list(entry["arguments"])
    return shlex.split(entry["command"])


def dependency_arguments(entry):
    """The entry's compile made a listing of its files to stdout by clang-19 or clang++-19."""
    arguments = compile_arguments(entry)
    result = [PREPROCESSORS.get(pathlib.Path(entry["file"]).suffix, "clang++-19")]
    skip = False
    for argument in arguments[1:]:
        if skip:
            skip = False
            continue
        if argument in ("-o", "-MF", "-MT", "-MQ"):
            skip = True
            continue
        if argument in ("-c", "-MD", "-MMD") or argument.startswith("-o"):
            continue
        result.append(argument)
    return result + ["-M"]


class Keys:
    """Computes each unit's key from its compile commands."""

    def __init__(self, source_dir, build_dir, common):
        self.roots = sorted({str(source_dir), str(build_dir)}, key=len, reverse=True)
        self.common = common

    def normalized(self, data):
        for index, root in enumerate(self.roots):
            data = data.replace(root.encode(), f"<root{index}>".encode())
        return data

    def key(self, entries):
        """The unit's key, or None when its files cannot be listed."""
        digest = hashlib.sha256(self.common)
        for entry in entries:
            arguments = compile_arguments(entry)
            directory = pathlib.Path(entry.get("directory", "."))
            digest.update(self.normalized("\0".join(arguments).encode()))
            done = subprocess.run(dependency_arguments(entry), cwd=directory,
                                  capture_output=True, text=True, check=False)
            if done.returncode != 0:
                return None
            # "target: file file \<newline> file ...": the files after the colon.
            files = done.stdout.replace("\\\n", " ").split(":", 1)[-1].split()
            for name in files:
                path = directory / name
                digest.update(self.normalized(str(path.resolve()).encode()) + b"\0")
                digest.update(hashlib.sha256(path.read_bytes()).digest())
        return digest.hexdigest()


def common_inputs(source_dir):
    """What every unit's check depends on: the configs, the scripts, clang-tidy's version."""
    digest = hashlib.sha256()
    version = subprocess.run([TIDY, "--version"], capture_output=True, check=True).stdout
    digest.update(version)
    configs = subprocess.run(["git", "ls-files", "*.clang-tidy", ".clang-tidy"], cwd=source_dir,
                             capture_output=True, text=True, check=True).stdout.split()
    for path in sorted(set(configs)) + ["scripts/lint.sh", "scripts/tidy_cached.py"]:
        digest.update(path.encode() + b"\0" + (source_dir / path).read_bytes() + b"\0")
    return digest.digest()


def main():
    if len(sys.argv) < 3:
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        return 2
    source_dir = pathlib.Path(__file__).resolve().parent.parent
    build_dir = pathlib.Path(sys.argv[1]).resolve()
    units = sys.argv[2:]
    cache = pathlib.Path(os.environ.get("HURRAY_TIDY_CACHE")
                         or pathlib.Path.home() / ".cache" / "hurray-clang-tidy")
    cache.mkdir(parents=True, exist_ok=True)

    database = json.loads((build_dir / "compile_commands.json").read_text())
    entries = {}
    for entry in database:
        path = pathlib.Path(entry.get("directory", "."), entry["file"]).resolve()
        entries.setdefault(path, []).append(entry)
    paths = {unit: (source_dir / unit).resolve() for unit in units}
    units = [unit for unit in units if paths[unit] in entries]

    keys = Keys(source_dir, build_dir, common_inputs(source_dir))
    jobs = int(os.environ.get("JOBS") or os.cpu_count() or 1)
    with concurrent.futures.ThreadPoolExecutor(max_workers=jobs) as pool:
        unit_keys = dict(zip(units, pool.map(lambda unit: keys.key(entries[paths[unit]]),
                                             units)))

    now = time.time()
    stale = []
    for unit, key in unit_keys.items():
        if key is not None and (cache / key).exists():
            os.utime(cache / key)
        else:
            stale.append(unit)
    print(f"tidy_cached: {len(units) - len(stale)} of {len(units)} translation units unchanged "
          f"since a clean run; checking {len(stale)}", flush=True)
    status = 0
    if stale:
        status = subprocess.run([RUN_TIDY, "-quiet", "-p", str(build_dir), "-j", str(jobs),
                                 "-warnings-as-errors=*"]
                                + [str(paths[unit]) for unit in stale],
                                check=False).returncode
    if status == 0:
        for unit in stale:
            if unit_keys[unit] is not None:
                (cache / unit_keys[unit]).touch()
    for old in cache.iterdir():
        if now - old.stat().st_mtime > KEEP_SECONDS:
            old.unlink(missing_ok=True)
    return status


if __name__ == "__main__":
    sys.exit(main())
