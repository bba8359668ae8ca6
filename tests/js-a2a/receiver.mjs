// A webhook receiver for push notifications on 127.0.0.1: records every POST (path, headers, raw
// body) and keeps one per path and X-Liaison-Event-Id, as a receiver that deduplicates on it does
// (the id is the task's event: two configs of one task get the same ids).

import { createServer } from 'node:http';

export class Receiver {
  static async start() {
    const rx = new Receiver();
    await new Promise((resolve) => rx.server.listen(0, '127.0.0.1', resolve));
    rx.url = `http://127.0.0.1:${rx.server.address().port}/push`;
    return rx;
  }

  constructor() {
    this.got = [];
    this.seen = new Set();
    this.server = createServer((req, res) => {
      const chunks = [];
      req.on('data', (c) => chunks.push(c));
      req.on('end', () => {
        const id = `${req.url} ${req.headers['x-liaison-event-id']}`;
        if (!this.seen.has(id)) {
          this.seen.add(id);
          const body = Buffer.concat(chunks);
          const event = JSON.parse(body.toString('utf8'));
          const update = event.statusUpdate ?? event.artifactUpdate;
          this.got.push({
            path: req.url,
            headers: req.headers,
            body,
            taskId: update?.taskId,
            state: event.artifactUpdate ? 'artifact' : event.statusUpdate?.status?.state,
          });
        }
        res.writeHead(200, { 'Content-Length': '0' }).end();
      });
    });
  }

  /** Resolves to the events received once `predicate(events)` holds. */
  async until(predicate, what, timeoutMs = 30000) {
    const deadline = Date.now() + timeoutMs;
    while (!predicate(this.got)) {
      if (Date.now() > deadline) {
        throw new Error(`timed out waiting for ${what}; got ${JSON.stringify(this.got.map((e) => e.state))}`);
      }
      await new Promise((r) => setTimeout(r, 50));
    }
    return this.got;
  }

  close() {
    return new Promise((resolve) => this.server.close(resolve));
  }
}
