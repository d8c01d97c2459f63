#!/usr/bin/python3
"""Publishes a float32 matrix to hurrayd, written in place in the daemon's pool.

    PYTHONPATH=build/python /usr/bin/python3 examples/python/producer.py [--socket PATH]

Then run consumer.py in another process. The tensor stays published after this process
exits, until it is deleted (hurrayctl rm examples/python/matrix) or the daemon stops.
"""

import argparse

import numpy as np

import hurray

NAME = "examples/python/matrix"


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--socket", help="hurrayd's socket ($HURRAY_SOCKET or the default)")
    arguments = parser.parse_args()
    with hurray.connect(socket=arguments.socket, name="example-producer") as client:
        # Zero-copy: the array is the pool memory itself; fill it, then publish.
        tensor = client.empty((1024, 1024), np.float32)
        matrix = tensor.numpy()
        matrix[:] = np.arange(matrix.size, dtype=np.float32).reshape(matrix.shape) % 1000
        version = tensor.publish(NAME)
        print(f"published {NAME} version {version}: {matrix.shape} {matrix.dtype}, "
              f"sum {float(matrix.sum(dtype=np.float64))}")
        # An array that already exists is copied once into the pool.
        client.publish(NAME + "-copy", np.ones((4, 4), dtype=np.int64))
        print(f"published {NAME}-copy (one copy of an existing array)")


if __name__ == "__main__":
    main()
