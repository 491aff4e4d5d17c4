//! The protocol's errors: each kind has a JSON-RPC code, an HTTP status
//! and an `ErrorInfo` reason (HTTP+JSON answers `google.rpc.Status`), so
//! one refusal is phrased for either binding, with weft's details (the
//! JSON path of the field at fault, what to do) in the `ErrorInfo`'s
//! metadata, where the SDKs expose them (`error.data`).

use serde_json::{Map, Value, json};

/// The domain of weft's `ErrorInfo`s.
pub const DOMAIN: &str = "a2a-protocol.org";
const ERROR_INFO: &str = "type.googleapis.com/google.rpc.ErrorInfo";

/// Which of the protocol's errors.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    TaskNotFound,
    TaskNotCancelable,
    PushNotificationNotSupported,
    UnsupportedOperation,
    ContentTypeNotSupported,
    InvalidAgentResponse,
    VersionNotSupported,
    InvalidParams,
    InvalidRequest,
    MethodNotFound,
    Internal,
    Parse,
}

impl ErrorKind {
    /// Every kind.
    pub const ALL: [ErrorKind; 12] = [
        ErrorKind::TaskNotFound,
        ErrorKind::TaskNotCancelable,
        ErrorKind::PushNotificationNotSupported,
        ErrorKind::UnsupportedOperation,
        ErrorKind::ContentTypeNotSupported,
        ErrorKind::InvalidAgentResponse,
        ErrorKind::VersionNotSupported,
        ErrorKind::InvalidParams,
        ErrorKind::InvalidRequest,
        ErrorKind::MethodNotFound,
        ErrorKind::Internal,
        ErrorKind::Parse,
    ];

    /// The JSON-RPC error code.
    pub fn code(self) -> i64 {
        match self {
            ErrorKind::TaskNotFound => -32001,
            ErrorKind::TaskNotCancelable => -32002,
            ErrorKind::PushNotificationNotSupported => -32003,
            ErrorKind::UnsupportedOperation => -32004,
            ErrorKind::ContentTypeNotSupported => -32005,
            ErrorKind::InvalidAgentResponse => -32006,
            ErrorKind::VersionNotSupported => -32009,
            ErrorKind::InvalidParams => -32602,
            ErrorKind::InvalidRequest => -32600,
            ErrorKind::MethodNotFound => -32601,
            ErrorKind::Internal => -32603,
            ErrorKind::Parse => -32700,
        }
    }

    /// The HTTP status and `google.rpc.Code` name (HTTP+JSON).
    pub fn status(self) -> (u16, &'static str) {
        match self {
            ErrorKind::TaskNotFound | ErrorKind::MethodNotFound => (404, "NOT_FOUND"),
            ErrorKind::TaskNotCancelable
            | ErrorKind::PushNotificationNotSupported
            | ErrorKind::UnsupportedOperation
            | ErrorKind::VersionNotSupported => (400, "FAILED_PRECONDITION"),
            ErrorKind::ContentTypeNotSupported
            | ErrorKind::InvalidParams
            | ErrorKind::InvalidRequest
            | ErrorKind::Parse => (400, "INVALID_ARGUMENT"),
            ErrorKind::InvalidAgentResponse | ErrorKind::Internal => (500, "INTERNAL"),
        }
    }

    /// The `ErrorInfo` reason (`TASK_NOT_FOUND`).
    pub fn reason(self) -> &'static str {
        match self {
            ErrorKind::TaskNotFound => "TASK_NOT_FOUND",
            ErrorKind::TaskNotCancelable => "TASK_NOT_CANCELABLE",
            ErrorKind::PushNotificationNotSupported => "PUSH_NOTIFICATION_NOT_SUPPORTED",
            ErrorKind::UnsupportedOperation => "UNSUPPORTED_OPERATION",
            ErrorKind::ContentTypeNotSupported => "CONTENT_TYPE_NOT_SUPPORTED",
            ErrorKind::InvalidAgentResponse => "INVALID_AGENT_RESPONSE",
            ErrorKind::VersionNotSupported => "VERSION_NOT_SUPPORTED",
            ErrorKind::InvalidParams => "INVALID_PARAMS",
            ErrorKind::InvalidRequest => "INVALID_REQUEST",
            ErrorKind::MethodNotFound => "METHOD_NOT_FOUND",
            ErrorKind::Internal => "INTERNAL_ERROR",
            ErrorKind::Parse => "PARSE_ERROR",
        }
    }

    /// The kind whose JSON-RPC code is `code`.
    pub fn of_code(code: i64) -> Option<ErrorKind> {
        ErrorKind::ALL.into_iter().find(|k| k.code() == code)
    }
}

