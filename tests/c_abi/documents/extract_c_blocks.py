#!/usr/bin/env python3
"""The format documents' C code, verbatim, as programs.

Reads a format document (plain text: prose, "C:" and "Rust:" labels, code), finds every
block of C code in it, and writes one program per template (TEMPLATE_DIR/*.c.in): each
template says where a block goes with a line of its own,

    @BLOCK n@           block n (from 1, in document order), exactly as the document has it
    @BLOCK n SCOPED@    the same, each paragraph (blank-line separated) in its own { }, for
                        fragments that declare the same name twice

and a #line directive before each block makes the compiler name the document's own lines.
Nothing inside a block is edited. Fails (exit 1) when a C block of the document is used by
no template, or a template names a block the document lacks, so a document that gains code
cannot pass untested.

  extract_c_blocks.py DOCUMENT TEMPLATE_DIR OUT_DIR   writes OUT_DIR/<template>.c
  extract_c_blocks.py --list DOCUMENT                 prints the blocks found
"""
import pathlib
import re
import sys

# Lines that open code whatever they end with.
CODE_START = re.compile(
    r"^(#include|#define|/\*|\*|\{|\}|static |void |int |char |unsigned |uint\d+_t |size_t |"
    r"const |Hurray\w* |if \(|for \(|while \(|return |hurray_\w+\(|\.\w+\s*=)")
# A label line: what follows is code in that language, until the next prose line.
LABEL = re.compile(r"^(C|Rust|Rust \(via FFI\)|Python):$")


def is_code(line):
    if line[:1] in (" ", "\t"):
        return True
    stripped = line.strip()
    return bool(CODE_START.match(stripped)) or stripped.endswith((";", "{", "}", "*/", ","))


def blocks(text):
    """The C blocks of a document: a list of (first line number, lines)."""
    found = []
    language = "C"  # Unlabelled code in these documents is C.
    current = None  # (first line, lines) of the block being read.

    def close():
        nonlocal current
        if current is not None:
            first, lines = current
            while lines and not lines[-1].strip():
                lines.pop()
            code = "\n".join(lines)
            # A C block has a statement or a declaration; a shell line ("cargo run ...") has not.
            if language == "C" and (";" in code or "#include" in code):
                found.append((first, lines))
        current = None

    for number, line in enumerate(text.splitlines(), start=1):
        label = LABEL.match(line.strip())
        if label:
            close()
            language = "C" if label.group(1) == "C" else "Rust"
            continue
        if not line.strip():
            if current is not None:
                current[1].append(line)
            continue
        if is_code(line):
            if current is None:
                current = (number, [])
            current[1].append(line)
            continue
        close()  # Prose ends a block, and a labelled language.
        language = "C"
    close()
    return found


def paragraphs(lines):
    """Blank-line separated runs of lines."""
    runs, run = [], []
    for line in lines:
        if line.strip():
            run.append(line)
        elif run:
            runs.append(run)
            run = []
    if run:
        runs.append(run)
    return runs


MARKER = re.compile(r"^\s*@BLOCK (\d+)( SCOPED)?@\s*$")


def render(template, found, document_name, used):
    out = []
    template_lines = template.read_text().splitlines()
    for index, line in enumerate(template_lines, start=1):
        marker = MARKER.match(line)
        if not marker:
            out.append(line)
            continue
        number = int(marker.group(1))
        if not 1 <= number <= len(found):
            sys.exit(f"{template.name}:{index}: block {number}: the document has "
                     f"{len(found)} C blocks")
        used.add(number)
        first, lines = found[number - 1]
        if marker.group(2):
            offset = 0
            for run in paragraphs(lines):
                while lines[offset] != run[0]:
                    offset += 1
                out += ["{", f'#line {first + offset} "{document_name}"'] + run + ["}"]
                offset += len(run)
        else:
            out += [f'#line {first} "{document_name}"'] + lines
        out.append(f'#line {index + 1} "{template.name}"')
    return "\n".join(out) + "\n"


def main(argv):
    if len(argv) == 3 and argv[1] == "--list":
        for number, (first, lines) in enumerate(blocks(pathlib.Path(argv[2]).read_text()), 1):
            print(f"--- block {number}, line {first}")
            print("\n".join(lines))
        return 0
    if len(argv) != 4:
        sys.exit(__doc__)
    document, template_dir, out_dir = map(pathlib.Path, argv[1:])
    found = blocks(document.read_text())
    out_dir.mkdir(parents=True, exist_ok=True)
    used = set()
    for template in sorted(template_dir.glob("*.c.in")):
        program = out_dir / template.name[: -len(".in")]
        text = render(template, found, document.name, used)
        if not program.exists() or program.read_text() != text:
            program.write_text(text)
    unused = sorted(set(range(1, len(found) + 1)) - used)
    if unused:
        sys.exit(f"{document}: C blocks {unused} (lines "
                 f"{[found[n - 1][0] for n in unused]}) are in no program of {template_dir}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
