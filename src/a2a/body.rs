//! Reading an A2A request's body, bounded by what its credential proved: the whole request for
//! an authenticated caller, a little for anyone else (whose request then fails with its
//! authentication error). The front's part of `wire::params`, since it needs the service's
//! authentication result.

use crate::service::ServiceError;
use crate::wire::errors::{A2aError, ErrorKind};
use crate::wire::params::{MAX_REQUEST_BYTES, UNAUTHENTICATED_BODY_BYTES, too_large};

/// Reads the body of an HTTP request after its credential was checked (`auth`): up to
/// [`MAX_REQUEST_BYTES`] for an authenticated caller, up to [`UNAUTHENTICATED_BODY_BYTES`] for
/// anyone else, whose request then fails with its authentication error whatever the body held.
pub async fn read_body<T>(
    body: axum::body::Body,
    auth: &Result<T, ServiceError>,
) -> Result<axum::body::Bytes, A2aError> {
    use http_body_util::BodyExt as _;
    let limit = match auth {
        Ok(_) => MAX_REQUEST_BYTES,
        Err(_) => UNAUTHENTICATED_BODY_BYTES,
    };
    match http_body_util::Limited::new(body, limit).collect().await {
        Ok(collected) => Ok(collected.to_bytes()),
        Err(e) => match auth {
            Err(refused) => Err(A2aError::from(refused.clone())),
            Ok(_) if e.is::<http_body_util::LengthLimitError>() => Err(too_large()),
            Ok(_) => Err(A2aError::new(
                ErrorKind::InvalidRequest,
                format!("could not read the request body: {e}"),
            )),
        },
    }
}
