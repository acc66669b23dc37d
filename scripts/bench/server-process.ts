import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { projectRoot } from '../../src/paths.js';
import { freePort } from '../local-servers.js';
import { send } from './http.js';

export type ServerKind = 'project' | 'baseline';

/** A server to run: which program, named for the report, with settings of its own. */
export interface ServerSpec {
  name: string;
  kind: ServerKind;
  env?: Record<string, string>;
}

export const PROJECT: ServerSpec = { name: 'project', kind: 'project' };
export const BASELINE: ServerSpec = { name: 'baseline', kind: 'baseline' };

const ENTRY: Record<ServerKind, string> = {
  project: join(projectRoot, 'dist/src/server.js'),
  baseline: join(projectRoot, 'dist/scripts/bench/baseline.js'),
};

const STARTUP_LIMIT_MS = 20_000;
const POLL_INTERVAL_MS = 2;
/** Linux counts CPU time in ticks of 1/100 s (`getconf CLK_TCK`). */
const MS_PER_TICK = 10;

export interface StartOptions {
  /** DATABASE_URL: a SQLite file or a postgres:// URL. */
  database: string;
  /** A valid API key in that database: the first 200 is an authenticated request. */
  key: string;
  /** Extra node flags, e.g. --perf-basic-prof. */
  nodeFlags?: string[];
  /** A command to run node under, with its options (e.g. valgrind's). */
  launcher?: string[];
  /** How long the server may take to its first 200 (default 20 s). */
  startupLimitMs?: number;
}

export interface Memory {
  /** Resident set size now (VmRSS), in MB. */
  rssMb: number;
  /** The highest resident set size so far (VmHWM), in MB. */
  peakRssMb: number;
}

export interface RunningServer {
  spec: ServerSpec;
  pid: number;
  origin: string;
  /** From spawning the process to the first 200 on an authenticated request. */
  startupMs: number;
  memory(): Memory;
  /** CPU time the process has used (user + system, all threads), in milliseconds. */
  cpuMs(): number;
  /** SIGTERM (the server shuts down gracefully) and wait for the exit. */
  stop(): Promise<void>;
}

function memoryOf(pid: number): Memory {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const megabytes = (field: string) =>
    Number(new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(status)?.[1] ?? NaN) / 1024;
  return { rssMb: megabytes('VmRSS'), peakRssMb: megabytes('VmHWM') };
}

/** utime + stime from /proc/<pid>/stat (fields 14 and 15 in proc(5), after the command name). */
function cpuMsOf(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(fields[11]) + Number(fields[12])) * MS_PER_TICK;
}

/**
 * Starts a server as production does: its own process, logging at info to /dev/null (so the log
 * lines are still built and written), rate limits off so the load is not answered with 429s, and
 * metrics on a free port of its own (two servers run at once); `spec.env` overrides any of it.
 */
export async function startServer(
  spec: ServerSpec,
  { database, key, nodeFlags = [], launcher = [], startupLimitMs = STARTUP_LIMIT_MS }: StartOptions,
): Promise<RunningServer> {
  const port = await freePort();
  const origin = `http://127.0.0.1:${port}`;
  const spawnedAt = performance.now();
  const nodeArgs = [...nodeFlags, ENTRY[spec.kind]];
  const [launcherCommand, ...launcherArgs] = launcher;
  const command = launcherCommand ?? process.execPath;
  const args = launcherCommand === undefined ? nodeArgs : [...launcherArgs, process.execPath, ...nodeArgs];
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
      ...spec.env,
    },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let stderr = '';
  child.stderr.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const { pid } = child;
  if (pid === undefined) throw new Error(`${spec.name} server could not be spawned`);

  const probe = { method: 'GET', path: '/v1/pets?limit=1', headers: { authorization: `Bearer ${key}` } } as const;
  let startupMs: number | undefined;
  while (startupMs === undefined) {
    if (child.exitCode !== null) throw new Error(`${spec.name} server exited while starting: ${stderr}`);
    if (performance.now() - spawnedAt > startupLimitMs) {
      child.kill('SIGKILL');
      throw new Error(`${spec.name} server gave no 200 within ${startupLimitMs} ms: ${stderr}`);
    }
    const status = await send(origin, probe, true).then(
      (response) => response.status,
      () => undefined,
    );
    if (status === 200) startupMs = performance.now() - spawnedAt;
    // A 503 says "not yet" (overload protection sheds while a fresh process is still compiling).
    else if (status !== undefined && status !== 503) {
      child.kill('SIGKILL');
      throw new Error(`${spec.name} server answered ${status} to an authenticated request`);
    } else await sleep(POLL_INTERVAL_MS);
  }

  return {
    spec,
    pid,
    origin,
    startupMs,
    memory: () => memoryOf(pid),
    cpuMs: () => cpuMsOf(pid),
    stop: async () => {
      child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), 10_000);
      await exited;
      clearTimeout(timer);
    },
  };
}
