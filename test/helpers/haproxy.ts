import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { HAPROXY_CONFIG, HAPROXY_MISSING, haproxyBinary, requireHaproxy } from '../../scripts/haproxy.js';
import { freePort } from '../../scripts/local-servers.js';
import { projectRoot } from '../../src/contract/paths.js';
import { temporaryDirectory, type Teardown } from './api.js';

export { HAPROXY_CONFIG };

/** The test certificate (test/fixtures/tls), for `localhost` and 127.0.0.1. */
export const TEST_CERT_FILE = join(projectRoot, 'test/fixtures/tls/localhost-cert.pem');
const TEST_KEY_FILE = join(projectRoot, 'test/fixtures/tls/localhost-key.pem');

/** Why a balancer test cannot run here (for tap's `skip`), or false; under CI always false, so it fails. */
export function haproxyMissing(): string | false {
  if (process.env.CI !== undefined && process.env.CI !== '') return false;
  return haproxyBinary() === undefined ? HAPROXY_MISSING : false;
}

/** HAProxy's certificate file: the certificate, then its key, in one PEM file. */
export function balancerCertificate(t: Teardown): string {
  const file = join(temporaryDirectory(t), 'balancer.pem');
  writeFileSync(file, readFileSync(TEST_CERT_FILE, 'utf8') + readFileSync(TEST_KEY_FILE, 'utf8'));
  return file;
}

/**
 * `haproxy -c -f deploy/haproxy.cfg` with these settings: its exit code and what it said. Run from
 * elsewhere than the repository, as an operator's HAProxy is: the file's paths are its folder's.
 */
export function checkConfiguration(env: Record<string, string>): { code: number | null; output: string } {
  const result = spawnSync(requireHaproxy(), ['-c', '-f', HAPROXY_CONFIG], {
    cwd: tmpdir(),
    env: { ...process.env, ...env },
    encoding: 'utf8',
  });
  return { code: result.status, output: `${result.stdout}${result.stderr}` };
}

export interface Balancer {
  /** Where clients connect: https://127.0.0.1:<port> */
  origin: string;
  /** The state HAProxy's health checks give each instance now: instance1 -> UP, DOWN, ... */
  states(): Promise<Map<string, string>>;
  /** Resolves once HAProxy's health checks give `server` this state (UP once it answers /readyz). */
  waitFor(server: string, state: 'UP' | 'DOWN'): Promise<void>;
  /** Everything HAProxy logged (one line per request). */
  output(): string;
  /** HAProxy's own Prometheus metrics (its exporter, at PETSTORE_LB_STATS/metrics). */
  metrics(): Promise<string>;
}

/**
 * deploy/haproxy.cfg in front of `instances` (host:port each), on free loopback ports, stopped at
 * teardown. Resolves once HAProxy's checks give every instance the state `expect`.
 */
export async function startBalancer(
  t: Teardown,
  instances: string[],
  { env = {}, expect = 'UP' }: { env?: Record<string, string>; expect?: 'UP' | 'DOWN' } = {},
) {
  const [port, statsPort] = [await freePort(), await freePort()];
  // Its own runtime API socket, not the shared default in /tmp.
  const adminSocket = join(temporaryDirectory(t), 'admin.sock');
  const settings: Record<string, string> = {
    PETSTORE_LB_CERT: balancerCertificate(t),
    PETSTORE_LB_ADMIN_SOCKET: adminSocket,
    PETSTORE_LB_ADDRESS: `127.0.0.1:${port}`,
    PETSTORE_LB_STATS: `127.0.0.1:${statsPort}`,
    ...Object.fromEntries(instances.map((address, i) => [`PETSTORE_INSTANCE_${i + 1}`, address])),
    ...env,
  };
  const child: ChildProcess = spawn(requireHaproxy(), ['-db', '-f', HAPROXY_CONFIG], {
    cwd: tmpdir(),
    env: { ...process.env, ...settings },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  child.stdout?.on('data', (chunk: Buffer) => (output += chunk.toString()));
  child.stderr?.on('data', (chunk: Buffer) => (output += chunk.toString()));
  t.teardown(async () => {
    if (child.exitCode !== null) return;
    const exited = new Promise((resolve) => child.once('exit', resolve));
    child.kill('SIGTERM');
    await exited;
  });

  // The stats page's CSV: one row per server, its name in column 2 and its check state in 18.
  const serverRows = async () => {
    const csv = await (await fetch(`http://127.0.0.1:${statsPort}/stats;csv`)).text();
    return csv
      .split('\n')
      .map((line) => line.split(','))
      .filter((row) => row[0] === 'instances');
  };
  const states = async () => new Map((await serverRows()).map((row) => [row[1] ?? '', row[17] ?? '']));
  const waitFor = async (server: string, state: 'UP' | 'DOWN') => {
    const deadline = Date.now() + 15_000;
    for (;;) {
      if (child.exitCode !== null) throw new Error(`haproxy exited ${child.exitCode}: ${output}`);
      const now = await states().catch(() => new Map<string, string>());
      if (now.get(server) === state) return;
      if (Date.now() > deadline) throw new Error(`${server} not ${state} within 15 s (${now.get(server)}): ${output}`);
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  };
  for (let i = 1; i <= instances.length; i += 1) await waitFor(`instance${i}`, expect);
  return {
    origin: `https://127.0.0.1:${port}`,
    states,
    metrics: async () => (await fetch(`http://127.0.0.1:${statsPort}/metrics`)).text(),
    waitFor,
    output: () => output,
  } satisfies Balancer;
}
