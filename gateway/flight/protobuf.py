"""The protobuf messages of Flight SQL, and packing them into ``google.protobuf.Any``.

The message definitions are ``flight_sql.proto`` and ``flight_session.proto``
beside this file, written from the specification. protoc compiles them into
``messages.binpb`` (a descriptor set; the command is in ``flight_sql.proto``),
and the classes are built from it here, in a descriptor pool of our own rather
than protobuf's default one. The default pool refuses a second definition of
``arrow.flight.protocol.sql.CommandGetSqlInfo``, and Flight SQL clients such as
flightsql-dbapi register theirs there: with generated ``_pb2`` modules, a
process that holds such a client and this server could not import both.
"""

from __future__ import annotations

from importlib import resources
from typing import Any

from google.protobuf import any_pb2, descriptor_pb2, descriptor_pool, message_factory

_SQL = "arrow.flight.protocol.sql."
_FLIGHT = "arrow.flight.protocol."


def _load_pool() -> descriptor_pool.DescriptorPool:
    pool = descriptor_pool.DescriptorPool()
    data = resources.files(__package__).joinpath("messages.binpb").read_bytes()
    for file in descriptor_pb2.FileDescriptorSet.FromString(data).file:
        pool.Add(file)
    return pool


_POOL = _load_pool()


def _message(full_name: str) -> Any:
    return message_factory.GetMessageClass(_POOL.FindMessageTypeByName(full_name))


CommandGetSqlInfo = _message(_SQL + "CommandGetSqlInfo")
CommandGetXdbcTypeInfo = _message(_SQL + "CommandGetXdbcTypeInfo")
CommandGetCatalogs = _message(_SQL + "CommandGetCatalogs")
CommandGetDbSchemas = _message(_SQL + "CommandGetDbSchemas")
CommandGetTables = _message(_SQL + "CommandGetTables")
CommandGetTableTypes = _message(_SQL + "CommandGetTableTypes")
CommandGetPrimaryKeys = _message(_SQL + "CommandGetPrimaryKeys")
CommandGetExportedKeys = _message(_SQL + "CommandGetExportedKeys")
CommandGetImportedKeys = _message(_SQL + "CommandGetImportedKeys")
CommandGetCrossReference = _message(_SQL + "CommandGetCrossReference")
ActionCreatePreparedStatementRequest = _message(_SQL + "ActionCreatePreparedStatementRequest")
ActionCreatePreparedStatementResult = _message(_SQL + "ActionCreatePreparedStatementResult")
ActionClosePreparedStatementRequest = _message(_SQL + "ActionClosePreparedStatementRequest")
ActionBeginTransactionRequest = _message(_SQL + "ActionBeginTransactionRequest")
ActionBeginTransactionResult = _message(_SQL + "ActionBeginTransactionResult")
ActionEndTransactionRequest = _message(_SQL + "ActionEndTransactionRequest")
CommandStatementQuery = _message(_SQL + "CommandStatementQuery")
TicketStatementQuery = _message(_SQL + "TicketStatementQuery")
CommandPreparedStatementQuery = _message(_SQL + "CommandPreparedStatementQuery")
CommandStatementUpdate = _message(_SQL + "CommandStatementUpdate")
CommandPreparedStatementUpdate = _message(_SQL + "CommandPreparedStatementUpdate")
DoPutUpdateResult = _message(_SQL + "DoPutUpdateResult")
ActionCancelQueryRequest = _message(_SQL + "ActionCancelQueryRequest")
ActionCancelQueryResult = _message(_SQL + "ActionCancelQueryResult")

