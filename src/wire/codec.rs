//! The gRPC codec of the A2A service: prost's encoding, and a decoder whose failures are A2A errors.
//!
//! tonic's own prost decoder answers a body that is not valid protobuf with `INTERNAL` and no
//! details; a malformed request is the client's fault, so ours answers `INVALID_ARGUMENT` with
//! `google.rpc.ErrorInfo` reason `INVALID_REQUEST`, as every other malformed request on every
//! binding. (This runs before the RPC handler, so it cannot know the configured spec version; the
//! row is the same in v1.0.0 and v1.0.1.)

use std::marker::PhantomData;

use prost::Message;
use tonic::Status;
use tonic::codec::{BufferSettings, Codec, DecodeBuf, Decoder};
use tonic_prost::ProstEncoder;

use super::errors::{A2aError, ErrorKind, SpecVersion};

/// Named by `build.rs` (`codec_path`) for every method of the generated service.
#[derive(Debug, Clone)]
pub struct A2aCodec<T, U>(PhantomData<(T, U)>);

impl<T, U> Default for A2aCodec<T, U> {
    fn default() -> Self {
        A2aCodec(PhantomData)
    }
}

impl<T, U> Codec for A2aCodec<T, U>
where
    T: Message + Send + 'static,
    U: Message + Default + Send + 'static,
{
    type Encode = T;
    type Decode = U;
    type Encoder = ProstEncoder<T>;
    type Decoder = A2aDecoder<U>;

    fn encoder(&mut self) -> Self::Encoder {
        ProstEncoder::new(BufferSettings::default())
    }

    fn decoder(&mut self) -> Self::Decoder {
        A2aDecoder(PhantomData)
    }
}

#[derive(Debug, Clone)]
pub struct A2aDecoder<U>(PhantomData<U>);

impl<U: Message + Default> Decoder for A2aDecoder<U> {
    type Item = U;
    type Error = Status;

    fn decode(&mut self, buf: &mut DecodeBuf<'_>) -> Result<Option<U>, Status> {
        U::decode(buf).map(Some).map_err(|e| malformed(&e))
    }
}

fn malformed(e: &prost::DecodeError) -> Status {
    A2aError::new(
        ErrorKind::InvalidRequest,
        format!("the request is not valid protobuf: {e}"),
    )
    .grpc_status(SpecVersion::default())
}

#[cfg(test)]
mod tests {
    use tonic::Code;
    use tonic_types::StatusExt as _;

    use super::*;

    #[test]
    fn undecodable_bytes_are_invalid_argument_with_error_info() {
        // A field header announcing a length-delimited field longer than the body.
        let err = super::super::pb::GetTaskRequest::decode(&[0x0a, 0x10, b'x'][..]).unwrap_err();
        let status = malformed(&err);
        assert_eq!(status.code(), Code::InvalidArgument);
        let info = status.get_details_error_info().expect("ErrorInfo");
        assert_eq!(info.reason, "INVALID_REQUEST");
        assert_eq!(info.domain, "a2a-protocol.org");
    }
}
