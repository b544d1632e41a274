"""The harness's isolation room: the candidate's process and the walls around it.

The sandbox (`sandbox.py`: settings, what the host allows), the child process started in it
and kept warm, the private root (`jail.py`), work folders (`workarea.py`), control groups
(`limits.py`), the seccomp filter (`syscall_filter.py`), the sealed output area
(`output_area.py`), the GPU allocator's settings (`device_memory.py`), the sandboxed side
(`child.py`, started as `child_main.py`) and its integrity checks (`integrity.py`).
"""
