//! The `grpc_web` handler's settings (none); the check that its routes
//! go to HTTP/2 upstreams is `validate/grpc_web.rs`.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// `grpc_web`: gRPC-Web requests translated to gRPC (docs/MIDDLEWARE.md).
#[derive(Debug, Clone, Default, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GrpcWebSettings {}
