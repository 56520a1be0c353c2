"""A task whose run() yields new requirements (dynamic dependencies), run as jobs."""

import json
import os

import b2batch


class Piece(b2batch.Task):
    n = b2batch.IntParameter()

    def output(self):
        yield self.add_to_output("piece.txt")

    def run(self):
        with open(self.get_output_file_name("piece.txt"), "w") as f:
            f.write(f"{self.n} {os.getpid()}")


class Gather(b2batch.Task):
    def output(self):
        yield self.add_to_output("gather.json")

    def run(self):
        pieces = [Piece(n=1), Piece(n=2)]
        yield pieces
        texts = []
        for piece in pieces:
            with open(piece.get_output_file_name("piece.txt")) as f:
                texts.append(f.read())
        with open(self.get_output_file_name("gather.json"), "w") as f:
            json.dump({"pid": os.getpid(), "pieces": texts}, f)


if __name__ == "__main__":
    print(f"steering pid {os.getpid()}", flush=True)
    b2batch.process(Gather(), batch=True, batch_system="local", workers=2)
