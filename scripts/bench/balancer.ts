/**
 * Behind the balancer (issue 28, item 3): deploy/haproxy.cfg as shipped (its plain-HTTP listener
 * added) in front of two instances, each on its own copy of the 10k SQLite table. The same
 * measures as overload.ts: a burst of 500 at once on the idle pair, and get-one held at half and
 * twice the pair's closed-loop capacity, through the balancer. HAProxy, both instances and the
 * load generator share the machine's cores.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { HAPROXY_CONFIG, requireHaproxy } from '../haproxy.js';
import { freePort } from '../local-servers.js';
import { burst } from './load.js';
import { burstOutcome, holdLoad, loadHeldRows, loadSeconds, sustainedCheck } from './overload.js';
import { check, ms, type Part } from './report.js';
import { scenarioNamed, wireRequest } from './scenarios.js';
import { PROJECT, type RunningServer, withServer } from './servers.js';
import { projectRoot } from './settings.js';
import type { Table } from './tables.js';

const BURST_SIZE = 500;
/** How long HAProxy may take to see both instances answer /readyz. */
const READY_LIMIT_MS = 15_000;

/** HAProxy on the shipped configuration in front of `instances`, for as long as `use` takes. */
async function withBalancer<T>(dir: string, instances: RunningServer[], use: (origin: string) => Promise<T>) {
  const certificate = join(dir, 'balancer.pem');
  const tls = join(projectRoot, 'test/fixtures/tls');
  writeFileSync(
    certificate,
    readFileSync(join(tls, 'localhost-cert.pem'), 'utf8') + readFileSync(join(tls, 'localhost-key.pem'), 'utf8'),
  );
  const origin = `http://127.0.0.1:${await freePort()}`;
  const child: ChildProcess = spawn(requireHaproxy(), ['-db', '-f', HAPROXY_CONFIG], {
    cwd: projectRoot,
    // The deployment's own PETSTORE_LB_* settings (a queue timeout to try, say) pass through.
    env: {
      ...process.env,
      PETSTORE_LB_CERT: certificate,
      PETSTORE_LB_ADDRESS: `127.0.0.1:${await freePort()}`,
      PETSTORE_LB_HTTP_ADDRESS: new URL(origin).host,
      PETSTORE_LB_STATS: `127.0.0.1:${await freePort()}`,
      PETSTORE_LB_ADMIN_SOCKET: join(dir, 'haproxy.sock'),
      ...Object.fromEntries(
        instances.map((instance, i) => [`PETSTORE_INSTANCE_${i + 1}`, new URL(instance.origin).host]),
      ),
    },
    // One log line per request would cost as much as the requests: not read.
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let stderr = '';
  child.stderr?.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk.slice(0, 10_000)));
  const exited = new Promise((resolve) => child.once('exit', resolve));
  try {
    // Both instances in rotation: alternate requests reach each, as leastconn sends them.
    const deadline = performance.now() + READY_LIMIT_MS;
    for (let answered = 0; answered < 20;) {
      if (child.exitCode !== null) throw new Error(`haproxy exited ${child.exitCode}: ${stderr}`);
      if (performance.now() > deadline) throw new Error(`haproxy did not serve /readyz within 15 s: ${stderr}`);
      const status = await fetch(`${origin}/readyz`).then(
        (response) => response.status,
        () => 0,
      );
      answered = status === 200 ? answered + 1 : 0;
      if (status !== 200) await sleep(100);
    }
    await sleep(2_000); // a health check round on each, so neither is still rising
    return await use(origin);
  } finally {
    if (child.exitCode === null) child.kill('SIGTERM');
    await exited;
  }
}

export async function balancerPart(
  table: Table,
  dir: string,
  { seconds, warmupSeconds }: { seconds: number; warmupSeconds: number },
): Promise<Part> {
  const time = loadSeconds(seconds);
  for (const instance of ['instance1', 'instance2']) mkdirSync(join(dir, instance), { recursive: true });
  const queueTimeout = process.env.PETSTORE_LB_QUEUE_TIMEOUT ?? 'as shipped';
  const maxconn = process.env.PETSTORE_LB_MAXCONN ?? 'as shipped';
  return withServer(PROJECT, table, join(dir, 'instance1'), (one) =>
    withServer(PROJECT, table, join(dir, 'instance2'), (two) =>
      withBalancer(dir, [one, two], async (origin) => {
        const bursts = [];
        for (const name of ['get-one', 'create']) {
          const scenario = scenarioNamed(name);
          const started = performance.now();
          const answers = await burst(origin, () => wireRequest(scenario, table, { close: true }), BURST_SIZE);
          bursts.push({ name, ...burstOutcome(answers), ms: performance.now() - started });
          await sleep(1_000);
        }
        const results = await holdLoad('two instances behind HAProxy', origin, table, { seconds: time, warmupSeconds });
        const [half, twice] = results;
        const halfP99 = half?.servedP99Ms ?? NaN;
        const subject = `get-one through HAProxy (queue timeout ${queueTimeout}, maxconn ${maxconn})`;
        const shed = bursts.reduce((sum, one) => sum + one.shed, 0);
        return {
          name: 'balancer',
          rows: [],
          lines: [
            `Behind the balancer: deploy/haproxy.cfg (queue timeout ${queueTimeout}, maxconn ${maxconn} an instance) in front`,
            'of two instances at their defaults, over plain HTTP; HAProxy, the instances and the generator share the cores.',
            `Bursts of ${BURST_SIZE} at once on the idle pair: ${bursts
              .map(
                (one) => `${one.name} ${one.served} served, ${one.shed} shed, ${one.failed} failed in ${ms(one.ms)} ms`,
              )
              .join('; ')}.`,
            `Load held as above, through the balancer, ${time} s a load:`,
            loadHeldRows(results),
          ],
          checks: [
            sustainedCheck(subject, halfP99, twice?.secondHalfP99Ms ?? NaN),
            check(
              `a burst of ${BURST_SIZE} through the balancer: no 503`,
              'get-one and create on the idle pair',
              `${shed} shed`,
              shed === 0,
            ),
            check(
              'under overload, every request served or shed as 503, nothing else',
              subject,
              `${twice?.failed ?? NaN} failed otherwise`,
              twice?.failed === 0,
            ),
          ],
        };
      }),
    ),
  );
}
