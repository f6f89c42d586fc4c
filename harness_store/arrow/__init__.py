"""The store's tables as Arrow: each table's shape and types (`schema`), the statement that
reads it (`query`), and its rows turned into record batches (`convert`, with `tool_calls`
and `compute`). Below the Store, which reads its tables through them (`Store.arrow`); the
analysis exports (`analytics`) build on the Store. Needs pyarrow (the `analytics` extra).
"""
