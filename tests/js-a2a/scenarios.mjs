// The A2A interop scenarios, driven by the official JavaScript SDK (`@a2a-js/sdk`) against a
// running liaison, on one binding:
//
//   node scenarios.mjs --url http://127.0.0.1:PORT --binding JSONRPC|HTTP+JSON|GRPC
//
// with the party's bearer token in LIAISON_PARTY_TOKEN and a member's in LIAISON_MEMBER_TOKEN. The
// team's side (alice's agent over MCP) is played by the pytest driver that started this process
// (team.mjs). Exits non-zero on the first failed check; the last stdout line lists the checks.

import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { parseArgs } from 'node:util';
import * as jose from 'jose';
import { AgentCard, Role, TaskState, verifyAgentCardSignature } from '@a2a-js/sdk';
import {
  ClientFactory,
  ClientFactoryOptions,
  DefaultAgentCardResolver,
  JsonRpcTransportFactory,
  RestTransportFactory,
} from '@a2a-js/sdk/client';
import { GrpcTransportFactory } from '@a2a-js/sdk/client/grpc';
import {
  A2AError,
  RequestMalformedError,
  TaskNotCancelableError,
  TaskNotFoundError,
  UnsupportedOperationError,
} from '@a2a-js/sdk/errors';
import { Receiver } from './receiver.mjs';
import { answerNext, finish, post } from './team.mjs';

const { values: args } = parseArgs({ options: { url: { type: 'string' }, binding: { type: 'string' } } });
const BASE = args.url;
const BINDING = args.binding;
const PARTY = process.env.LIAISON_PARTY_TOKEN;
const MEMBER = process.env.LIAISON_MEMBER_TOKEN;
assert.ok(BASE && BINDING && PARTY && MEMBER, 'usage: --url URL --binding B, LIAISON_PARTY_TOKEN, LIAISON_MEMBER_TOKEN');
const JWKS_URL = `${BASE}/.well-known/jwks.json`;
const DIRECT_ANSWERS = 'urn:liaison:a2a:direct-answers:v1';
const checks = [];

/** Runs one named check; its name goes into the report. */
async function check(name, body) {
  process.stderr.write(`[${BINDING}] ${name}\n`);
  await body();
  checks.push(name);
}

/** An interceptor that sends the bearer token with every call: a header on HTTP, metadata on gRPC. */
function bearer(token) {
  return {
    async before(call) {
      call.options.serviceParameters = { ...call.options.serviceParameters, Authorization: `Bearer ${token}` };
    },
    async after() {},
  };
}

async function clientFor(card, token) {
  const options = ClientFactoryOptions.createFrom(ClientFactoryOptions.default, {
    transports: [new JsonRpcTransportFactory(), new RestTransportFactory(), new GrpcTransportFactory()],
    preferredTransports: [BINDING],
    clientConfig: { interceptors: [bearer(token)] },
  });
  const client = await new ClientFactory(options).createFromAgentCard(card);
  assert.equal(client.transport.protocolName, BINDING);
  return client;
}

function text(parts) {
  return parts.map((p) => (p.content?.$case === 'text' ? p.content.value : `<${p.content?.$case}>`));
}

function userMessage(words, taskId = '', metadata = undefined) {
  return {
    messageId: crypto.randomUUID(),
    contextId: '',
    taskId,
    role: Role.ROLE_USER,
    parts: [{ content: { $case: 'text', value: words }, metadata: undefined, filename: '', mediaType: '' }],
    metadata,
    extensions: [],
    referenceTaskIds: [],
  };
}

function request(message, configuration = {}) {
  return {
    tenant: '',
    message,
    configuration: { acceptedOutputModes: [], taskPushNotificationConfig: undefined, returnImmediately: false, ...configuration },
    metadata: undefined,
  };
}

/** A non-blocking send: the task as it stands once liaison has taken the message. */
async function send(client, message, configuration = {}) {
  const result = await client.sendMessage(request(message, { returnImmediately: true, ...configuration }));
  assert.ok(!('messageId' in result), `expected a task, got a message: ${JSON.stringify(result)}`);
  return result;
}

