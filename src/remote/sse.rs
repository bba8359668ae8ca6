//! Server-sent events read from a remote's response as they come: `event` and `data` fields, one
//! event per blank line; comments (keep-alives) skipped. An event larger than the cap ends the
//! stream with [`CallError::TooLarge`]; a read that fails (or idles past the client's idle
//! timeout) ends it with [`CallError::Transport`].

use futures::Stream;

use super::CallError;

/// One event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct SseEvent {
    /// The `event:` field (none for the default `message`).
    pub event: Option<String>,
    pub data: String,
}

/// Parser state: bytes not yet ending a line, and the fields of the event being read.
#[derive(Default)]
struct Parser {
    pending: Vec<u8>,
    event: Option<String>,
    data: Option<String>,
    /// Bytes of the event so far (fields included).
    size: usize,
}

impl Parser {
    /// Feeds bytes; returns the events they complete.
    fn feed(&mut self, bytes: &[u8], max: usize) -> Result<Vec<SseEvent>, CallError> {
        self.pending.extend_from_slice(bytes);
        let mut out = Vec::new();
        while let Some(end) = self.pending.iter().position(|b| *b == b'\n' || *b == b'\r') {
            // CRLF, LF and CR all end a line.
            let mut next = end + 1;
            if self.pending[end] == b'\r' {
                if next == self.pending.len() {
                    break; // a LF may follow in the next chunk
                }
                if self.pending[next] == b'\n' {
                    next += 1;
                }
            }
            let line = String::from_utf8_lossy(&self.pending[..end]).into_owned();
            self.pending.drain(..next);
            if let Some(event) = self.line(&line, max)? {
                out.push(event);
            }
        }
        if self.size + self.pending.len() > max {
            return Err(CallError::TooLarge { limit: max });
        }
        Ok(out)
    }

    fn line(&mut self, line: &str, max: usize) -> Result<Option<SseEvent>, CallError> {
        if line.is_empty() {
            self.size = 0;
            let event = self.event.take();
            return Ok(self.data.take().map(|data| SseEvent { event, data }));
        }
        self.size += line.len() + 1;
        if self.size > max {
            return Err(CallError::TooLarge { limit: max });
        }
        if line.starts_with(':') {
            return Ok(None);
        }
        let (field, value) = match line.split_once(':') {
            Some((f, v)) => (f, v.strip_prefix(' ').unwrap_or(v)),
            None => (line, ""),
        };
        match field {
            "data" => match &mut self.data {
                Some(data) => {
                    data.push('\n');
                    data.push_str(value);
                }
                None => self.data = Some(value.to_owned()),
            },
            "event" => self.event = Some(value.to_owned()),
            _ => {}
        }
        Ok(None)
    }
}

/// The events of `response`, each at most `max` bytes.
pub(super) fn events(
    response: reqwest::Response,
    max: usize,
) -> impl Stream<Item = Result<SseEvent, CallError>> + Send {
    let state = (
        Some(response),
        Parser::default(),
        std::collections::VecDeque::new(),
    );
    futures::stream::unfold(
        state,
        move |(mut response, mut parser, mut ready)| async move {
            loop {
                if let Some(event) = ready.pop_front() {
                    return Some((Ok(event), (response, parser, ready)));
                }
                let body = response.as_mut()?;
                match body.chunk().await {
                    Ok(Some(bytes)) => match parser.feed(&bytes, max) {
                        Ok(events) => ready.extend(events),
                        Err(e) => return Some((Err(e), (None, parser, ready))),
                    },
                    Ok(None) => return None,
                    Err(e) => {
                        let failure = crate::net::outbound::classify(&e);
                        return Some((Err(CallError::Transport(failure)), (None, parser, ready)));
                    }
                }
            }
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_split_on_blank_lines_whatever_the_line_endings_and_chunks() {
        let mut p = Parser::default();
        let mut got = Vec::new();
        for chunk in [
            &b": keep-alive\n\nda"[..],
            b"ta: {\"a\":1}\r",
            b"\n\r\nevent: error\ndata: x\ndata: y\n\n",
        ] {
            got.extend(p.feed(chunk, 1000).unwrap());
        }
        assert_eq!(
            got,
            vec![
                SseEvent {
                    event: None,
                    data: "{\"a\":1}".into()
                },
                SseEvent {
                    event: Some("error".into()),
                    data: "x\ny".into()
                },
            ]
        );
    }

    #[test]
    fn an_event_beyond_the_cap_is_refused_even_without_a_line_break() {
        let mut p = Parser::default();
        assert_eq!(
            p.feed(&[b'x'; 50], 40),
            Err(CallError::TooLarge { limit: 40 })
        );
        let mut p = Parser::default();
        let mut long = b"data: ".to_vec();
        long.extend([b'y'; 30]);
        long.push(b'\n');
        long.extend(b"data: zzzzzzzzzzzzzzzzzzz\n");
        assert_eq!(p.feed(&long, 40), Err(CallError::TooLarge { limit: 40 }));
    }
}
