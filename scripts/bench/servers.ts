/**
 * The servers the bench runs, each a child process: the project started as production starts it
 * (logs at info to /dev/null, metrics on a port of its own) but with rate limits off, and the bare
 * reference (bare.ts); a spec's `env` overrides these.
 */
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { freePort } from '../local-servers.js';
import { projectRoot } from './settings.js';
import type { Table } from './tables.js';

export interface ServerSpec {
  /** As the report names it. */
  name: string;
  /** The script node runs, from the project's root. */
  entry: string;
  env?: Record<string, string>;
}

export const PROJECT: ServerSpec = { name: 'project', entry: 'dist/src/server.js' };
export const BARE: ServerSpec = { name: 'bare', entry: 'dist/scripts/bench/bare.js' };

export interface RunningServer {
  pid: number;
  origin: string;
  /** From spawning the process to its first 200 on an authenticated request. */
  startupMs: number;
  /** The highest resident set size so far (VmHWM), in MB. */
  peakRssMb: () => number;
  /** CPU time the process has used (user + system, all threads), in ms. */
  cpuMs: () => number;
}

/** How costs.ts runs a server: node under valgrind (`launcher`). */
export interface StartOptions {
  launcher?: string[];
  startupLimitMs?: number;
}

/** Linux counts CPU time in ticks of 1/100 s (`getconf CLK_TCK`). */
const MS_PER_TICK = 10;

/** utime + stime: fields 14 and 15 of /proc/<pid>/stat (proc(5)), counted after the command name. */
function cpuMsOf(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(fields[11]) + Number(fields[12])) * MS_PER_TICK;
}

function peakRssMbOf(pid: number): number {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  return Number(/^VmHWM:\s+(\d+) kB/m.exec(status)?.[1] ?? NaN) / 1024;
}

/** Runs a server on a fresh copy of `table` (in `dir`) for as long as `use` takes, then SIGTERM. */
export async function withServer<T>(
  spec: ServerSpec,
  table: Table,
  dir: string,
  use: (server: RunningServer) => Promise<T>,
  { launcher = [], startupLimitMs = 20_000 }: StartOptions = {},
): Promise<T> {
  const database = await table.freshCopy(dir);
  const port = await freePort();
  const origin = `http://127.0.0.1:${port}`;
  const [command, ...args] = [...launcher, process.execPath, join(projectRoot, spec.entry)];
  const spawnedAt = performance.now();
  const child = spawn(command, args, {
    env: {
      ...process.env,
      NODE_ENV: 'production',
      HOST: '127.0.0.1',
      PORT: String(port),
      DATABASE_URL: database,
      LOG_LEVEL: 'info',
      RATE_LIMIT_PER_MINUTE: '0',
      AUTH_FAILURES_PER_MINUTE: '0',
      METRICS_PORT: String(await freePort()),
      BARE_API_KEY: table.key,
      ...spec.env,
    },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let stderr = '';
  child.stderr.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
  const exited = new Promise((resolve) => child.once('exit', resolve));
  try {
    const pid = child.pid ?? NaN;
    const headers = { authorization: `Bearer ${table.key}` };
    for (;;) {
      if (child.exitCode !== null) throw new Error(`${spec.name} server exited while starting: ${stderr}`);
      if (performance.now() - spawnedAt > startupLimitMs)
        throw new Error(`${spec.name} server gave no 200 within ${startupLimitMs} ms: ${stderr}`);
      const status = await fetch(`${origin}/v2/pets?limit=1`, { headers }).then(
        async (response) => {
          await response.arrayBuffer();
          return response.status;
        },
        () => undefined,
      );
      if (status === 200) break;
      // A 503 says "not yet" (overload protection sheds while a fresh process is still compiling).
      if (status !== undefined && status !== 503)
        throw new Error(`${spec.name} server answered ${status} to an authenticated request`);
      await sleep(2);
    }
    const startupMs = performance.now() - spawnedAt;
    return await use({ pid, origin, startupMs, peakRssMb: () => peakRssMbOf(pid), cpuMs: () => cpuMsOf(pid) });
  } finally {
    child.kill('SIGTERM');
    const timer = setTimeout(() => child.kill('SIGKILL'), 10_000);
    await exited;
    clearTimeout(timer);
  }
}
