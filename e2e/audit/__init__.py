"""The privilege audit's pure core: which rights Caldera's processes used (from the API
server's audit log), which their chart roles grant, and whether secrets leaked into logs or
Events.

Nothing here reads a file or talks to the API server: callers pass the lines and objects in,
so ``unit/`` tests it and the chaos run and ``bench/privilege.py`` share it.
"""