SessionOptionValue = _message(_FLIGHT + "SessionOptionValue")
SetSessionOptionsRequest = _message(_FLIGHT + "SetSessionOptionsRequest")
SetSessionOptionsResult = _message(_FLIGHT + "SetSessionOptionsResult")
GetSessionOptionsRequest = _message(_FLIGHT + "GetSessionOptionsRequest")
GetSessionOptionsResult = _message(_FLIGHT + "GetSessionOptionsResult")
CloseSessionRequest = _message(_FLIGHT + "CloseSessionRequest")
CloseSessionResult = _message(_FLIGHT + "CloseSessionResult")
CancelFlightInfoRequest = _message(_FLIGHT + "CancelFlightInfoRequest")
CancelFlightInfoResult = _message(_FLIGHT + "CancelFlightInfoResult")
CANCEL_STATUS = {v.name: v.number for v in _POOL.FindEnumTypeByName(_FLIGHT + "CancelStatus").values}

#: The Flight SQL commands a FlightDescriptor or ticket may carry, by full name.
COMMANDS: dict[str, Any] = {
    cls.DESCRIPTOR.full_name: cls for cls in (
        CommandGetSqlInfo, CommandGetXdbcTypeInfo, CommandGetCatalogs, CommandGetDbSchemas,
        CommandGetTables, CommandGetTableTypes, CommandGetPrimaryKeys, CommandGetExportedKeys,
        CommandGetImportedKeys, CommandGetCrossReference, CommandStatementQuery,
        TicketStatementQuery, CommandPreparedStatementQuery, CommandStatementUpdate,
        CommandPreparedStatementUpdate,
    )
}

#: Commands of the specification this server does not implement, and what each is for.
NOT_IMPLEMENTED = {
    _SQL + "CommandStatementIngest": "bulk ingest",
    _SQL + "CommandStatementSubstraitPlan": "Substrait plans",
}


class MalformedMessage(ValueError):
    """Bytes that are not the protobuf message a Flight SQL call expects."""


class NotImplementedCommand(Exception):
    """A Flight SQL command of the specification that this server does not implement."""


def pack(message: Any) -> bytes:
    """``message`` wrapped in ``google.protobuf.Any`` and serialized."""
    wrapper = any_pb2.Any()
    wrapper.Pack(message)
    return wrapper.SerializeToString()


def unpack_command(data: bytes) -> Any:
    """The Flight SQL command inside a serialized ``Any``.

    Raises:
        MalformedMessage: the bytes are not an ``Any``, name no Flight SQL
            command this server knows, or do not decode as that command.
        NotImplementedCommand: the command is one of :data:`NOT_IMPLEMENTED`.
    """
    wrapper = _parse(any_pb2.Any, data, "a google.protobuf.Any")
    name = wrapper.TypeName()
    if name in NOT_IMPLEMENTED:
        raise NotImplementedCommand(f"this service has no {NOT_IMPLEMENTED[name]} "
                                    f"({name.removeprefix(_SQL)})")
    cls = COMMANDS.get(name)
    if cls is None:
        raise MalformedMessage(f"unknown Flight SQL command {name or '(none)'!r}")
    return _parse(cls, wrapper.value, name)


def unpack(cls: Any, data: bytes) -> Any:
    """A message of type ``cls`` inside a serialized ``Any`` (action bodies)."""
    wrapper = _parse(any_pb2.Any, data, "a google.protobuf.Any")
    if wrapper.TypeName() != cls.DESCRIPTOR.full_name:
        raise MalformedMessage(f"expected {cls.DESCRIPTOR.full_name}, "
                               f"got {wrapper.TypeName() or '(none)'!r}")
    return _parse(cls, wrapper.value, cls.DESCRIPTOR.full_name)


def parse(cls: Any, data: bytes) -> Any:
    """A message of type ``cls`` serialized directly (Flight's own action bodies)."""
    return _parse(cls, data, cls.DESCRIPTOR.full_name)


def _parse(cls: Any, data: bytes, what: str) -> Any:
    message = cls()
    try:
        message.ParseFromString(data)
    except Exception as exc:  # protobuf's DecodeError, and RuntimeWarning-like variants
        raise MalformedMessage(f"the request is not {what}: {exc}") from None
    return message
