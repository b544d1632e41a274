"""The GPU worker: its own Celery app, the evaluation task, the stop watcher.

A GPU host runs it from a bundle that holds the harness and this package and nothing else
(`python -m evaluation.worker.bundle DEST`): no releases, no `.git`, no settings, no
Django. It knows the queue and task names from evaluation/protocol.py, as the web tier does.
"""
