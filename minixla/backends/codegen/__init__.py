"""The code generator the native backends (cpu/, cuda/) share: scalar rules, the elemental
emitter, the buffer plan and the driver's skeleton."""
