# ParameterGenerator and ZippedParameterGenerator: their values, and their errors on bad input (by type).
# args:
import b2luigi

generator = b2luigi.ParameterGenerator([1, 2, 3])
print("values:", generator.values)
zipped = b2luigi.ZippedParameterGenerator(alpha=[1, 2], beta=["a", "b"])
print("pairs:", zipped.pairs)
for make in (lambda: b2luigi.ParameterGenerator([]),
             lambda: b2luigi.ZippedParameterGenerator(),
             lambda: b2luigi.ZippedParameterGenerator(alpha=[1], beta=[1, 2])):
    try:
        make()
        print("accepted")
    except Exception as error:
        print("refused:", type(error).__name__)
