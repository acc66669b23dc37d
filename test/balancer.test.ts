// Two instances behind HAProxy (deploy/haproxy.cfg as shipped) on PostgreSQL and Redis, as
// deploy/run-local.sh starts them: clients reach them over HTTPS through the balancer only. Always
// on PostgreSQL, whatever PETSTORE_TEST_BACKEND says.
import { spawn } from 'node:child_process';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import type { IncomingHttpHeaders } from 'node:http';
import { Agent, request as httpsRequest } from 'node:https';
import { join } from 'node:path';
import { Ajv2020 } from 'ajv/dist/2020.js';
import t from 'tap';
import { databaseUrl, freePort, onServer } from '../scripts/local-servers.js';
import { projectRoot } from '../src/contract/paths.js';
import type { Pet } from '../src/storage/types.js';
import { parseRawResponse, temporaryDirectory, type Teardown } from './helpers/api.js';
import { assertConforms, contract } from './helpers/contract.js';
import {
  type Balancer,
  balancerCertificate,
  checkConfiguration,
  haproxyMissing,
  startBalancer,
  TEST_CERT_FILE,
} from './helpers/haproxy.js';
import { sharedPostgres } from './helpers/postgres.js';
import { databaseWithKey, type ServerProcess, startServerProcess } from './helpers/process.js';
import { redisMissing, startRedis } from './helpers/redis.js';

const noHaproxy = haproxyMissing();
const skip = noHaproxy || redisMissing();
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

interface Answer {
  status: number;
  headers: IncomingHttpHeaders;
  body: string;
  /** How the answer departs from openapi.yaml, if it does. */
  violation?: string;
}

/**
 * A client of the balancer over HTTPS, trusting the test certificate (or `ca`), connecting from its own
 * loopback address (127.0.0.2 and 127.0.0.3 are as much this host as 127.0.0.1), connections kept
 * alive. Every answer is checked against openapi.yaml.
 */
function balancerClient(t: Teardown, origin: string, { from = '127.0.0.1', key = '', ca = TEST_CERT_FILE } = {}) {
  const agent = new Agent({ keepAlive: true, ca: readFileSync(ca), localAddress: from });
  t.teardown(() => agent.destroy());
  return (method: string, path: string, { body, headers = {} }: { body?: object; headers?: object } = {}) =>
    new Promise<Answer>((resolve, reject) => {
      const url = `${contract.basePath}${path}`;
      const sent = httpsRequest(
        `${origin}${url}`,
        {
          method,
          agent,
          headers: {
            ...(key === '' ? {} : { authorization: `Bearer ${key}` }),
            ...(body === undefined
              ? {}
              : { 'content-type': method === 'PATCH' ? 'application/merge-patch+json' : 'application/json' }),
            ...headers,
          },
        },
        (response) => {
          let text = '';
          response.on('data', (chunk: Buffer) => (text += chunk.toString()));
          response.on('end', () => {
            const answer: Answer = { status: response.statusCode ?? 0, headers: response.headers, body: text };
            try {
              assertConforms(method, url, { statusCode: answer.status, headers: answer.headers, body: text });
            } catch (error) {
              answer.violation = (error as Error).message;
            }
            resolve(answer);
          });
          response.on('error', reject);
        },
      );
      sent.on('error', reject);
      sent.end(body === undefined ? undefined : JSON.stringify(body));
    });
}

type Client = ReturnType<typeof balancerClient>;

interface Deployment {
  key: string;
  balancer: Balancer;
  instances: ServerProcess[];
  /** Starts instance `i` again on its port (the balancer's configuration names it). */
  restart(i: number): Promise<void>;
}

