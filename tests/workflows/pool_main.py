"""A script whose functions live in __main__ (and a lambda, a closure): b2batch.Pool runs them in jobs of
``--system`` and prints one JSON line of the results; ``--verbose`` shows progress and the summary."""

import argparse
import json
import os

import b2batch


def cube(x):
    return x ** 3


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--system", default="local")
    parser.add_argument("--verbose", action="store_true")
    args = parser.parse_args()
    offset = 100
    settings = {"output_wait_timeout": 5}
    with b2batch.Pool(batch_system=args.system, verbose=args.verbose or None, settings=settings,
                      work_dir=os.path.join(os.getcwd(), "pool_work")) as pool:
        results = {
            "cube": pool.map(cube, range(5)),
            "lambda": pool.map(lambda x: x + 1, [1, 2], chunksize=1),
            "closure": list(pool.imap(lambda x: x + offset, [1, 2])),
            "variable": pool.apply(os.environ.get, ("POOL_MAIN_VARIABLE",)),
        }
    print(json.dumps(results))


if __name__ == "__main__":
    main()
