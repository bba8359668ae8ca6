// The conversation with the pytest driver (tests/interop/test_a2a_js.py): the scenarios ask it, one
// line on stdout each (`liaison-team ` and JSON), to act as the team's internal agent (alice's MCP
// client); it answers with one JSON line on stdin. Other stdout lines are logs.

import { createInterface } from 'node:readline';

const PROTOCOL = 'liaison-team ';
const pending = new Map();
let next = 1;

const lines = createInterface({ input: process.stdin });
lines.on('line', (line) => {
  const answer = JSON.parse(line);
  const waiter = pending.get(answer.id);
  if (!waiter) {
    throw new Error(`an answer to no request: ${line}`);
  }
  pending.delete(answer.id);
  if (answer.error) {
    waiter.reject(new Error(`the team could not ${waiter.op}: ${answer.error}`));
  } else {
    waiter.resolve(answer.result);
  }
});

function ask(op, args) {
  const id = next++;
  return new Promise((resolve, reject) => {
    pending.set(id, { resolve, reject, op });
    process.stdout.write(`${PROTOCOL}${JSON.stringify({ id, op, ...args })}\n`);
  });
}

/** Alice's agent posts in the task's thread (`kind`: question, announce, reply, …). */
export function post(task, kind, body) {
  return ask('post', { task, kind, body });
}

/**
 * Alice's agent waits in her inbox for the party's message that says `words` (a new task) and
 * answers it with `body` (a reply, after a claim when `claim`); resolves to the task's id.
 */
export function answerNext(words, body, claim = false) {
  return ask('answer_next', { words, body, claim });
}

/** Tells the driver which checks ran and ends the process (open gRPC channels would keep it). */
export function finish(checks) {
  lines.close();
  process.stdout.write(`${PROTOCOL}${JSON.stringify({ done: true, checks })}\n`, () => process.exit(0));
}
