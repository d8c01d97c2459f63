"""The module imports (from the build tree, or installed: python_pip_install), with its
version and every public name listed."""

import re
import types

import hurray


def test_module_imports():
    assert hurray.__doc__


def test_errors_map_codes_to_classes():
    error = hurray._errors.error_for("NOT_FOUND", "no tensor a/b")
    assert isinstance(error, hurray.NotFoundError)
    assert isinstance(error, hurray.Error)
    assert str(error) == "no tensor a/b"
    assert isinstance(hurray.BufferError("x"), BufferError.__mro__[0])


def test_version_is_the_libraries_version():
    assert re.fullmatch(r"\d+\.\d+\.\d+", hurray.__version__), hurray.__version__
    assert hurray.__version__ == hurray._hurray.__version__


def test_all_lists_every_public_name_once():
    public = {name for name, value in vars(hurray).items()
              if not name.startswith("_") and not isinstance(value, types.ModuleType)}
    assert len(hurray.__all__) == len(set(hurray.__all__))
    assert set(hurray.__all__) == public
    namespace = {}
    exec("from hurray import *", namespace)
    assert set(namespace) - {"__builtins__"} == public
