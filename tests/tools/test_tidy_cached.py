"""scripts/tidy_cached.py, which `make lint` runs clang-tidy through: a unit is checked again
whenever anything clang-tidy reads of it changes (a header's comment included), a clean check
is remembered, and a failed one never is."""

import json
import os
import pathlib
import subprocess
import sys

SCRIPT = pathlib.Path(__file__).resolve().parents[2] / "scripts" / "tidy_cached.py"


def write_units(root, sources):
    """`sources` ({name: text}) under `root`, with a compile_commands.json in root/build."""
    build = root / "build"
    build.mkdir(exist_ok=True)
    entries = []
    for name, text in sources.items():
        (root / name).write_text(text)
        compilers = {".cc": ["clang++-19", "-std=c++20"], ".c": ["clang-19", "-std=c11"]}
        if (compiler := compilers.get(pathlib.Path(name).suffix)) is not None:
            entries.append({"directory": str(build), "file": str(root / name),
                            "arguments": [*compiler, "-Wall", "-c", str(root / name),
                                          "-o", name + ".o"]})
    (build / "compile_commands.json").write_text(json.dumps(entries))


def tidy(root, *units):
    """The script's exit status and first line of output for `units` of root."""
    environment = dict(os.environ, HURRAY_TIDY_CACHE=str(root / "cache"), JOBS="1")
    done = subprocess.run([sys.executable, str(SCRIPT), str(root / "build"),
                           *[str(root / unit) for unit in units]],
                          capture_output=True, text=True, env=environment, timeout=300,
                          check=False)
    return done.returncode, done.stdout.splitlines()[0]


def test_a_clean_unit_is_skipped_until_what_it_reads_changes(tmp_path):
    write_units(tmp_path, {"clean.h": "// A header.\ninline int Twice(int x) { return 2 * x; }\n",
                           "clean.cc": '#include "clean.h"\nint Four() { return Twice(2); }\n'})
    assert tidy(tmp_path, "clean.cc") == (0, "tidy_cached: 0 of 1 translation units unchanged "
                                             "since a clean run; checking 1")
    assert tidy(tmp_path, "clean.cc") == (0, "tidy_cached: 1 of 1 translation units unchanged "
                                             "since a clean run; checking 0")
    # A comment of a header (where a NOLINT would be) is something clang-tidy reads.
    (tmp_path / "clean.h").write_text("// A header, its comment changed.\n"
                                      "inline int Twice(int x) { return 2 * x; }\n")
    assert tidy(tmp_path, "clean.cc")[1].endswith("checking 1")
    assert tidy(tmp_path, "clean.cc")[1].endswith("checking 0")


def test_a_unit_with_a_finding_fails_every_time(tmp_path):
    write_units(tmp_path, {"finding.cc": "int Unused() { int unused = 0; return 1; }\n"})
    for _ in range(2):
        status, first_line = tidy(tmp_path, "finding.cc")
        assert status != 0
        assert first_line.endswith("checking 1")


def test_units_missing_from_the_compile_commands_are_left_out(tmp_path):
    write_units(tmp_path, {"clean.cc": "int One() { return 1; }\n"})
    assert tidy(tmp_path, "clean.cc", "elsewhere.cc") == (
        0, "tidy_cached: 0 of 1 translation units unchanged since a clean run; checking 1")


def test_c_units_are_remembered_too(tmp_path):
    write_units(tmp_path, {"clean.c": "int One(void) { return 1; }\n"})
    assert tidy(tmp_path, "clean.c")[1].endswith("checking 1")
    assert tidy(tmp_path, "clean.c") == (0, "tidy_cached: 1 of 1 translation units unchanged "
                                            "since a clean run; checking 0")
