import { randomUUID } from 'node:crypto';
import t from 'tap';
import type { EventType } from '../src/domain/events.js';
import type { VersionChange } from '../src/versions/change.js';
import { VersionChain } from '../src/versions/chain.js';
import { eventsByVersion } from '../src/versions/changes/events-by-version.js';
import { API_VERSIONS } from '../src/versions/index.js';
import type { TapTest, TestApi } from './helpers/api.js';
import { probeDatabase } from './helpers/backend.js';
import { contract as v1, servedVersions } from './helpers/contract.js';
import { type Received, startReceiver } from './helpers/receiver.js';
import { eventually, patch, payloadConforms, start, verified, type WithSecret } from './helpers/webhooks.js';

// Events by version (issue 51, change 6): each endpoint receives its events in the API version it
// names (`apiVersion`), set by the path it was made through and changed with v2's PATCH. The outbox
// keeps v2's payload; the worker migrates it down per delivery and signs exactly the bytes it sends.

const v2 = servedVersions.contract;
/** RFC 3339 UTC with milliseconds, as v2's timestamps are written. */
const ISO_MILLISECONDS = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;
type Endpoint = WithSecret & { apiVersion?: string };

/** An endpoint subscribed through `base` (`/v1`, `/v2`), with `fields` added to its create. */
async function subscribedThrough(api: TestApi, base: string, url: string, events: EventType[], fields = {}) {
  const response = await api.request({
    method: 'POST',
    url: `${base}/webhooks`,
    headers: api.auth,
    payload: { url, events, ...fields },
  });
  if (response.statusCode !== 201) throw new Error(`createWebhook: ${response.statusCode} ${response.body}`);
  return response.json<Endpoint>();
}

async function read(api: TestApi, url: string) {
  const response = await api.request({ method: 'GET', url, headers: api.auth });
  if (response.statusCode !== 200) throw new Error(`GET ${url}: ${response.statusCode} ${response.body}`);
  return response.json();
}

/** The endpoints of a listWebhooks answer: a bare array, or the `{data, nextCursor}` envelope v2's lists become. */
function listed(body: unknown): Endpoint[] {
  return (Array.isArray(body) ? body : (body as { data: unknown[] }).data) as Endpoint[];
}

/** A pet created through v2 (with the Idempotency-Key v2's creates take). */
async function createPet(api: TestApi, name: string) {
  const response = await api.request({
    method: 'POST',
    url: '/v2/pets',
    headers: { ...api.auth, 'idempotency-key': randomUUID() },
    payload: { name, categoryId: 1 },
  });
  if (response.statusCode !== 201) throw new Error(`createPet: ${response.statusCode} ${response.body}`);
}

/** A delivery's payload, verified (standardwebhooks) over exactly the bytes received. */
function payloadOf(t: TapTest, endpoint: Endpoint, received: Received | undefined) {
  if (received === undefined) throw new Error('nothing received');
  const payload = verified(endpoint.secret, received);
  t.same(JSON.parse(received.body), payload, 'the signature verifies over the bytes received');
  return payload as { type: string; data: { name: string } };
}

