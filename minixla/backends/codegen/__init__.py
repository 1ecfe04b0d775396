"""The code generator both native backends share; cpu/ and cuda/ are each a table of hooks on it.

  scalar.py     one source expression per elementwise opcode and element type (XLA's corner
                cases), and the kernel type of each HLO element type
  elemental.py  the elemental emitter: any instruction of a fused computation at a symbolic
                index; `Writer` is one kernel's text, whose `math_table` a target overrides
  helpers.py    the scalar helpers kernels call as `h.<name>`, written once over a target's
                primitives (`scalar_helpers(jit, bitcast=, copysign=, signbit=)`)
  kernels.py    what a kernel is made of: outputs, arguments, flat indexing, lone ops
  plan.py       where each value of a driver computation lives (arena slots, fresh buffers)
  driver.py     the driver's dispatch (`DriverBuilder.decide`), its function skeleton and
                shared lowerings; a backend supplies `Hooks(rules, fallback, lowering)`

Nothing here imports a backend: a backend imports this package, never another backend.
"""
