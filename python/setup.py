"""Builds hurray._hurray against the installed hurray libraries (pyproject.toml says how to run it).

pkg-config finds them: hurray-client++ (libhurray-client++.so, the C++ client and the format),
hurray (libhurray.so, the C ABI the capsule goes through) and fmt. Installed under a prefix
pkg-config does not search, set PKG_CONFIG_PATH to its lib/pkgconfig. The package's version is
the installed library's, so that `hurray.__version__` names the libraries it runs on.
"""

import shlex
import subprocess
import sys
from pathlib import Path

from pybind11.setup_helpers import ParallelCompile, Pybind11Extension, build_ext
from setuptools import setup

HERE = Path(__file__).resolve().parent
LIBRARIES = ["hurray-client++", "hurray", "fmt"]
SYSTEM_LIBRARY_DIRS = ("/lib", "/usr/lib", "/lib64", "/usr/lib64")


def pkg_config(*arguments):
    command = ["pkg-config", *arguments]
    try:
        result = subprocess.run(command, check=True, capture_output=True, text=True)
    except FileNotFoundError:
        sys.exit("hurray: pkg-config is not installed (Debian: apt-get install pkg-config)")
    except subprocess.CalledProcessError as error:
        sys.exit(f"hurray: `{shlex.join(command)}` failed: {error.stderr.strip()}\n"
                 "hurray: install the hurray package (its .deb, or `cmake --install` of a "
                 "build) and, for a prefix pkg-config does not search, set PKG_CONFIG_PATH "
                 "to its lib/pkgconfig")
    return result.stdout.strip()


def library_rpath():
    """The installed libraries' directories that the loader would not search itself."""
    directories = [flag[2:] for flag in shlex.split(pkg_config("--libs-only-L", "hurray-client++"))]
    return [d for d in directories
            if not any(d == system or d.startswith(system + "/") for system in SYSTEM_LIBRARY_DIRS)]


# The sources compile in parallel, one job per CPU (HURRAY_BUILD_JOBS sets how many).
ParallelCompile("HURRAY_BUILD_JOBS").install()

version = pkg_config("--modversion", "hurray-client++")
extension = Pybind11Extension(
    "hurray._hurray",
    sorted(str(path.relative_to(HERE)) for path in (HERE / "src").glob("*.cc")),
    include_dirs=["src"],
    cxx_std=23,
    define_macros=[("HURRAY_VERSION", f'"{version}"')],
    extra_compile_args=shlex.split(pkg_config("--cflags", *LIBRARIES)),
    extra_link_args=[*shlex.split(pkg_config("--libs", *LIBRARIES)),
                     f"-Wl,--version-script={HERE / 'hurray_module.map'}"],
    runtime_library_dirs=library_rpath(),
)

setup(version=version, ext_modules=[extension], cmdclass={"build_ext": build_ext})
