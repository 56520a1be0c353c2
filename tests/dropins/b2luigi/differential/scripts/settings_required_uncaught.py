# An uncaught missing setting ends the script with b2luigi's exception type and exit status.
# args:
import b2luigi

print("before")
b2luigi.get_setting("no_such_setting")
print("not reached")