/// A refusal in the protocol's terms: its kind, a sentence, and details
/// (`path`: a JSON Pointer into the request's params; `hint`: what to do;
/// `problems`: each problem when there are several).
#[derive(Debug, Clone, PartialEq)]
pub struct A2aError {
    pub kind: ErrorKind,
    pub message: String,
    pub details: Map<String, Value>,
}

impl std::fmt::Display for A2aError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} ({}): {}", self.kind.reason(), self.kind.code(), self.message)
    }
}

impl std::error::Error for A2aError {}

impl A2aError {
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> A2aError {
        A2aError { kind, message: message.into(), details: Map::new() }
    }

    pub fn invalid(message: impl Into<String>) -> A2aError {
        A2aError::new(ErrorKind::InvalidParams, message)
    }

    pub fn internal(message: impl std::fmt::Display) -> A2aError {
        A2aError::new(ErrorKind::Internal, message.to_string())
    }

    /// Where in the request's params (a JSON Pointer).
    pub fn at(mut self, path: impl Into<String>) -> A2aError {
        self.details.insert("path".into(), Value::String(path.into()));
        self
    }

    /// What to do about it.
    pub fn hint(mut self, hint: impl Into<String>) -> A2aError {
        self.details.insert("hint".into(), Value::String(hint.into()));
        self
    }

    /// Any other detail.
    pub fn with(mut self, key: &str, value: Value) -> A2aError {
        self.details.insert(key.into(), value);
        self
    }

    /// The `ErrorInfo` detail both bindings carry. Its `metadata` holds
    /// strings only (as `google.rpc.ErrorInfo` asks): other values are
    /// written as their JSON text.
    fn error_info(&self) -> Value {
        let metadata: Map<String, Value> = self
            .details
            .iter()
            .map(|(k, v)| {
                let text = match v {
                    Value::String(s) => s.clone(),
                    other => other.to_string(),
                };
                (k.clone(), Value::String(text))
            })
            .collect();
        json!({"@type": ERROR_INFO, "reason": self.kind.reason(), "domain": DOMAIN, "metadata": metadata})
    }

    /// The JSON-RPC `error` object.
    pub fn to_jsonrpc(&self) -> Value {
        json!({"code": self.kind.code(), "message": self.message, "data": [self.error_info()]})
    }

    /// The HTTP+JSON body (`google.rpc.Status` in `{"error": …}`) and its
    /// HTTP status.
    pub fn to_rest(&self) -> (u16, Value) {
        let (status, name) = self.kind.status();
        (
            status,
            json!({"error": {"code": status, "status": name, "message": self.message, "details": [self.error_info()]}}),
        )
    }

    /// An error read back from a JSON-RPC `error` object (what a remote
    /// agent answered).
    pub fn from_jsonrpc(error: &Value) -> A2aError {
        let code = error.get("code").and_then(Value::as_i64).unwrap_or(-32603);
        let message = error.get("message").and_then(Value::as_str).unwrap_or("(no message)").to_string();
        let kind = ErrorKind::of_code(code).unwrap_or(ErrorKind::Internal);
        A2aError::new(kind, message)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refusal_carries_its_path_in_both_bindings() {
        let e = A2aError::invalid("`amount` is missing").at("/message/parts/0/data/amount");
        let rpc = e.to_jsonrpc();
        assert_eq!(rpc["code"], -32602);
        assert_eq!(rpc["data"][0]["reason"], "INVALID_PARAMS");
        assert_eq!(rpc["data"][0]["metadata"]["path"], "/message/parts/0/data/amount");
        let (status, rest) = e.to_rest();
        assert_eq!(status, 400);
        assert_eq!(rest["error"]["status"], "INVALID_ARGUMENT");
        assert_eq!(rest["error"]["details"][0]["metadata"]["path"], "/message/parts/0/data/amount");
        assert_eq!(A2aError::from_jsonrpc(&rpc).kind, ErrorKind::InvalidParams);
    }
}
