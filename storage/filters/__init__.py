"""Message filters beyond tags: RocketMQ's SQL92 expressions over a message's properties.

Tag expressions (`TagA || TagB`) stay in format/subscription.py: the consume queue's tags
code answers them.  A SQL92 expression needs the record's properties, so a read that takes
one decodes each candidate's property map (reads/get.py) and asks the compiled expression
(sql92.py) whether it is TRUE.  Nothing here reads a file.

Exported from here, not from `mqstore.storage`: importing the engine does not load lark nor
build the parser (about 0.1 s), which only a reader of SQL92 filters needs.
"""

from .sql92 import Sql92Cache, Sql92Filter, compile_sql92

__all__ = ["Sql92Cache", "Sql92Filter", "compile_sql92"]