t.test(
  "an endpoint is of the version it was made through; v2 shows and changes it, v1's bodies never show it",
  async (t) => {
    const api = await start(t);
    const receiver = await startReceiver(t);
    const throughV1 = await subscribedThrough(api, '/v1', receiver.url, ['pet.created']);
    const throughV2 = await subscribedThrough(api, '/v2', receiver.url, ['pet.created']);
    const namingV1 = await subscribedThrough(api, '/v2', receiver.url, ['pet.created'], { apiVersion: 'v1' });

    t.notOk('apiVersion' in throughV1, "v1's create answers without apiVersion");
    t.equal(throughV2.apiVersion, 'v2', 'made through v2: v2');
    t.equal(namingV1.apiVersion, 'v1', 'a v2 create may name v1');
    t.match(
      await read(api, `/v2/webhooks/${throughV1.id}`),
      { apiVersion: 'v1' },
      'made through v1: v1, seen through v2',
    );
    t.same(
      listed(await read(api, '/v2/webhooks')).map(({ id, apiVersion }) => ({ id, apiVersion })),
      [
        { id: throughV1.id, apiVersion: 'v1' },
        { id: throughV2.id, apiVersion: 'v2' },
        { id: namingV1.id, apiVersion: 'v1' },
      ],
      "v2's list shows each one's",
    );

    // Every body v1 answers an endpoint in, for endpoints of both versions.
    const v1Bodies = [
      ...listed(await read(api, '/v1/webhooks')),
      (await read(api, `/v1/webhooks/${throughV2.id}`)) as Endpoint,
      (await patch(api, `/v1/webhooks/${throughV2.id}`, { enabled: true })).json<Endpoint>(),
      (
        await api.request({ method: 'POST', url: `/v1/webhooks/${throughV2.id}/secret`, headers: api.auth })
      ).json<Endpoint>(),
    ];
    t.equal(v1Bodies.length, 6);
    t.same(
      v1Bodies.filter((body) => 'apiVersion' in body),
      [],
      "v1's list, get, patch and rotation answers have no apiVersion",
    );
    t.match(await read(api, `/v2/webhooks/${throughV2.id}`), { apiVersion: 'v2' }, "v1's patch leaves the version");

    const refused = await patch(api, `/v1/webhooks/${throughV1.id}`, { apiVersion: 'v2' });
    t.equal(refused.statusCode, 400, "v1's contract has no apiVersion to patch");
    const unknown = await patch(api, `/v2/webhooks/${throughV1.id}`, { apiVersion: 'v3' });
    t.equal(unknown.statusCode, 400, 'a version v2 does not serve is refused');
    t.match(await read(api, `/v2/webhooks/${throughV1.id}`), { apiVersion: 'v1' }, 'and changes nothing');
    const upgraded = await patch(api, `/v2/webhooks/${throughV1.id}`, { apiVersion: 'v2' });
    t.match(upgraded.json(), { id: throughV1.id, apiVersion: 'v2' }, "v2's PATCH changes it");

    // An endpoint inserted as a server of before migration 014 does (during a rolling upgrade): v1.
    const probe = await probeDatabase(t, api.databaseUrl, { writable: true });
    await probe.query(
      `INSERT INTO webhook_endpoints (account_id, url, events, secret, created_at, updated_at)
     SELECT account_id, url, events, secret, created_at, updated_at FROM webhook_endpoints WHERE id = ${throughV2.id}`,
    );
    const older = listed(await read(api, '/v2/webhooks')).at(-1);
    t.equal(older?.apiVersion, 'v1', 'an endpoint whose insert names no version is v1');
  },
);

/**
 * A change made for the test: v1's pet events carry the name with ` (v1)` after it, so that which
 * version a delivery is in shows in its bytes whatever the real changes migrate.
 */
const namedForV1: VersionChange = {
  description: 'v1 pet events name the pet with (v1) after it.',
  covers: [],
  eventDown: (event) => {
    if (!event.type.startsWith('pet.')) return event;
    const data = event.payload.data as { name: string };
    return { ...event, payload: { ...event.payload, data: { ...data, name: `${data.name} (v1)` } } };
  },
};

t.test("each delivery carries the payload in its endpoint's version, signed over the bytes sent", async (t) => {
  const [first, ...later] = API_VERSIONS;
  if (first === undefined) throw new Error('no versions');
  const apiVersions = [first, ...later.map((version) => ({ ...version, changes: [...version.changes, namedForV1] }))];
  const api = await start(t, { versions: { ...servedVersions, apiVersions } });
  const [atV1, atV2] = [await startReceiver(t), await startReceiver(t)];
  const endpointA = await subscribedThrough(api, '/v1', atV1.url, ['pet.created']);
  const endpointB = await subscribedThrough(api, '/v2', atV2.url, ['pet.created']);

  await createPet(api, 'Rex');
  await Promise.all([atV1.waitFor(1), atV2.waitFor(1)]);
  const toV1 = payloadOf(t, endpointA, atV1.received[0]);
  const toV2 = payloadOf(t, endpointB, atV2.received[0]);
  t.equal(toV1.data.name, 'Rex (v1)', 'the v1 endpoint gets the payload migrated down');
  t.equal(toV2.data.name, 'Rex', 'the v2 endpoint gets it as the outbox keeps it');
  t.ok(payloadConforms('pet.created', toV1, v1), "v1's payload is what v1's contract declares");
  t.ok(payloadConforms('pet.created', toV2, v2), "v2's is what v2's declares");
  t.equal(atV1.received[0]?.headers['webhook-id'], atV2.received[0]?.headers['webhook-id'], 'one event, one id');

  // Each one's version swapped: the next deliveries follow.
  await patch(api, `/v2/webhooks/${endpointA.id}`, { apiVersion: 'v2' });
  await patch(api, `/v2/webhooks/${endpointB.id}`, { apiVersion: 'v1' });
  await createPet(api, 'Tom');
  await Promise.all([atV1.waitFor(2), atV2.waitFor(2)]);
  t.equal(payloadOf(t, endpointA, atV1.received[1]).data.name, 'Tom', 'A, upgraded, gets v2 from its next delivery');
  t.equal(payloadOf(t, endpointB, atV2.received[1]).data.name, 'Tom (v1)', 'B, made v1, gets v1');
});