async function expectError(kind, promise, what) {
  await assert.rejects(promise, (err) => {
    assert.ok(err instanceof kind, `${what}: expected ${kind.name}, got ${err?.constructor?.name}: ${err?.message}`);
    return true;
  });
}

// Errors the SDK has no class for (Unauthenticated, PermissionDenied) surface as its transport's
// generic A2AError: the code on the wire is what a client can check. InvalidParams is the SDK's
// RequestMalformedError; its wire code is checked too.
const WIRE = {
  INVALID_PARAMS: { JSONRPC: -32602, 'HTTP+JSON': 400, GRPC: 3 },
  UNAUTHENTICATED: { JSONRPC: -31401, 'HTTP+JSON': 401, GRPC: 16 },
  PERMISSION_DENIED: { JSONRPC: -31403, 'HTTP+JSON': 403, GRPC: 7 },
};

function wireCode(err) {
  return err.envelopeCode ?? err.statusCode ?? err.status;
}

async function expectWire(reason, promise, what, kind = A2AError) {
  await assert.rejects(promise, (err) => {
    assert.ok(err instanceof kind, `${what}: expected ${kind.name}, got ${err?.constructor?.name}: ${err?.stack}`);
    assert.equal(wireCode(err), WIRE[reason][BINDING], `${what}: ${err.constructor.name} ${err.message}`);
    return true;
  });
}

/** The shape of a stream's events after its first (the task): status states and artifact texts. */
function shape(events) {
  return events.slice(1).map(({ payload }) =>
    payload.$case === 'statusUpdate'
      ? `status ${TaskState[payload.value.status.state]}`
      : payload.$case === 'artifactUpdate'
        ? `artifact ${text(payload.value.artifact.parts).join('')}`
        : payload.$case,
  );
}

async function collect(stream, into) {
  for await (const event of stream) {
    into.push(event);
  }
}

