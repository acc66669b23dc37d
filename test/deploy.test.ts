// deploy/run-local.sh run as docs/deploy.md gives it: the commands an operator types, on PostgreSQL,
// Redis and HAProxy (test/balancer.test.ts tests the configuration with the test's own processes).
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import t from 'tap';
import { databaseUrl, freePort, onServer } from '../scripts/local-servers.js';
import { projectRoot } from '../src/contract/paths.js';
import { temporaryDirectory, type Teardown } from './helpers/api.js';
import { balancerClient, lostPets, SteadyLoad, summary, UUID } from './helpers/balancer-load.js';
import { haproxyMissing } from './helpers/haproxy.js';
import { sharedPostgres } from './helpers/postgres.js';
import { redisMissing, startRedis } from './helpers/redis.js';

const noHaproxy = haproxyMissing();
const skip = noHaproxy || redisMissing();
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const LOAD_PER_SECOND = 20;

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

    // Well within what one instance serves on a busy machine: past it, the balancer's overload
    // rule would refuse requests (docs/deploy.md), which is not what this test is about.
    const load = new SteadyLoad(call, LOAD_PER_SECOND);
    load.start();
    await sleep(1000);
    const roll = runLocal(t, { PETSTORE_RUN_DIR: runDir }, ['roll']);
    t.equal(await roll.exited, 0, roll.output());
    t.match(roll.output(), /instance1 \(pid \d+\): back in rotation\n[^]*instance2 \(pid \d+\): back in rotation/);
    const before = load.outcomes.length;
    while (load.outcomes.length < before + LOAD_PER_SECOND) await sleep(50);
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
