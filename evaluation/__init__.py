"""The evaluator. `evaluation.harness` imports no Django, so it runs on a bare GPU host."""