async function until(predicate, what, timeoutMs = 20000) {
  const deadline = Date.now() + timeoutMs;
  while (!predicate()) {
    assert.ok(Date.now() < deadline, `timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

// --- the card --------------------------------------------------------------------------------

const resolver = new DefaultAgentCardResolver();
const card = await resolver.resolve(BASE);
const jwks = await (await fetch(JWKS_URL)).json();
const verifyJson = verifyAgentCardSignature(async (kid, jku) => {
  assert.equal(jku, JWKS_URL, 'the signature names liaison\'s JWKS');
  const jwk = jwks.keys.find((k) => k.kid === kid);
  assert.ok(jwk, `no key ${kid} in the JWKS`);
  return jose.importJWK(jwk, 'ES256');
});
// The SDK's verifier is given the card's ProtoJSON: in 1.3.0 its canonicalization drops
// `securitySchemes` (a oneof) from the SDK's own AgentCard objects, which the resolver and
// getAgentCard return, so every signed card that declares a scheme fails to verify in that form
// (a2aproject/a2a-js#663; docs/a2a-clients.md).
const verify = (c) => verifyJson(AgentCard.toJSON(c));

await check('card resolves and its signature verifies', async () => {
  assert.deepEqual(card.supportedInterfaces.map((i) => i.protocolBinding), ['JSONRPC', 'HTTP+JSON', 'GRPC']);
  assert.equal(card.capabilities.streaming, true);
  assert.equal(card.capabilities.pushNotifications, true);
  assert.ok(card.signatures.length >= 1);
  await verify(card);
  await assert.rejects(verify({ ...card, name: 'Evil Corp' }), 'a renamed card must not verify');
  await assert.rejects(verify({ ...card, skills: card.skills.slice(1) }), 'a card without a skill must not verify');
  await assert.rejects(verify({ ...card, securitySchemes: {} }), 'a card without its security scheme must not verify');
});

const client = await clientFor(card, PARTY);

await check('extended card over the binding, signed', async () => {
  assert.equal(card.capabilities.extendedAgentCard, true);
  // The SDK fetches it (GetExtendedAgentCard on the binding) only when the card says there is one.
  const extended = await client.getAgentCard();
  assert.notEqual(extended, card);
  await verify(extended);
  const partyMay = new Set(extended.skills.map((s) => s.id));
  assert.ok([...partyMay].every((id) => card.skills.some((s) => s.id === id)), 'only skills of the card');
  assert.ok(extended.skills.length >= 1);
  const direct = extended.capabilities.extensions.find((e) => e.uri === DIRECT_ANSWERS);
  assert.ok(direct, 'the extended card declares the direct-answers extension');
  assert.deepEqual(direct.params.skills, ['chat']);
});

// --- a task from SUBMITTED to COMPLETED ------------------------------------------------------

let completedId;
await check('send, get with history, follow-up, completion', async () => {
  const task = await send(client, userMessage('Which TLS versions does the webhook endpoint accept?'));
  assert.equal(task.status.state, TaskState.TASK_STATE_SUBMITTED);
  assert.ok(task.id && task.contextId);
  await post(task.id, 'question', 'Production or staging?');
  const asked = await client.getTask({ tenant: '', id: task.id });
  assert.equal(asked.status.state, TaskState.TASK_STATE_INPUT_REQUIRED);
  assert.deepEqual(text(asked.status.message.parts), ['Production or staging?']);
  assert.equal(asked.status.message.role, Role.ROLE_AGENT);

  const answered = await send(client, userMessage('Production', task.id));
  assert.equal(answered.id, task.id);
  assert.equal(answered.status.state, TaskState.TASK_STATE_WORKING);

  await post(task.id, 'reply', 'TLS 1.2 and 1.3');
  const done = await client.getTask({ tenant: '', id: task.id, historyLength: 2 });
  assert.equal(done.status.state, TaskState.TASK_STATE_COMPLETED);
  assert.deepEqual(done.artifacts.flatMap((a) => text(a.parts)), ['TLS 1.2 and 1.3']);
  assert.equal(done.history.length, 2);
  completedId = task.id;
});

await check('errors: unknown task, ended task, not cancelable, malformed requests', async () => {
  const unknown = 'thr_' + '0'.repeat(32);
  await expectError(TaskNotFoundError, client.getTask({ tenant: '', id: unknown }), 'GetTask of an unknown id');
  await expectError(TaskNotFoundError, client.cancelTask({ tenant: '', id: unknown, metadata: undefined }), 'CancelTask of an unknown id');
  await expectError(TaskNotFoundError, client.getTask({ tenant: '', id: 'not-even-an-id' }), 'GetTask of a malformed id');
  await expectError(TaskNotFoundError, collect(client.resubscribeTask({ tenant: '', id: unknown }), []), 'SubscribeToTask of an unknown id');
  await expectError(
    TaskNotFoundError,
    send(client, userMessage('Hello?', unknown)),
    'a message to an unknown task',
  );
  await expectError(TaskNotCancelableError, client.cancelTask({ tenant: '', id: completedId, metadata: undefined }), 'CancelTask of a completed task');
  await expectError(UnsupportedOperationError, send(client, userMessage('thanks', completedId)), 'a message to a completed task');
  await expectError(UnsupportedOperationError, collect(client.resubscribeTask({ tenant: '', id: completedId }), []), 'SubscribeToTask of a completed task');
  const bad = (what, promise) => expectWire('INVALID_PARAMS', promise, what, RequestMalformedError);
  await bad('a negative historyLength', client.getTask({ tenant: '', id: completedId, historyLength: -1 }));
  await bad('a pageSize above 100', client.listTasks({ tenant: '', contextId: '', status: 0, pageSize: 1000, pageToken: '', statusTimestampAfter: undefined }));
  await bad('a made-up pageToken', client.listTasks({ tenant: '', contextId: '', status: 0, pageToken: 'garbage', statusTimestampAfter: undefined }));
  await bad('a message without parts', send(client, { ...userMessage('x'), parts: [] }));
  // Nothing changed: the completed task is as it was.
  const still = await client.getTask({ tenant: '', id: completedId });
  assert.equal(still.status.state, TaskState.TASK_STATE_COMPLETED);
});

await check('a member token is refused on A2A, its task not revealed', async () => {
  const member = await clientFor(card, MEMBER);
  await expectWire('PERMISSION_DENIED', member.getTask({ tenant: '', id: completedId }), 'GetTask with a member token');
  await expectWire('PERMISSION_DENIED', collect(member.resubscribeTask({ tenant: '', id: completedId }), []), 'SubscribeToTask with a member token');
  const stranger = await clientFor(card, 'lsn_not_a_token');
  await expectWire('UNAUTHENTICATED', stranger.getTask({ tenant: '', id: completedId }), 'GetTask with a bad token');
  await expectWire('UNAUTHENTICATED', send(stranger, userMessage('Let me in')), 'SendMessage with a bad token');
});

await check('cancel (idempotent) and list with paging and a status filter', async () => {
  const other = await send(client, userMessage('Never mind this one'));
  for (let i = 0; i < 2; i++) {
    const canceled = await client.cancelTask({ tenant: '', id: other.id, metadata: undefined });
    assert.equal(canceled.status.state, TaskState.TASK_STATE_CANCELED);
  }
  const all = await client.listTasks({ tenant: '', contextId: '', status: TaskState.TASK_STATE_UNSPECIFIED, pageToken: '', statusTimestampAfter: undefined });
  assert.deepEqual(all.tasks.map((t) => t.id), [other.id, completedId]);
  assert.equal(all.totalSize, 2);
  const first = await client.listTasks({ tenant: '', contextId: '', status: 0, pageSize: 1, pageToken: '', statusTimestampAfter: undefined });
  assert.deepEqual(first.tasks.map((t) => t.id), [other.id]);
  assert.ok(first.nextPageToken);
  const second = await client.listTasks({ tenant: '', contextId: '', status: 0, pageSize: 1, pageToken: first.nextPageToken, statusTimestampAfter: undefined });
  assert.deepEqual(second.tasks.map((t) => t.id), [completedId]);
  assert.equal(second.nextPageToken, '');
  const done = await client.listTasks({ tenant: '', contextId: '', status: TaskState.TASK_STATE_COMPLETED, pageToken: '', statusTimestampAfter: undefined });
  assert.deepEqual(done.tasks.map((t) => t.id), [completedId]);
  assert.deepEqual(done.tasks[0].artifacts, [], 'artifacts only when asked for');
  const full = await client.listTasks({ tenant: '', contextId: '', status: TaskState.TASK_STATE_COMPLETED, pageToken: '', historyLength: 1, includeArtifacts: true, statusTimestampAfter: undefined });
  assert.deepEqual(full.tasks[0].artifacts.flatMap((a) => text(a.parts)), ['TLS 1.2 and 1.3']);
  assert.equal(full.tasks[0].history.length, 1);
  const since = all.tasks[0].status.timestamp;
  const later = await client.listTasks({ tenant: '', contextId: '', status: 0, pageToken: '', statusTimestampAfter: since });
  assert.ok(later.tasks.every((t) => t.status.timestamp >= since), 'statusTimestampAfter filters');
  assert.ok(!later.tasks.some((t) => t.id === completedId), 'the older task is before the newest status');
  const mine = await client.listTasks({ tenant: '', contextId: other.contextId, status: 0, pageToken: '', statusTimestampAfter: undefined });
  assert.deepEqual(mine.tasks.map((t) => t.id), [other.id]);
});

// --- streams ---------------------------------------------------------------------------------

await check('stream and resubscribe see the same events in order', async () => {
  const streamed = [];
  const subscribed = [];
  const streaming = collect(client.sendMessageStream(request(userMessage('Please summarise the outage.'))), streamed);
  await until(() => streamed.length > 0, 'the stream\'s first event');
  assert.equal(streamed[0].payload.$case, 'task');
  const taskId = streamed[0].payload.value.id;
  const subscription = collect(client.resubscribeTask({ tenant: '', id: taskId }), subscribed);
  await until(() => subscribed.length > 0, 'the subscription\'s first event');
  assert.equal(subscribed[0].payload.$case, 'task');
  assert.equal(subscribed[0].payload.value.id, taskId);
  await post(taskId, 'announce', 'On it');
  await post(taskId, 'reply', 'Disk full on db-2');
  await Promise.all([streaming, subscription]);
  const expected = ['status TASK_STATE_WORKING', 'artifact Disk full on db-2', 'status TASK_STATE_COMPLETED'];
  assert.deepEqual(shape(streamed), expected);
  assert.deepEqual(shape(subscribed), expected);
});

await check('a stream ends at INPUT_REQUIRED; a new subscription follows to the end', async () => {
  const streamed = [];
  const streaming = collect(client.sendMessageStream(request(userMessage('Can you rotate the key?'))), streamed);
  await until(() => streamed.length > 0, 'the stream\'s first event');
  const taskId = streamed[0].payload.value.id;
  await post(taskId, 'question', 'Which key?');
  await streaming;
  assert.deepEqual(shape(streamed), ['status TASK_STATE_INPUT_REQUIRED']);
  const subscribed = [];
  const subscription = collect(client.resubscribeTask({ tenant: '', id: taskId }), subscribed);
  await until(() => subscribed.length > 0, 'the subscription\'s first event');
  assert.equal(subscribed[0].payload.value.status.state, TaskState.TASK_STATE_INPUT_REQUIRED);
  await send(client, userMessage('The webhook signing key', taskId));
  await post(taskId, 'reply', 'Rotated');
  await subscription;
  assert.deepEqual(shape(subscribed), ['status TASK_STATE_WORKING', 'artifact Rotated', 'status TASK_STATE_COMPLETED']);
});

// --- direct answers --------------------------------------------------------------------------

await check('a conversational skill answers with a Message, blocking and streaming', async () => {
  const chat = (words) => userMessage(words, '', { skill: 'chat' });
  const [answer] = await Promise.all([client.sendMessage(request(chat('Is staging up?'))), answerNext('Is staging up?', 'Yes')]);
  assert.ok('messageId' in answer, `expected a Message, got ${JSON.stringify(answer)}`);
  assert.deepEqual(text(answer.parts), ['Yes']);
  assert.equal(answer.role, Role.ROLE_AGENT);
  assert.equal(answer.taskId, '');
  assert.ok(answer.contextId);

  const events = [];
  await Promise.all([collect(client.sendMessageStream(request(chat('Is prod up?'))), events), answerNext('Is prod up?', 'Also yes')]);
  assert.deepEqual(events.map((e) => e.payload.$case), ['message']);
  assert.deepEqual(text(events[0].payload.value.parts), ['Also yes']);

  // Claimed before the reply: the task, completed, with the reply as its artifact.
  const [task] = await Promise.all([client.sendMessage(request(chat('Upgrade staging'))), answerNext('Upgrade staging', 'Done', true)]);
  assert.ok(!('messageId' in task), 'a claimed task answers with the task');
  assert.equal(task.status.state, TaskState.TASK_STATE_COMPLETED);
  assert.deepEqual(task.artifacts.flatMap((a) => text(a.parts)), ['Done']);
});

// --- push notifications ----------------------------------------------------------------------

await check('push configs: set inline, create, get, list, delete; a private address refused', async () => {
  const rx = await Receiver.start();
  try {
    const token = 'tok-' + crypto.randomUUID();
    const inline = { tenant: '', id: '', taskId: '', url: rx.url, token, authentication: undefined };
    const task = await send(client, userMessage('Ping over push?'), { taskPushNotificationConfig: inline });
    const listed = await client.listTaskPushNotificationConfig({ tenant: '', taskId: task.id, pageSize: 0, pageToken: '' });
    assert.deepEqual(listed.configs.map((c) => c.url), [rx.url]);
    const inlineId = listed.configs[0].id;
    assert.ok(inlineId);

    const second = await client.createTaskPushNotificationConfig({
      tenant: '', id: '', taskId: task.id, url: `${rx.url}/second`, token: '',
      authentication: { scheme: 'Bearer', credentials: 'receiver-secret' },
    });
    assert.equal(second.taskId, task.id);
    assert.ok(second.id && second.id !== inlineId);
    const fetched = await client.getTaskPushNotificationConfig({ tenant: '', taskId: task.id, id: second.id });
    assert.equal(fetched.url, `${rx.url}/second`);
    assert.equal(fetched.authentication?.scheme, 'Bearer');
    const both = await client.listTaskPushNotificationConfig({ tenant: '', taskId: task.id, pageSize: 0, pageToken: '' });
    assert.deepEqual(new Set(both.configs.map((c) => c.id)), new Set([inlineId, second.id]));
    await client.deleteTaskPushNotificationConfig({ tenant: '', taskId: task.id, id: second.id });
    const after = await client.listTaskPushNotificationConfig({ tenant: '', taskId: task.id, pageSize: 0, pageToken: '' });
    assert.deepEqual(after.configs.map((c) => c.id), [inlineId]);
    await expectError(TaskNotFoundError, client.getTaskPushNotificationConfig({ tenant: '', taskId: task.id, id: second.id }), 'a deleted config');
    await expectError(TaskNotFoundError, client.listTaskPushNotificationConfig({ tenant: '', taskId: 'thr_' + '0'.repeat(32), pageSize: 0, pageToken: '' }), 'configs of an unknown task');

    // A private literal address is refused when stored, and nothing changes.
    await expectWire('INVALID_PARAMS', client.createTaskPushNotificationConfig({
      tenant: '', id: '', taskId: task.id, url: 'http://10.1.2.3/hook', token: '', authentication: undefined,
    }), 'a private push address', RequestMalformedError);
    const unchanged = await client.listTaskPushNotificationConfig({ tenant: '', taskId: task.id, pageSize: 0, pageToken: '' });
    assert.deepEqual(unchanged.configs.map((c) => c.id), [inlineId]);

    // The team works while the party is not connected: the pushes carry every event.
    await post(task.id, 'question', 'Production or staging?');
    await send(client, userMessage('Production', task.id));
    await post(task.id, 'reply', 'Pong');
    const path = new URL(rx.url).pathname;
    const got = await rx.until((all) => all.some((e) => e.state === 'TASK_STATE_COMPLETED'), 'the COMPLETED push');
    // The deleted config may have had its replay of what came before it (SUBMITTED), nothing after.
    const toDeleted = got.filter((e) => e.path !== path).map((e) => e.state);
    assert.ok(toDeleted.every((s) => s === 'TASK_STATE_SUBMITTED'), `the deleted config got ${toDeleted}`);
    const events = got.filter((e) => e.path === path);
    assert.deepEqual(events.map((e) => e.state), [
      'TASK_STATE_SUBMITTED', 'TASK_STATE_INPUT_REQUIRED', 'TASK_STATE_WORKING', 'artifact', 'TASK_STATE_COMPLETED',
    ]);
    const keys = jose.createLocalJWKSet(await (await fetch(JWKS_URL)).json());
    for (const event of events) {
      assert.equal(event.headers['x-a2a-notification-token'], token);
      const jwt = event.headers.authorization.replace(/^Bearer /, '');
      const { payload, protectedHeader } = await jose.jwtVerify(jwt, keys, { issuer: BASE, audience: rx.url, algorithms: ['ES256'] });
      assert.ok(protectedHeader.kid);
      assert.equal(payload.taskId, task.id);
      assert.equal(payload.request_body_sha256, createHash('sha256').update(event.body).digest('hex'));
      assert.equal(event.taskId, task.id);
    }
  } finally {
    await rx.close();
  }
});

finish(checks);
