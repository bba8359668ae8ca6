//! Addressing (SPEC §4b): who a post reaches — the persons it is addressed to and which of their
//! readers (connections, or the person's own credentials) each entry is for. One resolution, used
//! by every front's `to`: `bob` is every connection of bob, `bob/codex` that connection only.

use std::collections::BTreeSet;

use super::{Caller, Result, Service, ServiceError};
use crate::domain::{Address, PERSON_READER, PersonId, PersonKind, Right};
use crate::store::{Addressing, ChannelRecord, ThreadRecord};

impl Service {
    /// Who a post reaches (SPEC §4b), as the persons it is addressed to and which of their
    /// readers it is for. `to` names persons (every connection of that person) and connections
    /// (`bob/codex`: that one only); without `to`, a new thread goes to every other member who
    /// can read the channel, and a post in a thread to its participants, as narrowly as its
    /// opener addressed them. A connection never receives its own post, but its person's other
    /// connections do: a member's agent posting to everyone reaches her other agents too, and
    /// `to: alice` from one of alice's agents means her other agents. A post she writes in person
    /// reaches her own agents only when she addresses them (`to: alice`, `to: alice/codex`): her
    /// message to the channel is not a command to her agents.
    pub(super) async fn recipients(
        &self,
        caller: &Caller,
        channel: &ChannelRecord,
        thread: Option<&ThreadRecord>,
        to: Option<&[Address]>,
    ) -> Result<(Vec<PersonId>, Addressing)> {
        let readers: BTreeSet<&PersonId> = channel
            .members
            .iter()
            .filter(|m| m.rights.contains(Right::Read))
            .map(|m| &m.person)
            .collect();
        let own = caller.reader();
        let mut whole: BTreeSet<PersonId> = BTreeSet::new();
        let mut narrow: BTreeSet<(PersonId, String)> = BTreeSet::new();
        if let Some(to) = to {
            if to.is_empty() {
                return Err(ServiceError::invalid(
                    "`to` is empty; omit it to address every other member",
                ));
            }
            for a in to {
                let p = a.person();
                if !readers.contains(p) {
                    return Err(ServiceError::invalid(format!(
                        "{p} is not a member of channel {}",
                        channel.name
                    )));
                }
                match a {
                    Address::Person(p) => {
                        whole.insert(p.clone());
                    }
                    Address::Connection(p, name) => {
                        let token = self
                            .connection_named(p, name)
                            .await?
                            .ok_or_else(|| ServiceError::not_found("connection", a))?;
                        if own.key() == token.id {
                            return Err(ServiceError::invalid(format!(
                                "{a} is the connection you are posting with: a connection never \
                                 receives its own post"
                            )));
                        }
                        narrow.insert((p.clone(), token.id));
                    }
                }
            }
        } else {
            match thread {
                // In a thread: its participants (the opener's author and recipients) who can
                // still read, as narrowly as the opener addressed them, but no party other than
                // the opener: a party is in its own tasks only.
                Some(t) => {
                    let opener = self.inner.store.thread_messages(&t.id, 0, 1).await?;
                    let Some(opener) = opener.first() else {
                        return Err(ServiceError::not_found("thread", &t.id));
                    };
                    let entries = self.inner.store.message_readers(&t.id, &opener.id).await?;
                    let mut people: BTreeSet<PersonId> =
                        opener.recipients.iter().cloned().collect();
                    people.insert(t.opened_by.clone());
                    for p in people.into_iter().filter(|p| readers.contains(p)) {
                        if p != t.opened_by && self.kind_of(&p).await? == Some(PersonKind::External)
                        {
                            continue;
                        }
                        let of_p: Vec<&Option<String>> = entries
                            .iter()
                            .filter(|(q, _, _)| q == &p)
                            .map(|(_, r, _)| r)
                            .collect();
                        let narrowed = !of_p.is_empty() && of_p.iter().all(|r| r.is_some());
                        if narrowed {
                            narrow
                                .extend(of_p.into_iter().flatten().map(|r| (p.clone(), r.clone())));
                            // Her command to one of her agents is between her and that agent:
                            // she takes part as the reader she wrote with.
                            if p == t.opened_by {
                                let author = opener
                                    .connection
                                    .clone()
                                    .unwrap_or_else(|| PERSON_READER.to_owned());
                                narrow.insert((p.clone(), author));
                            }
                        } else {
                            whole.insert(p);
                        }
                    }
                }
                // A new thread: every other reader who is a member. Remote agents are only ever
                // named, and a party sees only its own tasks (SPEC §8).
                None => {
                    for p in readers {
                        if self.kind_of(p).await? == Some(PersonKind::Member) {
                            whole.insert(p.clone());
                        }
                    }
                }
            }
            // By default, a post reaches its author's person only through her other connections.
            if caller.connection.is_none() {
                whole.remove(caller.id());
            }
        }
        // A connection never receives its own post; the person who wrote in person is not told
        // about her own post either.
        narrow.remove(&(caller.id().clone(), own.key().to_owned()));
        narrow.retain(|(p, _)| !whole.contains(p));
        let skip = whole.contains(caller.id()).then(|| own.key().to_owned());
        // Her other agents' copy of her own post is not a recipient of it (no receipt, no
        // approval of her own request to others) unless she addressed herself: `to: alice`, or
        // a thread that is between her and her agents.
        let addressed_self = to.is_some_and(|to| to.iter().any(|a| a.person() == caller.id()))
            || narrow.iter().any(|(p, _)| p == caller.id())
            || (thread.is_some() && whole.contains(caller.id()) && whole.len() == 1);
        let mut persons: BTreeSet<PersonId> = whole;
        persons.extend(narrow.iter().map(|(p, _)| p.clone()));
        if !addressed_self {
            persons.remove(caller.id());
        }
        Ok((
            persons.into_iter().collect(),
            Addressing {
                connection: caller.connection.as_ref().map(|c| c.token.clone()),
                narrow: narrow.into_iter().collect(),
                skip,
            },
        ))
    }

    /// The kind of a person who was not removed (the directory cache answers).
    async fn kind_of(&self, person: &PersonId) -> Result<Option<PersonKind>> {
        Ok(self.inner.store.person(person).await?.map(|p| p.kind))
    }
}
