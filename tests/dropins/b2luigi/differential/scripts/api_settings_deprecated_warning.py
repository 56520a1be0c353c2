# b2luigi.core.settings' docstring: DeprecatedSettingsWarning is a warning a workflow may raise itself.
# args:
import warnings

import b2luigi
from b2luigi.core.settings import DeprecatedSettingsWarning


class Task(b2luigi.Task):
    def output(self):
        yield self.add_to_output("t.txt")

    def run(self):
        warnings.warn("This setting is deprecated.", DeprecatedSettingsWarning)
        with open(self.get_output_file_name("t.txt"), "w") as f:
            f.write(DeprecatedSettingsWarning.__name__ + " " + str(issubclass(DeprecatedSettingsWarning, Warning)))


if __name__ == "__main__":
    b2luigi.process(Task())
