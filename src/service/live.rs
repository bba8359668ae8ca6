//! Who is told that something changed, for the console's live pages (SPEC §11: live updates for
//! **everyone** looking at the same thing).
//!
//! A thread is read by every member of its channel with the read right, so whatever changes in a
//! thread is published once on its channel's topic ([`Service::thread_changed`]), on every replica
//! through the bus; a console's event stream ([`ConsoleChanges`]) listens to the channel topics of
//! every channel its person may read, besides her own inbox and receipts, and follows membership
//! changes. The decision of who is told is made here, not at each site that changes a thread.

use futures::FutureExt;

use super::{Caller, Result, Service};
use crate::bus::{Subscription, Topic};
use crate::domain::{ChannelName, Right, ThreadId};

impl Service {
    /// Something every reader of `thread` sees changed: the consoles of its channel's readers
    /// read again, and so do the followers of its task when it is one.
    pub(super) fn thread_changed(&self, channel: &ChannelName, thread: &ThreadId, task: bool) {
        self.inner.bus.publish(&Topic::channel(channel));
        if task {
            self.inner.bus.publish(&Topic::task(thread.as_str()));
        }
    }

    /// [`Service::thread_changed`] when only the thread's id is at hand.
    pub(super) async fn thread_id_changed(&self, thread: &ThreadId) -> Result<()> {
        if let Some(t) = self.inner.store.thread(thread).await? {
            self.thread_changed(&t.channel, &t.id, t.task.is_some());
        }
        Ok(())
    }

    /// What the console's event stream of `caller` listens to: her inbox (something reached
    /// her, an approval she is told of), her receipts, the directory (her channels and rights
    /// may have changed), and every channel she may read.
    pub async fn console_changes(&self, caller: &Caller) -> Result<ConsoleChanges> {
        let bus = &self.inner.bus;
        let mut changes = ConsoleChanges {
            service: self.clone(),
            caller: caller.clone(),
            own: vec![
                bus.subscribe(&Topic::inbox(caller.id())),
                bus.subscribe(&Topic::seen(caller.id())),
            ],
            directory: bus.subscribe(&Topic::directory()),
            channels: Vec::new(),
        };
        changes.follow_channels().await?;
        Ok(changes)
    }
}

/// The subscriptions behind one console's event stream.
pub struct ConsoleChanges {
    service: Service,
    caller: Caller,
    own: Vec<Subscription>,
    directory: Subscription,
    channels: Vec<Subscription>,
}

impl ConsoleChanges {
    /// Waits until something the person may see changed. When her channels or rights changed,
    /// the channels followed are read again before returning (subscribed before the page reads,
    /// so nothing slips between).
    pub async fn woken(&mut self) {
        let directory = {
            let mut waits: Vec<_> = self
                .own
                .iter_mut()
                .chain(self.channels.iter_mut())
                .map(|s| s.woken().boxed())
                .collect();
            tokio::select! {
                () = self.directory.woken() => true,
                _ = futures::future::select_all(&mut waits) => false,
            }
        };
        if directory && let Err(e) = self.follow_channels().await {
            // The channels followed stay as they were; the stream's tick reads again anyway.
            tracing::warn!(error = %e, "A console could not read its channels again.");
        }
    }

    /// Subscribes to the topic of every channel the person may read now.
    async fn follow_channels(&mut self) -> Result<()> {
        let service = &self.service;
        let channels = service.inner.store.channels(Some(self.caller.id())).await?;
        self.channels = channels
            .iter()
            .filter(|c| {
                c.member(self.caller.id())
                    .is_some_and(|m| m.rights.contains(Right::Read))
            })
            .map(|c| service.inner.bus.subscribe(&Topic::channel(&c.name)))
            .collect();
        Ok(())
    }
}
