// Two instances behind HAProxy (deploy/haproxy.cfg as shipped) on PostgreSQL and Redis, as
// deploy/run-local.sh starts them: clients reach them over HTTPS through the balancer only. Always
// on PostgreSQL, whatever PETSTORE_TEST_BACKEND says.
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Ajv2020 } from 'ajv/dist/2020.js';
import t from 'tap';
import { freePort } from '../scripts/local-servers.js';
import { projectRoot } from '../src/contract/paths.js';
import type { Teardown } from './helpers/api.js';
import { balancerClient, type Client, lostPets, SteadyLoad, summary, UUID } from './helpers/balancer-load.js';
import type { Contract } from '../src/contract/document.js';
import { contract, servedVersions } from './helpers/contract.js';
import {
  type Balancer,
  balancerCertificate,
  checkConfiguration,
  haproxyMissing,
  startBalancer,
} from './helpers/haproxy.js';
import { sharedPostgres } from './helpers/postgres.js';
import { databaseWithKey, type ServerProcess, startServerProcess } from './helpers/process.js';
import { redisMissing, startRedis } from './helpers/redis.js';

const noHaproxy = haproxyMissing();
const skip = noHaproxy || redisMissing();
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

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
  "deploy/haproxy.cfg: accepted as shipped, its errors each version's error body",
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

    // Each answer's body in each version's words: v1's Error, v2's Problem (test/v2-problems.test.ts
    // sees them answered, with their headers).
    const schemas = (served: Contract, name: string) =>
      new Ajv2020({ strict: false }).compile(served.dereferenced.components?.schemas?.[name] as object);
    const bodies = { v1: schemas(contract, 'Error'), v2: schemas(servedVersions.contract, 'Problem') };
    const codes = (contract.dereferenced.components?.schemas?.ErrorCode as { enum: string[] }).enum;
    const errors = join(projectRoot, 'deploy/errors');
    t.same(readdirSync(errors).sort(), ['502.map', '503.map', '504.map']);
    for (const file of readdirSync(errors)) {
      const status = Number(file.slice(0, 3));
      const lines = readFileSync(join(errors, file), 'utf8')
        .split('\n')
        .filter((line) => line !== '' && !line.startsWith('#'));
      const byVersion = Object.fromEntries(
        lines.map((line) => [line.slice(0, line.indexOf(' ')), line.slice(line.indexOf(' ') + 1)]),
      );
      t.same(Object.keys(byVersion), ['v1', 'v2'], `${file}: a body for each version`);
      for (const [version, isBody] of Object.entries(bodies)) {
        const body = JSON.parse(byVersion[version] ?? '') as {
          code: string;
          status: number;
          message?: string;
          detail?: string;
        };
        t.ok(isBody(body), `${file} ${version}: ${JSON.stringify(isBody.errors)}`);
        t.equal(body.status, status, `${file} ${version}: with its status`);
        t.ok(codes.includes(body.code), `${file} ${version}: and a code of ErrorCode's (${body.code})`);
        if (status !== 503) {
          // The instance may have carried the request out: a create retried without its key would be made twice.
          t.match(
            body.message ?? body.detail,
            /may or may not have been carried out.*Idempotency-Key/,
            `${file}: outcome unknown`,
          );
        }
      }
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
  'an instance that does not answer within PETSTORE_LB_SERVER_TIMEOUT: the 504 says the outcome is unknown',
  { skip },
  async (t) => {
    const deployment = await startDeployment(t, {}, { PETSTORE_LB_SERVER_TIMEOUT: '1s' });
    const call = balancerClient(t, deployment.balancer.origin, { key: deployment.key });
    // Frozen, as a hung instance is: the kernel still takes the request for it.
    for (const instance of deployment.instances) instance.child.kill('SIGSTOP');
    const answer = await call('POST', '/pets', { body: { name: 'Frozen', categoryId: 1 } });
    for (const instance of deployment.instances) instance.child.kill('SIGCONT');
    t.equal(answer.status, 504, 'an unkeyed create is not sent again: the instance may have made it');
    t.match(JSON.parse(answer.body), {
      code: 'service_unavailable',
      status: 504,
      message: /may or may not have been carried out.*Idempotency-Key/,
    });
    t.match(answer.headers['x-request-id'], UUID);
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
      "each failure is the balancer's 502 (deploy/errors/502.map) or a connection it closed unanswered",
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

t.test('behind the balancer, every request line of the instances names the client', { skip }, async (t) => {
  const deployment = await startDeployment(t);
  const call = balancerClient(t, deployment.balancer.origin, { key: deployment.key, from: '127.0.0.4' });
  const sent = 300;
  // Some at once, so that HAProxy's connections to the instances open and close under each other.
  for (let batch = 0; batch < sent / 10; batch += 1) {
    const answers = await Promise.all([
      ...Array.from({ length: 8 }, () => call('GET', '/pets')),
      call('GET', '/pets/999999'),
      call('POST', '/pets', { body: { name: 7 } }),
    ]);
    t.same(
      answers.map((answer) => answer.status),
      [...Array.from({ length: 8 }, () => 200), 404, 400],
    );
  }
  const requestLines = () =>
    deployment.instances
      .flatMap((instance) => instance.output().split('\n'))
      .filter((line) => line.startsWith('{'))
      .map((line) => JSON.parse(line) as { msg?: string; client?: string; url?: string })
      .filter((line) => line.msg === 'request' && line.url?.startsWith('/v1/pets') === true);
  // The instances' logs come through pipes: a line may follow its answer by a moment.
  for (let waited = 0; requestLines().length < sent && waited < 5000; waited += 50) await sleep(50);
  const lines = requestLines();
  t.equal(lines.length, sent, 'one line a request');
  t.same(
    lines.filter((line) => line.client !== '127.0.0.4'),
    [],
    "each names the client's address, though HAProxy closes its connection to the instance after each answer",
  );
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
    let balancer: Balancer | undefined;
    const burstOf = async (balancerEnv: Record<string, string>) => {
      const deployment = await startDeployment(t, {}, { PETSTORE_LB_MAXCONN: '1', ...balancerEnv });
      balancer = deployment.balancer;
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
    // No instance saw them: the operator's count is HAProxy's (docs/deploy.md, Metrics and logs).
    const metrics = (await balancer?.metrics()) ?? '';
    t.match(
      metrics,
      new RegExp(`^haproxy_backend_requests_denied_total\\{proxy="instances"\\} ${refused.length}$`, 'm'),
      "HAProxy's exporter counts every refusal",
    );
  },
);
