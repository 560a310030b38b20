"""The bottom layer: what every other layer may use and that uses none of them.

The device choice (GPU or simulator, made before numba.cuda is imported), the hardware limits a
launch must respect, the poison that marks unwritten memory, and what counts as a device array.
"""