/** Redis, a database with a key, two instances trusting the balancer's X-Forwarded-For, the balancer. */
async function startDeployment(
  t: Teardown,
  env: Record<string, string> = {},
  balancerEnv: Record<string, string> = {},
): Promise<Deployment> {
  const redis = await startRedis(t);
  const databaseUrl = await (await sharedPostgres()).newDatabase(t);
  const key = await databaseWithKey(databaseUrl);
  const ports = [await freePort(), await freePort()];
  const settings = {
    DATABASE_URL: databaseUrl,
    REDIS_URL: redis.url,
    // HAProxy connects to the instances from 127.0.0.1.
    TRUST_PROXY: '127.0.0.1',
    RATE_LIMIT_PER_MINUTE: '0',
    // A stopping instance stays up, not ready, until two failed checks have taken it out.
    SHUTDOWN_DELAY_MS: '3000',
    ...env,
  };
  const start = (i: number) => startServerProcess(t, { ...settings, PORT: String(ports[i]) });
  const instances = [await start(0), await start(1)];
  const balancer = await startBalancer(
    t,
    ports.map((port) => `127.0.0.1:${port}`),
    { env: balancerEnv },
  );
  const restart = async (i: number) => {
    instances[i] = await start(i);
  };
  return { key, balancer, instances, restart };
}

interface Outcome {
  operation: string;
  /** Safe for the balancer to send again after the instance read it (see deploy/haproxy.cfg). */
  replayable: boolean;
  sentAt: number;
  answeredAt: number;
  status?: number;
  failure?: string | undefined;
}

/**
 * An open loop of mixed reads and writes at a steady rate: a list, a pet by id, a create (every
 * other one with an Idempotency-Key when `keyedCreates`), a rename, in turn. Every acknowledged
 * create is kept.
 */
class SteadyLoad {
  readonly outcomes: Outcome[] = [];
  readonly created: Pet[] = [];
  private readonly pending = new Set<Promise<void>>();
  private timer: NodeJS.Timeout | undefined;
  private sent = 0;

  constructor(
    private readonly call: Client,
    private readonly perSecond: number,
    private readonly keyedCreates = false,
  ) {}

  start(): void {
    this.timer = setInterval(() => this.fire(), 1000 / this.perSecond);
  }

  /** Sends `count` more requests of the same mix at once. */
  burst(count: number): void {
    for (let i = 0; i < count; i += 1) this.fire();
  }

  /** Requests sent and not yet answered. */
  inFlight(): number {
    return this.pending.size;
  }

  async stop(): Promise<Outcome[]> {
    clearInterval(this.timer);
    while (this.pending.size > 0) await Promise.all(this.pending);
    return this.outcomes;
  }

  private fire(): void {
    const turn = this.sent++;
    const known = this.created[turn % Math.max(1, this.created.length)];
    const keyed = this.keyedCreates && turn % 8 === 2;
    const requests: [string, boolean, () => Promise<Answer>][] = [
      ['listPets', true, () => this.call('GET', '/pets?limit=20')],
      ['getPet', true, () => this.call('GET', `/pets/${known?.id ?? 1}`)],
      [
        'createPet',
        keyed,
        () =>
          this.call('POST', '/pets', {
            body: { name: `load ${turn}`, categoryId: 1 + (turn % 5) },
            headers: keyed ? { 'idempotency-key': `load-${turn}` } : {},
          }),
      ],
      ['updatePet', false, () => this.call('PATCH', `/pets/${known?.id ?? 1}`, { body: { name: `renamed ${turn}` } })],
    ];
    // Reads and renames need a pet: until the first is acknowledged, every turn creates.
    const [operation, replayable, send] = requests[known === undefined ? 2 : turn % 4] as (typeof requests)[0];
    const sentAt = Date.now();
    const done = send().then(
      (answer) => {
        // A success is a 2xx the contract declares for the operation (the violation check says which).
        const succeeded = answer.status >= 200 && answer.status < 300;
        const failure = answer.violation ?? (succeeded ? undefined : `${answer.status} ${answer.body}`);
        this.outcomes.push({ operation, replayable, sentAt, answeredAt: Date.now(), status: answer.status, failure });
        if (failure === undefined && operation === 'createPet') this.created.push(JSON.parse(answer.body) as Pet);
      },
      (error: unknown) => {
        this.outcomes.push({ operation, replayable, sentAt, answeredAt: Date.now(), failure: String(error) });
      },
    );
    this.pending.add(done);
    void done.finally(() => this.pending.delete(done));
  }
}

