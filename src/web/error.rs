//! An answer that is an error: its HTTP status, what went wrong and what to do; a kernel
//! error's code as its status.

use axum::Json;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::json;

use crate::kernel::{Code, Error};

/// An answer that is an error: its status, what went wrong and what to do.
#[derive(Debug)]
pub struct ApiError {
    status: StatusCode,
    error: String,
    hint: String,
}

impl ApiError {
    /// An error with this status.
    pub fn new(status: StatusCode, error: &str, hint: &str) -> ApiError {
        ApiError {
            status,
            error: error.to_string(),
            hint: hint.to_string(),
        }
    }

    /// A fault of the server's.
    pub fn internal(error: &str) -> ApiError {
        ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, error, "")
    }
}

impl From<Error> for ApiError {
    fn from(e: Error) -> ApiError {
        let status = match e.code {
            Code::Denied => StatusCode::FORBIDDEN,
            Code::Changed | Code::AlreadyDecided | Code::KeyExists => StatusCode::CONFLICT,
            Code::NotFound | Code::AmbiguousId => StatusCode::NOT_FOUND,
            Code::Usage => StatusCode::BAD_REQUEST,
            Code::Busy => StatusCode::SERVICE_UNAVAILABLE,
            Code::InvalidState => StatusCode::UNPROCESSABLE_ENTITY,
            _ => StatusCode::INTERNAL_SERVER_ERROR,
        };
        ApiError {
            status,
            error: e.message.clone(),
            hint: e.hint.clone().unwrap_or_default(),
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = Json(json!({"error": self.error, "hint": self.hint}));
        (self.status, body).into_response()
    }
}
