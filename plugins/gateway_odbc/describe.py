"""What a statement returns, asked of the ODBC driver without running it.

arrow-odbc picks Arrow types from the SQL type the driver reports, and some
drivers report types it cannot read right: psqlODBC reports ``float8`` as
``SQL_FLOAT`` with a column size of 17 *digits*, which arrow-odbc reads as
17 *bits* of precision and so fetches as float32; ``timestamptz`` and
``timestamp`` are both ``SQL_TYPE_TIMESTAMP``. Neither pyodbc nor arrow-odbc
shows the driver's type *name* (``SQL_DESC_TYPE_NAME``), so this module asks
for it through unixODBC directly (ctypes): ``SQLPrepare`` then
``SQLDescribeCol``/``SQLColAttribute``. psqlODBC, SQLite's driver and
Microsoft's driver describe a prepared statement without executing it.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import threading
from dataclasses import dataclass
from typing import Any

from gateway.errors import EngineConnectionError, QueryError

SQL_HANDLE_ENV, SQL_HANDLE_DBC, SQL_HANDLE_STMT = 1, 2, 3
SQL_ATTR_ODBC_VERSION, SQL_OV_ODBC3 = 200, 3
SQL_DESC_TYPE_NAME = 14
SQL_DRIVER_NOPROMPT = 0
SQL_NTS = -3
SQL_CLOSE = 0

#: ODBC SQL type codes used by the engine.
SQL_FLOAT, SQL_REAL, SQL_DOUBLE = 6, 7, 8
SQL_BIT = -7
SQL_TYPE_TIMESTAMP = 93
SQL_SS_TIMESTAMPOFFSET = -155
SQL_GUID = -11


@dataclass(frozen=True)
class ColumnInfo:
    """One result column as the driver describes it."""

    name: str
    sql_type: int
    type_name: str
    size: int
    digits: int
    nullable: bool


_lib: Any = None
_lib_lock = threading.Lock()


def _odbc() -> Any:
    global _lib
    with _lib_lock:
        if _lib is None:
            name = ctypes.util.find_library("odbc") or "libodbc.so.2"
            try:
                _lib = ctypes.CDLL(name)
            except OSError as exc:
                raise EngineConnectionError(
                    f"unixODBC cannot be loaded ({exc})",
                    hint="apt-get install unixodbc (or the driver manager of this system)"
                ) from None
    return _lib


class Describer:
    """One ODBC connection used only to prepare and describe statements.

    Raises:
        EngineConnectionError: the connection failed (the driver's diagnostics in the message).
    """

    def __init__(self, connection_string: str, login_timeout: int | None, engine: str):
        self.engine = engine
        lib = _odbc()
        self._env, self._dbc = ctypes.c_void_p(), ctypes.c_void_p()
        self._lock = threading.Lock()
        lib.SQLAllocHandle(SQL_HANDLE_ENV, None, ctypes.byref(self._env))
        lib.SQLSetEnvAttr(self._env, SQL_ATTR_ODBC_VERSION, ctypes.c_void_p(SQL_OV_ODBC3), 0)
        lib.SQLAllocHandle(SQL_HANDLE_DBC, self._env, ctypes.byref(self._dbc))
        if login_timeout is not None:
            lib.SQLSetConnectAttr(self._dbc, 103, ctypes.c_void_p(login_timeout), 0)
        rc = lib.SQLDriverConnect(self._dbc, None, connection_string.encode(), SQL_NTS,
                                  None, 0, None, SQL_DRIVER_NOPROMPT)
        if rc not in (0, 1):
            message = _diagnostics(SQL_HANDLE_DBC, self._dbc)
            self.close()
            raise EngineConnectionError(message, engine=engine)

    def describe(self, sql: str) -> tuple[list[ColumnInfo], int]:
        """The result columns of ``sql`` and its number of parameter markers.

        Raises:
            QueryError: the driver cannot prepare the statement.
        """
        lib = _odbc()
        with self._lock:
            stmt = ctypes.c_void_p()
            lib.SQLAllocHandle(SQL_HANDLE_STMT, self._dbc, ctypes.byref(stmt))
            try:
                if lib.SQLPrepare(stmt, sql.encode(), SQL_NTS) not in (0, 1):
                    raise QueryError(_diagnostics(SQL_HANDLE_STMT, stmt), engine=self.engine)
                ncols, nparams = ctypes.c_short(), ctypes.c_short()
                lib.SQLNumResultCols(stmt, ctypes.byref(ncols))
                if lib.SQLNumParams(stmt, ctypes.byref(nparams)) not in (0, 1):
                    nparams.value = -1
                return [self._column(stmt, i) for i in range(1, ncols.value + 1)], nparams.value
            finally:
                lib.SQLFreeStmt(stmt, SQL_CLOSE)
                lib.SQLFreeHandle(SQL_HANDLE_STMT, stmt)

    @staticmethod
    def _column(stmt: Any, i: int) -> ColumnInfo:
        lib = _odbc()
        name = ctypes.create_string_buffer(512)
        name_len, sql_type, digits, nullable = (ctypes.c_short() for _ in range(4))
        size = ctypes.c_ulong()
        lib.SQLDescribeCol(stmt, i, name, 512, ctypes.byref(name_len), ctypes.byref(sql_type),
                           ctypes.byref(size), ctypes.byref(digits), ctypes.byref(nullable))
        type_name = ctypes.create_string_buffer(256)
        type_len = ctypes.c_short()
        lib.SQLColAttribute(stmt, i, SQL_DESC_TYPE_NAME, type_name, 256, ctypes.byref(type_len),
                            None)
        return ColumnInfo(name.value.decode(errors="replace"), sql_type.value,
                          type_name.value.decode(errors="replace"), size.value, digits.value,
                          nullable.value != 0)

    def close(self) -> None:
        lib = _odbc()
        with self._lock:
            if self._dbc:
                lib.SQLDisconnect(self._dbc)
                lib.SQLFreeHandle(SQL_HANDLE_DBC, self._dbc)
                self._dbc = ctypes.c_void_p()
            if self._env:
                lib.SQLFreeHandle(SQL_HANDLE_ENV, self._env)
                self._env = ctypes.c_void_p()


def _diagnostics(kind: int, handle: Any) -> str:
    lib = _odbc()
    messages = []
    for record in range(1, 6):
        state, native = ctypes.create_string_buffer(6), ctypes.c_int()
        text, length = ctypes.create_string_buffer(1024), ctypes.c_short()
        if lib.SQLGetDiagRec(kind, handle, record, state, ctypes.byref(native), text, 1024,
                             ctypes.byref(length)) not in (0, 1):
            break
        messages.append(f"{text.value.decode(errors='replace').strip()} "
                        f"(SQLSTATE {state.value.decode()})")
    return "; ".join(messages) or "the ODBC driver gave no message"
