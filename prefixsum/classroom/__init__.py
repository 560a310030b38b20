"""The classroom tools: the simulator, the tracer, the checker, pictures, mutants, students' versions.

Built on the scans and the tridiagonal solvers, never the other way round: the simulator offers
explicit hooks (launches, allocations, memory accesses) that the tracer and the checker use.
"""
