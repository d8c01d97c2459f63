"""The module imports from the build tree."""

import hurray


def test_module_imports():
    assert hurray.__doc__


def test_errors_map_codes_to_classes():
    error = hurray._errors.error_for("NOT_FOUND", "no tensor a/b")
    assert isinstance(error, hurray.NotFoundError)
    assert isinstance(error, hurray.Error)
    assert str(error) == "no tensor a/b"
    assert isinstance(hurray.BufferError("x"), BufferError.__mro__[0])
