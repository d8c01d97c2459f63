"""Every public name of hurray has a docstring that says something (docs/python.md, "Types
and docstrings"): each class and function of hurray.__all__ and hurray.torch.__all__, and
each public method and property a class defines (names without a leading underscore, and
__init__ where the class defines one). pybind11's generated signature line alone does not
count."""

import inspect
import re

import hurray
import hurray.torch

# A line pybind11 writes itself: "name(self: T, x: int = 0) -> R", numbered ("1. name(...)")
# for an overload, and "Overloaded function.".
_SIGNATURE_LINE = re.compile(r"^\s*(\d+\.\s+)?[A-Za-z_][\w.]*\(.*\)(\s*->\s*\S.*)?\s*$")


def _text(doc):
    """What a docstring says besides pybind11's signature lines."""
    lines = [line for line in (doc or "").splitlines()
             if not _SIGNATURE_LINE.match(line) and line.strip() != "Overloaded function."]
    return "\n".join(lines).strip()


def _documentable(value):
    """Classes, functions, methods and properties: what carries a docstring of its own
    (not data such as Error.code or hurray.float32)."""
    return inspect.isclass(value) or callable(value) or isinstance(value, property)


def _members(cls):
    """The public members `cls` defines itself, by name (each inherited one is its defining
    class's, which is in hurray.__all__ too)."""
    for name, static in vars(cls).items():
        if name.startswith("_") and name != "__init__":
            continue
        # Through the class: a method's function, a property object, a staticmethod's
        # or classmethod's function.
        value = static if isinstance(static, property) else getattr(cls, name)
        if _documentable(value):
            yield name, value


def _undocumented():
    missing = []
    for module in (hurray, hurray.torch):
        if not _text(module.__doc__):
            missing.append(module.__name__)
        for name in module.__all__:
            value = getattr(module, name)
            if not _documentable(value) or isinstance(value, hurray.DType):
                continue
            if not _text(value.__doc__):
                missing.append(f"{module.__name__}.{name}")
            if inspect.isclass(value):
                missing += [f"{module.__name__}.{name}.{member}"
                            for member, attribute in _members(value)
                            if not _text(attribute.__doc__)]
    return missing


def test_signature_lines_do_not_count():
    assert _text("acquire(self: hurray._hurray.Client, name: str) -> hurray._hurray.TensorView\n"
                 "\n") == ""
    assert _text("__init__(self: BufferHandle, byte_size: int) -> None\n\nDeclares a buffer.") \
        == "Declares a buffer."
    assert _text("Overloaded function.\n\n1. f(x: int) -> int\n\n2. f(x: str) -> str\n") == ""
    assert _text(None) == ""


def test_the_walk_covers_every_kind_of_member():
    names = {name for name, _ in _members(hurray.Client)}
    assert {"acquire", "close", "socket_path"} <= names
    names = {name for name, _ in _members(hurray.Descriptor)}
    assert {"dense", "dtype", "check_buffers"} <= names  # static method, property, method
    names = {name for name, _ in _members(hurray.Tensor)}
    assert {"__init__", "coo", "shape", "numpy"} <= names  # classmethod, property, method
    assert "code" not in {name for name, _ in _members(hurray.NotFoundError)}  # data


def test_every_public_member_has_a_docstring():
    missing = _undocumented()
    assert not missing, f"{len(missing)} public members without a docstring:\n" + \
        "\n".join(missing)
