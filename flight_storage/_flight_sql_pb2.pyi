from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class CancelStatus(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    CANCEL_STATUS_UNSPECIFIED: _ClassVar[CancelStatus]
    CANCEL_STATUS_CANCELLED: _ClassVar[CancelStatus]
    CANCEL_STATUS_CANCELLING: _ClassVar[CancelStatus]
    CANCEL_STATUS_NOT_CANCELLABLE: _ClassVar[CancelStatus]
CANCEL_STATUS_UNSPECIFIED: CancelStatus
CANCEL_STATUS_CANCELLED: CancelStatus
CANCEL_STATUS_CANCELLING: CancelStatus
CANCEL_STATUS_NOT_CANCELLABLE: CancelStatus

class CommandGetSqlInfo(_message.Message):
    __slots__ = ("info",)
    INFO_FIELD_NUMBER: _ClassVar[int]
    info: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, info: _Optional[_Iterable[int]] = ...) -> None: ...

class CommandGetXdbcTypeInfo(_message.Message):
    __slots__ = ("data_type",)
    DATA_TYPE_FIELD_NUMBER: _ClassVar[int]
    data_type: int
    def __init__(self, data_type: _Optional[int] = ...) -> None: ...

class CommandGetCatalogs(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class CommandGetDbSchemas(_message.Message):
    __slots__ = ("catalog", "db_schema_filter_pattern")
    CATALOG_FIELD_NUMBER: _ClassVar[int]
    DB_SCHEMA_FILTER_PATTERN_FIELD_NUMBER: _ClassVar[int]
    catalog: str
    db_schema_filter_pattern: str
    def __init__(self, catalog: _Optional[str] = ..., db_schema_filter_pattern: _Optional[str] = ...) -> None: ...

class CommandGetTables(_message.Message):
    __slots__ = ("catalog", "db_schema_filter_pattern", "table_name_filter_pattern", "table_types", "include_schema")
    CATALOG_FIELD_NUMBER: _ClassVar[int]
    DB_SCHEMA_FILTER_PATTERN_FIELD_NUMBER: _ClassVar[int]
    TABLE_NAME_FILTER_PATTERN_FIELD_NUMBER: _ClassVar[int]
    TABLE_TYPES_FIELD_NUMBER: _ClassVar[int]
    INCLUDE_SCHEMA_FIELD_NUMBER: _ClassVar[int]
    catalog: str
    db_schema_filter_pattern: str
    table_name_filter_pattern: str
    table_types: _containers.RepeatedScalarFieldContainer[str]
    include_schema: bool
    def __init__(self, catalog: _Optional[str] = ..., db_schema_filter_pattern: _Optional[str] = ..., table_name_filter_pattern: _Optional[str] = ..., table_types: _Optional[_Iterable[str]] = ..., include_schema: _Optional[bool] = ...) -> None: ...

class CommandGetTableTypes(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class CommandGetPrimaryKeys(_message.Message):
    __slots__ = ("catalog", "db_schema", "table")
    CATALOG_FIELD_NUMBER: _ClassVar[int]
    DB_SCHEMA_FIELD_NUMBER: _ClassVar[int]
    TABLE_FIELD_NUMBER: _ClassVar[int]
    catalog: str
    db_schema: str
    table: str
    def __init__(self, catalog: _Optional[str] = ..., db_schema: _Optional[str] = ..., table: _Optional[str] = ...) -> None: ...

class CommandGetExportedKeys(_message.Message):
    __slots__ = ("catalog", "db_schema", "table")
    CATALOG_FIELD_NUMBER: _ClassVar[int]
    DB_SCHEMA_FIELD_NUMBER: _ClassVar[int]
    TABLE_FIELD_NUMBER: _ClassVar[int]
    catalog: str
    db_schema: str
    table: str
    def __init__(self, catalog: _Optional[str] = ..., db_schema: _Optional[str] = ..., table: _Optional[str] = ...) -> None: ...

class CommandGetImportedKeys(_message.Message):
    __slots__ = ("catalog", "db_schema", "table")
    CATALOG_FIELD_NUMBER: _ClassVar[int]
    DB_SCHEMA_FIELD_NUMBER: _ClassVar[int]
    TABLE_FIELD_NUMBER: _ClassVar[int]
    catalog: str
    db_schema: str
    table: str
    def __init__(self, catalog: _Optional[str] = ..., db_schema: _Optional[str] = ..., table: _Optional[str] = ...) -> None: ...

class CommandGetCrossReference(_message.Message):
    __slots__ = ("pk_catalog", "pk_db_schema", "pk_table", "fk_catalog", "fk_db_schema", "fk_table")
    PK_CATALOG_FIELD_NUMBER: _ClassVar[int]
    PK_DB_SCHEMA_FIELD_NUMBER: _ClassVar[int]
    PK_TABLE_FIELD_NUMBER: _ClassVar[int]
    FK_CATALOG_FIELD_NUMBER: _ClassVar[int]
    FK_DB_SCHEMA_FIELD_NUMBER: _ClassVar[int]
    FK_TABLE_FIELD_NUMBER: _ClassVar[int]
    pk_catalog: str
    pk_db_schema: str
    pk_table: str
    fk_catalog: str
    fk_db_schema: str
    fk_table: str
    def __init__(self, pk_catalog: _Optional[str] = ..., pk_db_schema: _Optional[str] = ..., pk_table: _Optional[str] = ..., fk_catalog: _Optional[str] = ..., fk_db_schema: _Optional[str] = ..., fk_table: _Optional[str] = ...) -> None: ...

class ActionCreatePreparedStatementRequest(_message.Message):
    __slots__ = ("query", "transaction_id")
    QUERY_FIELD_NUMBER: _ClassVar[int]
    TRANSACTION_ID_FIELD_NUMBER: _ClassVar[int]
    query: str
    transaction_id: bytes
    def __init__(self, query: _Optional[str] = ..., transaction_id: _Optional[bytes] = ...) -> None: ...

class ActionCreatePreparedStatementResult(_message.Message):
    __slots__ = ("prepared_statement_handle", "dataset_schema", "parameter_schema")
    PREPARED_STATEMENT_HANDLE_FIELD_NUMBER: _ClassVar[int]
    DATASET_SCHEMA_FIELD_NUMBER: _ClassVar[int]
    PARAMETER_SCHEMA_FIELD_NUMBER: _ClassVar[int]
    prepared_statement_handle: bytes
    dataset_schema: bytes
    parameter_schema: bytes
    def __init__(self, prepared_statement_handle: _Optional[bytes] = ..., dataset_schema: _Optional[bytes] = ..., parameter_schema: _Optional[bytes] = ...) -> None: ...

class ActionClosePreparedStatementRequest(_message.Message):
    __slots__ = ("prepared_statement_handle",)
    PREPARED_STATEMENT_HANDLE_FIELD_NUMBER: _ClassVar[int]
    prepared_statement_handle: bytes
    def __init__(self, prepared_statement_handle: _Optional[bytes] = ...) -> None: ...

class SubstraitPlan(_message.Message):
    __slots__ = ("plan", "version")
    PLAN_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    plan: bytes
    version: str
    def __init__(self, plan: _Optional[bytes] = ..., version: _Optional[str] = ...) -> None: ...

class CommandStatementQuery(_message.Message):
    __slots__ = ("query", "transaction_id")
    QUERY_FIELD_NUMBER: _ClassVar[int]
    TRANSACTION_ID_FIELD_NUMBER: _ClassVar[int]
    query: str
    transaction_id: bytes
    def __init__(self, query: _Optional[str] = ..., transaction_id: _Optional[bytes] = ...) -> None: ...

class CommandStatementSubstraitPlan(_message.Message):
    __slots__ = ("plan", "transaction_id")
    PLAN_FIELD_NUMBER: _ClassVar[int]
    TRANSACTION_ID_FIELD_NUMBER: _ClassVar[int]
    plan: SubstraitPlan
    transaction_id: bytes
    def __init__(self, plan: _Optional[_Union[SubstraitPlan, _Mapping]] = ..., transaction_id: _Optional[bytes] = ...) -> None: ...

class TicketStatementQuery(_message.Message):
    __slots__ = ("statement_handle",)
    STATEMENT_HANDLE_FIELD_NUMBER: _ClassVar[int]
    statement_handle: bytes
    def __init__(self, statement_handle: _Optional[bytes] = ...) -> None: ...

class CommandPreparedStatementQuery(_message.Message):
    __slots__ = ("prepared_statement_handle",)
    PREPARED_STATEMENT_HANDLE_FIELD_NUMBER: _ClassVar[int]
    prepared_statement_handle: bytes
    def __init__(self, prepared_statement_handle: _Optional[bytes] = ...) -> None: ...

class CommandStatementUpdate(_message.Message):
    __slots__ = ("query", "transaction_id")
    QUERY_FIELD_NUMBER: _ClassVar[int]
    TRANSACTION_ID_FIELD_NUMBER: _ClassVar[int]
    query: str
    transaction_id: bytes
    def __init__(self, query: _Optional[str] = ..., transaction_id: _Optional[bytes] = ...) -> None: ...

class CommandPreparedStatementUpdate(_message.Message):
    __slots__ = ("prepared_statement_handle",)
    PREPARED_STATEMENT_HANDLE_FIELD_NUMBER: _ClassVar[int]
    prepared_statement_handle: bytes
    def __init__(self, prepared_statement_handle: _Optional[bytes] = ...) -> None: ...

class CommandStatementIngest(_message.Message):
    __slots__ = ("table_definition_options", "table", "schema", "catalog", "temporary", "transaction_id", "options")
    class TableDefinitionOptions(_message.Message):
        __slots__ = ("if_not_exist", "if_exists")
        class TableNotExistOption(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
            __slots__ = ()
            TABLE_NOT_EXIST_OPTION_UNSPECIFIED: _ClassVar[CommandStatementIngest.TableDefinitionOptions.TableNotExistOption]
            TABLE_NOT_EXIST_OPTION_CREATE: _ClassVar[CommandStatementIngest.TableDefinitionOptions.TableNotExistOption]
            TABLE_NOT_EXIST_OPTION_FAIL: _ClassVar[CommandStatementIngest.TableDefinitionOptions.TableNotExistOption]
        TABLE_NOT_EXIST_OPTION_UNSPECIFIED: CommandStatementIngest.TableDefinitionOptions.TableNotExistOption
        TABLE_NOT_EXIST_OPTION_CREATE: CommandStatementIngest.TableDefinitionOptions.TableNotExistOption
        TABLE_NOT_EXIST_OPTION_FAIL: CommandStatementIngest.TableDefinitionOptions.TableNotExistOption
        class TableExistsOption(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
            __slots__ = ()
            TABLE_EXISTS_OPTION_UNSPECIFIED: _ClassVar[CommandStatementIngest.TableDefinitionOptions.TableExistsOption]
            TABLE_EXISTS_OPTION_FAIL: _ClassVar[CommandStatementIngest.TableDefinitionOptions.TableExistsOption]
            TABLE_EXISTS_OPTION_APPEND: _ClassVar[CommandStatementIngest.TableDefinitionOptions.TableExistsOption]
            TABLE_EXISTS_OPTION_REPLACE: _ClassVar[CommandStatementIngest.TableDefinitionOptions.TableExistsOption]
        TABLE_EXISTS_OPTION_UNSPECIFIED: CommandStatementIngest.TableDefinitionOptions.TableExistsOption
        TABLE_EXISTS_OPTION_FAIL: CommandStatementIngest.TableDefinitionOptions.TableExistsOption
        TABLE_EXISTS_OPTION_APPEND: CommandStatementIngest.TableDefinitionOptions.TableExistsOption
        TABLE_EXISTS_OPTION_REPLACE: CommandStatementIngest.TableDefinitionOptions.TableExistsOption
        IF_NOT_EXIST_FIELD_NUMBER: _ClassVar[int]
        IF_EXISTS_FIELD_NUMBER: _ClassVar[int]
        if_not_exist: CommandStatementIngest.TableDefinitionOptions.TableNotExistOption
        if_exists: CommandStatementIngest.TableDefinitionOptions.TableExistsOption
        def __init__(self, if_not_exist: _Optional[_Union[CommandStatementIngest.TableDefinitionOptions.TableNotExistOption, str]] = ..., if_exists: _Optional[_Union[CommandStatementIngest.TableDefinitionOptions.TableExistsOption, str]] = ...) -> None: ...
    class OptionsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    TABLE_DEFINITION_OPTIONS_FIELD_NUMBER: _ClassVar[int]
    TABLE_FIELD_NUMBER: _ClassVar[int]
    SCHEMA_FIELD_NUMBER: _ClassVar[int]
    CATALOG_FIELD_NUMBER: _ClassVar[int]
    TEMPORARY_FIELD_NUMBER: _ClassVar[int]
    TRANSACTION_ID_FIELD_NUMBER: _ClassVar[int]
    OPTIONS_FIELD_NUMBER: _ClassVar[int]
    table_definition_options: CommandStatementIngest.TableDefinitionOptions
    table: str
    schema: str
    catalog: str
    temporary: bool
    transaction_id: bytes
    options: _containers.ScalarMap[str, str]
    def __init__(self, table_definition_options: _Optional[_Union[CommandStatementIngest.TableDefinitionOptions, _Mapping]] = ..., table: _Optional[str] = ..., schema: _Optional[str] = ..., catalog: _Optional[str] = ..., temporary: _Optional[bool] = ..., transaction_id: _Optional[bytes] = ..., options: _Optional[_Mapping[str, str]] = ...) -> None: ...

class DoPutUpdateResult(_message.Message):
    __slots__ = ("record_count",)
    RECORD_COUNT_FIELD_NUMBER: _ClassVar[int]
    record_count: int
    def __init__(self, record_count: _Optional[int] = ...) -> None: ...

class DoPutPreparedStatementResult(_message.Message):
    __slots__ = ("prepared_statement_handle",)
    PREPARED_STATEMENT_HANDLE_FIELD_NUMBER: _ClassVar[int]
    prepared_statement_handle: bytes
    def __init__(self, prepared_statement_handle: _Optional[bytes] = ...) -> None: ...

class ActionCancelQueryRequest(_message.Message):
    __slots__ = ("info",)
    INFO_FIELD_NUMBER: _ClassVar[int]
    info: bytes
    def __init__(self, info: _Optional[bytes] = ...) -> None: ...

class ActionCancelQueryResult(_message.Message):
    __slots__ = ("result",)
    class CancelResult(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
        __slots__ = ()
        CANCEL_RESULT_UNSPECIFIED: _ClassVar[ActionCancelQueryResult.CancelResult]
        CANCEL_RESULT_CANCELLED: _ClassVar[ActionCancelQueryResult.CancelResult]
        CANCEL_RESULT_CANCELLING: _ClassVar[ActionCancelQueryResult.CancelResult]
        CANCEL_RESULT_NOT_CANCELLABLE: _ClassVar[ActionCancelQueryResult.CancelResult]
    CANCEL_RESULT_UNSPECIFIED: ActionCancelQueryResult.CancelResult
    CANCEL_RESULT_CANCELLED: ActionCancelQueryResult.CancelResult
    CANCEL_RESULT_CANCELLING: ActionCancelQueryResult.CancelResult
    CANCEL_RESULT_NOT_CANCELLABLE: ActionCancelQueryResult.CancelResult
    RESULT_FIELD_NUMBER: _ClassVar[int]
    result: ActionCancelQueryResult.CancelResult
    def __init__(self, result: _Optional[_Union[ActionCancelQueryResult.CancelResult, str]] = ...) -> None: ...

class ActionBeginTransactionRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ActionBeginTransactionResult(_message.Message):
    __slots__ = ("transaction_id",)
    TRANSACTION_ID_FIELD_NUMBER: _ClassVar[int]
    transaction_id: bytes
    def __init__(self, transaction_id: _Optional[bytes] = ...) -> None: ...

class ActionEndTransactionRequest(_message.Message):
    __slots__ = ("transaction_id", "action")
    class EndTransaction(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
        __slots__ = ()
        END_TRANSACTION_UNSPECIFIED: _ClassVar[ActionEndTransactionRequest.EndTransaction]
        END_TRANSACTION_COMMIT: _ClassVar[ActionEndTransactionRequest.EndTransaction]
        END_TRANSACTION_ROLLBACK: _ClassVar[ActionEndTransactionRequest.EndTransaction]
    END_TRANSACTION_UNSPECIFIED: ActionEndTransactionRequest.EndTransaction
    END_TRANSACTION_COMMIT: ActionEndTransactionRequest.EndTransaction
    END_TRANSACTION_ROLLBACK: ActionEndTransactionRequest.EndTransaction
    TRANSACTION_ID_FIELD_NUMBER: _ClassVar[int]
    ACTION_FIELD_NUMBER: _ClassVar[int]
    transaction_id: bytes
    action: ActionEndTransactionRequest.EndTransaction
    def __init__(self, transaction_id: _Optional[bytes] = ..., action: _Optional[_Union[ActionEndTransactionRequest.EndTransaction, str]] = ...) -> None: ...

class CancelFlightInfoRequest(_message.Message):
    __slots__ = ("info",)
    INFO_FIELD_NUMBER: _ClassVar[int]
    info: bytes
    def __init__(self, info: _Optional[bytes] = ...) -> None: ...

class CancelFlightInfoResult(_message.Message):
    __slots__ = ("status",)
    STATUS_FIELD_NUMBER: _ClassVar[int]
    status: CancelStatus
    def __init__(self, status: _Optional[_Union[CancelStatus, str]] = ...) -> None: ...

class CloseSessionRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class SessionOptionValue(_message.Message):
    __slots__ = ("string_value", "bool_value", "int64_value", "double_value", "string_list_value")
    class StringListValue(_message.Message):
        __slots__ = ("values",)
        VALUES_FIELD_NUMBER: _ClassVar[int]
        values: _containers.RepeatedScalarFieldContainer[str]
        def __init__(self, values: _Optional[_Iterable[str]] = ...) -> None: ...
    STRING_VALUE_FIELD_NUMBER: _ClassVar[int]
    BOOL_VALUE_FIELD_NUMBER: _ClassVar[int]
    INT64_VALUE_FIELD_NUMBER: _ClassVar[int]
    DOUBLE_VALUE_FIELD_NUMBER: _ClassVar[int]
    STRING_LIST_VALUE_FIELD_NUMBER: _ClassVar[int]
    string_value: str
    bool_value: bool
    int64_value: int
    double_value: float
    string_list_value: SessionOptionValue.StringListValue
    def __init__(self, string_value: _Optional[str] = ..., bool_value: _Optional[bool] = ..., int64_value: _Optional[int] = ..., double_value: _Optional[float] = ..., string_list_value: _Optional[_Union[SessionOptionValue.StringListValue, _Mapping]] = ...) -> None: ...

class SetSessionOptionsRequest(_message.Message):
    __slots__ = ("session_options",)
    class SessionOptionsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: SessionOptionValue
        def __init__(self, key: _Optional[str] = ..., value: _Optional[_Union[SessionOptionValue, _Mapping]] = ...) -> None: ...
    SESSION_OPTIONS_FIELD_NUMBER: _ClassVar[int]
    session_options: _containers.MessageMap[str, SessionOptionValue]
    def __init__(self, session_options: _Optional[_Mapping[str, SessionOptionValue]] = ...) -> None: ...

class SetSessionOptionsResult(_message.Message):
    __slots__ = ("errors",)
    class ErrorValue(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
        __slots__ = ()
        UNSPECIFIED: _ClassVar[SetSessionOptionsResult.ErrorValue]
        INVALID_NAME: _ClassVar[SetSessionOptionsResult.ErrorValue]
        INVALID_VALUE: _ClassVar[SetSessionOptionsResult.ErrorValue]
        ERROR: _ClassVar[SetSessionOptionsResult.ErrorValue]
    UNSPECIFIED: SetSessionOptionsResult.ErrorValue
    INVALID_NAME: SetSessionOptionsResult.ErrorValue
    INVALID_VALUE: SetSessionOptionsResult.ErrorValue
    ERROR: SetSessionOptionsResult.ErrorValue
    class Error(_message.Message):
        __slots__ = ("value",)
        VALUE_FIELD_NUMBER: _ClassVar[int]
        value: SetSessionOptionsResult.ErrorValue
        def __init__(self, value: _Optional[_Union[SetSessionOptionsResult.ErrorValue, str]] = ...) -> None: ...
    class ErrorsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: SetSessionOptionsResult.Error
        def __init__(self, key: _Optional[str] = ..., value: _Optional[_Union[SetSessionOptionsResult.Error, _Mapping]] = ...) -> None: ...
    ERRORS_FIELD_NUMBER: _ClassVar[int]
    errors: _containers.MessageMap[str, SetSessionOptionsResult.Error]
    def __init__(self, errors: _Optional[_Mapping[str, SetSessionOptionsResult.Error]] = ...) -> None: ...

class GetSessionOptionsRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class GetSessionOptionsResult(_message.Message):
    __slots__ = ("session_options",)
    class SessionOptionsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: SessionOptionValue
        def __init__(self, key: _Optional[str] = ..., value: _Optional[_Union[SessionOptionValue, _Mapping]] = ...) -> None: ...
    SESSION_OPTIONS_FIELD_NUMBER: _ClassVar[int]
    session_options: _containers.MessageMap[str, SessionOptionValue]
    def __init__(self, session_options: _Optional[_Mapping[str, SessionOptionValue]] = ...) -> None: ...

class CloseSessionResult(_message.Message):
    __slots__ = ("status",)
    class Status(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
        __slots__ = ()
        UNSPECIFIED: _ClassVar[CloseSessionResult.Status]
        CLOSED: _ClassVar[CloseSessionResult.Status]
        CLOSING: _ClassVar[CloseSessionResult.Status]
        NOT_CLOSEABLE: _ClassVar[CloseSessionResult.Status]
    UNSPECIFIED: CloseSessionResult.Status
    CLOSED: CloseSessionResult.Status
    CLOSING: CloseSessionResult.Status
    NOT_CLOSEABLE: CloseSessionResult.Status
    STATUS_FIELD_NUMBER: _ClassVar[int]
    status: CloseSessionResult.Status
    def __init__(self, status: _Optional[_Union[CloseSessionResult.Status, str]] = ...) -> None: ...
