//! The outbound bridge's moving parts (SPEC §8b): the [`Sender`] turns a `remote.send` /
//! `remote.cancel` delivery into an A2A call; the [`Follower`] watches each delegated task until
//! it ends. The A2A client they call is `crate::remote`; the rules are the service's.

mod follower;
mod sender;

pub use follower::Follower;
pub use sender::Sender;