t.test("events through the served chain: each endpoint's payload is its own version's contract", async (t) => {
  const api = await start(t);
  const [atV1, atV2] = [await startReceiver(t), await startReceiver(t)];
  const endpointA = await subscribedThrough(api, '/v1', atV1.url, ['pet.created']);
  const endpointB = await subscribedThrough(api, '/v2', atV2.url, ['pet.created']);
  await createPet(api, 'Rex');
  await Promise.all([atV1.waitFor(1), atV2.waitFor(1)]);
  const toV1 = payloadOf(t, endpointA, atV1.received[0]);
  const toV2 = payloadOf(t, endpointB, atV2.received[0]);
  t.ok(payloadConforms('pet.created', toV1, v1), 'v1 gets what v1 declares');
  t.ok(payloadConforms('pet.created', toV2, v2), 'v2 gets what v2 declares');
  // petTimestamps (change 4): v2's Pet says when it was made and changed; v1's has its four fields.
  t.match(toV2.data, { name: 'Rex', createdAt: ISO_MILLISECONDS, updatedAt: ISO_MILLISECONDS }, 'v2: with timestamps');
  t.same(Object.keys(toV1.data).sort(), ['categoryId', 'id', 'name', 'status'], 'v1: without');
  const v2WithoutTimestamps: Record<string, unknown> = { ...toV2.data };
  delete v2WithoutTimestamps.createdAt;
  delete v2WithoutTimestamps.updatedAt;
  t.same(toV1.data, v2WithoutTimestamps, 'the same pet otherwise');
});

t.test('an endpoint of a version this server does not serve: its attempts fail unsent, saying why', async (t) => {
  const api = await start(t);
  const receiver = await startReceiver(t);
  const endpoint = await subscribedThrough(api, '/v2', receiver.url, ['pet.created']);
  // As a newer server, rolled back from, may have left it.
  const probe = await probeDatabase(t, api.databaseUrl, { writable: true });
  await probe.query(`UPDATE webhook_endpoints SET api_version = 'v9' WHERE id = ${endpoint.id}`);
  await createPet(api, 'Rex');
  let attempts: { error?: string }[] = [];
  await eventually('an attempt is recorded', async () => {
    attempts = listed(await read(api, `/v2/webhooks/${endpoint.id}/deliveries`)) as { error?: string }[];
    return attempts.length > 0;
  });
  t.match(attempts[0], { error: /^not sent: .*v9, which this server does not serve/ });
  t.equal(receiver.received.length, 0, 'nothing was sent');
});

t.test("the change itself takes apiVersion out of v1's endpoint bodies, whatever v1's serializer would", async (t) => {
  // The change alone: the served chain's listEnvelopes makes v1's bare list after it.
  const chain = new VersionChain([
    { major: 1, changes: [] },
    { major: 2, changes: [eventsByVersion] },
  ]);
  const endpoint = { id: 1, url: 'https://hooks.example.com/', apiVersion: 'v2' };
  const down = (operationId: string, body: unknown, status = 200) =>
    chain.responseDown(1, { operationId, params: {}, status, headers: {}, body }).body;
  t.same(down('getWebhook', endpoint), { id: 1, url: 'https://hooks.example.com/' });
  t.same(endpoint.apiVersion, 'v2', "v2's body is left as it was");
  t.same(down('listWebhooks', [endpoint]), [{ id: 1, url: 'https://hooks.example.com/' }], 'a bare list');
  t.same(
    down('listWebhooks', { data: [endpoint], nextCursor: null }),
    { data: [{ id: 1, url: 'https://hooks.example.com/' }], nextCursor: null },
    'an envelope, as v2 lists become',
  );
  const error = { code: 'not_found', message: 'No webhook endpoint with id 1', status: 404 };
  t.same(down('getWebhook', error, 404), error, 'an error is not an endpoint');
});
