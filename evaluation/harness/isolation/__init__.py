"""The harness's isolation room: the candidate's process and the walls around it.

What isolates the child and what this host allows (`sandbox.py`); the child's process as
the parent holds it, with a pool started ahead (`child_process.py`), and its channel
(`channel.py`); the private root (`jail.py`), work folders (`workarea.py`), control groups
(`limits.py`), the seccomp filter (`syscall_filter.py`), the sealed output area
(`output_area.py`), the GPU allocator's settings (`device_memory.py`); the sandboxed side
(`child.py`, started as `child_main.py`) and its integrity checks (`integrity.py`).
"""
