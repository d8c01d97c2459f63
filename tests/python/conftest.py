"""Fixtures of the client's tests: a real hurrayd ($HURRAY_TEST_HURRAYD) per test module."""

import glob
import os
import subprocess
import sys
import time

import numpy as np
import pytest

import hurray

# How long hurrayd may take to serve, and to stop, in seconds.
_START_TIMEOUT = 60
_STOP_TIMEOUT = 30
# The sealed pool's capacity in bytes.
_SEALED_POOL_CAPACITY = 16 << 20


class Daemon:
    """A hurrayd on a socket in a temporary directory, with a small CPU pool and a small
    sealed pool ("sealed"). `env`: its environment (None: this process's)."""

    def __init__(self, directory, env=None):
        binary = os.environ.get("HURRAY_TEST_HURRAYD")
        if not binary:
            pytest.skip("HURRAY_TEST_HURRAYD names no hurrayd binary")
        self.socket = str(directory / "d.sock")
        self.log_path = directory / "hurrayd.log"
        config = directory / "hurrayd.toml"
        # A segment prefix of its own, so that parallel daemons never share /dev/shm names.
        self.shm_prefix = f"pytest-{os.getpid()}-{id(self)}"
        # A state directory of its own: its journal, and the lock that one daemon holds.
        config.write_text(f'state_directory = "{directory / "state"}"\n'
                          f'[cpu_pool]\nshm_prefix = "{self.shm_prefix}"\n'
                          f'[sealed_pool]\ncapacity = {_SEALED_POOL_CAPACITY}\n')
        with open(self.log_path, "wb") as log:
            self.process = subprocess.Popen(
                [binary, "--socket", self.socket, "--cpu-pool-capacity", "64MiB",
                 "--log-level", "warning", "--config", str(config)],
                stdout=log, stderr=subprocess.STDOUT, env=env)
        self._wait_until_serving()

    def _wait_until_serving(self):
        deadline = time.monotonic() + _START_TIMEOUT
        last_error = "never tried"
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"hurrayd exited with {self.process.returncode} before "
                                   f"serving; log:\n{self.log()}")
            try:
                with hurray.connect(self.socket, name="readiness") as client:
                    client.stats()
                return
            except hurray.Error as error:
                last_error = str(error)
            time.sleep(0.02)
        self.stop()
        raise RuntimeError(f"hurrayd did not serve within {_START_TIMEOUT} s; last attempt: "
                           f"{last_error}; log:\n{self.log()}")

    def log(self):
        return self.log_path.read_text(errors="replace")[-4096:]

    def connect(self, name="pytest"):
        return hurray.connect(self.socket, name=name)

    def run_python(self, code, timeout=30, **kwargs):
        """Runs `code` in a separate /usr/bin/python3 with this daemon's socket as SOCKET."""
        env = dict(os.environ, HURRAY_SOCKET=self.socket)
        return subprocess.run([sys.executable, "-c", code], env=env, timeout=timeout,
                              capture_output=True, text=True, check=False, **kwargs)

    def stop(self):
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(_STOP_TIMEOUT)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        # A daemon that did not stop cleanly leaves its segments behind: remove them, as the
        # C++ tests' DaemonProcess does.
        for leftover in glob.glob(f"/dev/shm/{self.shm_prefix}-*"):
            os.unlink(leftover)


@pytest.fixture(scope="module")
def daemon(tmp_path_factory):
    """A hurrayd serving for the tests of one module."""
    running = Daemon(tmp_path_factory.mktemp("hurrayd"))
    yield running
    running.stop()


@pytest.fixture
def client(daemon):
    """A client of `daemon`, closed after the test."""
    with daemon.connect() as connected:
        yield connected


def wait_for(predicate, timeout=10.0):
    """Polls `predicate` until it is true; False if `timeout` seconds pass first."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.02)
    return predicate()


def aligned(n_bytes, alignment=64, offset=0):
    """A uint8 array of n_bytes whose address is `offset` bytes past an `alignment` boundary."""
    raw = np.zeros(n_bytes + 2 * alignment, dtype=np.uint8)
    start = (-raw.ctypes.data) % alignment + offset
    return raw[start:start + n_bytes]


def mapped_file_page(address):
    """(device, inode, offset in the file) of the page at `address` of this process, from
    /proc/self/maps: two addresses with the same triple read the same page of the same file."""
    with open("/proc/self/maps", encoding="ascii") as maps:
        for line in maps:
            fields = line.split()
            start, end = (int(x, 16) for x in fields[0].split("-"))
            if start <= address < end:
                offset = int(fields[2], 16) + (address - start)
                return fields[3], int(fields[4]), offset
    raise AssertionError(f"address {address:#x} is in no mapping of this process")
