// deploy/run-local.sh run as docs/deploy.md gives it: the commands an operator types, on PostgreSQL,
// Redis and HAProxy (test/balancer.test.ts tests the configuration with the test's own processes).
import { execFileSync, spawn } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import t from 'tap';
import { databaseUrl, freePort, onServer } from '../scripts/local-servers.js';
import { projectRoot } from '../src/contract/paths.js';
import { temporaryDirectory, type Teardown } from './helpers/api.js';
import { balancerClient, type Client, lostPets, SteadyLoad, summary, UUID } from './helpers/balancer-load.js';
import { haproxyMissing } from './helpers/haproxy.js';
import { sharedPostgres } from './helpers/postgres.js';
import { redisMissing, startRedis } from './helpers/redis.js';

const noHaproxy = haproxyMissing();
const skip = noHaproxy || redisMissing();
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const LOAD_PER_SECOND = 20;
// A roll and as long again without one, on a machine with a core kept busy.
t.setTimeout(400_000);

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
    exitCode: () => child.exitCode ?? child.signalCode,
  };
}

/** A process of the test's own keeping one core busy, as another tenant of the machine would. */
function keepOneCoreBusy(t: Teardown): void {
  const busy = spawn(process.execPath, ['-e', 'for (;;) {}'], { stdio: 'ignore' });
  t.teardown(() => {
    busy.kill('SIGKILL');
  });
}

/** The servers of HAProxy's backend `instances` by state (UP, DRAIN, MAINT, DOWN, ...), from its stats page. */
async function serverStates(stats: string): Promise<Map<string, string>> {
  const csv = await (await fetch(`http://${stats}/stats;csv`)).text();
  const states = new Map<string, string>();
  for (const fields of csv.split('\n').map((line) => line.split(','))) {
    if (fields[0] === 'instances' && fields[1] !== 'BACKEND') states.set(fields[1] ?? '', fields[17] ?? '');
  }
  return states;
}

/** `load`'s outcomes while `during` runs (from a second into the load), and how long that took. */
async function loadWhile(call: Client, during: () => Promise<void>) {
  const load = new SteadyLoad(call, LOAD_PER_SECOND);
  load.start();
  await sleep(1000);
  const started = Date.now();
  await during();
  const ms = Date.now() - started;
  const outcomes = await load.stop();
  return { load, outcomes, ms, failed: outcomes.filter((outcome) => outcome.failure !== undefined) };
}

const TIMESTAMPED = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z /;
/** What an instance itself prints at its start (src/server.ts): its own, not the script's. */
const INSTANCE_BANNER =
  /^(Pet Store API at |No API keys existed|psk_| {2}(v\d+|docs|contract|rate limits|metrics|traces|a new key): | {2}curl )/;

