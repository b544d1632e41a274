"""The harness's stages of one shape, on the trusted side: each a class that adds its stage
to the shape's shared state (`shape.ShapeRunState`): correctness, adoption, performance.
`evaluate._ShapeRun` runs them in order.
"""
