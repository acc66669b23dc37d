// One scenario suite, run with both clients against the real server on the backend under test:
// paging 250 pets, a create whose answer is lost retried and replayed, a real 429 and a real 503
// waited out, the 412 flow, every event kind received from a real delivery and unwrapped, and no
// answer at all. Each scenario has the same outcome whichever client runs it: the TypeScript one
// in this process, the Python one (test/fixtures/python/parity.py) in a process of its own.
import { spawn } from 'node:child_process';
import { createHmac } from 'node:crypto';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import t from 'tap';
import {
  createClient,
  isPetstoreError,
  PetstoreError,
  PetstoreNetworkError,
  PetstoreWebhookError,
  type ReceivedEvent,
  type Retry,
  unwrap,
} from '../clients/typescript/src/v1.js';
import { unwrap as unwrapV2 } from '../clients/typescript/src/index.js';
import { deliveredVersion } from './helpers/delivered-version.js';

/** The unwrap of the version whose payloads the server delivers to the suites' endpoints. */
const unwrapDelivered: typeof unwrap = deliveredVersion === 'v1' ? unwrap : unwrapV2;
import { projectRoot } from '../src/contract/paths.js';
import { conformingFetch, listen, startApi, type TapTest, type TestApi } from './helpers/api.js';
import { conformingProxy } from './helpers/conforming-proxy.js';
import { closedPort, startReceiver } from './helpers/receiver.js';
import { losingFirstAnswer } from './helpers/lost-answer.js';
import { outage } from './helpers/outage.js';
import { devPython, PIP_ENV, pythonClientDir } from './helpers/python.js';
import { declaredEvents, eventually, start } from './helpers/webhooks.js';
import { contract } from './helpers/contract.js';

type Outcome = Record<string, unknown>;
const CLIENTS = ['typescript', 'python'] as const;

/**
 * Runs scenario `name` with the Python client: `input` on its first line of stdin; each line it
 * prints before its outcome goes to `onLine`, whose answer (if any) is written back.
 */
async function python(
  t: TapTest,
  name: string,
  env: { baseUrl: string; key: string },
  input: unknown = {},
  onLine?: (line: string) => Promise<string | undefined>,
): Promise<Outcome> {
  // Its every answer checked against the contract on the way, as the TypeScript client's are.
  const proxy = await conformingProxy(t, env.baseUrl);
  const child = spawn(await devPython(), [join(projectRoot, 'test', 'fixtures', 'python', 'parity.py'), name], {
    env: {
      ...PIP_ENV,
      PYTHONPATH: join(pythonClientDir, 'src'),
      PETSTORE_BASE_URL: proxy.baseUrl,
      PETSTORE_API_KEY: env.key,
    },
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  let stderr = '';
  child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  const exited = new Promise<number | null>((resolve) => child.once('close', resolve));
  child.stdin.write(`${JSON.stringify(input)}\n`);
  let last = '';
  for await (const line of createInterface({ input: child.stdout })) {
    last = line;
    if (line.startsWith('{')) continue;
    const answer = await onLine?.(line);
    if (answer !== undefined) child.stdin.write(answer);
  }
  child.stdin.end();
  const code = await exited;
  if (code !== 0) throw new Error(`parity.py ${name} exited ${code}: ${stderr}`);
  t.same(proxy.failures, [], "every answer the Python client saw is the contract's");
  return JSON.parse(last) as Outcome;
}

async function served(t: TapTest, api?: TestApi) {
  const server = api ?? (await startApi(t));
  const { baseUrl } = await listen(t, server);
  return { api: server, baseUrl, key: server.key };
}

/**
 * Bodies signed rightly with `secret` that the server would never send: empty, JSON `null`, and a
 * test event behind a byte order mark; each handed to `attempt` with its headers.
 */
function signedBy(secret: string, attempt: (body: Buffer, headers: Record<string, string>) => unknown) {
  const timestamp = String(Math.floor(Date.now() / 1000));
  const event = JSON.stringify({ type: 'webhook.test', timestamp: new Date().toISOString(), data: { webhookId: 1 } });
  const bodies = {
    empty: Buffer.alloc(0),
    null: Buffer.from('null'),
    bom: Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), Buffer.from(event)]),
  };
  return Object.fromEntries(
    Object.entries(bodies).map(([name, body]) => {
      const mac = createHmac('sha256', Buffer.from(secret.slice('whsec_'.length), 'base64'))
        .update(`evt_${name}.${timestamp}.`)
        .update(body)
        .digest('base64');
      const headers = { 'webhook-id': `evt_${name}`, 'webhook-timestamp': timestamp, 'webhook-signature': `v1,${mac}` };
      return [name, () => attempt(body, headers)];
    }),
  );
}