t.test(
  'deploy/run-local.sh as docs/deploy.md gives it: creates the database, starts the stack, rolls every instance under load with a surge, never below two instances, and cleans up',
  { skip },
  async (t) => {
    const redis = await startRedis(t);
    // A database that does not exist yet, on the tests' server: the script creates it.
    const existing = await (await sharedPostgres()).newDatabase(t);
    const databaseName = `${new URL(existing).pathname.slice(1)}_deploy`;
    // With a password, which nothing the script prints may carry: the tests' server's own (an
    // embedded server asks for it), or one a server that trusts loopback ignores.
    const withPassword = new URL(databaseUrl(existing, databaseName));
    withPassword.password ||= 'do-not-print-this-password';
    const password = decodeURIComponent(withPassword.password);
    t.teardown(() =>
      onServer(databaseUrl(existing, 'postgres'), `DROP DATABASE IF EXISTS ${databaseName} WITH (FORCE)`),
    );
    const [lbPort, statsPort] = [await freePort(), await freePort()];
    const stats = `127.0.0.1:${statsPort}`;
    const runDir = join(temporaryDirectory(t), 'run');
    const where = {
      // The documented settings, on free loopback ports and a folder of the test's own.
      PETSTORE_INSTANCE_PORTS: `${await freePort()} ${await freePort()}`,
      PETSTORE_SURGE_PORTS: `${await freePort()} ${await freePort()}`,
      METRICS_PORT: '0',
      PETSTORE_LB_ADDRESS: `127.0.0.1:${lbPort}`,
      PETSTORE_LB_STATS: stats,
      PETSTORE_RUN_DIR: runDir,
    };
    const stack = runLocal(t, {
      DATABASE_URL: withPassword.href,
      REDIS_URL: redis.url,
      ...where,
      // What docs/deploy.md says a load test needs: one key is otherwise refused past 1,000 a minute.
      RATE_LIMIT_PER_MINUTE: '0',
      // No shedding: the tests share a busy machine (test/helpers/process.ts).
      OVERLOAD_MAX_EVENT_LOOP_DELAY_MS: '0',
    });
    const [, certificate = ''] = await stack.printed(/ run-local: balancer: \S+ \(certificate: (\S+),/m);
    t.match(stack.output(), `created the database ${databaseName}`);
    const [, key] = await stack.printed(/^(psk_\S+)$/m);
    const [curl = ''] = await stack.printed(/(?<=^ {2})curl .*$/m);
    t.equal(
      curl,
      `curl --cacert '${certificate}' -H 'Authorization: Bearer ${key}' https://127.0.0.1:${lbPort}/v2/pets`,
      "the development key's curl names the balancer and its certificate",
    );
    t.equal(
      execFileSync('bash', ['-c', `${curl} -s -o /dev/null -w '%{http_code}'`]).toString(),
      '200',
      'and works as printed',
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

    // A roll under a steady load, with one core kept busy; then the same load and busy core, as
    // long, without a roll. The roll may fail no more requests than the machine's load does alone.
    // The load is well within what one instance serves on a busy machine: past it, the balancer's
    // overload rule would refuse requests (docs/deploy.md), which is not what this test is about.
    keepOneCoreBusy(t);
    let fewestUp = Infinity;
    const rolled = await loadWhile(call, async () => {
      const roll = runLocal(t, { PETSTORE_RUN_DIR: runDir }, ['roll']);
      while (roll.exitCode() === null) {
        // In rotation: UP, or UP 1/2 (a check failed, on a busy machine; still sent requests).
        // Not DRAIN, nor MAINT.
        const up = [...(await serverStates(stats)).values()].filter((state) => state.startsWith('UP')).length;
        fewestUp = Math.min(fewestUp, up);
        await sleep(100);
      }
      t.equal(await roll.exited, 0, roll.output());
      t.match(
        roll.output(),
        /instance1 \(pid \d+, spare1\): in rotation, the old one draining\n[^]*instance2 \(pid \d+, spare2\): in rotation/,
      );
    });
    t.equal(
      fewestUp,
      2,
      'never fewer than the two instances configured in rotation, the new one UP before the old drains',
    );
    const alone = await loadWhile(call, async () => {
      await sleep(rolled.ms);
    });
    t.comment(
      `run-local.sh roll, one core busy: ${rolled.outcomes.length} requests in ${(rolled.ms / 1000).toFixed(1)} s (${summary(rolled.outcomes)}), ${rolled.failed.length} failed; ` +
        `the same without a roll: ${alone.outcomes.length} requests, ${alone.failed.length} failed`,
    );
    t.ok(
      rolled.failed.length <= alone.failed.length,
      `a roll fails no more requests than the load alone (${rolled.failed.length} and ${alone.failed.length}): ${JSON.stringify(rolled.failed.slice(0, 3))}`,
    );
    t.same(
      await lostPets(call, rolled.load),
      [],
      `every one of the ${rolled.load.created.length} acknowledged pets is stored`,
    );
    t.same(
      Object.fromEntries(await serverStates(stats)),
      { instance1: 'MAINT', instance2: 'MAINT', spare1: 'UP', spare2: 'UP', spare3: 'MAINT', spare4: 'MAINT' },
      'the replacements serve from the spare slots; the old slots are out of rotation',
    );
    // A crash: its supervisor starts it again; bash's line for it names no setting.
    const crashed = readFileSync(join(runDir, 'instance1.pid'), 'utf8').trim();
    process.kill(Number(crashed), 'SIGKILL');
    await stack.printed(new RegExp(`instance1 \\(pid ${crashed}\\) exited \\(137\\); starting it again`));
    await stack.printed(new RegExp(`${crashed} Killed`));

    const logged = stack.output();
    t.notMatch(logged, password, 'no line carries the database password');
    t.notMatch(logged, /(HOST|PORT|PUBLIC_URL|TRUST_PROXY|REDIS_URL)=/, 'nor any setting the instances are given');
    t.match(
      logged,
      new RegExp(`${crashed} Killed +run_instance "\\$n" "\\$\\w+" "\\$\\w+"\n`),
      "bash's line names the call",
    );
    const lines = logged.split('\n').filter((line) => line !== '');
    t.same(
      lines.filter((line) => !line.startsWith('{') && !INSTANCE_BANNER.test(line) && !TIMESTAMPED.test(line)),
      [],
      "every line of the script's and HAProxy's starts with a timestamp (the instances' are JSON with theirs)",
    );
    t.match(logged, /"msg":"stopped: requests finished, database closed"/, 'each stopped instance says so');
    t.notMatch(logged, /"url":"\/readyz"/, "HAProxy's checks are not logged one by one");
    t.notMatch(logged, /"level":50/, 'nothing was logged as an error');
    const stateChanges = lines.filter((line) => /Server instances\/\w+ is (DOWN|UP)/.test(line));
    t.ok(stateChanges.length >= 2, `the spares came UP (${stateChanges.length} state changes)`);
    t.same(
      stateChanges.filter((line) => !line.replace(TIMESTAMPED, '').startsWith('[WARNING]')),
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
