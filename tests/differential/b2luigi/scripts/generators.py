# ParameterGenerator and ZippedParameterGenerator of b2luigi 1.3.
# args:
import b2luigi

try:
    gen = b2luigi.ParameterGenerator
    print("has ParameterGenerator:", gen is not None)
    print("has Zipped:", b2luigi.ZippedParameterGenerator is not None)
except AttributeError as error:
    print("missing:", error)