/** Every pet, page by page through the balancer. */
async function listAll(call: Client): Promise<Map<number, Pet>> {
  const pets = new Map<number, Pet>();
  let path: string | undefined = '/pets?limit=100';
  while (path !== undefined) {
    const page = await call('GET', path);
    if (page.status !== 200 || page.violation !== undefined) throw new Error(`listing: ${page.status} ${page.body}`);
    for (const pet of JSON.parse(page.body) as Pet[]) pets.set(pet.id, pet);
    path = /^<\/v1([^>]+)>; rel="next"$/.exec(String(page.headers.link ?? ''))?.[1];
  }
  return pets;
}

/** The pets `load` was answered 201 for that the deployment does not have. */
async function lostPets(call: Client, load: SteadyLoad): Promise<Pet[]> {
  const stored = await listAll(call);
  return load.created.filter((pet) => !stored.has(pet.id));
}

function summary(outcomes: Outcome[]): string {
  const counts = new Map<string, number>();
  for (const { operation } of outcomes) counts.set(operation, (counts.get(operation) ?? 0) + 1);
  return [...counts].map(([operation, count]) => `${count} ${operation}`).join(', ');
}

const LOAD_PER_SECOND = 100;

/** A deployment under a steady load, running for a second already. */
async function underLoad(t: Teardown, keyedCreates = false) {
  const deployment = await startDeployment(t);
  const call = balancerClient(t, deployment.balancer.origin, { key: deployment.key });
  const load = new SteadyLoad(call, LOAD_PER_SECOND, keyedCreates);
  load.start();
  await sleep(1000);
  return { deployment, call, load };
}

t.test(
  'deploy/haproxy.cfg: accepted as shipped, its error files the contract Error body',
  { skip: noHaproxy },
  async (t) => {
    const documented = {
      PETSTORE_LB_CERT: balancerCertificate(t),
      PETSTORE_INSTANCE_1: '127.0.0.1:3001',
      PETSTORE_INSTANCE_2: '127.0.0.1:3002',
    };
    const { code, output } = checkConfiguration(documented);
    t.equal(code, 0, output);
    t.match(output, /Configuration file is valid/);
    t.notMatch(output, /WARNING/, 'with no warning (none for the stats frontend, which logs nothing)');
    const unset = checkConfiguration({});
    t.not(unset.code, 0, 'without the required settings it refuses');
    t.match(unset.output, /set PETSTORE_LB_CERT, PETSTORE_INSTANCE_1 and PETSTORE_INSTANCE_2/, unset.output);

    const isErrorBody = new Ajv2020({ strict: false }).compile(
      contract.dereferenced.components?.schemas?.Error as object,
    );
    const codes = (contract.dereferenced.components?.schemas?.ErrorCode as { enum: string[] }).enum;
    const errors = join(projectRoot, 'deploy/errors');
    t.same(readdirSync(errors).sort(), ['502.http', '503.http', '504.http']);
    for (const file of readdirSync(errors)) {
      const raw = readFileSync(join(errors, file), 'utf8');
      const answer = parseRawResponse(raw);
      const status = Number(file.slice(0, 3));
      t.equal(answer.statusCode, status, `${file}: its status line`);
      const body = JSON.parse(answer.body) as { code: string; status: number };
      t.ok(isErrorBody(body), `${file}: the body is an Error: ${JSON.stringify(isErrorBody.errors)}`);
      t.equal(body.status, status, `${file}: with its status`);
      t.ok(codes.includes(body.code), `${file}: and a code of ErrorCode's (${body.code})`);
      t.equal(answer.headers['content-type'], 'application/json');
      t.equal(answer.headers['content-length'], String(Buffer.byteLength(answer.body)), `${file}: Content-Length`);
      t.match(answer.headers['retry-after'], /^[1-9]\d*$/, `${file}: Retry-After`);
      if (status !== 503) {
        // The instance may have carried the request out: a create retried without its key would be made twice.
        t.match(body, { message: /may or may not have been carried out.*Idempotency-Key/ }, `${file}: outcome unknown`);
      }
      t.match(raw, /^[^]*?\r\n\r\n/, 'CRLF line ends, as HTTP has them');
    }
  },
);