const retriesOf = (retries: Retry[]) =>
  retries.map(({ attempt, delayMs, failure }) => ({
    attempt,
    retry_after: failure instanceof PetstoreError ? (failure.retryAfter ?? null) : null,
    delay_ms: delayMs,
    failure: failure.name,
    status: failure instanceof PetstoreError ? failure.status : null,
    code: failure instanceof PetstoreError ? failure.code : null,
  }));

for (const client of CLIENTS) {
  t.test(`${client}: every item of 250, page after page`, async (t) => {
    const { api, baseUrl, key } = await served(t);
    const ids: number[] = [];
    for (let i = 0; i < 250; i++) {
      const outcome = await api.storage.pets.create({ name: `Pet ${i}`, categoryId: 1, status: 'available' });
      if (outcome.outcome === 'created') ids.push(outcome.created.pet.id);
    }
    let outcome: Outcome;
    if (client === 'python') outcome = await python(t, 'paging', { baseUrl, key });
    else {
      const petstore = createClient({ baseUrl, apiKey: key, fetch: conformingFetch });
      const every: number[] = [];
      for await (const pet of petstore.each('listPets', { query: { limit: 100 } })) every.push(pet.id);
      const pages: number[] = [];
      let page = await petstore.page('listPets', { query: { limit: 100 } });
      pages.push(page.items.length);
      while (page.next !== undefined) {
        page = await petstore.page('listPets', { query: { limit: 100, cursor: page.next } });
        pages.push(page.items.length);
      }
      outcome = { ids: every, pages, async_ids: every };
    }
    t.same(outcome.ids, ids, 'all 250, each once, in id order');
    t.same(outcome.async_ids, ids, 'and the same asynchronously');
    t.same(outcome.pages, [100, 100, 50], 'three pages');
  });

  t.test(`${client}: a create whose answer is lost is sent again and replayed`, async (t) => {
    const { api, baseUrl, key } = await served(t);
    const proxy = await losingFirstAnswer(t, Number(new URL(baseUrl).port));
    const through = `http://127.0.0.1:${proxy.port}${contract.basePath}`;
    let outcome: Outcome;
    if (client === 'python') outcome = await python(t, 'lost_create', { baseUrl, key }, { base_url: through });
    else {
      const retries: Retry[] = [];
      const petstore = createClient({
        baseUrl: through,
        apiKey: key,
        backoffMs: 1,
        onRetry: (r) => void retries.push(r),
      });
      const created = await petstore.createPet({ body: { name: 'Once', categoryId: 1 } });
      outcome = {
        status: created.status,
        replayed: created.replayed,
        id: created.data.id,
        retries: retriesOf(retries),
      };
    }
    t.ok(proxy.lost(), 'the first answer was lost');
    t.match(outcome, { status: 201, replayed: true, retries: [{ failure: 'PetstoreNetworkError' }] });
    t.equal((outcome.retries as unknown[]).length, 1, 'sent twice');
    const stored = await api.request({ method: 'GET', url: '/v1/pets', headers: api.auth });
    t.same(
      stored.json<{ id: number }[]>().map(({ id }) => id),
      [outcome.id],
      'one pet, not two',
    );
  });

  /**
   * A create through a real failure: `before` runs as the client is about to send, `end` once it
   * has seen the failure and is about to retry.
   */
  async function waitedOut(
    t: TapTest,
    api: TestApi,
    { before, end }: { before: () => Promise<void>; end: () => Promise<void> },
  ): Promise<Outcome> {
    const { baseUrl, key } = await served(t, api);
    if (client === 'python') {
      return python(t, 'wait_out', { baseUrl, key }, {}, async (line) => {
        await (line === 'ready' ? before() : end());
        return '\n';
      });
    }
    const retries: Retry[] = [];
    const petstore = createClient({
      baseUrl,
      apiKey: key,
      fetch: conformingFetch,
      onRetry: async (retry) => {
        retries.push(retry);
        if (retries.length === 1) await end();
      },
    });
    await before();
    const created = await petstore.createPet({ body: { name: 'Patient', categoryId: 1 } });
    return { status: created.status, name: created.data.name, retries: retriesOf(retries) };
  }

  /** The retry waited what Retry-After said, and no longer than the client's limit. */
  function waitedAsAsked(t: TapTest, outcome: Outcome): void {
    const retries = outcome.retries as { retry_after: number | null; delay_ms: number }[];
    t.equal(retries.length, 1, 'retried once');
    const [retry] = retries;
    t.ok((retry?.retry_after ?? 0) > 0, 'the answer said how long to wait');
    t.equal(retry?.delay_ms, (retry?.retry_after ?? 0) * 1000, 'and the client waited that long');
  }

  t.test(`${client}: a real 429 is waited out as Retry-After says`, async (t) => {
    const api = await startApi(t, { rateLimit: { perMinute: 1, authFailuresPerMinute: 0 } });
    t.equal((await api.request({ method: 'GET', url: '/v1/pets', headers: api.auth })).statusCode, 200);
    const realNow = Date.now;
    t.teardown(() => {
      Date.now = realNow;
    });
    // 58 s later, as the limit's clock (this process's Date.now) sees it: Retry-After says 2 or less.
    const outcome = await waitedOut(t, api, {
      before: async () => {
        Date.now = () => realNow() + 58_000;
      },
      end: async () => undefined,
    });
    t.match(outcome, { status: 201, retries: [{ status: 429, code: 'rate_limited' }] });
    waitedAsAsked(t, outcome);
  });

  t.test(`${client}: a real 503 is waited out, and the create made once`, async (t) => {
    const database = await outage(t);
    const api = await startApi(t, { databaseUrl: database.databaseUrl });
    const outcome = await waitedOut(t, api, { before: database.begin, end: database.end });
    t.match(outcome, { status: 201, name: 'Patient', retries: [{ status: 503, code: 'service_unavailable' }] });
    waitedAsAsked(t, outcome);
    const stored = await api.request({ method: 'GET', url: '/v1/pets', headers: api.auth });
    t.equal(stored.json<unknown[]>().length, 1, 'one pet, not two');
  });

  t.test(`${client}: the 412 flow, and modify reading again`, async (t) => {
    const { baseUrl, key } = await served(t);
    let outcome: Outcome;
    if (client === 'python') outcome = await python(t, 'precondition', { baseUrl, key });
    else {
      const petstore = createClient({ baseUrl, apiKey: key, fetch: conformingFetch });
      const created = await petstore.createPet({ body: { name: 'Rex', categoryId: 1 } });
      const petId = created.data.id;
      const renamed = await petstore.updatePet({
        path: { petId },
        header: { 'If-Match': created.etag },
        body: { name: 'Rexy' },
      });
      const error = await petstore
        .updatePet({ path: { petId }, header: { 'If-Match': created.etag }, body: { name: 'Stale' } })
        .catch((caught: unknown) => caught);
      const stale =
        isPetstoreError(error, 'updatePet') && error.code === 'precondition_failed'
          ? { status: error.status, code: error.code, etag_is_current: error.etag === renamed.etag }
          : {};
      const page = await petstore.listPets({ query: { limit: 10 } });
      const refused = await petstore
        .updatePet({ path: { petId }, header: { 'If-Match': page.etag as string }, body: { name: 'Unconditional' } })
        .then(
          () => '',
          (caught: unknown) => (caught instanceof TypeError ? caught.message : ''),
        );
      let reads = 0;
      let interfered = false;
      const modified = await petstore.modify(
        async () => {
          reads++;
          return petstore.listPets({ query: { id: [petId] } });
        },
        async (current) => {
          if (!interfered) {
            interfered = true;
            await petstore.updatePet({ path: { petId }, body: { categoryId: 2 } });
          }
          return petstore.updatePet({
            path: { petId },
            header: { 'If-Match': current.etag },
            body: { name: `${current.data[0]?.name ?? ''}!` },
          });
        },
      );
      const again = await petstore.modify(
        () => petstore.listPets({ query: { id: [petId] } }),
        (current) =>
          petstore.updatePet({
            path: { petId },
            header: { 'If-Match': current.etag },
            body: { name: `${current.data[0]?.name ?? ''}?` },
          }),
      );
      outcome = { stale, refused, reads, modified: modified.data, async_name: again.data.name };
    }
    t.same(
      outcome.stale,
      { status: 412, code: 'precondition_failed', etag_is_current: true },
      'a stale If-Match is a 412',
    );
    t.match(outcome.refused, /If-Match/, 'an absent ETag given as If-Match is refused before sending');
    t.equal(outcome.reads, 2, 'the write found it changed (412), so it was read again');
    t.match(outcome.modified, { name: 'Rexy!', categoryId: 2, status: 'available' });
    t.equal(outcome.async_name, 'Rexy!?');
  });

  t.test(`${client}: every event kind, from a real delivery, unwrapped`, async (t) => {
    const api = await start(t);
    const { baseUrl, key } = await served(t, api);
    const petstore = createClient({ baseUrl, apiKey: key, fetch: conformingFetch });
    const receiver = await startReceiver(t);
    const kinds = Object.keys(declaredEvents) as ReceivedEvent['type'][];
    const endpoint = await petstore.createWebhook({ body: { url: receiver.url, events: kinds } });
    const rotated = await petstore.rotateWebhookSecret({ path: { webhookId: endpoint.data.id } });
    const sold = await petstore.createPet({ body: { name: 'Zoë', categoryId: 1 } });
    await petstore.updatePet({ path: { petId: sold.data.id }, body: { name: 'Zoë soon' } });
    const order = await petstore.placeOrder({ body: { petId: sold.data.id } });
    await petstore.updateOrder({ path: { orderId: order.data.id }, body: { status: 'completed' } });
    const kept = await petstore.createPet({ body: { name: 'Kept', categoryId: 2 } });
    const cancelled = await petstore.placeOrder({ body: { petId: kept.data.id } });
    await petstore.updateOrder({ path: { orderId: cancelled.data.id }, body: { status: 'cancelled' } });
    await petstore.deletePet({ path: { petId: kept.data.id } });
    await petstore.testWebhook({ path: { webhookId: endpoint.data.id } });
    const secrets = [endpoint.data.secret, rotated.data.secret];
    await eventually(
      'every kind delivered',
      async () =>
        new Set(receiver.received.map(({ body }) => (JSON.parse(body) as { type: string }).type)).size === kinds.length,
    );
    const deliveries = receiver.received.map(({ body, headers }) => ({
      body: Buffer.from(body).toString('base64'),
      headers: Object.fromEntries(Object.entries(headers).filter(([name]) => name.startsWith('webhook-'))) as Record<
        string,
        string
      >,
    }));
    let outcome: Outcome;
    if (client === 'python') {
      outcome = await python(t, 'events', { baseUrl, key }, { secrets, deliveries, version: deliveredVersion });
    } else {
      const received = deliveries.map(({ body, headers }) => {
        const bytes = Buffer.from(body, 'base64');
        const event = unwrapDelivered(bytes, headers, secrets);
        const alone = secrets.map((secret) => unwrapDelivered(bytes.toString(), headers, [secret]).id);
        return { id: event.id, type: event.type, data: event.data, alone };
      });
      const [first] = deliveries;
      const body = Buffer.from(first?.body ?? '', 'base64');
      const headers = first?.headers ?? {};
      const checks: Record<string, string> = {};
      for (const [name, attempt] of Object.entries({
        tampered: () => unwrap(body.toString().replace('"data"', '"data" '), headers, secrets),
        other_secret: () => unwrap(body, headers, [`whsec_${Buffer.alloc(24).toString('base64')}`]),
        too_big: () => unwrap(body, headers, secrets, { maxBodyBytes: 16 }),
        old: () => unwrap(body, headers, secrets, { now: () => 4_000_000_000_000 }),
        ...signedBy(secrets[0] ?? '', (bytes, signed) => unwrap(bytes, signed, secrets)),
      })) {
        try {
          attempt();
          checks[name] = 'accepted';
        } catch (error) {
          checks[name] = error instanceof PetstoreWebhookError ? error.check : 'other error';
        }
      }
      outcome = { received, checks };
    }
    const received = outcome.received as { id: string; type: string; data: Record<string, unknown>; alone: string[] }[];
    t.same(new Set(received.map(({ type }) => type)), new Set(kinds), 'every kind');
    t.ok(
      received.every(({ id, alone }) => alone.every((one) => one === id)),
      'each verified with either secret alone',
    );
    t.ok(
      received.some(({ type, data }) => type === 'pet.created' && data.name === 'Zoë'),
      'typed data',
    );
    t.same(
      received.map(({ id }) => id).sort(),
      deliveries.map(({ headers }) => headers['webhook-id']).sort(),
      'each with its webhook-id',
    );
    t.same(outcome.checks, {
      tampered: 'signature',
      other_secret: 'signature',
      too_big: 'size',
      old: 'timestamp',
      empty: 'payload',
      null: 'payload',
      bom: 'accepted',
    });
  });

  t.test(`${client}: no answer is a network error, retried only where safe`, async (t) => {
    const port = await closedPort();
    const baseUrl = `http://127.0.0.1:${port}${contract.basePath}`;
    let outcome: Outcome;
    if (client === 'python')
      outcome = await python(t, 'network', { baseUrl, key: 'psk_unused' }, { base_url: baseUrl });
    else {
      const retries: Retry[] = [];
      const petstore = createClient({
        baseUrl,
        apiKey: 'psk_unused',
        attempts: 3,
        backoffMs: 1,
        onRetry: (retry) => void retries.push(retry),
      });
      const read = await petstore.listPets().catch((error: unknown) => error);
      const readRetries = retries.length;
      retries.length = 0;
      const change = await petstore
        .updatePet({ path: { petId: 1 }, body: { name: 'x' } })
        .catch((error: unknown) => error);
      outcome = {
        read: { error: (read as Error).name, retries: readRetries },
        change: { error: (change as Error).name, retries: retries.length },
      };
      t.ok(read instanceof PetstoreNetworkError && !(read instanceof PetstoreError));
    }
    t.same(outcome, {
      read: { error: 'PetstoreNetworkError', retries: 2 },
      change: { error: 'PetstoreNetworkError', retries: 0 },
    });
  });
}
