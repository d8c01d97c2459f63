#!/usr/bin/python3
"""Reads the matrix producer.py published, as a NumPy array and as a torch tensor, zero-copy.

    PYTHONPATH=build/python /usr/bin/python3 examples/python/consumer.py [--socket PATH]

Both read the producer's pages: no byte is copied. The NumPy array maps them read-only and
refuses writes (flags.writeable is False). The torch tensor cannot be read-only (DLPack 0.6,
torch 1.13), so it maps the same pages copy-on-write: a write through it would copy a page
into this process alone, never reaching the published tensor — see docs/python.md,
"Read-only".
"""

import argparse

import numpy as np

import hurray

NAME = "examples/python/matrix"


def page_of(address):
    """(file, offset) of the page at `address`, from /proc/self/maps."""
    with open("/proc/self/maps", encoding="ascii") as maps:
        for line in maps:
            fields = line.split()
            start, end = (int(x, 16) for x in fields[0].split("-"))
            if start <= address < end:
                return fields[-1], int(fields[2], 16) + address - start
    return None


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--socket", help="hurrayd's socket ($HURRAY_SOCKET or the default)")
    parser.add_argument("--wait", type=float, default=5.0, help="seconds to wait for it")
    arguments = parser.parse_args()
    with hurray.connect(socket=arguments.socket, name="example-consumer") as client:
        with client.acquire(NAME, wait=arguments.wait) as view:
            print(f"acquired {view.name} version {view.version}: "
                  f"{view.descriptor.dtype.name} {tuple(view.descriptor.shape)}")
            array = view.numpy()  # read-only ndarray over the mapping
            print(f"numpy: sum {float(array.sum(dtype=np.float64))}, "
                  f"writeable {array.flags.writeable}, at {array.ctypes.data:#x}")
            try:
                import torch
            except ImportError:
                print("torch: not installed (apt-get install python3-torch)")
                return
            tensor = torch.from_dlpack(view)  # another mapping of the same pages
            print(f"torch: {tensor.dtype} {tuple(tensor.shape)}, sum "
                  f"{float(tensor.double().sum())}, at {tensor.data_ptr():#x}, same pages "
                  f"{page_of(tensor.data_ptr()) == page_of(array.ctypes.data)}")
        # The view is released; `array` and `tensor` still hold the lease (and the mapping)
        # until they are gone.
        print(f"after release: array[0, :3] = {array[0, :3]}")


if __name__ == "__main__":
    main()
