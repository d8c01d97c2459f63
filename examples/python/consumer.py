#!/usr/bin/python3
"""Reads the matrix producer.py published, as a NumPy array and as a torch tensor, zero-copy.

    PYTHONPATH=build/python /usr/bin/python3 examples/python/consumer.py [--socket PATH]

Both map the producer's pages read-only: no byte is copied. The NumPy array refuses writes
(flags.writeable is False); the torch tensor cannot say "read-only" (DLPack 0.6), so it is
only read here — see docs/python.md, "Read-only".
"""

import argparse

import numpy as np

import hurray

NAME = "examples/python/matrix"


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
            tensor = torch.from_dlpack(view)  # the same memory: compare the addresses
            print(f"torch: {tensor.dtype} {tuple(tensor.shape)}, sum "
                  f"{float(tensor.double().sum())}, at {tensor.data_ptr():#x}, same memory "
                  f"{tensor.data_ptr() == array.ctypes.data}")
        # The view is released; `array` and `tensor` still hold the lease (and the mapping)
        # until they are gone.
        print(f"after release: array[0, :3] = {array[0, :3]}")


if __name__ == "__main__":
    main()