t.test(
  'with no instance ready, the balancer answers 503 itself, as the contract says',
  { skip: noHaproxy },
  async (t) => {
    const nobody = [`127.0.0.1:${await freePort()}`, `127.0.0.1:${await freePort()}`];
    const balancer = await startBalancer(t, nobody, { expect: 'DOWN' });
    const answer = await balancerClient(t, balancer.origin, { key: 'psk_any' })('GET', '/pets');
    t.equal(answer.violation, undefined, 'a 503 listPets declares: Error body, Retry-After');
    t.equal(answer.status, 503);
    t.equal(answer.headers['content-type'], 'application/json');
    t.match(JSON.parse(answer.body), { code: 'service_unavailable', status: 503 });
    const id = String(answer.headers['x-request-id']);
    t.match(id, UUID, 'with a request id of its own');
    // HAProxy writes its line once the answer is sent: it may come a moment after.
    for (let waited = 0; !balancer.output().includes(id) && waited < 5000; waited += 50) await sleep(50);
    t.match(balancer.output(), `${id} "GET `, 'as in its log line');
  },
);

t.test(
  'rolling restart under load: SIGTERM, start, healthy, then the other: no failed request',
  { skip },
  async (t) => {
    const { deployment, call, load } = await underLoad(t);
    for (const i of [0, 1]) {
      const name = `instance${i + 1}`;
      const stopped = deployment.instances[i]?.stop('SIGTERM');
      await deployment.balancer.waitFor(name, 'DOWN');
      t.equal(await stopped, 0, `${name} is taken out by its checks, then stops and exits 0`);
      await deployment.restart(i);
      await deployment.balancer.waitFor(name, 'UP');
      const before = load.outcomes.length;
      while (load.outcomes.length < before + 100) await sleep(50);
      t.match(deployment.instances[i]?.output(), /"url":"\/v1\/pets/, `${name} serves again once healthy`);
    }
    const outcomes = await load.stop();
    const failed = outcomes.filter((outcome) => outcome.failure !== undefined);
    t.comment(`rolling restart: ${outcomes.length} requests (${summary(outcomes)}), ${failed.length} failed`);
    t.same(failed, [], 'no request failed: no 5xx, no reset, no answer outside the contract');
    t.same(await lostPets(call, load), [], `every one of the ${load.created.length} acknowledged pets is stored`);
  },
);

t.test(
  'SIGKILL under load: reads are retried on the other instance; at most its in-flight requests fail',
  { skip },
  async (t) => {
    const { deployment, call, load } = await underLoad(t, true);
    // A request takes a few milliseconds, so a kill at 100 requests a second finds about none in
    // flight. Stopped first (as a hung instance is), the instance holds those the balancer sends it.
    deployment.instances[0]?.child.kill('SIGSTOP');
    load.burst(24);
    await sleep(200);
    const signalledAt = Date.now();
    const heldAtSignal = load.inFlight();
    // The kernel still accepts connections for a stopped process until it is gone: requests sent
    // until its exit was seen may have been on it too.
    await deployment.instances[0]?.stop('SIGKILL');
    const killedAt = Date.now();
    await deployment.balancer.waitFor('instance1', 'DOWN');
    await sleep(1000);
    const outcomes = await load.stop();
    const inFlight =
      heldAtSignal + outcomes.filter((outcome) => outcome.sentAt > signalledAt && outcome.sentAt <= killedAt).length;
    const failed = outcomes.filter((outcome) => outcome.failure !== undefined);
    const retried = outcomes.filter(
      (outcome) =>
        outcome.replayable && outcome.sentAt <= killedAt && outcome.answeredAt > signalledAt && !outcome.failure,
    );
    t.comment(
      `SIGKILL: ${outcomes.length} requests (${summary(outcomes)}), ${inFlight} in flight at the kill: ` +
        `${retried.length} reads and keyed creates served all the same, ${failed.length} failed` +
        failed.map((f) => `\n  ${f.operation}: ${f.failure ?? ''}`).join(''),
    );
    t.ok(retried.length > 0, 'requests safe to replay that were in flight on the killed instance were served');
    t.ok(
      failed.length <= inFlight,
      `failures (${failed.length}) at most the requests in flight at the kill (${inFlight})`,
    );
    t.same(
      failed.filter((outcome) => outcome.sentAt > killedAt || outcome.replayable),
      [],
      'every failure was in flight at the kill and unsafe to replay: reads and keyed creates were retried',
    );
    // HAProxy 2.6 answers its 502 to a request that came first on its connection; on a kept-alive
    // one it closes the connection without an answer (so that a browser would resend it).
    t.same(
      failed.filter((outcome) => outcome.status !== 502 && outcome.failure !== 'Error: socket hang up'),
      [],
      "each failure is the balancer's 502 (deploy/errors/502.http) or a connection it closed unanswered",
    );
    t.same(await lostPets(call, load), [], `every one of the ${load.created.length} acknowledged pets is stored`);
  },
);

t.test('through the balancer, each client address has its own failed-authentication count', { skip }, async (t) => {
  const deployment = await startDeployment(t, { AUTH_FAILURES_PER_MINUTE: '2' });
  const wrongKey = { key: 'psk_notakeyatallnotakeyatallnotakeyat' };
  const first = balancerClient(t, deployment.balancer.origin, { ...wrongKey, from: '127.0.0.2' });
  const second = balancerClient(t, deployment.balancer.origin, { ...wrongKey, from: '127.0.0.3' });
  const fail = async (call: Client, headers = {}) => {
    const answer = await call('GET', '/pets', { headers });
    t.equal(answer.violation, undefined);
    return answer.status;
  };
  t.equal(await fail(first), 401);
  t.equal(await fail(first), 401);
  t.equal(await fail(first), 429, 'the client that failed twice is limited');
  t.equal(await fail(second), 401, 'another client behind the same balancer is not');
  t.equal(await fail(second), 401);
  t.equal(await fail(second), 429, 'and has a count of its own');
  t.equal(
    await fail(first, { 'x-forwarded-for': '203.0.113.9' }),
    429,
    'a client naming another address in X-Forwarded-For is still counted as itself',
  );
  // The instances' logs come through pipes: a line may follow its answer by a moment.
  const logs = () => deployment.instances.map((instance) => instance.output()).join('');
  const loggedBoth = () => ['2', '3'].every((n) => logs().includes(`"client":"127.0.0.${n}"`));
  for (let waited = 0; !loggedBoth() && waited < 5000; waited += 50) await sleep(50);
  t.match(logs(), /"client":"127\.0\.0\.2"/, "the instances log the client's address, not the balancer's");
  t.match(logs(), /"client":"127\.0\.0\.3"/);
});

t.test('HTTPS at the balancer: its certificate, and no plain HTTP', { skip }, async (t) => {
  const deployment = await startDeployment(t);
  const answer = await balancerClient(t, deployment.balancer.origin, { key: deployment.key })('GET', '/pets');
  t.equal(answer.violation, undefined);
  t.equal(answer.status, 200, 'served over TLS, the certificate checked against the test CA');
  t.same(JSON.parse(answer.body), []);
  await t.rejects(
    fetch(`${deployment.balancer.origin}/v1/pets`),
    'a client that does not trust the certificate is refused by its own TLS check',
  );
  await t.rejects(fetch(deployment.balancer.origin.replace('https:', 'http:')), 'plain HTTP is not spoken');
});

t.test(
  'a burst waits in the balancer and is served; a queue that stands is cut short with a 503',
  { skip },
  async (t) => {
    // One request at a time an instance, so that 200 at once queue in the balancer.
    const burstOf = async (balancerEnv: Record<string, string>) => {
      const deployment = await startDeployment(t, {}, { PETSTORE_LB_MAXCONN: '1', ...balancerEnv });
      const call = balancerClient(t, deployment.balancer.origin, { key: deployment.key });
      return Promise.all(Array.from({ length: 200 }, () => call('GET', '/pets')));
    };
    const burst = await burstOf({ PETSTORE_LB_STANDING_QUEUE: '0', PETSTORE_LB_BURST_MS: '10000' });
    t.same(
      burst.map((answer) => answer.status),
      burst.map(() => 200),
      'a queue younger than PETSTORE_LB_BURST_MS is let grow: every request served',
    );
    const standing = await burstOf({ PETSTORE_LB_STANDING_QUEUE: '0', PETSTORE_LB_BURST_MS: '0' });
    const refused = standing.filter((answer) => answer.status === 503);
    t.ok(refused.length > 0, `past it, a request finding others waiting is refused (${refused.length} of 200)`);
    t.ok(
      standing.every((answer) => answer.status === 200 || answer.status === 503),
      'the others are served',
    );
    t.same(
      refused.filter((answer) => answer.violation !== undefined || answer.headers['retry-after'] === undefined),
      [],
      "each refusal is the contract's Error with Retry-After",
    );
  },
);

/** deploy/run-local.sh (or its `roll`), run as docs/deploy.md gives it, from a folder of its own. */
function runLocal(t: Teardown, env: Record<string, string>, args: string[] = []) {
  const child = spawn(join(projectRoot, 'deploy/run-local.sh'), args, {
    cwd: temporaryDirectory(t),
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
  child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  t.teardown(async () => {
    if (child.exitCode !== null || child.signalCode !== null) return;
    // Its trap stops what it started and removes what it made.
    child.kill('SIGTERM');
    await exited;
  });
  return {
    output: () => output,
    exited,
    /** Resolves with the first match of `pattern` in what it printed, once it has printed it. */
    printed: async (pattern: RegExp) => {
      const deadline = Date.now() + 90_000;
      for (let match = pattern.exec(output); ; match = pattern.exec(output)) {
        if (match !== null) return match;
        if (child.exitCode !== null) throw new Error(`run-local.sh exited ${child.exitCode}: ${output}`);
        if (Date.now() > deadline) throw new Error(`run-local.sh did not print ${pattern} within 90 s: ${output}`);
        await sleep(100);
      }
    },
    interrupt: () => child.kill('SIGINT'),
  };
}

t.test(
  'deploy/run-local.sh as docs/deploy.md gives it: creates the database, starts the stack, rolls every instance under load with no failed request, and cleans up',
  { skip },
  async (t) => {
    const redis = await startRedis(t);
    // A database that does not exist yet, on the tests' server: the script creates it.
    const existing = await (await sharedPostgres()).newDatabase(t);
    const databaseName = `${new URL(existing).pathname.slice(1)}_deploy`;
    const databaseUrlToCreate = databaseUrl(existing, databaseName);
    t.teardown(() =>
      onServer(databaseUrl(existing, 'postgres'), `DROP DATABASE IF EXISTS ${databaseName} WITH (FORCE)`),
    );
    const [lbPort, statsPort] = [await freePort(), await freePort()];
    const runDir = join(temporaryDirectory(t), 'run');
    const where = {
      // The documented settings, on free loopback ports and a folder of the test's own.
      PETSTORE_INSTANCE_PORTS: `${await freePort()} ${await freePort()}`,
      METRICS_PORT: '0',
      PETSTORE_LB_ADDRESS: `127.0.0.1:${lbPort}`,
      PETSTORE_LB_STATS: `127.0.0.1:${statsPort}`,
      PETSTORE_RUN_DIR: runDir,
    };
    const stack = runLocal(t, {
      DATABASE_URL: databaseUrlToCreate,
      REDIS_URL: redis.url,
      ...where,
      // What docs/deploy.md says a load test needs: one key is otherwise refused past 1,000 a minute.
      RATE_LIMIT_PER_MINUTE: '0',
      // No shedding: the tests share a busy machine (test/helpers/process.ts).
      OVERLOAD_MAX_EVENT_LOOP_DELAY_MS: '0',
    });
    const [, certificate] = await stack.printed(/^balancer: \S+ \(certificate: (\S+),/m);
    t.match(stack.output(), `created the database ${databaseName}`);
    const [, key] = await stack.printed(/^(psk_\S+)$/m);
    t.match(
      stack.output(),
      `curl -H 'Authorization: Bearer ${key}' https://127.0.0.1:${lbPort}/v1/pets`,
      "the development key's curl names the balancer",
    );
    const call = balancerClient(t, `https://127.0.0.1:${lbPort}`, { key, ca: certificate });

    const traced = await call('GET', '/pets', { headers: { 'x-request-id': 'deploy-trace-1' } });
    t.equal(traced.status, 200);
    t.equal(traced.headers['x-request-id'], 'deploy-trace-1', "a client's request id is kept");
    const untraced = await call('GET', '/pets');
    t.match(untraced.headers['x-request-id'], UUID, 'the balancer gives one to a request without');
    // The instance's line and HAProxy's for each: the id an operator finds both by.
    for (const id of ['deploy-trace-1', String(untraced.headers['x-request-id'])]) {
      t.ok(await stack.printed(new RegExp(`"reqId":"${id}"`)), `${id}: the instance's reqId`);
      t.ok(
        await stack.printed(new RegExp(`\\] api~ instances/instance\\d .* ${id} "GET `)),
        `${id}: in HAProxy's line`,
      );
    }

    const load = new SteadyLoad(call, 50);
    load.start();
    await sleep(1000);
    const roll = runLocal(t, { PETSTORE_RUN_DIR: runDir }, ['roll']);
    t.equal(await roll.exited, 0, roll.output());
    t.match(roll.output(), /instance1 \(pid \d+\): back in rotation\n[^]*instance2 \(pid \d+\): back in rotation/);
    const before = load.outcomes.length;
    while (load.outcomes.length < before + 50) await sleep(50);
    const outcomes = await load.stop();
    const failed = outcomes.filter((outcome) => outcome.failure !== undefined);
    t.comment(`run-local.sh roll: ${outcomes.length} requests (${summary(outcomes)}), ${failed.length} failed`);
    t.same(failed, [], 'no request failed: no 5xx, no reset, no answer outside the contract');
    t.same(await lostPets(call, load), [], `every one of the ${load.created.length} acknowledged pets is stored`);

    const logged = stack.output();
    t.match(logged, /"msg":"stopped: requests finished, database closed"/, 'each stopped instance says so');
    t.notMatch(logged, /"url":"\/readyz"/, "HAProxy's checks are not logged one by one");
    t.notMatch(logged, /"level":50/, 'nothing was logged as an error');
    const stateChanges = logged.split('\n').filter((line) => /Server instances\/instance\d is (DOWN|UP)/.test(line));
    t.ok(stateChanges.length >= 4, `each instance went DOWN and UP (${stateChanges.length} state changes)`);
    t.same(
      stateChanges.filter((line) => !line.startsWith('[WARNING]')),
      [],
      'each state change is written once (as a warning), not again as a log line',
    );

    stack.interrupt();
    t.equal(await stack.exited, 0, 'Ctrl-C stops the stack');
    t.notOk(existsSync(runDir), 'and removes its folder: pids, certificate and runtime API socket');
  },
);

t.test('deploy/run-local.sh cleans up after a failed start too', { skip: noHaproxy }, async (t) => {
  const runDir = join(temporaryDirectory(t), 'run');
  const stack = runLocal(t, {
    // Nothing listens there: the database cannot be created.
    DATABASE_URL: `postgres://postgres@127.0.0.1:${await freePort()}/petstore`,
    REDIS_URL: `redis://127.0.0.1:${await freePort()}`,
    PETSTORE_RUN_DIR: runDir,
  });
  t.not(await stack.exited, 0, stack.output());
  t.match(stack.output(), /could not create DATABASE_URL's database/);
  t.notOk(existsSync(runDir), 'its folder, with the certificate it made, is gone');
});
