"""The harness's ncu room: hardware counters from Nsight Compute.

The command and its report's parser (`profile.py`), and ncu run inside the candidate's own
jail (`sandbox.py`, with `target_main.py` the three steps that run there).
"""
