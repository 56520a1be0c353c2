# A RemoteTarget on a file system written for b2luigi (a RemoteFileSystem subclass with the public methods,
# here backed by a local folder): the target keeps its path as given, get()/get_temporary_input() download
# through copy_file_from_remote, outputs are uploaded through copy_file_to_remote(force=True) by
# on_temporary_files, open() is not supported.
# args:
import os
import shutil

import b2luigi
from b2luigi.core.remote_target import RemoteFileSystem, RemoteTarget

calls = []


class FolderSystem(RemoteFileSystem):
    def __init__(self, server_path):
        super().__init__(server_path)
        self.root = os.path.abspath("server")

    def _local(self, path):
        return os.path.join(self.root, path.lstrip("/"))

    def exists(self, path):
        calls.append(("exists", path))
        return os.path.exists(self._local(path))

    def copy_file_to_remote(self, local_path, remote_path, force=False):
        calls.append(("to_remote", os.path.basename(local_path).split("-")[0], remote_path, force))
        os.makedirs(os.path.dirname(self._local(remote_path)), exist_ok=True)
        shutil.copy(local_path, self._local(remote_path))

    def copy_file_from_remote(self, remote_path, local_path, force=False):
        calls.append(("from_remote", remote_path, os.path.basename(local_path)))
        shutil.copy(self._local(remote_path), local_path)

    def mkdir(self, path, parents=True, raise_if_exists=False):
        calls.append(("mkdir", path))
        os.makedirs(self._local(path), exist_ok=True)


fs = FolderSystem("myserver")


class Upload(b2luigi.Task):
    def output(self):
        yield {"data.txt": RemoteTarget("store/data.txt", fs)}

    @b2luigi.on_temporary_files
    def run(self):
        with open(self.get_output_file_name("data.txt"), "w") as f:
            f.write("remote data\n")


class Download(b2luigi.Task):
    def requires(self):
        return Upload()

    def output(self):
        yield self.add_to_output("copy.txt")

    @b2luigi.on_temporary_files
    def run(self):
        local = self.get_input_file_names("data.txt")[0]
        print("input is a local copy:", os.path.basename(local), open(local).read().strip())
        with open(self.get_output_file_name("copy.txt"), "w") as f:
            f.write(open(local).read())


if __name__ == "__main__":
    b2luigi.set_setting("result_dir", "results")
    target = RemoteTarget("store/sub/file.txt", fs)
    print("path:", target.path, "base name:", target.base_name)
    target.makedirs()
    b2luigi.process(Download(), workers=1)
    os.makedirs("downloads", exist_ok=True)
    print("get:", RemoteTarget("store/data.txt", fs).get("downloads"))
    try:
        RemoteTarget("store/data.txt", fs).open("r")
    except NotImplementedError as error:
        print("open:", type(error).__name__, error)
    for call in calls:
        print(*call)
