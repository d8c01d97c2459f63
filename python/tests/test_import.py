"""The module imports from the build tree."""

import hurray


def test_module_imports():
    assert hurray.__doc__
