"""Driver plumbing shared by engine plugins: ADBC connections, ODBC connection strings, SQL text.

Nothing here imports a driver at module level; each function imports what it
uses, so an engine module that imports these stays cheap to list.
"""
